#!/usr/bin/env python3
"""No library file names a CLI flag (issue 46); the CLI maps them.

Every flag the library's messages and reports name is a macro of
include/gpumem/common/flag_names.h, spelled there once. This checks that no
string literal of a library file (src/, but for src/cli) spells a flag of
the binary or one of its old names, and that every name in flag_names.h is
a flag of the binary (`gpumem flag-table`), so none can be stale.

    check_flag_names.py --gpumem build/gpumem --source .
"""
import argparse
import os
import re
import subprocess
import sys

# Names the flags had before, kept as hidden aliases: the library must not
# send users to them either.
OLD_NAMES = {"--budget", "--capacity", "--out", "--seq", "--seq-len", "--micro-batch", "--checkpointing",
             "--max-seq", "--max-model-len", "--model", "--ctx", "--ctx-size"}
FLAG = re.compile(r"(?<![A-Za-z0-9-])(--[a-z][a-z0-9-]*)(?![a-z0-9-])")


def literals(text):
    """The ordinary string literals of a C++ file, with their line numbers, skipping comments,
    character literals and raw strings."""
    pos, n = 0, len(text)
    while pos < n:
        if text.startswith("//", pos):
            pos = text.find("\n", pos) if text.find("\n", pos) >= 0 else n
        elif text.startswith("/*", pos):
            pos = text.find("*/", pos) + 2
        elif text.startswith('R"', pos) and (pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] == "_")):
            open_paren = text.find("(", pos)
            delimiter = text[pos + 2:open_paren]
            pos = text.find(")" + delimiter + '"', open_paren) + len(delimiter) + 2
        elif text[pos] == "'":
            m = re.match(r"'(?:[^'\\]|\\.)*'", text[pos:])
            pos += len(m.group(0)) if m else 1
        elif text[pos] == '"':
            m = re.match(r'"((?:[^"\\\n]|\\.)*)"', text[pos:])
            if not m:
                pos += 1
                continue
            yield text.count("\n", 0, pos) + 1, m.group(1)
            pos += len(m.group(0))
        else:
            pos += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpumem", required=True)
    parser.add_argument("--source", required=True)
    a = parser.parse_args()
    table = subprocess.run([a.gpumem, "flag-table"], capture_output=True, text=True, check=True).stdout
    flags = set(re.findall(r"--[a-z][a-z0-9-]+", table))
    named = flags | OLD_NAMES
    problems = []
    header = os.path.join(a.source, "include", "gpumem", "common", "flag_names.h")
    defined = re.findall(r'#define (GPUMEM_FLAG_\w+) "(--[a-z0-9-]+)"', open(header).read())
    if not defined:
        problems.append(f"{header}: no flag defined")
    for macro, flag in defined:
        if flag not in flags:
            problems.append(f"{header}: {macro} is {flag}, which is no flag of the binary")
    checked = 0
    for folder, _, files in os.walk(os.path.join(a.source, "src")):
        if os.path.relpath(folder, a.source).split(os.sep)[:2] == ["src", "cli"]:
            continue
        for name in files:
            if not name.endswith((".cpp", ".h")):
                continue
            path = os.path.join(folder, name)
            checked += 1
            for line, body in literals(open(path).read()):
                for m in FLAG.finditer(body):
                    if m.group(1) in named:
                        problems.append(f"{os.path.relpath(path, a.source)}:{line}: spells {m.group(1)}; "
                                        f"write its GPUMEM_FLAG_ macro (gpumem/common/flag_names.h)")
    print(f"flag names: {checked} library files, {len(defined)} flags named through flag_names.h, "
          f"{len(problems)} problems")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
