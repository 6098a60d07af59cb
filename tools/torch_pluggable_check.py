#!/usr/bin/env python3
"""Checks libgpumem_torch.so as PyTorch's CUDA allocator, on a real GPU.

Run by hand (or by scripts/gpu_check.sh), not by CI:

    python3 tools/torch_pluggable_check.py --lib build/libgpumem_torch.so

Each configuration runs in its own process, since PyTorch's allocator can be
swapped only before the first CUDA allocation:

  native      PyTorch's own caching allocator: the baseline timings.
  gpumem      gpumem's allocator with GPUMEM_ALLOC_CONF as given (or unset).
  expandable  gpumem with expandable_segments:true (CUDA virtual memory).

In each, a small conv net trains for a few steps on the GPU and on the CPU
from the same weights and data, and the losses and weights must agree; then
training steps and a loop of allocations are timed. The gpumem runs also
read the allocator's statistics through the library's extras, and check
that an allocation larger than the GPU raises a Python exception and leaves
the process usable.

Exit status: 0 all checks passed (or nothing to check: no PyTorch, no GPU),
1 a check failed.
"""
import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time

RESULT_PREFIX = "RESULT "


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", default=os.environ.get("GPUMEM_TORCH_LIB", "build/libgpumem_torch.so"),
                        help="path of libgpumem_torch.so (default: $GPUMEM_TORCH_LIB or build/libgpumem_torch.so)")
    parser.add_argument("--conf", default=os.environ.get("GPUMEM_ALLOC_CONF", ""),
                        help="GPUMEM_ALLOC_CONF for the 'gpumem' run")
    parser.add_argument("--steps", type=int, default=100, help="timed training steps per configuration")
    parser.add_argument("--mode", choices=["native", "gpumem", "expandable"],
                        help="run one configuration in this process (used by the parent run)")
    return parser.parse_args()


def skip(message):
    print(f"torch_pluggable_check: SKIPPED: {message}")
    sys.exit(0)


# --- One configuration, in a child process ---------------------------------


class Gpumem:
    """The library's extras, through ctypes (the same handle PyTorch loaded)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.gpumem_torch_memory_stats_json.restype = ctypes.c_long
        self.lib.gpumem_torch_memory_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.gpumem_torch_memory_summary.restype = ctypes.c_char_p
        self.lib.gpumem_torch_memory_summary.argtypes = [ctypes.c_int]
        self.lib.gpumem_torch_config.restype = ctypes.c_char_p
        self.lib.gpumem_torch_empty_cache.restype = None

    def stats(self, device):
        n = self.lib.gpumem_torch_memory_stats_json(device, None, 0)
        if n < 0:
            raise RuntimeError("gpumem_torch_memory_stats_json failed (see stderr)")
        buf = ctypes.create_string_buffer(n + 1)
        self.lib.gpumem_torch_memory_stats_json(device, buf, n + 1)
        return json.loads(buf.value.decode())

    def summary(self, device):
        text = self.lib.gpumem_torch_memory_summary(device)
        return text.decode() if text else ""

    def config(self):
        text = self.lib.gpumem_torch_config()
        return text.decode() if text else "(malformed GPUMEM_ALLOC_CONF)"

    def empty_cache(self):
        self.lib.gpumem_torch_empty_cache()


def make_model(nn):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(64 * 16, 256), nn.ReLU(), nn.Linear(256, 10))


def train(torch, model, batches, device):
    """Plain SGD steps; returns the losses."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def run_one(args):
    import copy

    import torch

    checks = {}
    result = {"mode": args.mode, "checks": checks}
    gpumem = None
    if args.mode != "native":
        if args.mode == "expandable":
            os.environ["GPUMEM_ALLOC_CONF"] = "expandable_segments:true"
        elif args.conf:
            os.environ["GPUMEM_ALLOC_CONF"] = args.conf
        else:
            os.environ.pop("GPUMEM_ALLOC_CONF", None)
        path = os.path.abspath(args.lib)
        allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "gpumem_torch_alloc", "gpumem_torch_free")
        torch.cuda.memory.change_current_allocator(allocator)
        gpumem = Gpumem(path)
        result["config"] = gpumem.config()

    # Same arithmetic on both sides: no TF32 on the GPU.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    device = torch.device("cuda", torch.cuda.current_device())
    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(64, 3, 32, 32, generator=generator), torch.randint(0, 10, (64,), generator=generator))
               for _ in range(5)]

    # 1. Correctness: GPU training matches CPU training.
    cpu_model = make_model(torch.nn)
    gpu_model = copy.deepcopy(cpu_model).to(device)
    cpu_losses = train(torch, cpu_model, batches, "cpu")
    gpu_losses = train(torch, gpu_model, batches, device)
    loss_error = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(cpu_losses, gpu_losses))
    weight_error = max((p.detach().cpu() - q.detach()).abs().max().item()
                       for p, q in zip(gpu_model.parameters(), cpu_model.parameters()))
    checks["losses match CPU (rel. error < 1e-3)"] = loss_error < 1e-3
    checks["weights match CPU (abs. error < 1e-3)"] = weight_error < 1e-3
    result["loss_rel_error"] = loss_error
    result["weight_abs_error"] = weight_error

    # A side stream: allocations on it, results read back on the default one.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.full((1 << 20,), 2.0, device=device)
        b = (a * 3).sum()  # 6 * 2**20: exact in float32 whatever the order of the sum
    torch.cuda.current_stream().wait_stream(side)
    checks["side-stream result"] = b.item() == 6.0 * (1 << 20)
    del a, b

    # 2. Timing: training steps.
    big = [(torch.randn(256, 3, 32, 32, generator=generator), torch.randint(0, 10, (256,), generator=generator))
           for _ in range(4)]
    big = [(x.to(device), y.to(device)) for x, y in big]
    train(torch, gpu_model, big * 2, device)  # warm-up
    torch.cuda.synchronize()
    start = time.perf_counter()
    train(torch, gpu_model, (big * ((args.steps + 3) // 4))[: args.steps], device)
    torch.cuda.synchronize()
    result["train_step_ms"] = (time.perf_counter() - start) * 1e3 / args.steps

    # 3. Timing: allocation and free through the allocator alone.
    sizes = [512, 4096, 1 << 20, 3 << 20, 40 << 20]
    for size in sizes:  # warm the cache
        torch.empty(size, dtype=torch.uint8, device=device)
    n = 20000
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(n):
        t = torch.empty(sizes[i % len(sizes)], dtype=torch.uint8, device=device)
        del t
    torch.cuda.synchronize()
    result["alloc_free_us"] = (time.perf_counter() - start) * 1e6 / n

    if gpumem is not None:
        index = device.index
        stats = gpumem.stats(index)
        checks["stats report live allocations"] = stats.get("allocated_bytes.all.current", 0) > 0
        result["reserved_bytes_peak"] = stats.get("reserved_bytes.all.peak", 0)
        result["allocated_bytes_peak"] = stats.get("allocated_bytes.all.peak", 0)
        # 4. Out of memory is a Python exception, and the process goes on.
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device=device)
            checks["allocating 1 PiB raises"] = False
        except (RuntimeError, MemoryError) as e:
            checks["allocating 1 PiB raises"] = True
            result["oom_exception"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        checks["usable after out of memory"] = (torch.ones(1000, device=device).sum().item() == 1000.0)
        checks["stats count the out-of-memory"] = gpumem.stats(index).get("num_ooms", 0) >= 1
        # 5. empty_cache gives back what is not in use.
        del gpu_model, big
        gc.collect()
        torch.cuda.synchronize()
        before = gpumem.stats(index).get("reserved_bytes.all.current", 0)
        gpumem.empty_cache()
        after = gpumem.stats(index).get("reserved_bytes.all.current", 0)
        result["reserved_before_after_empty_cache"] = [before, after]
        checks["empty_cache releases memory"] = after < before or before == 0
        print(gpumem.summary(index))

    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0 if all(checks.values()) else 1


# --- The parent: one child per configuration --------------------------------


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed for " + sys.executable)
    if not torch.cuda.is_available():
        skip(f"PyTorch {torch.__version__} sees no CUDA device")
    if not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        skip(f"PyTorch {torch.__version__} has no torch.cuda.memory.CUDAPluggableAllocator")
    if not os.path.exists(args.lib):
        print(f"torch_pluggable_check: {args.lib}: no such file (build the gpumem_torch target, or pass --lib)")
        return 1
    if args.mode:
        return run_one(args)

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}, lib {args.lib}")
    results = []
    failed = False
    for mode in ["native", "gpumem", "expandable"]:
        command = [sys.executable, os.path.abspath(__file__), "--mode", mode, "--lib", args.lib,
                   "--steps", str(args.steps)]
        if args.conf:
            command += ["--conf", args.conf]
        print(f"\n=== {mode} ===", flush=True)
        child = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        result = None
        for line in child.stdout.splitlines():
            if line.startswith(RESULT_PREFIX):
                result = json.loads(line[len(RESULT_PREFIX):])
            else:
                print(line)
        if result is None:
            print(f"{mode}: the run died (exit status {child.returncode}) before reporting")
            failed = True
            continue
        for name, ok in result["checks"].items():
            print(f"  [{'ok' if ok else 'FAILED'}] {name}")
            failed = failed or not ok
        for key in ["config", "oom_exception", "reserved_before_after_empty_cache"]:
            if key in result:
                print(f"  {key}: {result[key]}")
        results.append(result)

    print("\nmode        train step (ms)   alloc+free (us)   peak reserved (MiB)")
    for r in results:
        peak = r.get("reserved_bytes_peak")
        peak_text = f"{peak / 2**20:.1f}" if peak is not None else "-"
        print(f"{r['mode']:<11} {r['train_step_ms']:>15.3f}   {r['alloc_free_us']:>15.2f}   {peak_text:>19}")
    print("\ntorch_pluggable_check: " + ("FAILED" if failed else "all checks passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
