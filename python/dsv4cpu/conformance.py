"""Conformance of any implementation of the dsv4cpu ops against ``dsv4cpu-fixture/1`` files.

    python3 -m dsv4cpu.conformance [--impl reference|optimized|all] [--target MODULE]
        [--suffix SUFFIX] [--adapters MODULE]... [--report json|junit FILE]... PATH...

Without ``--target`` the fixtures run through ``torch.ops.dsv4cpu`` on the runs of
``dsv4cpu-verify`` (``--impl all``: every variant, a Highway variant once per Highway target
compiled in and supported here, forced while it runs; a fixed-ISA variant this machine lacks is
skipped, or failed where its ISA is required). With ``--target`` the runner imports MODULE (a
Python module, or ``torch.ops.<ns>``) and calls its function ``<op><SUFFIX>`` with the fixture's
arguments, matched by name: from the torch schema for a torch operator, else from
``inspect.signature``. Inputs are passed as copies, outputs the fixture expects are allocated from
the ``expected.*`` shapes and dtypes (pre-filled with bytes 0xA5) unless the function returns
them, scalars are converted to the parameter's type, and absent ones take dsv4cpu's default. The
results are judged by the verifier's contracts (numerics.md §11, :func:`dsv4cpu.fixtures.check`).

A case is skipped, not passed, when the target has no function for the op, no parameter for a
tensor or scalar the fixture holds, or raises :class:`Unsupported`. An adapter registered with
:func:`adapter` (in the target module or a module given by ``--adapters``) calls the target for one
op when names, order or dtypes differ. ``expected_error`` cases pass when the call raises (for
dsv4cpu: the named class or a subclass) and leaves every buffer unchanged.

Prints one line per case and variant (op, case, variant, PASS/FAIL/ERROR/SKIP, detail: the
verdicts of ``dsv4cpu-verify``), a per-op table and ``N passed, N failed`` last (errors count as
failed; ``, N skipped`` follows when a case was skipped); exits 0 only when no case failed and at
least one passed. Folders are walked as the verifier walks them (FIFOs, devices and sockets
skipped unopened), metadata values are read by the verifier's grammar, and a file that cannot be
judged gives an ERROR line with its reason, then the run goes on (docs/conformance.md).
"""
import argparse
import contextlib
import importlib
import inspect
import json
import math
import os
import stat
import sys
import xml.etree.ElementTree as ET

import torch

from . import errors, fixtures, highway_target, registered_ops, runs as library_runs
from . import selected_variant
from ._extension import FP8_ARGUMENTS, is_written, ops, schema
from ._wrappers import SPECS, output_shape

#: Fixture scalars that only shape the fixture's tensors (fixtures.md, docs/fixture-ops.md).
SHAPE_KEYS = ("state_block_size", "num_tokens_padded", "width")
GARBAGE = 0xA5
#: dsv4cpu's dtype names (fixtures.md) of the torch dtypes of fixture tensors.
_DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
                torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64"}
#: The largest extent of an output the runner shapes for an expected_error case from the op's
#: rule (dsv4cpu-verify's): a larger or negative one is 0, and the op reports the scalar behind it.
MAX_FALLBACK_EXTENT = 1 << 20


class Unsupported(Exception):
    """Raised by a target or an adapter for an op, option or input it does not support: the case
    is reported as skipped."""


class FixtureProblem(Exception):
    """The fixture cannot be turned into a call."""


_ADAPTERS = {}


def adapter(target, op):
    """Registers an adapter for ``op`` of ``target`` (the ``--target`` text, e.g.
    ``"torch.ops._C"``): ``fn(function, arguments, fixture)`` receives the target's function, the
    arguments as dsv4cpu's operator names them (inputs are copies, outputs allocated) and the
    :class:`~dsv4cpu.fixtures.Fixture`; it calls the function and returns its results (a dict by
    output name, or None when it wrote the output arguments). It may raise :class:`Unsupported`."""
    def register(fn):
        _ADAPTERS[(target, op)] = fn
        return fn
    return register


class Parameter:
    """A parameter of the function under test: name, type text ("int", "Optional[Tensor]", ...,
    or "" when unknown), whether it has a default (and which), and whether the function writes
    it."""

    def __init__(self, name, type_text, has_default, default, written):
        self.name, self.type, self.written = name, type_text, written
        self.has_default, self.default = has_default, default

    @property
    def optional(self):
        return self.type.startswith("Optional[")


def parameters_of(function):
    """The parameters of a torch operator (from its schema) or a Python callable."""
    sch = schema(function)
    if sch is not None:
        return [Parameter(a.name, str(a.type), a.default_value is not None or a.kwarg_only,
                          a.default_value, is_written(a)) for a in sch.arguments]
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        type_text = ann.__name__ if isinstance(ann, type) else "" if ann is p.empty else str(ann)
        out.append(Parameter(p.name, type_text, p.default is not p.empty,
                             None if p.default is p.empty else p.default, False))
    return out


def dsv4cpu_parameters(op):
    """dsv4cpu's parameters of ``op`` by name (empty for an op it does not bind)."""
    if op not in FP8_ARGUMENTS:
        return {}
    return {p.name: p for p in parameters_of(getattr(ops, op))}


def _result_names(op):
    """The names of ``op``'s results in dsv4cpu's order: written arguments, then returns."""
    function = getattr(ops, op, None) if op in FP8_ARGUMENTS else None
    sch = schema(function) if function is not None else None
    if sch is None:
        return []
    return [a.name for a in sch.arguments if is_written(a)] + [r.name for r in sch.returns]


def _scalar(kind, name, text):
    """A metadata value by the verifier's grammar (:func:`dsv4cpu.fixtures.scalar`)."""
    try:
        return fixtures.scalar(kind, name, text)
    except RuntimeError as e:  # the verifier's FixtureError
        raise FixtureProblem(str(e)) from None


#: The grammar kind of each parameter type (str: the text as it is).
_KIND_OF_TYPE = {"bool": "boolean", "int": "integer", "SymInt": "integer", "float": "real"}


def scalar_value(name, text, type_text):
    """The fixture text of scalar ``name`` as a value of the parameter's type, read by the
    verifier's grammar; for an unknown type the first of integer, real, boolean that reads it,
    else the text."""
    base = type_text[9:-1] if type_text.startswith("Optional[") else type_text
    if base in _KIND_OF_TYPE:
        return _scalar(_KIND_OF_TYPE[base], name, text)
    if base in ("str", "string"):
        return text
    for kind in ("integer", "real", "boolean"):
        try:
            return fixtures.scalar(kind, name, text)
        except RuntimeError:
            pass
    return text


def _plausible(extent):
    """dsv4cpu-verify's bound of an output extent a scalar gives: itself in [0, 2^20], else 0."""
    return extent if 0 <= extent <= MAX_FALLBACK_EXTENT else 0


def _garbage(shape, dtype):
    t = torch.empty(tuple(shape), dtype=dtype)
    if t.numel():
        t.view(-1).view(torch.uint8).fill_(GARBAGE)
    return t


def _state_cache_view(base, fixture):
    """fixtures.md: a state cache stored F32 [nb, page_floats] with the scalar state_block_size is
    the view [nb, state_block_size, 2·SW] with page stride page_floats (2·SW from kv, or from the
    window of gather_slots, compress_ratio and the head size of rms_norm_weight)."""
    if base.dim() != 2:
        return base
    t, s = fixture.inputs, fixture.scalars
    sbs = _scalar("integer", "state_block_size", s["state_block_size"])
    try:
        if "kv" in t:
            row = 2 * t["kv"].shape[1]
        else:
            ratio = _scalar("integer", "compress_ratio", s["compress_ratio"])
            row = 2 * (t["gather_slots"].shape[1] // ratio) * t["rms_norm_weight"].shape[0]
    except (KeyError, IndexError, ZeroDivisionError) as e:
        raise FixtureProblem(f"a 2-D state_cache needs state_block_size and its row width: {e}")
    if row <= 0 or sbs < 1 or sbs * row > base.shape[1]:
        raise FixtureProblem(f"state_cache pages of {base.shape[1]} floats cannot hold "
                             f"state_block_size = {sbs} rows of {row}")
    return base.as_strided((base.shape[0], sbs, row), (base.shape[1], row, 1))


class Call:
    """The fixture bound to a function's parameters: ``arguments`` by name, the ``buffers`` whose
    content after the call is compared (in-place buffers, allocated outputs) with their content
    before, and the ``copies`` of inputs, which must stay unchanged."""

    def __init__(self, fixture, params, strict, warnings):
        self.fixture = fixture
        self.arguments, self.buffers, self.copies = {}, {}, {}
        inputs, expected, scalars = fixture.inputs, fixture.expected, fixture.scalars
        outputs = SPECS.get(fixture.op, ("", {}))[1]
        own = dsv4cpu_parameters(fixture.op)
        missing = []
        for p in params:
            if p.name in inputs:
                copy = inputs[p.name].clone()
                padded = p.name == "state_cache" and "state_block_size" in scalars
                self.arguments[p.name] = _state_cache_view(copy, fixture) if padded else copy
                (self.buffers if p.name in expected else self.copies)[p.name] = copy
            elif p.name in expected:
                self.arguments[p.name] = self.buffers[p.name] = _garbage(
                    expected[p.name].shape, expected[p.name].dtype)
            elif p.name in scalars:
                self.arguments[p.name] = scalar_value(p.name, scalars[p.name], p.type)
            elif p.has_default:
                pass
            elif p.name in outputs:  # an expected_error case has no expected.* to shape it
                missing.append(p.name)
            elif p.optional:
                self.arguments[p.name] = None
            elif p.name in own and (own[p.name].has_default or own[p.name].optional):
                # fixtures.md: an absent argument takes its default (None: the op's default)
                self.arguments[p.name] = own[p.name].default
            else:
                raise FixtureProblem(f"no value in the fixture for argument {p.name} "
                                     "(an adapter can supply it)")
        for name in missing:  # after the arguments their shapes depend on
            self.arguments[name] = self.buffers[name] = self._fallback(name)
        for name in inputs:
            if name not in self.arguments:
                raise Unsupported(f"the target has no argument '{name}' (an input of the fixture)")
        for key, text in scalars.items():
            if key in self.arguments or key in SHAPE_KEYS:
                continue
            if key == "check_finite" and text in ("1", "true"):
                continue  # the default behaviour
            if strict:
                raise Unsupported(f"the target has no argument '{key}' (fixture: {key}={text})")
            warnings.add(f"metadata key '{key}' is not an argument of {fixture.op}; ignored")
        self.before = {n: t.clone() for n, t in self.buffers.items() if t is not None}

    def _fallback(self, name):
        """Output ``name`` without an expected.* tensor (an expected_error case), shaped by the
        op's rule as dsv4cpu-verify shapes it: an extent a scalar gives is 0 when it lies outside
        [0, 2^20] (the op then reports the scalar), any other is at least 0, and the output stays
        within the verifier's byte limit. A dsv4cpu error the rule raises is the op's error
        (run_case judges it)."""
        op, fixture = self.fixture.op, self.fixture
        dtype = SPECS[op][1][name][0]
        arguments = {**self.arguments, **{k: _scalar("integer", k, v)
                                          for k, v in fixture.scalars.items() if k in SHAPE_KEYS}}
        shape = output_shape(op, arguments, name)
        if shape is None:
            return None
        # The extents the scalars give are those that change when every integer scalar is
        # brought into [0, 2^20].
        try:
            bounded = output_shape(op, {k: _plausible(v) if type(v) is int else v
                                        for k, v in arguments.items()}, name)
        except Exception:  # noqa: BLE001 - the rule rejects the bounded scalars: bound them all
            bounded = None
        shape = tuple(max(e, 0) if bounded is not None and e == b else _plausible(e)
                      for e, b in zip(shape, bounded or shape))
        limit = 8 * sum(t.numel() * t.element_size() for t in fixture.tensors.values()) + (1 << 28)
        if math.prod(shape) * torch.empty((), dtype=dtype).element_size() > limit:
            dims = ", ".join(str(e) for e in shape)
            raise FixtureProblem(f"output '{name}' {_DTYPE_NAMES.get(dtype, str(dtype))} [{dims}] "
                                 f"exceeds the verifier's limit of {limit} bytes (8 x the file's "
                                 "tensor bytes + 256 MiB)")
        return _garbage(shape, dtype)

    def results(self, returned):
        """Every expected output by name: the buffers after the call and what the call
        returned (a dict, a tuple in dsv4cpu's result order, or a single value)."""
        expected = self.fixture.expected
        results = {name: t for name, t in self.buffers.items() if name in expected}
        open_names = [n for n in expected if n not in results]
        if isinstance(returned, dict):
            values = returned
        elif returned is None:
            values = {}
        else:
            items = list(returned) if isinstance(returned, (tuple, list)) else [returned]
            order = [n for n in _result_names(self.fixture.op) if n not in self.buffers]
            names = order if len(order) == len(items) else sorted(open_names)
            if len(names) != len(items):
                raise FixtureProblem(f"the call returned {len(items)} value(s) for the "
                                     f"{len(open_names)} expected output(s) {open_names}; "
                                     "return a dict by name")
            values = dict(zip(names, items))
        for name, v in values.items():
            if name in expected and name not in results and v is not None:
                results[name] = v if isinstance(v, torch.Tensor) else torch.tensor([v])
        for name in expected:
            if name not in results:
                raise FixtureProblem(f"the target produced no '{name}'")
        return results

    def changed_inputs(self):
        """Inputs the call modified."""
        inputs = self.fixture.inputs
        return [n for n, t in self.copies.items() if not fixtures.same_bytes(t, inputs[n])]

    def written_buffers(self):
        """The buffers whose content changed (an error case must leave them alone), each as
        dsv4cpu-verify describes it: name, dtype, shape and the first changed byte."""
        out = []
        for name, t in self.buffers.items():
            if t is None or fixtures.same_bytes(t, self.before[name]):
                continue
            now, was = (x.contiguous().view(-1).view(torch.uint8) for x in (t, self.before[name]))
            first = int((now != was).nonzero()[0, 0])
            fp8 = f"expected.{name}" in self.fixture.fp8 or name in self.fixture.fp8
            dtype = "F8_E4M3" if fp8 else _DTYPE_NAMES.get(t.dtype, str(t.dtype))
            shape = "[" + ", ".join(str(e) for e in t.shape) + "]"
            out.append(f"{name} {dtype} {shape} was written before the error "
                       f"(first changed byte {first})")
        return out


class Run:
    """One run of an op on a target: its ``label`` on the result lines, the ``arguments`` it adds
    to the call, the ``highway`` run of :func:`dsv4cpu.runs` whose Highway target is forced while
    it runs (None: dispatch as usual), and for a variant this machine cannot run, why
    (``absent``) and whether its ISA is required here (a failure, else a skip)."""

    def __init__(self, label, arguments=None, highway=None, absent="", required=False):
        self.label, self.arguments, self.highway = label, arguments or {}, highway
        self.absent, self.required = absent, required


class Target:
    """An implementation under test: ``function(op)`` (or None) and the :class:`Run` list of an
    op."""

    strict = True

    def runs(self, op):
        return [Run(self.label)]

    def missing(self, op):
        """The result of a fixture whose op the target lacks: (status, type, detail)."""
        return "SKIP", "", f"the target has no op '{op}'"

    def raised_as_expected(self, exc, kind):
        return True, f"raised {type(exc).__name__} (expected {kind}; the class is not checked)"


class Dsv4cpuTarget(Target):
    """dsv4cpu's own ops through torch.ops.dsv4cpu."""

    strict = False
    name = ""

    def __init__(self, impl):
        self.impl = impl
        self.registry = {o["name"]: o["variants"] for o in registered_ops()}

    def function(self, op):
        return getattr(ops, op) if op in FP8_ARGUMENTS and not op.startswith("_") else None

    def runs(self, op):
        """dsv4cpu-verify's runs: for ``all`` the run enumerator's (every Highway target, absent
        fixed-ISA variants), else the variant ``impl`` selects."""
        variants = self.registry.get(op, [])
        # An op without options (make_cos_sin_cache) has one variant and takes no selection.
        selectable = "variant" in [a.name for a in schema(getattr(ops, op)).arguments]
        if self.impl == "all":
            out = []
            for r in library_runs(op):
                if "absent" in r:
                    out.append(Run(r["label"], absent=r["absent"], required=r["required"]))
                else:
                    out.append(Run(r["label"], {"variant": r["variant"]["name"]}
                                   if selectable else {}, highway=r))
            return out
        label = {v["name"]: v["name"] + (":" + v["target"] if v["target"] else "")
                 for v in variants}
        chosen = selected_variant(op, impl=self.impl)
        text = label.get(chosen, chosen)
        if self.impl == "optimized" and variants and chosen == variants[-1]["name"]:
            text += " (no optimized variant)" if len(variants) == 1 else \
                " (no optimized variant available)"
        return [Run(text, {"impl": self.impl} if selectable else {})]

    def missing(self, op):
        return "ERROR", "fixture", f"unknown op '{op}'"

    def raised_as_expected(self, exc, kind):
        typed = errors.from_exception(exc) or exc
        cls = errors.CLASSES[kind]
        if not isinstance(typed, errors.Error):
            return False, f"raised {type(exc).__name__}: {exc}"
        if not isinstance(typed, cls):
            return False, f"raised {typed.kind}, expected {kind}: {typed}"
        return True, (f"{typed.kind} as expected" if typed.kind == kind
                      else f"{typed.kind} as expected (a subclass of {kind})")


class ModuleTarget(Target):
    """The functions ``<op><suffix>`` of a Python module or a ``torch.ops`` namespace."""

    def __init__(self, name, suffix):
        self.name, self.suffix, self.label = name, suffix, name
        if name.startswith("torch.ops."):
            self.module = getattr(torch.ops, name[len("torch.ops."):])
        else:
            self.module = importlib.import_module(name)

    def function(self, op):
        try:
            return getattr(self.module, op + self.suffix)
        except (AttributeError, RuntimeError):  # torch.ops raises RuntimeError for unknown ops
            return None


#: Statuses, as dsv4cpu-verify names them: PASS; FAIL, the result or the raised error is not the
#: fixture's; ERROR, the case cannot be judged (a malformed fixture, an exception it does not
#: expect); SKIP, the target or this machine cannot run it.
STATUSES = ("PASS", "FAIL", "ERROR", "SKIP")


class Result:
    """One line of the run: op, case name, variant label, status (:data:`STATUSES`), its type
    (dsv4cpu-verify's failure and error types: "mismatch", "wrong_exception", "fixture", ...),
    detail and the error text the implementation raised, if any."""

    def __init__(self, op, name, variant, status, detail, error="", type=""):  # noqa: A002
        self.op, self.name, self.variant = op, name, variant
        self.status, self.detail, self.error, self.type = status, detail, error, type


def run_case(fixture, target, function, extra, warnings):
    """One call of ``function`` on ``fixture``: (status, type, detail, error). A dsv4cpu error
    raised while the outputs are prepared (an output extent from a bad scalar) is judged as the
    op's error; any other exception there is an ERROR."""
    op, kind = fixture.op, fixture.expected_error
    custom = _ADAPTERS.get((target.name, op))
    canonical = getattr(ops, op) if custom is not None and op in FP8_ARGUMENTS else function
    call = None
    try:
        call = Call(fixture, parameters_of(canonical), target.strict and custom is None, warnings)
        call.arguments.update(extra)
        if custom is not None:
            returned = custom(function, call.arguments, fixture)
        else:
            returned = function(**call.arguments)
    except FixtureProblem as e:
        return "ERROR", "fixture", f"fixture: {e}", ""
    except Unsupported as e:
        return "SKIP", "", str(e), ""
    except Exception as exc:  # the implementation's error, judged below
        typed = errors.from_exception(exc)
        if call is None and typed is None:
            return "ERROR", "exception", f"preparing the call: {type(exc).__name__}: {exc}", ""
        text = str(typed or exc)
        if not kind:  # an error the fixture does not expect: the case cannot be judged
            if typed:
                return "ERROR", typed.kind, f"{typed.kind}: {typed}", text
            return "ERROR", "exception", f"{type(exc).__name__}: {exc}", text
        ok, detail = target.raised_as_expected(exc, kind)
        if not ok:
            return "FAIL", "wrong_exception", detail, text
        written = call.written_buffers() if call is not None else []
        if written:
            return "FAIL", "written_before_exception", written[0], text
        return "PASS", "", detail, text
    if kind:
        return "FAIL", "no_exception", f"no error raised (expected {kind})", ""
    changed = call.changed_inputs()
    if changed:
        return "FAIL", "input_modified", f"input {changed[0]} was modified by the call", ""
    try:
        verdict = fixtures.check(fixture, call.results(returned))
    except FixtureProblem as e:
        return "FAIL", "missing_result", str(e), ""
    except RuntimeError as e:  # the verifier's FixtureError: a scalar or override it cannot read
        return "ERROR", "fixture", f"fixture: {e}", ""
    if verdict.passed:
        return "PASS", "", verdict.detail, ""
    return "FAIL", "mismatch", verdict.detail, ""


def run_file(path, name, target):
    """Every run of one fixture file: a list of Result, and warnings."""
    warnings = set()

    def unusable(op, detail, type="fixture"):  # noqa: A002
        return [Result(op, name, "-", "ERROR", detail, type=type)], warnings
    try:
        fixture = fixtures.load(path)
    except RuntimeError as e:
        return unusable("?", f"malformed safetensors: {e}", "malformed_file")
    op = fixture.op
    if not op:
        return unusable("?", 'no __metadata__ "op"')
    format_ = fixture.metadata.get("format", "")
    if format_ != fixtures.FORMAT:
        return unusable(op, f"__metadata__ \"format\" is '{format_}' (expected {fixtures.FORMAT})")
    kind = fixture.expected_error
    if kind and kind not in errors.CLASSES:
        return unusable(op, f"expected_error '{kind}' is not "
                        "Error, ShapeError, IndexError, ValueError or NonFiniteError")
    function = target.function(op)
    if function is None:
        status, type_, detail = target.missing(op)
        return [Result(op, name, "-", status, detail, type=type_)], warnings
    results = []
    for run in target.runs(op):
        if run.absent:  # dsv4cpu-verify: a skip, or a failure where the ISA is required
            status, type_ = ("FAIL", "isa_required") if run.required else ("SKIP", "")
            results.append(Result(op, name, run.label, status, run.absent, type=type_))
            continue
        pinned = highway_target(run.highway) if run.highway else contextlib.nullcontext()
        with pinned:
            status, type_, detail, error = run_case(fixture, target, function, run.arguments,
                                                    warnings)
        results.append(Result(op, name, run.label, status, detail, error, type_))
    return results, warnings


def _scan(root, folder, found):
    """dsv4cpu-verify's folder walk: the *.safetensors regular files (or symbolic links to them)
    under ``folder`` as (path, name relative to ``root``, ""); folders are entered unless they
    are symbolic links; FIFOs, devices and sockets are skipped, never opened; an entry or a folder
    that cannot be read is (path, name, why)."""
    def name(p):
        return os.path.relpath(p, root).replace(os.sep, "/")
    try:
        with os.scandir(folder) as entries:
            listed = list(entries)
    except OSError as e:
        found.append((folder, name(folder), f"cannot read folder: {e.strerror}"))
        return
    for entry in listed:
        if entry.is_dir(follow_symlinks=False):
            _scan(root, entry.path, found)
        elif entry.name.endswith(".safetensors") and entry.name != ".safetensors":
            try:
                regular = stat.S_ISREG(os.stat(entry.path).st_mode)
            except OSError as e:  # a symbolic link loop, a dangling link
                found.append((entry.path, name(entry.path), f"cannot read: {e.strerror}"))
                continue
            if regular:
                found.append((entry.path, name(entry.path), ""))


def collect(path):
    """dsv4cpu-verify's files of a PATH: a regular file as given; a folder searched recursively
    (:func:`_scan`), sorted by relative path. Each as (path, name, why it cannot be read or "");
    a str saying why when the path is neither."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"no such file or folder: {path}"
    except OSError as e:
        return f"cannot read {path}: {e.strerror}"
    if stat.S_ISREG(mode):
        return [(path, os.path.basename(path), "")]
    if not stat.S_ISDIR(mode):
        return f"not a regular file or folder: {path}"
    found = []
    _scan(path, path, found)
    return sorted(found, key=lambda item: item[1])


def printable(text):
    """Fixture text (file and op names, messages) with control characters shown as '?', as
    dsv4cpu-verify prints it: no file can forge result lines or send terminal escapes."""
    return "".join("?" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch for ch in text)


def counts(results):
    """(passed, failed, skipped) as dsv4cpu-verify counts them: an error counts as failed."""
    passed = sum(r.status == "PASS" for r in results)
    skipped = sum(r.status == "SKIP" for r in results)
    return passed, len(results) - passed - skipped, skipped


def json_report(results):
    """The results as JSON: every case (with its type when it has one), and the passed, failed
    (errors included) and skipped counts."""
    passed, failed, skipped = counts(results)
    cases = []
    for r in results:
        case = {"op": r.op, "case": r.name, "variant": r.variant, "status": r.status,
                "detail": r.detail}
        if r.type:
            case["type"] = r.type
        if r.error:
            case["error"] = r.error
        cases.append(case)
    return json.dumps({"cases": cases, "passed": passed, "failed": failed,
                       "skipped": skipped}, indent=2) + "\n"


def _junit_counts(cases):
    return {"tests": str(len(cases)),
            **{key: str(sum(r.status == s for r in cases))
               for key, s in (("failures", "FAIL"), ("errors", "ERROR"), ("skipped", "SKIP"))}}


def junit_report(results):
    """The results as JUnit XML: one suite per op, failures, errors and skipped cases marked."""
    suites = {}
    for r in results:
        suites.setdefault(r.op, []).append(r)
    root = ET.Element("testsuites", name="dsv4cpu.conformance", **_junit_counts(results))
    for op, cases in suites.items():
        suite = ET.SubElement(root, "testsuite", name=op, **_junit_counts(cases))
        for r in cases:
            case = ET.SubElement(suite, "testcase", classname=op, name=f"{r.name} [{r.variant}]")
            if r.status in ("FAIL", "ERROR"):
                ET.SubElement(case, "failure" if r.status == "FAIL" else "error", type=r.type,
                              message=r.detail).text = r.error or r.detail
            elif r.status == "SKIP":
                ET.SubElement(case, "skipped", message=r.detail)
            else:
                ET.SubElement(case, "system-out").text = r.detail
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def print_table(results, width):
    """The per-op table: passed, failed (errors included) and skipped cases, and the variants
    that ran."""
    rows = {}
    for r in results:
        rows.setdefault(r.op, []).append(r)
    print(f"\n{'op':<{width}}  passed  failed  skipped  variants")
    for op in sorted(rows):
        passed, failed, skipped = counts(rows[op])
        variants = sorted({r.variant for r in rows[op] if r.status != "SKIP"})
        print(f"{printable(op):<{width}}  {passed:>6}  {failed:>6}  {skipped:>7}  "
              f"{', '.join(variants)}")
    print()


def main(argv=None):
    """The command line (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python3 -m dsv4cpu.conformance",
        description="Checks an implementation of the dsv4cpu ops against dsv4cpu-fixture/1 files.")
    parser.add_argument("--impl", choices=("reference", "optimized", "all"), default="all",
                        help="dsv4cpu's variants to run without --target (default: all)")
    parser.add_argument("--target", help="Python module or torch.ops.<namespace> under test")
    parser.add_argument("--suffix", default="", help="name suffix of the target's functions")
    parser.add_argument("--adapters", action="append", default=[], metavar="MODULE",
                        help="module that registers adapters (dsv4cpu.conformance.adapter)")
    parser.add_argument("--report", nargs=2, action="append", default=[],
                        metavar=("json|junit", "FILE"), help="write a report (repeatable)")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="fixture files, or folders searched recursively")
    args = parser.parse_args(argv)
    for kind, _ in args.report:
        if kind not in ("json", "junit"):
            parser.error(f"--report {kind}: expected json or junit")
    for module in args.adapters:
        importlib.import_module(module)
    target = ModuleTarget(args.target, args.suffix) if args.target else Dsv4cpuTarget(args.impl)

    files, paths_ok = [], True
    for p in args.paths:
        found = collect(p)
        if isinstance(found, str):
            print(f"dsv4cpu.conformance: {found}", file=sys.stderr)
            paths_ok = False
        else:
            files += found
    if not files:
        print("dsv4cpu.conformance: no *.safetensors fixtures found", file=sys.stderr)

    width = max([len(op) for op in SPECS] + [2])
    results = []
    for path, name, unreadable in files:
        if unreadable:
            found, warnings = [Result("?", name, "-", "ERROR", unreadable,
                                      type="unreadable_file")], ()
        else:
            try:
                found, warnings = run_file(path, name, target)
            except Exception as e:  # the file cannot be judged: its line, then the next file
                found, warnings = [Result("?", name, "-", "ERROR", f"{type(e).__name__}: {e}",
                                          type="exception")], ()
        for w in sorted(warnings):
            print(f"warning: {printable(name)}: {printable(w)}", file=sys.stderr)
        for r in found:
            print(f"{printable(r.op):<{width}}  {printable(r.name)}  {r.variant}  {r.status}  "
                  f"{printable(r.detail)}", flush=True)
        results += found
    passed, failed, skipped = counts(results)
    print_table(results, width)
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    for kind, path in args.report:
        with open(path, "w", encoding="utf-8") as f:
            f.write(json_report(results) if kind == "json" else junit_report(results))
    return 0 if failed == 0 and passed > 0 and paths_ok else 1


if __name__ == "__main__":
    # Run the importable module's main, so that adapters and Unsupported are the ones modules
    # importing dsv4cpu.conformance see (not this __main__ copy's).
    from dsv4cpu.conformance import main as module_main
    sys.exit(module_main())
