"""gpumem: make GPU memory go further for deep-learning training and inference.

Every command of the gpumem command line is a function here, run by the same
C++ code in this process. Keyword arguments are the command's flags
(``gpu="80GiB"`` is ``--gpu 80GiB``; a switch takes True); each function
returns a Result: the command's JSON document (docs/<command>.md) whose fields
read as keys or attributes, with its text report as str() and its HTML report
inline in Jupyter.

    >>> import gpumem
    >>> r = gpumem.train("model.onnx", batch=32, optimizer="adamw")
    >>> r.peak_bytes, r.peak_phase

From a live PyTorch module or run, see gpumem.torch (imported on first use, so
that ``import gpumem`` stays fast and does not need torch).
"""

from __future__ import annotations

import os
from typing import Any

from . import _cli, _result
from ._cli import Error, InputError, InternalError
from ._result import Fields, Result, format_bytes

__version__ = "0.1.0"
__all__ = [
    "inspect", "plan", "train", "fit", "finetune", "llm", "weights", "quantize", "replay", "trace_stats",
    "trace_plan", "trace_convert", "serve_sim", "report", "exporter_metrics", "explain_oom", "flags", "run",
    "Result", "Fields", "Error", "InputError", "InternalError", "format_bytes",
]


def __getattr__(name: str):
    # gpumem.torch on first use: torch takes a second or more to import.
    if name == "torch":
        import importlib  # noqa: PLC0415
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'gpumem' has no attribute {name!r}")


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, bytes, os.PathLike))


def _model_path(model: Any, flags: dict, training: bool, function: str):
    """A path for MODEL: as given, or a torch.nn.Module exported to a temporary ONNX."""
    example_inputs = flags.pop("example_inputs", None)
    if _is_path(model):
        if example_inputs is not None:
            raise TypeError(f"gpumem.{function}(): example_inputs is for a torch.nn.Module, not a file")
        return os.fspath(model), None
    from . import torch as gpumem_torch  # noqa: PLC0415 (torch is heavy: imported only when a module is given)

    if example_inputs is None:
        raise TypeError(f"gpumem.{function}(): a torch.nn.Module needs example_inputs=(tensor, ...)")
    export = gpumem_torch.export_onnx(model, example_inputs, training=training)
    if export.batch is not None and "dim" not in flags:
        flags.setdefault("batch", export.batch)  # the export's batch axis is dynamic: bind the example's
    return export.path, export


def _json_command(command: str, positional: list, flags: dict, function: str, accept=(0,), keep=None,
                  input: str | None = None) -> Result:
    args = _cli.build_args(command, positional, flags, function)
    code, out, err = _cli.run(args + ["--json"], input, accept=accept)
    return _result.parse(out, command, args, err, code, keep, input)


def inspect(model, **flags) -> Result:
    """`gpumem inspect`: a model's weights, activations, lifetimes and inference peak (docs/inspect.md).

    MODEL is an ONNX file or a torch.nn.Module with example_inputs=(...).
    """
    path, keep = _model_path(model, flags, training=False, function="inspect")
    return _json_command("inspect", [path], flags, "inspect", keep=keep)


def plan(input, **flags) -> Result:
    """`gpumem plan`: offsets in one arena for a model's or a MiniMalloc CSV's buffers (docs/plan.md).

    With gpu=SIZE a plan that does not fit is still returned, with fits False.
    """
    path, keep = _model_path(input, flags, training=False, function="plan")
    return _json_command("plan", [path], flags, "plan", accept=(0, _cli.EXIT_DOES_NOT_FIT), keep=keep)


def train(model, **flags) -> Result:
    """`gpumem train`: one training step op by op, its peak and where (docs/train.md).

    MODEL is an ONNX file exported in training mode; for a live module use
    gpumem.torch.estimate(). With gpu=SIZE a step that does not fit is a
    result whose verdict says so, not an error.
    """
    path, keep = _model_path(model, flags, training=True, function="train")
    return _json_command("train", [path], flags, "train", accept=(0, _cli.EXIT_DOES_NOT_FIT), keep=keep)


def fit(model, **flags) -> Result:
    """`gpumem fit`: the largest batch and the changes that fit gpu=SIZE (docs/fit.md).

    A model that cannot fit is a result with fits False and why_not, not an error.
    """
    path, keep = _model_path(model, flags, training=True, function="fit")
    return _json_command("fit", [path], flags, "fit", accept=(0, _cli.EXIT_DOES_NOT_FIT), keep=keep)


def finetune(model, **flags) -> Result:
    """`gpumem finetune`: a language model's fine-tuning step (full, LoRA, QLoRA) and what fits (docs/finetune.md).

    MODEL is a config.json, a model folder or a GGUF file. A step that does
    not fit gpu=SIZE is a result with fits False, not an error.
    """
    return _json_command("finetune", [os.fspath(model)], flags, "finetune", accept=(0, _cli.EXIT_DOES_NOT_FIT))


def llm(model, **flags) -> Result:
    """`gpumem llm`: serving a language model: weights, KV cache, compute buffer, what fits (docs/llm.md).

    A model that does not fit gpu=SIZE is a result with fits False, not an error.
    """
    return _json_command("llm", [os.fspath(model)], flags, "llm", accept=(0, _cli.EXIT_DOES_NOT_FIT))


def weights(path, **flags) -> Result:
    """`gpumem weights`: the tensors of a GGUF, safetensors, PyTorch or ONNX file (docs/weights.md)."""
    return _json_command("weights", [os.fspath(path)], flags, "weights")


def quantize(input, output, **flags) -> Result:
    """`gpumem quantize IN OUT`: writes a GGUF quantized as llama-quantize does (docs/quantize.md)."""
    return _json_command("quantize", [os.fspath(input), os.fspath(output)], flags, "quantize")


def replay(trace, **flags) -> Result:
    """`gpumem replay`: a recorded trace under each allocator policy, against the optimal arena (docs/trace.md)."""
    return _json_command("replay", [os.fspath(trace)], flags, "replay", accept=(0, _cli.EXIT_DOES_NOT_FIT))


def trace_stats(trace, **flags) -> Result:
    """`gpumem trace stats`: a trace's peak, live set, iterations and leaks (docs/trace.md)."""
    return _json_command("trace stats", [os.fspath(trace)], flags, "trace_stats")


def trace_plan(trace, output, **flags) -> str:
    """`gpumem trace plan`: the planned-mode arena for one iteration, written to OUTPUT (JSON); returns OUTPUT."""
    flags["output"] = output
    _cli.run(_cli.build_args("trace plan", [os.fspath(trace)], flags, "trace_plan"))
    return os.fspath(output)


def trace_convert(trace, output, **flags) -> str:
    """`gpumem trace convert`: writes TRACE as to=pytorch|perfetto|csv|jsonl at OUTPUT; returns OUTPUT."""
    flags["output"] = output
    _cli.run(_cli.build_args("trace convert", [os.fspath(trace)], flags, "trace_convert"))
    return os.fspath(output)


def serve_sim(model=None, **flags) -> Result | str:
    """`gpumem serve-sim MODEL`: serving policies on a request trace (docs/serve.md).

    With generate=... (and no model): the generated request trace (CSV
    text), or its path when output= is given.
    """
    positional = [] if model is None else [os.fspath(model)]
    if flags.get("generate"):
        out = _cli.run(_cli.build_args("serve-sim", positional, flags, "serve_sim"))[1]
        return os.fspath(flags["output"]) if flags.get("output") else out.decode()
    return _json_command("serve-sim", positional, flags, "serve_sim")


def report(input, output, **flags) -> str:
    """`gpumem report`: a model's or a trace's HTML report written to OUTPUT; returns OUTPUT."""
    flags["output"] = output
    path, _ = _model_path(input, flags, training=False, function="report")
    _cli.run(_cli.build_args("report", [path], flags, "report"))
    return os.fspath(output)


def exporter_metrics(**flags) -> str:
    """`gpumem exporter --once`: one collection of the Prometheus metrics, as text.

    The exporter as a server is a process of its own: `gpumem exporter`.
    """
    flags["once"] = True
    return _cli.run(_cli.build_args("exporter", [], flags, "exporter_metrics"))[1].decode()


def explain_oom(error) -> Result:
    """What a PyTorch "CUDA out of memory" error means and what to try (docs/explain-oom.md).

    ERROR is the exception (torch.cuda.OutOfMemoryError, RuntimeError) or its text.
    """
    text = error if isinstance(error, str) else str(error)
    if not text.strip():
        raise InputError("explain_oom: the message is empty", _cli.EXIT_BAD_INPUT)
    return _json_command("explain-oom", [], {}, "explain_oom", input=text)


# Each function's command, and the flags its own arguments already give.
_COMMANDS = {
    "inspect": ("inspect", ()), "plan": ("plan", ()), "train": ("train", ()), "fit": ("fit", ()),
    "finetune": ("finetune", ()), "llm": ("llm", ()), "weights": ("weights", ()), "quantize": ("quantize", ()),
    "replay": ("replay", ()), "trace_stats": ("trace stats", ()), "trace_plan": ("trace plan", ("output",)),
    "trace_convert": ("trace convert", ("output",)), "serve_sim": ("serve-sim", ()),
    "report": ("report", ("output",)), "exporter_metrics": ("exporter", ("once",)),
}


def _document() -> None:
    for name, (command, given) in _COMMANDS.items():
        function = globals()[name]
        function.__doc__ = (function.__doc__ or "") + _cli.keyword_doc(command, given)


def flags(command: str) -> dict:
    """{keyword: (value, meaning)} for one command ("train", "trace stats"): what its function accepts."""
    table = _cli.flag_table()
    if command not in table:
        raise ValueError(f"no command {command!r}; commands: {', '.join(sorted(table))}")
    return {k: (f.value, f.meaning) for k, f in table[command].items() if not f.positional and k != "json"}


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    """Runs any gpumem command line in this process: (exit code, stdout, stderr), never raising."""
    code, out, err = _cli._gpumem.run([os.fspath(a) for a in args], input)
    return code, out.decode(errors="replace"), err


_document()
