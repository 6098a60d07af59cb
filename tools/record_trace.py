#!/usr/bin/env python3
"""Records real torch.profiler memory traces for gpumem's tests.

Run by hand, not by CI (Debian's python3-torch 1.13 and python3-torchvision
0.14, CPU only, are enough):

    /usr/bin/python3 tools/record_trace.py            # rewrites tests/data/traces/*.json
    /usr/bin/python3 tools/record_trace.py --out DIR  # somewhere else

Each trace is two training iterations (forward, backward, optimizer step)
under PyTorch's profiler with profile_memory on:

  resnet18_train.json     torchvision's resnet18 (10 classes), batch 2 at
                          32x32, SGD with momentum: 2 iterations (the
                          first also creates the momentum buffers)
  transformer_train.json  a 1-layer nn.TransformerEncoder (d_model 32),
                          batch 4 x 16 tokens, Adam: 2 iterations
  resnet18_adamw_3iter.json.gz  (--only resnet18_adamw) resnet18 as
                          above with AdamW, 3 iterations, with_stack and
                          record_shapes on: Python frames are written as
                          Kineto's "python_function" spans
  mlp_no_memory.json      (--only no_memory) an MLP step recorded with
                          profile_memory off: operators, no [memory]
  vit_b16_adamw_2iter.json.gz  (--only vit_b16) torchvision's ViT-B/16
                          (10 classes), batch 2 at 224x224, AdamW: 2
                          iterations
  vit_b16_adamw_3iter.json.gz  (--only vit_b16_3iter) the same, 3
                          iterations, each a "ProfilerStep#N" range
  bert_infer_dynamic.json.gz  (--only inference) a BERT-base-sized
                          encoder (12 layers, d_model 768, 12 heads, fp32),
                          built inside the recording, then inference under
                          no_grad at 8 (batch, tokens) shapes in turn, as a
                          server with dynamic batching sees them; each
                          call inside a "ProfilerStep#N" range, as
                          torch.profiler's prof.step() marks steps
  resnet50_infer_batches.json.gz  (--only inference) torchvision's
                          resnet50, built inside the recording, inference
                          at batches 8, 32, 16, 24, 4 (224x224), each a
                          "ProfilerStep#N" range
  leaky_mlp_train.json    a 2-layer MLP, batch 64, SGD: 6 iterations, each
                          keeping its hidden features (128 KiB) in a list:
                          the steady leak `gpumem trace stats` must find

The files have the layout of torch.profiler's Chrome trace export (Kineto's
JSON): {"schemaVersion": 1, "traceEvents": [...]} where operators are "X"
events with "cat": "cpu_op" ("user_annotation" for record_function
ranges), "ts" and "dur" in microseconds, and every allocation and free is
a "[memory]" instant ("ph": "i", "s": "t") with args "Total Reserved", "Total Allocated", "Bytes" (negative on free),
"Addr", "Device Id" and "Device Type" (c10::DeviceType: 0 CPU, 1 CUDA),
the fields and names of PyTorch's torch/csrc/autograd/profiler_kineto.cpp.

Why not prof.export_chrome_trace(): Debian builds PyTorch without Kineto,
and without it the export is the legacy format, which has no [memory]
events. So this script drives the profiler's low-level API (the one
torch.autograd.profiler.profile uses: _prepare_profiler, _enable_profiler,
_disable_profiler) and writes the JSON itself from the recorded event
tree (_ProfilerResult.experimental_event_tree()): operators are TorchOp
nodes with their start and duration, allocations are Allocation nodes with
ptr, alloc_size, total_allocated, total_reserved and device, recorded by
the same profiler code Kineto would export. Times are written as
microseconds with three decimals (exact nanoseconds), as newer Kineto does;
memory events follow the operators, as in PyTorch 1.10's Kineto export,
so a reader cannot rely on spans coming first or last.

"Total Allocated" is the profiler's count of the bytes it saw allocated
and not yet freed while memory profiling was on, in this process: memory
allocated in an earlier profiling session and freed while profiling was
off still counts. transformer_train.json, recorded after
resnet18_train.json in the same process, shows it: it starts from the
resnet's gradients and momentum buffers (89,453,136 bytes), freed between
the two recordings. Within a trace, the first event's Total Allocated
minus its Bytes, plus every event's Bytes so far, gives each event's
Total Allocated exactly.

To keep the files small, operators whose subtree holds no memory event are
left out (they can tag nothing), and "args" of operators keep only
"External id" (numbered from 1 in start order, as Kineto's correlation
ids are small integers). Everything else is as recorded.

Addresses and times differ on every run: after regenerating, update the
exact first and last events that tests/trace/test_formats.cpp checks (its
tag counts and totals stay the same unless PyTorch changes).
"""
import argparse
import gzip
import json
import os
import sys

import torch
from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler
from torch._C._profiler import (
    ProfilerActivity,
    ProfilerConfig,
    ProfilerState,
    RecordScope,
    _EventType,
    _ExperimentalConfig,
)

# c10::DeviceType numbering, which the Kineto export writes as "Device Type".
DEVICE_TYPES = {"cpu": 0, "cuda": 1}


def record(step, iterations, profile_memory=True, with_stack=False, profiler_steps=False):
    """Runs step() `iterations` times under the profiler; returns the event tree's roots.

    profiler_steps: each step inside a "ProfilerStep#N" range, as
    torch.profiler.profile.step() opens one (a record_function of that
    name, N from 0), so the trace marks where its iterations begin.
    """
    config = ProfilerConfig(
        ProfilerState.KINETO,
        with_stack,  # report_input_shapes (profile(record_shapes=True) goes with stacks here)
        profile_memory,
        with_stack,
        False,  # with_flops
        False,  # with_modules
        _ExperimentalConfig(),
    )
    activities = {ProfilerActivity.CPU}
    _prepare_profiler(config, activities)
    _enable_profiler(config, activities)
    try:
        for i in range(iterations):
            if profiler_steps:
                with torch.autograd.profiler.record_function(f"ProfilerStep#{i}"):
                    step()
            else:
                step()
    finally:
        result = _disable_profiler()
    return result.experimental_event_tree()


def microseconds(ns):
    """Exact: integer microseconds and three decimals, never a rounded float."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def memory_record(event):
    """An Allocation event of the tree as (time, thread, the "[memory]" args)."""
    f = event.extra_fields
    device = f.device
    return (event.start_time_ns, event.start_tid, {
        "Total Reserved": f.total_reserved,
        "Total Allocated": f.total_allocated,
        "Bytes": f.alloc_size,
        "Addr": f.ptr,
        "Device Id": -1 if device.index is None else device.index,
        "Device Type": DEVICE_TYPES[device.type],
    })


def to_chrome_events(roots, pid, keep_all=False):
    """keep_all: every operator, not only those around memory events (a trace without them)."""
    spans, memory = [], []

    def walk(event):
        """Appends the event's kept records; True if its subtree holds a memory event."""
        if event.tag == _EventType.Allocation:
            memory.append(memory_record(event))
            return True
        has_memory = False
        for child in event.children:
            has_memory |= walk(child)
        if event.tag == _EventType.TorchOp and (has_memory or keep_all):
            # Kineto files record_function() ranges (the optimizer's, say)
            # as "user_annotation", operators as "cpu_op".
            user = event.extra_fields.scope == RecordScope.USER_SCOPE
            spans.append((event.start_time_ns, event.duration_time_ns, event.start_tid, event.name,
                          "user_annotation" if user else "cpu_op"))
        elif event.tag == _EventType.PyCall and has_memory:
            # with_stack: Python frames, named "file.py(line): function" as
            # Kineto names its "python_function" events.
            spans.append((event.start_time_ns, event.duration_time_ns, event.start_tid, event.name,
                          "python_function"))
        return has_memory

    for root in roots:
        walk(root)
    spans.sort(key=lambda s: (s[0], -s[1]))
    memory.sort(key=lambda m: m[0])
    lines = []
    for ident, (start, duration, tid, name, category) in enumerate(spans, 1):
        lines.append(
            f'{{"ph": "X", "cat": "{category}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {microseconds(start)}, "dur": {microseconds(duration)}, "args": {{"External id": {ident}}}}}')
    for start, tid, args in memory:
        lines.append(
            f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": {pid}, "tid": {tid}, '
            f'"ts": {microseconds(start)}, "args": {json.dumps(args)}}}')
    return lines, len(spans), len(memory)


def write_trace(path, roots, name, keep_all=False):
    lines, spans, memory = to_chrome_events(roots, os.getpid(), keep_all)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as out:
        out.write('{"schemaVersion": 1, "deviceProperties": [], "traceName": ' + json.dumps(name) + ',\n')
        out.write('"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n")
    print(f"{path}: {spans} operators, {memory} memory events, {os.path.getsize(path)} bytes")


def resnet_step(adamw=False):
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    if adamw:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(2, 3, 32, 32)
    labels = torch.tensor([3, 7])

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()

    return step


def vit_step():
    # ViT-B/16 (torchvision), batch 2 at 224x224, AdamW: a transformer whose
    # attention and MLP activations are large next to its weights.
    import torchvision

    model = torchvision.models.vit_b_16(num_classes=10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(2, 3, 224, 224)
    labels = torch.tensor([3, 7])

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()

    return step


# Inference at shapes that change from call to call: the case where cached
# blocks cut for one shape do not fit the next. The model is built by the
# first step, inside the recording, so its weights are in the trace.
BERT_SHAPES = [(8, 128), (2, 384), (16, 64), (4, 256), (1, 512), (12, 96), (8, 200), (3, 300)]
RESNET_BATCHES = [8, 32, 16, 24, 4]


def bert_inference_step():
    state = {}

    def step():
        if "model" not in state:
            layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, batch_first=True)
            state["model"] = torch.nn.TransformerEncoder(layer, num_layers=12).eval()
            state["i"] = 0
        batch, tokens = BERT_SHAPES[state["i"]]
        state["i"] += 1
        with torch.no_grad():
            state["model"](torch.randn(batch, tokens, 768))

    return step


def resnet50_inference_step():
    import torchvision

    state = {}

    def step():
        if "model" not in state:
            state["model"] = torchvision.models.resnet50().eval()
            state["i"] = 0
        batch = RESNET_BATCHES[state["i"]]
        state["i"] += 1
        with torch.no_grad():
            state["model"](torch.randn(batch, 3, 224, 224))

    return step


def mlp_step():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    inputs = torch.randn(64, 256)

    def step():
        model(inputs).sum().backward()

    return step


def transformer_step():
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=1), torch.nn.Linear(32, 8))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = torch.randn(4, 16, 32)
    targets = torch.randint(0, 8, (4 * 16,))

    def step():
        optimizer.zero_grad()
        logits = model(tokens).reshape(-1, 8)
        torch.nn.functional.cross_entropy(logits, targets).backward()
        optimizer.step()

    return step


def leaky_mlp_step():
    # The leak users report most: keeping a tensor from every step (here the
    # hidden features, "for logging"), so memory grows by the same amount
    # each iteration.
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(64, 256)
    labels = torch.randint(0, 10, (64,))
    kept = []

    def step():
        optimizer.zero_grad()
        hidden = model[1](model[0](inputs))
        kept.append(hidden.detach().clone())
        torch.nn.functional.cross_entropy(model[2](hidden), labels).backward()
        optimizer.step()

    return step


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["resnet18_adamw", "no_memory", "vit_b16", "vit_b16_3iter", "inference",
                                           "transformer_4iter"],
                        help="record one newer trace only (see below)")
    parser.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "tests", "data", "traces")),
                        help="output directory (default: tests/data/traces)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # One intra-op thread: every allocation on the main thread, in a
    # reproducible order.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out = os.path.normpath(args.out)
    if args.only == "resnet18_adamw":
        # Three iterations, AdamW (its two state tensors per parameter are
        # allocated in the first step only), with Python stacks.
        write_trace(os.path.join(out, "resnet18_adamw_3iter.json.gz"),
                    record(resnet_step(adamw=True), 3, with_stack=True),
                    "resnet18 training, AdamW, 3 iterations, with_stack")
        return 0
    if args.only == "vit_b16":
        # Two iterations: the first also creates AdamW's state.
        write_trace(os.path.join(out, "vit_b16_adamw_2iter.json.gz"), record(vit_step(), 2),
                    "ViT-B/16 training, batch 2, AdamW, 2 iterations")
        return 0
    if args.only == "vit_b16_3iter":
        # Three iterations, each a ProfilerStep: the first creates AdamW's
        # state, so planned mode records the second and plans the third.
        write_trace(os.path.join(out, "vit_b16_adamw_3iter.json.gz"), record(vit_step(), 3, profiler_steps=True),
                    "ViT-B/16 training, batch 2, AdamW, 3 iterations")
        return 0
    if args.only == "transformer_4iter":
        # The small transformer, four iterations, each a ProfilerStep: most
        # of its requests are 4 to 256 bytes (Adam's step counters, the
        # loss), so what planned mode does with small requests shows in the
        # plan that serves the third and fourth.
        write_trace(os.path.join(out, "transformer_adam_4iter.json.gz"),
                    record(transformer_step(), 4, profiler_steps=True),
                    "transformer encoder training, Adam, 4 iterations")
        return 0
    if args.only == "inference":
        write_trace(os.path.join(out, "bert_infer_dynamic.json.gz"), record(bert_inference_step(), len(BERT_SHAPES), profiler_steps=True),
                    "BERT-base-sized encoder inference at 8 (batch, tokens) shapes")
        torch.manual_seed(0)
        write_trace(os.path.join(out, "resnet50_infer_batches.json.gz"),
                    record(resnet50_inference_step(), len(RESNET_BATCHES), profiler_steps=True),
                    "resnet50 inference at batches 8, 32, 16, 24, 4")
        return 0
    if args.only == "no_memory":
        # What profile() records by default: operators, no memory events.
        write_trace(os.path.join(out, "mlp_no_memory.json"), record(mlp_step(), 1, profile_memory=False),
                    "MLP forward and backward, profile_memory off", keep_all=True)
        return 0
    write_trace(os.path.join(os.path.normpath(args.out), "resnet18_train.json"), record(resnet_step(), 2), "resnet18 training, 2 iterations")
    torch.manual_seed(0)
    write_trace(os.path.join(os.path.normpath(args.out), "transformer_train.json"), record(transformer_step(), 2),
                "transformer encoder training, 2 iterations")
    torch.manual_seed(0)
    write_trace(os.path.join(os.path.normpath(args.out), "leaky_mlp_train.json"), record(leaky_mlp_step(), 6),
                "MLP training that keeps every step's features, 6 iterations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
