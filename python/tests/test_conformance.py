"""python3 -m dsv4cpu.conformance on dsv4cpu itself, on other implementations (correct, wrong,
incomplete, with an adapter), and its reports."""
import json
import os
import re
import xml.etree.ElementTree as ET

from support import FIXTURES, SHARED, SHARED_ATTENTION, conformance, verify

LAST = re.compile(r"^(\d+) passed, (\d+) failed$")


def folders(*ops):
    return [os.path.join(FIXTURES, op) for op in ops]


def counts(lines):
    m = LAST.match(lines[-1])
    assert m, lines[-1]
    return int(m.group(1)), int(m.group(2))


def case_lines(lines, status):
    return [line for line in lines if f"  {status}  " in line]


def test_dsv4cpu_through_torch_every_variant():
    shared = [d for d in (SHARED, SHARED_ATTENTION) if os.path.isdir(d)]
    status, lines = conformance(FIXTURES, *shared)
    passed, failed = counts(lines)
    assert status == 0 and failed == 0 and passed > 300, lines[-30:]
    assert not case_lines(lines, "SKIP")


def test_same_verdicts_as_dsv4cpu_verify():
    """Through torch, every case line (op, case, variant, PASS/FAIL, detail) is the verifier's."""
    def cases(lines):
        return sorted(" ".join(line.split()) for line in lines
                      if re.search(r"  (PASS|FAIL)  ", line))
    for impl in ("reference", "optimized"):
        status, lines = conformance("--impl", impl, FIXTURES)
        verify_status, verify_lines = verify("--impl", impl, FIXTURES)
        assert status == verify_status == 0
        assert cases(lines) == cases(verify_lines) and len(cases(lines)) > 100
        assert lines[-1] == verify_lines[-1]


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
    assert f"{len(skipped)} skipped (not counted as passed)" in lines
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
