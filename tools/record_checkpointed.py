#!/usr/bin/python3
"""Records real training steps under activation checkpointing (ground truth for
`gpumem train MODEL --checkpoint MOD1,MOD2 ...`).

    /usr/bin/python3 tools/record_checkpointed.py                  # both configurations
    /usr/bin/python3 tools/record_checkpointed.py --only NAME ...  # some of them
    /usr/bin/python3 tools/record_checkpointed.py --counts NAME ... # op-call counts per phase of any trace
    /usr/bin/python3 tools/record_checkpointed.py --dump NAME      # allocation list (record_training's)

m_resnet18_cseq2/3/4 use torch.utils.checkpoint.checkpoint_sequential over
resnet18's top-level children instead (install_sequential says how); their
facts add the checkpoint_sequential_* fields, "split" and "gpumem".

Same protocol as tools/record_training.py, whose record_one() does the
recording unchanged (fresh subprocess, seed 0, one thread, profiler on from
model construction, two warm-up iterations, iteration 3 profiled with the
gpumem:* ranges, same facts fields), with three differences:

  - after build(), each listed module's `forward` is replaced by a function
    that, in training, calls torch.utils.checkpoint.checkpoint(original bound
    forward, *tensor args) (torch 1.13's default: reentrant, preserve_rng_state
    =True); keyword arguments (TransformerEncoderLayer's src_mask=None,
    src_key_padding_mask=None) are bound by a closure, since 1.13's reentrant
    checkpoint takes no kwargs;
  - no ONNX is exported (the graph is the base configuration's): the facts'
    "onnx" section says "same_graph_as" and keeps the base graph's
    initializer list; "checkpoint" lists the modules;
  - the facts gain "op_calls": per gpumem phase, the calls of aten::convolution,
    aten::linear, aten::addmm, aten::bmm, aten::matmul, counted on the
    profiler's full event tree of the step ("all_events") and on the operators
    the written trace keeps ("in_trace": record_training keeps only operators
    under which memory events happen). The recomputation shows as forward ops
    inside the backward phase.

After the step it checks that every parameter of the checkpointed modules has
a .grad (the loss backpropagates through the checkpoints).

What the recordings show (torch 1.13 CPU; `--dump NAME` lists every event;
compared with `gpumem train ... --checkpoint ... --device cpu`):

  resnet18_sgd_ckpt       recorded peak 279541960 (backward, layer1.1's segment,
                          conv2's convolution_backward, event 1142); the
                          non-checkpointed step's is 308932040.
  transformer_adamw_ckpt  recorded peak  91719272 (backward, encoder.layers.0's
                          segment, linear2's AddmmBackward0, event 916); the
                          non-checkpointed step's is 176379872.

  - forward: a segment runs under no_grad, its intermediates die at once; only
    its input stays (saved by CheckpointFunction), plus torch.get_rng_state()
    (5056 B, ctx.fwd_cpu_state) per segment, which lives until the whole
    backward ends (freed with the graph, after the last segment's backward),
    not until its own segment's backward.
  - backward, per segment: fork_rng stashes another 5056 B during the recompute;
    the recomputed forward allocates as the normal forward does (mkldnn double
    buffers, BatchNorm stats, dropout masks; BatchNorm's running stats are
    updated a second time). Two tensors outlive their last use, until
    CheckpointFunctionBackward returns: the incoming gradient of the segment's
    output (its `args`) and the recomputed output (`outputs`), each one
    output-sized. The segment's saved input is freed then too (after the
    segment's first-layer weight gradient).
"""
import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import record_training as rt  # noqa: E402

OPS = ["aten::convolution", "aten::linear", "aten::addmm", "aten::bmm", "aten::matmul"]

CKPT_CONFIGS = {
    "resnet18_sgd_ckpt": dict(base="resnet18_sgd",
                              checkpoint=["layer1.0", "layer1.1", "layer2.0", "layer2.1"]),
    "transformer_adamw_ckpt": dict(base="transformer_adamw",
                                   checkpoint=["encoder.layers.0", "encoder.layers.1",
                                               "encoder.layers.2", "encoder.layers.3"]),
    # The plans `gpumem fit --device cpu` makes: resnet18 (sgd-momentum) at
    # --budget 282MiB, the transformer (adamw) at --budget 100MiB.
    # "bn1..maxpool": one checkpoint around that run of siblings (wrap_run).
    "resnet18_sgd_fit282": dict(base="resnet18_sgd", checkpoint=["bn1..maxpool"]),
    "transformer_adamw_fit100": dict(base="transformer_adamw",
                                     checkpoint=["encoder.layers.0", "encoder.layers.1", "encoder.layers.2"]),
    # torch.utils.checkpoint.checkpoint_sequential over resnet18's top-level children (see
    # install_sequential); "checkpoint" is filled in with the modules of the checkpointed segments.
    "m_resnet18_cseq2": dict(base="resnet18_sgd", checkpoint=[], sequential=2),
    "m_resnet18_cseq3": dict(base="resnet18_sgd", checkpoint=[], sequential=3),
    "m_resnet18_cseq4": dict(base="resnet18_sgd", checkpoint=[], sequential=4),
}

RESNET_SEQUENTIAL = ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"]


def sequential_segments(n_modules, segments):
    """torch 1.13's checkpoint_sequential split: (module indices, checkpointed) per segment."""
    size = n_modules // segments
    out, end = [], -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        out.append((list(range(start, end + 1)), True))
    out.append((list(range(end + 1, n_modules)), False))  # the last segment runs normally
    return out


def install_sequential(model, segments):
    """model.forward -> checkpoint_sequential(Sequential(conv1 .. layer4), segments, x) + avgpool, flatten, fc.

    Two changes torch 1.13 forces, both recorded in the facts:
      - the input enters as x.detach().requires_grad_() (a fresh leaf each step, same storage): 1.13's
        checkpoint_sequential is reentrant only, and a reentrant checkpoint whose inputs do not require
        grad returns an output that does not either, so the first segment's (and, through it, every
        checkpointed segment's) parameters would silently get no gradient;
      - with 3 or 4 segments a checkpointed segment starts at the top-level ReLU, which is in place
        (torchvision's inplace=True): the recompute then runs it on the detached leaf input and fails
        ("a leaf Variable that requires grad is being used in an in-place operation"), so that ReLU
        is made out of place (model.relu.inplace = False) there; with 2 segments it stays in place.
    """
    import torch
    from torch.utils.checkpoint import checkpoint_sequential

    plan = sequential_segments(len(RESNET_SEQUENTIAL), segments)
    relu_inplace = not any(ck and RESNET_SEQUENTIAL[idx[0]] == "relu" for idx, ck in plan)
    model.relu.inplace = relu_inplace
    seq = torch.nn.Sequential(*[model.get_submodule(m) for m in RESNET_SEQUENTIAL])

    def forward(x):
        h = checkpoint_sequential(seq, segments, x.detach().requires_grad_())
        return model.fc(torch.flatten(model.avgpool(h), 1))

    model.forward = forward
    return {"checkpoint_sequential_segments": segments,
            "checkpoint_sequential_sequence": RESNET_SEQUENTIAL,
            "checkpoint_sequential_segment_modules": [[RESNET_SEQUENTIAL[i] for i in idx] for idx, _ in plan],
            "checkpoint_sequential_segment_checkpointed": [ck for _, ck in plan],
            "checkpoint_sequential_after": ["avgpool", "flatten", "fc"],
            "checkpoint_sequential_input_requires_grad": True,
            "top_level_relu_inplace": relu_inplace,
            "checkpoint": [RESNET_SEQUENTIAL[i] for idx, ck in plan if ck for i in idx]}

_state = {}


def spec_of(name):
    """A checkpointed configuration, or (for --plain) a base one with nothing checkpointed."""
    return CKPT_CONFIGS[name] if name in CKPT_CONFIGS else dict(base=name, checkpoint=[])


def wrap_checkpoint(module):
    """module.forward -> checkpoint(original bound forward, *args) in training."""
    import torch.utils.checkpoint

    orig = module.forward

    def forward(*args, **kwargs):
        if not module.training:
            return orig(*args, **kwargs)

        def run(*a):
            return orig(*a, **kwargs)

        return torch.utils.checkpoint.checkpoint(run, *args)

    module.forward = forward


def run_modules(model, entry):
    """The module names an entry covers: "layer1.0" itself, or every sibling of "FIRST..LAST" in between."""
    if ".." not in entry:
        return [entry]
    first, last = entry.split("..")
    parent_name = first.rpartition(".")[0]
    if last.rpartition(".")[0] != parent_name:
        raise SystemExit(f"{entry}: FIRST and LAST must be siblings")
    parent = model.get_submodule(parent_name) if parent_name else model
    names = [n for n, _ in parent.named_children()]
    a, b = names.index(first.rpartition(".")[2]), names.index(last.rpartition(".")[2])
    prefix = parent_name + "." if parent_name else ""
    return [prefix + n for n in names[a:b + 1]]


def wrap_run(model, entry):
    """One checkpoint around a run of siblings that their parent's forward calls one after another on
    one tensor (resnet's conv1, bn1, relu, maxpool), as `gpumem train --checkpoint FIRST..LAST` means:
    FIRST's forward runs the whole run under torch.utils.checkpoint, the others pass their input on."""
    import torch.utils.checkpoint

    run = [model.get_submodule(m) for m in run_modules(model, entry)]
    forwards = [m.forward for m in run]

    def run_all(x):
        for f in forwards:
            x = f(x)
        return x

    def forward(x):
        if not run[0].training:
            return run_all(x)
        return torch.utils.checkpoint.checkpoint(run_all, x)

    run[0].forward = forward
    for m in run[1:]:
        m.forward = lambda x: x


def install(name):
    """Patches record_training for the checkpointed configuration `name`."""
    spec = spec_of(name)
    base = spec["base"]
    rt.CONFIGS[name] = dict(rt.CONFIGS[base])
    orig_build = rt.build
    orig_chrome_lines = rt.chrome_lines
    orig_write = rt.write_atomically

    def build(n):
        model, optimizer, x, y, autocast = orig_build(base if n == name else n)
        if n == name:
            if spec.get("sequential"):
                _state["sequential"] = install_sequential(model, spec["sequential"])
            for mname in spec["checkpoint"]:
                if ".." in mname:
                    wrap_run(model, mname)
                else:
                    wrap_checkpoint(model.get_submodule(mname))
            _state["model"] = model
        return model, optimizer, x, y, autocast

    def chrome_lines(roots, pid):
        _state["all_events"] = count_event_tree(roots)
        return orig_chrome_lines(roots, pid)

    def export_onnx(n, model, x):
        import onnx
        data = (rt.OUT_DIR / f"{base}.onnx").read_bytes()
        proto = onnx.load_from_string(data)
        base_facts = json.loads((rt.OUT_DIR / f"{base}.facts.json").read_text())
        return data, base_facts["onnx"]["opset"], proto, base_facts["onnx"]["input_names"][0]

    def write_atomically(path, data):
        if str(path).endswith(".onnx"):
            return  # no export: the graph is the base configuration's
        orig_write(path, data)

    rt.build = build
    rt.chrome_lines = chrome_lines
    rt.export_onnx = export_onnx
    rt.write_atomically = write_atomically


def phase_of(stack_names):
    return next((s[len(rt.RANGE_PREFIX):] for s in stack_names if s.startswith(rt.RANGE_PREFIX)), "between")


def empty_counts():
    return {p: {op: 0 for op in OPS} for p in rt.PHASES + ["between"]}


def count_event_tree(roots):
    from torch._C._profiler import _EventType
    counts = empty_counts()

    def walk(event, stack):
        if event.tag != _EventType.TorchOp:
            return
        stack = stack + [event.name]
        if event.name in OPS:
            counts[phase_of(stack)][event.name] += 1
        for c in event.children:
            walk(c, stack)

    for r in roots:
        walk(r, [])
    return counts


def count_trace(path):
    """Per-phase op calls among the operators a written trace keeps."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ranges = [(float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"][len(rt.RANGE_PREFIX):])
              for e in spans if e["name"].startswith(rt.RANGE_PREFIX)]
    counts = empty_counts()
    for e in spans:
        if e["name"] in OPS:
            ts = float(e["ts"])
            ph = next((p for s, t, p in ranges if s <= ts <= t), "between")
            counts[ph][e["name"]] += 1
    return counts


def compact(counts):
    return {p: {op: n for op, n in c.items() if n} for p, c in counts.items() if any(c.values())}


def record(name, out_dir):
    install(name)
    rt.record_one(name, out_dir)
    model = _state["model"]
    spec = spec_of(name)
    seq = _state.get("sequential")
    if seq:
        spec = dict(spec, checkpoint=seq["checkpoint"])
    modules = [m for entry in spec["checkpoint"] for m in run_modules(model, entry)]
    missing = [f"{m}.{p}" for m in modules
               for p, t in model.get_submodule(m).named_parameters() if t.grad is None]
    if missing:
        raise SystemExit(f"{name}: parameters without .grad after the step: {missing}")
    n_params = sum(1 for m in modules for _ in model.get_submodule(m).parameters())
    facts_path = out_dir / f"{name}.facts.json"
    facts = json.loads(facts_path.read_text())
    base = spec["base"]
    facts["config"]["checkpoint"] = ("torch.utils.checkpoint.checkpoint(original bound forward, *tensor args) "
                                     "(reentrant, preserve_rng_state=True, torch 1.13's defaults) replacing "
                                     "each listed module's forward in training; kwargs bound by a closure")
    facts["checkpoint"] = spec["checkpoint"]
    if seq:
        facts["config"]["checkpoint"] = (
            "torch.utils.checkpoint.checkpoint_sequential(Sequential(conv1, bn1, relu, maxpool, layer1, layer2, "
            "layer3, layer4), segments, x.detach().requires_grad_()) (torch 1.13: reentrant, preserve_rng_state="
            "True; the last segment runs without checkpoint), then avgpool, flatten, fc; \"checkpoint\" lists "
            "the modules of the checkpointed segments")
        facts.update({k: v for k, v in seq.items() if k != "checkpoint"})
        facts["base_configuration"] = base
        facts["split"] = rt.M_SPLIT[name]
        g = rt.gpumem_settings(rt.CONFIGS[base])
        # Each checkpointed segment is one `--checkpoint FIRST..LAST` entry:
        # one torch.utils.checkpoint around a run of children.
        g["checkpoint"] = [f"{mods[0]}..{mods[-1]}" if len(mods) > 1 else mods[0]
                           for mods, ck in zip(seq["checkpoint_sequential_segment_modules"],
                                               seq["checkpoint_sequential_segment_checkpointed"]) if ck]
        g["args"] = g["args"] + ["--checkpoint", ",".join(g["checkpoint"])]
        facts["gpumem"] = g
    facts["checkpointed_parameters_with_grad"] = n_params
    onnx = facts["onnx"]
    onnx["file"] = f"{base}.onnx"
    onnx["same_graph_as"] = f"{base}.onnx"
    onnx["same_graph_note"] = "not exported again: checkpointing does not change the graph"
    facts["op_calls"] = {
        "note": "calls per gpumem phase in the profiled step; all_events: the profiler's full event tree; "
                "in_trace: the operators the written trace keeps (those enclosing memory events)",
        "all_events": compact(_state["all_events"]),
        "in_trace": compact(count_trace(out_dir / f"{name}.trace.json.gz")),
    }
    rt.write_atomically(facts_path, (json.dumps(facts, indent=1) + "\n").encode())
    print(f"  op calls (all events): {json.dumps(facts['op_calls']['all_events'])}")
    print(f"  op calls (in trace):   {json.dumps(facts['op_calls']['in_trace'])}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(CKPT_CONFIGS))
    parser.add_argument("--out", default=str(rt.OUT_DIR))
    parser.add_argument("--counts", nargs="+", metavar="NAME", help="op-call counts per phase of written traces")
    parser.add_argument("--dump", metavar="NAME")
    parser.add_argument("--plain", nargs="+", metavar="NAME", help="re-record base configurations (no "
                        "checkpointing) into --out (not tests/data/train) for their full-event op counts")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        rt.dump(args.dump)
        return 0
    if args.counts:
        for n in args.counts:
            p = Path(n) if Path(n).exists() else rt.OUT_DIR / f"{n}.trace.json.gz"
            print(f"{n}: {json.dumps(compact(count_trace(p)))}")
        return 0
    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.one:
        record(args.one, out_dir)
        return 0
    if args.plain and out_dir == rt.OUT_DIR.resolve():
        parser.error("--plain needs an --out other than tests/data/train")
    for name in args.plain or args.only or list(CKPT_CONFIGS):
        t = time.time()
        rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), "--one", name, "--out", str(out_dir)])
        print(f"  ({name}: {time.time() - t:.1f} s, rc {rc})", flush=True)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
