"""gpumem from a live PyTorch module or run.

- estimate(model, example_inputs, ...) / fit(...): the module exported in
  training mode to a temporary ONNX, then `gpumem train` / `gpumem fit` on it.
- record(): a context manager that records the allocations of the code it
  wraps (torch.profiler on CPU, the CUDA caching allocator's history on
  CUDA) as a gpumem Trace.
- snapshot(): the CUDA caching allocator's state now, as a Trace.
- use_allocator(conf) / allocator_stats(): gpumem's caching allocator as
  PyTorch's CUDA allocator (PyTorch 2.0 or newer, on CUDA).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import os
import re
import tempfile
from typing import Any, Iterable, Sequence

import torch

import gpumem
from . import _cli, _profiler, _result


class ExportError(gpumem.Error, RuntimeError):
    """torch.onnx.export could not export the module; the message says why and what to try."""

    def __init__(self, message: str):
        super().__init__(message, _cli.EXIT_BAD_INPUT)


class TraceError(gpumem.Error, RuntimeError):
    """The step could not run on fake tensors (it reads a tensor's values); the message names
    where and what to give it."""

    def __init__(self, message: str):
        super().__init__(message, _cli.EXIT_BAD_INPUT)


class CudaUnavailableError(gpumem.Error, RuntimeError):
    """A CUDA-only function was called where PyTorch has no CUDA device."""

    def __init__(self, message: str):
        super().__init__(message, _cli.EXIT_BAD_INPUT)


# --------------------------------------------------------------------------
# Export


class Export:
    """A module exported to ONNX, kept in export_folder() so that a result's command_line
    runs again (in a temporary folder that lives as long as this object when that
    folder cannot be written)."""

    def __init__(self, path: str, folder: tempfile.TemporaryDirectory | None, opset: int, batch: int | None,
                 input_names: list[str]):
        self.path = path
        self.opset = opset
        self.batch = batch
        self.input_names = input_names
        self._folder = folder

    def __repr__(self) -> str:
        return f"<gpumem.torch.Export {self.path} opset {self.opset}>"


def _as_tuple(example_inputs: Any) -> tuple:
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs)
    if isinstance(example_inputs, dict):
        raise TypeError("example_inputs: pass the tensors positionally, as the module's forward() takes them")
    raise TypeError(f"example_inputs must be a tensor or a tuple of tensors, not {type(example_inputs).__name__}")


def _explain_export_failure(model: torch.nn.Module, error: Exception, opsets: Sequence[int]) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = text.split(" Please feel free to request support")[0]  # the exporter's boilerplate
    name = type(model).__name__
    hint = ""
    lower = str(error).lower()
    if "unsupported" in lower or "not supported" in lower or "opset" in lower:
        hint = (f"; an operator has no ONNX export at opsets {', '.join(map(str, opsets))} in torch "
                f"{torch.__version__}: pass opset=... or export the model yourself and call gpumem.train(path)")
    elif "data-dependent" in lower or "tracerwarning" in lower or "control flow" in lower:
        hint = "; the forward takes data-dependent branches that tracing cannot follow"
    elif "dict" in lower or "tuple" in lower or "output" in lower:
        hint = "; forward() must return a tensor or a tuple of tensors (the first is the loss's input)"
    return f"torch.onnx.export could not export {name}: {text}{hint}"


@contextlib.contextmanager
def _state_restored(model: torch.nn.Module):
    """Exporting in training mode runs forward once in train(): BatchNorm's running
    statistics and counters would change. They are put back afterwards."""
    training = model.training
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in buffers:
                    b.copy_(buffers[name])
        model.train(training)


def export_onnx(model: torch.nn.Module, example_inputs: Any, training: bool = True, batch_dim: int = 0,
                opset: int | None = None) -> Export:
    """Exports MODEL as `gpumem train` reads it: training mode (BatchNorm on batch
    statistics, Dropout present), parameters under their PyTorch names, no
    constant folding, and the batch axis of every input dynamic and named "batch".

    The module is left as it was (its mode and its buffers).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module, not {type(model).__name__}")
    inputs = _as_tuple(example_inputs)
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if not tensors:
        raise TypeError("example_inputs holds no tensor")
    input_names = [f"input_{i}" if len(inputs) > 1 else "input" for i in range(len(inputs))]
    batch = None
    axes = {}
    for name, t in zip(input_names, inputs):
        if isinstance(t, torch.Tensor) and t.dim() > batch_dim:
            axes[name] = {batch_dim: "batch"}
            batch = batch if batch is not None else int(t.shape[batch_dim])
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    opsets = (opset,) if opset else (14, 15, 16, 17, 13)
    first_error = None
    for version in opsets:
        buffer = io.BytesIO()
        try:
            with _state_restored(model), _quiet_exporter():
                torch.onnx.export(model, inputs, buffer, opset_version=version, training=mode,
                                  do_constant_folding=False, input_names=input_names,
                                  dynamic_axes=axes or None)
        except Exception as e:  # noqa: BLE001 (any exporter failure is explained, then re-raised)
            # Only the text is kept: the exception's frames hold the tracer's
            # graph wrappers, and while they live a later export can fail in
            # torch's bindings ("Unable to cast from non-held to held instance").
            first_error = first_error or _explain_export_failure(model, e, opsets)
            retry = _worth_another_opset(e)
            del e
            if not retry:
                break
            continue
        path, folder = _keep_export(buffer.getvalue(), type(model).__name__)
        return Export(path, folder, version, batch, input_names)
    raise ExportError(first_error)


def export_folder() -> str:
    """Where exports are kept: $GPUMEM_EXPORT_DIR, else $XDG_CACHE_HOME/gpumem/exports (~/.cache/...)."""
    if os.environ.get("GPUMEM_EXPORT_DIR"):
        return os.environ["GPUMEM_EXPORT_DIR"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "gpumem", "exports")


def _keep_export(data: bytes, name: str, suffix: str = ".onnx") -> tuple[str, tempfile.TemporaryDirectory | None]:
    """Writes an export where a result's command_line can read it again later, named by its
    content (the same module and shapes: the same file); a temporary folder when that
    folder cannot be written."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = export_folder()
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{name}-{digest}{suffix}")
        if not os.path.exists(path):
            fd, partial = tempfile.mkstemp(dir=folder, suffix=".partial")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(partial, path)  # whole or absent
        return path, None
    except OSError:
        temporary = tempfile.TemporaryDirectory(prefix="gpumem-export-")
        path = os.path.join(temporary.name, f"{name}{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        return path, temporary


def _worth_another_opset(error: Exception) -> bool:
    lower = str(error).lower()
    return "opset" in lower or "unsupported" in lower or "not supported" in lower


@contextlib.contextmanager
def _quiet_exporter():
    # The exporter's warnings (training-mode notes, TracerWarnings) are about
    # the export, not the user's model; gpumem's result says what matters.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --------------------------------------------------------------------------
# estimate / fit


def _optimizer_name(optimizer: Any) -> tuple[str | None, dict]:
    """gpumem's --optimizer (and --foreach) for a torch.optim instance, class or name."""
    if optimizer is None:
        return None, {}
    if isinstance(optimizer, str):
        return optimizer, {}
    cls = optimizer if isinstance(optimizer, type) else type(optimizer)
    name = cls.__name__.lower()
    names = {"sgd": "sgd", "adam": "adam", "adamw": "adamw", "adafactor": "adafactor", "adam8bit": "adam8bit",
             "adamw8bit": "adamw8bit", "pagedadamw8bit": "paged-adamw8bit", "adamw32bit": "adamw32bit",
             "pagedadamw": "paged-adamw", "pagedadamw32bit": "paged-adamw32bit"}
    if name not in names:
        raise ValueError(f"gpumem has no memory model for optimizer {cls.__name__}: pass optimizer= one of "
                         "sgd, sgd-momentum, adam, adamw, adafactor, adam8bit, adamw8bit, paged-adamw8bit, "
                         "adamw32bit, paged-adamw, paged-adamw32bit")
    chosen = names[name]
    extra = {}
    if not isinstance(optimizer, type):
        groups = getattr(optimizer, "param_groups", [])
        if chosen == "sgd" and any(g.get("momentum", 0) for g in groups):
            chosen = "sgd-momentum"
        if chosen in ("adam", "adamw") and any(g.get("amsgrad") for g in groups):
            raise ValueError("gpumem has no memory model for AMSGrad (a third state per parameter)")
        foreach = optimizer.defaults.get("foreach") if hasattr(optimizer, "defaults") else None
        if foreach is not None:
            extra["foreach"] = "on" if foreach else "off"
    return chosen, extra


def _frozen_pattern(model: torch.nn.Module, frozen: Any) -> str | None:
    """--frozen: a regular expression, a list of parameter names, or (by default)
    the parameters that do not require gradients."""
    if frozen is None:
        names = [n for n, p in model.named_parameters() if not p.requires_grad]
    elif isinstance(frozen, str):
        return frozen
    else:
        names = list(frozen)
    if not names:
        return None
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def _export_small(model, example, batch_dim: int, opset: int | None) -> Export:
    """Exports with one row of the batch, then binds the whole batch: the graph is the
    same (the batch axis is dynamic) and tracing one row is the export's main cost
    (resnet50: 1.4 s instead of 2.3 s at batch 2, and far less at batch 64).
    A module that cannot trace one row (BatchNorm1d in training, a branch on the
    batch size) is exported with the example as given."""
    inputs = _as_tuple(example)
    sizes = {int(t.shape[batch_dim]) for t in inputs if isinstance(t, torch.Tensor) and t.dim() > batch_dim}
    batch = next(iter(sizes)) if len(sizes) == 1 else None
    if batch is not None and batch > 1:
        rows = tuple(t.narrow(batch_dim, 0, 1) if isinstance(t, torch.Tensor) and t.dim() > batch_dim else t
                     for t in inputs)
        try:
            small = export_onnx(model, rows, training=True, batch_dim=batch_dim, opset=opset)
        except ExportError:
            pass
        else:
            small.batch = batch
            return small
    return export_onnx(model, example, training=True, batch_dim=batch_dim, opset=opset)


def _step_flags(model, example, optimizer, precision, frozen, device, flags) -> tuple[Export, dict]:
    batch_dim = flags.pop("batch_dim", 0)
    if not isinstance(batch_dim, int):
        raise TypeError("batch_dim: an axis index of the example inputs (0 for [batch, ...])")
    opset = flags.pop("opset", None)
    export = _export_small(model, example, batch_dim, opset)
    name, extra = _optimizer_name(optimizer)
    if name is not None:
        flags.setdefault("optimizer", name)
    for k, v in extra.items():
        flags.setdefault(k, v)
    if precision is not None:
        flags.setdefault("precision", precision)
    pattern = _frozen_pattern(model, frozen)
    if pattern is not None:
        flags.setdefault("frozen", pattern)
    # The command line's default device, not where the module happens to be:
    # a model built on the CPU is still asked about for the GPU it will train on.
    flags.setdefault("device", device or "cuda")
    if export.batch is not None:
        flags.setdefault("batch", export.batch)
    return export, flags


def _traces() -> bool:
    """Whether this torch runs a step on fake tensors (2.1 and newer); 1.13 exports."""
    major, minor = (int(x) for x in re.findall(r"\d+", torch.__version__)[:2])
    return (major, minor) >= (2, 1)


# The flags of `gpumem train` that a traced step takes: what surrounds the step
# (the GPU, the allocator, the overhead) and how the report is shown. The rest
# describe the step, which a traced step is already.
_TRACED_STEP_FLAGS = {"gpu", "allocator", "overhead", "top", "html", "trace"}


def estimate(model: torch.nn.Module, example_inputs: Any = None, optimizer: Any = None, precision: str | None = None,
             frozen: Any = None, device: str | None = None, *, labels: Any = None, loss: Any = None,
             method: str | None = None, keep_output: bool = False, **flags) -> gpumem.Result:
    """One training step of MODEL on EXAMPLE_INPUTS: what it allocates, what it needs on the device.

    example_inputs: a tensor, a tuple of tensors (positional arguments), or a dict of
    keyword arguments (a transformers model: dict(input_ids=ids, labels=ids)).
    optimizer: a torch.optim instance or class, or a name ("adamw"); precision:
    fp32 | amp-fp16 | amp-bf16 | bf16; frozen: a regular expression or parameter
    names (default: those with requires_grad False); device: cuda | cpu (default
    cuda); labels / loss: class indices for cross-entropy, or a callable
    loss(output, labels) (default: the output's .loss, else cross-entropy).

    method "trace" (torch 2.1 and newer, the default there) runs PyTorch's own
    step on fake tensors: the model's forward as written (checkpointing, LoRA,
    SDPA), autograd's backward and the optimizer's step, with no compute and no
    export. The model may live on the meta device. The model's output is dropped
    before backward, as transformers' Trainer does; keep_output=True holds it
    (and its logits) through backward, as a loop that keeps `outputs` does.
    Keywords: `gpumem train`'s gpu=, allocator=, overhead=, top=, html=, trace=.
    method "export" (torch 1.13's only one) exports the module to ONNX in
    training mode and predicts the step from the graph; its keywords are all of
    `gpumem train`'s flags (batch=64, checkpoint=["layer3"], ...).
    """
    method = method or ("trace" if _traces() else "export")
    if method == "export":
        if isinstance(example_inputs, dict) or labels is not None or loss is not None or keep_output:
            raise TypeError("method='export' takes positional example inputs and prices cross-entropy on the first "
                            "output; labels=, loss=, keep_output= and keyword inputs need method='trace' (torch 2.1 "
                            "or newer)")
        export, flags = _step_flags(model, example_inputs, optimizer, precision, frozen, device, flags)
        args = _cli.build_args("train", [export.path], flags, "torch.estimate")
        code, out, err = _cli.run(args + ["--json"], accept=(0, _cli.EXIT_DOES_NOT_FIT))
        return _result.parse(out, "train", args, err, code, keep=export)
    if method != "trace":
        raise ValueError(f"method={method!r}: 'trace' (fake tensors, torch 2.1+) or 'export' (ONNX)")
    if not _traces():
        raise TypeError(f"method='trace' runs the step on fake tensors, which torch {torch.__version__} lacks "
                        "(2.1 or newer); method='export' works here")
    refused = sorted(set(flags) - _TRACED_STEP_FLAGS)
    if refused:
        raise TypeError(f"{refused[0]}= does not apply to a traced step: it runs the model as given; change the "
                        f"model or its inputs (keywords here: {', '.join(sorted(_TRACED_STEP_FLAGS))})")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module, not {type(model).__name__}")
    from . import _fake_step
    if isinstance(example_inputs, dict):
        args_, kwargs_ = (), dict(example_inputs)
    elif example_inputs is None:
        raise TypeError("example_inputs: the tensors forward() takes (a tensor, a tuple, or a dict of keywords)")
    else:
        args_, kwargs_ = _as_tuple(example_inputs), {}
    precision = precision or "fp32"
    if precision not in ("fp32", "amp-fp16", "amp-bf16", "bf16"):
        raise ValueError(f"precision={precision!r}: fp32, amp-fp16, amp-bf16 or bf16")
    device = device or "cuda"
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device={device!r}: cuda or cpu")
    try:
        doc = _fake_step.trace_step(model, args_, kwargs_, optimizer="adamw" if optimizer is None else optimizer,
                                    loss=loss, labels=labels, device=device, precision=precision,
                                    frozen=_frozen_names(model, frozen), keep_output=keep_output)
    except _fake_step.Untraceable as e:
        raise TraceError(str(e)) from None
    data = json.dumps(doc, separators=(",", ":")).encode()
    path, folder = _keep_export(data, type(model).__name__, ".step.json")
    args = _cli.build_args("train", [path], flags, "torch.estimate")
    code, out, err = _cli.run(args + ["--json"], accept=(0, _cli.EXIT_DOES_NOT_FIT))
    return _result.parse(out, "train", args, err, code, keep=folder)


def _frozen_names(model: torch.nn.Module, frozen: Any) -> set[str]:
    """The parameters a traced step leaves without gradients: those --frozen's pattern
    (_frozen_pattern, as the export path passes it) finds in their names."""
    pattern = _frozen_pattern(model, frozen)
    if pattern is None:
        return set()
    found = re.compile(pattern)
    return {n for n, _ in model.named_parameters() if found.search(n)}


def fit(model: torch.nn.Module, example_inputs: Any, gpu: Any, optimizer: Any = None, precision: str | None = None,
        frozen: Any = None, device: str | None = None, **flags) -> gpumem.Result:
    """What fits a GPU of GPU bytes ("24GiB" or an int): `gpumem fit` on MODEL exported as estimate() does.

    max_batch=True finds the largest batch; keep=["precision"] keeps levers.
    """
    export, flags = _step_flags(model, example_inputs, optimizer, precision, frozen, device, flags)
    flags["gpu"] = gpu
    if flags.get("max_batch"):
        flags.pop("batch", None)
    args = _cli.build_args("fit", [export.path], flags, "torch.fit")
    code, out, err = _cli.run(args + ["--json"], accept=(0, _cli.EXIT_DOES_NOT_FIT))
    return _result.parse(out, "fit", args, err, code, keep=export)


# --------------------------------------------------------------------------
# Traces


class Trace:
    """A recorded trace on disk, with gpumem's analyses as methods."""

    def __init__(self, path: str, folder: tempfile.TemporaryDirectory | None = None):
        self.path = path
        self._folder = folder
        self._stats = None

    def __repr__(self) -> str:
        return f"<gpumem.torch.Trace {self.path}>"

    def __fspath__(self) -> str:
        return self.path

    def stats(self, **flags) -> gpumem.Result:
        """`gpumem trace stats`: peak, live set, iterations, leaks."""
        if not flags:
            if self._stats is None:
                self._stats = gpumem.trace_stats(self.path)
            return self._stats
        return gpumem.trace_stats(self.path, **flags)

    def replay(self, policies: Iterable[str] | str | None = None, **flags) -> gpumem.Result:
        """`gpumem replay`: the trace under each allocator policy against the optimum."""
        if policies is not None:
            flags["policy"] = [policies] if isinstance(policies, str) else list(policies)
        return gpumem.replay(self.path, **flags)

    def report(self, path: str | os.PathLike) -> str:
        """`gpumem report`: the trace's HTML report, written to PATH."""
        return gpumem.report(self.path, path)

    def convert(self, path: str | os.PathLike, to: str) -> str:
        """`gpumem trace convert`: pytorch (memory_viz) | perfetto | csv | jsonl."""
        return gpumem.trace_convert(self.path, path, to=to)

    def save(self, path: str | os.PathLike) -> str:
        """Copies the recording to PATH (it is otherwise removed with this object)."""
        with open(self.path, "rb") as src:
            data = src.read()
        tmp = os.fspath(path) + ".tmp"
        with open(tmp, "wb") as dst:
            dst.write(data)
        os.replace(tmp, path)
        return os.fspath(path)

    @property
    def iterations(self) -> gpumem.Fields:
        """The training loop's iterations as `trace stats` finds them."""
        return self.stats().iterations

    @property
    def leaks(self) -> gpumem.Fields:
        """What was allocated and never freed (`never_freed`), and whether it grows per iteration."""
        return self.stats().never_freed


def _cuda_available() -> bool:
    return torch.cuda.is_available()


def _no_cuda(what: str) -> CudaUnavailableError:
    build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no device"
    return CudaUnavailableError(f"{what} needs CUDA: torch {torch.__version__} has {build}")


class record:  # noqa: N801 (used as `with gpumem.torch.record() as rec:`)
    """Records the allocations of the code it wraps; rec.trace is then a Trace.

    device: "cpu" (torch.profiler with profile_memory) or "cuda" (the caching
    allocator's history, torch.cuda.memory._record_memory_history); default:
    cuda when PyTorch has a device, else cpu.
    """

    def __init__(self, device: str | None = None):
        if device not in (None, "cpu", "cuda"):
            raise ValueError("device: 'cpu' or 'cuda'")
        if device == "cuda" and not _cuda_available():
            raise _no_cuda("gpumem.torch.record(device='cuda')")
        self.device = device or ("cuda" if _cuda_available() else "cpu")
        self.trace: Trace | None = None
        self._profiler = None
        self._folder = None

    def __enter__(self) -> "record":
        self._folder = tempfile.TemporaryDirectory(prefix="gpumem-record-")
        if self.device == "cpu":
            if _profiler.kineto_available():
                from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415
                self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                                         record_shapes=True)
                self._profiler.__enter__()
            else:  # Debian's PyTorch: no Kineto, whose export has no memory events
                self._profiler = _profiler.LowLevelProfiler()
                self._profiler.start()
        else:
            _record_memory_history(True)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.device == "cpu":
            path = os.path.join(self._folder.name, "trace.json")
            if isinstance(self._profiler, _profiler.LowLevelProfiler):
                self._profiler.stop()
                self._profiler.write(path, f"gpumem.torch.record(), torch {torch.__version__}")
            else:
                self._profiler.__exit__(exc_type, exc, tb)
                self._profiler.export_chrome_trace(path)
        else:
            path = os.path.join(self._folder.name, "snapshot.pickle")
            _dump_snapshot(path)
            _record_memory_history(False)
        self.trace = Trace(path, self._folder)


def _record_memory_history(enabled: bool) -> None:
    memory = torch.cuda.memory
    try:  # PyTorch 2.1 and later
        memory._record_memory_history("all" if enabled else None, max_entries=1_000_000)
    except TypeError:  # 1.13 and 2.0: (enabled, record_context, trace_alloc_max_entries, ...)
        memory._record_memory_history(enabled, trace_alloc_max_entries=1_000_000, trace_alloc_record_context=True)


def _dump_snapshot(path: str) -> None:
    import pickle  # noqa: PLC0415
    snapshot = torch.cuda.memory._snapshot()
    with open(path, "wb") as f:
        pickle.dump(snapshot, f)


def snapshot() -> Trace:
    """The CUDA caching allocator's state now (and its history, while recording) as a Trace."""
    if not _cuda_available():
        raise _no_cuda("gpumem.torch.snapshot()")
    folder = tempfile.TemporaryDirectory(prefix="gpumem-snapshot-")
    path = os.path.join(folder.name, "snapshot.pickle")
    _dump_snapshot(path)
    return Trace(path, folder)


# --------------------------------------------------------------------------
# gpumem's allocator inside PyTorch

_ALLOCATOR_LIBRARY = "libgpumem_torch.so"
_installed: ctypes.CDLL | None = None


def allocator_library() -> str:
    """The path of libgpumem_torch.so that comes with this package."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _ALLOCATOR_LIBRARY)
    if not os.path.exists(path):
        raise CudaUnavailableError(f"{path}: not built (gpumem builds libgpumem_torch.so where the CUDA toolkit "
                                   "is installed)")
    return path


def use_allocator(conf: str = "") -> None:
    """Makes gpumem's caching allocator PyTorch's CUDA allocator (before any CUDA tensor exists).

    conf: the allocator's settings, as GPUMEM_ALLOC_CONF takes them
    (docs/allocator.md), e.g. "expandable_segments:true,max_split_size_mb:256".
    """
    global _installed
    if not _cuda_available():
        raise _no_cuda("gpumem.torch.use_allocator()")
    pluggable = getattr(torch.cuda.memory, "CUDAPluggableAllocator", None)
    if pluggable is None:
        raise CudaUnavailableError(f"gpumem.torch.use_allocator() needs PyTorch 2.0 or newer "
                                   f"(torch.cuda.memory.CUDAPluggableAllocator); this is {torch.__version__}")
    path = allocator_library()
    if conf:
        os.environ["GPUMEM_ALLOC_CONF"] = conf
    allocator = pluggable(path, "gpumem_torch_alloc", "gpumem_torch_free")
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise CudaUnavailableError(f"PyTorch refused the allocator: {e} (call use_allocator() before the first "
                                   "CUDA tensor)") from e
    library = ctypes.CDLL(path)
    library.gpumem_torch_memory_stats_json.restype = ctypes.c_long
    library.gpumem_torch_memory_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    _installed = library


def allocator_stats(device: int = 0) -> dict:
    """gpumem's allocator statistics under PyTorch's key names (torch.cuda.memory_stats() does not reach it)."""
    if not _cuda_available():
        raise _no_cuda("gpumem.torch.allocator_stats()")
    if _installed is None:
        raise CudaUnavailableError("gpumem.torch.allocator_stats(): gpumem's allocator is not in use: call "
                                   "gpumem.torch.use_allocator() first")
    size = _installed.gpumem_torch_memory_stats_json(device, None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    _installed.gpumem_torch_memory_stats_json(device, buffer, size + 1)
    return json.loads(buffer.value)


def step() -> None:
    """Marks the start of a training step for the allocator's planned mode (gpumem_torch_step)."""
    if _installed is None:
        raise CudaUnavailableError("gpumem.torch.step(): gpumem's allocator is not in use")
    _installed.gpumem_torch_step()


__all__ = ["estimate", "fit", "export_onnx", "Export", "record", "snapshot", "Trace", "use_allocator",
           "allocator_stats", "allocator_library", "step", "ExportError", "CudaUnavailableError"]

estimate.__doc__ += _cli.keyword_doc("train", ("optimizer", "precision", "frozen", "device"))
fit.__doc__ += _cli.keyword_doc("fit", ("gpu", "optimizer", "precision", "frozen", "device"))
