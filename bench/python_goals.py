#!/usr/bin/env python3
"""The Python module's goals (issue 33), each in fresh processes, as a user meets them:

  import gpumem                                  goal: under 150 ms
  gpumem.torch.estimate(resnet50, batch 32)      goal: under 3 s, export included

    /usr/bin/python3 bench/python_goals.py [--runs N] [--build build]

Prints the median and the spread of N runs (default 9 and 5). The estimate
runs after `import torch, torchvision` and building the model, which are
timed apart: they are the user's, not gpumem's.
"""
import argparse
import os
import statistics
import subprocess
import sys

IMPORT = "import time; t = time.perf_counter(); import gpumem; print(time.perf_counter() - t)"
ESTIMATE = """
import time, torch, torchvision, gpumem
torch.manual_seed(0)
model = torchvision.models.resnet50()
x = torch.randn(32, 3, 224, 224)
t = time.perf_counter()
r = gpumem.torch.estimate(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
print(time.perf_counter() - t, r.peak_bytes)
"""


def timed(code, runs, env):
    out = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        out.append(done.stdout.split())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(os.path.join(args.build, "python")))
    imports = [float(r[0]) * 1000 for r in timed(IMPORT, args.runs, env)]
    print(f"import gpumem: median {statistics.median(imports):.1f} ms "
          f"(min {min(imports):.1f}, max {max(imports):.1f}; {args.runs} runs; goal < 150 ms)")
    runs = max(3, args.runs // 2)
    estimates = timed(ESTIMATE, runs, env)
    seconds = [float(r[0]) for r in estimates]
    print(f"estimate resnet50 (batch 32, SGD momentum, export included): median {statistics.median(seconds):.2f} s "
          f"(min {min(seconds):.2f}, max {max(seconds):.2f}; {runs} runs; goal < 3 s); peak {estimates[0][1]} bytes")


if __name__ == "__main__":
    main()
