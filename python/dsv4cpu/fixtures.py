"""``dsv4cpu-fixture/1`` files (spec fixtures.md) from and to torch tensors, and the comparison
contracts of numerics.md §11.

The safetensors reader and writer, the metadata grammar (:func:`scalar`) and the contracts are the
C++ ones of ``dsv4cpu-verify``: a file this module writes is read by the verifier exactly as
written, and :func:`compare` gives the verifier's verdict.

fp8 (F8_E4M3) tensors load as ``torch.float8_e4m3fn`` where torch has it, else as ``torch.uint8``
with their names in :attr:`Fixture.fp8`; :func:`save` writes uint8 tensors as F8_E4M3 when their
name (or the argument of an ``expected.<name>``) holds fp8 codes for the op, or is listed in
``fp8``.
"""
import collections
import math

import torch

from . import errors
from ._extension import FP8_ARGUMENTS, tools

FORMAT = "dsv4cpu-fixture/1"
#: The kinds of metadata values of :func:`scalar`.
KINDS = ("integer", "real", "real32", "boolean")
#: Metadata keys that are not scalar arguments of the op (fixtures.md).
RUNNER_KEYS = ("format", "op", "description", "compare", "expected_error")


class Fixture:
    """One loaded fixture: ``path``, ``op``, ``tensors`` (every tensor by its file name,
    ``expected.*`` included), ``metadata`` (str to str) and ``fp8`` (names of F8_E4M3 tensors)."""

    def __init__(self, path, tensors, metadata, fp8):
        self.path = path
        self.tensors = dict(tensors)
        self.metadata = dict(metadata)
        self.fp8 = set(fp8)

    @property
    def op(self):
        """The op's name (metadata ``op``)."""
        return self.metadata.get("op", "")

    @property
    def inputs(self):
        """The input tensors by argument name (in-place buffers with their content before)."""
        return {k: v for k, v in self.tensors.items() if not k.startswith("expected.")}

    @property
    def expected(self):
        """The expected tensors, by output name (without the ``expected.`` prefix)."""
        return {k[9:]: v for k, v in self.tensors.items() if k.startswith("expected.")}

    @property
    def scalars(self):
        """The scalar arguments (metadata without format, op, description, compare and
        expected_error), as text."""
        return {k: v for k, v in self.metadata.items() if k not in RUNNER_KEYS}

    @property
    def expected_error(self):
        """The class the call must raise (metadata ``expected_error``), or ""."""
        return self.metadata.get("expected_error", "")

    def __repr__(self):
        return f"Fixture({self.path!r}, op={self.op!r})"


def same_bytes(a, b):
    """True when two tensors have one dtype and shape and equal bytes (NaN payloads included)."""
    def flat(t):
        return t.contiguous().view(-1).view(torch.uint8)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(flat(a), flat(b))


def load(path):
    """Reads a safetensors file (the verifier's rules: a malformed file, or a path that is not a
    regular file of at most 4 GiB, raises RuntimeError) into a :class:`Fixture`."""
    tensors, metadata, fp8 = tools._load(str(path))
    return Fixture(str(path), tensors, metadata, fp8)


def scalar(kind, name, text):
    """The metadata value ``text`` of key ``name`` read as ``kind`` (:data:`KINDS`: an ``int``, a
    ``float``, a ``float`` rounded once to fp32, a ``bool``) by the verifier's own parser, the
    grammar of docs/conformance.md (an integer is ``-?[0-9]+``, nothing else). Text outside it
    raises RuntimeError with the verifier's message (``scalar <name> = '<text>' is not ...``)."""
    if kind not in KINDS:
        raise ValueError(f"kind '{kind}': expected one of {', '.join(KINDS)}")
    return getattr(tools, "_" + kind)(name, text)


def scalar_text(value):
    """A scalar argument as fixture text: integers in decimal, booleans 1/0, reals as the
    shortest text that reads back as the same binary64, strings as they are."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def _fp8_names(op, fp8):
    names = set(fp8) | set(FP8_ARGUMENTS.get(op, ()))
    return sorted(names | {"expected." + n for n in names})


def save(path, op, inputs, expected, *, fp8=(), description=None, compare=None,
         expected_error=None, **scalars):
    """Writes a fixture of ``op``: ``inputs`` and ``expected`` are dicts of tensors by argument
    and output name (an in-place buffer appears in both: its content before and after the call),
    ``scalars`` the scalar arguments (None omitted). Tensors are stored C-contiguous."""
    tensors = {name: t for name, t in inputs.items()}
    tensors.update({"expected." + name: t for name, t in expected.items()})
    metadata = {"format": FORMAT, "op": op}
    for key, value in (("description", description), ("compare", compare),
                       ("expected_error", expected_error), *scalars.items()):
        if value is not None:
            metadata[key] = scalar_text(value)
    errors.call(tools._save, str(path), tensors, metadata, _fp8_names(op, fp8))


Verdict = collections.namedtuple("Verdict", "passed detail")
Verdict.__doc__ = ("A comparison's outcome: ``passed`` and ``detail`` (the worst difference "
                   "when it passes, the first offending element when it fails). True iff passed.")
Verdict.__bool__ = lambda self: bool(self.passed)


def check(fixture, results):
    """The verifier's verdict on ``results`` (dict of tensors by output name, one for every
    ``expected.*`` tensor of the fixture) computed by any implementation of the fixture's op."""
    passed, detail = errors.call(tools._check, fixture.tensors, fixture.metadata,
                                 sorted(fixture.fp8), results)
    return Verdict(passed, detail)


def compare(op, name, expected, actual, inputs, *, fp8=(), compare=None, **scalars):
    """The comparison contract of numerics.md §11 that ``dsv4cpu-verify`` applies to output
    ``name`` of ``op``: ``actual`` against ``expected``, for the call with ``inputs`` (dict of
    tensors by argument name) and ``scalars``. The contracts of the compress ops, the logits and
    the indexer selection depend on the inputs (the entries written, the bound B computed from
    the codes); dsv4cpu validates the inputs first. ``compare`` is the fixture's override text
    (``"exact"``, ``"fp8_step=2"``, ...). Returns a :class:`Verdict`."""
    metadata = {"format": FORMAT, "op": op,
                **{k: scalar_text(v) for k, v in scalars.items() if v is not None}}
    if compare is not None:
        metadata["compare"] = compare
    fixture = Fixture("", {**inputs, "expected." + name: expected}, metadata, _fp8_names(op, fp8))
    return check(fixture, {name: actual})
