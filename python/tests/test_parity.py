"""What the Python package has of the C++ API: the size helpers of cache_sizes.hpp, the version,
the thread default, and wrappers that validate a scalar before allocating from it."""
import importlib.metadata
import inspect
import os
import re

import pytest
import torch

import dsv4cpu
from dsv4cpu import fixtures
from dsv4cpu._extension import ops, tools
from dsv4cpu._wrappers import SPECS

from support import ROOT, fixture


def test_entry_sizes_by_hand():
    assert dsv4cpu.kFp8DsMlaEntryBytes == 448 + 64 * 2 + 7 + 1 == 584
    assert dsv4cpu.kIndexerKEntryBytes == 128 + 4 == 132
    assert dsv4cpu.fp8_ds_mla_page_bytes(64) == 64 * 576 + 64 * 8 == 37376
    assert dsv4cpu.fp8_ds_mla_page_bytes(2) == 1168
    assert dsv4cpu.indexer_k_page_bytes(64) == 64 * 128 + 64 * 4 == 8448


def test_model_sizes_by_hand():
    assert (dsv4cpu.kTokensPerCompressedBlock, dsv4cpu.kSwaBlockSize, dsv4cpu.kSlidingWindow) == \
        (256, 64, 128)
    assert (dsv4cpu.kMainHeadDim, dsv4cpu.kIndexerHeadDim, dsv4cpu.kCosSinColumns) == \
        (512, 128, 64)
    assert (dsv4cpu.kIndexerHeads, dsv4cpu.kIndexerTopk) == (64, 512)
    assert (dsv4cpu.compressed_block_size(4), dsv4cpu.compressed_block_size(128)) == (64, 2)
    assert dsv4cpu.compressor_overlap(4) is True and dsv4cpu.compressor_overlap(128) is False
    assert (dsv4cpu.compressor_window(4), dsv4cpu.compressor_window(128)) == (8, 128)
    assert (dsv4cpu.compressor_window(4, False), dsv4cpu.compressor_window(128, True)) == \
        (4, 256)
    assert dsv4cpu.compressor_state_width(4, 512) == 1024  # (compress_ratio, head_dim)
    assert dsv4cpu.compressor_state_width(128, 512) == 512
    assert dsv4cpu.compressor_state_width(4, 128) == 256
    assert dsv4cpu.compressor_state_width(128, True) == 256  # (head_dim, overlap)
    assert dsv4cpu.compressor_state_width(512, False) == 512
    assert dsv4cpu.compressor_state_row_floats(4, 512) == 2048
    assert (dsv4cpu.compressor_state_block_size(4), dsv4cpu.compressor_state_block_size(128)) \
        == (4, 8)
    assert dsv4cpu.compressor_state_page_floats(4, 4, 512) == 4 * 2048


def test_sizes_fit_the_fixtures():
    """The embedded fixtures' caches are as large as the helpers say."""
    f = fixtures.load(fixture("compress_norm_rope_store", "c4_worked_example"))
    block = int(f.scalars["kv_cache_block_size"])
    assert f.inputs["kv_cache"].shape[1] >= dsv4cpu.fp8_ds_mla_page_bytes(block)
    assert f.inputs["state_cache"].shape[2] == dsv4cpu.compressor_state_row_floats(4, 512)


def test_version():
    """__version__ is the library's, the project version of CMakeLists.txt and, installed,
    the package metadata's."""
    assert re.fullmatch(r"\d+\.\d+\.\d+", dsv4cpu.__version__)
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        project = re.search(r"project\(dsv4cpu VERSION (\S+)", f.read()).group(1)
    assert dsv4cpu.__version__ == project


def test_version_of_the_installed_package():
    try:
        installed = importlib.metadata.version("dsv4cpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("dsv4cpu is not installed as a distribution (run from the build tree)")
    assert installed == dsv4cpu.__version__


@pytest.fixture
def torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_thread_default_follows_torch(torch_threads):
    """num_threads None (the default of every op and wrapper) is torch.get_num_threads() at the
    call; a count given is passed as is."""
    assert inspect.signature(dsv4cpu.slot_mapping).parameters["num_threads"].default is None
    assert [a.name for a in ops.slot_mapping.default._schema.arguments if a.kwarg_only] == [
        "impl", "variant", "check_finite", "num_threads"]
    for n in (1, 2, 3):
        torch.set_num_threads(n)
        assert tools._num_threads(None) == n
    assert tools._num_threads(5) == 5 and tools._num_threads(0) == 0
    with pytest.raises(ValueError, match="num_threads = -1"):
        tools._num_threads(-1)


# ---- hostile scalars: the typed error of the op, never torch.empty's ----

def qnorm_inputs():
    t = fixtures.load(fixture("fused_qnorm_rope_kv_insert", "tiny_tiles_gpu_flush")).inputs
    return (t["q"], t["kv"], t["positions"], t["slot_mapping"], t["swa_cache"].clone(),
            t["cos_sin_cache"])


def raw_error(function, *args, **kwargs):
    """The typed error the op raises for this call."""
    with pytest.raises(dsv4cpu.Error) as e:
        dsv4cpu.errors.call(function, *args, **kwargs)
    return e.value


def assert_same_error(wrapper_error, raw):
    assert type(wrapper_error) is type(raw)
    assert str(wrapper_error) == str(raw)
    assert (wrapper_error.argument, wrapper_error.value) == (raw.argument, raw.value)


@pytest.mark.parametrize("q_head_padded", [-1, 2**40])
def test_q_head_padded(q_head_padded):
    q, kv, positions, slots, cache, cos_sin = qnorm_inputs()
    with pytest.raises(dsv4cpu.Error) as e:
        dsv4cpu.fused_qnorm_rope_kv_insert(q, kv, positions, slots, cache, cos_sin,
                                           q_head_padded, 1e-6, 4)
    T, Hq = q.shape[0], q.shape[1]
    # The raw op, given an output it can hold: the first wrong thing is the same scalar.
    q_out = torch.empty(T, max(q_head_padded, 0) if q_head_padded < 2**20 else 0, 512,
                        dtype=torch.bfloat16)
    raw = raw_error(ops.fused_qnorm_rope_kv_insert, q, kv, positions, slots, cache, cos_sin,
                    q_head_padded, 1e-6, 4, None, None, q_out)
    assert_same_error(e.value, raw)
    if q_head_padded < 0:
        assert type(e.value) is dsv4cpu.ValueError and e.value.argument == "q_head_padded"
        assert e.value.value == "-1" and f"Hq = {Hq}" in str(e.value)
    else:
        assert type(e.value) is dsv4cpu.ShapeError and e.value.argument == "q_out"
        assert f"[{T}, 1099511627776, 512]" in str(e.value)
    assert fixtures.same_bytes(cache, qnorm_inputs()[4])  # nothing written


def test_window():
    positions = torch.tensor([0, 1, 2])
    req = torch.zeros(3, dtype=torch.int32)
    table = torch.zeros(1, 4, dtype=torch.int32)
    with pytest.raises(dsv4cpu.ValueError) as e:
        dsv4cpu.swa_window_indices(positions, req, table, -5, 64)
    raw = raw_error(ops.swa_window_indices, positions, req, table, -5, 64,
                    torch.empty(3, 0, dtype=torch.int64))
    assert_same_error(e.value, raw)
    assert e.value.argument == "window" and e.value.value == "-5"


def test_max_seq_len():
    q = torch.zeros(2, 64, 128, dtype=dsv4cpu.FP8_DTYPE)
    cache = torch.zeros(2, dsv4cpu.indexer_k_page_bytes(64), dtype=torch.uint8)
    weights, seq_lens = torch.ones(2, 64), torch.tensor([3, 5], dtype=torch.int32)
    table = torch.tensor([[0], [1]], dtype=torch.int32)
    with pytest.raises(dsv4cpu.ValueError) as e:
        dsv4cpu.fp8_paged_mqa_logits(q, cache, weights, seq_lens, table, 64, -7)
    raw = raw_error(ops.fp8_paged_mqa_logits, q, cache, weights, seq_lens, table, 64, -7,
                    torch.empty(2, 0))
    assert_same_error(e.value, raw)
    assert e.value.argument == "max_seq_len" and e.value.value == "-7"


def test_extent_from_an_index_array():
    """token_positions allocates query_start_loc[R] tokens: a negative one is the op's error."""
    qsl, seq_lens = torch.tensor([0, -4], dtype=torch.int32), torch.tensor([3], dtype=torch.int32)
    with pytest.raises(dsv4cpu.Error) as e:
        dsv4cpu.token_positions(qsl, seq_lens)
    raw = raw_error(ops.token_positions, qsl, seq_lens, torch.empty(0, dtype=torch.int64),
                    torch.empty(0, dtype=torch.int32))
    assert_same_error(e.value, raw)
    assert e.value.argument == "query_start_loc"


def test_docstrings_name_every_argument():
    """Each wrapper's docstring states every argument (its shape and dtype, or its type), and
    the options and the thread default where the op takes them."""
    options = {"impl", "variant", "check_finite", "num_threads"}
    for name in SPECS:
        wrapper = getattr(dsv4cpu, name)
        doc = wrapper.__doc__
        described = doc[:doc.index("The wrapper of")]
        for argument in inspect.signature(wrapper).parameters:
            assert f"``{argument}``" in described, (name, argument)
        if options <= set(inspect.signature(wrapper).parameters):
            assert "torch.get_num_threads()" in described, name
