"""The exceptions of dsv4cpu (bad-input.md §2), mirroring ``dsv4cpu::Error`` and its subclasses.

Every class carries the C++ message (``str(e)``, ``e.message``) and the fields ``op``,
``argument``, ``index`` (a tuple) and ``value``. ``ShapeError`` and ``ValueError`` are also the
built-in ``ValueError``, ``IndexError`` the built-in ``IndexError``.

Calls through ``torch.ops.dsv4cpu`` raise the built-in ``IndexError`` or ``ValueError`` whose
message ends with a line ``[dsv4cpu.<Kind>] {json}``; :func:`from_exception` rebuilds the typed
exception from it (the wrappers of this package do so for every call).
"""
import builtins
import json

_MARKER = "\n[dsv4cpu."


class Error(Exception):
    """Base of every dsv4cpu error: bad input found before any output byte was written."""

    kind = "Error"

    def __init__(self, message, op="", argument="", index=(), value=""):
        super().__init__(message)
        self.message = message
        self.op = op
        self.argument = argument
        self.index = tuple(index)
        self.value = value


class ShapeError(Error, builtins.ValueError):
    """Missing array, dtype, rank, shape, stride, overlap; a tensor not on the CPU."""

    kind = "ShapeError"


class IndexError(Error, builtins.IndexError):  # noqa: A001 - the name of bad-input.md §2
    """Index, slot, position, block id or length out of range; duplicate write slot."""

    kind = "IndexError"


class ValueError(Error, builtins.ValueError):  # noqa: A001 - the name of bad-input.md §2
    """Scalar argument outside its domain."""

    kind = "ValueError"


class NonFiniteError(ValueError):
    """NaN or ±inf where a finite value is required."""

    kind = "NonFiniteError"


CLASSES = {c.kind: c for c in (Error, ShapeError, IndexError, ValueError, NonFiniteError)}


def from_exception(exc):
    """The typed dsv4cpu error carried by an exception of a ``torch.ops.dsv4cpu`` call, or None."""
    text = str(exc)
    at = text.rfind(_MARKER)
    if at < 0:
        return None
    kind, _, payload = text[at + len(_MARKER):].partition("] ")
    cls = CLASSES.get(kind)
    try:
        fields = json.loads(payload)
    except builtins.ValueError:
        return None
    if cls is None:
        return None
    return cls(text[:at], fields["op"], fields["argument"], fields["index"], fields["value"])


def call(function, *args, **kwargs):
    """Calls a ``torch.ops.dsv4cpu`` operator, raising its errors as the typed dsv4cpu classes."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # torch raises IndexError, ValueError or RuntimeError
        typed = from_exception(exc)
        if typed is None:
            raise
        raise typed from None
