#!/usr/bin/env python3
"""No flag is silently ignored (issue 46).

Every flag of the flag table (`gpumem flag-table`, the binary's own) of the
commands that have engines, methods or modes is given, with a value unlike
its default, under each of them. Each must either change what the command
writes (stdout, exit status, or a file it names) or be refused with exit 2
and a one-line error that names it. A flag that changes nothing and is
accepted is a silent flag: the test lists them and fails.

    flag_matrix.py --gpumem build/gpumem --source .
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

LLAMA = "examples/llm/llama-3-8b"
BERT = "examples/models/bert_base.onnx"
RESNET = "tests/data/train/resnet18_sgd.onnx"
TOKEN_MLP = "examples/models/token_mlp_dynamic.onnx"
TRACE = "tests/data/traces/resnet18_train.json"
GGUF = "tests/data/weights/tiny_llama_f16.gguf"

# The runs each flag is tried under: (command, variant, base arguments).
# A variant is an engine, a method or a mode of the command.
VARIANTS = [
    ("llm", "llama.cpp", f"llm {LLAMA} --gpu 16GiB"),
    ("llm", "ollama", f"llm {LLAMA} --gpu 16GiB --engine ollama"),
    ("llm", "vllm", f"llm {LLAMA} --gpu 80GiB --engine vllm"),
    ("serve-sim", "llama.cpp", f"serve-sim {LLAMA} --gpu 24GiB --requests examples/serve/system-prompt.csv"),
    ("serve-sim", "vllm",
     f"serve-sim {LLAMA} --gpu 80GiB --requests examples/serve/system-prompt.csv --engine vllm"),
    ("serve-sim", "generate", "serve-sim --generate sharegpt --count 20"),
    ("finetune", "full", f"finetune {LLAMA} --method full --gpu 80GiB"),
    ("finetune", "freeze", f"finetune {LLAMA} --method freeze --gpu 80GiB"),
    ("finetune", "lora", f"finetune {LLAMA} --method lora --gpu 80GiB"),
    ("finetune", "qlora", f"finetune {LLAMA} --method qlora --gpu 80GiB"),
    ("fit", "one gpu", f"fit {RESNET} --optimizer adamw --gpu 800MiB"),
    ("train", "cuda", f"train {RESNET} --optimizer sgd-momentum"),
    ("inspect", "onnx", f"inspect {TOKEN_MLP} --dim seq=128 --batch 4"),
    ("plan", "onnx", f"plan {TOKEN_MLP} --dim seq=128 --batch 4"),
    ("plan", "csv", "plan examples/plans/gaps.csv"),
    ("plan", "hard csv", "plan tests/data/plans/repeated_raises.csv"),
    ("replay", "trace", f"replay {TRACE}"),
    ("replay", "damaged trace", "replay DAMAGED --time-limit 0"),
    ("trace stats", "trace", f"trace stats {TRACE}"),
    ("trace stats", "damaged trace", "trace stats DAMAGED"),
    ("weights", "gguf", f"weights {GGUF}"),
    ("explain-oom", "message", "explain-oom OOM_MESSAGE"),
    ("report", "onnx", f"report {TOKEN_MLP} --dim seq=128 --batch 4 -o REPORT"),
    ("report", "trace", f"report {TRACE} -o REPORT"),
]

# A value unlike the default for each flag that takes one; FILE and DIR
# values are paths in a scratch directory, and writing them is a change.
VALUES = {
    "--context": "1024", "--batch": "2", "--ubatch": "256", "--gpu": "20GiB", "--gpus": "2",
    "--quant": "q8_0", "--kv-dtype": "q8_0", "--flash-attn": "off", "--overhead": "1GiB", "--pcie": "12GB",
    "--engine": "vllm", "--gpu-memory-utilization": "0.8", "--token-budget": "4096", "--max-seqs": "8",
    "--block-tokens": "32", "--non-torch": "1GiB", "--concurrency": "4",
    "--requests": "examples/serve/alpaca.csv", "--policy": "vllm", "--flops": "1e14", "--bandwidth": "1TB",
    "--step-overhead": "0.01", "--generate": "alpaca", "--seed": "2", "--count": "7", "--rate": "3",
    "--method": "full", "--lora-r": "64", "--lora-targets": "q,v", "--lora-dropout": "0.1",
    "--freeze-layers": "4", "--optimizer": "sgd", "--precision": "fp32", "--device": "cpu", "--grads": "zero",
    "--foreach": "off", "--torch": "1.13", "--allocator": "pytorch-expandable", "--grad-accum": "4",
    "--checkpoint": "layers", "--attention": "eager", "--strategy": "zero3", "--top": "1",
    "--batch-dim": "seq", "--dim": "seq=64", "--keep": "precision", "--emit": "checkpoint",
    "--loss": "mse", "--frozen": "conv1", "--step": "first", "--dtype": "fp16", "--weights-dtype": "int8",
    "--activations-dtype": "fp16", "--validate": "tests/data/plans/repeated_raises_plan.csv", "--time-limit": "0",
    "--solver": "heuristic", "--alignment": "4096", "--threads": "1", "--current": "pytorch-expandable",
}
# Values that depend on the command.
VALUES_FOR = {
    ("finetune", "--quant"): "int8",
    ("finetune", "--gpu"): "24GiB",
    ("finetune", "--strategy"): "zero3",
    ("fit", "--checkpoint"): "layer1",
    ("train", "--checkpoint"): "layer1",
    ("fit", "--gpu"): "2GiB",
    ("fit", "--optimizer"): "sgd",
    ("fit", "--precision"): "amp-bf16",
    ("train", "--precision"): "amp-bf16",
    ("fit", "--batch"): "4",
    ("train", "--batch"): "4",
    ("fit", "--gpus"): "4",
    ("fit", "--dim"): "batch=4",
    ("train", "--dim"): "batch=4",
    ("serve-sim", "--engine"): "ollama",
    ("serve-sim", "--gpu"): "40GiB",
    ("serve-sim", "--context"): "8192",
    ("serve-sim", "--batch"): "2",
    ("llm", "--kv-dtype"): "q8_0",
}
# And on the variant: a generated trace is cut to a shorter context.
VALUES_FOR_VARIANT = {("serve-sim", "generate", "--context"): "512", ("llm", "vllm", "--quant"): "awq",
                      ("llm", "vllm", "--kv-dtype"): "fp8"}
# Flags that change how fast an answer comes, never the answer: the plan
# tests check that the answer is the same (tests/plan).
SPEED_ONLY = {("plan", "--threads")}
# Flags whose effect this variant's input cannot show (a limit the search
# ends before, a check the input passes); the variant named beside each
# shows it, and there the flag is checked.
NO_EFFECT_HERE = {
    ("plan", "onnx", "--time-limit"): "replay [trace]",
    ("plan", "csv", "--time-limit"): "replay [trace]",
    ("plan", "onnx", "--solver"): "plan [hard csv]",
    ("plan", "csv", "--solver"): "plan [hard csv]",
    ("plan", "onnx", "--alignment"): "plan [csv]",
    ("plan", "hard csv", "--alignment"): "plan [csv]",  # its buffers are pinned at offsets of their own
    ("report", "onnx", "--time-limit"): "replay [trace]",
    ("replay", "trace", "--strict"): "replay [damaged trace]",
    ("trace stats", "trace", "--strict"): "trace stats [damaged trace]",
    ("llm", "ollama", "--pcie"): "llm [llama.cpp]",  # at ollama's 4-bit default every layer fits: nothing streams
}
# Flags whose value is a file or folder to write: writing it is the change.
FILE_FLAGS = {"--html", "--trace", "-o", "--output", "--output-dir"}


# Durations and search-node counts vary from run to run: a flag is not
# "changing the output" by them.
VARYING = re.compile(rb"[0-9][0-9.,]* ?(ms|s|us|nodes?)\b|\"(seconds|elapsed_s|[a-z_]*_ms|nodes)\": [0-9.e+-]+")


def run(gpumem, args, cwd, written=None):
    """Exit status, stdout (and the file `written`, which the run replaces), stderr."""
    r = subprocess.run([gpumem] + args, cwd=cwd, capture_output=True, timeout=300)
    out = r.stdout
    if written and os.path.exists(written):
        with open(written, "rb") as f:
            out += f.read()
        os.remove(written)
    return r.returncode, VARYING.sub(b"~", out), r.stderr.decode(errors="replace")


def flag_table(gpumem, cwd):
    code, out, err = run(gpumem, ["flag-table"], cwd)
    if code != 0:
        sys.exit("flag-table failed: " + err)
    flags = {}
    for row in out.decode().splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        command = cells[0].strip("`")[len("gpumem "):]
        names = cells[1].strip("`").split(", ")
        flags.setdefault(command, []).append((names[-1], cells[2]))
    return flags


def present(base, flag):
    return flag in base.split() or flag == "MODEL" and len(base.split()) > 1 and not base.split()[1].startswith("-")


def check_no_effect_table():
    named = {f"{c} [{v}]" for c, v, _ in VARIANTS}
    for key, where in NO_EFFECT_HERE.items():
        if where not in named:
            sys.exit(f"flag_matrix.py: NO_EFFECT_HERE sends {key} to '{where}', which is no variant")


def main():
    check_no_effect_table()
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpumem", required=True)
    parser.add_argument("--source", required=True)
    a = parser.parse_args()
    gpumem = os.path.abspath(a.gpumem)
    table = flag_table(gpumem, a.source)
    silent, checked, refused = [], 0, 0
    scratch = tempfile.mkdtemp(prefix="gpumem_flag_matrix_")
    try:
        oom = os.path.join(scratch, "oom.txt")
        with open(oom, "w") as f:
            f.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
                    "capacity of 79.15 GiB of which 17.31 MiB is free. Of the allocated memory 72.50 GiB is "
                    "allocated by PyTorch, and 6.00 GiB is reserved by PyTorch but unallocated.\n")
        # A trace with one event that makes no sense (a [memory] event of 0
        # bytes, neither an allocation nor a free): what --strict is for.
        damaged = os.path.join(scratch, "damaged.json")
        with open(os.path.join(a.source, TRACE)) as f:
            doc = json.load(f)
        doc["traceEvents"].append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
                                   "tid": 1, "ts": 1796062679999999.0,
                                   "args": {"Total Reserved": 0, "Total Allocated": 0, "Bytes": 0,
                                            "Addr": 12345, "Device Id": 0, "Device Type": 1}})
        with open(damaged, "w") as f:
            json.dump(doc, f)
        for command, variant, base in VARIANTS:
            report = os.path.join(scratch, "report.html")
            base = base.replace("OOM_MESSAGE", oom).replace("REPORT", report).replace("DAMAGED", damaged)
            base_args = base.split()
            expected = run(gpumem, base_args, a.source, report)
            for flag, kind in table[command]:
                if (not flag.startswith("-") or flag in base_args or flag == "--json" or (command, flag) in SPEED_ONLY
                        or (command, variant, flag) in NO_EFFECT_HERE):
                    continue  # positional arguments, flags the variant sets, and --json (tested everywhere)
                args = list(base_args)
                target = None
                if flag in FILE_FLAGS:
                    target = os.path.join(scratch, f"{command}_{flag.strip('-')}_{variant}".replace(".", "_"))
                    args += [flag, target]
                elif kind == "":
                    args += [flag]
                else:
                    value = VALUES_FOR_VARIANT.get((command, variant, flag),
                                                   VALUES_FOR.get((command, flag), VALUES.get(flag)))
                    if value is None:
                        silent.append(f"{command} [{variant}] {flag}: no sample value in flag_matrix.py")
                        continue
                    if flag == "--emit":
                        args += ["--output-dir", scratch]
                    args += [flag, value]
                got = run(gpumem, args, a.source, report)
                checked += 1
                line = " ".join(args)
                if got[0] == 2:
                    lines = got[2].strip().splitlines()
                    names = [flag] + [n for n in ("--output-dir",) if n in args]
                    if len(lines) != 1 or not any(n in lines[0] for n in names):
                        silent.append(f"{command} [{variant}] {flag}: refused, but not in one line naming it: "
                                      f"{got[2].strip()!r}  ({line})")
                    refused += 1
                    continue
                wrote = target is not None and os.path.exists(target) or (
                    flag == "--emit" and os.path.exists(os.path.join(scratch, "checkpoint.py")))
                if wrote:
                    for leftover in (target, os.path.join(scratch, "checkpoint.py")):
                        if leftover and os.path.isfile(leftover):
                            os.remove(leftover)
                    continue
                if got[0] == expected[0] and got[1] == expected[1]:
                    silent.append(f"{command} [{variant}] {flag}: accepted and changes nothing  ({line})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"flag matrix: {checked} flag runs over {len(VARIANTS)} command variants, {refused} refused, "
          f"{len(silent)} silent")
    for s in silent:
        print("  SILENT " + s)
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())
