#!/usr/bin/python3
"""Records one real PyTorch training step per configuration, with its ONNX graph.

Ground truth for src/train (the memory of one training step predicted from a
training-mode ONNX graph). Run by hand, not by CI (Debian's python3-torch 1.13,
python3-torchvision 0.14 and python3-onnx, CPU only, hence the interpreter):

    /usr/bin/python3 tools/record_training.py                 # all configurations
    /usr/bin/python3 tools/record_training.py --only NAME ... # some of them
    /usr/bin/python3 tools/record_training.py --dump NAME     # allocation list of a recorded step

Each configuration runs in a fresh subprocess and writes, under tests/data/train/:

  NAME.trace.json.gz  the profiled step (iteration 3), in the Chrome-trace
                      format tools/record_trace.py writes (gpumem's reader
                      takes it): "[memory]" instants, operators as "cpu_op",
                      the ranges gpumem:zero_grad, gpumem:forward,
                      gpumem:loss, gpumem:backward, gpumem:optimizer as
                      "user_annotation". Operators also carry Kineto's
                      "Input Dims" and "Input type" args (record_shapes).
  NAME.facts.json     configuration, parameter / buffer / optimizer-state /
                      batch / label bytes, resident bytes, the recorded peak,
                      per-phase figures, and the ONNX initializer names.
  NAME.onnx           the same model exported in training mode
                      (opset 14, TrainingMode.TRAINING, no constant folding),
                      graph-only (initializer data erased, dims kept,
                      value_info removed), as tools/export_models.py does.

How it is recorded. The subprocess enables the profiler (memory on, shapes
on) *before* it builds the model and keeps it on through two warm-up
iterations and the profiled third; only iteration 3's events are written.
So every tensor alive in the step was allocated while memory profiling was
on and "Total Allocated" is absolute: at the step's first event it is
exactly resident + the gradients left by iteration 2 (checked, facts
"untracked_bytes_at_step_start" is 0), and zero_grad(set_to_none=True)
shows up as the frees of those gradients. (With the profiler enabled only
for iteration 3, those frees would be invisible: the CPU allocator's
reporter drops frees of blocks it did not see allocated.)

Definitions (all bytes, CPU, one intra-op thread, so every event is on the
main thread in a reproducible order):

  resident_bytes            distinct storages (deduped by data_ptr) of
                            parameters, buffers, optimizer state, input batch
                            and labels, measured just before iteration 3.
  "above resident"          Total Allocated - resident_bytes. The step starts
                            at +gradient bytes (iteration 2's gradients) and
                            zero_grad brings it to 0.
  step_peak_allocated_bytes max Total Allocated during the step - resident_bytes
                            (= the peak above resident; equal to what a
                            profiler enabled for iteration 3 only would show as
                            max Total Allocated minus its starting value).
  recorded_peak_bytes       resident_bytes + step_peak_allocated_bytes
                            (= the largest absolute Total Allocated of the step).
  per phase                 allocated / freed / net bytes, allocation and free
                            counts, max_above_resident (largest running
                            total, above resident, reached in the phase),
                            max_above_step_start (the same, minus the Total
                            Allocated just before the step's first event,
                            i.e. also minus iteration 2's gradients) and
                            start_above_resident (at the phase's first event).
                            Phase "between": events outside the five ranges
                            (record_function handles, autocast's cache).

Reading the traces. `gpumem trace stats` reads every file; it reports
"frees of addresses the trace never allocated" (skipped; --strict rejects
them): the zero_grad frees of iteration 2's gradients, allocated before the
written step, and one 4-byte profiler handle. Its "allocated before
recording began" is resident + iteration 2's gradients (+4 B), its peak is
recorded_peak_bytes, and its "traced peak" (the trace's own allocations)
equals step_peak_allocated_bytes.

What the recordings show (torch 1.13 CPU; `--dump NAME` lists every event):

  - record_function itself allocates: each range (the gpumem:* ones and the
    optimizer's own Optimizer.zero_grad#.../Optimizer.step#...) allocates a
    4-byte handle (aten::zeros, just *before* the range begins, so it lands
    in phase "between") and a transient 288-byte aten::empty. Profiler
    noise: at most a few hundred bytes.
  - Convolutions run through mkldnn: the forward allocates its output in
    mkldnn's buffer and copies it into a dense aten::empty, so a conv holds
    2x its output for a moment (plus a weight-sized reorder for some);
    convolution_backward likewise double-buffers grad_input and the weight
    gradient. resnet18's peak is such a moment: layer4's last 512x512x3x3
    conv backward, its 9 MiB weight gradient held twice, with nearly all
    forward activations still alive.
  - BatchNorm (training) keeps save_mean and save_invstd (C floats each) and
    two transient C-float buffers; ReLU is in place (torchvision's
    inplace=True), allocates nothing; max_pool2d keeps int64 indices (2x its
    fp32 output).
  - Dropout (training) keeps its output and a float mask of the same size
    (aten::empty<aten::empty_like + aten::mul<aten::dropout).
  - cross_entropy keeps log_softmax's output (N x classes); its backward
    allocates 3 logits-sized buffers (nll_loss_backward, 
    _log_softmax_backward_data), which is where both transformer peaks fall.
  - mobilenet_v2's peak is the start of backward: its forward activations
    (~590 MiB at batch 8) dwarf every transient.
  - SGD with momentum (for-loop, foreach=None) updates in place: no
    parameter-sized temporaries. AdamW (for-loop, torch 1.13's
    _single_tensor_adamw) allocates per parameter exp_avg_sq.sqrt() and
    its division (the denominator), 2 x that parameter, plus 4-byte step
    scalars; the sqrt is freed at once, but the denominator stays bound to
    a Python local until the next parameter's replaces it. So the optimizer
    phase peaks at gradients + max over consecutive parameters (i-1, i) of
    size(i-1) + 2 x size(i): in transformer_adamw embed.weight (1,024,000)
    then in_proj_weight (2 x 786,432) over the 14,821,284 of gradients.
  - Frozen layers (resnet18_frozen): the frozen prefix saves no activations
    for backward (nothing before layer3 requires grad), so forward's net is
    ~24 MiB instead of ~165 MiB.
  - bf16 autocast: each weight is cast (aten::_to_copy, bf16) once per
    forward; casts that autograd saves (matmul weights) live until their
    backward, the others (biases) are freed when autocast exits, which
    happens between the loss and backward ranges ("between" frees). The
    logits are bf16, cross_entropy casts them to fp32 first (loss phase).

The m_* configurations (M_CONFIGS; tools/record_checkpointed.py adds
m_resnet18_cseq*) vary the older ones: bf16 autocast on the CNNs, exports at
opsets 11, 13 and 17, with constant folding, with a dynamic batch axis,
other batches, Adam/AdamW with foreach=True/False, zero_grad(set_to_none=
False). Their facts add "base_configuration", "split" (tuning / held_out,
tests/data/train/SPLIT.md), "config.autocast", "onnx.dynamic_axes" and
"gpumem" (the settings and `gpumem train` arguments of the recorded step).
They are not in the table below (tests/data/train/SPLIT.md lists them).

Recorded figures (torch 1.13.0 CPU; MiB = 2^20 bytes; "above res." is relative to resident):

  resnet18_sgd: resident 98371616 (93.81 MiB: params 44.59 [frozen 0.00], buffers 0.04, optimizer 44.59, batch 4.59, labels 64 B)
    step peak above resident 210560424 (200.81 MiB), recorded peak 308932040 (294.62 MiB) in backward at event 624, op aten::empty (top-level autograd::engine::evaluate_function: ConvolutionBackward0)
    step starts 44.59 MiB above resident (iteration 2's gradients 44.59 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580     46758632    -46758052       3     66       46758340
    forward       367915340    195223120    172692220     249    169      182076928
    loss              32296        32292            4       4      3      172724232
    backward      754180048    880114236   -125934188     277    299      210560424
    optimizer          1324         1328           -4     127    128       46758340
    between              16            0           16       4      0      172692236

  mobilenet_v2_sgd: resident 32992800 (31.46 MiB: params 13.37 [frozen 0.00], buffers 0.13, optimizer 13.37, batch 4.59, labels 64 B)
    step peak above resident 630092980 (600.90 MiB), recorded peak 663085780 (632.37 MiB) in backward at event 1099, op aten::div (top-level autograd::engine::evaluate_function: MeanBackward1)
    step starts 13.37 MiB above resident (iteration 2's gradients 13.37 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580     14020072    -14019492       3    162       14019780
    forward       836757464    213722588    623034876     575    330      623075840
    loss              32296        32292            4       4      3      623066888
    backward     1257693008   1866708412   -609015404     471    562      630092980
    optimizer          2476         2480           -4     319    320       14019780
    between              16            0           16       4      0      623034892

  transformer_adamw: resident 44480440 (42.42 MiB: params 14.13 [frozen 0.00], buffers 0.00, optimizer 28.27, batch 0.01, labels 8192 B)
    step peak above resident 131899432 (125.79 MiB), recorded peak 176379872 (168.21 MiB) in backward at event 315, op aten::_log_softmax_backward_data (top-level autograd::engine::evaluate_function: LogSoftmaxBackward0)
    step starts 14.13 MiB above resident (iteration 2's gradients 14.13 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580     14821864    -14821284       3     58       14821572
    forward       187671056     63963636    123707420     163     75      123707424
    loss            4096296      4096292            4       4      3      127803432
    backward      176124116    285010272   -108886156     161    199      131899432
    optimizer      29647028     29647032           -4     759    760       17418156
    between              16            0           16       4      0      123707436

  resnet18_frozen: resident 95639328 (91.21 MiB: params 44.59 [frozen 2.61], buffers 0.04, optimizer 41.99, batch 4.59, labels 64 B)
    step peak above resident 62834600 (59.92 MiB), recorded peak 158473928 (151.13 MiB) in backward at event 634, op aten::empty (top-level autograd::engine::evaluate_function: ConvolutionBackward0)
    step starts 41.99 MiB above resident (iteration 2's gradients 41.99 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580     44026344    -44025764       3     36       44026052
    forward       367915340    342948944     24966396     249    209       51381248
    loss              32296        32292            4       4      3       24998408
    backward      223998544    204939196     19059348     136    148       62834600
    optimizer           964          968           -4      67     68       44026052
    between              16            0           16       4      0       44025764

  transformer_bf16: resident 44480440 (42.42 MiB: params 14.13 [frozen 0.00], buffers 0.00, optimizer 28.27, batch 0.01, labels 8192 B)
    step peak above resident 83652648 (79.78 MiB), recorded peak 128133088 (122.20 MiB) in backward at event 476, op aten::_log_softmax_backward_data (top-level autograd::engine::evaluate_function: LogSoftmaxBackward0)
    step starts 14.13 MiB above resident (iteration 2's gradients 14.13 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580     14821864    -14821284       3     58       14821572
    forward       131124920     57691852     73433068     251    129       74515184
    loss            8192296      6144292      2048004       5      4       81625080
    backward      156765340    217404712    -60639372     283    338       83652648
    optimizer      29647028     29647032           -4     759    760       17418156
    between              16        20432       -20416       4     17       75479080

  resnet50_sgd: resident 207077640 (197.48 MiB: params 97.49 [frozen 0.00], buffers 0.20, optimizer 97.49, batch 2.30, labels 32 B)
    step peak above resident 406678952 (387.84 MiB), recorded peak 613756592 (585.32 MiB) in backward at event 1263, op aten::empty (top-level autograd::engine::evaluate_function: ConvolutionBackward0)
    step starts 97.49 MiB above resident (iteration 2's gradients 97.49 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580    102228712   -102228132       3    165      102228420
    forward       522837972    181379928    341458044     546    335      347614720
    loss              16296        16292            4       4      3      341474056
    backward     1184214736   1423444668   -239229932     515    569      406678952
    optimizer          2512         2516           -4     325    326      102228420
    between              16            0           16       4      0      341458060

  gpt_adam: resident 25490280 (24.31 MiB: params 8.10 [frozen 0.00], buffers 0.00, optimizer 16.20, batch 0.00, labels 4608 B)
    step peak above resident 55881248 (53.29 MiB), recorded peak 81371528 (77.60 MiB) in backward at event 250, op aten::_log_softmax_backward_data (top-level autograd::engine::evaluate_function: LogSoftmaxBackward0)
    step starts 8.10 MiB above resident (iteration 2's gradients 8.10 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580      8494216     -8493636       3     46        8493924
    forward        68415444     21750208     46665236     126     59       46702104
    loss            4608296      4608292            4       4      3       51273248
    backward       70362480    108534100    -38171620     124    153       55881248
    optimizer      16990364     16990368           -4     507    508       11639372
    between              16            0           16       4      0       46665252

  vgg11_bn_sgd: resident 1034678640 (986.75 MiB: params 492.79 [frozen 0.00], buffers 0.02, optimizer 492.79, batch 1.15, labels 16 B)
    step peak above resident 666924952 (636.03 MiB), recorded peak 1701603592 (1622.78 MiB) in backward at event 374, op aten::empty (top-level autograd::engine::evaluate_function: ConvolutionBackward0)
    step starts 492.79 MiB above resident (iteration 2's gradients 492.79 MiB; untracked 4 B)
    phase         allocated        freed          net  #alloc  #free  max above res
    zero_grad           580    516726744   -516726164       3     42      516726452
    forward       274768280    118802556    155965724     118     69      164398592
    loss               1096         1092            4       4      3      155966536
    backward      978832116    618071696    360760420     138    153      666924952
    optimizer          1036         1040           -4      79     80      516726452
    between              16            0           16       4      0      516726164

"""
import argparse
import decimal
import gzip
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
OUT_DIR = REPO_ROOT / "tests" / "data" / "train"
PHASES = ["zero_grad", "forward", "loss", "backward", "optimizer"]
RANGE_PREFIX = "gpumem:"

# --------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------

CONFIGS = {
    "resnet18_sgd": dict(model="torchvision.models.resnet18(num_classes=1000)", kind="resnet18", batch=8,
                         input_shape=[8, 3, 224, 224], input_dtype="float32",
                         optimizer="SGD", optimizer_args=dict(lr=0.1, momentum=0.9), frozen=None,
                         precision="fp32", loss="cross_entropy(logits[8,1000], labels[8])"),
    "mobilenet_v2_sgd": dict(model="torchvision.models.mobilenet_v2()", kind="mobilenet_v2", batch=8,
                             input_shape=[8, 3, 224, 224], input_dtype="float32",
                             optimizer="SGD", optimizer_args=dict(lr=0.1, momentum=0.9), frozen=None,
                             precision="fp32", loss="cross_entropy(logits[8,1000], labels[8])"),
    "transformer_adamw": dict(model="TinyLM: Embedding(1000,256) + learned positions [128,1,256] + "
                                    "TransformerEncoder(4 x TransformerEncoderLayer(256, nhead=4, "
                                    "dim_feedforward=1024, dropout=0.1, gelu, batch_first=False)) + "
                                    "LayerNorm(256) + Linear(256,1000); forward returns logits "
                                    "reshaped to [seq*batch, 1000]",
                              kind="transformer", batch=8, input_shape=[128, 8], input_dtype="int64",
                              optimizer="AdamW", optimizer_args=dict(lr=1e-3), frozen=None,
                              precision="fp32", loss="cross_entropy(logits[1024,1000], labels[1024])"),
    "resnet18_frozen": dict(model="torchvision.models.resnet18(num_classes=1000)", kind="resnet18", batch=8,
                            input_shape=[8, 3, 224, 224], input_dtype="float32",
                            optimizer="SGD", optimizer_args=dict(lr=0.1, momentum=0.9),
                            frozen=r"^(conv1|bn1|layer1|layer2)\.",
                            precision="fp32", loss="cross_entropy(logits[8,1000], labels[8])"),
    "transformer_bf16": dict(model="TinyLM as transformer_adamw", kind="transformer", batch=8,
                             input_shape=[128, 8], input_dtype="int64",
                             optimizer="AdamW", optimizer_args=dict(lr=1e-3), frozen=None,
                             precision="bf16 autocast (torch.autocast('cpu', dtype=torch.bfloat16)) around "
                                       "forward and loss; weights, gradients and optimizer state fp32",
                             loss="cross_entropy(logits[1024,1000], labels[1024])"),
    # Held out: src/train was not calibrated on these three.
    "resnet50_sgd": dict(model="torchvision.models.resnet50(num_classes=1000)", kind="resnet50", batch=4,
                         input_shape=[4, 3, 224, 224], input_dtype="float32",
                         optimizer="SGD", optimizer_args=dict(lr=0.1, momentum=0.9), frozen=None,
                         precision="fp32", loss="cross_entropy(logits[4,1000], labels[4])"),
    "gpt_adam": dict(model="TinyGPT: Embedding(2000,192) + learned positions [96,1,192] + "
                           "TransformerEncoder(3 x TransformerEncoderLayer(192, nhead=6, dim_feedforward=768, "
                           "dropout=0.1, relu, batch_first=False, norm_first=True)) with a causal mask "
                           "(torch.triu of -inf, built in forward) + LayerNorm(192) + Linear(192,2000); "
                           "forward returns logits reshaped to [seq*batch, 2000]",
                     kind="gpt", batch=6, input_shape=[96, 6], input_dtype="int64", classes=2000,
                     optimizer="Adam", optimizer_args=dict(lr=1e-3), frozen=None,
                     precision="fp32", loss="cross_entropy(logits[576,2000], labels[576])"),
    # vgg11_bn at 224x224: at 128x128 the 4x4 feature map's AdaptiveAvgPool2d((7,7)) does not export
    # (opset 14: "output size that are not factor of input size"); at 224 it is already 7x7.
    "vgg11_bn_sgd": dict(model="torchvision.models.vgg11_bn(num_classes=100)", kind="vgg11_bn", batch=2,
                         input_shape=[2, 3, 224, 224], input_dtype="float32", classes=100,
                         optimizer="SGD", optimizer_args=dict(lr=0.1, momentum=0.9), frozen=None,
                         precision="fp32", loss="cross_entropy(logits[2,100], labels[2])"),
}

# --------------------------------------------------------------------------
# The m_* configurations: variants of the ones above, recorded to check
# src/train on settings it was not built against (tests/data/train/SPLIT.md
# says which are held out). Each is a base configuration with some of:
#   batch            another batch (input, labels and loss shapes follow)
#   autocast         "bf16": torch.autocast("cpu", dtype=torch.bfloat16)
#                    around forward and loss (the export stays fp32)
#   opset            export at this opset only (default: 14, else 15)
#   constant_folding torch.onnx.export's do_constant_folding (default False)
#   dynamic_batch    export with dynamic_axes naming the batch axis "batch"
#                    (the logits' first axis "batch", or "rows" for the
#                    sequence-first LMs, whose logits are [seq*batch, V])
#   optimizer_args   e.g. foreach=True / False (default None: for-loop on CPU)
#   set_to_none      False: optimizer.zero_grad(set_to_none=False)
# Configurations without these keys behave exactly as before.
# --------------------------------------------------------------------------

def variant(base, batch=None, **changes):
    cfg = dict(CONFIGS[base])
    cfg["base"] = base
    cfg["optimizer_args"] = dict(cfg["optimizer_args"])
    cfg["optimizer_args"].update(changes.pop("optimizer_args", {}))
    cfg.update(changes)
    b = batch or cfg["batch"]
    classes = cfg.get("classes", 1000)
    cfg["batch"] = b
    if cfg["kind"] in ("transformer", "gpt"):
        seq = cfg["input_shape"][0]
        cfg["input_shape"] = [seq, b]
        cfg["loss"] = f"cross_entropy(logits[{seq * b},{classes}], labels[{seq * b}])"
    else:
        cfg["input_shape"] = [b] + cfg["input_shape"][1:]
        cfg["loss"] = f"cross_entropy(logits[{b},{classes}], labels[{b}])"
    if cfg.get("autocast") == "bf16":
        cfg["precision"] = ("bf16 autocast (torch.autocast('cpu', dtype=torch.bfloat16)) around forward and "
                            "loss; weights, gradients and optimizer state fp32")
    cfg.setdefault("opset", 14)
    cfg.setdefault("constant_folding", False)
    cfg.setdefault("dynamic_batch", False)
    cfg.setdefault("set_to_none", True)
    return cfg


M_CONFIGS = {
    # Convolutional nets under bf16 autocast (the only older bf16 recording is a transformer).
    "m_resnet18_bf16": variant("resnet18_sgd", 8, autocast="bf16"),
    # (mobilenet_v2 cannot be trained under CPU bf16 autocast in torch 1.13: its ReLU6's backward fails,
    # "hardshrink_backward_cpu" not implemented for 'BFloat16'. resnet18 with Adam instead.)
    "m_resnet18_bf16_adam": variant("resnet18_sgd", 4, autocast="bf16", optimizer="Adam",
                                    optimizer_args=dict(lr=1e-3, momentum=None)),
    "m_vgg11_bn_bf16": variant("vgg11_bn_sgd", 2, autocast="bf16"),
    "m_resnet50_bf16": variant("resnet50_sgd", 2, autocast="bf16"),
    # Older opsets (torch 1.13 writes BatchNormalization with 5 outputs up to opset 13) and opset 17.
    "m_resnet18_o13": variant("resnet18_sgd", 4, opset=13),
    "m_mobilenet_v2_o13": variant("mobilenet_v2_sgd", 2, opset=13),
    "m_resnet18_o11": variant("resnet18_sgd", 6, opset=11, optimizer_args=dict(momentum=0)),
    "m_mobilenet_v2_o17": variant("mobilenet_v2_sgd", 6, opset=17),
    # Constant folding, dynamic batch axes.
    "m_resnet18_fold": variant("resnet18_sgd", 12, constant_folding=True),
    "m_resnet18_dyn": variant("resnet18_sgd", 16, dynamic_batch=True),
    "m_gpt_fold_dyn": variant("gpt_adam", 4, opset=17, constant_folding=True, dynamic_batch=True),
    # The sequence-first LMs at other batches.
    "m_transformer_b4": variant("transformer_adamw", 4, dynamic_batch=True),
    "m_transformer_b16": variant("transformer_adamw", 16),
    "m_gpt_b12": variant("gpt_adam", 12),
    # Adam / AdamW for-loop and multi-tensor (foreach) implementations; zero_grad(set_to_none=False).
    "m_transformer_foreach_on": variant("transformer_adamw", 8, optimizer_args=dict(foreach=True)),
    "m_gpt_adam_foreach_on": variant("gpt_adam", 8, optimizer_args=dict(foreach=True)),
    "m_gpt_adam_foreach_off": variant("gpt_adam", 8, optimizer_args=dict(foreach=False)),
    "m_resnet18_adamw_foreach": variant("resnet18_sgd", 4, optimizer="AdamW",
                                        optimizer_args=dict(lr=1e-3, momentum=None, foreach=True)),
    "m_resnet18_zero": variant("resnet18_sgd", 8, set_to_none=False),
    "m_transformer_zero": variant("transformer_adamw", 8, set_to_none=False),
}
for _cfg in M_CONFIGS.values():
    _cfg["optimizer_args"] = {k: v for k, v in _cfg["optimizer_args"].items() if v is not None}
CONFIGS.update(M_CONFIGS)

# Every m_* recording (these and tools/record_checkpointed.py's m_resnet18_cseq*), frozen: sorted by
# name, positions 3, 6, 9, ... (counting from 1) are held out, the others tune (tests/data/train/SPLIT.md).
M_NAMES = sorted(list(M_CONFIGS) + ["m_resnet18_cseq2", "m_resnet18_cseq3", "m_resnet18_cseq4"])
M_SPLIT = {n: ("held_out" if (i + 1) % 3 == 0 else "tuning") for i, n in enumerate(M_NAMES)}


def gpumem_settings(cfg):
    """How `gpumem train` is told the recorded step's settings (facts "gpumem")."""
    args = cfg["optimizer_args"]
    opt = {"SGD": "sgd-momentum" if args.get("momentum") else "sgd", "Adam": "adam", "AdamW": "adamw"}[cfg["optimizer"]]
    foreach = args.get("foreach")
    out = {"optimizer": opt,
           "precision": "amp-bf16" if cfg.get("autocast") == "bf16" else "fp32",
           "foreach": None if foreach is None else ("on" if foreach else "off"),
           "grads": "set-to-none" if cfg.get("set_to_none", True) else "zero",
           "batch": cfg["batch"] if cfg.get("dynamic_batch") else None,
           "checkpoint": []}
    cli = ["--device", "cpu", "--optimizer", out["optimizer"], "--precision", out["precision"]]
    if out["foreach"]:
        cli += ["--foreach", out["foreach"]]
    if out["grads"] == "zero":
        cli += ["--grads", "zero"]
    if out["batch"]:
        cli += ["--batch", str(out["batch"])]
    out["args"] = cli
    return out


def build(name):
    """Model, optimizer, batch, labels and autocast dtype of a configuration (seeded)."""
    import torch
    import torchvision
    from torch import nn

    cfg = CONFIGS[name]
    torch.manual_seed(0)
    if cfg["kind"] == "resnet18":
        model = torchvision.models.resnet18(num_classes=1000)
    elif cfg["kind"] == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2()
    elif cfg["kind"] == "resnet50":
        model = torchvision.models.resnet50(num_classes=1000)
    elif cfg["kind"] == "vgg11_bn":
        model = torchvision.models.vgg11_bn(num_classes=100)
    elif cfg["kind"] == "gpt":
        model = tiny_gpt_class()()
    else:
        model = TinyLM()
    model.train()
    if cfg["frozen"]:
        pattern = re.compile(cfg["frozen"])
        for pname, p in model.named_parameters():
            if pattern.search(pname):
                p.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if cfg["optimizer"] == "SGD":
        optimizer = torch.optim.SGD(trainable, **cfg["optimizer_args"])
    elif cfg["optimizer"] == "Adam":
        optimizer = torch.optim.Adam(trainable, **cfg["optimizer_args"])
    else:
        optimizer = torch.optim.AdamW(trainable, **cfg["optimizer_args"])
    classes = cfg.get("classes", 1000)
    if cfg["kind"] in ("transformer", "gpt"):
        x = torch.randint(0, classes, tuple(cfg["input_shape"]))
        y = torch.randint(0, classes, (cfg["input_shape"][0] * cfg["input_shape"][1],))
    else:
        x = torch.randn(*cfg["input_shape"])
        y = torch.randint(0, classes, (cfg["batch"],))
    autocast = torch.bfloat16 if name == "transformer_bf16" or cfg.get("autocast") == "bf16" else None
    return model, optimizer, x, y, autocast


def tiny_lm_class():
    from torch import nn

    class TinyLM(nn.Module):
        def __init__(self, vocab=1000, d_model=256, seq=128):
            super().__init__()
            self.vocab = vocab
            self.embed = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(0.02 * __import__("torch").randn(seq, 1, d_model))
            layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=4, dim_feedforward=1024, dropout=0.1,
                                               activation="gelu", batch_first=False)
            self.encoder = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, tokens):  # tokens [seq, batch] int64
            h = self.embed(tokens) + self.pos
            h = self.norm(self.encoder(h))
            return self.head(h).reshape(-1, self.vocab)

    return TinyLM


def TinyLM():
    return tiny_lm_class()()


def tiny_gpt_class():
    import torch
    from torch import nn

    class TinyGPT(nn.Module):
        """Decoder-only (GPT-style): pre-norm encoder layers under a causal mask."""

        def __init__(self, vocab=2000, d_model=192, seq=96):
            super().__init__()
            self.vocab = vocab
            self.seq = seq
            self.embed = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(0.02 * torch.randn(seq, 1, d_model))
            layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=6, dim_feedforward=768, dropout=0.1,
                                               activation="relu", batch_first=False, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, tokens):  # tokens [seq, batch] int64
            # Causal mask built here (not a buffer), so the export carries it (Trilu, opset 14).
            mask = torch.triu(torch.full((self.seq, self.seq), float("-inf"), device=tokens.device), diagonal=1)
            h = self.embed(tokens) + self.pos
            h = self.norm(self.encoder(h, mask=mask))
            return self.head(h).reshape(-1, self.vocab)

    return TinyGPT


# --------------------------------------------------------------------------
# Recording (runs in the per-configuration subprocess)
# --------------------------------------------------------------------------

def storage_key(t):
    s = t.storage() if hasattr(t, "storage") and not hasattr(t, "untyped_storage") else t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def tensors_bytes(tensors, seen):
    """Bytes of the storages of `tensors` not yet in `seen` (and adds them)."""
    total = 0
    for t in tensors:
        ptr, nbytes = storage_key(t)
        if ptr in seen:
            continue
        seen.add(ptr)
        total += nbytes
    return total


def optimizer_state_tensors(optimizer):
    import torch

    out = []
    for state in optimizer.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor):
                out.append(v)
    return out


def step(model, optimizer, x, y, autocast, ranges, set_to_none=True):
    import torch
    from torch.autograd.profiler import record_function
    from contextlib import nullcontext

    def rng(phase):
        return record_function(RANGE_PREFIX + phase) if ranges else nullcontext()

    cast = torch.autocast("cpu", dtype=autocast) if autocast is not None else nullcontext()
    with rng("zero_grad"):
        optimizer.zero_grad(set_to_none=set_to_none)
    with cast:
        with rng("forward"):
            logits = model(x)
        with rng("loss"):
            loss = torch.nn.functional.cross_entropy(logits, y)
            del logits  # as `loss = criterion(model(x), y)`: the logits die with the loss phase
    with rng("backward"):
        loss.backward()
        del loss
    with rng("optimizer"):
        optimizer.step()


def shapes_and_types(event):
    try:
        inputs = event.extra_fields.inputs
        return [list(s) for s in inputs.shapes], [str(d) for d in inputs.dtypes]
    except Exception:
        return None, None


def chrome_lines(roots, pid):
    """tools/record_trace.py's to_chrome_events, plus Kineto's "Input Dims"/"Input type"
    args on operators, and the gpumem:* ranges always kept."""
    sys.path.insert(0, str(HERE))
    from record_trace import memory_record, microseconds
    from torch._C._profiler import RecordScope, _EventType

    spans, memory = [], []

    def walk(event):
        if event.tag == _EventType.Allocation:
            memory.append(memory_record(event))
            return True
        has_memory = False
        for child in event.children:
            has_memory |= walk(child)
        if event.tag == _EventType.TorchOp and (has_memory or event.name.startswith(RANGE_PREFIX)):
            user = event.extra_fields.scope == RecordScope.USER_SCOPE
            dims, types = (None, None) if user else shapes_and_types(event)
            spans.append((event.start_time_ns, event.duration_time_ns, event.start_tid, event.name,
                          "user_annotation" if user else "cpu_op", dims, types))
        return has_memory

    for root in roots:
        walk(root)
    spans.sort(key=lambda s: (s[0], -s[1]))
    memory.sort(key=lambda m: m[0])
    lines = []
    for ident, (start, duration, tid, name, category, dims, types) in enumerate(spans, 1):
        args = {"External id": ident}
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = types
        lines.append(
            f'{{"ph": "X", "cat": "{category}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {microseconds(start)}, "dur": {microseconds(duration)}, "args": {json.dumps(args, separators=(",", ":"))}}}')
    for start, tid, args in memory:
        lines.append(
            f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": {pid}, "tid": {tid}, '
            f'"ts": {microseconds(start)}, "args": {json.dumps(args)}}}')
    return lines, len(spans), len(memory)


def write_atomically(path, data):
    sys.path.insert(0, str(HERE))
    from export_models import write_atomically as w
    w(Path(path), data)


def dynamic_axes(cfg):
    """dynamic_axes of an m_* configuration with dynamic_batch (None otherwise)."""
    if not cfg.get("dynamic_batch"):
        return None
    if cfg["kind"] in ("transformer", "gpt"):
        return {"tokens": {1: "batch"}, "logits": {0: "rows"}}
    return {"images": {0: "batch"}, "logits": {0: "batch"}}


def export_onnx(name, model, x):
    """Training-mode ONNX export; returns (graph-only bytes, opset, initializer names)."""
    import onnx
    import torch
    sys.path.insert(0, str(HERE))
    from export_models import strip_to_graph_only

    cfg = CONFIGS[name]
    lm = cfg["kind"] in ("transformer", "gpt")
    input_name = "tokens" if lm else "images"
    axes = dynamic_axes(cfg)
    last = None
    for opset in (cfg["opset"],) if "opset" in cfg else (14, 15):
        buf = io.BytesIO()
        try:
            torch.onnx.export(model, (x,), buf, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=cfg.get("constant_folding", False), input_names=[input_name],
                              output_names=["logits"], dynamic_axes=axes)
        except Exception as e:  # an op without an opset-14 export: try 15
            last = e
            continue
        proto = onnx.load_from_string(buf.getvalue())
        onnx.checker.check_model(proto)
        strip_to_graph_only(proto.graph)
        return proto.SerializeToString(), opset, proto, input_name
    raise last


def record_one(name, out_dir):
    import torch
    from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler
    from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

    torch.set_num_threads(1)
    cfg = CONFIGS[name]
    config = ProfilerConfig(ProfilerState.KINETO,
                            True,   # report_input_shapes (record_shapes)
                            True,   # profile_memory
                            False,  # with_stack
                            False,  # with_flops
                            False,  # with_modules
                            _ExperimentalConfig())
    activities = {ProfilerActivity.CPU}
    t0 = time.time()
    _prepare_profiler(config, activities)
    _enable_profiler(config, activities)
    try:
        model, optimizer, x, y, autocast = build(name)
        for _ in range(2):
            step(model, optimizer, x, y, autocast, ranges=False, set_to_none=cfg.get("set_to_none", True))
        # Resident bytes before iteration 3.
        params = dict(model.named_parameters())
        trainable = {n: p for n, p in params.items() if p.requires_grad}
        frozen = {n: p for n, p in params.items() if not p.requires_grad}
        buffers = dict(model.named_buffers())
        opt_state = optimizer_state_tensors(optimizer)
        seen = set()
        figures = {}
        figures["trainable_parameter_bytes"] = tensors_bytes(trainable.values(), seen)
        figures["frozen_parameter_bytes"] = tensors_bytes(frozen.values(), seen)
        figures["parameter_bytes"] = figures["trainable_parameter_bytes"] + figures["frozen_parameter_bytes"]
        figures["buffer_bytes"] = tensors_bytes(buffers.values(), seen)
        figures["optimizer_state_bytes"] = tensors_bytes(opt_state, seen)
        figures["batch_bytes"] = tensors_bytes([x], seen)
        figures["labels_bytes"] = tensors_bytes([y], seen)
        resident = sum(figures[k] for k in ("parameter_bytes", "buffer_bytes", "optimizer_state_bytes",
                                            "batch_bytes", "labels_bytes"))
        grads = [p.grad for p in params.values() if p.grad is not None]
        grad_bytes = tensors_bytes(grads, set())
        opt_state_count = len(opt_state)
        del grads, opt_state  # no extra references into the step (they would keep iteration 2's gradients alive)
        opt_state_kinds = sorted({k for s in optimizer.state.values() for k in s})
        step(model, optimizer, x, y, autocast, ranges=True, set_to_none=cfg.get("set_to_none", True))
    finally:
        result = _disable_profiler()
    run_s = time.time() - t0
    roots = result.experimental_event_tree()
    # Iteration 3 starts at the (last, only) gpumem:zero_grad range.
    start = max(r.start_time_ns for r in roots if r.name == RANGE_PREFIX + "zero_grad")
    step_roots = [r for r in roots if r.start_time_ns >= start]
    lines, n_spans, n_memory = chrome_lines(step_roots, os.getpid())
    text = ('{"schemaVersion": 1, "deviceProperties": [], "traceName": '
            + json.dumps(f"{name}: one training step (iteration 3), torch {torch.__version__}") + ',\n'
            + '"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n")
    gz = gzip.compress(text.encode(), mtime=0)
    trace_path = out_dir / f"{name}.trace.json.gz"
    write_atomically(trace_path, gz)

    # ONNX (after profiling: export traces the model once, in training mode).
    onnx_bytes, opset, proto, input_name = export_onnx(name, model, x)
    onnx_path = out_dir / f"{name}.onnx"
    write_atomically(onnx_path, onnx_bytes)
    inits = []
    for init in proto.graph.initializer:
        entry = {"name": init.name, "dims": list(init.dims),
                 "data_type": __import__("onnx").TensorProto.DataType.Name(init.data_type)}
        if init.name in params:
            entry["kind"] = "parameter"
            entry["trainable"] = init.name in trainable
        elif init.name in buffers:
            entry["kind"] = "buffer"
        else:
            entry["kind"] = "other"
        inits.append(entry)

    analysis = analyze(parse_trace(text), resident)
    trainable_count = sum(p.numel() for p in trainable.values())
    frozen_count = sum(p.numel() for p in frozen.values())
    facts = {
        "name": name,
        "torch_version": torch.__version__,
        "config": {
            "model": cfg["model"],
            "mode": "model.train()",
            "batch": cfg["batch"],
            "input_shape": cfg["input_shape"],
            "input_dtype": cfg["input_dtype"],
            "labels_shape": list(y.shape),
            "optimizer": cfg["optimizer"],
            "optimizer_hyperparameters": {k: v for k, v in optimizer.defaults.items()
                                          if isinstance(v, (int, float, bool, str, type(None), tuple, list))},
            "foreach": optimizer.defaults.get("foreach"),
            "foreach_note": "None = torch 1.13's default, which on CPU tensors is the per-parameter "
                            "(for-loop) implementation",
            "precision": cfg["precision"],
            "frozen_parameter_pattern": cfg["frozen"],
            "loss": cfg["loss"],
            "zero_grad": f"optimizer.zero_grad(set_to_none={cfg.get('set_to_none', True)})",
            "warmup_iterations": 2,
            "profiled_iteration": 3,
            "torch_num_threads": 1,
            "seed": 0,
        },
        "parameter_count": trainable_count + frozen_count,
        "trainable_parameter_count": trainable_count,
        "frozen_parameter_count": frozen_count,
        "parameter_tensors": len(params),
        "trainable_parameter_tensors": len(trainable),
        **figures,
        "optimizer_state_tensors": opt_state_count,
        "optimizer_state_kinds": opt_state_kinds,
        "resident_bytes": resident,
        "gradient_bytes_at_step_start": grad_bytes,
        "step_start_allocated_bytes": analysis["start_total"],
        "untracked_bytes_at_step_start": analysis["start_total"] - resident - grad_bytes,
        "step_peak_allocated_bytes": analysis["peak_total"] - resident,
        "recorded_peak_bytes": analysis["peak_total"],
        "step_end_above_resident_bytes": analysis["end_total"] - resident,
        "peak": analysis["peak"],
        "phases": analysis["phases"],
        "trace": {"file": trace_path.name, "operators": n_spans, "memory_events": n_memory,
                  "gzip_bytes": len(gz)},
        "onnx": {"file": onnx_path.name, "opset": opset, "training_mode": "TrainingMode.TRAINING",
                 "do_constant_folding": cfg.get("constant_folding", False), "input_names": [input_name], "output_names": ["logits"],
                 "bytes": len(onnx_bytes),
                 "initializer_naming": "PyTorch parameter / buffer names (model.named_parameters(), "
                                       "named_buffers()), e.g. layer1.0.conv1.weight",
                 "initializers": inits},
        "record_seconds": round(run_s, 1),
    }
    if name == "transformer_bf16":
        facts["onnx"]["same_graph_as"] = "transformer_adamw.onnx (exported without autocast)"
    if name in M_CONFIGS:
        facts["base_configuration"] = cfg["base"]
        facts["split"] = M_SPLIT[name]
        facts["config"]["autocast"] = "bf16" if cfg.get("autocast") == "bf16" else None
        facts["onnx"]["dynamic_axes"] = dynamic_axes(cfg)
        if cfg.get("autocast") == "bf16":
            facts["onnx"]["exported_without_autocast"] = True
        facts["gpumem"] = gpumem_settings(cfg)
    write_atomically(out_dir / f"{name}.facts.json", (json.dumps(facts, indent=1) + "\n").encode())
    print(summary(facts))


# --------------------------------------------------------------------------
# Trace analysis (shared by facts and --dump; reads the written trace)
# --------------------------------------------------------------------------

def to_ns(value):
    return int(decimal.Decimal(value) * 1000)


def parse_trace(text):
    doc = json.loads(text, parse_float=decimal.Decimal)
    spans, memory = [], []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            start = to_ns(e["ts"])
            spans.append(dict(start=start, end=start + to_ns(e["dur"]), tid=e["tid"], name=e["name"],
                              cat=e["cat"], dims=e.get("args", {}).get("Input Dims")))
        elif e.get("name") == "[memory]":
            a = e["args"]
            memory.append(dict(ts=to_ns(e["ts"]), tid=e["tid"], bytes=a["Bytes"], total=a["Total Allocated"],
                               addr=a["Addr"]))
    spans.sort(key=lambda s: (s["start"], -(s["end"] - s["start"])))
    memory.sort(key=lambda m: m["ts"])  # stable: file order within a timestamp
    # Enclosing spans of every memory event, outermost first.
    for m in memory:
        m["stack"] = [s for s in spans if s["tid"] == m["tid"] and s["start"] <= m["ts"] <= s["end"]]
        m["phase"] = next((s["name"][len(RANGE_PREFIX):] for s in m["stack"]
                           if s["name"].startswith(RANGE_PREFIX)), "between")
        ops = [s for s in m["stack"] if s["cat"] == "cpu_op"]
        m["op"] = ops[-1]["name"] if ops else "-"
        # Shapes of the innermost enclosing operator that has tensor inputs (aten::empty has none).
        m["op_dims"] = next((o["dims"] for o in reversed(ops) if o["dims"] and any(o["dims"])), None)
        m["parent"] = ops[-2]["name"] if len(ops) > 1 else "-"
        m["top"] = ops[0]["name"] if ops else "-"
        # The innermost enclosing record_function range other than gpumem:* (Optimizer.step#..., etc.)
        users = [s["name"] for s in m["stack"] if s["cat"] == "user_annotation"
                 and not s["name"].startswith(RANGE_PREFIX)]
        m["range"] = users[-1] if users else ""
    # Pair allocations and frees by address.
    live = {}
    for i, m in enumerate(memory):
        m["index"] = i
        m["freed_at"] = None
        m["allocated_at"] = None
        if m["bytes"] > 0:
            live[m["addr"]] = i
        else:
            j = live.pop(m["addr"], None)
            if j is not None:
                memory[j]["freed_at"] = i
                m["allocated_at"] = j
    return memory


def analyze(memory, resident):
    start_total = memory[0]["total"] - memory[0]["bytes"]
    phases = {p: dict(allocated_bytes=0, freed_bytes=0, net_bytes=0, allocations=0, frees=0,
                      max_above_resident=None, max_above_step_start=None, start_above_resident=None)
              for p in PHASES}
    peak = None
    for m in memory:
        ph = phases.setdefault(m["phase"], dict(allocated_bytes=0, freed_bytes=0, net_bytes=0, allocations=0,
                                                frees=0, max_above_resident=None, max_above_step_start=None,
                                                start_above_resident=None))
        if ph["start_above_resident"] is None:
            ph["start_above_resident"] = m["total"] - m["bytes"] - resident
        if m["bytes"] > 0:
            ph["allocated_bytes"] += m["bytes"]
            ph["allocations"] += 1
        else:
            ph["freed_bytes"] += -m["bytes"]
            ph["frees"] += 1
        ph["net_bytes"] += m["bytes"]
        above = m["total"] - resident
        if ph["max_above_resident"] is None or above > ph["max_above_resident"]:
            ph["max_above_resident"] = above
            ph["max_above_step_start"] = m["total"] - start_total
        if peak is None or m["total"] > peak["total"]:
            peak = m
    return dict(start_total=start_total, peak_total=peak["total"], end_total=memory[-1]["total"],
                phases=phases,
                peak=dict(event_index=peak["index"], phase=peak["phase"], op=peak["op"], parent_op=peak["parent"],
                          top_level_op=peak["top"], range=peak["range"], bytes=peak["bytes"],
                          above_resident=peak["total"] - resident))


def mib(b):
    return f"{b / 2**20:.2f}"


def summary(facts):
    p = facts["peak"]
    out = [f"{facts['name']}: resident {facts['resident_bytes']} ({mib(facts['resident_bytes'])} MiB: params "
           f"{mib(facts['parameter_bytes'])} [frozen {mib(facts['frozen_parameter_bytes'])}], buffers "
           f"{mib(facts['buffer_bytes'])}, optimizer {mib(facts['optimizer_state_bytes'])}, batch "
           f"{mib(facts['batch_bytes'])}, labels {facts['labels_bytes']} B)",
           f"  step peak above resident {facts['step_peak_allocated_bytes']} ({mib(facts['step_peak_allocated_bytes'])}"
           f" MiB), recorded peak {facts['recorded_peak_bytes']} ({mib(facts['recorded_peak_bytes'])} MiB) "
           f"in {p['phase']} at event {p['event_index']}, op {p['op']} (top-level {p['top_level_op']})",
           f"  step starts {mib(facts['step_start_allocated_bytes'] - facts['resident_bytes'])} MiB above resident "
           f"(iteration 2's gradients {mib(facts['gradient_bytes_at_step_start'])} MiB; untracked "
           f"{facts['untracked_bytes_at_step_start']} B)",
           f"  {'phase':10s} {'allocated':>12s} {'freed':>12s} {'net':>12s} {'#alloc':>7s} {'#free':>6s} "
           f"{'max above res':>14s}"]
    for name, ph in facts["phases"].items():
        out.append(f"  {name:10s} {ph['allocated_bytes']:12d} {ph['freed_bytes']:12d} {ph['net_bytes']:12d} "
                   f"{ph['allocations']:7d} {ph['frees']:6d} {ph['max_above_resident'] if ph['max_above_resident'] is not None else '-':>14}")
    return "\n".join(out)


def dump(name_or_path):
    path = Path(name_or_path)
    if not path.exists():
        path = OUT_DIR / f"{name_or_path}.trace.json.gz"
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
        memory = parse_trace(f.read())
    facts_path = Path(str(path).replace(".trace.json.gz", ".facts.json"))
    resident = json.loads(facts_path.read_text())["resident_bytes"] if facts_path.exists() else None
    base = resident if resident is not None else memory[0]["total"] - memory[0]["bytes"]
    print(f"# {path}: {len(memory)} memory events; 'above' = Total Allocated - "
          f"{'resident_bytes' if resident is not None else 'step start'} ({base})")
    print("# idx phase op<parent [shapes] bytes above fate   (fate: alloc -> 'free@IDX phase' or 'LIVE' at step end;"
          " free -> '<-IDX' its allocation, '<-?' allocated before the step)")
    for m in memory:
        if m["bytes"] > 0:
            fate = f"free@{m['freed_at']} {memory[m['freed_at']]['phase']}" if m["freed_at"] is not None else "LIVE"
        else:
            fate = f"<-{m['allocated_at']}" if m["allocated_at"] is not None else "<-?"
        dims = ""
        if m["op_dims"]:
            dims = " " + ",".join("x".join(map(str, d)) if d else "_" for d in m["op_dims"])
        rng = f" {{{m['range']}}}" if m["range"] else ""
        print(f"{m['index']} {m['phase']} {m['op']}<{m['parent']}{rng}{dims} {m['bytes']:+d} {m['total'] - base} {fate}")


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def update_docstring_table(out_dir):
    rows = []
    for name in CONFIGS:
        if name in M_CONFIGS:
            continue  # summarized in tests/data/train/SPLIT.md
        fp = out_dir / f"{name}.facts.json"
        if fp.exists():
            rows.append(summary(json.loads(fp.read_text())))
    table = "\n\n".join(rows)
    table = "\n".join(("  " + l) if l else l for l in table.splitlines())
    me = Path(__file__).resolve()
    src = me.read_text()
    head, sep, rest = src.partition("Recorded figures (")
    first_line, nl, after = rest.partition("\n")
    _, q, tail = after.partition('\n"""\n')
    new = head + sep + first_line + nl + "\n" + table + "\n" + q + tail
    write_atomically(me, new.encode())
    os.chmod(me, 0o755)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\nRecorded figures")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(CONFIGS), help="record these configurations only")
    parser.add_argument("--out", default=str(OUT_DIR), help="output directory (default: tests/data/train)")
    parser.add_argument("--dump", metavar="NAME", help="print the recorded step's allocations and frees "
                        "(a configuration name or a .trace.json.gz path)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the per-configuration subprocess
    parser.add_argument("--no-docstring", action="store_true", help="do not rewrite this file's figure table")
    args = parser.parse_args()
    if args.dump:
        dump(args.dump)
        return 0
    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.one:
        record_one(args.one, out_dir)
        return 0
    for name in args.only or list(CONFIGS):
        t = time.time()
        rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), "--one", name, "--out", str(out_dir)])
        print(f"  ({name}: {time.time() - t:.1f} s, rc {rc})", flush=True)
        if rc:
            return rc
    if not args.no_docstring and out_dir == OUT_DIR.resolve():
        update_docstring_table(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
