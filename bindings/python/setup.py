"""Builds gpumem's C++ module with CMake and packs it with the Python sources.

The CMake build folder is GPUMEM_BUILD_DIR when set, else the checkout's
build/ when it is configured (`make` made it), else bindings/python/build/cmake.
Only the module's targets are built: the library, the commands and _gpumem
(and libgpumem_torch.so where the CUDA toolkit is installed).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def cmake_build_dir() -> Path:
    if os.environ.get("GPUMEM_BUILD_DIR"):
        return Path(os.environ["GPUMEM_BUILD_DIR"]).resolve()
    if (ROOT / "build" / "CMakeCache.txt").exists():
        return ROOT / "build"
    return HERE / "build" / "cmake"


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        build = cmake_build_dir()
        if not (build / "CMakeCache.txt").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                                   "-DGPUMEM_BUILD_TESTS=OFF", "-DGPUMEM_BUILD_BENCH=OFF",
                                   f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2),
                               "--target", "gpumem_python"])
        # The plugin is optional (CUDA toolkit only): built when the target exists.
        subprocess.call(["cmake", "--build", str(build), "--target", "gpumem_python_torch_plugin"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        built = build / "python" / "gpumem"
        target = Path(self.build_lib) / "gpumem"
        copied = 0
        for item in built.iterdir():
            if item.suffix == ".so" or ".so." in item.name:
                shutil.copy2(item, target / item.name)
                copied += 1
        if not any(p.name.startswith("_gpumem") for p in target.iterdir()):
            raise SystemExit(f"gpumem: {built}: no _gpumem module was built")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # the wheel holds a compiled module: tag it for this platform
        return True


setup(cmdclass={"build_py": BuildWithCMake}, distclass=BinaryDistribution)
