#!/usr/bin/python3
"""Records one real fine-tuning step of small Hugging Face style decoder-only LMs
(ground truth for `gpumem finetune MODEL --method full|freeze|lora|qlora`, issue 32).

Run by hand, not by CI (Debian's python3-torch 1.13, CPU only, hence the
interpreter; no transformers, no peft: tools/finetune_models.py rebuilds the
architectures, LoRA and gradient checkpointing in plain PyTorch):

    nice -n 10 /usr/bin/python3 tools/record_finetune.py                 # all configurations
    nice -n 10 /usr/bin/python3 tools/record_finetune.py --only NAME ... # some of them
    /usr/bin/python3 tools/record_finetune.py --list                     # names, split, settings
    /usr/bin/python3 tools/record_finetune.py --table                    # README table from the facts
    /usr/bin/python3 tools/record_finetune.py --dump NAME                # allocation list of a recorded step

Each configuration runs in a fresh subprocess and writes, under tests/data/finetune/:

  NAME.trace.json.gz  the profiled step (iteration 3) in tools/record_training.py's
                      Chrome-trace format ("[memory]" instants, "cpu_op" operators
                      with "Input Dims"/"Input type", and the user_annotation ranges
                      gpumem:zero_grad, gpumem:forward, gpumem:loss,
                      gpumem:backward, gpumem:optimizer); `gpumem trace stats` reads it.
  NAME.facts.json     the configuration (with the model's config.json dictionary),
                      parameter / gradient / optimizer-state / batch bytes, resident
                      bytes, the recorded peak, per-phase figures, the largest
                      step tensors alive at the peak, the self-checks and "split".
  models/MODEL/config.json  each model's Hugging Face style config (written once per model).

The protocol is tools/record_training.py's (read its docstring): one intra-op
thread, seed 0, the profiler (memory and shapes on) enabled *before* the model is
built and kept on for two warm-up iterations and the profiled third, so "Total
Allocated" is absolute; only iteration 3's events are written; its helpers
(chrome_lines, parse_trace, analyze, summary, dump, storage_key, tensors_bytes)
are imported from it. One step is what transformers' Trainer does for one
micro-batch without gradient accumulation, clipping or LR scheduler:

    optimizer.zero_grad(set_to_none=True)                 # gpumem:zero_grad
    logits = model(input_ids)                             # gpumem:forward
    loss = ForCausalLMLoss(logits, labels); del logits    # gpumem:loss
    loss.backward(); del loss                             # gpumem:backward
    optimizer.step()                                      # gpumem:optimizer

input_ids are random tokens [micro_batch, seq] (int64); labels = input_ids.clone()
(what DataCollatorForLanguageModeling(mlm=False) gives without padding).

Methods:
  full    every parameter trainable.
  freeze  only the last decoder layer, the final norm and lm_head trainable
          (a tied lm_head is the embedding: it trains too).
  lora    PEFT LoRA on the named Linear layers (r, alpha, dropout, targets in
          the facts); everything else frozen; adapters fp32 even on bf16 bases.
  qlora   NOT recorded: bitsandbytes' NF4 storage and kernels do not exist on CPU
          torch 1.13 (tests/data/finetune/README.md).
Gradient checkpointing: transformers' per-decoder-layer reentrant checkpoint,
plus enable_input_require_grads() when the embedding is frozen.

Self-checks (facts "checks"; a failed one stops the recording):
  - the step's first Total Allocated is exactly resident + the gradients left
    by iteration 2 + 4 bytes (untracked 4: the handle record_function allocates
    for gpumem:zero_grad just before that range opens, as in tests/data/train):
    everything alive was seen allocated;
  - gradients at step start: one per trainable parameter, bytes equal to the
    trainable parameter bytes; no frozen parameter has a gradient;
  - optimizer state bytes as expected from the trainable parameters (AdamW:
    exp_avg + exp_avg_sq + a 4-byte fp32 "step" per tensor; SGD momentum: one
    buffer; plain SGD: none);
  - resident + the step's allocations alive at the peak = the recorded peak;
  - saved tensors: in iteration 1, torch.autograd.graph.saved_tensors_hooks
    records every tensor autograd saves during forward + loss; their distinct
    non-resident storages are compared with the trace's memory above resident at
    backward's start (reported, not asserted: the trace also holds the loss,
    checkpoint RNG states, cos/sin kept by checkpoint's ctx.inputs).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
OUT_DIR = REPO_ROOT / "tests" / "data" / "finetune"
sys.path.insert(0, str(HERE))
import record_training as rt  # noqa: E402  (stdlib-only at import time)

# --------------------------------------------------------------------------
# Models (each a Hugging Face style config.json dictionary)
# --------------------------------------------------------------------------


def models():
    from finetune_models import hf_config
    m = {}
    m["llama_tiny"] = hf_config("llama", hidden_size=384, intermediate_size=1024, num_hidden_layers=3,
                                num_attention_heads=6, num_key_value_heads=2, vocab_size=4000)
    m["llama_tiny_adrop"] = hf_config("llama", hidden_size=384, intermediate_size=1024, num_hidden_layers=3,
                                      num_attention_heads=6, num_key_value_heads=2, vocab_size=4000,
                                      attention_dropout=0.1)
    m["llama_tiny_bf16"] = hf_config("llama", hidden_size=384, intermediate_size=1024, num_hidden_layers=3,
                                     num_attention_heads=6, num_key_value_heads=2, vocab_size=4000,
                                     torch_dtype="bfloat16")
    m["qwen2_tiny"] = hf_config("qwen2", hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                                num_attention_heads=4, num_key_value_heads=2, vocab_size=6000)
    m["qwen2_tiny_tied"] = hf_config("qwen2", hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                                     num_attention_heads=8, num_key_value_heads=2, vocab_size=8000,
                                     tie_word_embeddings=True)
    # Gemma-2: head_dim 96 with 4 heads (q/o width 384, not hidden 320), query_pre_attn_scalar
    # hidden / heads = 80 (as gemma-2-27b's 144 = 4608 / 32), tied embeddings.
    m["gemma2_tiny"] = hf_config("gemma2", hidden_size=320, intermediate_size=960, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=96, vocab_size=5000,
                                 query_pre_attn_scalar=80)
    m["gemma2_tiny_bf16"] = hf_config("gemma2", hidden_size=320, intermediate_size=960, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=96, vocab_size=5000,
                                      query_pre_attn_scalar=80, torch_dtype="bfloat16")
    m["mixtral_tiny"] = hf_config("mixtral", hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, vocab_size=3000)
    m["mixtral_tiny_bf16"] = hf_config("mixtral", hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, vocab_size=3000,
                                       torch_dtype="bfloat16")
    return m


QV = ["q_proj", "v_proj"]
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ALL_MOE = ["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w2", "w3"]  # Mixtral: experts' w1/w2/w3, not the router


def c(model, method, batch, seq, optimizer="adamw", foreach=False, ckpt=False, lora=None, loss_style="shift"):
    """lora: (r, alpha, dropout, targets)."""
    cfg = dict(model=model, method=method, micro_batch=batch, seq=seq, optimizer=optimizer, foreach=foreach,
               gradient_checkpointing=ckpt, loss_style=loss_style)
    if lora:
        r, alpha, dropout, targets = lora
        cfg["lora"] = dict(r=r, alpha=alpha, dropout=dropout, targets=targets)
    return cfg


CONFIGS = {
    # Llama (fp32)
    "ft_llama_full_adamw_b2_s256": c("llama_tiny", "full", 2, 256),
    "ft_llama_full_adamw_foreach_b2_s256": c("llama_tiny", "full", 2, 256, foreach=True),
    "ft_llama_full_sgdm_b4_s128": c("llama_tiny", "full", 4, 128, optimizer="sgd-momentum", foreach=None),
    "ft_llama_full_adamw_ckpt_b4_s256": c("llama_tiny", "full", 4, 256, ckpt=True),
    "ft_llama_full_adamw_padloss_b2_s256": c("llama_tiny", "full", 2, 256, loss_style="pad"),
    "ft_llama_freeze_adamw_b2_s256": c("llama_tiny", "freeze", 2, 256),
    "ft_llama_lora_qv_r8_b2_s256": c("llama_tiny", "lora", 2, 256, lora=(8, 16, 0.0, QV)),
    "ft_llama_lora_all_r16_d01_b2_s256": c("llama_tiny", "lora", 2, 256, lora=(16, 32, 0.1, ALL)),
    "ft_llama_lora_all_r64_b1_s512": c("llama_tiny", "lora", 1, 512, lora=(64, 128, 0.0, ALL)),
    "ft_llama_lora_qv_r16_ckpt_b4_s256": c("llama_tiny", "lora", 4, 256, ckpt=True, lora=(16, 32, 0.0, QV)),
    "ft_llama_lora_all_r16_d01_ckpt_b2_s512": c("llama_tiny", "lora", 2, 512, ckpt=True,
                                                lora=(16, 32, 0.1, ALL)),
    "ft_llamaadrop_full_adamw_b2_s256": c("llama_tiny_adrop", "full", 2, 256),
    # Llama (bf16 weights: pure bf16 training, no autocast)
    "ft_llamabf16_full_adamw_b2_s256": c("llama_tiny_bf16", "full", 2, 256),
    "ft_llamabf16_lora_all_r16_b2_s256": c("llama_tiny_bf16", "lora", 2, 256, lora=(16, 32, 0.0, ALL)),
    "ft_llamabf16_lora_qv_r8_ckpt_b4_s256": c("llama_tiny_bf16", "lora", 4, 256, ckpt=True,
                                              lora=(8, 16, 0.0, QV)),
    "ft_llamabf16_freeze_sgd_b2_s256": c("llama_tiny_bf16", "freeze", 2, 256, optimizer="sgd", foreach=None),
    # Qwen2 (q/k/v biases), untied and tied
    "ft_qwen2_full_adamw_b2_s256": c("qwen2_tiny", "full", 2, 256),
    "ft_qwen2_full_adamw_ckpt_b2_s512": c("qwen2_tiny", "full", 2, 512, ckpt=True),
    "ft_qwen2_lora_qv_r8_b4_s128": c("qwen2_tiny", "lora", 4, 128, lora=(8, 16, 0.0, QV)),
    "ft_qwen2_lora_all_r64_d01_b2_s256": c("qwen2_tiny", "lora", 2, 256, lora=(64, 128, 0.1, ALL)),
    "ft_qwen2_freeze_adamw_ckpt_b2_s256": c("qwen2_tiny", "freeze", 2, 256, ckpt=True),
    "ft_qwen2tied_full_adamw_foreach_b2_s256": c("qwen2_tiny_tied", "full", 2, 256, foreach=True),
    "ft_qwen2tied_lora_all_r16_b1_s512": c("qwen2_tiny_tied", "lora", 1, 512, foreach=True,
                                           lora=(16, 32, 0.0, ALL)),
    "ft_qwen2tied_freeze_adamw_b4_s128": c("qwen2_tiny_tied", "freeze", 4, 128),
    # Gemma-2
    "ft_gemma2_full_adamw_b2_s256": c("gemma2_tiny", "full", 2, 256),
    "ft_gemma2_full_sgd_ckpt_b2_s256": c("gemma2_tiny", "full", 2, 256, optimizer="sgd", foreach=None, ckpt=True),
    "ft_gemma2_lora_qv_r16_b2_s256": c("gemma2_tiny", "lora", 2, 256, lora=(16, 32, 0.0, QV)),
    "ft_gemma2_lora_all_r8_d01_ckpt_b4_s128": c("gemma2_tiny", "lora", 4, 128, ckpt=True, lora=(8, 16, 0.1, ALL)),
    "ft_gemma2_freeze_adamw_b1_s512": c("gemma2_tiny", "freeze", 1, 512),
    "ft_gemma2bf16_lora_all_r16_b2_s256": c("gemma2_tiny_bf16", "lora", 2, 256, lora=(16, 32, 0.0, ALL)),
    "ft_gemma2bf16_full_adamw_ckpt_b2_s256": c("gemma2_tiny_bf16", "full", 2, 256, ckpt=True),
    # Mixtral-style MoE
    "ft_mixtral_full_adamw_b2_s256": c("mixtral_tiny", "full", 2, 256),
    "ft_mixtral_full_adamw_foreach_ckpt_b2_s256": c("mixtral_tiny", "full", 2, 256, foreach=True, ckpt=True),
    "ft_mixtral_lora_qv_r8_b2_s256": c("mixtral_tiny", "lora", 2, 256, lora=(8, 16, 0.0, QV)),
    "ft_mixtral_lora_all_r16_d01_b4_s128": c("mixtral_tiny", "lora", 4, 128, lora=(16, 32, 0.1, ALL_MOE)),
    "ft_mixtral_freeze_sgdm_b2_s256": c("mixtral_tiny", "freeze", 2, 256, optimizer="sgd-momentum", foreach=None),
    "ft_mixtralbf16_lora_all_r16_b2_s256": c("mixtral_tiny_bf16", "lora", 2, 256, lora=(16, 32, 0.0, ALL_MOE)),
}

# The split, fixed before anything was recorded (tests/data/finetune/SPLIT.md): sort the names byte-wise
# (Python's sorted()), number them from 1, positions 3, 6, 9, ... are held out, the others tune.
NAMES = sorted(CONFIGS)
SPLIT = {n: ("held_out" if (i + 1) % 3 == 0 else "tuning") for i, n in enumerate(NAMES)}

OPTIMIZERS = {
    "adamw": ("AdamW", dict(lr=1e-4, weight_decay=0.0)),  # transformers' TrainingArguments defaults: wd 0.0
    "sgd-momentum": ("SGD", dict(lr=1e-3, momentum=0.9)),
    "sgd": ("SGD", dict(lr=1e-3)),
}


def describe(cfg):
    parts = [cfg["model"], cfg["method"]]
    if cfg.get("lora"):
        lo = cfg["lora"]
        parts.append(f"r{lo['r']} alpha{lo['alpha']} dropout {lo['dropout']} on {','.join(lo['targets'])}")
    opt = cfg["optimizer"]
    if cfg["foreach"] is not None:
        opt += f" foreach={'on' if cfg['foreach'] else 'off'}"
    parts += [opt, f"micro-batch {cfg['micro_batch']}", f"seq {cfg['seq']}"]
    if cfg["gradient_checkpointing"]:
        parts.append("per-layer checkpointing")
    if cfg["loss_style"] != "shift":
        parts.append("loss: padded labels (transformers >= 4.50)")
    return ", ".join(parts)


def gpumem_args(cfg, hf):
    """A proposal for the `gpumem finetune` command line of the step (the predictor decides the real one)."""
    args = [f"models/{cfg['model']}/config.json", "--method", cfg["method"], "--optimizer", cfg["optimizer"],
            "--batch", str(cfg["micro_batch"]), "--seq", str(cfg["seq"]), "--dtype", hf["torch_dtype"],
            "--device", "cpu"]
    if cfg["foreach"] is not None:
        args += ["--foreach", "on" if cfg["foreach"] else "off"]
    if cfg.get("lora"):
        lo = cfg["lora"]
        args += ["--lora-r", str(lo["r"]), "--lora-alpha", str(lo["alpha"]), "--lora-dropout", str(lo["dropout"]),
                 "--lora-targets", ",".join(lo["targets"])]
    if cfg["gradient_checkpointing"]:
        args += ["--gradient-checkpointing"]
    if cfg["loss_style"] != "shift":
        args += ["--loss", cfg["loss_style"]]
    return args


# --------------------------------------------------------------------------
# Building and stepping (in the per-configuration subprocess)
# --------------------------------------------------------------------------

def build(name):
    import torch
    import finetune_models as fm

    cfg = CONFIGS[name]
    hf = models()[cfg["model"]]
    torch.manual_seed(0)
    model = fm.build_model(hf)
    model.train()
    info = {"lora_modules": [], "input_require_grads_hook": False}
    if cfg["method"] == "lora":
        lo = cfg["lora"]
        info["lora_modules"] = fm.apply_lora(model, lo["targets"], lo["r"], lo["alpha"], lo["dropout"])
    elif cfg["method"] == "freeze":
        fm.freeze_all_but_last(model)
    elif cfg["method"] != "full":
        raise SystemExit(f"{name}: method {cfg['method']} cannot be recorded here")
    if cfg["gradient_checkpointing"]:
        fm.gradient_checkpointing_enable(model)
        if not model.get_input_embeddings().weight.requires_grad:
            fm.enable_input_require_grads(model)
            info["input_require_grads_hook"] = True
    trainable = [p for p in model.parameters() if p.requires_grad]
    cls, kwargs = OPTIMIZERS[cfg["optimizer"]]
    kwargs = dict(kwargs)
    if cfg["foreach"] is not None:
        kwargs["foreach"] = cfg["foreach"]
    optimizer = getattr(torch.optim, cls)(trainable, **kwargs)
    x = torch.randint(0, hf["vocab_size"], (cfg["micro_batch"], cfg["seq"]))
    y = x.clone()
    return model, optimizer, x, y, hf, info


def step(model, optimizer, x, y, cfg, hf, ranges, saved=None):
    import torch
    from contextlib import nullcontext
    from torch.autograd.profiler import record_function
    from finetune_models import causal_lm_loss

    def rng(phase):
        return record_function(rt.RANGE_PREFIX + phase) if ranges else nullcontext()

    hooks = nullcontext()
    if saved is not None:
        def pack(t):
            ptr, nbytes = rt.storage_key(t)
            saved.setdefault(ptr, (nbytes, list(t.shape), str(t.dtype)))
            return t

        hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with rng("zero_grad"):
        optimizer.zero_grad(set_to_none=True)
    with hooks:
        with rng("forward"):
            logits = model(x)
        with rng("loss"):
            loss = causal_lm_loss(logits, y, hf["vocab_size"], cfg["loss_style"])
            del logits
    with rng("backward"):
        loss.backward()
        del loss
    with rng("optimizer"):
        optimizer.step()


# --------------------------------------------------------------------------
# Analysis helpers
# --------------------------------------------------------------------------

def live_at_peak(memory, resident, top=15):
    """The step's allocations alive at the peak event: the largest ones, and totals grouped."""
    p = max(range(len(memory)), key=lambda i: (memory[i]["total"], -i))
    live = [m for m in memory[:p + 1] if m["bytes"] > 0 and (m["freed_at"] is None or m["freed_at"] > p)]
    # Frees before the peak of blocks allocated before the step (iteration 2's gradients, one handle).
    pre_freed = -sum(m["bytes"] for m in memory[:p + 1] if m["bytes"] < 0 and m["allocated_at"] is None)
    start_total = memory[0]["total"] - memory[0]["bytes"]
    live_sum = sum(m["bytes"] for m in live)

    def entry(m):
        dims = m["op_dims"]
        return {"bytes": m["bytes"], "event_index": m["index"], "phase": m["phase"], "op": m["op"],
                "parent_op": m["parent"], "top_level_op": m["top"], "range": m["range"],
                "op_input_dims": dims}

    groups = {}
    for m in live:
        key = (m["phase"], m["op"], m["parent"])
        g = groups.setdefault(key, [0, 0])
        g[0] += m["bytes"]
        g[1] += 1
    by_group = [{"phase": k[0], "op": k[1], "parent_op": k[2], "bytes": v[0], "count": v[1]}
                for k, v in sorted(groups.items(), key=lambda kv: -kv[1][0])]
    by_phase = {}
    for m in live:
        by_phase[m["phase"]] = by_phase.get(m["phase"], 0) + m["bytes"]
    return {
        "note": "allocations made during the step (iteration 3) still alive at the peak event; resident "
                "tensors (parameters, optimizer state, batch) are not listed. by_group: bytes per "
                "(phase of allocation, op, parent op)",
        "peak_event_index": p,
        "step_allocations_alive": len(live),
        "step_allocations_alive_bytes": live_sum,
        "start_total_minus_pre_step_frees": start_total - pre_freed,
        "largest": [entry(m) for m in sorted(live, key=lambda m: -m["bytes"])[:top]],
        "by_group": by_group[:25],
        "by_phase_of_allocation": by_phase,
        "_check": start_total - pre_freed + live_sum,
    }


def expected_optimizer_state_bytes(cfg, trainable):
    n = len(trainable)
    b = sum(p.numel() * p.element_size() for p in trainable)
    if cfg["optimizer"] == "adamw":
        return 2 * b + 4 * n  # exp_avg, exp_avg_sq in the parameter dtype; step: torch.tensor(0.) fp32
    if cfg["optimizer"] == "sgd-momentum":
        return b
    return 0


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------

def record_one(name, out_dir):
    import torch
    from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler
    from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

    torch.set_num_threads(1)
    cfg = CONFIGS[name]
    config = ProfilerConfig(ProfilerState.KINETO, True, True, False, False, False, _ExperimentalConfig())
    activities = {ProfilerActivity.CPU}
    t0 = time.time()
    routing = None
    _prepare_profiler(config, activities)
    _enable_profiler(config, activities)
    try:
        model, optimizer, x, y, hf, info = build(name)
        saved = {}
        # Storages that are not activations, taken now: iteration 1's saved activations may later share
        # addresses with the optimizer state that iteration 1's step creates.
        census_exclude = {rt.storage_key(t)[0] for t in list(model.parameters()) + list(model.buffers()) + [x, y]}
        step(model, optimizer, x, y, cfg, hf, ranges=False, saved=saved)  # iteration 1: saved-tensor census
        saved = {p: v for p, v in saved.items() if p not in census_exclude}
        step(model, optimizer, x, y, cfg, hf, ranges=False)
        params = dict(model.named_parameters())  # tied weights: listed once
        trainable = {n: p for n, p in params.items() if p.requires_grad}
        frozen = {n: p for n, p in params.items() if not p.requires_grad}
        buffers = dict(model.named_buffers())
        opt_state = rt.optimizer_state_tensors(optimizer)
        seen = set()
        figures = {}
        figures["trainable_parameter_bytes"] = rt.tensors_bytes(trainable.values(), seen)
        figures["frozen_parameter_bytes"] = rt.tensors_bytes(frozen.values(), seen)
        figures["parameter_bytes"] = figures["trainable_parameter_bytes"] + figures["frozen_parameter_bytes"]
        figures["buffer_bytes"] = rt.tensors_bytes(buffers.values(), seen)
        figures["optimizer_state_bytes"] = rt.tensors_bytes(opt_state, seen)
        figures["batch_bytes"] = rt.tensors_bytes([x], seen)
        figures["labels_bytes"] = rt.tensors_bytes([y], seen)
        resident = sum(figures[k] for k in ("parameter_bytes", "buffer_bytes", "optimizer_state_bytes",
                                            "batch_bytes", "labels_bytes"))
        grads = [p.grad for p in trainable.values() if p.grad is not None]
        n_grads = len(grads)
        grad_bytes = rt.tensors_bytes(grads, set())
        frozen_with_grad = [n for n, p in frozen.items() if p.grad is not None]
        opt_state_count = len(opt_state)
        opt_state_kinds = sorted({k for s in optimizer.state.values() for k in s})
        expected_opt = expected_optimizer_state_bytes(cfg, list(trainable.values()))
        del grads, opt_state
        moe = [m for m in model.modules() if hasattr(m, "routing_log")]
        if moe:
            routing = []
            for m in moe:
                m.routing_log = routing
        step(model, optimizer, x, y, cfg, hf, ranges=True)
        for m in moe:
            m.routing_log = None
    finally:
        result = _disable_profiler()
    run_s = time.time() - t0
    roots = result.experimental_event_tree()
    start = max(r.start_time_ns for r in roots if r.name == rt.RANGE_PREFIX + "zero_grad")
    step_roots = [r for r in roots if r.start_time_ns >= start]
    lines, n_spans, n_memory = rt.chrome_lines(step_roots, os.getpid())
    text = ('{"schemaVersion": 1, "deviceProperties": [], "traceName": '
            + json.dumps(f"{name}: one fine-tuning step (iteration 3), torch {torch.__version__}") + ',\n'
            + '"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n")
    gz = gzip.compress(text.encode(), mtime=0)
    trace_path = out_dir / f"{name}.trace.json.gz"
    write_atomically(trace_path, gz)

    memory = rt.parse_trace(text)
    analysis = rt.analyze(memory, resident)
    live = live_at_peak(memory, resident)
    check_total = live.pop("_check")

    saved_nonresident = saved
    saved_bytes = sum(v[0] for v in saved_nonresident.values())
    bwd_start = analysis["phases"]["backward"]["start_above_resident"]
    trainable_count = sum(p.numel() for p in trainable.values())
    frozen_count = sum(p.numel() for p in frozen.values())
    expected_diff = 8
    if cfg["gradient_checkpointing"]:
        rng_bytes = torch.get_rng_state().numel()
        expected_diff += hf["num_hidden_layers"] * rng_bytes
        if hf["model_type"] != "gemma2":
            expected_diff += 2 * cfg["seq"] * hf["head_dim"] * (2 if hf["torch_dtype"] == "bfloat16" else 4)
        if info["input_require_grads_hook"] and hf["model_type"] == "gemma2":
            # The hooked embedding output is a leaf that requires grad: its AccumulateGrad node keeps it alive,
            # and Gemma's "* normalizer" makes the checkpoint's saved input a different tensor.
            expected_diff += cfg["micro_batch"] * cfg["seq"] * hf["hidden_size"] * (
                2 if hf["torch_dtype"] == "bfloat16" else 4)
    checks = {
        "untracked_bytes_at_step_start": analysis["start_total"] - resident - grad_bytes,
        "gradients_at_step_start": n_grads,
        "trainable_parameter_tensors": len(trainable),
        "gradient_bytes_equal_trainable_parameter_bytes": grad_bytes == figures["trainable_parameter_bytes"],
        "frozen_parameters_with_grad": frozen_with_grad,
        "expected_optimizer_state_bytes": expected_opt,
        "optimizer_state_bytes_as_expected": expected_opt == figures["optimizer_state_bytes"],
        "live_at_peak_reconstructs_peak": check_total == analysis["peak_total"],
        "saved_tensors": {
            "note": "iteration 1, forward + loss: distinct storages autograd saved (saved_tensors_hooks), "
                    "resident ones (parameters, batch, labels, buffers) excluded, against the trace's bytes "
                    "above resident when backward starts (iteration 3)",
            "saved_storages": len(saved_nonresident),
            "saved_bytes": saved_bytes,
            "trace_backward_start_above_resident": bwd_start,
            "difference": bwd_start - saved_bytes,
            "expected_difference": expected_diff,
            "expected_difference_note": "8 B (the 4-byte loss and the 4-byte record_function handle of "
                                        "gpumem:backward) + with checkpointing, per layer torch.get_rng_state() "
                                        "(ctx.fwd_cpu_state) and, except Gemma-2 (rotary inside attention), "
                                        "the cos/sin pair that checkpoint keeps in ctx.inputs; with "
                                        "enable_input_require_grads on Gemma-2, the embedding output (a leaf "
                                        "requiring grad, kept by its AccumulateGrad node)",
            "difference_as_expected": bwd_start - saved_bytes == expected_diff,
        },
    }
    failed = []
    # 4 B: the int handle record_function allocates for gpumem:zero_grad just before that range begins
    # (outside the written step); tests/data/train's recordings all show the same 4 B.
    if checks["untracked_bytes_at_step_start"] not in (0, 4):
        failed.append("untracked bytes at step start")
    if n_grads != len(trainable) or not checks["gradient_bytes_equal_trainable_parameter_bytes"]:
        failed.append("gradients at step start")
    if frozen_with_grad:
        failed.append("frozen parameters with .grad")
    if not checks["optimizer_state_bytes_as_expected"]:
        failed.append(f"optimizer state {figures['optimizer_state_bytes']} != expected {expected_opt}")
    if not checks["live_at_peak_reconstructs_peak"]:
        failed.append(f"live-at-peak sum {check_total} != peak {analysis['peak_total']}")

    mdir = out_dir / "models" / cfg["model"]
    mdir.mkdir(parents=True, exist_ok=True)
    write_atomically(mdir / "config.json", (json.dumps(hf, indent=2) + "\n").encode())

    lo = cfg.get("lora")
    facts = {
        "name": name,
        "split": SPLIT[name],
        "torch_version": torch.__version__,
        "description": describe(cfg),
        "config": {
            "model": cfg["model"],
            "hf_config_file": f"models/{cfg['model']}/config.json",
            "hf_config": hf,
            "architecture": hf["architectures"][0],
            "attn_implementation": "eager",
            "modeling_reference": "transformers 4.46-4.49 modeling code (tools/finetune_models.py docstring)",
            "method": cfg["method"],
            "lora": None if not lo else {
                "r": lo["r"], "alpha": lo["alpha"], "dropout": lo["dropout"], "targets": lo["targets"],
                "scaling": lo["alpha"] / lo["r"], "bias": "none", "adapter_dtype": "float32",
                "init": "lora_A kaiming_uniform_(a=sqrt(5)); lora_B normal(std 0.01) (PEFT: zeros)",
                "modules": info["lora_modules"]},
            "freeze": None if cfg["method"] != "freeze" else
            "trainable: last decoder layer, final norm, lm_head (tied: = embed_tokens)",
            "optimizer": cfg["optimizer"],
            "optimizer_class": type(optimizer).__name__,
            "optimizer_hyperparameters": {k: v for k, v in optimizer.defaults.items()
                                          if isinstance(v, (int, float, bool, str, type(None), tuple, list))},
            "foreach": optimizer.defaults.get("foreach"),
            "foreach_note": "None = torch 1.13's default, on CPU the per-parameter (for-loop) implementation",
            "micro_batch": cfg["micro_batch"],
            "seq": cfg["seq"],
            "tokens": cfg["micro_batch"] * cfg["seq"],
            "gradient_checkpointing": cfg["gradient_checkpointing"],
            "checkpointing_impl": ("torch.utils.checkpoint.checkpoint(decoder_layer.__call__, hidden_states, "
                                   "causal_mask, position_ids, None, False, False, cache_position, "
                                   "position_embeddings, use_reentrant=True) per decoder layer"
                                   if cfg["gradient_checkpointing"] else None),
            "enable_input_require_grads": info["input_require_grads_hook"],
            "precision": ("fp32 weights" if hf["torch_dtype"] == "float32" else
                          "bf16 weights, gradients and optimizer state (pure bf16, no autocast); LoRA "
                          "adapters fp32; RMSNorm, attention softmax and loss computed in fp32 as transformers does"),
            "loss_style": cfg["loss_style"],
            "loss": ("logits.float(); logits[..., :-1, :].contiguous() vs labels[..., 1:]; cross_entropy mean"
                     if cfg["loss_style"] == "shift" else
                     "logits.float(); labels padded with -100 then [..., 1:]; cross_entropy mean on all logits"),
            "input": f"input_ids int64 [{cfg['micro_batch']}, {cfg['seq']}], random tokens; labels = input_ids.clone()",
            "zero_grad": "optimizer.zero_grad(set_to_none=True)",
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
        "gradient_bytes": grad_bytes,
        "gradient_bytes_at_step_start": grad_bytes,
        "optimizer_state_tensors": opt_state_count,
        "optimizer_state_kinds": opt_state_kinds,
        "resident_bytes": resident,
        "step_start_allocated_bytes": analysis["start_total"],
        "untracked_bytes_at_step_start": analysis["start_total"] - resident - grad_bytes,
        "step_peak_allocated_bytes": analysis["peak_total"] - resident,
        "recorded_peak_bytes": analysis["peak_total"],
        "step_end_above_resident_bytes": analysis["end_total"] - resident,
        "peak": analysis["peak"],
        "phases": analysis["phases"],
        "live_at_peak": live,
        "checks": checks,
        "trace": {"file": trace_path.name, "operators": n_spans, "memory_events": n_memory,
                  "gzip_bytes": len(gz)},
        "gpumem_proposed_args": gpumem_args(cfg, hf),
        "record_seconds": round(run_s, 1),
    }
    if routing is not None:
        n_layers = hf["num_hidden_layers"]
        facts["moe_routing"] = {
            "note": "iteration 3's tokens per expert, per MoE layer in forward order (token-slots: each token "
                    "goes to top_k experts); with checkpointing the backward recompute routes again (listed after "
                    "the forward's)",
            "tokens_per_expert": routing,
            "forward_layers": n_layers,
        }
    write_atomically(out_dir / f"{name}.facts.json", (json.dumps(facts, indent=1) + "\n").encode())
    print(rt.summary(facts))
    cs = checks["saved_tensors"]
    print(f"  saved tensors {cs['saved_bytes']} vs backward start {cs['trace_backward_start_above_resident']} "
          f"(difference {cs['difference']}); trace {len(gz)} B gz, {n_memory} memory events")
    if failed:
        raise SystemExit(f"{name}: checks failed: {'; '.join(failed)}")


def write_atomically(path, data):
    import tempfile
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def mib(b):
    return f"{b / 2**20:.2f}"


def table(out_dir):
    rows = ["| # | name | split | model | method | settings | trainable params | resident B | "
            "recorded peak B (MiB) | peak above resident B | peak phase / op |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, name in enumerate(NAMES, 1):
        fp = out_dir / f"{name}.facts.json"
        if not fp.exists():
            rows.append(f"| {i} | {name} | {SPLIT[name]} | (not recorded) | | | | | | | |")
            continue
        f = json.loads(fp.read_text())
        cfg = CONFIGS[name]
        settings = describe(cfg).split(", ", 2)[2]
        split = "HELD OUT" if SPLIT[name] == "held_out" else "tuning"
        rows.append(f"| {i} | {name} | {split} | {cfg['model']} | {cfg['method']} | {settings} | "
                    f"{f['trainable_parameter_count']} | {f['resident_bytes']} | {f['recorded_peak_bytes']} "
                    f"({mib(f['recorded_peak_bytes'])}) | {f['step_peak_allocated_bytes']} | "
                    f"{f['peak']['phase']} / {f['peak']['op']} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=NAMES, help="record these configurations only")
    parser.add_argument("--out", default=str(OUT_DIR), help="output directory (default: tests/data/finetune)")
    parser.add_argument("--list", action="store_true", help="configuration names, split and settings")
    parser.add_argument("--table", action="store_true", help="markdown table of the recorded configurations")
    parser.add_argument("--dump", metavar="NAME", help="print a recorded step's allocations and frees")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out_dir = Path(args.out).resolve()
    if args.list:
        for i, n in enumerate(NAMES, 1):
            print(f"{i:2d} {n:45s} {SPLIT[n]:9s} {describe(CONFIGS[n])}")
        return 0
    if args.table:
        print(table(out_dir))
        return 0
    if args.dump:
        p = Path(args.dump)
        rt.dump(str(p if p.exists() else out_dir / f"{args.dump}.trace.json.gz"))
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.one:
        record_one(args.one, out_dir)
        return 0
    failed = []
    for name in args.only or NAMES:
        t = time.time()
        rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), "--one", name, "--out", str(out_dir)])
        print(f"  ({name}: {time.time() - t:.1f} s, rc {rc})", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"FAILED: {' '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
