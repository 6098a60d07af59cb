#!/usr/bin/env python3
"""Records training steps with torch 2.x, transformers and peft on the CPU, and
gpumem's estimate of each one made without compute (fake tensors).

Ground truth for gpumem.torch.estimate (bindings/python/gpumem/_fake_step.py)
and `gpumem train STEP` (a traced step). Run by hand, not by CI, in the venv
scripts/torch-venv.sh makes (one per torch release):

    $(scripts/torch-venv.sh 2.15.0) tools/record_torch2.py            # every case
    $(scripts/torch-venv.sh 2.10.0) tools/record_torch2.py --only llama
    tools/record_torch2.py --report                                  # the table, from the files

Each case is a model built from a config (random weights, never a hub), at
small dimensions but with the library's real architecture, run as a user
trains it: model(**batch) with labels, .loss.backward(), optimizer.step(),
optimizer.zero_grad(set_to_none=True), on one intra-op thread. Iterations
1 and 2 warm up (optimizer states exist); iteration 3 is recorded with the
profiler's memory events (the CPU allocator's own report of every
allocation and free). The same model, inputs and optimizer are then traced
on fake tensors (device cpu) by gpumem's estimator.

Writes, under tests/data/torch2/TORCH_VERSION/:
  CASE.memory.json.gz  iteration 3's memory events: [time_ns, bytes (+/-),
                       total allocated] and the phase ranges
  CASE.step.json.gz    the estimator's step document (gpumem train reads it)
  CASE.facts.json      the case, library versions, resident bytes, the
                       recorded peak and the estimate's peak

The split into tuning and test halves is in tests/data/torch2/SPLIT.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import hashlib
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "tests" / "data" / "torch2"

# --------------------------------------------------------------------------
# Models: tiny dimensions, real architectures.

VOCAB, SEQ, BATCH = 1024, 64, 2


def causal_lm(kind, attn="sdpa"):
    import transformers as tf
    common = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  attn_implementation=attn, tie_word_embeddings=False)
    if kind == "llama":
        cfg = tf.LlamaConfig(**common)
    elif kind == "qwen2":
        cfg = tf.Qwen2Config(**common)
    elif kind == "qwen3":
        cfg = tf.Qwen3Config(head_dim=32, **common)
    elif kind == "mistral":
        cfg = tf.MistralConfig(sliding_window=None, **common)
    elif kind == "phi3":
        cfg = tf.Phi3Config(pad_token_id=0, **common)
    elif kind == "gemma2":
        cfg = tf.Gemma2Config(head_dim=32, sliding_window=32, **common)
    elif kind == "gemma3":
        cfg = tf.Gemma3TextConfig(head_dim=32, sliding_window=32, **common)
    elif kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4, n_positions=256,
                            attn_implementation=attn)
    else:
        raise KeyError(kind)
    return tf.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)


def with_cross_entropy(model, tokens=False):
    """MODEL trained as `loss = cross_entropy(model(x), y)`, called as the corpus calls
    every model, model(**batch).loss: the scores die with the loss. A
    segmentation model's {"out": [N, C, H, W]} is scored per pixel; with tokens,
    a language model's [batch, tokens, vocab] scores are flattened to rows first.
    (torch is imported here: --report runs without it.)"""
    import types
    import torch

    class WithCrossEntropy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, labels, **inputs):
            out = self.model(*inputs.values())
            if isinstance(out, dict):
                out = out["out"]
            if tokens:
                out, labels = out.reshape(-1, out.shape[-1]), labels.reshape(-1)
            return types.SimpleNamespace(loss=torch.nn.functional.cross_entropy(out, labels))
    return WithCrossEntropy()


# torchvision models, never recorded before under torch 2.x, at 128 x 128:
# classification, and segmentation with a per-pixel loss. (efficientnet,
# convnext and swin could not be exported in training mode by torch 1.13.)
VISION = {
    "resnet18": ("resnet18", {}),
    "mobilenet_v3_small": ("mobilenet_v3_small", {}),
    "efficientnet_b0": ("efficientnet_b0", {}),
    "convnext_tiny": ("convnext_tiny", {}),
    "swin_t": ("swin_t", {}),
    "regnet_y_400mf": ("regnet_y_400mf", {}),
    "lraspp": ("segmentation.lraspp_mobilenet_v3_large", {"num_classes": 5, "weights_backbone": None}),
}


def vision_model_and_batch(kind):
    import torch
    import torchvision
    g = torch.Generator().manual_seed(0)
    path, kwargs = VISION[kind]
    factory = torchvision.models
    for part in path.split("."):
        factory = getattr(factory, part)
    model = factory(weights=None, **kwargs)
    images = torch.randn(2, 3, 128, 128, generator=g)
    if "segmentation" in path:
        labels = torch.randint(0, 5, (2, 128, 128), generator=g)
    else:
        labels = torch.randint(0, 1000, (2,), generator=g)
    return with_cross_entropy(model), {"images": images, "labels": labels}


def model_and_batch(kind, attn):
    import torch
    import transformers as tf
    if kind in VISION:
        return vision_model_and_batch(kind)
    g = torch.Generator().manual_seed(0)
    if kind == "bert":
        cfg = tf.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=512, num_labels=3)
        model = tf.BertForSequenceClassification._from_config(cfg, attn_implementation=attn)
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        # With an attention mask given, BERT does not look for padding in the ids (a
        # check on values, which fake tensors do not have).
        return model, {"input_ids": ids, "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
                       "labels": torch.randint(0, 3, (BATCH,), generator=g)}
    if kind == "vit":
        cfg = tf.ViTConfig(image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=512, num_labels=10)
        model = tf.ViTForImageClassification._from_config(cfg, attn_implementation=attn)
        return model, {"pixel_values": torch.randn(BATCH, 3, 64, 64, generator=g),
                       "labels": torch.randint(0, 10, (BATCH,), generator=g)}
    if kind == "t5":
        cfg = tf.T5Config(vocab_size=VOCAB, d_model=128, d_ff=256, d_kv=32, num_layers=2, num_heads=4,
                          decoder_start_token_id=0, pad_token_id=0)
        model = tf.T5ForConditionalGeneration._from_config(cfg)
        return model, {"input_ids": torch.randint(1, VOCAB, (BATCH, SEQ), generator=g),
                       "labels": torch.randint(1, VOCAB, (BATCH, SEQ // 2), generator=g)}
    model = causal_lm(kind, attn)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return model, {"input_ids": ids, "labels": ids}


# LoRA's targets: the attention projections, by whatever name this release
# gives them (ViT's are query/value in transformers 4, q_proj/v_proj later).
ATTENTION_NAMES = [("q_proj", "v_proj"), ("query", "value"), ("q", "v"), ("c_attn",), ("qkv_proj",)]


def lora_targets(model):
    leaves = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if not list(m.children())}
    for names in ATTENTION_NAMES:
        if all(n in leaves for n in names):
            return list(names)
    raise KeyError("no attention projection to adapt")
# transformers releases that have no SDPA path for a model run it eagerly.
EAGER_ONLY = {"gemma2"}
HEAD = {"bert": "classifier", "vit": "classifier", "t5": "lm_head"}
MODELS = ["llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3", "gpt2", "bert", "vit", "t5"] + list(VISION)
# Variants: (name, settings). Every model runs every variant that applies to it.
VARIANTS = {
    "adamw": {},
    "adamw_foreach": {"optimizer": "adamw", "foreach": True},
    "sgdm": {"optimizer": "sgd-momentum"},
    "eager": {"attn": "eager"},
    "ckpt": {"checkpoint": "non-reentrant"},
    "ckpt_reentrant": {"checkpoint": "reentrant"},
    "bf16": {"autocast": "bf16"},
    "lora": {"lora": "attention"},
    "lora_head": {"lora": "attention+head"},
}


def applies(kind, variant):
    if kind in VISION:  # no attention switch, no checkpointing switch, no peft
        return variant in ("adamw", "adamw_foreach", "sgdm", "bf16")
    if variant == "eager" and kind in ("t5",) + tuple(EAGER_ONLY):
        return False  # one attention implementation: the other variants run it
    return True


def build(kind, variant):
    import torch
    s = VARIANTS[variant]
    torch.manual_seed(0)
    model, batch = model_and_batch(kind, "eager" if kind in EAGER_ONLY else s.get("attn", "sdpa"))
    model.train()
    if "checkpoint" in s:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": s["checkpoint"] == "reentrant"})
    if "lora" in s:
        import peft
        targets = lora_targets(model)
        extra = {}
        if s["lora"] == "attention+head":
            head = HEAD.get(kind, "lm_head")
            if kind in ("bert", "vit"):
                extra["modules_to_save"] = [head]  # a fresh classifier trains in full
            else:
                targets = targets + [head]
        task = {"bert": "SEQ_CLS", "t5": "SEQ_2_SEQ_LM"}.get(kind, "CAUSAL_LM" if kind != "vit" else None)
        config = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets, task_type=task,
                                 **extra)
        model = peft.get_peft_model(model, config)
        if "checkpoint" in s:
            model.enable_input_require_grads()
    params = [p for p in model.parameters() if p.requires_grad]
    opt_name = s.get("optimizer", "adamw")
    if opt_name == "sgd-momentum":
        optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-4, foreach=s.get("foreach"))
    return model, batch, optimizer


def cases():
    for kind in MODELS:
        for v in VARIANTS:
            if applies(kind, v):
                yield f"{kind}_{v}", kind, v


def half(case: str) -> str:
    """The split rule (SPLIT.md): the first byte of sha256(case name); even: tuning, odd: test."""
    return "tuning" if hashlib.sha256(case.encode()).digest()[0] % 2 == 0 else "test"


# --------------------------------------------------------------------------
# Recording


def one_step(model, batch, optimizer, autocast, mark, keep_output=False, device="cpu"):
    """One step as transformers' Trainer takes it: the output (its logits) dropped
    before backward; keep_output holds it, as a loop that keeps `outputs` does."""
    import torch
    with mark("zero_grad"):
        optimizer.zero_grad(set_to_none=True)
    cast = torch.autocast(device, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with cast:
        with mark("forward"):
            out = model(**batch)
            loss = out.loss
            if not keep_output:
                del out
    with mark("backward"):
        loss.backward()
        del loss
    with mark("optimizer"):
        optimizer.step()


def storages_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        s = t.untyped_storage()
        if s.data_ptr() in seen:
            continue
        seen.add(s.data_ptr())
        total += s.nbytes()
    return total


def record_step(make, autocast=False, keep_output=False):
    """Runs make() -> (model, batch, optimizer) and three training steps with the
    profiler's memory events on, and returns the third step's figures.

    The CPU allocator reports only what it saw allocated while memory profiling was
    on, so profiling starts before the model is built: every tensor alive in
    iteration 3 is counted and its "Total Allocated" is absolute."""
    import torch
    from torch.autograd.profiler import record_function
    torch.set_num_threads(1)
    quiet = lambda phase: contextlib.nullcontext()  # noqa: E731
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        model, batch, optimizer = make()
        for _ in range(2):
            one_step(model, batch, optimizer, autocast, quiet, keep_output)
        optimizer.zero_grad(set_to_none=True)
        gc.collect()
        resident_tensors = list(model.parameters()) + list(model.buffers()) + [
            v for st in optimizer.state.values() for v in st.values() if isinstance(v, torch.Tensor)] + [
            v for v in batch.values()]
        resident = storages_bytes(resident_tensors)
        del resident_tensors
        one_step(model, batch, optimizer, autocast, lambda phase: record_function("gpumem:" + phase), keep_output)
    ranges = {}
    for e in prof.profiler.kineto_results.events():
        if e.name().startswith("gpumem:"):
            ranges[e.name()[7:]] = [e.start_ns(), e.end_ns()]
    from torch._C._profiler import _EventType
    events = []

    def walk(ev):
        if ev.tag == _EventType.Allocation:
            f = ev.extra_fields
            events.append([ev.start_time_ns, int(f.alloc_size), int(f.ptr)])
        for c in ev.children:
            walk(c)
    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    events.sort(key=lambda x: x[0])
    # The running total of what this profile allocated, by address. (The
    # profiler's own Total Allocated also moves when memory allocated under an
    # earlier profile in this process is freed during this one: a garbage
    # collection in the middle of a step lowered it, case by case.) Every
    # tensor of the step is allocated while this profile runs.
    live, total, totals = {}, 0, []
    for t, size, ptr in events:
        if size > 0:
            live[ptr] = size
            total += size
        elif ptr in live:
            total -= live.pop(ptr)
        totals.append([t, size, total])
    events = totals
    t0 = min(r[0] for r in ranges.values())
    t1 = max(r[1] for r in ranges.values())
    before = [e for e in events if e[0] < t0]
    start_total = before[-1][2] if before else 0
    events = [[t - t0, b, tot] for t, b, tot in events if t0 <= t <= t1]
    ranges = {k: [a - t0, b - t0] for k, (a, b) in ranges.items()}
    peak_total = max([start_total] + [e[2] for e in events])
    return {"model": model, "batch": batch, "optimizer": optimizer, "resident": resident, "events": events,
            "ranges": ranges, "start_total": start_total, "peak_total": peak_total}


def record_step_cuda(make, autocast=False):
    """The same three steps on a CUDA device: what the caching allocator itself
    reports for the third (max_memory_allocated, max_memory_reserved), with
    everything before it (weights, optimizer states, cuBLAS' workspace) in
    memory_allocated at its start."""
    import torch
    model, batch, optimizer = make()
    model.cuda()  # the same Parameter objects: the optimizer keeps them (its states come in step 1)
    batch = {k: v.cuda() for k, v in batch.items()}
    quiet = lambda phase: contextlib.nullcontext()  # noqa: E731
    for _ in range(2):
        one_step(model, batch, optimizer, autocast, quiet, device="cuda")
    optimizer.zero_grad(set_to_none=True)
    gc.collect()
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    one_step(model, batch, optimizer, autocast, quiet, device="cuda")
    torch.cuda.synchronize()
    return {"model": model, "batch": batch, "optimizer": optimizer, "start_total": start,
            "peak_total": torch.cuda.max_memory_allocated(), "reserved_peak": torch.cuda.max_memory_reserved()}


def record_case_cuda(case, kind, variant, out_dir, fake_step):
    """A CUDA recording: the device's own figures beside the traced estimate for
    device="cuda" (what scripts/gpu_check.sh runs on a lent GPU)."""
    import torch
    autocast = VARIANTS[variant].get("autocast") == "bf16"
    r = record_step_cuda(lambda: build(kind, variant), autocast)
    doc = fake_step.trace_step(r["model"], (), r["batch"], optimizer=r["optimizer"], loss=None, labels=None,
                               device="cuda", precision="amp-bf16" if autocast else "fp32")
    estimate = fake_step.peak_bytes(doc)
    facts = {"case": case, "model": kind, "variant": variant, "half": half(case), "versions": versions(),
             "device": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
             "step_start_allocated_bytes": r["start_total"], "max_memory_allocated": r["peak_total"],
             "max_memory_reserved": r["reserved_peak"], "estimate_peak_bytes": estimate,
             "estimate_error": round(estimate / r["peak_total"] - 1, 5)}
    out_dir.mkdir(parents=True, exist_ok=True)
    write(out_dir / f"{case}.step.json.gz", gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
    write(out_dir / f"{case}.facts.json", (json.dumps(facts, indent=1) + "\n").encode())
    print(f"{case:28s} {facts['half']:6s} cuda allocated {r['peak_total']:>10d} reserved {r['reserved_peak']:>10d}"
          f"  estimate {estimate:>10d}  {facts['estimate_error']*100:+6.2f}%", flush=True)


def record_case(case, kind, variant, out_dir, fake_step):
    s = VARIANTS[variant]
    autocast = s.get("autocast") == "bf16"
    r = record_step(lambda: build(kind, variant), autocast)
    model, batch, optimizer = r["model"], r["batch"], r["optimizer"]
    resident, events, ranges = r["resident"], r["events"], r["ranges"]
    start_total, peak_total = r["start_total"], r["peak_total"]
    # The estimate, on the same model, inputs and optimizer.
    precision = "amp-bf16" if autocast else "fp32"
    started = time.perf_counter()
    doc = fake_step.trace_step(model, (), batch, optimizer=optimizer, loss=None, labels=None, device="cpu",
                               precision=precision)
    fake_seconds = time.perf_counter() - started
    estimate_peak = fake_step.peak_bytes(doc)
    facts = {
        "case": case, "model": kind, "variant": variant, "half": half(case),
        "settings": {k: v for k, v in s.items()},
        "versions": versions(),
        "batch": {k: list(v.shape) for k, v in batch.items()},
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "frozen_parameters": sum(p.numel() for p in model.parameters() if not p.requires_grad),
        "resident_bytes": resident,
        "step_start_allocated_bytes": start_total,
        "recorded_peak_bytes": peak_total,
        "estimate_peak_bytes": estimate_peak,
        "estimate_error": round(estimate_peak / peak_total - 1, 5),
        "estimate_seconds": round(fake_seconds, 3),
        "memory_events": len(events),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write(out_dir / f"{case}.memory.json.gz",
          gzip.compress(json.dumps({"ranges": ranges, "events": events}, separators=(",", ":")).encode(), mtime=0))
    write(out_dir / f"{case}.step.json.gz", gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
    write(out_dir / f"{case}.facts.json", (json.dumps(facts, indent=1) + "\n").encode())
    print(f"{case:28s} {facts['half']:6s} recorded {peak_total:>10d}  estimate {estimate_peak:>10d}  "
          f"{facts['estimate_error']*100:+6.2f}%  ({fake_seconds:.2f} s)", flush=True)


def versions():
    import torch
    import transformers
    import peft
    return {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
            "peft": peft.__version__}


def write(path: Path, data: bytes):
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def load_fake_step():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpumem_fake_step", ROOT / "bindings/python/gpumem/_fake_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report():
    """The table docs/train.md shows: per release and half, the median and worst
    |estimate / recorded - 1|, and the worst case."""
    rows = [json.loads(p.read_text()) for p in sorted(OUT.glob("*/*.facts.json"))
            if not p.parent.name.startswith("cuda-")]
    print("| release | half | steps | median error | worst |")
    print("| --- | --- | ---: | ---: | --- |")
    for release in sorted({r["versions"]["torch"] for r in rows}, reverse=True):
        for which in ("tuning", "test"):
            mine = sorted((abs(r["estimate_error"]), r["case"]) for r in rows
                          if r["half"] == which and r["versions"]["torch"] == release)
            if mine:
                print(f"| torch {release} | {which} | {len(mine)} | {mine[len(mine) // 2][0] * 100:.3f}% | "
                      f"{mine[-1][0] * 100:.2f}% ({mine[-1][1]}) |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="models or cases")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: the caching allocator's own peaks on a GPU (scripts/gpu_check.sh)")
    ap.add_argument("--out", help="where to write (default tests/data/torch2/[cuda-]TORCH_VERSION)")
    a = ap.parse_args()
    if a.report:
        report()
        return
    import torch
    fake_step = load_fake_step()
    release = torch.__version__.split("+")[0]
    out_dir = Path(a.out) if a.out else OUT / (("cuda-" if a.device == "cuda" else "") + release)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("record_torch2: --device cuda, but this torch sees no GPU")
    record = record_case_cuda if a.device == "cuda" else record_case
    for case, kind, variant in cases():
        if a.only and kind not in a.only and case not in a.only:
            continue
        try:
            record(case, kind, variant, out_dir, fake_step)
        except Exception as e:  # a case a release cannot run is named, not fatal
            print(f"{case:28s} FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
        gc.collect()


if __name__ == "__main__":
    main()
