"""dsv4cpu from PyTorch: the library's ops as ``torch.ops.dsv4cpu.<op>`` and as the wrappers of
this package, fixtures (:mod:`dsv4cpu.fixtures`), the comparison contracts of numerics.md §11
(:func:`compare`), a recorder of op calls (:mod:`dsv4cpu.recorder`) and a conformance runner for
any implementation (``python3 -m dsv4cpu.conformance``).
"""
import contextlib
import json

from . import _fakes, errors, sizes  # noqa: F401  (_fakes: registers the fake kernels)
from ._extension import FP8_DTYPE, VERSION, tools as _tools
from .errors import Error, IndexError, NonFiniteError, ShapeError, ValueError  # noqa: A004
from ._wrappers import WRAPPERS as _WRAPPERS

from .sizes import *  # noqa: E402,F403  (the size helpers of cache_sizes.hpp)

globals().update(_WRAPPERS)

#: The library's version, "MAJOR.MINOR.PATCH": ``dsv4cpu::version()`` of the library loaded.
__version__ = VERSION


def registered_ops():
    """Every op of the library's registry with its variants in this CPU's order of preference
    (the reference ``ref`` last; the first available one is what a call runs by default,
    docs/cpp-api.md "Which variant runs"): a list of dicts ``{"name", "variants": [{"name", "role",
    "available", "highway", "isa", "target"}]}``. ``role`` is ``"reference"`` or
    ``"optimized"``; a ``highway`` variant runs on the best Highway target compiled in and
    supported (``target``, as of this call), otherwise ``isa`` names the fixed ISA it is built for
    (``"avx512bf16"``, ``"amx"``) or is empty for portable code."""
    return json.loads(_tools._registered_ops())


def runs(op):
    """The runs of ``op`` that ``dsv4cpu-verify --impl all`` makes: a Highway variant once per
    Highway target compiled in and supported here, a fixed-ISA variant once when its ISA is here,
    the others once. A list of dicts ``{"label", "variant", "target", "target_bits"}``
    (``variant`` as in :func:`registered_ops`), followed by one dict ``{"label", "variant",
    "absent", "required"}`` per fixed-ISA variant this machine cannot run: ``absent`` says why,
    ``required`` that ``/proc/cpuinfo`` or ``DSV4CPU_REQUIRE_ISA`` demands its ISA. Call a run
    with ``variant=run["variant"]["name"]`` inside ``highway_target(run)``."""
    return json.loads(errors.call(_tools._runs, op))


@contextlib.contextmanager
def highway_target(target):
    """Forces Highway dispatch, for the whole process while the block runs, to ``target``: a run
    of :func:`runs` (its ``target_bits``), or a Highway target name such as ``"AVX2"`` (one of
    the targets compiled in and supported here). Restores the dispatch in force before. Not for
    concurrent use: the dispatch is process-wide."""
    if isinstance(target, dict):
        bits = target.get("target_bits", 0)
    else:
        found = {r["target"]: r["target_bits"] for o in registered_ops()
                 for r in runs(o["name"]) if r.get("target_bits")}
        if target not in found:
            raise ValueError(f"target = {target}: not a Highway target compiled in and "
                             f"supported here (expected one of {', '.join(sorted(found))})",
                             "highway_target", "target", (), str(target))
        bits = found[target]
    before = _tools._pin_highway_target(bits)
    try:
        yield
    finally:
        _tools._pin_highway_target(before)


from .fixtures import Verdict, compare  # noqa: E402  (needs the wrappers above)
from . import fixtures, recorder  # noqa: E402

__all__ = ["__version__", "Error", "ShapeError", "IndexError", "ValueError", "NonFiniteError",
           "FP8_DTYPE",
           "registered_ops", "runs", "highway_target", "compare", "Verdict", "errors",
           "fixtures", "recorder", "sizes",
           *sizes.__all__, *sorted(_WRAPPERS)]
