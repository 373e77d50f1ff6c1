"""Every op through torch gives exactly the bytes of the C++ call: each embedded and outside
fixture (its inputs, its scalars) runs through torch.ops.dsv4cpu on every available variant, and
through the verifier's C++ adapter (the call dsv4cpu-verify makes); every output, in-place buffer
and returned array must be equal byte for byte."""
import json

import pytest
import torch

import dsv4cpu
from dsv4cpu import conformance, fixtures
from dsv4cpu._extension import ops, tools
from dsv4cpu._wrappers import SPECS

from support import FIXTURES, SHARED, SHARED_ATTENTION, SHARED_NEXT, fixture_files

CASES = [c for c in fixture_files(FIXTURES, SHARED, SHARED_ATTENTION, SHARED_NEXT)
         if not fixtures.load(c[0]).expected_error]
REGISTRY = {o["name"]: o["variants"] for o in dsv4cpu.registered_ops()}


def torch_results(fixture, extra):
    """The op's results through torch.ops.dsv4cpu: buffers and returned values by name."""
    function = getattr(ops, fixture.op)
    call = conformance.Call(fixture, conformance.parameters_of(function), False, set())
    returned = function(**call.arguments, **extra)
    out = {name: t for name, t in call.buffers.items() if t is not None}
    returns = [n for n in conformance._result_names(fixture.op) if n not in call.arguments]
    values = returned if isinstance(returned, tuple) else (returned,) if returns else ()
    for name, v in zip(returns, values):
        if v is not None:
            out[name] = v if isinstance(v, torch.Tensor) else torch.tensor([v])
    if fixture.op == "indexer_metadata" and int(out["num_prefills"]) == 0:
        # without prefills the op gives the chunk tensors empty, the C++ call none
        for name in ("chunk", "cu_seq_lens", "cu_seqlen_ks", "cu_seqlen_ke", "token_req",
                     "token_to_seq"):
            assert out.pop(name).numel() == 0, name
    return out


def assert_torch_equals_cpp(fixture):
    """On every run of dsv4cpu-verify --impl all (every available variant, a Highway variant on
    every Highway target), or once for an op without variant selection."""
    runs = [r for r in conformance.Dsv4cpuTarget("all").runs(fixture.op) if not r.absent]
    assert runs
    for run in runs:
        with dsv4cpu.highway_target(run.highway or {}):
            cpp = tools._run(fixture.tensors, fixture.metadata, sorted(fixture.fp8), "best",
                           run.arguments.get("variant"))
            got = torch_results(fixture, run.arguments)
        assert sorted(got) == sorted(cpp), run.label
        for name, want in cpp.items():
            assert fixtures.same_bytes(got[name], want), f"{run.label}: {name}"


@pytest.mark.parametrize("path", [c[0] for c in CASES], ids=[c[1] for c in CASES])
def test_torch_equals_cpp(path):
    assert_torch_equals_cpp(fixtures.load(path))


def test_c128a_compact_torch_equals_cpp():
    """The op without fixtures, on a step built here; its rows are the CPU form's rows cut to the
    compact width (docs/metadata.md)."""
    positions = torch.tensor([0, 127, 300, 255, 1000], dtype=torch.int64)
    req = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32)
    table = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], dtype=torch.int32)
    width = dsv4cpu.c128a_compact_width(positions)
    assert width == 7  # 1001 // 128
    fixture = fixtures.Fixture("", {"positions": positions, "token_to_req": req,
                                    "block_table": table,
                                    "expected.indices": torch.zeros(5, width, dtype=torch.int64)},
                               {"format": fixtures.FORMAT, "op": "c128a_topk_indices_compact",
                                "block_size": "2"}, ())
    assert_torch_equals_cpp(fixture)
    full = dsv4cpu.c128a_topk_indices(positions, req, table, 1024, 2)
    assert torch.equal(dsv4cpu.c128a_topk_indices_compact(positions, req, table, 2),
                       full[:, :width])


def test_every_kernel_op_is_covered():
    """The fixtures above reach every op of the registry that has a fixture form."""
    covered = {fixtures.load(path).op for path, _ in CASES}
    bound = set(json.loads(tools._bindings()))
    assert set(REGISTRY) - {"build_tile_scheduler", "c128a_topk_indices_compact"} <= covered
    assert set(REGISTRY) - {"build_tile_scheduler"} <= bound  # a string result: not a tensor op
    assert set(REGISTRY) <= set(SPECS)  # every op has its wrapper dsv4cpu.<op>


def test_ops_without_fixtures():
    """metadata.md §10 and the size helpers, by hand."""
    for kind in ("swaonly", "c4a", "c128a"):
        assert dsv4cpu.build_tile_scheduler(kind) == "none"
    with pytest.raises(dsv4cpu.ValueError):
        dsv4cpu.build_tile_scheduler("c8a")
    assert dsv4cpu.c128a_topk_width(1000) == 8  # ceil(1000 / 128)
    assert dsv4cpu.c128a_topk_width(1024) == 8
    assert dsv4cpu.c128a_decode_max_width(1000) == 128  # roundup(8, 128)
    assert dsv4cpu.c128a_decode_max_width(128 * 129) == 256
    assert dsv4cpu.c128a_compact_width(torch.tensor([0, 127, 300, 255])) == 2  # 301 // 128
    assert dsv4cpu.c128a_compact_width(torch.tensor([], dtype=torch.int64)) == 0
    with pytest.raises(dsv4cpu.ValueError):
        dsv4cpu.c128a_topk_width(0)
