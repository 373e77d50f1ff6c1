"""The wrappers ``dsv4cpu.<op>``: their argument binding is ``inspect.Signature.bind``'s (with
the defaults applied), for calls that bind and for calls that do not, and the options they are
given reach the op."""
import inspect
import random

import pytest
import torch

import dsv4cpu
from dsv4cpu import errors
from dsv4cpu._wrappers import WRAPPERS, _binder


def inspect_bind(signature, args, kwargs):
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        return f"TypeError: {exc}"
    bound.apply_defaults()
    return dict(bound.arguments)


def fast_bind(bind, args, kwargs):
    try:
        return bind(args, kwargs)
    except TypeError as exc:
        return f"TypeError: {exc}"


@pytest.mark.parametrize("op", sorted(WRAPPERS))
def test_binding_is_inspects(op):
    """Random calls: a prefix of the positional parameters (one too many at most) by position,
    the others by keyword or not (half the calls give every required one, the others may give one
    twice or miss one), now and then an unknown keyword; every value a distinct object."""
    signature = WRAPPERS[op].__signature__
    bind = _binder(signature)
    positional = [n for n, p in signature.parameters.items()
                  if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    rng = random.Random(op)
    outcomes = set()
    for _ in range(300):
        args = tuple(object() for _ in range(rng.randint(0, len(positional) + 1)))
        complete = rng.random() < 0.5
        kwargs = {n: object() for i, (n, p) in enumerate(signature.parameters.items())
                  if (complete and i >= len(args) and p.default is inspect.Parameter.empty)
                  or rng.random() < (0.3 if complete and i < len(args) else 0.5)}
        if complete and rng.random() < 0.8:  # no duplicates
            kwargs = {n: v for n, v in kwargs.items() if n not in positional[:len(args)]}
        if rng.random() < 0.1:
            kwargs["no_such_argument"] = object()
        want = inspect_bind(signature, args, kwargs)
        assert fast_bind(bind, args, kwargs) == want, (len(args), sorted(kwargs))
        outcomes.add(isinstance(want, dict))
    assert outcomes == {True, False}  # both kinds of call were tried


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
    nothing else, and not when the caller gave one, nor for an op with an in-place buffer."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.__name__.split(".")[0]
            if name in ("inverse_gptj_rope_o_proj", "save_partial_states"):
                self.calls[name] = kwargs.get("fresh_outputs", False)
            return func(*args, **kwargs)

    o = torch.randn(2, 3, 8).to(torch.bfloat16)
    positions = torch.tensor([1, 0])
    table = torch.randn(2, 4)
    seen = Seen()
    with seen:
        dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 4)
    assert seen.calls == {"inverse_gptj_rope_o_proj": True}
    with seen:
        dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 4, out=torch.empty(2, 3, 8))
    assert seen.calls == {"inverse_gptj_rope_o_proj": False}
    with seen:  # a value the caller gives stands
        dsv4cpu.inverse_gptj_rope_o_proj(o, positions, table, 4, fresh_outputs=False)
    assert seen.calls == {"inverse_gptj_rope_o_proj": False}
    with seen:
        dsv4cpu.save_partial_states(torch.randn(2, 128), torch.randn(2, 128), torch.randn(4, 128),
                                    torch.tensor([0, 1]), torch.zeros(2, 4, 256),
                                    torch.tensor([0, 1]))
    assert seen.calls["save_partial_states"] is False
