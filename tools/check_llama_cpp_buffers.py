#!/usr/bin/env python3
"""Checks the formulas of tests/data/llm/README.md against llama.cpp's own
figures in tests/data/llm/llama_cpp_buffers.json: the KV cache and the model
buffer to llama.cpp's print rounding, the CPU compute buffer within 5%.
Prints each run's compute error and the worst; exits 1 if a check fails.

    python3 tools/check_llama_cpp_buffers.py [tests/data/llm/llama_cpp_buffers.json]
"""
import json
import sys
from pathlib import Path

ROUNDING = 5243  # llama.cpp prints MiB with 2 decimals: 0.005 MiB
# Bytes per element of the KV cache types recorded (ggml: q8_0 is 34 bytes per 32).
TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


def kv_bytes(shape, ctx):
    """Every layer keeps n_ctx cells of K and of V, n_head_kv x head_dim wide each."""
    n_embd_kv = shape["n_head_kv"] * shape["head_dim"]
    cells = -(-ctx["n_ctx"] // 256) * 256  # llama.cpp pads n_ctx to 256
    k = shape["n_layer"] * cells * n_embd_kv * TYPE_BYTES[ctx["type_k"]]
    v = shape["n_layer"] * cells * n_embd_kv * TYPE_BYTES[ctx["type_v"]]
    return int(k), int(v)


def compute_bytes(shape, ctx):
    """The CPU compute buffer: ggml-alloc's peak over the reserve graph of
    T = min(n_ctx, n_ubatch) tokens, the largest of three moments (tensors
    are f32, 4 bytes, unless noted; E = n_embd, E_kv = n_head_kv x head_dim,
    F = n_ff, V = n_vocab, H = n_head, n_kv = n_ctx padded to 256):
      attention, without flash attention only: KQ (n_kv x T x H; the softmax
        runs in place on it) + the f32 mask (n_kv x T) + 5 E + 2 E_kv per
        token (4 E when K is quantized);
      feed-forward: gate, up and their product (3 F) + c E per token, with the
        mask (f16 with flash attention, f32 without) still live: c = 5 without
        flash attention, 4 with it, 3.5 with it and a quantized V (llama.cpp
        placed it at 3 or 4);
      output: the logits (V x T; n_outputs = T at reserve) + 10 E per token
        (llama.cpp placed it at 8 E or 12 E, depending on earlier layouts).
    A quantized K or V cache (head_dim a multiple of 64) adds its Hadamard
    rotation matrix (head_dim^2 f32) as a graph input. The token, position
    and output-id inputs (3 int32 per token) are left out: they are within
    llama.cpp's print rounding."""
    E, F, V, H = shape["n_embd"], shape["n_ff"], shape["n_vocab"], shape["n_head"]
    hd = shape["head_dim"]
    E_kv = shape["n_head_kv"] * hd
    T = min(ctx["n_ctx"], ctx["n_ubatch"])
    n_kv = -(-ctx["n_ctx"] // 256) * 256
    fa = ctx["flash_attn"]
    rot_k = ctx["type_k"] not in ("f16", "f32", "bf16") and hd % 64 == 0
    rot_v = ctx["type_v"] not in ("f16", "f32", "bf16") and hd % 64 == 0
    mask = n_kv * (2 if fa else 4)
    c = (3.5 if rot_v else 4) if fa else 5
    moments = [
        4 * (3 * F + c * E) + mask,  # feed-forward
        4 * V + 10 * E,  # output
    ]
    if not fa:
        moments.append(4 * n_kv * H + mask + 4 * ((4 if rot_k else 5) * E + 2 * E_kv))  # attention
    return int(T * max(moments)) + 4 * hd * hd * (rot_k + rot_v)


def main():
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent / "tests/data/llm/llama_cpp_buffers.json")
    doc = json.loads(path.read_text())
    ok = True
    worst = (0.0, None)
    for run in doc["runs"]:
        shape, ctx = run["shape"], run["context_params"]
        label = f"{shape['name']} ctx {ctx['n_ctx']} ub {ctx['n_ubatch']} k {ctx['type_k']} v {ctx['type_v']} fa {int(ctx['flash_attn'])}"
        k, v = kv_bytes(shape, ctx)
        kv = run["kv_cache"]
        if abs(kv["k_bytes"] - k) > ROUNDING or abs(kv["v_bytes"] - v) > ROUNDING or abs(kv["total_bytes"] - k - v) > ROUNDING:
            print(f"KV MISMATCH {label}: {kv} vs K {k} V {v}")
            ok = False
        # Mapped (and repacked) buffers hold each tensor once; repacking moves a
        # tensor into CPU_REPACK but the mapping still spans the file's range.
        model = sum(run["model_buffer_bytes"].values())
        if "CPU_REPACK" not in run["model_buffer_bytes"] and abs(model - run["gguf"]["tensor_bytes"]) > ROUNDING:
            print(f"MODEL MISMATCH {label}: {run['model_buffer_bytes']} vs {run['gguf']['tensor_bytes']}")
            ok = False
        # the 4-decimal figure printed when the context is freed, when recorded
        got = run.get("compute_buffer_bytes_4dp", run["compute_buffer_bytes"])["CPU"]
        want = compute_bytes(shape, ctx)
        err = (want - got) / got
        print(f"{label:60} compute {got:>11} formula {want:>11} {100 * err:+6.2f}%")
        if abs(err) > abs(worst[0]):
            worst = (err, label)
    print(f"worst compute error: {100 * worst[0]:+.3f}% ({worst[1]}) over {len(doc['runs'])} runs")
    if abs(worst[0]) > 0.05:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
