"""What a gpumem function returns: the command's JSON document as an object.

A Result is a dict (equal to the command's `--json` output, field for field)
whose fields also read as attributes, with a short repr, the command's text
report as str(), and its HTML report inline in Jupyter.
"""

from __future__ import annotations

import html as _html
import json
import os
import shlex
import tempfile
from typing import Any, Sequence

from . import _cli


class Fields(dict):
    """A JSON object whose fields also read as attributes: r.breakdown.weights_bytes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no field {name!r} (fields: {', '.join(self)})") from None

    def __dir__(self):
        return list(super().__dir__()) + [k for k in self if k.isidentifier()]


def format_bytes(n: int) -> str:
    """Binary units with two decimals, as the command line prints them."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.2f} {unit}"
    raise AssertionError("unreachable")


# The fields a repr shows first, per command: the answer a user looks for.
_HEADLINES = {
    "inspect": ("inference_bytes", "nodes"),
    "plan": ("arena_bytes", "optimal", "fits"),
    "train": ("peak_bytes", "peak_phase", "peak_op"),
    "fit": ("fits", "batch", "predicted_peak_bytes", "budget_bytes"),
    "llm": ("fits", "total_bytes", "max_context", "num_gpu_blocks"),
    "finetune": ("fits", "peak_bytes", "trainable_parameters"),
    "weights": ("format", "total_bytes", "elements"),
    "quantize": ("type", "output_bytes"),
    "replay": ("traced_peak_bytes", "optimal_arena_bytes", "current_policy"),
    "trace stats": ("format", "peak_allocated_bytes", "allocations"),
    "trace plan": ("arena_bytes",),
    "serve-sim": ("requests", "kv_budget_bytes"),
    "explain-oom": ("diagnosis", "requested_bytes", "free_bytes"),
}


def _show(name: str, value: Any) -> str:
    if name.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
        return f"{name}={value} ({format_bytes(value)})"
    return f"{name}={value!r}"


class Result(Fields):
    """One command's answer: its JSON document, plus the text and HTML reports on demand."""

    def __init__(self, document: dict, command: str, args: Sequence[str], stderr: str = "",
                 exit_code: int = 0, keep: Any = None, input: str | None = None):
        super().__init__(document)
        # Attributes the JSON cannot hold live on the instance, under names
        # that no JSON field uses.
        object.__setattr__(self, "_command", command)
        object.__setattr__(self, "_args", list(args))
        object.__setattr__(self, "_input", input)
        object.__setattr__(self, "_keep", keep)  # temporary files the command reads again
        object.__setattr__(self, "_text", None)
        object.__setattr__(self, "_html", None)
        object.__setattr__(self, "messages", [line for line in stderr.splitlines() if line.strip()])
        object.__setattr__(self, "exit_code", exit_code)

    @property
    def command_line(self) -> str:
        """The gpumem command that gives this result (without --json), quoted for a shell."""
        return shlex.join(["gpumem"] + self._args)

    def to_dict(self) -> dict:
        """The command's JSON document as plain dicts and lists."""
        return json.loads(json.dumps(self))

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self, indent=indent)

    def text(self) -> str:
        """The command's text report, as the command line prints it."""
        if self._text is None:
            _, out, _ = _cli.run(self._args, self._input, accept=(self.exit_code,))
            object.__setattr__(self, "_text", out.decode())
        return self._text

    def html(self, path: str | os.PathLike | None = None) -> str | None:
        """The command's HTML report (a self-contained page); written to PATH when given.

        None for commands that write no HTML report.
        """
        if not _cli.flag_table().get(self._command, {}).get("html"):
            return None
        if self._html is None:
            with tempfile.TemporaryDirectory(prefix="gpumem-") as tmp:
                out = os.path.join(tmp, "report.html")
                _cli.run(self._args + ["--html", out], self._input, accept=(self.exit_code,))
                with open(out, encoding="utf-8") as f:
                    object.__setattr__(self, "_html", f.read())
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(self._html)
        return self._html

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        shown = [_show(k, self[k]) for k in _HEADLINES.get(self._command, ()) if k in self]
        return f"<gpumem {self._command}: {', '.join(shown) or ', '.join(list(self)[:4])}>"

    def _repr_html_(self) -> str:
        page = self.html()
        if page is None:
            return f"<pre>{_html.escape(self.text())}</pre>"
        # An iframe keeps the report's styles and scripts away from the notebook's.
        return (f'<iframe srcdoc="{_html.escape(page, quote=True)}" '
                f'style="width:100%;height:640px;border:0" sandbox="allow-scripts"></iframe>')

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a gpumem result is read-only")

    def __reduce__(self):
        return (dict, (dict(self),))


def parse(stdout: bytes, command: str, args: Sequence[str], stderr: str, exit_code: int,
          keep: Any = None, input: str | None = None) -> Result:
    document = json.loads(stdout, object_hook=Fields)
    return Result(document, command, args, stderr, exit_code, keep, input)
