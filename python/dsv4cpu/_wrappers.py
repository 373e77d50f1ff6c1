"""Python wrappers of the ``torch.ops.dsv4cpu`` operators.

Each wrapper takes the operator's arguments by the specification's names, in its order, as torch
tensors (views are passed without copies: strides and padded pages are honoured) and Python
scalars; outputs the caller does not pass are allocated (on the device of the first tensor
argument: meta tensors give the output shapes without computing); errors are raised as the
classes of :mod:`dsv4cpu.errors`. An output whose extent, computed from a scalar or an index
array, is negative or larger than this machine's memory is never allocated: the wrapper raises
the error the op raises for that argument. The wrappers are built from the operators' torch
schemas; this module adds only what a schema cannot say: a docstring and how to allocate each
output.

Dtypes are torch's: float32, bfloat16, float16, int32, int64, uint8; fp8 codes are
float8_e4m3fn, or uint8 holding e4m3fn codes. "index" means int32 or int64. Tensors must be on
the CPU.
"""
import functools
import inspect
import math
import os

import torch

from . import errors
from ._extension import FP8_DTYPE, is_written, ops, schema, tools


def _index(t, i):
    return int(t[i]) if t.numel() else 0


def _rows(q):  # fp8_paged_mqa_logits: q_fp8 [B, next_n, H, 128] or [B·next_n, H, 128]
    return q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]


def _c128a_width(a):  # c128a_decode_metadata: Wmax, or the fixture's active width
    return a.get("width") or ops.c128a_decode_max_width(a["max_model_len"])


# Per op: its documentation (what it computes, then every argument with its shape and dtype and
# what the op writes) and, for each output the wrapper allocates when not given, the dtype and a
# rule giving the shape from the bound arguments (None: not requested). The conformance runner
# adds the fixture's shape-only scalars (num_tokens_padded, width) to the arguments.
_I32, _I64, _F32, _BF16 = torch.int32, torch.int64, torch.float32, torch.bfloat16
_STATE = """
    ``state_cache`` float32 [nb, sbs, 2·SW]: the compressor state pages (a page stride larger than
    sbs·2·SW is honoured); ``gather_slots`` index [N, W]: the state slots each token pools
    (-1: none); ``positions`` int64 [N]; ``kv_slot_mapping`` index [N]: the compressed slot each
    emitting token writes (-1: none); ``cos_sin_cache`` float32 [rows, 64]; ``rms_norm_eps``
    float; ``kv_cache_block_size``: entries per page of ``kv_cache``; ``compress_ratio``: 4 or
    128."""
_CHUNKS = """
    ``page_table`` index [B, MP] (optional) with ``page_size`` (required with it, a power of two):
    ``page_indices`` int32 [B, {k}] receives the selected indices' slots (requested iff
    ``page_table`` is given). ``raw_indices`` int32 [B, {k}] (written): per row the selected
    local indices, -1 padded."""
SPECS = {
    "save_partial_states": (
        """compressor.md §3: writes each token's kv row and score (+ ape) row into the compressor
    state pages.

    ``kv``, ``score`` float32 [N, SW]; ``ape`` float32 [compress_ratio, SW]; ``positions`` int64
    [N]; ``state_cache`` float32 [nb, bs, 2·SW] (updated in place: row ``slot_mapping[t]`` gets
    kv then score + ape; a page stride larger than bs·2·SW is honoured); ``slot_mapping`` index
    [N] (-1: skipped).""", {}),
    "map_local_to_global_slots": (
        """compressor.md §4.1: local indices to slots through the block table.

    ``local_indices`` int64 [N, K]; ``req_idx`` index [N]; ``block_table`` index [R, MB];
    ``block_size`` int: entries per page. ``slots`` int64 [N, K] (written): block_table[req,
    local // block_size]·block_size + local % block_size; negative locals give -1.""",
        {"slots": (_I64, lambda a: a["local_indices"].shape)}),
    "compressor_window_slots": (
        """compressor.md §4.2: the W = (1 + overlap)·compress_ratio state slots each token pools,
    oldest first.

    ``positions`` int64 [N]; ``token_to_req`` index [N]; ``block_table`` index [R, MB];
    ``block_size`` int; ``compress_ratio`` int; ``overlap`` bool. ``gather_slots`` int64 [N, W]
    (written; -1 where the window starts before position 0).""",
        {"gather_slots": (_I64, lambda a: (a["positions"].shape[0],
                                           (2 if a["overlap"] else 1) * a["compress_ratio"]))}),
    "compress_norm_rope_store": (
        """compressor.md §6 (head 512): pool, RMSNorm, RoPE, fp8 with UE8M0 scales, into the
    fp8_ds_mla pages of ``kv_cache``.
""" + _STATE + """ ``rms_norm_weight`` float32 [512]; ``kv_cache`` uint8 [pages, P·584]
    (fp8_ds_mla pages of P = ``kv_cache_block_size`` entries, see :func:`fp8_ds_mla_page_bytes`;
    updated in place: the entry of each emitting token). ``scale_clamp`` is ``'cpu'`` (default)
    or ``'gpu'``.""", {}),
    "compress_norm_rope_store_indexer": (
        """compressor.md §7 (head 128): the same into the indexer K cache.
""" + _STATE + """ ``rms_norm_weight`` float32 [128]; ``kv_cache`` uint8 [pages, P·132] (indexer
    K pages, see :func:`indexer_k_page_bytes`; updated in place). Always clamps the amax:
    ``scale_clamp`` is ignored.""", {}),
    "make_cos_sin_cache": (
        """compressor.md §8.2: the RoPE table, cos in columns 0..31 and sin in 32..63.

    ``rows`` int; ``theta`` float; YaRN iff ``yarn_factor`` (float) is given, with the floats
    ``yarn_original_max``, ``yarn_beta_fast``, ``yarn_beta_slow``, ``yarn_mscale`` (None:
    DeepSeek-V4's 65536, 32, 1, 1.0). ``cos_sin_cache`` float32 [rows, 64] (written).""",
        {"cos_sin_cache": (_F32, lambda a: (a["rows"], 64))}),
    "fused_indexer_q_rope_quant": (
        """indexer.md §2: RoPE on the last 64 dims, per-head power-of-two fp8 quantisation, the
    scale folded into the head weights.

    ``q`` float32 [T, H, 128]; ``weights`` float32 [T, H]; ``positions`` int64 [T];
    ``cos_sin_cache`` float32 [rows, 64]; ``softmax_scale``, ``head_scale`` float (default
    RN(128^-0.5) and 0.125; the Python float rounded once to fp32). ``q_fp8`` fp8 codes
    [T, H, 128] and ``weights_out`` float32 [T, H] (written).""",
        {"q_fp8": (FP8_DTYPE, lambda a: a["q"].shape),
         "weights_out": (_F32, lambda a: a["weights"].shape)}),
    "fp8_paged_mqa_logits": (
        """indexer.md §4 and §8 (MTP): the indexer logits of each query row over the keys of its
    request.

    ``q_fp8`` fp8 codes [B, next_n, H, 128] or [B·next_n, H, 128]; ``kv_cache`` uint8
    [pages, P·132] (indexer K pages of P = ``block_size`` entries, a larger page stride is
    honoured); ``weights`` float32 [B·next_n, H]; ``seq_lens`` int32 [B] or [B, next_n];
    ``page_table`` index [B, MP]; ``block_size`` int; ``max_seq_len`` int >= 0; ``next_n`` int
    (default 1). ``logits`` float32 [B·next_n, max_seq_len] (written; positions past each row's
    length are -inf).""",
        {"logits": (_F32, lambda a: (_rows(a["q_fp8"]), a["max_seq_len"]))}),
    "topk_transform_512": (
        """indexer.md §5: per row the 512 selected local indices and, with a page table, their
    slots.

    ``scores`` float32 [B, S]; ``seq_lens`` index [B];""" + _CHUNKS.format(k=512) + """ ``mode``
    is ``'canonical'`` (default) or ``'vllm'``.""",
        {"raw_indices": (_I32, lambda a: (a["scores"].shape[0], 512)),
         "page_indices": (_I32, lambda a: None if a["page_table"] is None
                          else (a["scores"].shape[0], 512))}),
    "topk_transform_1024": (
        """indexer.md §5.7: the canonical selection with K = 1024.

    ``scores`` float32 [B, S]; ``seq_lens`` index [B];""" + _CHUNKS.format(k=1024),
        {"raw_indices": (_I32, lambda a: (a["scores"].shape[0], 1024)),
         "page_indices": (_I32, lambda a: None if a["page_table"] is None
                          else (a["scores"].shape[0], 1024))}),
    "short_context_topk": (
        """indexer.md §6: identity rows [0 .. L_t - 1, -1 ...] with L_t = (positions[t] + 1) / 4.

    ``positions`` int64 [T]. ``topk_indices`` int32 [T, 512] (written).""",
        {"topk_indices": (_I32, lambda a: (a["positions"].shape[0], 512))}),
    "indexer_topk": (
        """indexer.md §7: one indexer step of a mixed batch, a 512-entry selection per token.

    ``q_fp8`` fp8 codes [T, H, 128]; ``weights`` float32 [T, H]; ``query_start_loc`` index
    [R + 1]; ``seq_lens`` index [R]; ``block_table`` index [R, MB]; ``kv_cache`` uint8
    [pages, P·132] (indexer K pages of P = ``block_size`` entries); ``block_size`` int; ``mode``
    ``'canonical'`` (default) or ``'vllm'``. ``topk_indices`` int32 [T, 512] (written).""",
        {"topk_indices": (_I32, lambda a: (a["q_fp8"].shape[0], 512))}),
    "token_positions": (
        """metadata.md §2: each token's position and request.

    ``query_start_loc`` index [R + 1]; ``seq_lens`` index [R]. ``positions`` int64 [T] and
    ``token_to_req`` int32 [T] (written), T = query_start_loc[R].""",
        {"positions": (_I64, lambda a: (_index(a["query_start_loc"], -1),)),
         "token_to_req": (_I32, lambda a: (_index(a["query_start_loc"], -1),))}),
    "slot_mapping": (
        """metadata.md §3: each token's KV slot.

    ``positions`` int64 [T]; ``token_to_req`` index [T]; ``block_table`` index [R, MB];
    ``block_size`` int. ``slot_mapping`` int64 [T] (written); pass one with num_tokens_padded
    entries to pad (entries past T are -1).""",
        {"slot_mapping": (_I64, lambda a: (a.get("num_tokens_padded", a["positions"].shape[0]),))}),
    "split_decodes_and_prefills": (
        """metadata.md §4: the decode/prefill split of the step's requests.

    ``query_start_loc`` index [R + 1]; ``threshold`` int: a request with at most this many query
    tokens is a decode. Returns (num_decodes, num_prefills, num_decode_tokens,
    num_prefill_tokens), ints.""", {}),
    "compressed_slot_mapping": (
        """metadata.md §5: each token's slot in the compressed cache (-1 for tokens that emit
    none).

    ``query_start_loc`` index [R + 1]; ``seq_lens`` index [R]; ``block_table`` index [R, MB];
    ``compress_ratio`` int; ``block_size`` int: compressed entries per page;
    ``token_slot_mapping`` int64 [T] (optional: enables the replayed-token rule).
    ``slot_mapping`` int64 [T] (written; pass num_tokens_padded entries to pad with -1).""",
        {"slot_mapping": (_I64, lambda a: (a.get("num_tokens_padded",
                                                 _index(a["query_start_loc"], -1)),))}),
    "swa_window_indices": (
        """metadata.md §6: each token's sliding-window slots, and their count.

    ``positions`` int64 [T]; ``token_to_req`` index [T]; ``block_table`` index [R, MB];
    ``window`` int >= 1; ``block_size`` int. ``indices`` int64 [T, window] (written; -1
    padded); ``lens`` int32 [T] (written, only when passed).""",
        {"indices": (_I64, lambda a: (a["positions"].shape[0], a["window"])),
         "lens": (_I32, lambda a: None)}),
    "c128a_topk_indices": (
        """metadata.md §7.1 (CPU form): the C128A compressed slots of each token.

    ``positions`` int64 [T]; ``token_to_req`` index [T]; ``block_table`` index [R, MB];
    ``max_model_len`` int; ``block_size`` int: compressed entries per page. ``indices`` int64
    [T, Wc] (written), Wc = :func:`c128a_topk_width` (max_model_len).""",
        {"indices": (_I64, lambda a: (a["positions"].shape[0],
                                      ops.c128a_topk_width(a["max_model_len"])))}),
    "c128a_topk_indices_compact": (
        """metadata.md §7.1, compact form (docs/metadata.md): the same rows cut to the step's
    longest compressed length.

    ``positions`` int64 [T]; ``token_to_req`` index [T]; ``block_table`` index [R, MB];
    ``block_size`` int. ``indices`` int64 [T, W] (written), W = :func:`c128a_compact_width`
    (positions) or wider.""",
        {"indices": (_I64, lambda a: (a["positions"].shape[0],
                                      a.get("width") or ops.c128a_compact_width(a["positions"])))}),
    "c128a_decode_metadata": (
        """metadata.md §7.2 (GPU form): decode rows as global slots, prefill rows as local
    indices.

    ``positions`` int64 [T]; ``token_to_req`` index [T]; ``block_table`` index [R, MB];
    ``max_model_len`` int; ``block_size`` int; ``num_decode_tokens`` int nd (the first nd
    tokens are decodes); ``token_slot_mapping`` int64 [T] (optional). Written:
    ``decode_global`` int64 [nd, W], ``decode_lens`` int32 [nd], ``prefill_local`` int32
    [T - nd, W], W = :func:`c128a_decode_max_width` (max_model_len) (pass narrower outputs for
    an active width, a multiple of 128).""",
        {"decode_global": (_I64, lambda a: (a["num_decode_tokens"], _c128a_width(a))),
         "decode_lens": (_I32, lambda a: (a["num_decode_tokens"],)),
         "prefill_local": (_I32, lambda a: (a["positions"].shape[0] - a["num_decode_tokens"],
                                            _c128a_width(a)))}),
    "c4a_global_topk_indices": (
        """metadata.md §8: the C4A top-k selection mapped to global slots, and the count per
    token.

    ``topk_indices`` index [T, K]; ``token_to_req`` index [T]; ``block_table`` index [R, MB];
    ``block_size`` int; ``token_slot_mapping`` int64 [T] (optional). ``indices`` int64 [T, K]
    and ``lens`` int32 [T] (written).""",
        {"indices": (_I64, lambda a: a["topk_indices"].shape),
         "lens": (_I32, lambda a: (a["topk_indices"].shape[0],))}),
    "indexer_metadata": (
        """metadata.md §9: the indexer's metadata of a step.

    ``query_start_loc`` index [R + 1]; ``seq_lens`` index [R]; ``block_table`` index [R, MB];
    ``block_size`` int; ``next_n`` int (default 1). ``slot_mapping`` int64 [T] (written).
    Returned by the names of docs/fixture-ops.md: ``num_decodes``, ``num_prefills``,
    ``num_decode_tokens``, ``num_prefill_tokens`` (ints; the raw op gives int64 [1] tensors);
    ``compressed_seq_lens`` int32 [R];
    ``decode_lens`` int32 [nd] and ``decode_seq_lens`` int32 [nd, next_n] (nd = num_decodes);
    the prefill chunk ``chunk`` int64 [6] (req_start, req_end, token_start, token_end,
    total_seq_lens, skip_kv_gather), ``cu_seq_lens``, ``cu_seqlen_ks``, ``cu_seqlen_ke``,
    ``token_req``, ``token_to_seq`` (int32). Without prefills the raw op gives the chunk
    tensors empty and the wrapper None. Under torch.compile the wrapper gives the raw op's
    results. Of the C++ result,
    max_seq_len is max(seq_lens) and requires_padding is decode_lens.min() != .max().""",
        {"slot_mapping": (_I64, lambda a: (_index(a["query_start_loc"], -1),))}),
    "split_indexer_prefill_chunks": (
        """metadata.md §9.3: the base rule's prefill chunks.

    ``compressed_lens`` index [n] (>= 0); ``query_lens`` index [n] (>= 1); ``workspace`` int
    >= 1; ``max_logits_bytes`` int >= 4; ``request_offset`` int >= 0. Returns ``chunks`` int64
    [C, 4], rows (req_start, req_end, q_start, q_end).""", {}),
    "build_tile_scheduler": (
        """metadata.md §10: the tile scheduler of a layer kind.

    ``layer_kind`` str: ``'swaonly'``, ``'c4a'`` or ``'c128a'``. Returns ``'none'``.""", {}),
    "sparse_mla_attention": (
        """attention.md §2: sparse MLA attention of each query token over its window slots,
    then its compressed slots.

    ``q`` bfloat16 [T, H, 512]; ``window_cache`` uint8 [pages, Pw·584] (fp8_ds_mla pages of
    Pw = ``window_block_size`` entries, a larger page stride is honoured); ``window_slots`` int64
    [T, Nw] (-1 skipped); ``compressed_cache`` uint8 [pages, Pc·584] (Pc =
    ``compressed_block_size``; [0, Pc·584] with ``compressed_slots`` [T, 0] for none);
    ``compressed_slots`` int64 [T, Nc]; ``attn_sink`` float32 [H] (optional); ``scale`` float
    (default RN(512^-0.5); the Python float rounded once to fp32); ``nope_decode`` ``'exact'``
    (default) or ``'vllm'``. ``out`` bfloat16 [T, H, 512] (written); ``lse`` float32 [T, H]
    (written, only when passed).""",
        {"out": (_BF16, lambda a: (a["q"].shape[0], a["q"].shape[1], 512)),
         "lse": (_F32, lambda a: None)}),
    "fused_qnorm_rope_kv_insert": (
        """attention.md §3: q RMSNorm and RoPE, and the SWA kv rows rotated, quantised and
    inserted into the SWA cache.

    ``q`` bfloat16 [T, Hq, 512]; ``kv`` bfloat16 [T_ins, 512]; ``positions`` int64 [T];
    ``slot_mapping`` int64 [T_ins] (-1 skips); ``swa_cache`` uint8 [pages, P·584] (fp8_ds_mla
    pages of P = ``cache_block_size`` entries; updated in place at ``slot_mapping``);
    ``cos_sin_cache`` float32 [rows, 64]; ``q_head_padded`` int >= Hq; ``eps`` float;
    ``scale_clamp`` ``'cpu'`` (default) or ``'gpu'``; ``fp8_subnormals`` ``'exact'`` (default)
    or ``'flush'``. ``q_out`` bfloat16 [T, q_head_padded, 512] (written; heads past Hq are
    +0).""",
        {"q_out": (_BF16, lambda a: (a["q"].shape[0], a["q_head_padded"], 512))}),
    "inverse_gptj_rope_o_proj": (
        """attention.md §4: the attention output widened to fp32, the last ``rope_dim`` dims of
    each head rotated back by the token's position.

    ``o`` bfloat16 or float16 [T, H, D] (contiguous; the attention output); ``positions`` index
    [T]; ``cos_sin_cache`` float32 [rows, rope_dim] (cos_i in column i, sin_i in column
    rope_dim/2 + i); ``rope_dim`` int, even, 2 <= rope_dim <= D (64 in the model). ``out``
    float32 [T, H, D] (contiguous; every element written).""",
        {"out": (_F32, lambda a: tuple(a["o"].shape))}),
    "c128a_topk_width": (
        """metadata.md §7.1: Wc = ceil(max_model_len / 128) for ``max_model_len`` int
    >= 1.""", {}),
    "c128a_compact_width": (
        """The compact C128A width of ``positions`` int64 [T]: the step's longest
    (positions[t] + 1) / 128 (0 for T = 0).""", {}),
    "c128a_decode_max_width": (
        """metadata.md §7.2: Wmax = roundup(ceil(max_model_len / 128), 128) for ``max_model_len``
    int >= 1.""", {}),
    "selected_variant": (
        """The registry variant (str) the options would pick for ``op`` (str), as the call of
    the op would.""", {}),
}


def output_shape(op, arguments, name):
    """The shape of output ``name`` of ``op`` for the bound ``arguments`` (a dict by name), or
    None when the op does not request it for these arguments."""
    shape = SPECS[op][1][name][1](arguments)
    return None if shape is None else tuple(map(int, shape))


#: Bytes of this machine's memory: no output larger than this is allocated.
MEMORY_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@functools.lru_cache(maxsize=None)
def _itemsize(dtype):  # torch.dtype.itemsize is torch >= 2.1
    return torch.empty(0, dtype=dtype).element_size()


def allocatable(shape, dtype):
    """True when a tensor of ``shape`` and ``dtype`` can be allocated: no negative extent, and
    no more bytes than this machine's memory."""
    return not shape or (min(shape) >= 0 and _itemsize(dtype) * math.prod(shape) <= MEMORY_BYTES)


def _placeholder(shape, dtype):
    """The extents of an output that stands in for an unallocatable one: the out-of-range
    extents 0 (all of them when the others alone are still too large)."""
    kept = tuple(e if 0 <= e and allocatable((e,), dtype) else 0 for e in shape)
    return kept if allocatable(kept, dtype) else (0,) * len(shape)


def _first_tensor(arguments):
    """The first tensor argument, or None."""
    return next((v for v in arguments.values() if isinstance(v, torch.Tensor)), None)


#: Outputs of at least this many bytes come from the blocks of freed outputs (``_empty_output``,
#: as the ops' own allocations in C++): glibc maps a block this large anew on every call (its
#: largest mmap threshold, 32 MiB), so the op faults in fresh pages; smaller blocks it reuses
#: (docs/decisions.md, "Outputs allocated in C++ reuse the blocks of freed ones").
REUSED_OUTPUT_BYTES = 32 << 20


def allocate(op, arguments, name):
    """The output ``name`` of ``op`` for the bound ``arguments`` on the device of the first
    tensor argument, or None (see output_shape). An unallocatable shape gives a placeholder
    (see :func:`allocatable`) and False as the second value; otherwise True. Eager on the CPU,
    an output of REUSED_OUTPUT_BYTES or more reuses a freed output's block."""
    shape = output_shape(op, arguments, name)
    if shape is None:
        return None, True
    dtype = SPECS[op][1][name][0]
    fits = allocatable(shape, dtype)
    shape = shape if fits else _placeholder(shape, dtype)
    first = _first_tensor(arguments)
    device = torch.device("cpu") if first is None else first.device
    # A plain tensor: not a fake or other subclass, whose mode the block would escape.
    if (fits and _itemsize(dtype) * math.prod(shape) >= REUSED_OUTPUT_BYTES
            and device.type == "cpu" and (first is None or type(first) is torch.Tensor)
            and not _compiling()):
        return tools._empty_output(shape, dtype), True
    return torch.empty(shape, dtype=dtype, device=device), fits


def _compiling():
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and compiler.is_compiling()


_CHUNK = ("chunk", "cu_seq_lens", "cu_seqlen_ks", "cu_seqlen_ke", "token_req", "token_to_seq")


_SPLIT = ("num_decodes", "num_prefills", "num_decode_tokens", "num_prefill_tokens")


def _indexer_metadata_results(results):
    """Eager: the split as ints and the prefill chunk None without prefills (the op gives I64 [1]
    tensors and empty ones: torch.compile can neither read the data nor branch on it)."""
    if _compiling():
        return results
    results = {**results, **{name: int(results[name]) for name in _SPLIT}}
    return results if results["num_prefills"] else {**results, **dict.fromkeys(_CHUNK)}


#: Per op, what the wrapper (and the recorder) makes of the op's results (a dict by name).
RESULTS = {"indexer_metadata": _indexer_metadata_results}


def _parameters(sch, outputs):
    """The wrapper's signature: inputs and scalars in the schema's order (optional ones default
    to None), then keyword-only the outputs (allocated when None) and the options;
    ``fresh_outputs`` defaults to None (the wrapper decides, see _FRESH_OUTPUTS)."""
    positional, keyword = [], []
    for a in sch.arguments:
        if a.name in outputs or a.kwarg_only:
            default = None if a.name in outputs or a.name == "fresh_outputs" else a.default_value
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


_OPTIONS = """

    Keyword-only options: ``impl`` (``'best'``, ``'reference'``, ``'optimized'``), ``variant``
    (a registry name such as ``'ref'`` or ``'hwy'``, overriding ``impl``), ``check_finite``
    (bad-input.md §1.6: reject NaN/inf inputs, default True) and ``num_threads`` (the most
    threads the optimized variants use; None, the default: ``torch.get_num_threads()`` at the
    call; 0: OpenMP's default). Results never depend on the variant's thread count."""

_FRESH_OUTPUTS = """ ``fresh_outputs``: True says the caller drops the outputs if the call
    raises, so the op may check while it writes them (they then hold unspecified values after an
    error); None, the default: True when the wrapper allocated every output, else False."""


def _raise_too_large(op, arguments, name):
    """The op accepted the placeholder of output ``name``: its shape alone is at fault."""
    shape = list(output_shape(op, arguments, name))
    raise errors.ValueError(
        f"dsv4cpu::{op}: {name}: shape {shape}: cannot be allocated (expected no negative extent "
        f"and at most {MEMORY_BYTES} bytes)", op, name, (), str(shape))


_TRANSLATE = ["    except Exception as _exc:",
              "        _typed_error = _typed(_exc)",
              "        if _typed_error is None:",
              "            raise",
              "        raise _typed_error from None"]


def _source(op, sch, signature, outputs, no_options, functional):
    """The wrapper of ``op`` as Python source: a function with the wrapper's signature (so that
    Python binds its arguments), whose defaults are the names ``_default_<argument>`` and which
    calls ``_operator`` (the default overload) or ``_no_options`` or ``_functional``,
    ``_allocate``, ``_raise_too_large``, ``_typed`` and ``_results`` of its namespace;
    ``no_options``, ``functional``: the op has that overload. Generated, not generic: a
    decode-sized op runs in microseconds, and a generic wrapper's binding and option loop took
    longer than the op."""
    names = list(signature.parameters)
    written = [a.name for a in sch.arguments if is_written(a)]
    returns = [r.name for r in sch.returns]
    options = [a for a in sch.arguments if a.kwarg_only]
    lines = []
    params, keyword_only = [], False
    for p in signature.parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not keyword_only:
            params.append("*")
            keyword_only = True
        params.append(p.name if p.default is inspect.Parameter.empty
                      else f"{p.name}=_default_{p.name}")
    lines.append(f"def {op}({', '.join(params)}):")
    if functional:
        # The op's one output not given and the options at their defaults (fresh_outputs: not
        # given): .functional allocates it in C++ and checks while it writes it.
        if list(outputs) != written or len(written) != 1 or returns:
            raise RuntimeError(f"dsv4cpu::{op}.functional: only an op that writes one output "
                               "and returns nothing has it")
        inputs = ", ".join(a.name for a in sch.arguments
                           if not a.kwarg_only and a.name not in outputs)
        test = " and ".join([f"{written[0]} is None"] + [
            f"{a.name} is None" if a.name == "fresh_outputs" else
            f"{a.name} is _schema_default_{a.name}" for a in options])
        lines += [f"    if {test}:", "        try:",
                  f"            return _functional({inputs})"]
        lines += ["    " + line for line in _TRANSLATE]
    by_name = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    # An op that writes only outputs the wrapper can allocate: when it allocated every one, no one
    # else sees them, so the op may check while it writes them (Options::fresh_outputs).
    private = bool(outputs) and "fresh_outputs" in names and set(written) <= set(outputs)
    if outputs:
        if private:
            lines.append(f"    _fresh = {' and '.join(f'{o} is None' for o in outputs)}")
        lines.append(f"    _arguments = {by_name}")
        lines.append("    _too_large = None")
        for o in outputs:
            lines += [f"    if {o} is None:",
                      f"        {o}, _fits = _allocate(_arguments, {o!r})",
                      f"        _arguments[{o!r}] = {o}",
                      f"        if not _fits and _too_large is None:",
                      f"            _too_large = {o!r}"]
    if "fresh_outputs" in names:
        lines += ["    if fresh_outputs is None:",
                  f"        fresh_outputs = {'_fresh' if private else 'False'}"]
    # The schema's positional arguments by position; a keyword-only one by keyword only where it
    # is not the schema's default (torch parses each keyword: a decode-sized call notices). An op
    # with options runs as its overload .no_options when every option is at its default.
    call = ", ".join(a.name for a in sch.arguments if not a.kwarg_only)
    if options:
        lines.append("    _given = {}")
        for a in options:
            lines += [f"    if {a.name} is not _schema_default_{a.name}:",
                      f"        _given[{a.name!r}] = {a.name}"]
    full = f"_operator({call}{', ' if call else ''}**_given)" if options else f"_operator({call})"
    if options and no_options:
        lines += ["    try:", "        if _given:", f"            _result = {full}",
                  "        else:", f"            _result = _no_options({call})"]
    else:
        lines += ["    try:", f"        _result = {full}"]
    # errors.call's translation, inlined: its call frame and argument packing cost 0.18 µs.
    lines += _TRANSLATE
    if outputs:
        lines += ["    if _too_large is not None:",
                  f"        _raise_too_large({op!r}, _arguments, _too_large)"]
    if not returns:
        lines.append(f"    return {', '.join(written) or 'None'}")
    elif len(returns) == 1 and not written:
        lines.append("    return _result")
    else:
        values = "".join(f"{w!r}: {w}, " for w in written)
        result = "_result if isinstance(_result, tuple) else (_result,)"
        lines.append(f"    return _results({{{values}**dict(zip({returns!r}, {result}))}})")
    return "\n".join(lines) + "\n"


def _wrapper(op):
    operator = getattr(ops, op, None) or getattr(tools, op)  # not a tensor op: the latter
    sch = schema(operator)
    doc, outputs = SPECS[op]
    signature = _parameters(sch, outputs)
    no_options = getattr(operator, "no_options", None)  # the tooling has none
    functional = getattr(operator, "functional", None)
    namespace = {"_operator": getattr(operator, "default", operator), "_no_options": no_options,
                 "_functional": functional,
                 "_allocate": lambda arguments, name: allocate(op, arguments, name),
                 "_raise_too_large": _raise_too_large, "_typed": errors.from_exception,
                 "_results": RESULTS.get(op, dict)}
    for p in signature.parameters.values():
        namespace[f"_default_{p.name}"] = p.default
    # The schema's default of an option, as the very object the wrapper's signature holds where
    # they are equal (a schema's default_value is a new object at each read; `is` compares).
    for a in sch.arguments:
        if a.kwarg_only:
            mine = signature.parameters[a.name].default
            namespace[f"_schema_default_{a.name}"] = (
                mine if type(mine) is type(a.default_value) and mine == a.default_value
                else a.default_value)
    source = _source(op, sch, signature, outputs, no_options is not None,
                     functional is not None)
    exec(compile(source, f"<dsv4cpu.{op}>", "exec"), namespace)
    wrapper = namespace[op]
    wrapper.__module__ = "dsv4cpu"
    written = [a.name for a in sch.arguments if is_written(a)]
    returns = [r.name for r in sch.returns]
    if returns and (len(returns) > 1 or written):
        gives = "a dict of " + ", ".join(written + returns)
    elif returns:
        gives = "its result"
    elif written:
        gives = ", ".join(written) + (" (a tuple)" if len(written) > 1 else "")
    else:
        gives = "None"
    options = _OPTIONS if any(a.name == "num_threads" for a in sch.arguments) else ""
    if "fresh_outputs" in signature.parameters:
        options += _FRESH_OUTPUTS
    name = "torch.ops." + sch.name.replace("::", ".")
    allocates = (f" Without ``{', '.join(outputs)}`` and at the default options the wrapper calls "
                 f"``{name}.functional``, which allocates it in C++." if functional else "")
    wrapper.__doc__ = (f"{doc}\n\n    Returns {gives}. Outputs the wrapper allocates when not "
                       f"given (and the op requests them): {', '.join(outputs) or 'none'}."
                       f"{allocates}{options}\n\n    The wrapper of ``{name}``:\n        {sch}")
    return wrapper


WRAPPERS = {op: _wrapper(op) for op in SPECS}
