#!/usr/bin/env python3
"""Every command's output on the bundled examples, to show that a change of
structure changed no figure (issue 45: "every JSON output on the bundled
examples is byte-identical before and after").

  tools/same_outputs.py record BIN DIR    run the commands below with BIN, one file each in DIR
  tools/same_outputs.py compare A B       two binaries (or two recorded DIRs): every output, byte for byte

Each run keeps its exit code, stdout (JSON with --json, else the text
report, then its stderr) and any file it writes. Wall-clock figures
("replay_seconds", "solve_seconds", the solver's time in `plan`'s and
`replay`'s text) are
the only bytes blanked: they time this machine, not the answer. (`exporter
--once --simulate` is left out: what it shows depends on how far the
simulated job has run when it is read.) Runs from the repository root.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

# name -> arguments. {out} is a scratch folder for files a command writes.
LLAMA = "examples/llm/llama-3-8b"
RUNS = {
    # inspect
    "inspect_bert": ["inspect", "examples/models/bert_base.onnx", "--json"],
    "inspect_resnet50_b8": ["inspect", "examples/models/resnet50.onnx", "--batch", "8", "--json"],
    "inspect_mobilenet": ["inspect", "examples/models/mobilenet_v2.onnx", "--json"],
    "inspect_dynamic": ["inspect", "examples/models/token_mlp_dynamic.onnx", "--dim", "batch=8,seq=512", "--json"],
    "inspect_bert_text": ["inspect", "examples/models/bert_base.onnx", "--top", "3"],
    "inspect_bad": ["inspect", "examples/bad/truncated.onnx", "--json"],
    # plan
    "plan_gaps": ["plan", "examples/plans/gaps.csv", "--json"],
    "plan_gaps_text": ["plan", "examples/plans/gaps.csv"],
    "plan_bert": ["plan", "examples/models/bert_base.onnx", "--json"],
    "plan_bert_100mib": ["plan", "examples/models/bert_base.onnx", "--gpu", "100MiB", "--json"],
    "plan_mobilenet": ["plan", "examples/models/mobilenet_v2.onnx", "--json"],
    "plan_validate": ["plan", "tests/data/plans/repeated_raises.csv", "--validate", "tests/data/plans/repeated_raises_plan.csv", "--json"],
    # traces
    "trace_stats_resnet18": ["trace", "stats", "tests/data/traces/resnet18_train.json", "--json"],
    "trace_stats_leaky": ["trace", "stats", "tests/data/traces/leaky_mlp_train.json", "--json"],
    "trace_stats_snapshot_oom": ["trace", "stats", "tests/data/traces/snapshot_oom.pickle", "--json"],
    "trace_stats_rmm": ["trace", "stats", "tests/data/traces/rmm_sample.csv", "--json"],
    "trace_stats_3iter": ["trace", "stats", "tests/data/traces/resnet18_adamw_3iter.json.gz", "--json"],
    "trace_convert_perfetto": ["trace", "convert", "tests/data/traces/resnet18_train.json", "--to", "perfetto", "-o", "{out}/resnet18.perfetto.json"],
    "trace_convert_pytorch": ["trace", "convert", "tests/data/traces/resnet18_train.json", "--to", "pytorch", "-o", "{out}/resnet18.pickle"],
    "trace_convert_jsonl": ["trace", "convert", "tests/data/traces/rmm_sample.csv", "--to", "jsonl", "-o", "{out}/rmm.jsonl"],
    "trace_plan": ["trace", "plan", "tests/data/traces/resnet18_adamw_3iter.json.gz", "-o", "{out}/plan.json"],
    "replay_resnet18": ["replay", "tests/data/traces/resnet18_train.json", "--json"],
    "replay_resnet18_text": ["replay", "tests/data/traces/resnet18_train.json"],
    "replay_3iter_planned": ["replay", "tests/data/traces/resnet18_adamw_3iter.json.gz", "--policy", "gpumem,pytorch,gpumem-planned", "--json"],
    "replay_gpu": ["replay", "tests/data/traces/transformer_train.json", "--gpu", "64MiB", "--json"],
    "replay_rmm": ["replay", "tests/data/traces/rmm_sample.csv", "--json"],
    "replay_snapshot": ["replay", "tests/data/traces/snapshot_p4.pickle", "--json"],
    # training
    "train_resnet18": ["train", "tests/data/train/resnet18_sgd.onnx", "--optimizer", "sgd-momentum", "--json"],
    "train_resnet18_cpu": ["train", "tests/data/train/resnet18_sgd.onnx", "--device", "cpu", "--optimizer", "sgd-momentum", "--json"],
    "train_resnet18_expandable": ["train", "tests/data/train/resnet18_sgd.onnx", "--allocator", "pytorch-expandable", "--json"],
    "train_resnet18_gpumem": ["train", "tests/data/train/resnet18_sgd.onnx", "--allocator", "gpumem", "--precision", "amp-bf16", "--json"],
    "train_transformer": ["train", "tests/data/train/transformer_adamw_dynamic.onnx", "--device", "cpu", "--batch", "8", "--json"],
    "train_gpt_trace": ["train", "tests/data/train/gpt_adam.onnx", "--json", "--trace", "{out}/gpt_step.jsonl"],
    "train_text": ["train", "tests/data/train/resnet18_sgd.onnx", "--device", "cpu", "--optimizer", "sgd-momentum", "--top", "3"],
    "fit_resnet18_1gib": ["fit", "tests/data/train/resnet18_sgd.onnx", "--optimizer", "sgd-momentum", "--gpu", "1GiB", "--json"],
    "fit_resnet18_282": ["fit", "tests/data/train/resnet18_sgd.onnx", "--device", "cpu", "--optimizer", "sgd-momentum", "--gpu", "282MiB", "--keep", "precision", "--json"],
    "fit_resnet18_small": ["fit", "tests/data/train/resnet18_sgd.onnx", "--gpu", "300MiB", "--json"],
    "fit_max_batch": ["fit", "tests/data/train/resnet18_sgd.onnx", "--gpu", "2GiB", "--max-batch", "--keep", "precision,optimizer,checkpoint,offload,batch", "--json"],
    "fit_text": ["fit", "tests/data/train/resnet18_sgd.onnx", "--optimizer", "sgd-momentum", "--gpu", "1GiB"],
    "fit_trace": ["fit", "tests/data/train/gpt_adam.onnx", "--gpu", "1GiB", "--json", "--trace", "{out}/fit_step.jsonl"],
    # weights and language models
    "weights_resnet50": ["weights", "examples/models/resnet50.onnx", "--json"],
    "weights_tiny_llama": ["weights", "tests/data/weights/tiny_llama.safetensors", "--json"],
    "quantize_tiny_llama": ["quantize", "tests/data/weights/tiny_llama.safetensors", "{out}/tiny.q4_k_m.gguf", "--type", "q4_k_m", "--json"],
    "llm_24gib": ["llm", LLAMA, "--gpu", "24GiB", "--json"],
    "llm_8gib_q4": ["llm", LLAMA, "--gpu", "8GiB", "--context", "16384", "--quant", "q4_k_m", "--kv-dtype", "q8_0", "--json"],
    "llm_2gpus": ["llm", LLAMA, "--gpu", "12GiB", "--gpus", "2", "--json"],
    "llm_vllm": ["llm", LLAMA, "--engine", "vllm", "--gpu", "24GiB", "--context", "8192", "--concurrency", "8", "--json"],
    "llm_ollama": ["llm", LLAMA, "--engine", "ollama@0.6.0", "--gpu", "16GiB", "--json"],
    "llm_text": ["llm", LLAMA, "--gpu", "16GiB"],
    "finetune_qlora": ["finetune", LLAMA, "--method", "qlora", "--seq", "4096", "--checkpointing", "layers", "--gpu", "24GiB", "--json"],
    "finetune_lora": ["finetune", LLAMA, "--method", "lora", "--seq", "2048", "--gpu", "80GiB", "--json"],
    "finetune_full": ["finetune", LLAMA, "--method", "full", "--seq", "1024", "--gpu", "80GiB", "--json"],
    "finetune_text": ["finetune", LLAMA, "--method", "qlora", "--seq", "4096", "--checkpointing", "layers", "--gpu", "24GiB", "--top", "3"],
    "serve_sim_bursty": ["serve-sim", "--model", LLAMA, "--gpu", "19GiB", "--requests", "examples/serve/bursty.csv", "--json"],
    "serve_sim_sharegpt": ["serve-sim", "--model", LLAMA, "--gpu", "24GiB", "--requests", "examples/serve/sharegpt.csv", "--json"],
    "serve_sim_prefix": ["serve-sim", "--model", LLAMA, "--gpu", "24GiB", "--requests", "examples/serve/system-prompt.csv", "--json"],
    # the rest
    "report_trace": ["report", "tests/data/traces/resnet18_train.json", "-o", "{out}/trace.html"],
    "report_model": ["report", "examples/models/bert_base.onnx", "-o", "{out}/model.html"],
    "report_train": ["report", "tests/data/train/resnet18_sgd.onnx", "-o", "{out}/train.html"],
}

# Wall-clock figures: blanked before comparing.
CLOCKS = re.compile(rb'("(?:replay_seconds|solve_seconds|optimal_seconds|seconds)"\s*:\s*)[-0-9.eE+]+')
# The text reports' clocks: "Solver      heuristic:size/best-fit, 0.02 ms"
# (plan), "the planner packs it in 104.19 MiB (optimal, proven, 0.03 s)" (replay).
SOLVER_CLOCK = re.compile(rb"^(Solver .*, )[0-9.]+ (?:ms|s)$", re.M)
PLANNER_CLOCK = re.compile(rb"(the planner packs it in [^(\n]*\([^)\n]*, )[0-9.]+ s\)")


def blank_clocks(data):
    data = CLOCKS.sub(rb"\g<1>0", data)
    return PLANNER_CLOCK.sub(rb"\g<1>0 s)", SOLVER_CLOCK.sub(rb"\g<1>0 ms", data))


def oom_messages():
    """explain-oom on each public message of tests/data/oom/messages.json, from stdin."""
    messages = json.loads(pathlib.Path("tests/data/oom/messages.json").read_text())["messages"]
    runs = {}
    for i, m in enumerate(messages):
        runs[f"explain_oom_{i:02d}"] = (["explain-oom", "--json"], m["text"])
    runs["explain_oom_text"] = (["explain-oom"], messages[0]["text"])
    return runs


def family_runs():
    """`llm` (llama.cpp's rules and ollama's estimate) and `finetune` on every
    model family the tests carry: what the families' table decides."""
    runs = {}
    configs = sorted(pathlib.Path("tests/data/llm/configs").glob("*.json"))
    configs += sorted(pathlib.Path("tests/data/finetune/models").glob("*/config.json"))
    for c in configs:
        name = c.stem if c.name != "config.json" else c.parent.name
        runs[f"family_llm_{name}"] = (["llm", str(c), "--gpu", "24GiB", "--context", "8192", "--json"], None)
        runs[f"family_ollama_{name}"] = (["llm", str(c), "--engine", "ollama@0.9.0", "--gpu", "24GiB", "--context",
                                         "8192", "--json"], None)
        runs[f"family_finetune_{name}"] = (["finetune", str(c), "--method", "lora", "--seq", "512", "--gpu", "80GiB",
                                           "--json"], None)
    return runs


def record(gpumem, folder):
    folder = pathlib.Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    env = dict(os.environ, GPUMEM_NO_PROGRESS="1")
    runs = {name: (args, None) for name, args in RUNS.items()} | oom_messages() | family_runs()
    for name, (args, stdin) in runs.items():
        with tempfile.TemporaryDirectory() as out:
            argv = [gpumem] + [a.replace("{out}", out) for a in args]
            p = subprocess.run(argv, capture_output=True, env=env, timeout=600,
                               input=stdin.encode() if stdin is not None else b"")
            text = b"exit %d\n" % p.returncode + blank_clocks(p.stdout + b"-- stderr\n" + p.stderr)
            text = text.replace(out.encode(), b"{out}")
            (folder / f"{name}.out").write_bytes(text)
            for f in sorted(pathlib.Path(out).iterdir()):
                data = f.read_bytes()
                if f.suffix in (".json", ".html", ".jsonl"):
                    data = blank_clocks(data)
                (folder / f"{name}.{f.name}").write_bytes(data)


def compare(a, b):
    a, b = pathlib.Path(a), pathlib.Path(b)
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = 0
    for n in names:
        x = (a / n).read_bytes() if (a / n).exists() else None
        y = (b / n).read_bytes() if (b / n).exists() else None
        same = x == y
        differ += not same
        print(f"{'same   ' if same else 'DIFFERS'} {n}" + ("" if same else f" ({len(x or b'')} and {len(y or b'')} bytes)"))
    print(f"{len(names) - differ} of {len(names)} outputs byte-identical")
    return 1 if differ else 0


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("record", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "record":
        record(os.path.abspath(sys.argv[2]), sys.argv[3])
        return 0
    dirs = []
    for i, x in enumerate(sys.argv[2:]):
        if os.path.isdir(x):
            dirs.append(x)
        else:
            d = tempfile.mkdtemp(prefix=f"gpumem-outputs-{i}-")
            record(os.path.abspath(x), d)
            dirs.append(d)
    return compare(*dirs)


if __name__ == "__main__":
    sys.exit(main())
