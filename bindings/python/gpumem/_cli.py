"""Runs gpumem's commands in this process and turns keyword arguments into flags.

The flags come from the binary's own table (`gpumem flag-table`, the one
docs/cli.md shows), so Python accepts exactly what the command line accepts,
under the same names: ``gpu="80GiB"`` is ``--gpu 80GiB``.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from typing import Any, Iterable, Mapping, Sequence

from . import _gpumem

# Exit codes (include/gpumem/common/error.h).
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_DOES_NOT_FIT = 3
EXIT_INVALID_PLAN = 4


class Error(Exception):
    """A gpumem command failed; the message is the command's one line."""

    def __init__(self, message: str, exit_code: int, stderr: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class InputError(Error, ValueError):
    """Bad input: a file, a flag or a value (the command line's exit code 2)."""


class InternalError(Error, RuntimeError):
    """A bug or an unexpected failure in gpumem (exit code 1)."""


class Flag:
    """One flag of one command, as the binary's flag table describes it."""

    def __init__(self, names: str, value: str, meaning: str):
        self.names = [n.strip() for n in names.split(",")]
        self.long = next((n for n in self.names if n.startswith("--")), self.names[-1])
        self.value = value  # "" for a switch, SIZE, INT:POSITIVE, TEXT:{a,b}, NAME=VALUE[,...]
        self.meaning = meaning

    @property
    def positional(self) -> bool:
        return not self.long.startswith("-")

    @property
    def switch(self) -> bool:
        return self.value == ""

    @property
    def keyword(self) -> str:
        return self.long.lstrip("-").replace("-", "_").lower()


def _split_row(line: str) -> list[str]:
    # Cells are separated by " | "; a literal pipe inside a cell is "\|".
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


@functools.lru_cache(maxsize=1)
def flag_table() -> dict[str, dict[str, Flag]]:
    """{"train": {"gpu": Flag, ...}, "trace stats": {...}}: every command's flags by keyword."""
    code, out, err = _gpumem.run(["flag-table"])
    if code != EXIT_OK:
        raise InternalError(f"gpumem flag-table failed: {err.strip()}", code, err)
    table: dict[str, dict[str, Flag]] = {}
    for line in out.decode().splitlines():
        if not line.startswith("| `gpumem "):
            continue
        command, names, value, meaning = _split_row(line)[:4]
        flag = Flag(names.strip("`"), value, meaning)
        table.setdefault(command.strip("`")[len("gpumem "):], {})[flag.keyword] = flag
    return table


def _size(value: Any) -> str:
    # An int is a byte count; a string keeps its unit ("80GiB").
    if isinstance(value, bool):
        raise TypeError("a size is an int (bytes) or a string with a unit, e.g. '80GiB'")
    if isinstance(value, int):
        return f"{value}B" if value else "0"
    return str(value)


def _text(value: Any) -> str:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _values(flag: Flag, value: Any) -> str:
    """The command-line word one keyword argument becomes (after its flag)."""
    if flag.long == "--gpu" and isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 20:
        # What the command line says of `--gpu 24`: a GPU of 24 bytes is a
        # unit forgotten, not a GPU.
        raise InputError(f"gpu={value}: a size needs a unit: did you mean '{value}GiB'? (an int is a byte count; "
                         "B for bytes, KiB, MiB, GiB, GB)", EXIT_BAD_INPUT)
    convert = _size if flag.value.startswith("SIZE") else _text
    if isinstance(value, Mapping):  # dim={"batch": 8, "seq": 128}
        return ",".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        if not flag.value.endswith("[,...]"):
            raise TypeError(f"{flag.long} takes one value ({flag.value}), not a list")
        return ",".join(convert(v) for v in value)
    return convert(value)


def build_args(command: str, positional: Sequence[Any], flags: Mapping[str, Any], function: str) -> list[str]:
    """`gpumem COMMAND POSITIONAL... --flag value ...` from Python arguments.

    Unknown keywords raise TypeError naming the nearest known one, as Python
    does for any function; None and False leave a flag out.
    """
    known = flag_table().get(command)
    if known is None:
        raise InternalError(f"gpumem has no command {command!r}", EXIT_INTERNAL)
    args = command.split() + [_text(p) for p in positional if p is not None]
    for keyword, value in flags.items():
        if keyword == "json":
            raise TypeError(f"gpumem.{function}(): results are the command's JSON already; see Result.text()")
        flag = known.get(keyword)
        if flag is None or flag.positional:
            options = [k for k, f in known.items() if not f.positional]
            near = difflib.get_close_matches(keyword, options, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise TypeError(f"gpumem.{function}() got an unexpected keyword argument {keyword!r}{hint}")
        if value is None or value is False:
            continue
        if flag.switch:
            if value is not True:
                raise TypeError(f"gpumem.{function}(): {keyword} is a switch: pass True or False")
            args.append(flag.long)
            continue
        if value is True:
            raise TypeError(f"gpumem.{function}(): {keyword} takes a value ({flag.value}), not True")
        args += [flag.long, _values(flag, value)]
    return args


def _message(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        for prefix in ("gpumem: error: ", "gpumem: internal error: "):
            if line.startswith(prefix):
                return line[len(prefix):]
    return lines[-1] if lines else "no message"


def run(args: Sequence[str], input: str | None = None, accept: Iterable[int] = (EXIT_OK,)) -> tuple[int, bytes, str]:
    """Runs `gpumem ARGS...`; raises InputError / InternalError / Error unless the exit code is accepted."""
    code, out, err = _gpumem.run([str(a) for a in args], input)
    if code in tuple(accept):
        return code, out, err
    if code == EXIT_BAD_INPUT:
        raise InputError(_message(err), code, err)
    if code == EXIT_INTERNAL:
        raise InternalError(_message(err), code, err)
    raise Error(_message(err), code, err)


def keyword_doc(command: str, leave_out: Iterable[str] = ()) -> str:
    """The keyword arguments of one command's function, for its docstring: the
    binary's own flag table, so the Python help cannot drift from the CLI."""
    skip = {"json", *leave_out}
    lines = ["", "Keyword arguments (the flags of `gpumem " + command + "`; sizes: an int of bytes or '24GiB'):"]
    for keyword, flag in flag_table().get(command, {}).items():
        if flag.positional or keyword in skip:
            continue
        kind = "True/False" if flag.switch else (flag.value + " or a list" if flag.value.endswith("[,...]")
                                                 else flag.value)
        lines.append(f"    {keyword} ({kind}): {flag.meaning}")
    return "\n".join(lines) + "\n"
