"""dsv4cpu from PyTorch: the library's ops as ``torch.ops.dsv4cpu.<op>`` and as the wrappers of
this package, fixtures (:mod:`dsv4cpu.fixtures`), the comparison contracts of numerics.md §11
(:func:`compare`), a recorder of op calls (:mod:`dsv4cpu.recorder`) and a conformance runner for
any implementation (``python3 -m dsv4cpu.conformance``).
"""
import json

from . import errors
from ._extension import FP8_DTYPE, ops as _ops
from .errors import Error, IndexError, NonFiniteError, ShapeError, ValueError  # noqa: A004
from ._wrappers import WRAPPERS as _WRAPPERS

globals().update(_WRAPPERS)


def registered_ops():
    """Every op of the library's registry with its variants in order of preference (the
    reference ``ref`` last): a list of dicts ``{"name", "variants": [{"name", "available",
    "target"}]}``, availability and Highway targets as of this call."""
    return json.loads(_ops._registered_ops())


from .fixtures import Verdict, compare  # noqa: E402  (needs the wrappers above)
from . import fixtures, recorder  # noqa: E402

__all__ = ["Error", "ShapeError", "IndexError", "ValueError", "NonFiniteError", "FP8_DTYPE",
           "registered_ops", "compare", "Verdict", "errors", "fixtures", "recorder",
           *sorted(_WRAPPERS)]
