#!/usr/bin/env python3
"""Compares `gpumem quantize` with llama.cpp's own llama-quantize, tensor by
tensor (type, shape, bytes). Standard library only.

    cc -O1 -o /tmp/llama_quantize tools/llama_quantize.c -ldl
    tools/llama_quantize_check.py LIBLLAMA.so /tmp/llama_quantize build/gpumem IN.safetensors LAYERS TYPE...

IN is a Llama-shaped safetensors with GGUF names (tools/make_tiny_llama.py);
it becomes a GGUF with the llama hyperparameters llama.cpp needs to load it,
its tensors in llama.cpp's order (by layer, then name). Each TYPE (q4_k_m,
q5_k_m, q8_0, ...) is quantized by both, and every tensor's type, shape and
bytes must be the same, as must general.file_type. Whether the whole files
are the same (sha256) is reported too, and required with --same-file.
libllama: the npm package @node-llama-cpp/linux-x64
(bins/linux-x64/libllama.*.so).
"""
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

# llama.cpp's LLAMA_FTYPE_* (include/llama.h); q4_k is gpumem's pure Q4_K_M.
FTYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q4_k_s": 14, "q4_k_m": 15, "q4_k": 15,
          "q5_k_s": 16, "q5_k_m": 17, "q6_k": 18, "bf16": 32}


def string(x):
    x = x.encode()
    return struct.pack("<Q", len(x)) + x


def make_gguf(src, dst, layers):
    b = open(src, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    base = 8 + n

    def order(name):
        m = re.match(r"blk\.(\d+)\.", name)
        return (int(m.group(1)) if m else -1, name)

    names = sorted((k for k in h if k != "__metadata__"), key=order)
    dim = h["token_embd.weight"]["shape"][-1]
    u32 = lambda v: (4, struct.pack("<I", v))
    kv = [("general.architecture", (8, string("llama"))), ("llama.context_length", u32(2048)),
          ("llama.embedding_length", u32(dim)), ("llama.block_count", u32(layers)),
          ("llama.feed_forward_length", u32(4 * dim)), ("llama.attention.head_count", u32(4)),
          ("llama.attention.head_count_kv", u32(1)), ("llama.rope.dimension_count", u32(dim // 4)),
          ("llama.attention.layer_norm_rms_epsilon", (6, struct.pack("<f", 1e-5))), ("general.file_type", u32(0))]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(names), len(kv))
    for k, (t, v) in kv:
        out += string(k) + struct.pack("<I", t) + v
    off, datas = 0, []
    for name in names:
        e = h[name]
        d = b[base + e["data_offsets"][0]:base + e["data_offsets"][1]]
        ne = list(reversed(e["shape"]))
        out += string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        out += struct.pack("<IQ", 0, off)
        datas.append(d)
        off += len(d) + (32 - len(d) % 32) % 32
    out += b"\0" * ((32 - len(out) % 32) % 32)
    for d in datas:
        out += d + b"\0" * ((32 - len(d) % 32) % 32)
    open(dst, "wb").write(out)


def tensors(path):
    """{name: (type, ne, data)} of a GGUF file, data up to the next tensor."""
    b = open(path, "rb").read()
    p = 4
    _, nt, nkv = struct.unpack_from("<IQQ", b, p)
    p += 20

    def rs():
        nonlocal p
        n = struct.unpack_from("<Q", b, p)[0]
        p += 8 + n
        return b[p - n:p].decode()

    fixed = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        nonlocal p
        if t == 8:
            return rs()
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            return [value(et) for _ in range(n)]
        v = struct.unpack_from(fixed[t], b, p)[0]
        p += struct.calcsize(fixed[t])
        return v

    meta = {}
    for _ in range(nkv):
        k = rs()
        t = struct.unpack_from("<I", b, p)[0]
        p += 4
        meta[k] = value(t)
    infos = []
    for _ in range(nt):
        name = rs()
        nd = struct.unpack_from("<I", b, p)[0]
        ne = struct.unpack_from("<%dQ" % nd, b, p + 4)
        t, off = struct.unpack_from("<IQ", b, p + 4 + 8 * nd)
        p += 4 + 8 * nd + 12
        infos.append((name, t, ne, off))
    align = meta.get("general.alignment", 32)
    start = p + (align - p % align) % align
    by_offset = sorted(infos, key=lambda i: i[3])
    out = {}
    for i, (name, t, ne, off) in enumerate(by_offset):
        end = by_offset[i + 1][3] if i + 1 < len(by_offset) else len(b) - start
        out[name] = (t, ne, b[start + off:start + end].rstrip(b"\0"))
    return meta, out


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def first_difference(a, b):
    """The offset of the first byte where files a and b differ."""
    x, y = open(a, "rb").read(), open(b, "rb").read()
    return next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), min(len(x), len(y)))


def main():
    args = sys.argv[1:]
    same_file = "--same-file" in args
    args = [a for a in args if a != "--same-file"]
    lib, runner, gpumem, src, layers = args[:5]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.gguf")
        make_gguf(src, model, int(layers))
        for t in args[5:]:
            ours, theirs = os.path.join(tmp, "gpumem.gguf"), os.path.join(tmp, "llama.gguf")
            args_pure = ["--pure"] if t == "q4_k" else []
            subprocess.run([runner, lib, model, theirs, str(FTYPES[t])] + (["pure"] if args_pure else []), check=True,
                           capture_output=True)
            subprocess.run([gpumem, "quantize", model, ours, "--type", t, "--json"] + args_pure, check=True,
                           capture_output=True, text=True)
            meta_mine, mine = tensors(ours)
            meta_theirs, other = tensors(theirs)
            same, differ = 0, []
            for name, a in other.items():
                if mine.get(name) == a:
                    same += 1
                else:
                    differ.append(name)
            differ += [name for name in mine if name not in other]
            file_same = sha256(ours) == sha256(theirs)
            print(f"{t}: {same} of {len(other)} tensors identical, {len(differ)} different; general.file_type "
                  f"{meta_mine['general.file_type']} vs {meta_theirs['general.file_type']}; files "
                  + ("identical, sha256 " + sha256(ours) if file_same else
                     f"differ (first at byte {first_difference(ours, theirs)}, sizes {os.path.getsize(ours)} and "
                     f"{os.path.getsize(theirs)})"))
            for name in differ:
                print("  differs:", name, mine.get(name, (None,))[0], other.get(name, (None,))[0])
            failed |= bool(differ) or meta_mine["general.file_type"] != meta_theirs["general.file_type"]
            failed |= same_file and not file_same
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
