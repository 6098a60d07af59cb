#!/usr/bin/env python3
"""Times gpumem.torch.estimate's traced step (fake tensors, no export, no compute)
against issue 47's goals: GPT-124M at 8x1024 tokens under 5 s and a 7B Llama
built on the meta device under 10 s, on the 2-core development machine.

Run in the venv scripts/torch-venv.sh makes, with the build's module:

    PYTHONPATH=build/python $(scripts/torch-venv.sh 2.15.0) bench/estimate_goals.py [--runs 5]

Each run is a fresh process (imports are not shared between runs); the
figure is the estimate() call, the model built on the meta device before it
(the build time is printed beside it: it is transformers', not gpumem's).
"""

import argparse
import json
import statistics
import subprocess
import sys

CASES = {
    "gpt2-124m 8x1024 adamw fp32": """
cfg = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024)
with torch.device("meta"):
    model = transformers.GPT2LMHeadModel(cfg)
ids = torch.zeros(8, 1024, dtype=torch.long, device="meta")
kwargs = dict(optimizer=torch.optim.AdamW, gpu="24GiB")
""",
    "llama-7b 1x512 adamw amp-bf16": """
cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                               num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)
with torch.device("meta"):
    model = transformers.LlamaForCausalLM(cfg)
ids = torch.zeros(1, 512, dtype=torch.long, device="meta")
kwargs = dict(optimizer=torch.optim.AdamW, precision="amp-bf16", gpu="80GiB")
""",
}

RUN = """
import json, time, torch, transformers, gpumem.torch
t0 = time.perf_counter()
{build}
t1 = time.perf_counter()
r = gpumem.torch.estimate(model, dict(input_ids=ids, labels=ids), **kwargs)
t2 = time.perf_counter()
print(json.dumps({{"build": t1 - t0, "estimate": t2 - t1, "device_bytes": r.device_bytes}}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    for name, build in CASES.items():
        runs = []
        for _ in range(a.runs):
            out = subprocess.run([sys.executable, "-c", RUN.format(build=build)], capture_output=True, text=True,
                                 check=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        est = sorted(r["estimate"] for r in runs)
        build_s = statistics.median(r["build"] for r in runs)
        print(f"{name}: estimate median {statistics.median(est):.2f} s ({a.runs} runs, {est[0]:.2f} to "
              f"{est[-1]:.2f}); model built on meta in {build_s:.2f} s; needs {runs[0]['device_bytes'] / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
