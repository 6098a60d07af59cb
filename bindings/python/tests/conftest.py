"""Fixtures for the Python module's tests, run by ctest (tests/CMakeLists.txt
sets GPUMEM_CLI, GPUMEM_SOURCE_DIR and PYTHONPATH) or by hand:

    GPUMEM_CLI=build/gpumem PYTHONPATH=build/python /usr/bin/python3 -m pytest bindings/python/tests
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("GPUMEM_SOURCE_DIR", Path(__file__).resolve().parents[3]))
CLI = os.environ.get("GPUMEM_CLI", str(ROOT / "build" / "gpumem"))

# Fields and text that measure the run rather than answer the question.
TIMING = re.compile(r"\d+(\.\d+)? ?(ms|s|us|µs)\b")


def is_timing(key: str) -> bool:
    return key == "seconds" or key.endswith("_seconds")


def without_timings(text: str) -> str:
    return TIMING.sub("<time>", text)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def run_cli(*args, input=None, check_codes=(0,)):
    """The gpumem binary in a process of its own: (exit code, stdout, stderr)."""
    done = subprocess.run([CLI, *map(str, args)], input=input, capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert done.returncode in check_codes, f"gpumem {' '.join(map(str, args))}: exit {done.returncode}: {done.stderr}"
    return done.returncode, done.stdout, done.stderr


def cli_json(*args, input=None, check_codes=(0,)):
    code, out, _ = run_cli(*args, "--json", input=input, check_codes=check_codes)
    return json.loads(out)


def differences(a, b, path="$"):
    """Every path where two JSON documents differ, timing fields aside."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            if is_timing(key):
                continue
            if key not in a or key not in b:
                found.append(f"{path}.{key}: only in {'python' if key in a else 'cli'}")
            else:
                found += differences(a[key], b[key], f"{path}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{path}: {a!r} vs {b!r}"]
