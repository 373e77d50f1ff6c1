"""Every dsv4cpu::Error class reaches Python as its dsv4cpu class, with the C++ message and fields,
and as the built-in class torch.ops callers see."""
import builtins

import pytest
import torch

import dsv4cpu
from dsv4cpu import errors, fixtures
from dsv4cpu._extension import ops, tools

from support import fixture

TABLE = torch.tensor([[7, 2, 1], [4, 0, 3]], dtype=torch.int32)
REQ = torch.tensor([0, 1], dtype=torch.int32)


def test_index_error():
    with pytest.raises(dsv4cpu.IndexError) as e:
        dsv4cpu.map_local_to_global_slots(torch.tensor([[0, 5, -1], [3, 4, 9]]), REQ, TABLE, 3)
    assert isinstance(e.value, builtins.IndexError) and isinstance(e.value, dsv4cpu.Error)
    assert not isinstance(e.value, builtins.ValueError)
    assert str(e.value) == ("dsv4cpu::map_local_to_global_slots: local_indices[1, 2] = 9: "
                            "references block-table column 3 beyond the table "
                            "(expected column < 3)")
    assert (e.value.op, e.value.argument, e.value.index, e.value.value) == \
        ("map_local_to_global_slots", "local_indices", (1, 2), "9")


def test_shape_error():
    with pytest.raises(dsv4cpu.ShapeError) as e:
        dsv4cpu.map_local_to_global_slots(torch.zeros(2, 3, dtype=torch.float32), REQ, TABLE, 4)
    assert isinstance(e.value, builtins.ValueError) and e.value.argument == "local_indices"
    assert not isinstance(e.value, dsv4cpu.ValueError)
    assert str(e.value).startswith("dsv4cpu::map_local_to_global_slots: local_indices: dtype F32")


def test_value_error():
    with pytest.raises(dsv4cpu.ValueError) as e:
        dsv4cpu.map_local_to_global_slots(torch.zeros(2, 3, dtype=torch.int64), REQ, TABLE, 0)
    assert isinstance(e.value, builtins.ValueError) and e.value.argument == "block_size"
    assert not isinstance(e.value, dsv4cpu.NonFiniteError)
    assert e.value.value == "0"


def test_non_finite_error():
    f = fixtures.load(fixture("save_partial_states", "bad_score_nan"))
    t = f.inputs
    state = t["state_cache"].clone()
    with pytest.raises(dsv4cpu.NonFiniteError) as e:
        dsv4cpu.save_partial_states(t["kv"], t["score"], t["ape"], t["positions"], state,
                                    t["slot_mapping"])
    assert isinstance(e.value, dsv4cpu.ValueError) and isinstance(e.value, builtins.ValueError)
    assert e.value.argument == "score" and e.value.value == "nan"
    assert fixtures.same_bytes(state, t["state_cache"])  # nothing written


def test_options_are_checked():
    args = (torch.zeros(2, 3, dtype=torch.int64), REQ, TABLE, 4)
    with pytest.raises(dsv4cpu.ValueError, match="impl = fast"):
        dsv4cpu.map_local_to_global_slots(*args, impl="fast")
    with pytest.raises(dsv4cpu.ValueError) as e:
        dsv4cpu.map_local_to_global_slots(*args, variant="avx512bf16")
    assert "avx512bf16" in str(e.value)
    with pytest.raises(dsv4cpu.ValueError, match="num_threads"):
        dsv4cpu.map_local_to_global_slots(*args, num_threads=-1)
    with pytest.raises(dsv4cpu.ValueError, match="mode"):
        dsv4cpu.topk_transform_512(torch.zeros(1, 8), torch.tensor([8], dtype=torch.int32),
                                   mode="fastest")


def test_variant_is_the_whole_name():
    """A variant name with a NUL inside is no variant: the wrappers, the raw op and
    selected_variant raise the unknown-variant ValueError naming the whole text, and nothing is
    written."""
    args = (torch.zeros(2, 3, dtype=torch.int64), REQ, TABLE, 4)
    for name, shown in (("ref\0junk", "ref\\x00junk"), ("ref\0", "ref\\x00")):
        message = (f"dsv4cpu::map_local_to_global_slots: variant = {shown}: unknown variant, "
                   "offered by no op (expected one of ")
        slots = torch.full((2, 3), -7, dtype=torch.int64)
        with pytest.raises(dsv4cpu.ValueError) as e:
            dsv4cpu.map_local_to_global_slots(*args, slots=slots, variant=name)
        assert str(e.value).startswith(message) and e.value.value == name, str(e.value)
        assert bool((slots == -7).all())
        with pytest.raises(builtins.ValueError) as e:
            ops.map_local_to_global_slots(*args, slots, variant=name)
        assert type(errors.from_exception(e.value)) is dsv4cpu.ValueError
        with pytest.raises(dsv4cpu.ValueError) as e:
            errors.call(tools.selected_variant, "map_local_to_global_slots", variant=name)
        assert str(e.value).startswith(message)
    assert tools.selected_variant("map_local_to_global_slots", variant="ref") == "ref"


def test_raw_torch_ops_raise_builtin_classes_with_the_fields():
    """Callers of torch.ops.dsv4cpu get IndexError / ValueError; from_exception rebuilds the
    dsv4cpu class from the message's last line."""
    slots = torch.empty(2, 3, dtype=torch.int64)
    with pytest.raises(builtins.IndexError) as e:
        ops.map_local_to_global_slots(torch.tensor([[0, 5, -1], [3, 4, 9]]), REQ, TABLE, 3, slots)
    typed = errors.from_exception(e.value)
    assert type(typed) is dsv4cpu.IndexError and typed.index == (1, 2)
    assert str(e.value).startswith(str(typed) + "\n[dsv4cpu.IndexError] {")
    with pytest.raises(builtins.ValueError) as e:
        ops.map_local_to_global_slots(torch.zeros(2, 3), REQ, TABLE, 4, slots)
    assert type(errors.from_exception(e.value)) is dsv4cpu.ShapeError
    assert errors.from_exception(RuntimeError("not from dsv4cpu")) is None


def test_other_torch_errors_pass_through():
    with pytest.raises(RuntimeError, match="Expected a value of type 'int'"):
        dsv4cpu.map_local_to_global_slots(torch.zeros(2, 3, dtype=torch.int64), REQ, TABLE, "4")
