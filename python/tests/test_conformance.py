"""python3 -m dsv4cpu.conformance on dsv4cpu itself, on other implementations (correct, wrong,
incomplete, with an adapter), and its reports."""
import json
import os
import re
import xml.etree.ElementTree as ET

from dsv4cpu import fixtures
from support import FIXTURES, SHARED, SHARED_ATTENTION, SHARED_NEXT, conformance, verify

LAST = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$")


def folders(*ops):
    return [os.path.join(FIXTURES, op) for op in ops]


def counts(lines):
    m = LAST.match(lines[-1])
    assert m, lines[-1]
    return int(m.group(1)), int(m.group(2))


def case_lines(lines, status):
    return [line for line in lines if f"  {status}  " in line]


def test_dsv4cpu_through_torch_every_variant():
    shared = [d for d in (SHARED, SHARED_ATTENTION, SHARED_NEXT) if os.path.isdir(d)]
    status, lines = conformance(FIXTURES, *shared)
    passed, failed = counts(lines)
    assert status == 0 and failed == 0 and passed > 300, lines[-30:]
    # Every Highway target compiled in and supported here runs the Highway variants.
    assert any("  hwy:AVX2  PASS  " in line for line in lines)
    assert any("  hwy:SCALAR  PASS  " in line for line in lines)
    # Skipped: only the fixed-ISA variants this machine cannot run.
    for line in case_lines(lines, "SKIP"):
        assert "is not available on this CPU or OS" in line, line


def verdicts(lines):
    """The case lines (op, case, variant, status, detail), spaces normalised, sorted."""
    return sorted(" ".join(line.split()) for line in lines
                  if re.search(r"  (PASS|FAIL|ERROR|SKIP)  ", line))


def test_same_verdicts_as_dsv4cpu_verify():
    """Through torch, every case line (op, case, variant, PASS/FAIL/ERROR/SKIP, detail) and the
    summary are the verifier's, for each --impl: the same runs (variants and Highway targets)."""
    folders_ = [FIXTURES] + [d for d in (SHARED_ATTENTION, SHARED_NEXT) if os.path.isdir(d)]
    for impl in ("reference", "optimized", "all"):
        status, lines = conformance("--impl", impl, *folders_)
        verify_status, verify_lines = verify("--impl", impl, *folders_)
        assert status == verify_status == 0
        assert verdicts(lines) == verdicts(verify_lines) and len(verdicts(lines)) > 100
        assert lines[-1] == verify_lines[-1]


def test_same_verdicts_on_unusable_and_failing_files(tmp_path):
    """Malformed files are errors, a wrong expected value a failure, in both runners."""
    (tmp_path / "short.safetensors").write_bytes(b"garbage")
    (tmp_path / "header.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{no json")
    fixture = fixtures.load(os.path.join(FIXTURES, "map_local_to_global_slots",
                                         "spec_example.safetensors"))
    wrong = fixture.expected["slots"].clone()
    wrong[0, 0] += 1
    fixtures.save(str(tmp_path / "wrong.safetensors"), fixture.op, fixture.inputs,
                  {"slots": wrong}, **fixture.scalars)
    fixtures.save(str(tmp_path / "unknown_op.safetensors"), "no_such_op", fixture.inputs,
                  fixture.expected)
    status, lines = conformance("--impl", "reference", str(tmp_path))
    verify_status, verify_lines = verify("--impl", "reference", str(tmp_path))
    assert status == verify_status == 1
    assert verdicts(lines) == verdicts(verify_lines), (lines, verify_lines)
    assert sorted(v.split()[3] for v in verdicts(lines)) == ["ERROR", "ERROR", "ERROR", "FAIL"]
    assert lines[-1] == verify_lines[-1] == "0 passed, 4 failed"


def test_dsv4cpu_as_a_foreign_torch_ops_target():
    """torch.ops.dsv4cpu through the schema-driven binding every engine kernel gets."""
    status, lines = conformance("--target", "torch.ops.dsv4cpu", FIXTURES)
    passed, failed = counts(lines)
    assert status == 0 and failed == 0 and passed > 100, lines[-30:]


def test_python_module_target():
    status, lines = conformance("--target", "targets.good",
                                *folders("map_local_to_global_slots", "save_partial_states",
                                         "fp8_paged_mqa_logits", "topk_transform_512"))
    passed, failed = counts(lines)
    assert status == 0 and failed == 0, lines
    skipped = case_lines(lines, "SKIP")
    assert len(skipped) == 2 and all("the target has no argument 'next_n'" in s for s in skipped)
    assert lines[-1] == f"{passed} passed, 0 failed, {len(skipped)} skipped"
    assert any("spec_example.safetensors  targets.good  PASS  exact" in line for line in lines)


def test_wrong_implementation_fails_clearly(tmp_path):
    report_json, report_xml = tmp_path / "r.json", tmp_path / "r.xml"
    status, lines = conformance("--target", "targets.wrong", "--report", "json", str(report_json),
                                "--report", "junit", str(report_xml),
                                *folders("map_local_to_global_slots", "fp8_paged_mqa_logits",
                                         "topk_transform_512"))
    passed, failed = counts(lines)
    assert status == 1 and failed > 0
    text = "\n".join(lines)
    assert re.search(r"spec_example.safetensors  targets.wrong  FAIL  slots\[0, 0\]: got -2, "
                     r"expected -1 \(1 of 4 elements differ\)", text), text
    assert re.search(r"h64_single_page.safetensors  targets.wrong  FAIL  logits\[0, \d+\]: got 0,"
                     r" expected -inf \(past the row length \d+\)", text), text
    assert re.search(r"canonical_mixed.safetensors  targets.wrong  FAIL  raw_indices\[\d+, 0\]: "
                     r"got \d+, expected \d+ \(\d+ of 3072 elements differ\)", text), text
    # Bad-input cases still pass: the wrong kernels raise before writing.
    assert any("bad_block_size_zero.safetensors  targets.wrong  PASS  raised" in line
               for line in lines)
    report = json.loads(report_json.read_text())
    assert (report["passed"], report["failed"], report["skipped"]) == (passed, failed, 0)
    assert {c["status"] for c in report["cases"]} == {"PASS", "FAIL"}
    root = ET.parse(report_xml).getroot()
    assert root.get("failures") == str(failed) and root.get("tests") == str(passed + failed)


def test_written_before_the_error_fails():
    status, lines = conformance("--target", "targets.wrong", *folders("short_context_topk"))
    assert status == 1
    failed = case_lines(lines, "FAIL")
    assert len(failed) == 2 and "bad_negative_position.safetensors" in failed[0], lines
    assert failed[0].endswith("FAIL  topk_indices I32 [2, 512] was written before the error "
                              "(first changed byte 0)"), failed[0]


def test_missing_op_is_skipped_not_passed():
    status, lines = conformance("--target", "targets.good", *folders("indexer_metadata"))
    assert status == 1 and counts(lines) == (0, 0)
    assert case_lines(lines, "SKIP") and "the target has no op 'indexer_metadata'" in lines[0]


def test_adapter_and_suffix():
    status, lines = conformance("--target", "targets.engine", "--suffix", "_cpu",
                                "--adapters", "targets.engine_adapters",
                                *folders("fp8_paged_mqa_logits"))
    passed, failed = counts(lines)
    assert status == 0 and failed == 0 and passed >= 8, lines
    assert [s.split("  ")[-1] for s in case_lines(lines, "SKIP")] == ["no MTP (next_n)"] * 2


def test_missing_path_fails():
    status, lines = conformance(os.path.join(FIXTURES, "does_not_exist"))
    assert status == 1 and lines[-1] == "0 passed, 0 failed"
