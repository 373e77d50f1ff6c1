"""The wrappers ``dsv4cpu.<op>``: each is a function whose signature is the one its schema
implies (so Python binds its arguments as ``inspect.Signature.bind`` does), and the options they
are given reach the op."""
import inspect

import pytest
import torch

import dsv4cpu
from dsv4cpu import errors
from dsv4cpu._extension import is_written, ops, schema, tools
from dsv4cpu._wrappers import SPECS, WRAPPERS, _parameters


@pytest.mark.parametrize("op", sorted(WRAPPERS))
def test_signature_is_the_schemas(op):
    """Inputs and scalars in the schema's order with its defaults (None for an optional one),
    then keyword-only the outputs (None) and the options (``fresh_outputs``: None)."""
    sch = schema(getattr(ops, op, None) or getattr(tools, op))
    want = _parameters(sch, SPECS[op][1])
    assert inspect.signature(WRAPPERS[op]) == want
    kinds = [p.kind for p in want.parameters.values()]
    assert kinds == sorted(kinds)  # positional-or-keyword, then keyword-only
    assert [n for n in want.parameters if n not in SPECS[op][1]] == [a.name for a in sch.arguments
                                                                      if a.name not in SPECS[op][1]]
    for a in sch.arguments:
        p = want.parameters[a.name]
        if a.name in SPECS[op][1] or a.name == "fresh_outputs":
            assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None
        elif a.kwarg_only:
            assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default == a.default_value


def test_a_call_that_does_not_bind_raises_pythons_type_error():
    with pytest.raises(TypeError, match="rope_dim"):
        dsv4cpu.inverse_gptj_rope_o_proj(torch.zeros(1, 1, 2), torch.zeros(1), torch.zeros(1, 2))
    with pytest.raises(TypeError, match="no_such_argument"):
        dsv4cpu.save_partial_states(*[torch.zeros(1)] * 6, no_such_argument=1)
    with pytest.raises(TypeError, match="positional"):
        dsv4cpu.inverse_gptj_rope_o_proj(*[torch.zeros(1)] * 5)  # out is keyword-only


def test_a_call_by_position_and_one_by_keyword_agree():
    o = torch.randn(2, 3, 8).to(torch.bfloat16)
    positions = torch.tensor([1, 0])
    table = torch.randn(2, 4)
    by_position = dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 4)
    by_keyword = dsv4cpu.inverse_gptj_rope_o_proj(rope_dim=4, cos_sin_cache=table, o=o,
                                                  positions=positions, impl="reference")
    assert torch.equal(by_position, by_keyword)


def test_options_reach_the_op():
    """An option the wrapper is given is passed on (the wrapper passes only those that differ
    from the schema's defaults)."""
    o = torch.full((1, 2, 4), float("nan")).to(torch.bfloat16)
    positions = torch.tensor([0])
    table = torch.ones(1, 2)
    with pytest.raises(errors.NonFiniteError, match="o\\[0, 0, 0\\] = nan"):
        dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 2)
    out = dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 2, check_finite=False)
    assert out.shape == (1, 2, 4)
    with pytest.raises(errors.ValueError, match="no_such_variant"):
        dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 2, variant="no_such_variant")
    with pytest.raises(errors.ValueError, match="impl"):
        dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 2, impl="fastest")


def test_fresh_outputs_may_be_written_before_an_error():
    """``fresh_outputs=True`` reaches the op: the optimized kernel then checks while it writes,
    so an output the caller gave may hold rows written before the error (the error is the same);
    without it the output is untouched."""
    o = torch.randn(4, 2, 8).to(torch.bfloat16)
    o[3, 1, 5] = float("nan")
    positions = torch.tensor([0, 1, 0, 1])
    table = torch.randn(2, 4)
    messages = []
    for fresh in (False, True):
        out = torch.full((4, 2, 8), -7.0)
        with pytest.raises(errors.NonFiniteError) as e:
            dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 4, out=out, variant="hwy",
                                             num_threads=1, fresh_outputs=fresh)
        messages.append(str(e.value))
        assert bool((out[0] == -7.0).all()) is not fresh
    assert messages[0] == messages[1]
    assert "o[3, 1, 5] = nan" in messages[0]


def test_the_wrapper_says_when_it_allocated_every_output():
    """The wrapper passes fresh_outputs=True when it allocated the outputs of an op that writes
    nothing else, and not when the caller gave one, nor for an op with an in-place buffer. At the
    default options inverse_gptj_rope_o_proj's wrapper calls .functional instead, which allocates
    its output and so checks while it writes it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.__name__.split(".")[0]
            if name in ("inverse_gptj_rope_o_proj", "save_partial_states"):
                self.calls[name] = (func._overloadname, kwargs.get("fresh_outputs", False))
            return func(*args, **kwargs)

    o = torch.randn(2, 3, 8).to(torch.bfloat16)
    positions = torch.tensor([1, 0])
    table = torch.randn(2, 4)
    calls = [({}, ("functional", False)),
             ({"check_finite": False}, ("default", True)),
             ({"out": torch.empty(2, 3, 8)}, ("no_options", False)),
             ({"fresh_outputs": False}, ("no_options", False)),  # a value the caller gives stands
             ({"fresh_outputs": True}, ("default", True))]
    for keywords, want in calls:
        seen = Seen()
        with seen:
            out = dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 4, **keywords)
        assert seen.calls == {"inverse_gptj_rope_o_proj": want}, keywords
        assert torch.equal(out, ops.inverse_gptj_rope_o_proj.functional(o, positions, table, 4))
    seen = Seen()
    with seen:
        dsv4cpu.save_partial_states(torch.randn(2, 128), torch.randn(2, 128), torch.randn(4, 128),
                                    torch.tensor([0, 1]), torch.zeros(2, 4, 256),
                                    torch.tensor([0, 1]))
    assert seen.calls["save_partial_states"] == ("no_options", False)


def test_functional_outputs_reuse_the_block_of_a_freed_output():
    """.functional places its output in the block of an output freed before it (torch.empty put
    each at a new address, memory no cache held: docs/decisions.md), with the same bytes; outputs
    alive at once never share a block, and a block of twice the size or more is not taken."""
    o = torch.randn(8, 64, 512).to(torch.bfloat16)
    positions, table = torch.arange(8), torch.randn(16, 64)

    def run(x):
        return ops.inverse_gptj_rope_o_proj.functional(x, positions[:len(x)], table, 64)

    first = run(o)
    want, address = first.clone(), first.data_ptr()
    del first
    second = run(o)
    assert second.data_ptr() == address
    assert torch.equal(second, want)
    third = run(o)  # the second is alive
    assert third.data_ptr() != address
    assert torch.equal(third, want)
    kept = {second.data_ptr(), third.data_ptr()}
    del second, third
    small = run(o[:2])  # a quarter of the kept blocks
    assert small.data_ptr() not in kept
    assert torch.equal(small, want[:2])
    assert run(o).data_ptr() in kept


def test_a_freed_outputs_block_outlives_outputs_of_other_sizes():
    """Between two calls of one op an engine's layer allocates outputs of several other sizes
    (the SWA insert's q_out, the logits, the top-k's indices): the first call's freed block is
    still kept for the second. Tensors of the block's size held meanwhile take any memory freed,
    so a block dropped from the list cannot come back by chance."""
    positions, table = torch.arange(64), torch.randn(64, 64)

    def run(tokens):
        o = torch.ones(tokens, 64, 512, dtype=torch.bfloat16)
        return ops.inverse_gptj_rope_o_proj.functional(o, positions[:tokens], table, 64)

    first = run(32)
    want, address = first.clone(), first.data_ptr()
    del first
    for tokens in (1, 2, 4, 8):  # each too small for the others' blocks, freed at once
        assert torch.equal(run(tokens), want[:tokens])
    held = [torch.empty(32, 64, 512) for _ in range(4)]
    again = run(32)
    assert again.data_ptr() == address and address not in {h.data_ptr() for h in held}
    assert torch.equal(again, want)


def test_large_wrapper_outputs_reuse_the_block_of_a_freed_output():
    """An output the wrapper allocates of REUSED_OUTPUT_BYTES or more takes the block of an output
    freed before it, as .functional's does (torch.empty faulted the attention's 256 MiB prefill
    `out` in anew on every call), with the op's bytes; a smaller one comes from torch.empty."""
    from dsv4cpu import _wrappers
    T = _wrappers.REUSED_OUTPUT_BYTES // (64 * 512 * 4)  # out: T · 64 · 512 float32
    o = torch.randn(T, 64, 512).to(torch.bfloat16)
    positions, table = torch.arange(T) % 16, torch.randn(16, 64)

    def run(x):  # the default overload: the wrapper allocates out
        return dsv4cpu.inverse_gptj_rope_o_proj(x, positions[:len(x)], table, 64,
                                                check_finite=False)

    want = ops.inverse_gptj_rope_o_proj.functional(o, positions, table, 64).clone()
    first = run(o)
    address = first.data_ptr()
    assert torch.equal(first, want)
    del first
    second = run(o)
    assert second.data_ptr() == address
    assert torch.equal(second, want)
    assert run(o).data_ptr() != address  # the second is alive
    shapes, real = [], tools._empty_output

    def seen(shape, dtype):
        shapes.append(tuple(shape))
        return real(shape, dtype)

    _wrappers.tools._empty_output = seen
    try:
        assert torch.equal(run(o[:T // 2]), want[:T // 2])
        assert torch.equal(run(o), want)
    finally:
        _wrappers.tools._empty_output = real
    assert shapes == [(T, 64, 512)]


@pytest.mark.skipif(getattr(torch.library, "opcheck", None) is None,
                    reason=f"torch {torch.__version__}: the fake kernels need "
                    "torch.library.register_fake (2.4 or newer)")
def test_compiled_wrappers_allocate_their_large_outputs_in_the_graph():
    """Under torch.compile the wrapper's outputs come from torch.empty, traced (fullgraph), at
    every size: the same bytes as eager."""
    from dsv4cpu import _wrappers
    T = _wrappers.REUSED_OUTPUT_BYTES // (64 * 512 * 4)
    o = torch.randn(T, 64, 512).to(torch.bfloat16)
    positions, table = torch.arange(T) % 16, torch.randn(16, 64)
    want = ops.inverse_gptj_rope_o_proj.functional(o, positions, table, 64)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: dsv4cpu.inverse_gptj_rope_o_proj(*a, check_finite=False),
                             fullgraph=True, backend="inductor")
    assert torch.equal(compiled(o, positions, table, 64), want)


def test_functional_is_the_op_with_its_output_returned():
    """inverse_gptj_rope_o_proj.functional: the op's arguments but ``out`` and the options, ``out``
    returned (float32, o's shape); the bytes the default overload writes, its errors."""
    full = ops.inverse_gptj_rope_o_proj.default._schema
    functional = ops.inverse_gptj_rope_o_proj.functional._schema
    assert [describe(a) for a in functional.arguments] == [
        describe(a) for a in full.arguments if not a.kwarg_only and a.name != "out"]
    assert [(r.name, str(r.type), is_written(r)) for r in functional.returns] == [
        ("out", "Tensor", False)]
    assert [op for op in WRAPPERS if hasattr(getattr(ops, op, None), "functional")] == [
        "inverse_gptj_rope_o_proj"]
    o = torch.randn(5, 3, 16).to(torch.float16)
    positions, table = torch.tensor([4, 0, 2, 1, 3]), torch.randn(6, 8)
    given = torch.empty(5, 3, 16)
    ops.inverse_gptj_rope_o_proj.default(o, positions, table, 8, given)
    result = ops.inverse_gptj_rope_o_proj.functional(o, positions, table, 8)
    assert result.dtype == torch.float32 and result.shape == o.shape
    assert result.data_ptr() not in (o.data_ptr(), given.data_ptr())
    assert torch.equal(result, given)
    o[2, 1, 3] = float("inf")
    messages = []
    for call in (lambda: ops.inverse_gptj_rope_o_proj.default(o, positions, table, 8,
                                                              torch.empty(5, 3, 16)),
                 lambda: ops.inverse_gptj_rope_o_proj.functional(o, positions, table, 8)):
        with pytest.raises(errors.NonFiniteError) as e:
            errors.call(call)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "o[2, 1, 3] = inf" in messages[0]
    with pytest.raises(errors.IndexError, match="positions\\[1\\] = 6"):
        errors.call(ops.inverse_gptj_rope_o_proj.functional, o, torch.tensor([0, 6, 0, 0, 0]),
                    table, 8)


def describe(argument):
    return (argument.name, str(argument.type), is_written(argument), argument.default_value)


def test_no_options_is_the_op_at_its_default_options():
    """Every op with options has the overload .no_options: the same arguments but the options,
    the same returns; it writes the bytes the default overload writes and raises its error."""
    with_options = [op for op in WRAPPERS if hasattr(getattr(ops, op, None), "no_options")]
    assert "save_partial_states" in with_options and "inverse_gptj_rope_o_proj" in with_options
    for op in with_options:
        full, plain = getattr(ops, op).default._schema, getattr(ops, op).no_options._schema
        assert [describe(a) for a in plain.arguments] == [describe(a) for a in full.arguments
                                                          if not a.kwarg_only], op
        assert [describe(r) for r in plain.returns] == [describe(r) for r in full.returns], op
    kv, score, ape = torch.randn(3, 128), torch.randn(3, 128), torch.randn(4, 128)
    positions, slots = torch.tensor([5, 6, 7]), torch.tensor([2, 0, 5])
    caches = [torch.zeros(2, 4, 256), torch.zeros(2, 4, 256)]
    ops.save_partial_states.default(kv, score, ape, positions, caches[0], slots)
    ops.save_partial_states.no_options(kv, score, ape, positions, caches[1], slots)
    assert torch.equal(caches[0], caches[1]) and bool(caches[0].any())
    score[1, 7] = float("inf")
    messages = []
    for overload in (ops.save_partial_states.default, ops.save_partial_states.no_options):
        with pytest.raises(errors.NonFiniteError) as e:
            errors.call(overload, kv, score, ape, positions, torch.zeros(2, 4, 256), slots)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "score[1, 7] = inf" in messages[0]


def test_the_wrapper_calls_no_options_at_the_default_options():
    """At the options' defaults (not given, or given as the defaults' own objects) the wrapper
    calls .no_options; any other option value goes to the default overload, by keyword."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self.calls.append((func._overloadname, sorted(kwargs)))
            return func(*args, **kwargs)

    args = (torch.randn(2, 128), torch.randn(2, 128), torch.randn(4, 128), torch.tensor([0, 1]),
            torch.zeros(2, 4, 256), torch.tensor([0, 1]))
    seen = Seen()
    with seen:
        dsv4cpu.save_partial_states(*args)
        dsv4cpu.save_partial_states(*args, check_finite=True, num_threads=None)
        dsv4cpu.save_partial_states(*args, check_finite=False)
        dsv4cpu.save_partial_states(*args, impl="reference", num_threads=1)
    assert seen.calls == [("no_options", []), ("no_options", []), ("default", ["check_finite"]),
                          ("default", ["impl", "num_threads"])]


def test_the_call_cost_benchmark_runs(tmp_path):
    """tools/bench/python_calls.py (the figures of docs/python.md) on every case and way of
    calling, with samples too short to mean anything."""
    import importlib.util
    import json
    import os

    from support import ROOT
    path = os.path.join(ROOT, "tools", "bench", "python_calls.py")
    spec = importlib.util.spec_from_file_location("python_calls", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    try:
        assert module.main(["--repetitions", "1", "--seconds", "0.001", "-o",
                            str(tmp_path / "calls.json")]) == 0
    finally:
        torch.set_num_threads(threads)
    results = json.loads((tmp_path / "calls.json").read_text())["results"]
    functional = ("wrapper_allocating", "functional")
    assert [(r["op"], r["call"]) for r in results] == [
        (op, way) for op in module.CASES for way in ("wrapper", "no_options", "default")
        + functional * (op == "inverse_gptj_rope_o_proj")]
    assert all(r["seconds"] > 0 for r in results)
    assert all(r["over_no_options"] == 1.0 for r in results if r["call"] == "no_options")
