"""Python wrappers of the ``torch.ops.dsv4cpu`` operators.

Each wrapper takes the operator's arguments by the specification's names, in its order, as torch
tensors (views are passed without copies: strides and padded pages are honoured) and Python
scalars; outputs the caller does not pass are allocated; errors are raised as the classes of
:mod:`dsv4cpu.errors`. The wrappers are built from the operators' torch schemas; this module adds
only what a schema cannot say: a docstring and how to allocate each output.

Keyword-only options of every kernel op: ``impl`` (``"best"``, ``"reference"``,
``"optimized"``), ``variant`` (a registry name such as ``"ref"`` or ``"hwy"``; see
:func:`dsv4cpu.registered_ops`), ``check_finite`` (bad-input.md §1.6) and ``num_threads``
(0: OpenMP's default; results never depend on it).
"""
import inspect

import torch

from . import errors
from ._extension import FP8_DTYPE, is_written, ops, schema


def _index(t, i):
    return int(t[i]) if t.numel() else 0


def _rows(q):  # fp8_paged_mqa_logits: q_fp8 [B, next_n, H, 128] or [B·next_n, H, 128]
    return q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]


def _c128a_width(a):  # c128a_decode_metadata: Wmax, or the fixture's active width
    return a.get("width") or ops.c128a_decode_max_width(a["max_model_len"])


# Per op: its documentation and, for each output the wrapper allocates when not given, the dtype
# and a rule giving the shape from the bound arguments (None: not requested). The conformance
# runner adds the fixture's shape-only scalars (num_tokens_padded, width) to the arguments.
_I32, _I64, _F32, _BF16 = torch.int32, torch.int64, torch.float32, torch.bfloat16
SPECS = {
    "save_partial_states": (
        "compressor.md §3: writes each token's kv row and score(+ape) row into the fp32 state "
        "cache ``state_cache`` [nb, bs, 2·SW] (updated in place; a page stride larger than "
        "bs·2·SW is honoured).", {}),
    "map_local_to_global_slots": (
        "compressor.md §4.1: local indices to slots through the block table; negative locals "
        "give -1.", {"slots": (_I64, lambda a: a["local_indices"].shape)}),
    "compressor_window_slots": (
        "compressor.md §4.2: the W = (1 + overlap)·compress_ratio state slots each token pools, "
        "oldest first.",
        {"gather_slots": (_I64, lambda a: (a["positions"].shape[0],
                                           (2 if a["overlap"] else 1) * a["compress_ratio"]))}),
    "compress_norm_rope_store": (
        "compressor.md §6 (head 512): pool, RMSNorm, RoPE, fp8 with UE8M0 scales, into the "
        "fp8_ds_mla pages of ``kv_cache`` U8 [pages, page_bytes] (updated in place). "
        "``scale_clamp`` is ``'cpu'`` or ``'gpu'``.", {}),
    "compress_norm_rope_store_indexer": (
        "compressor.md §7 (head 128): the same into the indexer K cache ``kv_cache`` (updated in "
        "place); always clamps the amax, ``scale_clamp`` is ignored.", {}),
    "make_cos_sin_cache": (
        "compressor.md §8.2: the RoPE table F32 [rows, 64], cos in columns 0..31 and sin in "
        "32..63; YaRN iff ``yarn_factor`` is given (the other YaRN parameters default to "
        "DeepSeek-V4's 65536, 32, 1, 1.0).",
        {"cos_sin_cache": (_F32, lambda a: (a["rows"], 64))}),
    "fused_indexer_q_rope_quant": (
        "indexer.md §2: RoPE on the last 64 dims, per-head power-of-two fp8 quantisation, the "
        "scale folded into the head weights. ``softmax_scale`` and ``head_scale`` default to "
        "RN(128^-0.5) and 0.125; fp32 scalars are the Python float rounded once.",
        {"q_fp8": (FP8_DTYPE, lambda a: a["q"].shape),
         "weights_out": (_F32, lambda a: a["weights"].shape)}),
    "fp8_paged_mqa_logits": (
        "indexer.md §4 and §8 (MTP): ``logits`` F32 [B·next_n, max_seq_len], positions past each "
        "row's length -inf. ``q_fp8`` holds e4m3fn codes (uint8 or float8_e4m3fn); ``kv_cache`` "
        "U8 [pages, page_bytes] may have a larger page stride.",
        {"logits": (_F32, lambda a: (_rows(a["q_fp8"]), a["max_seq_len"]))}),
    "topk_transform_512": (
        "indexer.md §5: per row the 512 selected local indices (-1 padded) and, when "
        "``page_table`` is given, their slots ``page_indices``. ``mode`` is ``'canonical'`` "
        "(default) or ``'vllm'``; ``page_size`` is required with ``page_table``.",
        {"raw_indices": (_I32, lambda a: (a["scores"].shape[0], 512)),
         "page_indices": (_I32, lambda a: None if a["page_table"] is None
                          else (a["scores"].shape[0], 512))}),
    "topk_transform_1024": (
        "indexer.md §5.7: the canonical selection with K = 1024.",
        {"raw_indices": (_I32, lambda a: (a["scores"].shape[0], 1024)),
         "page_indices": (_I32, lambda a: None if a["page_table"] is None
                          else (a["scores"].shape[0], 1024))}),
    "short_context_topk": (
        "indexer.md §6: identity rows [0 .. L_t - 1, -1 ...] with L_t = (positions[t] + 1) / 4.",
        {"topk_indices": (_I32, lambda a: (a["positions"].shape[0], 512))}),
    "indexer_topk": (
        "indexer.md §7: one indexer step of a mixed batch, a 512-entry selection per token. "
        "``mode`` is ``'canonical'`` (default) or ``'vllm'``.",
        {"topk_indices": (_I32, lambda a: (a["q_fp8"].shape[0], 512))}),
    "token_positions": (
        "metadata.md §2: each token's position and request.",
        {"positions": (_I64, lambda a: (_index(a["query_start_loc"], -1),)),
         "token_to_req": (_I32, lambda a: (_index(a["query_start_loc"], -1),))}),
    "slot_mapping": (
        "metadata.md §3: each token's KV slot. Pass ``slot_mapping`` with num_tokens_padded "
        "entries to pad (entries past T are -1).",
        {"slot_mapping": (_I64, lambda a: (a.get("num_tokens_padded", a["positions"].shape[0]),))}),
    "split_decodes_and_prefills": (
        "metadata.md §4: the decode/prefill split of the step's requests.", {}),
    "compressed_slot_mapping": (
        "metadata.md §5: each token's slot in the compressed cache (-1 for tokens that emit "
        "none); ``token_slot_mapping`` enables the replayed-token rule.",
        {"slot_mapping": (_I64, lambda a: (a.get("num_tokens_padded",
                                                 _index(a["query_start_loc"], -1)),))}),
    "swa_window_indices": (
        "metadata.md §6: each token's sliding-window slots, and their count when ``lens`` "
        "(I32 [T]) is given.",
        {"indices": (_I64, lambda a: (a["positions"].shape[0], a["window"])),
         "lens": (_I32, lambda a: None)}),
    "c128a_topk_indices": (
        "metadata.md §7.1 (CPU form): the C128A compressed slots of each token.",
        {"indices": (_I64, lambda a: (a["positions"].shape[0],
                                      ops.c128a_topk_width(a["max_model_len"])))}),
    "c128a_topk_indices_compact": (
        "metadata.md §7.1, compact form (docs/metadata.md): the same rows cut to the step's "
        "longest compressed length.",
        {"indices": (_I64, lambda a: (a["positions"].shape[0],
                                      a.get("width") or ops.c128a_compact_width(a["positions"])))}),
    "c128a_decode_metadata": (
        "metadata.md §7.2 (GPU form): decode rows as global slots, prefill rows as local "
        "indices, at the maximal width (pass narrower outputs for an active width).",
        {"decode_global": (_I64, lambda a: (a["num_decode_tokens"], _c128a_width(a))),
         "decode_lens": (_I32, lambda a: (a["num_decode_tokens"],)),
         "prefill_local": (_I32, lambda a: (a["positions"].shape[0] - a["num_decode_tokens"],
                                            _c128a_width(a)))}),
    "c4a_global_topk_indices": (
        "metadata.md §8: the C4A top-k selection mapped to global slots, and the count per token.",
        {"indices": (_I64, lambda a: a["topk_indices"].shape),
         "lens": (_I32, lambda a: (a["topk_indices"].shape[0],))}),
    "indexer_metadata": (
        "metadata.md §9: the indexer's metadata of a step: ``slot_mapping`` and, by the names of "
        "docs/fixture-ops.md, the split, ``compressed_seq_lens``, the decode fields and the "
        "prefill chunk (None without prefills). ``next_n`` defaults to 1. Of the C++ result, "
        "max_seq_len is max(seq_lens) and requires_padding is decode_lens.min() != .max().",
        {"slot_mapping": (_I64, lambda a: (_index(a["query_start_loc"], -1),))}),
    "split_indexer_prefill_chunks": (
        "metadata.md §9.3: the base rule's chunks, rows (req_start, req_end, q_start, q_end).", {}),
    "build_tile_scheduler": ("metadata.md §10: the tile scheduler of a layer kind.", {}),
    "sparse_mla_attention": (
        "attention.md §2: sparse MLA attention of each query token over its window slots, then "
        "its compressed slots (-1 skipped), in fp8_ds_mla pages (U8 [pages, page_bytes], a larger "
        "page stride is honoured), with the optional ``attn_sink`` F32 [H]. ``out`` BF16 [T, H, "
        "512]; ``lse`` F32 [T, H] only when passed. ``scale`` defaults to RN(512^-0.5) (the "
        "Python float rounded once to fp32); ``nope_decode`` is ``'exact'`` (default) or "
        "``'vllm'``.",
        {"out": (_BF16, lambda a: (a["q"].shape[0], a["q"].shape[1], 512)),
         "lse": (_F32, lambda a: None)}),
    "fused_qnorm_rope_kv_insert": (
        "attention.md §3: q RMSNorm and RoPE into ``q_out`` BF16 [T, q_head_padded, 512] (heads "
        "past Hq are +0), and the SWA kv rows rotated, quantised and written into the fp8_ds_mla "
        "pages of ``swa_cache`` at ``slot_mapping`` (updated in place; -1 skips). "
        "``scale_clamp`` is ``'cpu'`` (default) or ``'gpu'``, ``fp8_subnormals`` ``'exact'`` "
        "(default) or ``'flush'``.",
        {"q_out": (_BF16, lambda a: (a["q"].shape[0], a["q_head_padded"], 512))}),
    "inverse_gptj_rope_o_proj": (
        "attention.md §4: ``o`` BF16 or F16 [T, H, D] (contiguous; the attention output) widened "
        "into ``out`` F32 [T, H, D] (contiguous, every element written), the last ``rope_dim`` "
        "dims of each head rotated back by the token's position: ``positions`` I32 or I64 [T] "
        "index ``cos_sin_cache`` F32 [R, rope_dim] (cos_i in column i, sin_i in column "
        "rope_dim/2 + i); ``rope_dim`` is even, 2 <= rope_dim <= D (64 in the model).",
        {"out": (_F32, lambda a: tuple(a["o"].shape))}),
    "c128a_topk_width": ("Wc = ceil(max_model_len / 128) (metadata.md §7.1).", {}),
    "c128a_compact_width": (
        "The compact C128A width: the step's longest (positions[t] + 1) / 128.", {}),
    "c128a_decode_max_width": (
        "Wmax = roundup(ceil(max_model_len / 128), 128) (metadata.md §7.2).", {}),
    "selected_variant": ("The variant the options would pick for ``op``.", {}),
}


def output_shape(op, arguments, name):
    """The shape of output ``name`` of ``op`` for the bound ``arguments`` (a dict by name), or
    None when the op does not request it for these arguments."""
    shape = SPECS[op][1][name][1](arguments)
    return None if shape is None else tuple(int(e) for e in shape)


def allocate(op, arguments, name):
    """The output ``name`` of ``op`` for the bound ``arguments``, or None (see output_shape)."""
    shape = output_shape(op, arguments, name)
    return None if shape is None else torch.empty(shape, dtype=SPECS[op][1][name][0])


def _parameters(sch, outputs):
    """The wrapper's signature: inputs and scalars in the schema's order (optional ones default
    to None), then keyword-only the outputs (allocated when None) and the options."""
    positional, keyword = [], []
    for a in sch.arguments:
        if a.name in outputs or a.kwarg_only:
            default = None if a.name in outputs else a.default_value
            keyword.append(inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY,
                                             default=default))
            continue
        if a.default_value is not None:
            default = a.default_value
        elif str(a.type).startswith("Optional["):
            default = None
        else:
            default = inspect.Parameter.empty
        positional.append(inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=default))
    return inspect.Signature(positional + keyword)


def _wrapper(op):
    operator = getattr(ops, op)
    sch = schema(operator)
    doc, outputs = SPECS[op]
    signature = _parameters(sch, outputs)
    written = [a.name for a in sch.arguments if is_written(a)]
    returns = [r.name for r in sch.returns]

    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for name in outputs:
            if arguments[name] is None:
                arguments[name] = allocate(op, arguments, name)
        result = errors.call(operator, **arguments)
        if not returns:
            values = [arguments[name] for name in written]
            return values[0] if len(values) == 1 else tuple(values) if values else None
        result = result if isinstance(result, tuple) else (result,)
        if len(returns) == 1 and not written:
            return result[0]
        return {**{name: arguments[name] for name in written}, **dict(zip(returns, result))}

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__signature__ = signature
    if returns and (len(returns) > 1 or written):
        gives = "a dict of " + ", ".join(written + returns)
    elif returns:
        gives = "its result"
    elif written:
        gives = ", ".join(written) + (" (a tuple)" if len(written) > 1 else "")
    else:
        gives = "None"
    wrapper.__doc__ = (f"{doc}\n\nThe wrapper of ``torch.ops.dsv4cpu.{op}``:\n    {sch}\n\n"
                       f"Returns {gives}. Outputs the wrapper allocates when not given (and "
                       f"the op requests them): {', '.join(outputs) or 'none'}.")
    return wrapper


WRAPPERS = {op: _wrapper(op) for op in SPECS}
