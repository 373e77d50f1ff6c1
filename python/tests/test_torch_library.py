"""The ops the PyTorch way: a CPU kernel and a fake kernel per op, so that torch.library.opcheck
passes, torch.compile(fullgraph=True) gives the eager bytes and meta tensors give the output
shapes; the tooling stays out of torch.ops.dsv4cpu. Sample inputs are the embedded fixtures'."""
import os

import pytest
import torch

import dsv4cpu
from dsv4cpu import conformance, fixtures
from dsv4cpu._extension import FP8_ARGUMENTS, ops, schema, tools

from support import FIXTURES, fixture_files

OPCHECK = getattr(torch.library, "opcheck", None)
COMPILE = getattr(torch, "compile", None)
needs_opcheck = pytest.mark.skipif(OPCHECK is None, reason=f"torch {torch.__version__} has no "
                                   "torch.library.opcheck (2.4 or newer)")
needs_compile = pytest.mark.skipif(
    OPCHECK is None, reason=f"torch {torch.__version__}: the fake kernels need "
    "torch.library.register_fake (2.4 or newer)")

TENSOR_OPS = sorted(n for n in FP8_ARGUMENTS
                    if any("Tensor" in str(a.type) for a in schema(getattr(ops, n)).arguments))
SCALAR_CALLS = {"c128a_topk_width": (1000,), "c128a_decode_max_width": (1000,)}


def _compact_sample():
    """c128a_topk_indices_compact and c128a_compact_width have no fixture: a step built here."""
    return {"positions": torch.tensor([0, 127, 300, 255, 1000]),
            "token_to_req": torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32),
            "block_table": torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], dtype=torch.int32),
            "block_size": 2}


def sample(op):
    """Keyword arguments of one realistic call of ``op``: the smallest embedded fixture that
    expects no error, bound as the conformance runner binds it (outputs as buffers)."""
    if op == "c128a_topk_indices_compact":
        return {**_compact_sample(), "indices": torch.empty(5, 7, dtype=torch.int64)}
    if op == "c128a_compact_width":
        return {"positions": _compact_sample()["positions"]}
    cases = [path for path, _ in fixture_files(os.path.join(FIXTURES, op))
             if not fixtures.load(path).expected_error]
    path = min(cases, key=os.path.getsize)
    call = conformance.Call(fixtures.load(path), conformance.parameters_of(getattr(ops, op)),
                            False, set())
    return call.arguments


def clone(arguments):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in arguments.items()}


def tensors_of(arguments, result):
    """The written arguments and the returned values, as a flat list."""
    out = [v for v in arguments.values() if isinstance(v, torch.Tensor)]
    items = result if isinstance(result, tuple) else (result,)
    return out + [v for v in items if v is not None]


def same(a, b):
    if isinstance(a, torch.Tensor):
        return fixtures.same_bytes(a, b)
    return a == b


def test_tensor_ops_have_a_cpu_kernel_and_no_catch_all():
    for op in TENSOR_OPS:
        name = f"dsv4cpu::{op}"
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"), op
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(
            name, "CompositeImplicitAutograd"), op


def test_tooling_is_not_in_the_ops_namespace():
    """Registry JSON, runs, target pinning, bindings and fixture I/O are torch.ops._dsv4cpu."""
    for name in ("_registered_ops", "_runs", "_pin_highway_target", "_bindings", "_load",
                 "_save", "_check", "_run", "_num_threads", "build_tile_scheduler",
                 "selected_variant"):
        assert not hasattr(ops, name) and hasattr(tools, name), name
    assert all(not name.startswith("_") for name in FP8_ARGUMENTS)


def positional(op, arguments):
    """The call's arguments positionally in the schema's order, options by keyword (opcheck's
    functionalization passes keywords on beside its own ``mode``), fp8 codes as uint8 (torch's
    schema check compares tensors with ops float8 lacks on the CPU)."""
    codes = getattr(torch, "float8_e4m3fn", None)
    values = {k: v.view(torch.uint8) if isinstance(v, torch.Tensor) and v.dtype == codes else v
              for k, v in arguments.items()}
    args, kwargs = [], {}
    for a in schema(getattr(ops, op)).arguments:
        if a.kwarg_only:
            if a.name in values:
                kwargs[a.name] = values[a.name]
        else:
            args.append(values.get(a.name, a.default_value))
    return tuple(args), kwargs


@needs_opcheck
@pytest.mark.parametrize("op", TENSOR_OPS)
def test_opcheck(op):
    OPCHECK(getattr(ops, op).default, *positional(op, sample(op)))


WITH_OPTIONS = [op for op in TENSOR_OPS if hasattr(getattr(ops, op), "no_options")]


@needs_opcheck
@pytest.mark.parametrize("op", WITH_OPTIONS)
def test_opcheck_no_options(op):
    """The overload .no_options of every op with options (the op at its default options)."""
    args, _ = positional(op, sample(op))
    OPCHECK(getattr(ops, op).no_options, args)


TWINS = [op for op in TENSOR_OPS if hasattr(tools, op + "_functional")]


@needs_opcheck
@pytest.mark.parametrize("op", TWINS)
def test_opcheck_functional_twins(op):
    """The functional twins torch.compile uses for the ops with an argument ``mode``."""
    assert TWINS == ["indexer_topk", "topk_transform_512"]
    OPCHECK(getattr(tools, op + "_functional").default, *positional(op, sample(op)))


@needs_opcheck
def test_opcheck_functional():
    """inverse_gptj_rope_o_proj.functional, its output returned."""
    args, _ = positional("inverse_gptj_rope_o_proj", sample("inverse_gptj_rope_o_proj"))
    OPCHECK(ops.inverse_gptj_rope_o_proj.functional, args[:-1])


@needs_opcheck
@pytest.mark.parametrize("op", sorted(SCALAR_CALLS))
def test_opcheck_scalar_ops(op):
    OPCHECK(getattr(ops, op).default, SCALAR_CALLS[op])


def test_every_op_is_checked():
    assert set(TENSOR_OPS) | set(SCALAR_CALLS) == set(FP8_ARGUMENTS)


@needs_compile
@pytest.mark.parametrize("op", TENSOR_OPS)
def test_compile_gives_the_eager_bytes(op):
    """inductor, fullgraph: the ops' outputs, in-place buffers and returned values are the eager
    call's, byte for byte."""
    function = getattr(ops, op)
    arguments = sample(op)

    def call(**kwargs):
        return function(**kwargs)

    eager_arguments = clone(arguments)
    eager = function(**eager_arguments)
    compiled_arguments = clone(arguments)
    torch._dynamo.reset()
    compiled = torch.compile(call, fullgraph=True, backend="inductor")(**compiled_arguments)
    want, got = tensors_of(eager_arguments, eager), tensors_of(compiled_arguments, compiled)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert same(a, b), op


@needs_compile
@pytest.mark.parametrize("op", TWINS)
def test_compile_no_options_of_the_functional_twins(op):
    """The Functionalize kernel of an op with ``mode`` called as .no_options: its twin runs at
    the options' defaults, and compiled gives the eager bytes."""
    args, _ = positional(op, sample(op))
    function = getattr(ops, op).no_options
    eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    eager = function(*eager_args)
    compiled_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: function(*a), fullgraph=True,
                             backend="inductor")(*compiled_args)
    want = [a for a in eager_args if isinstance(a, torch.Tensor)] + [eager] * (eager is not None)
    got = [a for a in compiled_args if isinstance(a, torch.Tensor)] + [compiled] * (
        compiled is not None)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert same(a, b), op


@needs_compile
def test_compile_functional():
    """inverse_gptj_rope_o_proj.functional compiled (the wrapper's call when ``out`` is not
    given) gives the eager bytes; meta tensors give its shape."""
    o, positions, table, rope_dim, _ = positional("inverse_gptj_rope_o_proj",
                                                  sample("inverse_gptj_rope_o_proj"))[0]
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: dsv4cpu.inverse_gptj_rope_o_proj(*a), fullgraph=True,
                             backend="inductor")(o, positions, table, rope_dim)
    assert fixtures.same_bytes(compiled, ops.inverse_gptj_rope_o_proj.functional(
        o, positions, table, rope_dim))
    meta = dsv4cpu.inverse_gptj_rope_o_proj(o.to("meta"), positions.to("meta"),
                                            table.to("meta"), rope_dim)
    assert meta.device.type == "meta" and meta.shape == o.shape and meta.dtype == torch.float32


@needs_compile
def test_compile_through_the_wrappers():
    """A function of wrappers, outputs allocated by them, compiles without a graph break."""
    positions = torch.tensor([0, 5, 130, 131])
    req = torch.tensor([0, 0, 1, 1], dtype=torch.int32)
    table = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32)

    def step(positions, req, table):
        slots = dsv4cpu.slot_mapping(positions, req, table, 64)
        window, _ = dsv4cpu.swa_window_indices(positions, req, table, 4, 64)  # lens not given
        return slots, window, dsv4cpu.short_context_topk(positions)

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="inductor")(positions, req, table)
    for a, b in zip(step(positions, req, table), compiled):
        assert fixtures.same_bytes(a, b)


@needs_compile
def test_meta_tensors_give_the_output_shapes():
    """The wrappers allocate on the inputs' device: meta inputs give meta outputs of the
    documented shapes without computing."""
    meta = {"device": "meta"}
    q = torch.empty(3, 2, 512, dtype=torch.bfloat16, **meta)
    kv = torch.empty(1, 512, dtype=torch.bfloat16, **meta)
    positions = torch.empty(3, dtype=torch.int64, **meta)
    cache = torch.empty(4, dsv4cpu.fp8_ds_mla_page_bytes(64), dtype=torch.uint8, **meta)
    cos_sin = torch.empty(8, 64, **meta)
    _, q_out = dsv4cpu.fused_qnorm_rope_kv_insert(q, kv, positions, positions[:1], cache,
                                                  cos_sin, 16, 1e-6, 64)
    assert q_out.device.type == "meta" and tuple(q_out.shape) == (3, 16, 512)
    assert q_out.dtype == torch.bfloat16
    req = torch.empty(3, dtype=torch.int32, **meta)
    table = torch.empty(2, 5, dtype=torch.int32, **meta)
    indices, _ = dsv4cpu.swa_window_indices(positions, req, table, 128, 64)
    assert tuple(indices.shape) == (3, 128) and indices.dtype == torch.int64
    gather = dsv4cpu.compressor_window_slots(positions, req, table, 64, 4, True)
    assert tuple(gather.shape) == (3, 8)
    logits = dsv4cpu.fp8_paged_mqa_logits(
        torch.empty(2, 64, 128, dtype=dsv4cpu.FP8_DTYPE, **meta),
        torch.empty(4, dsv4cpu.indexer_k_page_bytes(64), dtype=torch.uint8, **meta),
        torch.empty(2, 64, **meta), torch.empty(2, dtype=torch.int32, **meta),
        torch.empty(2, 4, dtype=torch.int32, **meta), 64, 300)
    assert tuple(logits.shape) == (2, 300) and logits.dtype == torch.float32
    raw, pages = dsv4cpu.topk_transform_512(torch.empty(5, 700, **meta),
                                            torch.empty(5, dtype=torch.int32, **meta),
                                            torch.empty(5, 11, dtype=torch.int32, **meta), 64)
    assert tuple(raw.shape) == tuple(pages.shape) == (5, 512)


@needs_compile
@pytest.mark.parametrize("op", TENSOR_OPS)
def test_meta_tensors_are_accepted(op):
    """Every op runs its fake kernel on meta tensors: nothing computed, the returned tensors
    meta (sizes that depend on the data: symbols of the fake mode's shape environment)."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    arguments = {k: v.to("meta") if isinstance(v, torch.Tensor) else v
                 for k, v in sample(op).items()}
    with torch._subclasses.fake_tensor.FakeTensorMode(allow_non_fake_inputs=True,
                                                      shape_env=ShapeEnv()):
        result = getattr(ops, op)(**arguments)
    for v in tensors_of({}, result):
        if isinstance(v, torch.Tensor):
            assert v.device.type == "meta"


def test_errors_keep_their_types_under_compile():
    """Under torch.compile a bad argument raises the built-in class torch carries (IndexError,
    ValueError) with the dsv4cpu line, from which errors.from_exception rebuilds the typed
    error; eager, the wrapper raises the typed error."""
    if COMPILE is None or OPCHECK is None:
        pytest.skip(f"torch {torch.__version__}: no torch.compile with fake kernels")
    local = torch.tensor([[0, 5, -1], [3, 4, 9]])
    req = torch.tensor([0, 1], dtype=torch.int32)
    table = torch.tensor([[7, 2, 1], [4, 0, 3]], dtype=torch.int32)
    slots = torch.empty(2, 3, dtype=torch.int64)

    def call(local, req, table, slots):
        ops.map_local_to_global_slots(local, req, table, 3, slots)
        return slots

    torch._dynamo.reset()
    with pytest.raises(Exception) as e:
        torch.compile(call, fullgraph=True, backend="inductor")(local, req, table, slots)
    typed = dsv4cpu.errors.from_exception(e.value)
    assert type(typed) is dsv4cpu.IndexError and typed.index == (1, 2)
