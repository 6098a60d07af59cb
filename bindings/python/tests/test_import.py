"""`import gpumem` is light: the C++ module only, no torch until gpumem.torch is used."""

import subprocess
import sys


def python(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_does_not_import_torch():
    assert python("import sys, gpumem; print('torch' in sys.modules)") == "False"


def test_gpumem_torch_loads_on_first_use():
    out = python("import sys, gpumem\n"
                 "try:\n    gpumem.torch.estimate\nexcept ImportError as e:\n    print('no torch')\n"
                 "else:\n    print('torch' in sys.modules)")
    assert out in ("True", "no torch")


def test_the_public_functions_are_documented():
    import gpumem
    for name in gpumem.__all__:
        item = getattr(gpumem, name)
        if callable(item) and not isinstance(item, type):
            assert item.__doc__ and len(item.__doc__) > 30, name
