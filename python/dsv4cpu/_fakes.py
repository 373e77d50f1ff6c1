"""The fake (meta) kernels of the ``torch.ops.dsv4cpu`` operators, for torch.compile, meta
tensors and ``torch.library.opcheck``: ``torch.library.register_fake`` (torch >= 2.4) or
``impl_abstract`` (2.1 - 2.3); older torch runs the ops eagerly only.

An op that writes its outputs into arguments (``Tensor(a!)``) and returns nothing needs no more
than a kernel that returns None: every op of that form gets it from its schema. An op that returns
values has its kernel in ``FAKES``; results whose size depends on the data are the fake context's
dynamic sizes. An op without a tensor argument is not traced through its fake kernel (it runs for
every dispatch key). An op that torch cannot functionalize itself (an argument named ``mode``)
has a functional twin ``torch.ops._dsv4cpu.<op>_functional``, whose fake kernel is here too, as
is that of the overload ``inverse_gptj_rope_o_proj.functional`` (its output returned).
"""
import torch

from ._extension import FP8_ARGUMENTS, is_written, ops, schema, tools

_register = getattr(torch.library, "register_fake", None) or getattr(torch.library,
                                                                    "impl_abstract", None)


def _dynamic():
    return torch.library.get_ctx().new_dynamic_size()


def _split(*_, **__):
    return tuple(_dynamic() for _ in range(4))


def _indexer_metadata(query_start_loc, seq_lens, block_table, block_size, next_n, slot_mapping,
                      **_):
    num_decodes = _dynamic()
    split = tuple(seq_lens.new_empty((1,), dtype=torch.int64) for _ in range(4))
    i32 = torch.int32
    chunk = seq_lens.new_empty((_dynamic(),), dtype=torch.int64)
    arrays = tuple(seq_lens.new_empty((_dynamic(),), dtype=i32) for _ in range(5))
    return (*split, seq_lens.new_empty(seq_lens.shape[:1], dtype=i32),
            seq_lens.new_empty((num_decodes,), dtype=i32),
            seq_lens.new_empty((num_decodes, 1 if next_n is None else next_n), dtype=i32),
            chunk, *arrays)


def _prefill_chunks(compressed_lens, *_, **__):
    return compressed_lens.new_empty((_dynamic(), 4), dtype=torch.int64)


#: The fake kernels of the ops that return values.
FAKES = {
    "split_decodes_and_prefills": _split,
    "indexer_metadata": _indexer_metadata,
    "split_indexer_prefill_chunks": _prefill_chunks,
    "c128a_compact_width": lambda positions, **_: _dynamic(),
}


def _writes_only(*_, **__):
    return None


def _takes_tensors(sch):
    return any("Tensor" in str(a.type) for a in sch.arguments)


def _twin(sch):
    """The fake kernel of the functional twin ``_dsv4cpu::<op>_functional`` of the op of schema
    ``sch`` (its written arguments read, their new values returned)."""
    names = [a.name for a in sch.arguments]
    written = [a.name for a in sch.arguments if is_written(a)]

    def kernel(*args, **kwargs):
        bound = {**dict(zip(names, args)), **kwargs}
        values = tuple(None if bound.get(n) is None else torch.empty_like(bound[n])
                       for n in written)
        return values[0] if len(values) == 1 else values
    return kernel


def register():
    """Registers the fake kernel of every op of ``torch.ops.dsv4cpu`` with a tensor argument
    (nothing on a torch without fake kernels)."""
    if _register is None:
        return
    for name in FP8_ARGUMENTS:
        sch = schema(getattr(ops, name))
        if not _takes_tensors(sch):
            continue
        kernel = FAKES.get(name) if sch.returns else _writes_only
        if kernel is None:
            raise RuntimeError(f"dsv4cpu::{name} returns values but has no fake kernel")
        _register(f"dsv4cpu::{name}")(kernel)
        if hasattr(getattr(ops, name), "no_options"):
            _register(f"dsv4cpu::{name}.no_options")(kernel)
        if hasattr(tools, name + "_functional"):
            _register(f"_dsv4cpu::{name}_functional")(_twin(sch))
    _register("dsv4cpu::inverse_gptj_rope_o_proj.functional")(
        lambda o, positions, cos_sin_cache, rope_dim: o.new_empty(o.shape, dtype=torch.float32))


register()
