"""One fixture through vLLM, judged (parity.py's worker): the conformance runner's verdict, and
for a failing case the differences the spec documents between dsv4cpu and vLLM CPU.

A documented difference is accepted only when vLLM's result matches the spec's semantics for
vLLM's behaviour: the same contract (numerics.md §11) against dsv4cpu's reference run with vLLM's
option value, or with the region the spec leaves to vLLM (its unwritten logits) set to the
spec's values. Anything else stays a failure.
"""
import math

import torch

from dsv4cpu import conformance, fixtures
from dsv4cpu._extension import FP8_ARGUMENTS, ops
import vllm_adapters
from vllm_adapters import ABSENT_OUTPUTS, SPEC_VALUES, VLLM_OPTIONS
from vllm_kernels import FUNCTIONS

#: Spec sections of the option differences (VLLM_OPTIONS).
OPTION_SECTIONS = {
    "scale_clamp": "numerics.md §4: vLLM CPU uses clamp-scale for the 512-wide path and "
                   "clamp-amax for the indexer",
    "mode": "indexer.md §5.3-5.4: vLLM has only the heap order (`vllm` mode)",
    "fp8_subnormals": "attention.md §3.4: vLLM's SWA insert flushes fp8 results below 2^-6",
    "nope_decode": "attention.md §2.4: vLLM decodes E = 0 codes and scale byte 0 inexactly",
}
#: attention.md §3.4: vLLM's SWA q-norm sum is sequential, so q_out is compared within 1 bf16 ulp
#: (numerics.md §11.3) instead of exactly (:func:`run_insert`).
QNORM_SECTION = "attention.md §3.4: vLLM's q-norm sums sequentially (q_out within 1 bf16 ulp)"


class VllmTarget(conformance.Target):
    """vLLM's functions under dsv4cpu's op names."""

    name = label = vllm_adapters.TARGET

    def function(self, op):
        return FUNCTIONS.get(op)


TARGET = VllmTarget()


def derived(fixture, tensors=None, **metadata):
    """The fixture with other tensors or metadata (None removes a key)."""
    meta = {**fixture.metadata, **metadata}
    return fixtures.Fixture(fixture.path, tensors if tensors is not None else fixture.tensors,
                            {k: v for k, v in meta.items() if v is not None}, fixture.fp8)


def spec_outputs(fixture):
    """The fixture's call run by dsv4cpu's reference: its outputs by name."""
    function = getattr(ops, fixture.op)
    call = conformance.Call(fixture, conformance.parameters_of(function), False, set())
    call.arguments["impl"] = "reference"
    return call.results(function(**call.arguments))


def with_vllm_options(fixture):
    """The fixture with vLLM's values of the options it differs in and the expected outputs of
    dsv4cpu's reference for them; None when no option differs (the insert is always derived: its
    q_out differs by its own rule, :func:`run_insert`). Also the sections."""
    changed = {name: value for name, value in VLLM_OPTIONS.get(fixture.op, {}).items()
               if fixture.scalars.get(name, _spec_default(fixture.op, name)) != value}
    if not changed and fixture.op != "fused_qnorm_rope_kv_insert":
        return None, []
    options = derived(fixture, **changed)
    results = spec_outputs(options)
    tensors = {**fixture.inputs, **{"expected." + n: t for n, t in results.items()
                                    if "expected." + n in fixture.tensors}}
    return derived(options, tensors), [OPTION_SECTIONS[n] for n in changed]


def _spec_default(op, name):
    """The option's default: the schema's, else the spec's (the first of SPEC_VALUES)."""
    for p in conformance.parameters_of(getattr(ops, op)):
        if p.name == name and p.default is not None:
            return p.default
    return SPEC_VALUES[name][0]


# --------------------------------------------------------------------------- SWA insert

def run_insert(fixture, kernel):
    """attention.md §3.4: the SWA insert judged by the verifier against vLLM's semantics, on the
    fixture with ``compare=bf16_ulp=1`` (docs/fixture-ops.md): swa_cache by its own contract,
    which no ``compare`` key changes, and q_out within 1 bf16 ulp (numerics.md §11.3).
    (status, detail, whether q_out was inexact: the verdict names q_out only then, with how many
    of its elements are not exact)."""
    status, _, detail = run(derived(fixture, compare="bf16_ulp=1"), kernel)
    return status, detail, status == "PASS" and "q_out worst bf16 ulp" in detail


# --------------------------------------------------------------------------- logits

def _nan_keys(kv_cache, page_table, block_size, length):
    """Local indices j < length whose key holds a NaN code (0x7F/0xFF) (indexer.md §3 layout)."""
    j = torch.arange(length)
    pages = page_table.to(torch.int64)[j // block_size]
    codes = kv_cache.to(torch.uint8).view(-1).to(torch.int64)
    start = pages * kv_cache.shape[1] + (j % block_size) * 128
    rows = codes[start[:, None] + torch.arange(128)]
    return j[((rows & 0x7F) == 0x7F).any(1)]


def logits_as_spec(kernel, fixture):
    """vLLM's logits kernel with the two regions the spec documents set to the spec's values:
    positions past seq_len (vLLM leaves them unwritten, indexer.md §4.2) to -inf, and keys with a
    NaN code (vLLM decodes them as ±480, numerics.md §3.1) to NaN. Also the sections that
    applied."""
    t = fixture.inputs
    heads = t["q_fp8"].shape[1]
    sections = []
    lengths = [int(v) for v in t["seq_lens"]]
    width = fixtures.scalar("integer", "max_seq_len", fixture.scalars["max_seq_len"])
    if any(n < width for n in lengths):
        sections.append("indexer.md §4.2: vLLM leaves logits past seq_len unwritten")
    block_size = fixtures.scalar("integer", "block_size", fixture.scalars["block_size"])
    nan_keys = [_nan_keys(t["kv_cache"], t["page_table"][b], block_size, n)
                if heads else torch.empty(0, dtype=torch.int64)
                for b, n in enumerate(lengths)]
    if any(k.numel() for k in nan_keys):
        sections.append("numerics.md §3.1: vLLM's logits kernel decodes NaN codes as ±480")

    def kernel_as_spec(*args):
        logits = kernel(*args).clone()
        for b, n in enumerate(lengths):
            logits[b, n:] = -math.inf
            logits[b, nan_keys[b]] = math.nan
        return logits
    return kernel_as_spec, sections


# --------------------------------------------------------------------------- bad input

def _duplicates(slots):
    valid = slots[slots >= 0]
    return valid.numel() != valid.unique().numel()


def documented_bad_input(fixture):
    """bad-input.md §5: the bad inputs the spec records vLLM accepting, when the fixture has one
    (else None)."""
    t, s, op = fixture.inputs, fixture.scalars, fixture.op
    section = "bad-input.md §5: vLLM "
    if op == "topk_transform_512" and (t["seq_lens"] > t["scores"].shape[1]).any():
        return section + "clamps seq_len to the row width"
    if op == "fp8_paged_mqa_logits":
        block = int(s["block_size"])
        for b, n in enumerate(t["seq_lens"].tolist()):
            covered = t["page_table"][b][:(n + block - 1) // block]
            if ((covered < 0) | (covered >= t["kv_cache"].shape[0])).any():
                return section + "does not check page indices in the logits kernel"
    if op == "save_partial_states" and _duplicates(t["slot_mapping"]):
        return section + "writes state rows for duplicate slots in an unspecified order"
    if op == "sparse_mla_attention" and min(int(s["window_block_size"]),
                                            int(s["compressed_block_size"])) >= 1:
        for slots, cache, block in ((t["window_slots"], t["window_cache"], "window_block_size"),
                                    (t["compressed_slots"], t["compressed_cache"],
                                     "compressed_block_size")):
            limit = cache.shape[0] * int(s[block])
            if ((slots < -1) | (slots >= limit)).any():
                return section + "silently skips out-of-range attention slots"
    if op.startswith("compress_norm_rope_store"):
        empty = (t["gather_slots"] < 0).all(1) & (t["kv_slot_mapping"] >= 0)
        if empty.any():
            return section + "produces garbage for an emitting token with an empty window"
    return None


# --------------------------------------------------------------------------- judging

def run(fixture, kernel):
    """The conformance runner's (status, type, detail) for one call; an ERROR (an exception the
    fixture does not expect, or a fixture the runner cannot turn into a call) is a failure here,
    named by its type."""
    status, type_, detail, _ = conformance.run_case(fixture, TARGET, kernel, {}, set())
    if status == "ERROR":
        return "FAIL", type_, f"error ({type_}): {detail}"
    return status, type_, detail


def judge(path):
    """(status, detail) of one fixture: PASS, EXPECTED, SKIP or FAIL (parity.py)."""
    try:
        fixture = fixtures.load(path)
    except RuntimeError as e:
        return "FAIL", f"malformed fixture: {e}"
    op = fixture.op
    kernel = FUNCTIONS.get(op)
    if kernel is None:
        return "SKIP", f"vLLM has no CPU kernel for {op} (computed in its Python metadata code)"
    if op not in FP8_ARGUMENTS:
        return "SKIP", f"this dsv4cpu build has no binding of {op} to judge it with"
    notes = []
    absent = [n for n in ABSENT_OUTPUTS.get(op, ()) if "expected." + n in fixture.tensors]
    if absent:
        fixture = derived(fixture, {k: v for k, v in fixture.tensors.items()
                                    if k[len("expected."):] not in absent})
        notes.append(f"{', '.join(absent)} not compared (vLLM has no such output)")
    sections = []
    if op == "fp8_paged_mqa_logits" and not fixture.expected_error \
            and fixture.inputs["seq_lens"].dim() == 1:
        kernel, sections = logits_as_spec(kernel, fixture)
    status, type_, detail = run(fixture, kernel)
    if type_ == "no_exception":
        section = documented_bad_input(fixture)
        if section:
            status, sections = "EXPECTED", [section]
    elif status == "FAIL" and not fixture.expected_error:
        as_vllm, option_sections = with_vllm_options(fixture)
        if op == "fused_qnorm_rope_kv_insert":  # the options' sections only when they matter
            again, again_detail, inexact = run_insert(fixture, kernel)
            if again == "PASS":
                option_sections = []
            else:
                again, again_detail, inexact = run_insert(as_vllm, kernel)
            option_sections += [QNORM_SECTION] if inexact else []
        elif as_vllm is not None:
            again, _, again_detail = run(as_vllm, kernel)
        if as_vllm is not None and again == "PASS" and option_sections:
            status, detail, sections = "EXPECTED", again_detail, sections + option_sections
    if status == "PASS" and sections:
        status = "EXPECTED"  # the spec's region was set: the difference itself is not observed
    text = "; ".join([detail] + notes)
    if status == "EXPECTED":
        text += " — expected (" + "; ".join(sections) + ")"
    return status, text
