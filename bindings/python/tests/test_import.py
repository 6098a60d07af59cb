"""`import gpumem` is light: the C++ module only, no torch until gpumem.torch is used."""

import subprocess
import sys

import pytest


def python(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_does_not_import_torch():
    assert python("import sys, gpumem; print('torch' in sys.modules)") == "False"


def test_gpumem_torch_loads_on_first_use():
    pytest.importorskip("torch", reason="Debian's python3-torch is not installed")
    assert python("import sys, gpumem\ngpumem.torch.estimate\nprint('torch' in sys.modules)") == "True"


def test_the_public_functions_are_documented():
    import gpumem
    for name in gpumem.__all__:
        item = getattr(gpumem, name)
        if callable(item) and not isinstance(item, type):
            assert item.__doc__ and len(item.__doc__) > 30, name
