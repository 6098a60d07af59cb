"""One training step of a live module, run on fake tensors (torch 2.x).

PyTorch's own code runs the step: the module's forward, the loss, autograd's
backward and the optimizer's step, with whatever the model does (gradient
checkpointing, SDPA, LoRA adapters, autocast). Every tensor is a FakeTensor,
so nothing is computed and nothing is allocated, but every operator still
says what it returns. A dispatch mode below autograd sees each operator's
outputs: a storage it has not seen is an allocation; a storage whose last
reference died is a free. The result is the step as a list of allocations
with sizes, lifetimes, operators, modules and phases: the document
`gpumem train` reads (docs/train.md, "A traced step"), where the same
allocator replay and verdict as every other command decide what it needs.

What fake tensors cannot see: scratch a kernel allocates inside itself
without returning it (cuBLAS' and cuDNN's workspaces on CUDA; oneDNN's
reorders and slow_conv2d's im2col columns on the CPU) and workspaces whose
meta kernels report no size (an LSTM's: named in the document's warnings).
The device named (cuda by default) picks the kernels where their outputs
differ (SDPA's backends, the optimizer's foreach default). A question on
the inputs' values is answered from the real inputs; one on values the
weights computed cannot be (Untraceable).
"""

from __future__ import annotations

import contextlib
import time as _time
import weakref
from typing import Any, Callable

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

PHASES = ("resident", "forward", "loss", "backward", "optimizer")

# Kernels whose workspace a fake tensor gives no size (their meta kernels
# return an empty one): the real step keeps more than the trace shows.
_UNSIZED_WORKSPACES = {
    "mkldnn_rnn_layer": "the CPU's LSTM (oneDNN) keeps a workspace the trace cannot size",
    "_cudnn_rnn": "cuDNN's RNN reserve space is not sized by fake tensors",
}
FORMAT = "gpumem-step"
VERSION = 1


def _storage_key(t: torch.Tensor) -> tuple[int, Any] | None:
    try:
        s = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, nested: no single storage
        return None
    return s._cdata, s


def _op_name(func) -> str:
    return getattr(func, "__name__", str(func)).split(".")[0]  # "addmm.default" -> "addmm"


class _Recorder(TorchDispatchMode):
    """Sees every operator below autograd; keeps the storages alive now."""

    def __init__(self, modules: "_ModuleStack"):
        super().__init__()
        self.allocations: list[dict] = []
        self.live: dict[int, tuple[int, StorageWeakRef]] = {}  # cdata -> (index, weak ref)
        self.pinned: set[int] = set()  # resident storages, checked at phase changes only
        self.time = 0
        self.phase = "resident"
        self.modules = modules
        self.op_count = 0
        self.phase_starts: dict[str, int] = {}
        self.values = _Values()
        self.unsized: set[str] = set()
        self.watched: dict[int, int] = {}  # id(a live tensor or saved holder) -> its storage's cdata
        self.holders: dict[int, int] = {}  # storage cdata -> live tensors and saved holders seen on it
        self.candidates: set[int] = set()
        self.lingering: set[int] = set()

    # -- allocations and frees ------------------------------------------
    # A storage may die only when a tensor on it dies: each tensor object seen
    # carries a finalizer that makes its storage a candidate, and only the
    # candidates (and those still held by a tensor never seen) are checked.
    # Checking every live storage after every operator was 2/3 of the time.
    def add(self, t: torch.Tensor, tensor: str, op: str, module: str = "", pinned: bool = False) -> None:
        key = _storage_key(t)
        if key is None:
            return
        cdata, storage = key
        if cdata not in self.live:
            index = len(self.allocations)
            self.allocations.append({"tensor": tensor, "op": op, "module": module, "phase": self.phase,
                                     "bytes": int(storage.nbytes()), "alloc": self.time, "free": None})
            self.live[cdata] = (index, StorageWeakRef(storage))
            if pinned:
                self.pinned.add(cdata)
        self._watch(t, cdata)

    def _watch(self, t: object, cdata: int) -> None:
        if id(t) in self.watched:
            return
        self.watched[id(t)] = cdata
        self.holders[cdata] = self.holders.get(cdata, 0) + 1
        weakref.finalize(t, self._died, id(t), cdata)

    def _died(self, holder_id: int, cdata: int) -> None:
        self.watched.pop(holder_id, None)
        left = self.holders.get(cdata, 1) - 1
        if left > 0:
            self.holders[cdata] = left
        else:
            self.holders.pop(cdata, None)
            self.candidates.add(cdata)

    # What autograd saves for backward is held by C++ after its Python object
    # dies: a pack hook hands autograd a holder whose death (when backward
    # releases the node's saved variables) makes the storage a candidate.
    def pack(self, t: torch.Tensor) -> "_Saved":
        holder = _Saved(t)
        key = _storage_key(t)
        if key is not None and key[0] in self.live:
            self._watch(holder, key[0])
        return holder

    @staticmethod
    def unpack(holder: "_Saved") -> torch.Tensor:
        return holder.tensor

    def reap(self, at: int, everything: bool = False) -> None:
        check = self.candidates | self.lingering
        if everything:
            check |= self.live.keys()
        self.candidates = set()
        for c in check:
            entry = self.live.get(c)
            if entry is None:
                self.lingering.discard(c)
                continue
            if c in self.holders and not everything:
                self.lingering.discard(c)
                continue
            if not entry[1].expired():
                # Held by a tensor this recorder never saw (autograd's saved copy):
                # checked again at every operator until it goes.
                if c not in self.pinned and c not in self.holders:
                    self.lingering.add(c)
                continue
            self.live.pop(c)
            self.pinned.discard(c)
            self.lingering.discard(c)
            self.allocations[entry[0]]["free"] = at

    def set_phase(self, phase: str) -> None:
        self.time += 1
        self.reap(self.time, everything=True)
        self.phase = phase
        self.phase_starts.setdefault(phase, self.time)

    def index_of(self, t: torch.Tensor) -> int | None:
        key = _storage_key(t)
        if key is None or key[0] not in self.live:
            return None
        return self.live[key[0]][0]

    # -- the dispatch hook ------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            known = self.values.known(args[0])
            if known is not None:  # a question on the inputs' values: answered from them
                from torch.utils._python_dispatch import _disable_current_modes
                with _disable_current_modes():
                    return known.item()
        self.time += 1
        self.reap(self.time)
        out = func(*args, **kwargs)
        self.values.follow(func, args, kwargs, out)
        self.op_count += 1
        op = _op_name(func)
        if op in _UNSIZED_WORKSPACES:
            self.unsized.add(op)
        module = self.modules.current(self.phase)
        flat, _ = tree_flatten(out)
        for i, t in enumerate(flat):
            if isinstance(t, torch.Tensor):
                self.add(t, f"{op}:{self.op_count}" if len(flat) == 1 else f"{op}:{self.op_count}.{i}", op, module)
        self.reap(self.time + 1)
        return out


class _Values:
    """The real values of what is computed from the inputs alone (token ids, attention
    masks, position ids): small tensors, computed for real beside their fake twins,
    so that a model that asks about them (transformers 4's `torch.all(mask == 1)`
    before SDPA, a padding check) gets the answer its real run would. Anything
    that touches a parameter has no value: the step's arithmetic stays fake."""

    MAX_ELEMENTS = 1 << 22

    def __init__(self):
        from torch.utils.weak import WeakIdKeyDictionary
        self.real = WeakIdKeyDictionary()

    def add(self, fake: torch.Tensor, real: torch.Tensor, copy: bool = False) -> None:
        """copy: the user's own tensor, which an in-place operator must not change."""
        if real.device.type != "meta" and real.numel() <= self.MAX_ELEMENTS:
            self.real[fake] = real.detach().clone() if copy else real

    def known(self, t: Any) -> torch.Tensor | None:
        return self.real.get(t) if isinstance(t, torch.Tensor) else None

    def follow(self, func, args, kwargs, out) -> None:
        flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        if any(a not in self.real for a in flat_in):
            if func._schema.is_mutable:  # what it wrote is no longer known
                for a in flat_in:
                    self.real.pop(a, None)
            return
        flat_out = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if not flat_out or any(o.numel() > self.MAX_ELEMENTS for o in flat_out):
            return
        if not flat_in and sum(o.numel() for o in flat_out) > self.MAX_ELEMENTS:
            return
        from torch.utils._python_dispatch import _disable_current_modes
        swap = lambda a: self.real[a] if isinstance(a, torch.Tensor) else a  # noqa: E731
        try:
            with _disable_current_modes():
                real_out = func(*tree_map(swap, args), **tree_map(swap, kwargs))
        except Exception:  # a value it cannot compute is simply not known
            return
        for f, r in zip(flat_out, [o for o in tree_flatten(real_out)[0] if isinstance(o, torch.Tensor)]):
            self.add(f, r)


class _CudaAttention(TorchFunctionMode):
    """scaled_dot_product_attention as CUDA runs it: PyTorch picks flash attention
    (fp16/bf16, no explicit mask, head size up to 256) or the memory-efficient
    kernel (any float type, masks and dropout) before the math fallback
    (sdp_utils.cpp's order). On the CPU it picks its own kernels, and falls back
    to math (the whole attention matrix) where CUDA's kernels do not, for
    dropout for example. The CUDA kernel is called explicitly; fake tensors
    give its outputs and autograd its backward."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            out = _cuda_sdpa(*args, **kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)


def _cuda_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return None
    head = query.shape[-1]
    if enable_gqa and key.shape[1] != query.shape[1]:
        groups = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    flash = (query.dtype in (torch.float16, torch.bfloat16) and attn_mask is None and head <= 256 and head % 8 == 0
             and value.shape[-1] == head)
    if flash:
        return torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    if query.dtype in (torch.float16, torch.bfloat16, torch.float32) and head % (4 if query.dtype == torch.float32 else 8) == 0:
        bias = attn_mask
        if bias is not None and bias.dtype == torch.bool:
            bias = torch.zeros(bias.shape, dtype=query.dtype).masked_fill(bias.logical_not(), float("-inf"))
        if bias is not None:
            bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, True, dropout_p, is_causal, scale=scale)[0]
    return None


class _Saved:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


class _ModuleStack:
    """The module running now: forward hooks name it in the forward pass; in the
    backward pass autograd's current node carries the module that made it."""

    def __init__(self, model: torch.nn.Module):
        self.names = {id(m): n for n, m in model.named_modules()}
        self.stack: list[str] = []
        self._handles: list[Any] = []
        self._tagged: set[int] = set()

    def current(self, phase: str) -> str:
        if phase in ("forward", "loss"):
            return self.stack[-1] if self.stack else ""
        if phase == "backward":
            node = torch._C._current_autograd_node()
            if node is not None:
                return node.metadata.get("gpumem_module", "")
        return ""

    def _pre(self, module, args):
        name = self.names.get(id(module))
        if name is not None:
            self.stack.append(name)

    def _post(self, module, args, output):
        name = self.names.get(id(module))
        if name is None:
            return
        if self.stack and self.stack[-1] == name:
            self.stack.pop()
        # Tag the autograd nodes this call made (inner modules tagged theirs first).
        todo = [t.grad_fn for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or id(node) in self._tagged:
                continue
            self._tagged.add(id(node))
            node.metadata["gpumem_module"] = name
            todo.extend(n for n, _ in node.next_functions if n is not None)

    def __enter__(self):
        from torch.nn.modules import module as m
        self._handles = [m.register_module_forward_pre_hook(self._pre), m.register_module_forward_hook(self._post)]
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()


def _fake_like(mode, t: torch.Tensor, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    with mode:
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=dtype or t.dtype, device=device)


def _default_loss(output: Any, labels: Any) -> torch.Tensor:
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    logits = getattr(output, "logits", None)
    if logits is None:
        logits = output[0] if isinstance(output, (tuple, list)) else output
    if labels is None:
        raise ValueError("the model returned no loss: pass labels= (class indices) or loss= (a callable)")
    return torch.nn.functional.cross_entropy(logits, labels)


class Untraceable(Exception):
    """The step needs a tensor's values, which fake tensors do not have."""


def _user_frame(tb) -> str:
    """The innermost frame outside torch and this module: where the model asked for data."""
    import traceback
    frames = [f for f in traceback.extract_tb(tb) if "/torch/" not in f.filename and "gpumem" not in f.filename]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "the model's code"


def trace_step(model: torch.nn.Module, args: tuple, kwargs: dict, *, optimizer: Any, loss: Callable | None,
               labels: Any, device: str, precision: str, frozen: set[str] | None = None, steady: bool = True,
               keep_output: bool = False) -> dict:
    """Runs one training step of MODEL on fake tensors and returns the step document."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    started = _time.perf_counter()
    dev = torch.device(device)
    # Fake tensors live on the CPU whatever the device named: autograd's engine
    # wants a real CUDA device for CUDA tensors, even fake ones. Where CUDA
    # differs in what a step allocates, it is said here: the optimizer's
    # multi-tensor (foreach) default (_fake_optimizer) and the attention
    # kernels CUDA picks (_CudaAttention).
    cuda = dev.type == "cuda"
    device_name = dev.type
    dev = torch.device("cpu")
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    weight_dtype = torch.bfloat16 if precision == "bf16" else None
    modules = _ModuleStack(model)
    rec = _Recorder(modules)

    real = list(model.named_parameters())  # before the fake ones stand in for them
    names = {id(p): n for n, p in real}
    fake: dict[int, torch.Tensor] = {}
    state: dict[str, torch.Tensor] = {}
    # The step's inputs, made before the recorder listens and then named.
    for n, p in real:
        f = _fake_like(mode, p, dev, weight_dtype if p.is_floating_point() else None)
        f.requires_grad_(p.requires_grad and (frozen is None or n not in frozen))
        fake[id(p)] = f
        state[n] = f
        rec.add(f, n, "parameter", n.rpartition(".")[0], pinned=True)
    for n, b in model.named_buffers():
        f = _fake_like(mode, b, dev)
        state[n] = f
        rec.add(f, n, "buffer", n.rpartition(".")[0], pinned=True)

    # Tied weights (GPT-2's lm_head and wte) are one parameter under two names.
    for n, p in model.named_parameters(remove_duplicate=False):
        state[n] = fake[id(p)]
    buffers = {id(b): state[n] for n, b in model.named_buffers()}
    for n, b in model.named_buffers(remove_duplicate=False):
        if id(b) in buffers:
            state[n] = buffers[id(b)]

    def to_fake(x):
        if isinstance(x, torch.Tensor):
            # precision "bf16": the model is cast whole, so are its float inputs.
            f = _fake_like(mode, x, dev, weight_dtype if x.is_floating_point() else None)
            rec.add(f, "input", "input", "", pinned=True)
            rec.values.add(f, x, copy=True)
            return f
        return x

    f_args = tree_map(to_fake, args)
    f_kwargs = tree_map(to_fake, kwargs)
    f_labels = tree_map(to_fake, labels)
    trainable = [fake[id(p)] for _, p in real if fake[id(p)].requires_grad]
    with mode:
        opt = _fake_optimizer(optimizer, fake, trainable, cuda) if optimizer is not None else None
    autocast = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)

    def forward_and_loss():
        ctx = torch.autocast(dev.type, dtype=autocast) if autocast else contextlib.nullcontext()
        with ctx, torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
            rec.set_phase("forward")
            out = model(*f_args, **f_kwargs)
            rec.set_phase("loss")
            value = loss(out, f_labels) if loss is not None else _default_loss(out, f_labels)
        return out, value

    # The fake parameters stand in for the module's own for the whole step:
    # gradient checkpointing runs the forward again inside backward.
    from torch.nn.utils.stateless import _reparametrize_module
    kernels = _CudaAttention() if cuda else contextlib.nullcontext()
    from torch._subclasses import fake_tensor as ft
    data_dependent = tuple(getattr(ft, n) for n in ("DataDependentOutputException", "DynamicOutputShapeException")
                           if hasattr(ft, n))
    try:
        with mode, rec, modules, kernels, _reparametrize_module(model, state, strict=False):
            step_start, gradients = _run_step(rec, opt, trainable, real, fake, names, forward_and_loss, steady,
                                              keep_output)
    except data_dependent as e:
        raise Untraceable(f"{type(model).__name__} reads the values of a tensor computed from its weights "
                          f"({getattr(e, 'func', e)}) at {_user_frame(e.__traceback__)}: fake tensors have shapes, "
                          "not values (inputs given as real tensors are read where asked); estimate with "
                          "method='export'") from None
    settings = {
        "device": device_name,
        "optimizer": type(optimizer).__name__ if not isinstance(optimizer, str) else optimizer,
        "precision": precision,
    }
    return _document(model, rec, real, fake, step_start, gradients, settings, started)


def _run_step(rec, opt, trainable, real, fake, names, forward_and_loss, steady,
              keep_output: bool) -> tuple[int, dict[int, str]]:
    """Runs the step (the warm-up optimizer step first, for a steady step) and returns
    the time it began and the allocations that are parameters' gradients. The
    model's output goes before backward, as the Trainer drops it; with keep_output
    it lives through backward, as in a loop that keeps `outputs`."""
    if opt is not None and steady:
        # The states a steady step starts with: one step on zero gradients creates them.
        rec.phase = "resident"
        for p in trainable:
            p.grad = torch.zeros_like(p)
        opt.step()
        for p in trainable:
            p.grad = None
        for st in opt.state.values():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    i = rec.index_of(v)
                    if i is not None:
                        rec.allocations[i]["op"] = "optimizer state"
        rec.reap(rec.time + 1, everything=True)
        for a in rec.allocations:
            if a["free"] is None:
                a["alloc"] = 0
        rec.pinned.update(rec.live.keys())
    step_start = rec.time + 1
    out, value = forward_and_loss()
    kept = out if keep_output else None
    del out
    rec.set_phase("backward")
    value.backward()
    del value, kept
    grad_index = {}
    for _, p in real:
        f = fake[id(p)]
        if f.requires_grad and f.grad is not None:
            i = rec.index_of(f.grad)
            if i is not None:
                grad_index[i] = names.get(id(p), "")
    rec.set_phase("optimizer")
    if opt is not None:
        opt.step()
    rec.set_phase("end")
    return step_start, grad_index


def _document(model, rec, real, fake, step_start: int, grad_index: dict[int, str], settings: dict,
              started: float) -> dict:
    """The step document (docs/train.md, "A traced step"): times from the step's start,
    each allocation with its category."""
    end_time = rec.time + 1
    rec.reap(end_time, everything=True)

    # Resident allocations open the step; everything made before the step began
    # (the warm-up step's states) is resident.
    backward_start = rec.phase_starts.get("backward", end_time)
    allocations = []
    for i, a in enumerate(rec.allocations):
        if a["free"] is not None and a["free"] <= step_start and a["alloc"] < step_start:
            continue  # freed before the step (the warm-up's gradients and temporaries)
        b = dict(a)
        if b["alloc"] < step_start:
            b["alloc"] = 0
            b["phase"] = "resident"
            category = "weights" if b["op"] in ("parameter", "buffer") else (
                "inputs" if b["op"] == "input" else "optimizer_states")
        elif i in grad_index:
            category = "gradients"
            b["tensor"] = "grad of " + grad_index[i]
        elif b["phase"] == "optimizer" and b["free"] is None:
            category = "optimizer_states"
        elif b["phase"] in ("forward", "loss") and (b["free"] is None or b["free"] > backward_start):
            category = "saved_activations"
        else:
            category = "transient"
        b["category"] = category
        if b["free"] is None:
            b["free"] = end_time
        else:
            b["free"] = max(b["free"], b["alloc"] + 1)
        allocations.append(b)
    # Times from the step's start.
    shift = step_start - 1
    for b in allocations:
        if b["alloc"] > 0:
            b["alloc"] -= shift
        b["free"] = max(b["free"] - shift, b["alloc"] + 1)
    params = [p for _, p in real]
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": type(model).__name__,
        "traced_with": f"torch {torch.__version__}, fake tensors",
        "settings": settings,
        "parameters": {
            "trainable": sum(p.numel() for p in params if fake[id(p)].requires_grad),
            "frozen": sum(p.numel() for p in params if not fake[id(p)].requires_grad),
        },
        "operators": rec.op_count,
        "seconds": round(_time.perf_counter() - started, 3),
        "end": end_time - shift,
        "warnings": [_UNSIZED_WORKSPACES[op] + ": the step needs more than this" for op in sorted(rec.unsized)],
        "phases": [{"phase": "resident", "start": 0}] + [
            {"phase": p, "start": rec.phase_starts[p] - shift} for p in PHASES[1:] if p in rec.phase_starts],
        "allocations": allocations,
    }


def _fake_optimizer(optimizer: Any, fake: dict[int, torch.Tensor], trainable: list[torch.Tensor], cuda: bool):
    """The user's optimizer (an instance, a class or a torch.optim name) over the fake parameters,
    with the same groups and settings. On CUDA, an optimizer that leaves foreach and
    fused unset runs foreach, as torch.optim picks for CUDA tensors."""
    if isinstance(optimizer, str):
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(optimizer.lower())
        if cls is None:
            raise ValueError(f"optimizer {optimizer!r}: pass a torch.optim instance or class, or sgd, adam, adamw")
        optimizer = cls
    if isinstance(optimizer, type):
        groups = [{"params": trainable}]
        cls = optimizer
    else:
        groups = []
        for g in optimizer.param_groups:
            group = {k: v for k, v in g.items() if k != "params"}
            group["params"] = [fake[id(p)] for p in g["params"] if id(p) in fake]
            groups.append(group)
        cls = type(optimizer)
    if cuda:
        for g in groups:
            if g.get("foreach") is None and not g.get("fused") and _takes(cls, "foreach"):
                g["foreach"] = True
    return cls(groups)


def _takes(cls: type, name: str) -> bool:
    import inspect
    try:
        return name in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def peak_bytes(doc: dict) -> int:
    """The most bytes live at once: at each time the frees come before the allocations
    (as `gpumem train` orders a step), so the peak is the largest sum over [alloc, free)."""
    delta: dict[int, int] = {}
    for a in doc["allocations"]:
        delta[a["alloc"]] = delta.get(a["alloc"], 0) + a["bytes"]
        delta[a["free"]] = delta.get(a["free"], 0) - a["bytes"]
    live = peak = 0
    for t in sorted(delta):
        live += delta[t]
        peak = max(peak, live)
    return peak
