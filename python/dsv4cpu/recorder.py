"""Records calls of any op callable as ``dsv4cpu-fixture/1`` files, ready for ``dsv4cpu-verify``
and ``python3 -m dsv4cpu.conformance``.

    kernel = dsv4cpu.recorder.record(torch.ops.dsv4cpu.map_local_to_global_slots, "recorded")
    kernel(local_indices, req_idx, block_table, 4, slots)   # writes recorded/map_local_..._00000

The callable may be an engine's own kernel (a ``torch.ops`` operator or a Python function): give
the dsv4cpu ``op`` name and ``names`` mapping its argument names to the specification's. Each
recorded call stores the input tensors as they were before the call, the tensors the call wrote
(``Tensor(a!)`` in a torch schema, ``inplace`` names, and any tensor whose bytes changed) as
``expected.<name>`` after it (outputs written completely, ``outputs``, only there), the returned
values as ``expected.<name>`` (integers as I64[1]) and the scalar arguments as metadata. Tensors are
stored C-contiguous. A call that raises is not recorded.
"""
import inspect
import os

import torch

from . import fixtures
from ._extension import FP8_ARGUMENTS, is_written, ops, schema
from ._wrappers import RESULTS, SPECS

#: Arguments of the dsv4cpu operators that select how, not what, to compute; never recorded.
OPTION_NAMES = ("impl", "variant", "num_threads", "fresh_outputs")


def _names_of_results(op):
    """dsv4cpu's names of what the op gives back: its returns, or for an op without returns the
    arguments it writes (what its ``dsv4cpu.<op>`` wrapper returns); () for another op."""
    function = getattr(ops, op, None) if op in FP8_ARGUMENTS else None
    sch = schema(function) if function is not None else None
    if sch is None:
        return ()
    return tuple(r.name for r in sch.returns) or tuple(a.name for a in sch.arguments
                                                       if is_written(a))


def _snapshot(t):
    return t.detach().clone().contiguous()


class Recorder:
    """A callable that calls ``function`` and writes every ``every``-th call (the first included)
    as a fixture of ``op`` into ``directory`` (``<op>_<n>.safetensors``, n counting recorded
    calls). ``paths`` lists the files written, ``calls`` counts the calls.

    Options (all keyword-only but ``op``):

    - ``op``: the dsv4cpu op name the fixtures carry (default: the torch operator's name, or
      the function's ``__name__``).
    - ``every``: record every ``every``-th call (default 1: all; values below 1 count as 1).
    - ``names``: dict mapping the function's argument (and result) names to the
      specification's, for an engine kernel whose names differ.
    - ``outputs``: names (the specification's) of arguments the call writes completely: stored
      only as ``expected.<name>``, not as inputs (default: the outputs the ``dsv4cpu.<op>``
      wrapper allocates; ``()`` for none).
    - ``inplace``: further names of arguments the call updates in place (stored before the call
      as inputs and after it as ``expected.<name>``); a torch operator's ``Tensor(a!)``
      arguments are included, and any tensor whose bytes changed is recorded as written.
    - ``returns``: the names, in order, of the values the function returns (a tuple, list or a
      single value), as ``expected.<name>``; needed when the function is not a torch operator
      with named returns and not an op whose dsv4cpu results the package knows. A dict result
      is recorded by its keys, and returned values that are the call's own arguments (a
      wrapper returning its outputs) are recorded as those arguments.
    - ``fp8``: further tensor names whose uint8 values are e4m3fn codes (stored as F8_E4M3;
      the op's own fp8 arguments are known).
    - ``description``: the fixtures' ``description`` text.
    """

    def __init__(self, function, directory, op=None, *, every=1, names=None, outputs=None,
                 inplace=(), returns=None, fp8=(), description=None):
        self.function = function
        self.directory = str(directory)
        self.schema = schema(function)
        if op is None:
            op = self.schema.name.split("::")[-1] if self.schema is not None else function.__name__
        self.op = op
        self.every = max(int(every), 1)
        self.names = dict(names or {})
        self.outputs = set(outputs if outputs is not None else SPECS.get(op, ("", {}))[1])
        self.inplace = set(inplace)
        if self.schema is not None:
            self.inplace |= {a.name for a in self.schema.arguments if is_written(a)}
        self.returns = tuple(returns) if returns is not None else None
        self.fp8 = tuple(fp8)
        self.description = description
        self.calls = 0
        self.paths = []

    def _bind(self, args, kwargs):
        """The call's arguments by the function's names."""
        if self.schema is not None:
            names = [a.name for a in self.schema.arguments]
            bound = dict(zip(names, args))
            bound.update(kwargs)
            return bound
        return dict(inspect.signature(self.function).bind(*args, **kwargs).arguments)

    def _returned(self, result, arguments):
        """The returned values by fixture name; returned arguments (a wrapper returning the
        buffers it wrote) are recorded as arguments."""
        if result is None:
            return {}
        if isinstance(result, dict):
            return dict(result)
        values = list(result) if isinstance(result, (tuple, list)) else [result]
        if all(any(v is a for a in arguments) for v in values):
            return {}
        names = self.returns
        if names is None and self.schema is not None:
            names = tuple(r.name for r in self.schema.returns)
        if not names or not all(names):
            names = _names_of_results(self.op)
        if len(names) != len(values):
            raise ValueError(f"recording {self.op}: {len(values)} returned value(s), names "
                             f"{list(names)}; pass returns=(...)")
        returned = dict(zip(names, values))
        if self.schema is not None and self.schema.name == "dsv4cpu::" + self.op:
            returned = RESULTS.get(self.op, dict)(returned)  # as the wrapper gives them
        return returned

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if (self.calls - 1) % self.every:
            return self.function(*args, **kwargs)
        bound = self._bind(args, kwargs)
        before = {n: _snapshot(v) for n, v in bound.items() if isinstance(v, torch.Tensor)}
        result = self.function(*args, **kwargs)
        inputs, expected, scalars = {}, {}, {}
        for name, value in bound.items():
            fixture_name = self.names.get(name, name)
            if isinstance(value, torch.Tensor):
                after = _snapshot(value)
                written = (name in self.inplace or fixture_name in self.outputs
                           or not fixtures.same_bytes(before[name], after))
                if fixture_name not in self.outputs:
                    inputs[fixture_name] = before[name]
                if written:
                    expected[fixture_name] = after
            elif value is not None and name not in OPTION_NAMES:
                scalars[fixture_name] = value
        for name, value in self._returned(result, list(bound.values())).items():
            name = self.names.get(name, name)
            if isinstance(value, torch.Tensor):
                expected[name] = _snapshot(value)
            elif isinstance(value, (bool, int)):
                expected[name] = torch.tensor([int(value)], dtype=torch.int64)
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{self.op}_{len(self.paths):05d}.safetensors")
        fixtures.save(path, self.op, inputs, expected, fp8=self.fp8,
                      description=self.description, **scalars)
        self.paths.append(path)
        return result


def record(function, directory, op=None, **options):
    """A :class:`Recorder` of ``function`` writing into ``directory``; ``options`` are the
    Recorder's: ``every``, ``names``, ``outputs``, ``inplace``, ``returns``, ``fp8``,
    ``description``."""
    return Recorder(function, directory, op, **options)
