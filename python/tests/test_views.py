"""Tensors reach the library as views: no copies (in-place buffers and outputs are written where
they are), strides and padded pages honoured, storage offsets kept, and what the library cannot
take rejected rather than copied."""
import pytest
import torch

import dsv4cpu
from dsv4cpu import fixtures

from support import fixture

SENTINEL = 0x5C


def load(op, name):
    f = fixtures.load(fixture(op, name))
    return f.inputs, f.scalars, f.expected


def padded(t, extra, fill=SENTINEL):
    """`t` [pages, n] as the first n columns of pages of n + extra elements, the padding filled
    with the byte `fill`: a view with page stride n + extra."""
    base = torch.empty(t.shape[0], t.shape[1] + extra, dtype=t.dtype)
    base.view(torch.uint8).fill_(fill)
    base[:, :t.shape[1]] = t
    return base, base[:, :t.shape[1]]


def padding_untouched(base, n):
    return bool((base[:, n:].contiguous().view(torch.uint8) == SENTINEL).all())


def test_inplace_buffer_written_where_it_is():
    t, _, want = load("save_partial_states", "c4_indexer_two_requests")
    state = t["state_cache"].clone()
    ptr = state.data_ptr()
    out = dsv4cpu.save_partial_states(t["kv"], t["score"], t["ape"], t["positions"], state,
                                      t["slot_mapping"])
    assert out is state and state.data_ptr() == ptr
    assert fixtures.same_bytes(state, want["state_cache"])


def test_padded_state_cache_pages():
    """compressor.md: a state cache page may be longer than bs·2·SW; the view [nb, bs, 2·SW] with
    the page stride is written in its rows only."""
    t, _, want = load("save_partial_states", "c4_indexer_two_requests")
    nb, bs, row = t["state_cache"].shape
    base, _ = padded(t["state_cache"].reshape(nb, bs * row), 37)
    view = base.as_strided((nb, bs, row), (bs * row + 37, row, 1))
    dsv4cpu.save_partial_states(t["kv"], t["score"], t["ape"], t["positions"], view,
                                t["slot_mapping"])
    assert fixtures.same_bytes(view.contiguous(), want["state_cache"])
    assert padding_untouched(base, bs * row)


def test_padded_kv_cache_pages_inplace():
    t, s, want = load("compress_norm_rope_store", "c4_worked_example")
    page_bytes = t["kv_cache"].shape[1]
    base, view = padded(t["kv_cache"], 64)
    ptr = view.data_ptr()
    dsv4cpu.compress_norm_rope_store(
        t["state_cache"], t["gather_slots"], t["positions"], t["kv_slot_mapping"],
        t["rms_norm_weight"], t["cos_sin_cache"], view, float(s["rms_norm_eps"]),
        int(s["kv_cache_block_size"]), int(s["compress_ratio"]), s["scale_clamp"], variant="ref")
    assert view.data_ptr() == ptr
    reference = t["kv_cache"].clone()
    dsv4cpu.compress_norm_rope_store(
        t["state_cache"], t["gather_slots"], t["positions"], t["kv_slot_mapping"],
        t["rms_norm_weight"], t["cos_sin_cache"], reference, float(s["rms_norm_eps"]),
        int(s["kv_cache_block_size"]), int(s["compress_ratio"]), s["scale_clamp"], variant="ref")
    assert fixtures.same_bytes(view.contiguous(), reference)
    assert not fixtures.same_bytes(reference, t["kv_cache"])  # the call wrote something
    assert padding_untouched(base, page_bytes)


def logits_args(t, s):
    return (t["q_fp8"], t["kv_cache"], t["weights"], t["seq_lens"], t["page_table"],
            int(s["block_size"]), int(s["max_seq_len"]))


def test_padded_key_pages_strided_page_table_and_offset_q():
    t, s, _ = load("fp8_paged_mqa_logits", "bs64_padded_shuffled")
    want = dsv4cpu.fp8_paged_mqa_logits(*logits_args(t, s))
    _, kv = padded(t["kv_cache"], 128)
    _, table = padded(t["page_table"], 5, fill=0)  # row stride MP + 5
    q = torch.cat([torch.zeros_like(t["q_fp8"][:1]), t["q_fp8"]])[1:]  # storage offset
    assert q.storage_offset() > 0 and not table.is_contiguous() and not kv.is_contiguous()
    got = dsv4cpu.fp8_paged_mqa_logits(q, kv, t["weights"], t["seq_lens"], table,
                                       int(s["block_size"]), int(s["max_seq_len"]))
    assert fixtures.same_bytes(got, want)


def test_attention_padded_pages_and_head_padded_q():
    """attention.md §2: window and compressed pages with a page stride beyond page_bytes, and q as
    the first H heads of a head-padded buffer (q_out of the insert) give the bytes of contiguous
    arrays; the insert writes its padded swa_cache pages in place, padding untouched."""
    t, s, want = load("sparse_mla_attention", "c4a_512_identity_and_random")
    T, H, _ = t["q"].shape
    q_base = torch.zeros(T, H + 3, 512, dtype=torch.bfloat16)
    q_base[:, :H] = t["q"]
    window_base, window = padded(t["window_cache"], 48)
    compressed_base, compressed = padded(t["compressed_cache"], 16)
    out = torch.empty(T, H, 512, dtype=torch.bfloat16)
    lse = torch.empty(T, H)
    ptr = out.data_ptr()
    dsv4cpu.sparse_mla_attention(q_base[:, :H], window, int(s["window_block_size"]),
                                 t["window_slots"], compressed, int(s["compressed_block_size"]),
                                 t["compressed_slots"], t["attn_sink"], out=out, lse=lse)
    contiguous = dsv4cpu.sparse_mla_attention(
        t["q"], t["window_cache"], int(s["window_block_size"]), t["window_slots"],
        t["compressed_cache"], int(s["compressed_block_size"]), t["compressed_slots"],
        t["attn_sink"], lse=torch.empty(T, H))
    assert out.data_ptr() == ptr
    assert fixtures.same_bytes(out, contiguous[0]) and fixtures.same_bytes(lse, contiguous[1])
    assert padding_untouched(window_base, t["window_cache"].shape[1])
    assert padding_untouched(compressed_base, t["compressed_cache"].shape[1])

    t, s, want = load("fused_qnorm_rope_kv_insert", "tiny_tiles_gpu_flush")
    page_bytes = t["swa_cache"].shape[1]
    base, cache = padded(t["swa_cache"], 40)
    ptr = cache.data_ptr()
    dsv4cpu.fused_qnorm_rope_kv_insert(t["q"], t["kv"], t["positions"], t["slot_mapping"], cache,
                                       t["cos_sin_cache"], int(s["q_head_padded"]),
                                       float(s["eps"]), int(s["cache_block_size"]),
                                       s["scale_clamp"], s["fp8_subnormals"])
    assert cache.data_ptr() == ptr and padding_untouched(base, page_bytes)
    assert fixtures.same_bytes(cache.contiguous(), want["swa_cache"])


def test_outputs_written_in_place_with_row_stride():
    """topk outputs need a unit inner stride only: columns 0..511 of a wider buffer are written,
    the rest left alone, in the given memory."""
    t, s, want = load("topk_transform_512", "canonical_mixed")
    buffer = torch.full((t["scores"].shape[0], 600), -7, dtype=torch.int32)
    pages = torch.full_like(buffer, -7)
    raw, page = dsv4cpu.topk_transform_512(t["scores"], t["seq_lens"], t["page_table"],
                                           int(s["page_size"]), s["mode"],
                                           raw_indices=buffer[:, :512], page_indices=pages[:, :512])
    assert raw.data_ptr() == buffer.data_ptr() and page.data_ptr() == pages.data_ptr()
    assert torch.equal(buffer[:, :512], want["raw_indices"])
    assert torch.equal(pages[:, :512], want["page_indices"])
    assert bool((buffer[:, 512:] == -7).all()) and bool((pages[:, 512:] == -7).all())


def test_given_output_is_returned():
    slots = torch.empty(2, 3, dtype=torch.int64)
    out = dsv4cpu.map_local_to_global_slots(
        torch.tensor([[0, 5, -1], [3, 4, 9]]), torch.tensor([0, 1], dtype=torch.int32),
        torch.tensor([[7, 2, 1], [4, 0, 3]], dtype=torch.int32), 4, slots=slots)
    assert out is slots
    assert slots.tolist() == [[28, 9, -1], [19, 0, 13]]  # compressor.md §4.1 by hand


def test_strides_are_passed_not_copied():
    """A transposed (non-contiguous) array the op needs contiguous is rejected with the strides
    in the message: the binding never makes a contiguous copy behind the caller's back."""
    local = torch.tensor([[0, 3], [5, 4], [-1, 1]]).t()
    with pytest.raises(dsv4cpu.ShapeError, match="local_indices.*strides \\[1, 2\\]"):
        dsv4cpu.map_local_to_global_slots(local, torch.tensor([0, 1], dtype=torch.int32),
                                          torch.tensor([[7, 2, 1], [4, 0, 3]], dtype=torch.int32),
                                          4)


def test_zero_size_is_a_no_op():
    out = dsv4cpu.map_local_to_global_slots(
        torch.empty(0, 3, dtype=torch.int64), torch.empty(0, dtype=torch.int32),
        torch.tensor([[7, 2, 1]], dtype=torch.int32), 4)
    assert out.shape == (0, 3)


def table_args():
    return (torch.tensor([[0, 5, -1], [3, 4, 9]]), torch.tensor([0, 1], dtype=torch.int32),
            torch.tensor([[7, 2, 1], [4, 0, 3]], dtype=torch.int32), 4)


@pytest.mark.parametrize("tensor, pattern", [
    (torch.zeros(2, 3, dtype=torch.bfloat16), "local_indices: dtype BF16"),
    (torch.zeros(2, 3, dtype=torch.float16), "local_indices: dtype F16"),
    (torch.zeros(2, 3, dtype=torch.float64), "local_indices: dtype Double"),
    (torch.zeros(1, 1, 1, 2, 3, dtype=torch.int64), "local_indices: rank 5"),
])
def test_arrays_the_library_cannot_take(tensor, pattern):
    """dtype mapping (bfloat16 is BF16, float16 F16), other dtypes and ranks: ShapeError. (Meta
    tensors run the fake kernel: test_torch_library.)"""
    _, req, table, size = table_args()
    with pytest.raises(dsv4cpu.ShapeError, match=pattern) as e:
        dsv4cpu.map_local_to_global_slots(tensor, req, table, size)
    assert e.value.argument == "local_indices"


def test_fp8_codes_as_uint8():
    """uint8 codes are e4m3fn for q_fp8; another dtype is not."""
    t, s, want = load("fp8_paged_mqa_logits", "bs64_padded_shuffled")
    got = dsv4cpu.fp8_paged_mqa_logits(*logits_args(t, s))
    assert dsv4cpu.compare("fp8_paged_mqa_logits", "logits", want["logits"], got, t, **s)
    with pytest.raises(dsv4cpu.ShapeError, match="q_fp8: dtype I32"):
        dsv4cpu.fp8_paged_mqa_logits(t["q_fp8"].int(), *logits_args(t, s)[1:])


def test_fp8_codes_as_float8():
    """Run by ctest as python.pytest.float8, skipped (not passed) with a torch that lacks it."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
    t, s, _ = load("fp8_paged_mqa_logits", "bs64_padded_shuffled")
    want = dsv4cpu.fp8_paged_mqa_logits(*logits_args(t, s))
    q = t["q_fp8"].view(torch.float8_e4m3fn)
    assert fixtures.same_bytes(dsv4cpu.fp8_paged_mqa_logits(q, *logits_args(t, s)[1:]), want)
    codes = dsv4cpu.fused_indexer_q_rope_quant(
        *(torch.zeros(1, 1, 128), torch.ones(1, 1), torch.zeros(1, dtype=torch.int64),
          torch.zeros(1, 64)))[0]
    assert codes.dtype == torch.float8_e4m3fn
