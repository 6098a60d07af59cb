#!/usr/bin/env python3
"""A Llama-shaped safetensors checkpoint (GGUF tensor names) whose values are
real ones: the finite inputs ggml quantized for gpumem's codec fixture
(tests/data/weights/ggml_kquant_vectors.txt), taken in turn. Standard library
only.

    tools/make_tiny_llama.py OUT [--layers 4] [--dim 256] [--ffn 512] [--vocab 64] [--rows R]

--rows R gives every matrix R rows (of its usual length), for a fixture
small enough to ship: tests/data/weights/tiny_llama.safetensors is
`--layers 4 --dim 256 --ffn 32 --rows 8`. docs/quantize.md's throughput
figure used `--layers 8 --dim 2048 --ffn 5632 --vocab 32000` (1.2 GB).
"""
import argparse
import json
import math
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def real_values():
    out = bytearray()
    with open(os.path.join(ROOT, "tests/data/weights/ggml_kquant_vectors.txt")) as f:
        for line in f:
            fields = line.split()
            if len(fields) != 2 or fields[0] != "input":
                continue
            raw = bytes.fromhex(fields[1])
            for i in range(0, len(raw), 4):
                (v,) = struct.unpack_from("<f", raw, i)
                if math.isfinite(v):
                    out += raw[i:i + 4]
    return bytes(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--rows", type=int, default=0)
    a = p.parse_args()
    kv = a.dim // 4

    def m(rows, row):
        return [a.rows or rows, row]

    tensors = [("token_embd.weight", m(a.vocab, a.dim))]
    for l in range(a.layers):
        b = f"blk.{l}."
        tensors += [(b + "attn_norm.weight", [a.dim]), (b + "attn_q.weight", m(a.dim, a.dim)),
                    (b + "attn_k.weight", m(kv, a.dim)), (b + "attn_v.weight", m(kv, a.dim)),
                    (b + "attn_output.weight", m(a.dim, a.dim)), (b + "ffn_norm.weight", [a.dim]),
                    (b + "ffn_gate.weight", m(a.ffn, a.dim)), (b + "ffn_up.weight", m(a.ffn, a.dim)),
                    (b + "ffn_down.weight", m(a.dim, a.ffn))]
    tensors += [("output_norm.weight", [a.dim]), ("output.weight", m(a.vocab, a.dim))]
    pool = real_values()
    header, at = {}, 0
    for name, shape in tensors:
        n = math.prod(shape) * 4
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        start = 0
        for name, shape in tensors:
            n = math.prod(shape) * 4
            # The pool in turn, from where the last tensor stopped.
            reps = (start + n) // len(pool) + 2
            f.write((pool * reps)[start:start + n])
            start = (start + n) % len(pool)


if __name__ == "__main__":
    main()
