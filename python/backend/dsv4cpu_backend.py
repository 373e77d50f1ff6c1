"""The build backend of ``pip install .`` (pyproject.toml): scikit-build-core, told which torch to
build the extension against, and the provider of the package's ``torch==`` requirement.

The extension must be compiled against the torch of the environment the package is installed
into, which pip's isolated build environment does not see. pip runs this backend with that
environment's interpreter (``sys.executable``; ``DSV4CPU_PYTHON`` names another one, for front
ends that build in a separate environment), so the backend asks it with the isolation undone:
without the PYTHONPATH and PYTHONNOUSERSITE of the build environment, which CMake and its
children do not inherit either. CMake then takes torch from that interpreter (cmake/torch-cpu).
"""
import functools
import os
import subprocess
import sys

from scikit_build_core import build as _build
from scikit_build_core.build import *  # noqa: F401,F403  (the PEP 517 hooks not wrapped here)

_ISOLATION = ("PYTHONPATH", "PYTHONNOUSERSITE")
_QUERY = "import torch; print(torch.__version__, int(torch._C._GLIBCXX_USE_CXX11_ABI))"


@functools.lru_cache(maxsize=None)
def target_torch():
    """(interpreter, torch version without its local label, _GLIBCXX_USE_CXX11_ABI)."""
    python = os.environ.get("DSV4CPU_PYTHON") or sys.executable
    outside = {k: v for k, v in os.environ.items() if k not in _ISOLATION}
    done = subprocess.run([python, "-c", _QUERY], capture_output=True, text=True, check=False,
                          env=outside)
    if done.returncode != 0:
        raise RuntimeError(
            f"dsv4cpu builds against the torch of the environment it is installed into, and "
            f"{python} cannot import torch: install torch there first (or set DSV4CPU_PYTHON to "
            f"the interpreter whose torch to use)\n{done.stderr.strip()}")
    version, abi = done.stdout.split()[-2:]
    return python, version.split("+")[0], abi


def _settings(config_settings):
    """The CMake definitions of the target torch; CMake runs outside the build isolation."""
    python, _, abi = target_torch()
    for name in _ISOLATION:
        os.environ.pop(name, None)
    settings = dict(config_settings or {})
    settings["cmake.define.DSV4CPU_PYTHON"] = python
    settings["cmake.define.DSV4CPU_CXX11_ABI"] = abi
    return settings


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _build.build_wheel(wheel_directory, _settings(config_settings), metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _build.build_editable(wheel_directory, _settings(config_settings), metadata_directory)


class TorchRequirement:
    """The [[tool.dynamic-metadata]] provider of ``dependencies``: a wheel requires the torch its
    extension was built against, exactly (the C++ ABI of torch does not cross releases); an
    sdist, any torch."""

    def __init__(self):
        self.state = "wheel"

    def build_state(self, state):
        self.state = state

    def dynamic_wheel(self, settings):  # noqa: ARG002
        return {"dependencies": True}

    def dynamic_metadata(self, settings, project):  # noqa: ARG002
        if self.state == "sdist":
            return {"dependencies": ["torch"]}
        return {"dependencies": [f"torch=={target_torch()[1]}"]}
