#!/usr/bin/env python3
"""`gpumem finetune` against the steps recorded with transformers and peft
(tests/data/torch2, tools/record_torch2.py): each decoder case's settings as
finetune's flags, its predicted allocated peak against the recorded one, by
release and half (tests/data/torch2/SPLIT.md).

    python3 tools/finetune_vs_torch2.py [--gpumem build/gpumem] [--cases]

A case finetune cannot express is listed as such.
"""

import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch2"
DECODERS = ["llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3"]

# The step every case shares: 2 sequences of 64 tokens, the CPU's kernels,
# fp32 weights, transformers' loss on the logits.
COMMON = ["--device", "cpu", "--context", "64", "--batch", "2", "--precision", "fp32", "--method", "full",
          "--optimizer", "adamw", "--foreach", "off", "--attention", "sdpa"]
VARIANT_FLAGS = {
    "adamw": [],
    "adamw_foreach": ["--foreach", "on"],
    "sgdm": ["--optimizer", "sgd-momentum"],
    "eager": ["--attention", "eager"],
    "ckpt": ["--checkpoint", "layers"],
    "ckpt_reentrant": ["--checkpoint", "layers"],
    "bf16": ["--precision", "amp-bf16"],
    "lora": ["--method", "lora", "--lora-r", "8", "--lora-targets", "q,v"],
    "lora_head": ["--method", "lora", "--lora-r", "8", "--lora-targets", "q,v,head"],
}


def flags_for(model, variant):
    extra = VARIANT_FLAGS[variant]
    if extra is None:
        return None
    flags = list(COMMON)
    if model == "gemma2":  # transformers has no SDPA path for it: the recordings ran eager
        flags[flags.index("sdpa")] = "eager"
    for i in range(0, len(extra), 2):  # later flags replace COMMON's
        if extra[i] in flags:
            flags[flags.index(extra[i]) + 1] = extra[i + 1]
        else:
            flags += extra[i:i + 2]
    return flags


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumem", default=str(ROOT / "build" / "gpumem"))
    ap.add_argument("--cases", action="store_true", help="one line per case")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every half of every release is within 1%% in the median and 3%% at worst")
    a = ap.parse_args()
    rows = []
    for facts_path in sorted(DATA.glob("*/*.facts.json")):
        if facts_path.parent.name.startswith("cuda-"):
            continue  # GPU recordings: device figures, checked apart
        facts = json.loads(facts_path.read_text())
        if facts["model"] not in DECODERS:
            continue
        release = facts_path.parent.name
        flags = flags_for(facts["model"], facts["variant"])
        if flags is None:
            rows.append((release, facts["half"], facts["case"], None, "not expressible"))
            continue
        config = facts_path.parent / f"{facts['model']}.config.json"
        # Each release's own rules: --torch as the recording's release.
        torch_release = ".".join(facts["versions"]["torch"].split(".")[:2])
        run = subprocess.run([a.gpumem, "finetune", str(config), *flags, "--torch", torch_release, "--json"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            rows.append((release, facts["half"], facts["case"], None, run.stderr.strip().splitlines()[-1]))
            continue
        predicted = json.loads(run.stdout)["peak_bytes"]
        rows.append((release, facts["half"], facts["case"], predicted / facts["recorded_peak_bytes"] - 1, ""))
    if a.cases:
        for release, half, case, error, why in rows:
            print(f"{release} {half:6s} {case:24s} " + (f"{error * 100:+7.2f}%" if error is not None else why))
    failed = []
    print("| release | half | steps | median error | worst | not predicted |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    for release in sorted({r[0] for r in rows}, reverse=True):
        for half in ("tuning", "test"):
            mine = [r for r in rows if r[0] == release and r[1] == half]
            errors = sorted((abs(r[3]), r[2], r[3]) for r in mine if r[3] is not None)
            if not errors:
                continue
            worst = errors[-1]
            if errors[len(errors) // 2][0] > 0.01 or worst[0] > 0.03:
                failed.append(f"torch {release} {half}")
            print(f"| torch {release} | {half} | {len(errors)} | {errors[len(errors) // 2][0] * 100:.2f}% | "
                  f"{worst[2] * 100:+.2f}% ({worst[1]}) | {len(mine) - len(errors)} |")


    if a.check and (failed or not rows):
        raise SystemExit("goals not met (1% median, 3% worst): " + (", ".join(failed) or "no recordings"))


if __name__ == "__main__":
    main()
