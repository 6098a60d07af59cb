#!/usr/bin/env python3
"""The hostile-input sweep (issue 34): every command that reads a file, run
on damaged and crafted variants of real inputs, on every other command's
inputs, on files with a great many members (a 150,000-tensor safetensors
and its index), and on one-node ONNX graphs whose dimensions sit at integer
edges.

Each run must end the way gpumem promises (README, docs/cli.md):
  * exit 0, 2 or 3 (4 for plan --validate): no signal, no internal error (1);
  * within --hang-seconds (10): a hang is killed and reported;
  * under --max-rss (1 GiB) of resident memory;
  * exit 2 is one line on stderr, starting "gpumem: error: ", naming the file;
  * a run that fails writes none of its output files;
  * a file of another command's kind is refused with the command that reads it;
  * a crafted graph's output has the shape ONNX's rules give (Python's
    integers are the oracle), or the run is refused: never a wrapped size.

Usage: sweep.py --gpumem build/gpumem --source . [--jobs N] [--scale K]
                [--json summary.json] [--keep DIR]
--scale multiplies the random variants per seed (1: the CI sweep, about
4,650 runs; 10 for a long one). Everything is seeded by the case's name, so
a failure printed as `name` is rebuilt with --only name --keep DIR.
"""

import argparse
import concurrent.futures
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutations  # noqa: E402
import onnx_craft  # noqa: E402

# The kinds of input, each with real seed files (paths from the source tree)
# and the commands that read it ({in}: the input, {out}: an output path the
# command must not leave behind when it fails). `mutate` picks the mutation
# families; `count` is the random variants per seed at --scale 1.
LLAMA = "examples/llm/llama-3-8b"
TIME = "/usr/bin/time"
KINDS = {
    "onnx": dict(
        seeds=[("examples/models/mobilenet_v2.onnx", "--batch 2"),
               ("examples/models/token_mlp_dynamic.onnx", "--dim batch=2,seq=8"),
               ("tests/data/train/resnet18_sgd.onnx", "--batch 2"), ("tests/data/train/gpt_adam.onnx", "")],
        suffix=".onnx", mutate={"binary"}, count=34,
        commands=["inspect {in} --json {flags}", "plan {in} {flags} -o {out}.csv",
                  "train {in} {flags} --html {out}.html", "fit {in} --gpu 8GiB {flags}", "weights {in}"]),
    "onnx_weights": dict(
        seeds=["/usr/share/libonnx-testdata/data/pytorch-operator/test_operator_conv/model.onnx"],
        suffix=".onnx", mutate={"binary"}, count=40,
        commands=["weights {in} --json", "quantize {in} {out}.gguf --type q8_0"]),
    "chrome_trace": dict(
        seeds=["tests/data/traces/leaky_mlp_train.json"],
        suffix=".json", mutate={"text", "gzip"}, count=60,
        commands=["trace stats {in} --json", "replay {in} --time-limit 0.2", "trace convert {in} --to csv -o {out}.csv",
                  "trace plan {in} -o {out}.json --time-limit 0.2", "report {in} -o {out}.html"]),
    "snapshot": dict(
        seeds=["tests/data/traces/snapshot_p2.pickle", "tests/data/traces/snapshot_oom.pickle",
               "tests/data/traces/snapshot_p4.pickle", "tests/data/traces/snapshot_legacy.pickle"],
        suffix=".pickle", mutate={"binary"}, count=40,
        commands=["trace stats {in} --json", "replay {in} --time-limit 0.2", "trace convert {in} --to jsonl -o {out}"]),
    "rmm_log": dict(
        seeds=["tests/data/traces/rmm_sample.csv"],
        suffix=".csv", mutate={"text"}, count=60,
        commands=["trace stats {in} --json", "replay {in} --time-limit 0.2", "trace convert {in} --to pytorch -o {out}"]),
    "gguf": dict(
        # gpumem quantize of tiny_llama.safetensors --type f16 --hf-config
        # tests/hostile/tiny_llama_config.json: a GGUF every reader accepts.
        seeds=["tests/data/weights/tiny_llama_f16.gguf"],
        suffix=".gguf", mutate={"binary"}, count=100,
        commands=["weights {in} --json", "quantize {in} {out}.gguf --type q4_k_m", "llm {in} --gpu 8GiB --json",
                  "finetune {in} --context 64 --json"]),
    "gguf_quantized": dict(
        seeds=["fuzz/corpus/gguf/seed_small.gguf", "fuzz/corpus/gguf/seed_one_q4_0.gguf",
               "fuzz/corpus/gguf/seed_aligned_64.gguf"],
        suffix=".gguf", mutate={"binary"}, count=40,
        commands=["weights {in} --json"]),
    "safetensors": dict(
        seeds=["tests/data/weights/tiny_llama.safetensors"],
        suffix=".safetensors", mutate={"binary", "safetensors"}, count=80,
        commands=["weights {in} --json", "quantize {in} {out}.gguf --type q4_k_m"]),
    "config": dict(
        seeds=[LLAMA + "/config.json", "tests/data/llm/configs/gemma-2-9b.json",
               "tests/data/llm/configs/phi-3-mini-4k-instruct.json"],
        suffix=".json", mutate={"text"}, count=40,
        commands=["llm {in} --gpu 24GiB --json", "llm {in} --gpu 80GiB --engine vllm --json",
                  "finetune {in} --context 256 --json"]),
    "plan_csv": dict(
        seeds=["examples/plans/gaps.csv", "fuzz/corpus/plan_csv/minimalloc_example.csv"],
        suffix=".csv", mutate={"text"}, count=50,
        commands=["plan {in} --time-limit 0.2 -o {out}.csv"]),
    "plan_with_offsets": dict(
        seeds=["tests/data/plans/repeated_raises_plan.csv", "fuzz/corpus/plan_csv/plan_aligned_crlf.csv"],
        suffix=".csv", mutate={"text"}, count=50,
        commands=["plan --validate {in}"]),
    "requests": dict(
        seeds=["examples/serve/bursty.csv", "fuzz/corpus/request_trace/jsonl"],
        suffix=".csv", mutate={"text"}, count=50,
        commands=["serve-sim {src}/" + LLAMA + " --gpu 24GiB --requests {in} --json"]),
    "oom_message": dict(
        seeds=["fuzz/corpus/oom_message"],  # a folder: every file in it
        suffix=".txt", mutate={"text"}, count=6,
        commands=["explain-oom {in} --json"]),
}

# The kinds each command reads besides its own (a seed of one of these given
# to it is no wrong kind).
TRACES = {"chrome_trace", "snapshot", "rmm_log", "plan_csv", "plan_with_offsets"}
READERS = {
    "weights": {"gguf", "gguf_quantized", "safetensors", "onnx_weights", "onnx"},
    "quantize": {"gguf", "gguf_quantized", "safetensors", "onnx_weights", "onnx"},
    "llm": {"config", "gguf", "gguf_quantized"},
    "finetune": {"config", "gguf", "gguf_quantized"},
    "plan": {"plan_csv", "plan_with_offsets", "onnx", "onnx_weights"},
    "inspect": {"onnx_weights"}, "train": {"onnx_weights"}, "fit": {"onnx_weights"},
    "trace": TRACES, "replay": TRACES,
    "report": TRACES | {"onnx", "onnx_weights"},
}

# Commands that read anything as text: another kind's file is "no message in
# it", not a wrong kind.
READS_ANY_TEXT = {"explain-oom"}


@dataclass
class Case:
    name: str
    args: list
    files: dict = field(default_factory=dict)  # relative path -> bytes
    outputs: list = field(default_factory=list)
    expect_kind_error: bool = False
    must_succeed: bool = False  # the seed itself: a seed that fails tests nothing
    oracle: object = None  # callable(result) -> problem or None


@dataclass
class Result:
    case: Case
    code: int
    seconds: float
    rss_kib: int
    stdout: str
    stderr: str
    leftovers: list


def seed_files(source, kind):
    """(path, flags) for each seed of a kind; a folder gives every file in it."""
    for seed in KINDS[kind]["seeds"]:
        seed, flags = seed if isinstance(seed, tuple) else (seed, "")
        path = seed if os.path.isabs(seed) else os.path.join(source, seed)
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                yield os.path.join(path, name), flags
        elif os.path.exists(path):
            yield path, flags
        else:
            sys.exit(f"sweep: seed {path} is missing (install-deps.sh installs libonnx-testdata)")


def command_args(template, input_path, out_path, flags="", source=""):
    words = template.replace("{flags}", flags).replace("{src}", source).split()
    return [a.replace("{in}", input_path).replace("{out}", out_path) for a in words]


def mutation_cases(source, scale):
    for kind, spec in KINDS.items():
        for seed, flags in seed_files(source, kind):
            content = open(seed, "rb").read()
            stem = os.path.basename(seed).replace(".", "_")
            count = spec["count"] * scale
            for variant, data in mutations.variants(content, spec["mutate"], count,
                                                     lambda i, s=stem: mutations.seeded(s, i)):
                for c, template in enumerate(spec["commands"]):
                    name = f"{kind}/{stem}/{variant}/{template.split()[0]}{c}"
                    rel = f"input{spec['suffix']}"
                    yield Case(name, command_args(template, "{dir}/" + rel, "{dir}/out", flags, source), {rel: data},
                               [o for o in ("out", "out.csv", "out.gguf", "out.json", "out.html") if "{out}" in template],
                               must_succeed=variant == "original")


def bomb_cases():
    bomb = mutations.gzip_bomb(80)
    for template in KINDS["chrome_trace"]["commands"][:2] + KINDS["rmm_log"]["commands"][:1]:
        yield Case(f"gzip_bomb/{template.split()[0]}", command_args(template, "{dir}/bomb.json.gz", "{dir}/out"),
                   {"bomb.json.gz": bomb}, ["out.csv", "out.json", "out.html"])


def wide_safetensors(n):
    """One shard of N four-byte tensors and the index naming each: a header
    parse quadratic in the member count took 865-1,369 s on 150,000."""
    names = [f"model.layers.{i // 100}.t{i % 100}.weight" for i in range(n)]
    header = json.dumps({name: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
                         for i, name in enumerate(names)}).encode()
    shard = struct.pack("<Q", len(header)) + header + bytes(4 * n)
    index = json.dumps({"metadata": {"total_size": 4 * n},
                        "weight_map": {name: "model-00001-of-00001.safetensors" for name in names}}).encode()
    return {"model-00001-of-00001.safetensors": shard, "model.safetensors.index.json": index}


def wide_cases():
    """Files with a great many members, to catch work that grows faster
    than the input (the 10 s limit is about 10 times the time they take)."""
    files = wide_safetensors(150_000)
    for rel in files:
        yield Case(f"wide/weights/{rel}", ["weights", "{dir}/" + rel], files, must_succeed=True)
        yield Case(f"wide/quantize/{rel}", ["quantize", "{dir}/" + rel, "{dir}/out.gguf", "--type", "f16"], files,
                   ["out.gguf"], must_succeed=True)


def cross_kind_cases(source):
    """Every seed given to every other kind's commands: refused, with the
    command that reads it."""
    for kind, spec in KINDS.items():
        seed, _ = next(seed_files(source, kind))
        for other, other_spec in KINDS.items():
            if other == kind:
                continue
            for c, template in enumerate(other_spec["commands"]):
                command = template.split()[0]
                accepts = kind in READERS.get(command, set())
                rel = "input" + spec["suffix"]
                yield Case(f"cross/{kind}->{other}/{command}{c}",
                           command_args(template, "{dir}/" + rel, "{dir}/out", "", source),
                           {rel: open(seed, "rb").read()}, ["out", "out.csv", "out.gguf", "out.json", "out.html"],
                           expect_kind_error=not accepts and command not in READS_ANY_TEXT)


def shape_oracle(output, shape):
    def check(result):
        if result.code == 2 and "would hold more than 1 EiB" in result.stderr:
            return None if shape is None or onnx_craft.bytes_of(shape) > (1 << 60) else "refused a size that fits"
        if result.code != 0:
            return None if shape is None else f"exit {result.code} on a valid graph: {result.stderr.strip()}"
        if shape is None:
            return "accepted a graph it should refuse"
        doc = json.loads(result.stdout)
        want_bytes = onnx_craft.bytes_of(shape)
        for tensor in doc["activations"]["largest"]:
            if tensor["name"] == output:
                want = "[" + ",".join(map(str, shape)) + "]"
                if tensor["shape"] != want or tensor["bytes"] != want_bytes:
                    return f"{output} is {tensor['shape']} ({tensor['bytes']} B), ONNX says {want} ({want_bytes} B)"
                return None
        # A constant-folded output is a derived weight.
        if doc["weights"]["derived"]["bytes"] != want_bytes:
            return f"{output} not found; derived weights {doc['weights']['derived']['bytes']} B, want {want_bytes} B"
        return None

    return check


def crafted_cases():
    for name, data, output, shape in onnx_craft.crafted_models():
        yield Case(f"crafted/{name}/inspect", ["inspect", "{dir}/model.onnx", "--json"], {"model.onnx": data},
                   oracle=shape_oracle(output, shape))
        yield Case(f"crafted/{name}/plan", ["plan", "{dir}/model.onnx", "-o", "{dir}/out.csv", "--time-limit", "0.2"],
                   {"model.onnx": data}, ["out.csv"])


def run_case(binary, case, workdir, hang_seconds):
    folder = tempfile.mkdtemp(dir=workdir)
    try:
        for rel, data in case.files.items():
            with open(os.path.join(folder, rel), "wb") as f:
                f.write(data)
        args = [binary] + [a.replace("{dir}", folder) for a in case.args]
        # /usr/bin/time measures the command alone: a child forked from this
        # (large) Python process would count Python's pages in its peak.
        rss_file = os.path.join(folder, ".rss")
        with open(os.path.join(folder, ".stdout"), "w+b") as out, open(os.path.join(folder, ".stderr"), "w+b") as err:
            start = time.monotonic()
            proc = subprocess.Popen([TIME, "-f", "%M", "-o", rss_file] + args, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, cwd=folder, start_new_session=True)
            timer = threading.Timer(hang_seconds, lambda: os.killpg(proc.pid, signal.SIGKILL))
            timer.start()
            proc.wait()
            timer.cancel()
            seconds = time.monotonic() - start
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode("utf-8", "replace")
            stderr = err.read().decode("utf-8", "replace")
        code = proc.returncode
        rss_kib = 0
        if os.path.exists(rss_file):
            text = open(rss_file).read().split()
            rss_kib = int(text[-1]) if text and text[-1].isdigit() else 0
            # time reports a signal as "Command terminated by signal N".
            if "signal" in text:
                code = -int(text[text.index("signal") + 1])
        if seconds >= hang_seconds:
            code = -signal.SIGKILL
        leftovers = [o for o in case.outputs if os.path.exists(os.path.join(folder, o))]
        return Result(case, code, seconds, rss_kib, stdout, stderr.replace(folder, "DIR"), leftovers)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def problems(result, hang_seconds, max_rss_kib):
    case, found = result.case, []
    if result.code < 0:
        found.append("hung" if result.seconds >= hang_seconds else f"signal {-result.code}")
    elif result.code not in (0, 2, 3, 4):
        found.append(f"exit {result.code}")
    if "internal error" in result.stderr:
        found.append("internal error")
    if result.rss_kib > max_rss_kib:
        found.append(f"{result.rss_kib // 1024} MiB resident")
    if result.code == 2:
        lines = result.stderr.rstrip("\n").split("\n")
        if not lines[-1].startswith("gpumem: error: "):
            found.append("exit 2 without 'gpumem: error: '")
        if any(not line.startswith("gpumem: ") for line in lines):
            found.append("stderr lines not from gpumem")
    # Exit 3 ("does not fit") still writes the HTML report that says why.
    left = [o for o in result.leftovers if not (result.code == 3 and o.endswith(".html"))]
    if result.code != 0 and left:
        found.append(f"left {', '.join(left)} behind after exit {result.code}")
    if case.must_succeed and result.code not in (0, 3):
        found.append(f"the unmodified seed fails (exit {result.code})")
    if case.expect_kind_error and result.code == 2 and "`gpumem " not in result.stderr:
        found.append("a file of another kind, refused without naming the command that reads it")
    if case.expect_kind_error and result.code == 0:
        found.append("read a file of another kind as its own")
    if case.oracle and result.code in (0, 2):
        problem = case.oracle(result)
        if problem:
            found.append(problem)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpumem", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--hang-seconds", type=float, default=10.0)
    parser.add_argument("--max-rss", type=int, default=1 << 30, help="bytes")
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--keep", help="copy each failing case's input here")
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--sanitized", action="store_true",
                        help="the binary is built with ASan or TSan: no memory limits, hangs at 60 s")
    opts = parser.parse_args()
    if not os.access(TIME, os.X_OK):
        sys.exit(f"sweep: {TIME} is missing (scripts/install-deps.sh installs the package time)")
    if opts.sanitized:
        # ASan reserves terabytes of address space and doubles resident memory.
        opts.max_rss = 1 << 50
        opts.hang_seconds = max(opts.hang_seconds, 60.0)
    else:
        # A runaway dies at 4 GiB (reported as a failure) rather than take the
        # machine; the commands inherit the limit.
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    binary = os.path.abspath(opts.gpumem)
    source = os.path.abspath(opts.source)

    cases = list(mutation_cases(source, opts.scale)) + list(bomb_cases()) + list(wide_cases()) + \
        list(cross_kind_cases(source)) + list(crafted_cases())
    if opts.only:
        cases = [c for c in cases if opts.only in c.name]
    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="gpumem-sweep-")
    results = []
    with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
        for result in pool.map(lambda c: run_case(binary, c, workdir, opts.hang_seconds), cases):
            results.append(result)
    shutil.rmtree(workdir, ignore_errors=True)

    failures = [(r, p) for r in results for p in [problems(r, opts.hang_seconds, opts.max_rss // 1024)] if p]
    by_command = {}
    for r in results:
        command = r.case.args[0] if r.case.args[0] != "trace" else "trace " + r.case.args[1]
        row = by_command.setdefault(command, {"runs": 0, "exit": {}, "max_seconds": 0.0, "max_rss_bytes": 0})
        row["runs"] += 1
        row["exit"][str(r.code)] = row["exit"].get(str(r.code), 0) + 1
        row["max_seconds"] = round(max(row["max_seconds"], r.seconds), 3)
        row["max_rss_bytes"] = max(row["max_rss_bytes"], r.rss_kib * 1024)
    print(f"{'command':<16} {'runs':>5}  {'exit 0/2/3/other':<18} {'slowest':>8} {'max RSS':>9}")
    for command, row in sorted(by_command.items()):
        exits = row["exit"]
        other = sum(n for code, n in exits.items() if code not in ("0", "2", "3"))
        print(f"{command:<16} {row['runs']:>5}  {exits.get('0', 0):>4}/{exits.get('2', 0):>4}/{exits.get('3', 0):>3}/{other:<4}"
              f" {row['max_seconds']:>7.2f}s {row['max_rss_bytes'] / (1 << 20):>6.0f} MiB")
    print(f"{len(results)} runs in {time.monotonic() - started:.1f} s, {len(failures)} failing")
    for r, found in failures[:60]:
        print(f"FAIL {r.case.name}: {'; '.join(found)} (exit {r.code}, {r.seconds:.2f} s): "
              f"{r.stderr.strip()[-300:]!r}")
        if opts.keep:
            target = os.path.join(opts.keep, r.case.name.replace("/", "__"))
            os.makedirs(target, exist_ok=True)
            for rel, data in r.case.files.items():
                open(os.path.join(target, rel), "wb").write(data)
            open(os.path.join(target, "command"), "w").write(" ".join(r.case.args) + "\n")
    if opts.json:
        summary = {"runs": len(results), "failures": [{"case": r.case.name, "problems": p} for r, p in failures],
                   "by_command": by_command}
        tmp = opts.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(summary, f, indent=1)
        os.replace(tmp, opts.json)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
