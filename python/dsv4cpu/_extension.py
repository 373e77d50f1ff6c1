"""Loads the PyTorch extension beside this file and describes its operators."""
import ctypes
import json
import os

import torch

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dsv4cpu_torch.so")
torch.ops.load_library(LIBRARY)

#: The torch.ops namespace of the extension's ops: ``torch.ops.dsv4cpu``.
ops = torch.ops.dsv4cpu
#: The package's tooling (registry JSON, runs, Highway target pinning, fixture I/O):
#: ``torch.ops._dsv4cpu``, kept apart from the ops because they are not tensor ops.
tools = torch.ops._dsv4cpu
#: The extension's plain C functions (size helpers, version), through ctypes.
native = ctypes.CDLL(LIBRARY)
native.dsv4cpu_version.restype = ctypes.c_char_p
#: The library's version, "MAJOR.MINOR.PATCH" (``dsv4cpu::version()``).
VERSION = native.dsv4cpu_version().decode()

#: Per bound operator, the tensor arguments that hold fp8 (e4m3fn) codes.
FP8_ARGUMENTS = {name: tuple(info["fp8"]) for name, info in json.loads(tools._bindings()).items()}

#: The torch dtype of fp8 codes: ``torch.float8_e4m3fn`` where torch has it, else ``torch.uint8``.
FP8_DTYPE = getattr(torch, "float8_e4m3fn", torch.uint8)


def schema(function):
    """The ``torch._C.FunctionSchema`` of a torch operator (packet or overload), or None."""
    overload = getattr(function, "default", function)
    return getattr(overload, "_schema", None)


def is_written(argument):
    """True for a schema argument the operator writes (``Tensor(a!)``)."""
    alias = argument.alias_info
    return alias is not None and alias.is_write
