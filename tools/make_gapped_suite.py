#!/usr/bin/env python3
"""Writes bench/gapped/: random planning instances with MiniMalloc gaps.

Each buffer lives in [lower, upper) over a horizon of 4 * n steps, is 1 to 64
bytes, and has, with probability 1/2 each, up to two gaps, half of them with
a window of bytes still in use. The files measure the disjunctive search
(`build/bench/gpumem_plan_suite bench/gapped --minimize --time-limit 2`).
A fixed seed makes them the same on every run.
"""
import pathlib
import random

out = pathlib.Path(__file__).resolve().parent.parent / "bench" / "gapped"
out.mkdir(parents=True, exist_ok=True)
rng = random.Random(9)
for n in (10, 20, 40, 80):
    for k in range(5):
        horizon = 4 * n
        lines = ["id,lower,upper,size,gaps"]
        for i in range(n):
            lower = rng.randrange(horizon - 1)
            upper = lower + 1 + rng.randrange(horizon - lower)
            size = 1 + rng.randrange(64)
            gaps, t = [], lower
            for g in range(2):
                if rng.randrange(2) or t >= upper - 1:
                    break
                gap_lower = t + rng.randrange(upper - t - 1) + (0 if g == 0 else 1)
                if gap_lower >= upper:
                    break
                gap_upper = gap_lower + 1 + rng.randrange(upper - gap_lower)
                gap = f"{gap_lower}-{gap_upper}"
                if rng.randrange(2):
                    w0 = rng.randrange(size + 1)
                    gap += f"@{w0}:{w0 + rng.randrange(size - w0 + 1)}"
                gaps.append(gap)
                t = gap_upper
            lines.append(f"b{i},{lower},{upper},{size},{' '.join(gaps)}")
        (out / f"gapped_{n:03d}_{k}.csv").write_text("\n".join(lines) + "\n")
