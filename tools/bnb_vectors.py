#!/usr/bin/python3
"""Known-answer vectors for gpumem's bitsandbytes codecs (NF4, NF4 with double
quantization, int8 per-row absmax): tests/data/weights/bnb_vectors.txt.

HOW THESE VECTORS WERE MADE. bitsandbytes itself could not be run here: PyPI
is unreachable from the build machine, no Debian package exists, and
`import bitsandbytes` fails. So this script is an independent
re-implementation, in float32 torch (1.13) and numpy, of what bitsandbytes'
own code does, written from reading its source (bitsandbytes-foundation/
bitsandbytes: csrc/cuda/blockwise_quantization.cu's kQuantizeBlockwise,
dQuantizeNF4 and dQuantize; bitsandbytes/functional.py's quantize_4bit,
quantize_blockwise, create_dynamic_map; bitsandbytes/backends/default/ops.py's
int8_vectorwise_quant and int8_vectorwise_dequant). The vectors therefore say
what we read bitsandbytes to do, not what a run of it printed; where its
backends disagree, the rule chosen is named below and the number of cases
where the others would differ is printed in the file's header.

Rules (float32 throughout, each operation rounded once):
  NF4 (quantize_4bit, quant_type="nf4", blocksize=64), as the CUDA kernel:
    absmax = max |x| over the block's valid values; inv = 1 / absmax;
    code = dQuantizeNF4(x * inv), a decision tree over 15 float thresholds
    (midpoints of the NF4 table), each taken with ">" so a value exactly on a
    threshold gets the lower code, and a NaN (0 * inf in an all-zero block)
    gets code 0; two codes per byte, the first value in the high nibble. An
    odd count pads the last byte's low nibble with the code of 0 * inv.
    Dequantize: NF4[code] * absmax.
    (bitsandbytes' CPU/default backend instead takes argmin |x*inv - NF4[i]|
    in float32; the header counts the values where that differs.)
  Double quantization (compress_statistics=True): offset = mean of the
    absmaxes (here: the float64 mean rounded to float32; torch takes a float32
    mean whose last bit depends on the reduction order of the device);
    d = absmax - offset; in blocks of 256, absmax2 = max |d|, inv2 = 1 /
    absmax2, code8 = dQuantize<0>(dynamic map, d * inv2), the CUDA kernel's
    7-step binary search plus midpoint test. Dequantize: absmax' =
    map[code8] * absmax2 + offset (two roundings), then NF4[code] * absmax'.
    The dynamic map is create_dynamic_map(signed=True, 7, 8) with torch 2's
    float32 linspace (see linspace_f32: torch 1.13's differs in 42 values by
    an ulp or two), written to the file.
  int8 (int8_vectorwise_quant, threshold 0, default torch backend, which is
    the only one that takes float32 rows): absmax = max |x| of the row;
    scale = (1 / absmax) * 127 (torch's 127.0 / t is t.reciprocal() * 127);
    q = round-half-even(x * scale); an all-zero row gives NaN there, which
    bitsandbytes' conversions turn into 0 (CPU and CUDA), so q = 0.
    Dequantize (int8_vectorwise_dequant): q * absmax * 7.874015718698502e-3
    (float32, left to right).

Run: /usr/bin/python3 tools/bnb_vectors.py > tests/data/weights/bnb_vectors.txt

Output lines "<kind> <case> <hex>" (little-endian), '#' lines are comments:
  dynamic_map -      256 float32, the 8-bit map double quantization uses
  nf4_case NAME N    an NF4 case of N values
  nf4_input          N float32
  nf4_packed         (N + 1) / 2 bytes
  nf4_absmax         one float32 per 64 values
  nf4_dequant        N float32 (cases up to 4096 values)
  dq_absmax_q        one byte per 64 values: the 8-bit absmax codes
  dq_absmax2         one float32 per 256 absmaxes
  dq_offset          one float32
  dq_dequant         N float32 (cases up to 4096 values)
  int8_case NAME R C an int8 case of R rows of C values
  int8_input         R*C float32, row-major
  int8_q             R*C int8
  int8_absmax        R float32
  int8_dequant       R*C float32
"""
import sys
from fractions import Fraction

import numpy as np
import torch

F32 = np.float32

# The NF4 table, as published in the QLoRA paper (Dettmers et al. 2023,
# appendix E) and in bitsandbytes' source (dDequantizeNF4).
NF4 = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=F32)
# dQuantizeNF4's thresholds, in increasing order: the tree's constants, float
# literals in bitsandbytes' C++/CUDA ("0.8614784181118011f"), which the
# compiler rounds from the decimal straight to float32. Going through a
# double first would round 4 of them the other way: each is the exact
# midpoint of two table values, a float32 tie, and the printed decimal lies
# just to one side of it.
THRESH_DECIMALS = [
    "-0.8480964004993439", "-0.6106329262256622", "-0.4599952697753906", "-0.33967943489551544",
    "-0.23460740596055984", "-0.13791173323988914", "-0.045525018125772476", "0.03979014977812767",
    "0.1202552504837513", "0.2035212516784668", "0.2920137718319893", "0.3893125355243683",
    "0.5016634166240692", "0.6427869200706482", "0.8614784181118011"]


def decimal_to_f32(text):
    # Correct rounding of a decimal to float32 (nearest, ties to even).
    exact = Fraction(text)
    guess = F32(float(exact))
    best = None
    for c in (np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))):
        err = abs(Fraction(float(c)) - exact)
        even = int(np.array(c, dtype=F32).view(np.uint32)) % 2 == 0
        if best is None or err < best[0] or (err == best[0] and even):
            best = (err, c)
    return best[1]


THRESH = np.array([decimal_to_f32(t) for t in THRESH_DECIMALS], dtype=F32)
# The table's decimals are float32 values printed exactly enough that both
# roundings agree; check it.
assert all(decimal_to_f32(repr(float(c))) == c for c in NF4)


def linspace_f32(start, end, steps):
    # torch.linspace(start, end, steps) in float32 as torch 2 computes it on
    # the CPU: a float32 step (end - start) / (steps - 1), each value
    # accumulated in double (float's CPU accumulate type) from the nearer
    # end, then rounded to float32. torch 1.13 (installed here) rounds each
    # product to float32 instead, and 42 of the map's values come out 1 or 2
    # ulps away; the torch 2 values are those that bitsandbytes' map is
    # known by (the same 256 floats appear, dumped from bitsandbytes, in
    # several public ports of it).
    s, e = F32(start), F32(end)
    step = F32((e - s) / F32(steps - 1))
    half = steps // 2
    out = []
    for i in range(steps):
        if i < half:
            out.append(F32(float(s) + float(step) * i))
        else:
            out.append(F32(float(e) - float(step) * (steps - i - 1)))
    return np.array(out, dtype=F32)


def create_dynamic_map():
    # create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    # for exponent i = 0..6, 2^i fraction values, the means of consecutive
    # points of linspace(0.1, 1, 2^i + 1), scaled by 10^(i - 6) (a float32
    # multiply), both signs; then 0 and 1, sorted.
    data = []
    for i in range(7):
        boundaries = linspace_f32(0.1, 1, 2**i + 1)
        means = ((boundaries[:-1] + boundaries[1:]) / F32(2.0)).astype(F32)
        scale = F32(10.0 ** (-6 + i))
        data += list((scale * means).astype(F32))
        data += list((-(scale * means)).astype(F32))
    data.append(F32(0))
    data.append(F32(1.0))
    assert len(data) == 256
    data.sort()
    return np.array(data, dtype=F32)


DYN = create_dynamic_map()
DQ_TIE_HITS = 0
DYN_MIDS = set(F32((DYN[k] + DYN[k + 1]) * F32(0.5)) for k in range(255))


def nf4_tree(s):
    # The decision tree is a monotone partition: its code is the number of
    # thresholds s lies strictly above. NaN lies above none.
    return (s[:, None] > THRESH[None, :]).sum(axis=1).astype(np.uint8)


def nf4_argmin(s):
    # bitsandbytes' default (CPU) backend: argmin |clamp(s) - NF4| in float32,
    # first index on ties; torch.argmin returns a NaN's index, 0 here.
    t = torch.clamp(torch.from_numpy(s.copy()), -1, 1)
    return torch.argmin(torch.abs(t[:, None] - torch.from_numpy(NF4)[None, :]), dim=-1).numpy().astype(np.uint8)


def dquantize8(x):
    # kQuantizeBlockwise's dQuantize<0>(code, 0, x), float32.
    code = DYN
    pivot, upper_pivot, lower_pivot = 127, 255, 0
    lower, upper = F32(-1.0), F32(1.0)
    val = code[pivot]
    i = 64
    while i > 0:
        if x > val:
            lower_pivot, lower = pivot, val
            pivot += i
        else:
            upper_pivot, upper = pivot, val
            pivot -= i
        val = code[pivot]
        i >>= 1
    if upper_pivot == 255:
        upper = code[upper_pivot]
    if lower_pivot == 0:
        lower = code[lower_pivot]
    if x > val:
        mid = F32((upper + val) * F32(0.5))
        return upper_pivot if x > mid else pivot
    mid = F32((lower + val) * F32(0.5))
    return lower_pivot if x < mid else pivot


def quantize8_argmin(s):
    t = torch.from_numpy(s.copy())
    return torch.argmin(torch.abs(t[:, None] - torch.from_numpy(DYN)[None, :]), dim=-1).numpy()


def nf4(x):
    n = len(x)
    blocks = (n + 63) // 64
    absmax = np.zeros(blocks, dtype=F32)
    s = np.zeros(n + (n & 1), dtype=F32)
    with np.errstate(all="ignore"):
        for b in range(blocks):
            v = x[64 * b:64 * b + 64]
            absmax[b] = np.max(np.abs(v))
            inv = F32(1) / absmax[b]
            s[64 * b:64 * b + len(v)] = v * inv
            if n & 1 and b == blocks - 1:
                s[n] = F32(0) * inv  # the kernel's padding lane loads 0
    codes = nf4_tree(s)
    alt = nf4_argmin(s)
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    return codes[:n], packed, absmax, int(np.sum(codes[:n] != alt[:n]))


def double_quant(absmax):
    offset = F32(np.mean(absmax.astype(np.float64)))
    torch_mean = F32(torch.from_numpy(absmax).mean().item())
    d = (absmax - offset).astype(F32)
    nb = (len(d) + 255) // 256
    a2 = np.zeros(nb, dtype=F32)
    q = np.zeros(len(d), dtype=np.uint8)
    differ = 0
    with np.errstate(all="ignore"):
        for b in range(nb):
            v = d[256 * b:256 * b + 256]
            a2[b] = np.max(np.abs(v))
            inv = F32(1) / a2[b]
            s = (v * inv).astype(F32)
            q[256 * b:256 * b + len(v)] = [dquantize8(F32(e)) for e in s]
            differ += int(np.sum(quantize8_argmin(s) != q[256 * b:256 * b + len(v)]))
    return q, a2, offset, differ, int(offset != torch_mean)


def nf4_dequant(codes, absmax):
    out = np.empty(len(codes), dtype=F32)
    for i, c in enumerate(codes):
        out[i] = NF4[c] * absmax[i // 64]
    return out


def dq_absmax(q, a2, offset):
    # Overflows to inf in the "huge" case, as float32 does in bitsandbytes.
    with np.errstate(over="ignore"):
        return np.array(
            [F32(F32(DYN[c] * a2[i // 256]) + offset) for i, c in enumerate(q)], dtype=F32)


def int8_rows(x, rows, cols):
    x = x.reshape(rows, cols)
    t = torch.from_numpy(x.copy())
    absmax = torch.max(t.abs(), dim=1).values.float()
    scale = absmax.reciprocal() * 127.0
    r = torch.round(t * scale.unsqueeze(-1))
    r = torch.nan_to_num(r, nan=0.0)  # the all-zero rows: NaN becomes 0 in bitsandbytes' casts
    assert float(r.abs().max()) <= 127
    q = r.to(torch.int8)
    deq = (q * absmax.view(-1, 1)) * 7.874015718698502e-3
    return q.numpy().reshape(-1), absmax.numpy(), deq.numpy().astype(F32).reshape(-1)


def hexs(a):
    return np.ascontiguousarray(a).tobytes().hex()


def f32(v):
    return np.array(v, dtype=F32)


# ---- inputs -------------------------------------------------------------

rng = np.random.default_rng(20261201)


def gauss(n, scale=1.0):
    return (rng.standard_normal(n) * scale).astype(F32)


def ties_block():
    # absmax 1 so inv = 1 and s = x: each threshold exactly, and one ulp
    # either side; the table values themselves; 1 and -1.
    v = [F32(1.0), F32(-1.0)]
    for t in THRESH:
        v += [t, np.nextafter(t, F32(2)), np.nextafter(t, F32(-2))]
    v += list(NF4[1:15])
    v += [F32(0.0), F32(-0.0), F32(0.5)]
    assert len(v) == 64
    return f32(v)


def ties_scaled_block(absmax):
    # absmax a, inv = 1/a rounded: values x whose product x * inv lands
    # exactly on a threshold (where one exists), and their neighbours.
    a = F32(absmax)
    inv = F32(1) / a
    v = [a]
    for t in THRESH:
        x = F32(t / inv)
        for _ in range(4):
            p = F32(x * inv)
            if p == t:
                break
            x = np.nextafter(x, F32(np.inf) if p < t else F32(-np.inf))
        v += [x, np.nextafter(x, F32(np.inf)), np.nextafter(x, F32(-np.inf))]
    v += [F32(-a * F32(0.25)), F32(0), F32(a * F32(0.75)), F32(-a), F32(1e-3) * a, F32(-1e-3) * a]
    v += list((rng.uniform(-1, 1, 64 - len(v)) * a).astype(F32))
    assert len(v) == 64, len(v)
    return f32(v)


def dq_ties_input():
    # Blocks whose absmax lands, after "- offset" and "* inv2", exactly on a
    # midpoint (lower + upper) * 0.5f of two neighbours of the dynamic map,
    # where dQuantize's tie rule decides. Absmaxes come in pairs 0.5 +- e,
    # so their mean (the offset) is exactly 0.5 and a - offset = e exactly;
    # an anchor pair 0.5 +- 0.5 (1 and an all-zero block) makes absmax2 =
    # 0.5 and inv2 = 2, so the scaled value is 2e exactly: e = m / 2 wherever
    # 0.5 + e and 0.5 - e are floats. Filler pairs take the count to 258
    # blocks, so the second nested block (a pair 0.5 +- 0.25) is partial.
    global DQ_TIE_HITS
    half = F32(0.5)
    pairs = [F32(0.5)]
    for k in range(128, 254):
        m = F32((DYN[k] + DYN[k + 1]) * F32(0.5))
        e = F32(m * half)
        if F32(half + e) - half == e and half - F32(half - e) == e and F32(-m) in DYN_MIDS:
            pairs.append(e)
    DQ_TIE_HITS = 2 * (len(pairs) - 1)
    assert DQ_TIE_HITS >= 30, DQ_TIE_HITS
    while len(pairs) < 128:
        pairs.append(F32(rng.integers(1, 500) / 1024))
    a = []
    for e in pairs:
        a += [F32(half + e), F32(half - e)]
    a += [F32(0.75), F32(0.25)]
    assert F32(np.mean(np.array(a, dtype=np.float64))) == half
    blocks = []
    for ab in a:
        v = (rng.uniform(-1, 1, 64) * ab * F32(0.9)).astype(F32)
        v[rng.integers(64)] = ab if rng.random() < 0.5 else -ab
        blocks.append(v)
    # A partial last block, keeping its absmax.
    last = blocks[-1][:64 - 27]
    last[0] = F32(0.25)
    blocks[-1] = last
    return np.concatenate(blocks)


def nf4_cases():
    cases = []
    cases.append(("gauss_1", gauss(64)))
    cases.append(("gauss_8_weights", gauss(512, 0.02)))
    cases.append(("scales", np.concatenate([gauss(64, s) for s in (1e-4, 1e-2, 1.0, 1e2, 1e4, 3e-20, 1e30)])))
    cases.append(("ties_unit", ties_block()))
    cases.append(("ties_scaled", np.concatenate([ties_scaled_block(a) for a in (3.0, 0.1, 7.25, 1e-5, 123456.7)])))
    z = np.zeros(64, dtype=F32)
    nz = -z
    mixed = np.where(rng.random(64) < 0.5, z, nz).astype(F32)
    cases.append(("zeros", np.concatenate([gauss(64), z, nz, mixed, gauss(64, 0.1)])))
    cases.append(("partial_odd", gauss(64 * 3 + 37)))
    cases.append(("partial_even", gauss(100)))
    cases.append(("one", f32([-2.5])))
    cases.append(("three", f32([0.5, -0.25, 0.125])))
    cases.append(("sixty_three", gauss(63)))
    cases.append(("sixty_five", gauss(65)))
    cases.append(("odd_zero_tail", np.concatenate([gauss(64), np.zeros(5, dtype=F32)])))
    out = gauss(64 * 6, 0.01)
    out[7] = 100.0
    out[64 + 63] = -55.5
    out[128] = 3e38
    out[64 * 4 + 10] = 1e-3
    cases.append(("outliers", out))
    c = np.full(64 * 2, 0.37, dtype=F32)
    c[64:] = -1e-7
    cases.append(("constant", c))
    tiny = np.concatenate([gauss(64, 1e-37), gauss(64, 1e-40), f32([1e-45] * 32 + [-1e-45] * 32)]).astype(F32)
    cases.append(("tiny_and_subnormal", tiny))
    cases.append(("huge", np.concatenate([gauss(64, 1e37), f32([3.4028235e38, -3.4028235e38] * 32)])))
    # all blocks with the same absmax: d = 0, the nested block's absmax 0
    same = gauss(64 * 4, 0.1)
    for b in range(4):
        same[64 * b + b] = 2.0
    cases.append(("same_absmax", same))
    cases.append(("dq_ties_two_nested_blocks", dq_ties_input()))
    return cases


def scale_rounding_rows(rows):
    # Rows whose scale (1 / absmax) * 127 differs from 127 / absmax, with
    # values near k + 0.5 where the two scales round to different codes.
    out = []
    while len(out) < rows:
        a = F32(rng.uniform(0.5, 4))
        st = F32(F32(F32(1) / a) * F32(127))
        sd = F32(F32(127) / a)
        if st == sd:
            continue
        row = [a]
        for k in range(0, 127):
            x = F32((k + 0.5) / st)
            for dx in range(-3, 4):
                xv = x
                for _ in range(abs(dx)):
                    xv = np.nextafter(xv, F32(np.inf) if dx > 0 else F32(-np.inf))
                if np.round(F32(xv * st)) != np.round(F32(xv * sd)) and xv < a:
                    row.append(xv if k % 2 else -xv)
                    break
            if len(row) == 64:
                break
        if len(row) < 8:
            continue
        row += list((rng.uniform(-1, 1, 64 - len(row)) * a).astype(F32))
        out.append(f32(row))
    return np.concatenate(out)


def int8_cases():
    cases = []
    cases.append(("gauss", 4, 64, gauss(256)))
    x = gauss(3 * 100)
    x[100:200] = 0
    x[150] = -0.0
    cases.append(("zero_row", 3, 100, x))
    cases.append(("scales", 8, 33, np.concatenate([gauss(33, s) for s in (1e-30, 1e-4, 1e-2, 1, 1e2, 1e4, 1e30, 3e37)])))
    # rounding ties: rows of absmax 127 and 254 (scale 1 and 0.5, or an ulp
    # off), values whose product with the scale is exactly k + 0.5.
    rows = []
    for a in (127.0, 254.0, 12.7):
        a = F32(a)
        scale = F32(F32(1) / a) * F32(127)
        row = [a]
        for k in range(-6, 25):
            target = F32(k + 0.5)
            xv = F32(target / scale)
            for _ in range(4):
                p = F32(xv * scale)
                if p == target:
                    break
                xv = np.nextafter(xv, F32(np.inf) if p < target else F32(-np.inf))
            row += [xv, np.nextafter(xv, F32(np.inf))]
        row += [F32(0)] * (64 - len(row))
        rows.append(f32(row[:64]))
    cases.append(("ties", 3, 64, np.concatenate(rows)))
    cases.append(("scale_rounding", 4, 64, scale_rounding_rows(4)))
    cases.append(("single", 1, 1, f32([-0.75])))
    cases.append(("column", 7, 1, gauss(7)))
    o = gauss(2 * 40, 0.01)
    o[5] = 60.0
    o[40 + 39] = -60.0
    cases.append(("outliers", 2, 40, o))
    cases.append(("huge", 1, 8, f32([3.4028235e38, -3.4028235e38, 1e38, -1e38, 1.0, 0.0, 2e37, -2.6e38])))
    return cases


def main():
    w = sys.stdout.write
    w("# Known-answer vectors for gpumem's bitsandbytes codecs (include/gpumem/weights/bnb_quantize.h).\n")
    w("# Made by tools/bnb_vectors.py: an independent float32 re-implementation of bitsandbytes' algorithms\n")
    w("# read from its source, NOT output of bitsandbytes itself (it could not be installed here).\n")
    w("# See the script's docstring for the rules and the line format.\n")
    w(f"# torch {torch.__version__}, numpy {np.__version__}\n")
    w(f"dynamic_map - {hexs(DYN)}\n")
    total_alt = total_vals = total_dq_alt = total_mean = 0
    for name, x in nf4_cases():
        x = f32(x)
        codes, packed, absmax, alt = nf4(x)
        q, a2, offset, dq_alt, mean_differs = double_quant(absmax)
        total_alt += alt
        total_vals += len(x)
        total_dq_alt += dq_alt
        total_mean += mean_differs
        w(f"nf4_case {name} {len(x)}\n")
        w(f"nf4_input {name} {hexs(x)}\n")
        w(f"nf4_packed {name} {hexs(packed)}\n")
        w(f"nf4_absmax {name} {hexs(absmax)}\n")
        if len(x) <= 4096:
            w(f"nf4_dequant {name} {hexs(nf4_dequant(codes, absmax))}\n")
        w(f"dq_absmax_q {name} {hexs(q)}\n")
        w(f"dq_absmax2 {name} {hexs(a2)}\n")
        w(f"dq_offset {name} {hexs(f32([offset]))}\n")
        if len(x) <= 4096:
            w(f"dq_dequant {name} {hexs(nf4_dequant(codes, dq_absmax(q, a2, offset)))}\n")
    for name, r, c, x in int8_cases():
        x = f32(x)
        assert len(x) == r * c
        q, absmax, deq = int8_rows(x, r, c)
        w(f"int8_case {name} {r} {c}\n")
        w(f"int8_input {name} {hexs(x)}\n")
        w(f"int8_q {name} {hexs(q)}\n")
        w(f"int8_absmax {name} {hexs(absmax)}\n")
        w(f"int8_dequant {name} {hexs(deq)}\n")
    w(f"# NF4: {total_vals} values; the default backend's argmin rule would give another code for {total_alt}.\n")
    w(f"# Double quantization: the CPU/default argmin rule would give another 8-bit code for {total_dq_alt} absmaxes;\n")
    w(f"# dq_ties_two_nested_blocks: {DQ_TIE_HITS} absmaxes land exactly on a midpoint of the dynamic map.\n")
    w(f"# torch's float32 mean differs from the rounded float64 mean in {total_mean} case(s).\n")


if __name__ == "__main__":
    main()
