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
    each parameter by keyword or not (so duplicates and missing required ones occur), now and
    then an unknown keyword; every value a distinct object."""
    signature = WRAPPERS[op].__signature__
    bind = _binder(signature)
    positional = [n for n, p in signature.parameters.items()
                  if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    rng = random.Random(op)
    outcomes = set()
    for _ in range(300):
        args = tuple(object() for _ in range(rng.randint(0, len(positional) + 1)))
        kwargs = {n: object() for n in signature.parameters if rng.random() < 0.5}
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
