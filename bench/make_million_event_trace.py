#!/usr/bin/python3
"""Writes a training-shaped trace of 1,000,000 events (500,000 allocations,
each allocated and freed) as MiniMalloc CSV, for the HTML report goals of
bench/html_report_goals.sh. Fixed seed: the same file every time.

Each iteration allocates activations in the forward pass (a stack of
tensors of varied sizes), frees them in reverse in the backward pass while
gradients come and go, and keeps a few optimizer tensors; every 50th
iteration leaks one tensor, so the page has a leak to show.

usage: make_million_event_trace.py OUT.csv
"""
import random
import sys

EVENTS = 1_000_000


def main(out_path):
    rng = random.Random(15)
    rows = []
    t = 0
    ident = 0
    # Weights: allocated once, live to the end (fixed up below).
    weights = []
    for _ in range(40):
        weights.append([f"w{ident}", t, None, rng.choice([1, 2, 4, 8]) * 1 << 20])
        ident += 1
        t += 1
    iteration = 0
    # Two events (allocate, free) per buffer; an iteration adds at most 481 buffers.
    while 2 * (len(weights) + len(rows)) + 2 * 481 <= EVENTS:
        stack = []
        for _ in range(120):
            size = rng.choice([64, 256, 512, 1024, 4096]) * 1024 * rng.choice([1, 2, 3])
            stack.append([f"a{ident}", t, None, size])
            ident += 1
            t += 1
        while stack:
            a = stack.pop()
            g = [f"g{ident}", t, t + 2, a[3]]  # a gradient, freed two events later
            ident += 1
            t += 1
            a[2] = t
            t += 1
            rows.append(a)
            rows.append(g)
        if iteration % 50 == 0:
            rows.append([f"leak{ident}", t, None, 2 << 20])
            ident += 1
            t += 1
        iteration += 1
    # Exactly EVENTS events: small buffers of one event's life fill the rest.
    while 2 * (len(weights) + len(rows)) < EVENTS:
        rows.append([f"p{ident}", t, t + 1, 512])
        ident += 1
        t += 1
    end = t + 1
    for r in weights + rows:
        if r[2] is None:
            r[2] = end
    with open(out_path, "w") as f:
        f.write("id,lower,upper,size\n")
        for r in weights + rows:
            f.write(f"{r[0]},{r[1]},{r[2]},{r[3]}\n")
    print(f"{out_path}: {len(weights) + len(rows)} buffers, {2 * (len(weights) + len(rows))} events")


if __name__ == "__main__":
    main(sys.argv[1])
