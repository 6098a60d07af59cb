#!/usr/bin/env python3
"""Records real torch.profiler memory traces for gpumem's tests.

Run by hand, not by CI (Debian's python3-torch 1.13 and python3-torchvision
0.14, CPU only, are enough):

    /usr/bin/python3 tools/record_trace.py            # rewrites tests/data/traces/*.json
    /usr/bin/python3 tools/record_trace.py --out DIR  # somewhere else
    /usr/bin/python3 tools/record_trace.py --only loops  # tests/data/traces/loops/
    /usr/bin/python3 tools/record_trace.py --only loops2  # tests/data/traces/loops2/
    /usr/bin/python3 tools/record_trace.py --only fresh3  # tests/data/traces/fresh3/

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
  loops/*.json.gz         (--only loops) training loops of 3 to 6
                          iterations for leak detection, each recorded in
                          a fresh process (Total Allocated from 0), seeded,
                          described with their ground truth (leaks or not,
                          bytes leaked per iteration, measured from the
                          events) in loops/FACTS.json, split into "tuning"
                          and "test" by the rule of loops/SPLIT.md:
    loop_resnet18_sgdm_none_3.json.gz   resnet18, batch 8 at 32x32, SGD
                          momentum, zero_grad(set_to_none=True) at the top,
                          3 iterations (no leak)
    loop_resnet18_sgdm_zero_4.json.gz   the same, zero_grad(set_to_none=
                          False) at the end, 4 iterations (no leak)
    loop_encoder_sgdm_none_3.json.gz    embedding, 2-layer TransformerEncoder
                          (d_model 64, 4 heads), linear head, batch 4 x 32,
                          SGD momentum, set_to_none at the top (no leak)
    loop_encoder_sgdm_none_5_steps.json.gz  the same, 5 iterations, each a
                          "ProfilerStep#N" range (no leak)
    loop_mlp_zero_5.json.gz  MLP 256-512-512-10, batch 64, Adam warmed up
                          before recording, zero_grad(set_to_none=False) at
                          the end, 5 ProfilerSteps (no leak, flat)
    loop_mlp_accum_4.json.gz  the MLP, SGD, 2 micro-batches per step, 4
                          steps (no leak)
    loop_mlp_adam_fresh_5.json.gz  the MLP, a fresh Adam (state made in
                          iteration 1), 5 iterations (no leak)
    loop_mlp_warmcache_5.json.gz  the MLP, SGD, 1 MiB cached for good in
                          iteration 2 only (one-time growth, no leak)
    loop_mlp_leak_losses_6.json.gz  the MLP, SGD, every loss kept with its
                          graph: a leak of 4 bytes per iteration (backward
                          frees the graph's saved tensors)
    loop_cnn_leak_hidden_5.json.gz  a 2-conv CNN, batch 16 at 16x16, SGD,
                          5 ProfilerSteps, each keeping its detached
                          16x16x16x16 feature map (leaks 256 KiB a step)
  loops2/*.json.gz        (--only loops2) a held-out test set of 8 more
                          loops, recorded after the leak detector was
                          changed and never used to tune it (every one
                          "test", see loops2/SPLIT.md), other models and
                          loop shapes, recorded and measured as loops/ (own
                          loops2/FACTS.json, same schema):
    loops2_vgg_like_adamw_none_4.json.gz  VGG-style CNN (3 conv+BN+ReLU
                          blocks, 8-16-32 channels), batch 8 at 24x24,
                          AdamW warmed up before recording, set_to_none at
                          the top, 4 iterations (no leak)
    loops2_gru_sgd_zero_5.json.gz  2-layer GRU (32 in, 64 hidden), batch 8
                          x 10 steps, linear head, SGD, zero_grad(set_to_
                          none=False) at the end, 5 ProfilerSteps (no leak)
    loops2_mlp_leak_logits_5.json.gz  MLP 128-256-10, batch 32, SGD, a copy
                          of each iteration's logits kept (leaks 1280 bytes
                          a step)
    loops2_decoder_adam_fresh_4.json.gz  causal decoder LM (2-layer
                          TransformerEncoder under a causal mask, d_model 64,
                          vocab 200), batch 4 x 24, fresh Adam, set_to_none
                          at the top, 4 ProfilerSteps (no leak)
    loops2_cnn_accum3_3.json.gz  a small CNN, SGD, 3 micro-batches per
                          step, 3 steps, set_to_none after each (no leak)
    loops2_mlp_leak_grads_6.json.gz  MLP 64-128-64-10, SGD, a clone of
                          every gradient kept each step, 6 ProfilerSteps
                          (leaks the parameters' 68,904 bytes a step)
    loops2_resnet_like_sgdm_none_3.json.gz  resnet18, batch 4 at 32x32,
                          fresh SGD momentum, set_to_none at the top, 3
                          iterations (no leak)
    loops2_mlp_cache_every_other_6.json.gz  MLP 200-100-10, SGD, 512 KiB
                          cached under one key in iterations 2 and 4 (one-
                          time growth, no leak)
  fresh3/*.json.gz        (--only fresh3) a held-out test set of 12 runs
                          for the default allocator policy against
                          PyTorch's (issue 29, part 3), recorded on
                          2026-12-03 after the policy's last change and
                          never used to tune it (every one "test", see
                          fresh3/SPLIT.md): models and settings no other
                          trace here uses, each in a fresh process, seeded,
                          with 10 classes where it classifies; facts
                          (inputs, optimizer, memory events, peak Total
                          Allocated, largest allocation) in
                          fresh3/FACTS.json:
    fresh3_squeezenet11_sgdm_none_2.json.gz  squeezenet1_1, batch 32 at
                          160x160, SGD momentum, set_to_none at the top, 2
                          iterations
    fresh3_shufflenet05_adam_zero_3.json.gz  shufflenet_v2_x0_5, batch 24
                          at 112x112, Adam, zero_grad(set_to_none=False) at
                          the end, 3 ProfilerSteps
    fresh3_densenet121_rmsprop_2.json.gz  densenet121, batch 2 at 64x64,
                          RMSprop with momentum, 2 iterations
    fresh3_mobilenetv3s_adagrad_3.json.gz  mobilenet_v3_small, batch 12 at
                          160x160, Adagrad, set_to_none at the end, 3
                          iterations
    fresh3_googlenet_amsgrad_1.json.gz  googlenet (aux_logits False), batch
                          4 at 128x128, Adam with amsgrad, 1 iteration
    fresh3_effnetb0_sgdn_2.json.gz  efficientnet_b0, batch 8 at 96x96, SGD
                          Nesterov momentum and weight decay, 2 iterations
    fresh3_vit_d256_l6_adamw_2.json.gz  a ViT-like encoder in plain PyTorch
                          (8x8 patches of 96x96, d_model 256, 8 heads, 6
                          pre-norm layers), batch 8, AdamW, 2 iterations
    fresh3_vit_d256_l6_ckpt_adamw_2.json.gz  the same, each layer under
                          torch.utils.checkpoint, batch 12, 2 ProfilerSteps
    fresh3_gpt_tied_seq256_adamw_2.json.gz  a GPT-like causal decoder in
                          plain PyTorch (vocab 4096, d_model 256, 8 heads, 4
                          blocks, output tied to the token embedding), batch
                          4 x 256 tokens, AdamW, 2 ProfilerSteps
    fresh3_gpt_tied_seq128_bf16_adam_3.json.gz  the same decoder under
                          torch.autocast('cpu', dtype=torch.bfloat16), batch
                          8 x 128, Adam, set_to_none=False at the top, 3
                          iterations
    fresh3_lstm_lm_sgd_zero_3.json.gz  an LSTM language model (vocab 8000,
                          2 layers of 256), batch 32 x 32 tokens, SGD with
                          gradient clipping, set_to_none=False at the end, 3
                          iterations
    fresh3_regnetx400_infer_shapes_6.json.gz  regnet_x_400mf, built inside
                          the recording, inference under inference_mode at
                          6 shapes in turn (batch 1 to 16, 64x64 to
                          160x160), each a ProfilerStep

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


# --only loops: training loops of several iterations, for leak detection
# ("does memory grow from one iteration to the next?"). Each loop is
# recorded in a fresh interpreter (this script run again with --loop NAME),
# so its "Total Allocated" starts from zero, not from the loops recorded
# before it. Model, optimizer and data are made before the profiler starts;
# tensors an optimizer creates lazily (momentum buffers, Adam's state) are
# made by the first recorded step unless a loop says otherwise.

LOOPS_DIR = "loops"
MLP_SIZES = (256, 512, 512, 10)
MLP_BATCH = 64
LOOP_MEASUREMENT = (
    "Measured from the recorded events (the ones written to the file): the step "
    "function notes time.time_ns() (the profiler's clock, CLOCK_REALTIME in "
    "torch 1.13) as each iteration ends, and every [memory] event after iteration "
    "k-1's end is iteration k's (so where ProfilerStep ranges are on, the 4-byte "
    "handle record_function allocates just before each ProfilerStep#N span "
    "counts in iteration N+1); an iteration's net bytes are the sum of its events' Bytes, and "
    "total_allocated_before[k] is the Total Allocated of iteration k's first "
    "event minus its Bytes (equal to 0 plus the Bytes of every earlier event, "
    "as each loop is recorded in a fresh process). leak_bytes_per_iteration is "
    "the net growth every iteration after the first repeats (the same in each); "
    "0 where the loop keeps nothing from one iteration to the next.")


def make_mlp_of(sizes):
    """Linear layers of these widths with ReLU between them."""
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_mlp():
    return make_mlp_of(MLP_SIZES)


def mlp_data(batches=1):
    return [(torch.randn(MLP_BATCH, MLP_SIZES[0]), torch.randint(0, MLP_SIZES[-1], (MLP_BATCH,)))
            for _ in range(batches)]


def plain_loop(model, optimizer, inputs, labels, set_to_none, at_top, forward=None):
    """One iteration: zero_grad (at the top or the end), forward, cross-entropy, backward, step."""

    def step():
        if at_top:
            optimizer.zero_grad(set_to_none=set_to_none)
        logits = forward() if forward else model(inputs)
        torch.nn.functional.cross_entropy(logits, labels).backward()
        optimizer.step()
        if not at_top:
            optimizer.zero_grad(set_to_none=set_to_none)

    return step


def loop_resnet18(set_to_none, at_top):
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(8, 3, 32, 32)
    labels = torch.randint(0, 10, (8,))
    return plain_loop(model, optimizer, images, labels, set_to_none, at_top)


class TokenEncoder(torch.nn.Module):
    """Embedding, a 2-layer nn.TransformerEncoder (d_model 64, 4 heads), a linear head."""

    def __init__(self, vocab=100, d_model=64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model=d_model, nhead=4, dim_feedforward=128, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def loop_encoder():
    model = TokenEncoder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    tokens = torch.randint(0, 100, (4, 32))
    targets = torch.randint(0, 100, (4 * 32,))
    return plain_loop(model, optimizer, tokens, targets, True, True,
                      forward=lambda: model(tokens).reshape(-1, 100))


def loop_mlp_zero():
    model = make_mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    [(inputs, labels)] = mlp_data()
    step = plain_loop(model, optimizer, inputs, labels, False, False)
    step()  # warm-up before the profiler: gradients and Adam's state exist when it starts
    return step


def loop_mlp_accum():
    model = make_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    micro = mlp_data(2)

    def step():
        for inputs, labels in micro:
            (torch.nn.functional.cross_entropy(model(inputs), labels) / len(micro)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def loop_mlp_adam_fresh():
    model = make_mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    [(inputs, labels)] = mlp_data()
    return plain_loop(model, optimizer, inputs, labels, True, True)


def loop_mlp_warmcache():
    model = make_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    [(inputs, labels)] = mlp_data()
    inner = plain_loop(model, optimizer, inputs, labels, True, True)
    cache = {}
    count = [0]

    def step():
        count[0] += 1
        if count[0] == 2:  # the second iteration only: 1 MiB kept for good
            cache["x"] = torch.empty(262144)
        inner()

    return step


def loop_mlp_leak_losses():
    model = make_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    [(inputs, labels)] = mlp_data()
    losses = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss)  # with its graph: its saved tensors stay alive

    return step


CNN_HIDDEN = (16, 16, 16, 16)  # batch, channels, height, width of the kept feature map


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Linear(16 * 16 * 16, 10)


def loop_cnn_leak_hidden():
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    images = torch.randn(16, 3, 16, 16)
    labels = torch.randint(0, 10, (16,))
    kept = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        hidden = model.features(images)
        kept.append(hidden.detach())  # shares the feature map's storage: it is never freed
        torch.nn.functional.cross_entropy(model.head(hidden.flatten(1)), labels).backward()
        optimizer.step()

    return step


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


MLP_NAME = "MLP 256-512-512-10 (ReLU), batch 64"
# name: (builder, iterations, profiler_steps, facts). leak_bytes_per_iteration
# None: measured from the recording (see LOOP_MEASUREMENT).
LOOPS = {
    "loop_resnet18_sgdm_none_3": (lambda: loop_resnet18(True, True), 3, False, {
        "model": "torchvision resnet18, 10 classes, batch 8 at 32x32",
        "optimizer": "SGD lr 0.01 momentum 0.9 (buffers made by the first recorded step)",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "resnet18 training; iteration 1 makes gradients and momentum buffers, "
                       "later iterations free and remake the gradients: one-time growth, no leak"}),
    "loop_encoder_sgdm_none_3": (loop_encoder, 3, False, {
        "model": "Embedding(100, 64) + 2-layer nn.TransformerEncoder (d_model 64, 4 heads, ff 128, "
                 "dropout 0.1) + Linear(64, 100), batch 4 x 32 tokens, cross-entropy",
        "optimizer": "SGD lr 0.01 momentum 0.9 (buffers made by the first recorded step)",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "small transformer encoder training; one-time growth at iteration 1, no leak"}),
    "loop_mlp_zero_5": (loop_mlp_zero, 5, True, {
        "model": MLP_NAME,
        "optimizer": "Adam lr 1e-3 (its state made by a warm-up step before the profiler starts)",
        "zero_grad": {"set_to_none": False, "position": "end"},
        "warmup_steps_before_recording": 1,
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "MLP training, gradients zeroed in place and kept between iterations, "
                       "one warm-up step before recording: every iteration returns to the same total"}),
    "loop_mlp_accum_4": (loop_mlp_accum, 4, False, {
        "model": MLP_NAME,
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "end (after the step)"},
        "micro_batches_per_iteration": 2,
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "MLP with gradient accumulation: 2 micro-batches (loss/2, backward each) "
                       "per optimizer step, 4 steps (an iteration is one optimizer step), no leak"}),
    "loop_mlp_adam_fresh_5": (loop_mlp_adam_fresh, 5, False, {
        "model": MLP_NAME,
        "optimizer": "Adam lr 1e-3, fresh: its state (exp_avg, exp_avg_sq, step) made by the first recorded step",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "MLP training with a fresh Adam: one-time growth at iteration 1 "
                       "(gradients and Adam's state), then flat, no leak"}),
    "loop_mlp_warmcache_5": (loop_mlp_warmcache, 5, False, {
        "model": MLP_NAME,
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "one_time_growth": {"iteration": 2, "bytes": 262144 * 4,
                            "what": "cache['x'] = torch.empty(262144), kept in a dict for good"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "MLP training where iteration 2 (1-based) alone caches 1 MiB that is never freed: "
                       "one-time growth, not a leak"}),
    "loop_mlp_leak_losses_6": (loop_mlp_leak_losses, 6, False, {
        "model": MLP_NAME,
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": True, "leak_bytes_per_iteration": None,
        "kept_tensor": {"shape": [], "dtype": "float32", "numel": 1,
                        "what": "the loss (aten::nll_loss_forward's output); its graph's saved tensors "
                                "are freed by backward() (no retain_graph), so only the loss stays"},
        "description": "MLP training that appends each loss tensor (with its autograd graph, no .item() or "
                       ".detach()) to a list: a real but tiny leak, the 4-byte loss per iteration, since "
                       "backward() frees the graph's saved tensors"}),
    "loop_cnn_leak_hidden_5": (loop_cnn_leak_hidden, 5, True, {
        "model": "CNN: Conv2d(3,8,3,p1)+ReLU, Conv2d(8,16,3,p1)+ReLU, Linear(4096,10); batch 16 at 16x16",
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": True, "leak_bytes_per_iteration": numel(CNN_HIDDEN) * 4,
        "kept_tensor": {"shape": list(CNN_HIDDEN), "dtype": "float32", "numel": numel(CNN_HIDDEN)},
        "description": "CNN training that appends each iteration's .detach()ed feature map (16x16x16x16 "
                       "float32) to a list: a real leak of numel * 4 bytes per iteration"}),
    "loop_encoder_sgdm_none_5_steps": (loop_encoder, 5, True, {
        "model": "Embedding(100, 64) + 2-layer nn.TransformerEncoder (d_model 64, 4 heads, ff 128, "
                 "dropout 0.1) + Linear(64, 100), batch 4 x 32 tokens, cross-entropy",
        "optimizer": "SGD lr 0.01 momentum 0.9 (buffers made by the first recorded step)",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "loop_encoder_sgdm_none_3 with 5 iterations, each a ProfilerStep#N range, no leak"}),
    "loop_resnet18_sgdm_zero_4": (lambda: loop_resnet18(False, False), 4, False, {
        "model": "torchvision resnet18, 10 classes, batch 8 at 32x32",
        "optimizer": "SGD lr 0.01 momentum 0.9 (buffers made by the first recorded step)",
        "zero_grad": {"set_to_none": False, "position": "end"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "resnet18 training, gradients zeroed in place at the end and kept: "
                       "one-time growth at iteration 1, no leak"}),
}


# --only loops2: a second set of loops, recorded after the leak detector was
# changed, as a held-out test set (every recording "test", see
# loops2/SPLIT.md): other models and loop shapes than --only loops (a
# VGG-style CNN with BatchNorm, a GRU, a causal decoder, resnet18 at another
# batch, MLPs of other sizes), recorded and measured by the same machinery
# (record_loop, LOOP_MEASUREMENT).

LOOPS2_DIR = "loops2"


def mlp_parameter_bytes(sizes):
    """float32 bytes of make_mlp_of(sizes)'s weights and biases."""
    return sum((sizes[i] * sizes[i + 1] + sizes[i + 1]) * 4 for i in range(len(sizes) - 1))


class VGGLike(torch.nn.Module):
    """3 blocks of Conv2d(3x3, p1) + BatchNorm2d + ReLU + MaxPool2d(2), 8-16-32 channels, a linear head."""

    def __init__(self, channels=(8, 16, 32), size=24, classes=10):
        super().__init__()
        blocks, before = [], 3
        for c in channels:
            blocks += [torch.nn.Conv2d(before, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(),
                       torch.nn.MaxPool2d(2)]
            before = c
            size //= 2
        self.features = torch.nn.Sequential(*blocks)
        self.head = torch.nn.Linear(before * size * size, classes)

    def forward(self, images):
        return self.head(self.features(images).flatten(1))


def loop2_vgg_like_adamw_none():
    model = VGGLike()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.randn(8, 3, 24, 24)
    labels = torch.randint(0, 10, (8,))
    step = plain_loop(model, optimizer, images, labels, True, True)
    step()  # warm-up before the profiler: gradients and AdamW's state exist when it starts
    return step


class GRUClassifier(torch.nn.Module):
    """nn.GRU (input 32, hidden 64, 2 layers, batch_first) + Linear(64, 10) on the last time step."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(32, 64, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, sequences):
        out, _ = self.gru(sequences)
        return self.head(out[:, -1])


# 10 time steps, not 20: on CPU torch 1.13 runs the GRU cell by cell (about
# 47 memory events per step and layer, forward and backward), and at 20 steps
# the 5-iteration file is 257 KB; at 10 it stays under 150 KB.
GRU_STEPS = 10


def loop2_gru_sgd_zero():
    model = GRUClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    sequences = torch.randn(8, GRU_STEPS, 32)
    labels = torch.randint(0, 10, (8,))
    return plain_loop(model, optimizer, sequences, labels, False, False)


LEAK_LOGITS_SIZES = (128, 256, 10)
LEAK_LOGITS_BATCH = 32


def loop2_mlp_leak_logits():
    model = make_mlp_of(LEAK_LOGITS_SIZES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(LEAK_LOGITS_BATCH, LEAK_LOGITS_SIZES[0])
    labels = torch.randint(0, LEAK_LOGITS_SIZES[-1], (LEAK_LOGITS_BATCH,))
    kept = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        torch.nn.functional.cross_entropy(logits, labels).backward()
        optimizer.step()
        kept.append(logits.detach().clone())  # a copy of the logits, kept for good

    return step


class CausalLM(torch.nn.Module):
    """Token and position embeddings, a 2-layer nn.TransformerEncoder under a causal mask, a linear head."""

    def __init__(self, vocab=200, d_model=64, context=24):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        self.position = torch.nn.Embedding(context, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model=d_model, nhead=4, dim_feedforward=128, batch_first=True)
        self.decoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.head = torch.nn.Linear(d_model, vocab)
        self.register_buffer("positions", torch.arange(context))
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), diagonal=1))

    def forward(self, tokens):
        hidden = self.embed(tokens) + self.position(self.positions)
        return self.head(self.decoder(hidden, mask=self.mask))


def loop2_decoder_adam_fresh():
    model = CausalLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    text = torch.randint(0, 200, (4, 25))
    inputs = text[:, :-1].contiguous()  # 4 x 24 tokens in, each next token out
    targets = text[:, 1:].reshape(-1).contiguous()
    return plain_loop(model, optimizer, inputs, targets, True, True,
                      forward=lambda: model(inputs).reshape(-1, 200))


class AccumCNN(torch.nn.Module):
    """Conv2d(3,8,3,p1)+ReLU+MaxPool2d(2), Conv2d(8,16,3,p1)+ReLU, global average pool, Linear(16, 10)."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(16, 10)

    def forward(self, images):
        return self.head(self.features(images).flatten(1))


ACCUM_MICRO_BATCHES = 3


def loop2_cnn_accum():
    model = AccumCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    micro = [(torch.randn(8, 3, 20, 20), torch.randint(0, 10, (8,))) for _ in range(ACCUM_MICRO_BATCHES)]

    def step():
        for images, labels in micro:
            (torch.nn.functional.cross_entropy(model(images), labels) / len(micro)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


LEAK_GRADS_SIZES = (64, 128, 64, 10)
LEAK_GRADS_BATCH = 32


def loop2_mlp_leak_grads():
    model = make_mlp_of(LEAK_GRADS_SIZES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(LEAK_GRADS_BATCH, LEAK_GRADS_SIZES[0])
    labels = torch.randint(0, LEAK_GRADS_SIZES[-1], (LEAK_GRADS_BATCH,))
    history = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        history.append([p.grad.clone() for p in model.parameters()])  # every gradient, kept for good
        optimizer.step()

    return step


def loop2_resnet18_sgdm_none():
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(4, 3, 32, 32)
    labels = torch.randint(0, 10, (4,))
    return plain_loop(model, optimizer, images, labels, True, True)


CACHE_SIZES = (200, 100, 10)
CACHE_BATCH = 16
CACHE_NUMEL = 131072  # float32: 512 KiB


def loop2_mlp_cache_every_other():
    model = make_mlp_of(CACHE_SIZES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(CACHE_BATCH, CACHE_SIZES[0])
    labels = torch.randint(0, CACHE_SIZES[-1], (CACHE_BATCH,))
    inner = plain_loop(model, optimizer, inputs, labels, True, True)
    cache = {}
    count = [0]

    def step():
        count[0] += 1
        if count[0] in (2, 4):  # the same key both times: the second replaces (and frees) the first
            cache["x"] = torch.empty(CACHE_NUMEL)
        inner()

    return step


# name: (builder, iterations, profiler_steps, facts), as LOOPS.
LOOPS2 = {
    "loops2_vgg_like_adamw_none_4": (loop2_vgg_like_adamw_none, 4, False, {
        "model": "VGG-style CNN: 3 blocks of Conv2d(3x3, p1)+BatchNorm2d+ReLU+MaxPool2d(2), 8-16-32 channels, "
                 "Linear(288, 10); batch 8 at 24x24",
        "optimizer": "AdamW lr 1e-3 (its state made by a warm-up step before the profiler starts)",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "warmup_steps_before_recording": 1,
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "VGG-style CNN with BatchNorm, AdamW warmed up before recording, gradients freed at the "
                       "top of each iteration and made again by backward: no leak"}),
    "loops2_gru_sgd_zero_5": (loop2_gru_sgd_zero, 5, True, {
        "model": f"nn.GRU(32, 64, num_layers=2, batch_first) + Linear(64, 10) on the last step; "
                 f"batch 8 x {GRU_STEPS} steps",
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": False, "position": "end"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "GRU classifier training, gradients zeroed in place at the end and kept, 5 iterations, "
                       "each a ProfilerStep#N range: one-time growth at iteration 1 (the gradients), no leak"}),
    "loops2_mlp_leak_logits_5": (loop2_mlp_leak_logits, 5, False, {
        "model": "MLP 128-256-10 (ReLU), batch 32",
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": True,
        "leak_bytes_per_iteration": LEAK_LOGITS_BATCH * LEAK_LOGITS_SIZES[-1] * 4,
        "kept_tensor": {"shape": [LEAK_LOGITS_BATCH, LEAK_LOGITS_SIZES[-1]], "dtype": "float32",
                        "numel": LEAK_LOGITS_BATCH * LEAK_LOGITS_SIZES[-1],
                        "what": "logits.detach().clone(), appended to a list after the optimizer step"},
        "description": "MLP training that appends a copy of each iteration's logits (32x10 float32) to a list: "
                       "a real leak of 1280 bytes per iteration"}),
    "loops2_decoder_adam_fresh_4": (loop2_decoder_adam_fresh, 4, True, {
        "model": "causal decoder LM: Embedding(200, 64) + learned positions Embedding(24, 64) + 2-layer "
                 "nn.TransformerEncoder (d_model 64, 4 heads, ff 128, dropout 0.1) under a causal mask + "
                 "Linear(64, 200), batch 4 x 24 tokens, next-token cross-entropy",
        "optimizer": "Adam lr 1e-3, fresh: its state (exp_avg, exp_avg_sq, step) made by the first recorded step",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "small causal transformer decoder with a fresh Adam, 4 iterations, each a ProfilerStep#N "
                       "range: one-time growth at iteration 1 (gradients and Adam's state), no leak"}),
    "loops2_cnn_accum3_3": (loop2_cnn_accum, 3, False, {
        "model": "CNN: Conv2d(3,8,3,p1)+ReLU+MaxPool2d(2), Conv2d(8,16,3,p1)+ReLU, global average pool, "
                 "Linear(16,10); micro-batches of 8 at 20x20",
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "end (after the step)"},
        "micro_batches_per_iteration": ACCUM_MICRO_BATCHES,
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "CNN with gradient accumulation: 3 micro-batches (loss/3, backward each) per optimizer "
                       "step, 3 steps (an iteration is one optimizer step), no leak"}),
    "loops2_mlp_leak_grads_6": (loop2_mlp_leak_grads, 6, True, {
        "model": "MLP 64-128-64-10 (ReLU), batch 32",
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": True, "leak_bytes_per_iteration": mlp_parameter_bytes(LEAK_GRADS_SIZES),
        "kept_tensor": {"shape": "one clone of each parameter's gradient (6 tensors)", "dtype": "float32",
                        "numel": mlp_parameter_bytes(LEAK_GRADS_SIZES) // 4,
                        "what": "[p.grad.clone() for p in model.parameters()], appended to a list after backward"},
        "description": "MLP training that keeps a copy of every gradient each iteration, 6 iterations, each a "
                       "ProfilerStep#N range: a real leak of the parameters' total bytes per iteration"}),
    "loops2_resnet_like_sgdm_none_3": (loop2_resnet18_sgdm_none, 3, False, {
        "model": "torchvision resnet18, 10 classes, batch 4 at 32x32",
        "optimizer": "SGD lr 0.01 momentum 0.9 (buffers made by the first recorded step)",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "resnet18 training with SGD momentum made fresh in the recording; iteration 1 makes "
                       "gradients and momentum buffers: one-time growth, no leak"}),
    "loops2_mlp_cache_every_other_6": (loop2_mlp_cache_every_other, 6, False, {
        "model": "MLP 200-100-10 (ReLU), batch 16",
        "optimizer": "SGD lr 0.01",
        "zero_grad": {"set_to_none": True, "position": "top"},
        "one_time_growth": {"iteration": 2, "bytes": CACHE_NUMEL * 4,
                            "what": "cache['x'] = torch.empty(131072) in iterations 2 and 4 (1-based), the same "
                                    "key: iteration 4's replaces iteration 2's, which is freed (net 0 there)"},
        "leaks": False, "leak_bytes_per_iteration": 0,
        "description": "MLP training that caches 512 KiB under one dict key in iterations 2 and 4: one-time "
                       "growth of 512 KiB overall, not a leak"}),
}

# Every loop either group holds, for --loop NAME.
ALL_LOOPS = {**LOOPS, **LOOPS2}


def loop_split(names):
    """The fixed rule of loops/SPLIT.md: sorted names numbered from 1, the even ones "test"."""
    return {name: ("test" if i % 2 == 0 else "tuning") for i, name in enumerate(sorted(names), 1)}


def memory_events(roots, name):
    """The recording's memory events as (start ns, Bytes, Total Allocated), in time order, checked:
    Total Allocated must be the running sum of Bytes (see the docstring)."""
    events = []

    def walk(event):
        if event.tag == _EventType.Allocation:
            f = event.extra_fields
            events.append((event.start_time_ns, f.alloc_size, f.total_allocated))
        for child in event.children:
            walk(child)

    for root in roots:
        walk(root)
    events.sort(key=lambda e: e[0])
    running = events[0][2] - events[0][1]
    for _, size, total in events:
        running += size
        if running != total:
            raise SystemExit(f"{name}: Total Allocated {total} is not the running sum {running}")
    return events


def record_loop(name, out):
    """Records one loop (in this fresh process); returns its facts, measured from the events."""
    import time

    builder, iterations, profiler_steps, facts = ALL_LOOPS[name]
    torch.manual_seed(0)
    step = builder()
    marks = []

    def marked():
        step()
        marks.append(time.time_ns())  # where the next iteration begins

    roots = record(marked, iterations, profiler_steps=profiler_steps)
    path = os.path.join(out, name + ".json.gz")
    write_trace(path, roots, name.replace("_", " "))
    events = memory_events(roots, name)
    if len(marks) != iterations:
        raise SystemExit(f"{name}: {len(marks)} iteration marks")
    per = [[] for _ in marks]
    for event in events:
        # Events after the last mark (the last ProfilerStep's own exit) are the last iteration's.
        per[sum(1 for m in marks[:-1] if m <= event[0])].append(event)
    facts = dict(facts)
    facts.update({
        "name": name, "file": name + ".json.gz", "iterations": iterations, "profiler_steps": profiler_steps,
        "measured": {
            "memory_events": len(events),
            "memory_events_per_iteration": [len(p) for p in per],
            "total_allocated_before": [p[0][2] - p[0][1] for p in per],
            "total_allocated_at_end": events[-1][2],
            "net_bytes_per_iteration": [sum(e[1] for e in p) for p in per],
        },
    })
    net = facts["measured"]["net_bytes_per_iteration"]
    growth = set(net[1:])
    if facts["leaks"]:
        if len(growth) != 1 or not net[1] > 0:
            raise SystemExit(f"{name}: a leak that does not grow steadily: {net}")
        if facts["leak_bytes_per_iteration"] is None:
            facts["leak_bytes_per_iteration"] = net[1]
        elif facts["leak_bytes_per_iteration"] != net[1]:
            raise SystemExit(f"{name}: leaks {net[1]} bytes per iteration, not {facts['leak_bytes_per_iteration']}")
    else:
        once = facts.get("one_time_growth")
        rest = [n for i, n in enumerate(net[1:], 2) if not once or i != once["iteration"]]
        if any(rest):
            raise SystemExit(f"{name}: grows after its first iteration without leaking? {net}")
        if once and net[once["iteration"] - 1] != once["bytes"]:
            raise SystemExit(f"{name}: iteration {once['iteration']} grows by {net[once['iteration'] - 1]}")
    facts["leak_measured_by"] = LOOP_MEASUREMENT
    return facts


def check_loop_file(path):
    """Reads a written trace back: its [memory] events and ProfilerStep spans."""
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    memory = sum(1 for e in events if e.get("name") == "[memory]")
    steps = sum(1 for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    return memory, steps


def split_table(names, split):
    """A SPLIT.md's table: the names sorted, numbered from 1, with their halves."""
    text = "| # | name | split |\n|---|---|---|\n"
    for i, name in enumerate(sorted(names), 1):
        text += f"| {i} | {name} | {split[name]} |\n"
    return text


def loops_split_md(names, split):
    """loops/SPLIT.md: the fixed rule of loop_split and its table."""
    return ("# Split of the loop recordings\n\n"
            "A fixed rule, applied by `tools/record_trace.py --only loops` (`loop_split`): sort the\n"
            "recordings' names with Python's `sorted()`, number them from 1; the even-numbered\n"
            "(2, 4, 6, ...) are \"test\", the others \"tuning\". Tune on \"tuning\" only.\n\n"
            + split_table(names, split))


def loops2_split(names):
    """loops2 is a held-out test set: every recording "test"."""
    return {name: "test" for name in names}


def loops2_split_md(names, split):
    """loops2/SPLIT.md: the whole folder is a held-out test set."""
    text = ("# Split of the loops2 recordings\n\n"
            "The whole folder is a held-out test set: every recording is \"test\", none is \"tuning\".\n"
            "These loops (`tools/record_trace.py --only loops2`) were recorded after the leak\n"
            "detector was changed, to check it on models and loop shapes it was not tuned on. They\n"
            "were never used for tuning, and must not be: do not adjust the detector, its thresholds\n"
            "or its tests' expectations to fit them; tune on the \"tuning\" recordings of `../loops/`\n"
            "only, and report results on this folder as they come.\n\n"
            + split_table(names, split))
    return text


# --only GROUP: (table, folder, split rule, SPLIT.md writer, what an iteration is).
LOOP_GROUPS = {
    "loops": (LOOPS, LOOPS_DIR, loop_split, loops_split_md,
              "one call of the loop's step function: (zero_grad,) forward, backward, optimizer step "
              "(loop_mlp_accum_4: two micro-batches, then the step)"),
    "loops2": (LOOPS2, LOOPS2_DIR, loops2_split, loops2_split_md,
               "one call of the loop's step function: (zero_grad,) forward, backward, optimizer step "
               "(loops2_cnn_accum3_3: three micro-batches, then the step)"),
}


def record_loops(out, group="loops"):
    import subprocess

    table, folder_name, split_rule, split_md, iteration = LOOP_GROUPS[group]
    folder = os.path.join(out, folder_name)
    os.makedirs(folder, exist_ok=True)
    split = split_rule(table)
    facts = []
    for name in table:
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--loop", name, "--out", folder],
                             check=True, stdout=subprocess.PIPE, text=True)
        sys.stdout.write("".join(l + "\n" for l in run.stdout.splitlines() if not l.startswith("FACTS ")))
        [line] = [l for l in run.stdout.splitlines() if l.startswith("FACTS ")]
        fact = json.loads(line[len("FACTS "):])
        memory, steps = check_loop_file(os.path.join(folder, fact["file"]))
        if memory != fact["measured"]["memory_events"] or steps != (fact["iterations"] if fact["profiler_steps"] else 0):
            raise SystemExit(f"{name}: the file holds {memory} [memory] events and {steps} ProfilerStep spans")
        fact["split"] = split[name]
        order = ["name", "file", "model", "optimizer", "zero_grad", "iterations", "profiler_steps", "leaks",
                 "leak_bytes_per_iteration", "split", "description"]
        facts.append({**{k: fact[k] for k in order}, **{k: v for k, v in fact.items() if k not in order}})
    facts.sort(key=lambda f: f["name"])
    with open(os.path.join(folder, "FACTS.json"), "w") as f:
        json.dump({
            "recorded_by": f"tools/record_trace.py --only {group}",
            "torch": torch.__version__,
            "device": "cpu (host memory), one intra-op thread, torch.manual_seed(0) before each loop",
            "iteration": iteration,
            "split_rule": "see SPLIT.md",
            "leak_measurement": LOOP_MEASUREMENT,
            "recordings": facts,
        }, f, indent=2)
        f.write("\n")
    with open(os.path.join(folder, "SPLIT.md"), "w") as f:
        f.write(split_md(table, split))
    print(f"{folder}: FACTS.json and SPLIT.md for {len(facts)} loops")


# --only fresh3: a fresh held-out set of training (and one inference) runs,
# recorded on 2026-12-03 after the default allocator policy's last change,
# to check it against PyTorch's policy on inputs it was never tuned on
# (issue 29, part 3; every recording "test", see fresh3/SPLIT.md). Models
# and settings none of the other traces use: torchvision's squeezenet1_1,
# shufflenet_v2_x0_5, densenet121, mobilenet_v3_small, googlenet,
# efficientnet_b0 and regnet_x_400mf, a ViT-like encoder, a GPT-like decoder
# with tied embeddings, an LSTM language model; other optimizers (RMSprop,
# Adagrad, Adam with amsgrad), activation checkpointing, bfloat16 autocast.
# Each is recorded in a fresh interpreter (this script run again with
# --fresh NAME), so its Total Allocated starts from 0; model, optimizer and
# data are made before the profiler starts (the inference run builds its
# model inside the recording), optimizer state by the first recorded step.

FRESH3_DIR = "fresh3"
FRESH3_CLASSES = 10


def torchvision_model(name, **kwargs):
    import torchvision

    return getattr(torchvision.models, name)(num_classes=FRESH3_CLASSES, **kwargs)


def image_batch(batch, size):
    return torch.randn(batch, 3, size, size), torch.randint(0, FRESH3_CLASSES, (batch,))


def fresh3_vision(name, optimizer, batch, size, set_to_none, at_top, **kwargs):
    """A torchvision classifier (10 classes) trained on one random batch by plain_loop."""
    model = torchvision_model(name, **kwargs)
    images, labels = image_batch(batch, size)
    return plain_loop(model, optimizer(model.parameters()), images, labels, set_to_none, at_top)


class PatchEncoder(torch.nn.Module):
    """ViT-like: Conv2d patch embedding, class token, learned positions, pre-norm nn.TransformerEncoderLayers
    (GELU), a final LayerNorm and a linear head on the class token; checkpointed: each layer under
    torch.utils.checkpoint (its activations remade in backward)."""

    def __init__(self, size=96, patch=8, d_model=256, heads=8, layers=6, classes=FRESH3_CLASSES,
                 checkpointed=False):
        super().__init__()
        self.patches = torch.nn.Conv2d(3, d_model, patch, stride=patch)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, d_model))
        self.position = torch.nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, d_model) * 0.02)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, activation="gelu", batch_first=True,
                                             norm_first=True) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, classes)
        self.checkpointed = checkpointed

    def forward(self, images):
        import torch.utils.checkpoint

        x = self.patches(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.position
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x) if self.checkpointed else layer(x)
        return self.head(self.norm(x[:, 0]))


class GPTBlock(torch.nn.Module):
    """Pre-norm causal self-attention (written out: one qkv Linear, masked softmax) and a GELU MLP."""

    def __init__(self, d_model, heads, context):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)
        self.norm2 = torch.nn.LayerNorm(d_model)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d_model, d_model))
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).triu(1))

    def forward(self, x):
        batch, tokens, d_model = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d_model, dim=2)
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (d_model // self.heads) ** 0.5
        attention = scores.masked_fill(self.mask[:tokens, :tokens], float("-inf")).softmax(-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(batch, tokens, d_model))
        return x + self.mlp(self.norm2(x))


class TiedGPT(torch.nn.Module):
    """GPT-like causal decoder: token and learned position embeddings, GPTBlocks, a final LayerNorm, and
    an output projection tied to the token embedding (one weight)."""

    def __init__(self, vocab=4096, d_model=256, heads=8, layers=4, context=256):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        self.position = torch.nn.Embedding(context, d_model)
        self.blocks = torch.nn.Sequential(*(GPTBlock(d_model, heads, context) for _ in range(layers)))
        self.norm = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        hidden = self.embed(tokens) + self.position(torch.arange(tokens.shape[1]))
        return self.head(self.norm(self.blocks(hidden)))


def next_token_data(vocab, batch, tokens):
    text = torch.randint(0, vocab, (batch, tokens + 1))
    return text[:, :-1].contiguous(), text[:, 1:].reshape(-1).contiguous()


def fresh3_gpt(vocab, batch, tokens):
    model = TiedGPT(vocab=vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    inputs, targets = next_token_data(vocab, batch, tokens)
    return plain_loop(model, optimizer, inputs, targets, True, True,
                      forward=lambda: model(inputs).reshape(-1, vocab))


class LSTMLanguageModel(torch.nn.Module):
    """Embedding, a 2-layer nn.LSTM (dropout between layers), a linear head over the vocabulary."""

    def __init__(self, vocab, embed=128, hidden=256):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, embed)
        self.lstm = torch.nn.LSTM(embed, hidden, num_layers=2, dropout=0.2, batch_first=True)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


def fresh3_lstm(vocab, batch, tokens):
    model = LSTMLanguageModel(vocab)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    inputs, targets = next_token_data(vocab, batch, tokens)

    def step():
        logits = model(inputs).reshape(-1, vocab)
        torch.nn.functional.cross_entropy(logits, targets).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    return step


def fresh3_vit(checkpointed, batch, size):
    model = PatchEncoder(size=size, checkpointed=checkpointed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = image_batch(batch, size)
    return plain_loop(model, optimizer, images, labels, True, True)


def fresh3_efficientnet(batch, size):
    model = torchvision_model("efficientnet_b0")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    images, labels = image_batch(batch, size)
    return plain_loop(model, optimizer, images, labels, True, True)


# bfloat16 autocast on a transformer, not a CNN: torch 1.13's CPU build here
# runs bfloat16 convolutions as aten::thnn_conv2d, one call per sample
# (efficientnet_b0 at batch 8 made 295,212 memory events, an 8.3 MB file).
def fresh3_gpt_autocast(vocab, batch, tokens):
    model = TiedGPT(vocab=vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    inputs, targets = next_token_data(vocab, batch, tokens)

    def forward():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(inputs)
        return logits.float().reshape(-1, vocab)

    return plain_loop(model, optimizer, inputs, targets, False, True, forward=forward)


# (batch, side) of each inference call in turn: the shape changes every call.
FRESH3_INFER_SHAPES = [(4, 96), (16, 128), (2, 160), (8, 64), (12, 112), (1, 144)]


def fresh3_inference():
    state = {}

    def step():
        if "model" not in state:
            state["model"] = torchvision_model("regnet_x_400mf").eval()
            state["i"] = 0
        batch, side = FRESH3_INFER_SHAPES[state["i"]]
        state["i"] += 1
        with torch.inference_mode():
            state["model"](torch.randn(batch, 3, side, side))

    return step


def sgd_momentum(parameters):
    return torch.optim.SGD(parameters, lr=0.01, momentum=0.9)


def adam(parameters):
    return torch.optim.Adam(parameters, lr=1e-3)


def adam_amsgrad(parameters):
    return torch.optim.Adam(parameters, lr=1e-3, amsgrad=True)


def rmsprop(parameters):
    return torch.optim.RMSprop(parameters, lr=1e-3, momentum=0.9)


def adagrad(parameters):
    return torch.optim.Adagrad(parameters, lr=0.01)


def zero_grad_facts(set_to_none, at_top):
    return {"set_to_none": set_to_none, "position": "top" if at_top else "end"}


# name: (builder, iterations, profiler_steps, facts).
FRESH3 = {
    "fresh3_squeezenet11_sgdm_none_2": (
        lambda: fresh3_vision("squeezenet1_1", sgd_momentum, 32, 160, True, True), 2, False, {
            "model": "torchvision squeezenet1_1, 10 classes", "input": [32, 3, 160, 160],
            "optimizer": "SGD lr 0.01 momentum 0.9", "zero_grad": zero_grad_facts(True, True),
            "description": "squeezenet1_1 training at batch 32, 160x160, 2 iterations"}),
    "fresh3_shufflenet05_adam_zero_3": (
        lambda: fresh3_vision("shufflenet_v2_x0_5", adam, 24, 112, False, False), 3, True, {
            "model": "torchvision shufflenet_v2_x0_5, 10 classes", "input": [24, 3, 112, 112],
            "optimizer": "Adam lr 1e-3", "zero_grad": zero_grad_facts(False, False),
            "description": "shufflenet_v2_x0_5 training at batch 24, 112x112, gradients zeroed in place at the "
                           "end and kept, 3 iterations, each a ProfilerStep#N range"}),
    "fresh3_densenet121_rmsprop_2": (
        lambda: fresh3_vision("densenet121", rmsprop, 2, 64, True, True), 2, False, {
            "model": "torchvision densenet121, 10 classes", "input": [2, 3, 64, 64],
            "optimizer": "RMSprop lr 1e-3 momentum 0.9", "zero_grad": zero_grad_facts(True, True),
            "description": "densenet121 training at batch 2, 64x64 (many concatenations), 2 iterations"}),
    "fresh3_mobilenetv3s_adagrad_3": (
        lambda: fresh3_vision("mobilenet_v3_small", adagrad, 12, 160, True, False), 3, False, {
            "model": "torchvision mobilenet_v3_small, 10 classes", "input": [12, 3, 160, 160],
            "optimizer": "Adagrad lr 0.01", "zero_grad": zero_grad_facts(True, False),
            "description": "mobilenet_v3_small training at batch 12, 160x160, gradients freed at the end, "
                           "3 iterations"}),
    "fresh3_googlenet_amsgrad_1": (
        lambda: fresh3_vision("googlenet", adam_amsgrad, 4, 128, True, True, aux_logits=False,
                              init_weights=True), 1, False, {
            "model": "torchvision googlenet (aux_logits False), 10 classes", "input": [4, 3, 128, 128],
            "optimizer": "Adam lr 1e-3 amsgrad", "zero_grad": zero_grad_facts(True, True),
            "description": "googlenet training at batch 4, 128x128, one iteration (it makes Adam's three "
                           "state tensors per parameter)"}),
    "fresh3_effnetb0_sgdn_2": (lambda: fresh3_efficientnet(8, 96), 2, False, {
        "model": "torchvision efficientnet_b0, 10 classes", "input": [8, 3, 96, 96],
        "optimizer": "SGD lr 0.05 momentum 0.9 nesterov weight_decay 1e-4",
        "zero_grad": zero_grad_facts(True, True),
        "description": "efficientnet_b0 training at batch 8, 96x96, 2 iterations"}),
    "fresh3_vit_d256_l6_adamw_2": (lambda: fresh3_vit(False, 8, 96), 2, False, {
        "model": "ViT-like encoder in plain PyTorch: 8x8 patches of 96x96 images (144 tokens + class "
                 "token), d_model 256, 8 heads, ff 1024, 6 pre-norm layers, GELU, 10 classes",
        "input": [8, 3, 96, 96], "optimizer": "AdamW lr 1e-3", "zero_grad": zero_grad_facts(True, True),
        "description": "ViT-like encoder training at batch 8, 2 iterations"}),
    "fresh3_vit_d256_l6_ckpt_adamw_2": (lambda: fresh3_vit(True, 12, 96), 2, True, {
        "model": "the ViT-like encoder of fresh3_vit_d256_l6_adamw_2, each layer under "
                 "torch.utils.checkpoint.checkpoint (reentrant)",
        "input": [12, 3, 96, 96], "optimizer": "AdamW lr 1e-3", "zero_grad": zero_grad_facts(True, True),
        "description": "activation-checkpointed ViT-like encoder training at batch 12 (each layer's "
                       "activations remade in backward), 2 iterations, each a ProfilerStep#N range"}),
    "fresh3_gpt_tied_seq256_adamw_2": (lambda: fresh3_gpt(4096, 4, 256), 2, True, {
        "model": "GPT-like causal decoder in plain PyTorch: vocab 4096, learned positions, 4 pre-norm blocks "
                 "(d_model 256, 8 heads, masked softmax attention, GELU MLP 1024), output projection tied to "
                 "the token embedding", "input": [4, 256],
        "optimizer": "AdamW lr 3e-4 weight_decay 0.1", "zero_grad": zero_grad_facts(True, True),
        "description": "GPT-like decoder training at batch 4 x 256 tokens, next-token cross-entropy, "
                       "2 iterations, each a ProfilerStep#N range"}),
    "fresh3_gpt_tied_seq128_bf16_adam_3": (lambda: fresh3_gpt_autocast(4096, 8, 128), 3, False, {
        "model": "the GPT-like decoder of fresh3_gpt_tied_seq256_adamw_2, forward under torch.autocast('cpu', "
                 "dtype=torch.bfloat16), logits cast to float32 for the loss", "input": [8, 128],
        "optimizer": "Adam lr 3e-4", "zero_grad": zero_grad_facts(False, True),
        "description": "GPT-like decoder training with bfloat16 autocast at batch 8 x 128 tokens, gradients "
                       "zeroed in place at the top and kept, 3 iterations"}),
    "fresh3_lstm_lm_sgd_zero_3": (lambda: fresh3_lstm(8000, 32, 32), 3, False, {
        "model": "LSTM language model: Embedding(8000, 128), 2-layer nn.LSTM(128, 256, dropout 0.2), "
                 "Linear(256, 8000)", "input": [32, 32],
        "optimizer": "SGD lr 0.5, clip_grad_norm_ 0.25 before the step",
        "zero_grad": zero_grad_facts(False, False),
        "description": "LSTM language model training at batch 32 x 32 tokens, gradients clipped, zeroed in "
                       "place at the end and kept, 3 iterations"}),
    "fresh3_regnetx400_infer_shapes_6": (fresh3_inference, len(FRESH3_INFER_SHAPES), True, {
        "model": "torchvision regnet_x_400mf, 10 classes, eval, built by the first step inside the recording",
        "input": [[b, 3, s, s] for b, s in FRESH3_INFER_SHAPES], "optimizer": None, "zero_grad": None,
        "description": "inference under torch.inference_mode at 6 (batch, side) shapes in turn, each call a "
                       "ProfilerStep#N range"}),
}


def record_fresh(name, out):
    """Records one fresh3 run (in this fresh process); returns its facts, measured from the events."""
    builder, iterations, profiler_steps, facts = FRESH3[name]
    torch.manual_seed(0)
    step = builder()
    roots = record(step, iterations, profiler_steps=profiler_steps)
    path = os.path.join(out, name + ".json.gz")
    write_trace(path, roots, name.replace("_", " "))
    events = memory_events(roots, name)
    peak = max(e[2] for e in events)
    sizes = [e[1] for e in events if e[1] > 0]
    facts = dict(facts)
    facts.update({
        "name": name, "file": name + ".json.gz", "iterations": iterations, "profiler_steps": profiler_steps,
        "measured": {
            "memory_events": len(events),
            "allocations": len(sizes),
            "smallest_allocation_bytes": min(sizes),
            "largest_allocation_bytes": max(sizes),
            "peak_total_allocated_bytes": peak,
            "peak_total_allocated_mib": round(peak / 2**20, 1),
            "total_allocated_at_end": events[-1][2],
        },
    })
    return facts


def fresh3_split_md(names, split):
    """fresh3/SPLIT.md: the whole folder is a held-out test set."""
    return ("# Split of the fresh3 recordings\n\n"
            "The whole folder is a held-out test set: every recording is \"test\", none is \"tuning\".\n"
            "These traces (`tools/record_trace.py --only fresh3`) were recorded on 2026-12-03, after\n"
            "the allocator policy's last change, to check the default policy against PyTorch's on\n"
            "models and settings it was not tuned on (issue 29, part 3). They were never used for\n"
            "tuning, and must not be: do not adjust the policy, its parameters or its tests'\n"
            "expectations to fit them. Results on this folder are reported as they come.\n\n"
            + split_table(names, split))


def record_fresh_group(out):
    import subprocess
    import time

    folder = os.path.join(out, FRESH3_DIR)
    os.makedirs(folder, exist_ok=True)
    split = loops2_split(FRESH3)  # every recording "test"
    facts = []
    for name in FRESH3:
        began = time.time()
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--fresh", name, "--out", folder],
                             check=True, stdout=subprocess.PIPE, text=True)
        sys.stdout.write("".join(l + "\n" for l in run.stdout.splitlines() if not l.startswith("FACTS ")))
        [line] = [l for l in run.stdout.splitlines() if l.startswith("FACTS ")]
        fact = json.loads(line[len("FACTS "):])
        memory, steps = check_loop_file(os.path.join(folder, fact["file"]))
        if memory != fact["measured"]["memory_events"] or steps != (fact["iterations"] if fact["profiler_steps"] else 0):
            raise SystemExit(f"{name}: the file holds {memory} [memory] events and {steps} ProfilerStep spans")
        print(f"  {time.time() - began:.1f} s, peak Total Allocated {fact['measured']['peak_total_allocated_mib']} MiB")
        fact["split"] = split[name]
        order = ["name", "file", "model", "optimizer", "zero_grad", "input", "iterations", "profiler_steps",
                 "split", "description"]
        facts.append({**{k: fact[k] for k in order}, **{k: v for k, v in fact.items() if k not in order}})
    facts.sort(key=lambda f: f["name"])
    with open(os.path.join(folder, "FACTS.json"), "w") as f:
        json.dump({
            "recorded_by": "tools/record_trace.py --only fresh3",
            "recorded_on": "2026-12-03",
            "torch": torch.__version__,
            "device": "cpu (host memory), one intra-op thread, torch.manual_seed(0) before each recording, "
                      "each in a fresh process (Total Allocated from 0)",
            "iteration": "one call of the recording's step function: (zero_grad,) forward, backward, optimizer "
                         "step; for fresh3_regnetx400_infer_shapes_6 one inference call",
            "split_rule": "see SPLIT.md: every recording is \"test\"",
            "recordings": facts,
        }, f, indent=2)
        f.write("\n")
    with open(os.path.join(folder, "SPLIT.md"), "w") as f:
        f.write(fresh3_split_md(FRESH3, split))
    print(f"{folder}: FACTS.json and SPLIT.md for {len(facts)} recordings")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["resnet18_adamw", "no_memory", "vit_b16", "vit_b16_3iter", "inference",
                                           "transformer_4iter", "loops", "loops2", "fresh3"],
                        help="record one newer trace only (see below)")
    parser.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "tests", "data", "traces")),
                        help="output directory (default: tests/data/traces)")
    # --only loops (loops2) runs this script again, once per loop, with --loop NAME.
    parser.add_argument("--loop", choices=sorted(ALL_LOOPS), help=argparse.SUPPRESS)
    # --only fresh3 runs this script again, once per recording, with --fresh NAME.
    parser.add_argument("--fresh", choices=sorted(FRESH3), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # One intra-op thread: every allocation on the main thread, in a
    # reproducible order.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out = os.path.normpath(args.out)
    if args.loop:
        print("FACTS " + json.dumps(record_loop(args.loop, out)))
        return 0
    if args.fresh:
        print("FACTS " + json.dumps(record_fresh(args.fresh, out)))
        return 0
    if args.only == "fresh3":
        record_fresh_group(out)
        return 0
    if args.only in LOOP_GROUPS:
        record_loops(out, args.only)
        return 0
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
