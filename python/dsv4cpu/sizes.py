"""The sizes of the caches and per-token arrays the ops read and write, the names and values
of the C++ header ``dsv4cpu/cache_sizes.hpp`` (spec README "Per-kind derived sizes",
compressor.md §2, §3.1, §6.3, §7, indexer.md §1, §3): the library's own functions, called
through ctypes. They check nothing: arguments outside the stated domain give meaningless sizes
(the ops validate their arguments).

    kv_cache = torch.zeros(pages, fp8_ds_mla_page_bytes(64), dtype=torch.uint8)  # 64 · 584 B
"""
import ctypes

from ._extension import native

_I64 = ctypes.c_int64


def _constant(name):
    return _I64.in_dll(native, "dsv4cpu_" + name).value


def _function(name, *arguments, result=_I64):
    f = getattr(native, "dsv4cpu_" + name)
    f.argtypes, f.restype = list(arguments), result
    return f


#: compressor.md §6.3: bytes of one fp8_ds_mla entry (448 fp8 NoPE codes, 64 bf16 RoPE values,
#: 7 UE8M0 scale bytes, a pad byte): the main compressed caches (C4A, C128A) and the SWA cache.
kFp8DsMlaEntryBytes = _constant("kFp8DsMlaEntryBytes")
#: compressor.md §7, indexer.md §3: bytes of one indexer K entry (128 fp8 codes, an fp32 scale).
kIndexerKEntryBytes = _constant("kIndexerKEntryBytes")
#: Tokens covered by the KV-cache block of every compressed group.
kTokensPerCompressedBlock = _constant("kTokensPerCompressedBlock")
#: Tokens per page of the SWA cache.
kSwaBlockSize = _constant("kSwaBlockSize")
#: The SWA window (sliding_window).
kSlidingWindow = _constant("kSlidingWindow")
#: Head dims HD of the main and of the indexer compressor.
kMainHeadDim = _constant("kMainHeadDim")
kIndexerHeadDim = _constant("kIndexerHeadDim")
#: Columns of a cos_sin_cache row: 32 cos then 32 sin (compressor.md §8.1).
kCosSinColumns = _constant("kCosSinColumns")
#: Heads of the indexer query (index_n_heads).
kIndexerHeads = _constant("kIndexerHeads")
#: Selected entries per query token (index_topk).
kIndexerTopk = _constant("kIndexerTopk")

_fp8_ds_mla_page_bytes = _function("fp8_ds_mla_page_bytes", _I64)
_indexer_k_page_bytes = _function("indexer_k_page_bytes", _I64)
_compressed_block_size = _function("compressed_block_size", _I64)
_compressor_overlap = _function("compressor_overlap", _I64)
_compressor_window = _function("compressor_window", _I64)
_compressor_window_overlap = _function("compressor_window_overlap", _I64, ctypes.c_bool)
_compressor_state_width = _function("compressor_state_width", _I64, _I64)
_compressor_state_width_overlap = _function("compressor_state_width_overlap", _I64,
                                            ctypes.c_bool)
_compressor_state_row_floats = _function("compressor_state_row_floats", _I64, _I64)
_compressor_state_block_size = _function("compressor_state_block_size", _I64)
_compressor_state_page_floats = _function("compressor_state_page_floats", _I64, _I64, _I64)


def fp8_ds_mla_page_bytes(block_size):
    """Packed bytes of an fp8_ds_mla page of ``block_size`` entries: P·576 data bytes, then P·8
    scale bytes (``kv_cache.shape[1]`` must be at least this; the page stride may be larger)."""
    return _fp8_ds_mla_page_bytes(block_size)


def indexer_k_page_bytes(block_size):
    """Packed bytes of an indexer K page of ``block_size`` entries: P·128 code bytes, then P
    fp32 scales."""
    return _indexer_k_page_bytes(block_size)


def compressed_block_size(compress_ratio):
    """Compressed entries per page of a compressed group, 256 / r: 64 for C4A and the indexer K
    cache (r = 4), 2 for C128A (r = 128)."""
    return _compressed_block_size(compress_ratio)


def compressor_overlap(compress_ratio):
    """Whether the model's compressor of ratio r overlaps (coff = 2): ratio 4 does, 128 not."""
    return bool(_compressor_overlap(compress_ratio))


def compressor_window(compress_ratio, overlap=None):
    """The window W = coff·r, state rows pooled per compressed entry (``gather_slots.shape[1]``);
    ``overlap`` None: the model's (8 for ratio 4, 128 for ratio 128)."""
    if overlap is None:
        return _compressor_window(compress_ratio)
    return _compressor_window_overlap(compress_ratio, overlap)


def compressor_state_width(first, second):
    """SW = coff·HD, the width of kv, score and ape: ``(head_dim, overlap)`` with ``overlap`` a
    bool, or the model's ``(compress_ratio, head_dim)``: 1024 (C4A main), 512 (C128A main), 256
    (C4A indexer)."""
    if isinstance(second, bool):
        return _compressor_state_width_overlap(first, second)
    return _compressor_state_width(first, second)


def compressor_state_row_floats(compress_ratio, head_dim):
    """Floats of one state row, 2·SW (``state_cache.shape[2]``)."""
    return _compressor_state_row_floats(compress_ratio, head_dim)


def compressor_state_block_size(compress_ratio):
    """The model's state page rows sbs (``state_cache.shape[1]``): 4 for ratio 4, 8 for 128."""
    return _compressor_state_block_size(compress_ratio)


def compressor_state_page_floats(state_block_size, compress_ratio, head_dim):
    """Floats of a packed state page of ``state_block_size`` rows, sbs·2·SW: the minimum page
    stride (``state_cache.stride(0)``)."""
    return _compressor_state_page_floats(state_block_size, compress_ratio, head_dim)


__all__ = ["kFp8DsMlaEntryBytes", "kIndexerKEntryBytes", "kTokensPerCompressedBlock",
           "kSwaBlockSize", "kSlidingWindow", "kMainHeadDim", "kIndexerHeadDim", "kCosSinColumns",
           "kIndexerHeads", "kIndexerTopk", "fp8_ds_mla_page_bytes", "indexer_k_page_bytes",
           "compressed_block_size", "compressor_overlap", "compressor_window",
           "compressor_state_width", "compressor_state_row_floats",
           "compressor_state_block_size", "compressor_state_page_floats"]
