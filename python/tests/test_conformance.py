"""python3 -m dsv4cpu.conformance on dsv4cpu itself, on other implementations (correct, wrong,
incomplete, with an adapter), and its reports."""
import json
import os
import re
import socket
import xml.etree.ElementTree as ET

from dsv4cpu import fixtures
from support import FIXTURES, SHARED, SHARED_ATTENTION, SHARED_NEXT, conformance, fixture, verify

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


def error_case(folder, name, op, source, key, value, expected_error):
    """The embedded fixture op/source as an expected_error case with ``key`` = ``value``."""
    f = fixtures.load(fixture(op, source))
    fixtures.save(str(folder / name), op, f.inputs, {}, fp8=f.fp8, expected_error=expected_error,
                  **{**f.scalars, key: value})


def hostile_folder(folder):
    """A FIFO, a socket, a link to /dev/zero and a dangling link (named *.safetensors);
    expected_error cases whose scalar makes an output extent negative or huge; a malformed file;
    integers outside the grammar; a link to a passing fixture, and that fixture last. Returns the socket (open while the
    runners walk the folder)."""
    os.mkfifo(folder / "a_fifo.safetensors")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "a_socket.safetensors"))
    os.symlink("/dev/zero", folder / "b_zero.safetensors")
    os.symlink("absent", folder / "b_dangling.safetensors")
    insert, logits = "fused_qnorm_rope_kv_insert", "fp8_paged_mqa_logits"
    error_case(folder, "c_q_head_padded.safetensors", insert, "spec_example_3_5", "q_head_padded",
               -1, "ValueError")
    error_case(folder, "d_window.safetensors", "swa_window_indices", "spec_example_w4", "window",
               -5, "ValueError")
    error_case(folder, "e_max_seq_len.safetensors", logits, "h64_single_page", "max_seq_len", -7,
               "ValueError")
    error_case(folder, "f_q_head_padded_huge.safetensors", insert, "spec_example_3_5",
               "q_head_padded", 2**40, "ShapeError")
    error_case(folder, "f_window_huge.safetensors", "swa_window_indices", "spec_example_w4",
               "window", 2**62, "ShapeError")
    (folder / "g_malformed.safetensors").write_bytes(b"\x09" + b"\x00" * 7 + b"{not json")
    spec = fixtures.load(fixture("map_local_to_global_slots", "spec_example"))
    for name, text in (("h_integer_plus", "+4"), ("i_integer_nul", "4\0")):
        fixtures.save(str(folder / f"{name}.safetensors"), spec.op, spec.inputs, spec.expected,
                      block_size=text)
    fixtures.save(str(folder / "z_pass.safetensors"), spec.op, spec.inputs, spec.expected,
                  **spec.scalars)
    os.symlink("z_pass.safetensors", folder / "y_link.safetensors")  # taken, by its own name
    return sock


def test_hostile_folder_every_file_reported(tmp_path):
    """Non-regular files are skipped unopened, a dangling link and a malformed file are ERROR
    lines, an output extent from a bad scalar lets the op's error be judged, text outside the
    grammar is an ERROR naming it, and the files after all of them are still reported: the same
    lines as dsv4cpu-verify."""
    sock = hostile_folder(tmp_path)
    try:
        status, lines = conformance("--impl", "reference", str(tmp_path), timeout=600)
        verify_status, verify_lines = verify("--impl", "reference", str(tmp_path), timeout=600)
    finally:
        sock.close()
    assert status == verify_status == 1
    assert verdicts(lines) == verdicts(verify_lines), (lines, verify_lines)
    text = "\n".join(lines)
    assert "a_fifo" not in text and "a_socket" not in text and "b_zero" not in text
    expected = [
        "? b_dangling.safetensors - ERROR cannot read: No such file or directory",
        "fused_qnorm_rope_kv_insert c_q_head_padded.safetensors ref PASS ValueError as expected",
        "swa_window_indices d_window.safetensors ref PASS ValueError as expected",
        "fp8_paged_mqa_logits e_max_seq_len.safetensors ref PASS ValueError as expected",
        "fused_qnorm_rope_kv_insert f_q_head_padded_huge.safetensors ref PASS ShapeError as "
        "expected",
        "swa_window_indices f_window_huge.safetensors ref PASS ShapeError as expected",
        "? g_malformed.safetensors - ERROR malformed safetensors: header is not valid JSON",
        "map_local_to_global_slots h_integer_plus.safetensors ref ERROR fixture: scalar "
        "block_size = '+4' is not a 64-bit integer",
        "map_local_to_global_slots i_integer_nul.safetensors ref ERROR fixture: scalar "
        "block_size = '4\\x00' is not a 64-bit integer",
        "map_local_to_global_slots y_link.safetensors ref PASS exact",
        "map_local_to_global_slots z_pass.safetensors ref PASS exact"]
    got = verdicts(lines)
    assert len(got) == len(expected), got
    for want, line in zip(sorted(expected), got):
        assert line.startswith(want), (want, line)
    assert lines[-1] == verify_lines[-1] == "7 passed, 4 failed"


def test_unusable_paths_as_the_verifier(tmp_path):
    """A FIFO or a link to a device given as PATH is refused (never opened), as by the
    verifier."""
    os.mkfifo(tmp_path / "fifo.safetensors")
    os.symlink("/dev/zero", tmp_path / "zero.safetensors")
    for name in ("fifo.safetensors", "zero.safetensors"):
        path = str(tmp_path / name)
        status, lines = conformance(path, timeout=600)
        verify_status, verify_lines = verify(path, timeout=600)
        assert status == verify_status == 1
        assert f"not a regular file or folder: {path}" in "\n".join(lines)
        assert f"not a regular file or folder: {path}" in "\n".join(verify_lines)
        assert lines[-1] == verify_lines[-1] == "0 passed, 0 failed"
