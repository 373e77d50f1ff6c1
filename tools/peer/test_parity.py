"""Tests of parity.py's pure-Python parts (no vLLM, no torch): the Known findings table of
docs/vllm-parity.md names existing fixtures, case names map to `op/case`, and a crash is the
fixture's only when a fresh worker dies on it."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import parity  # noqa: E402

FOLDERS = [os.path.join(ROOT, "fixtures"), os.path.join(HERE, "fixtures"),
           os.path.join(ROOT, "..", "shared", "conformance"),
           os.path.join(ROOT, "..", "shared", "conformance-attention"),
           os.path.join(ROOT, "..", "shared", "conformance-next")]  # the folders ci/peer.sh runs


class KnownFindingsTest(unittest.TestCase):
    def test_table_names_existing_fixtures(self):
        known = parity.known_findings(os.path.join(ROOT, "docs", "vllm-parity.md"))
        self.assertIn("save_partial_states/bad_slot_beyond_cache", known)
        present = [f for f in FOLDERS if os.path.isdir(f)]
        if len(present) < len(FOLDERS):
            self.skipTest("the shared fixture folders are absent")
        for case in sorted(known):
            with self.subTest(case=case):
                self.assertTrue(any(os.path.isfile(os.path.join(f, case + ".safetensors"))
                                    for f in present), f"{case}: no such fixture")

    def test_only_the_known_findings_section_counts(self):
        text = ("# t\n\n## 3. Other\n\n| `a/not_this` | x |\n\n## Known findings\n\n"
                "| cases | what |\n|---|---|\n| `op_a/case_1`, `op_b/case_2` | `op_c/in_text` |\n"
                "\n## 4. Speed\n\n| `op_d/after` | y |\n")
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(text)
        try:
            self.assertEqual(parity.known_findings(f.name), {"op_a/case_1", "op_b/case_2"})
        finally:
            os.unlink(f.name)

    def test_case_id(self):
        self.assertEqual(parity.case_id("conformance/save_partial_states/bad_x.safetensors"),
                         "save_partial_states/bad_x")
        self.assertEqual(parity.case_id("topk_transform_512/c.safetensors"),
                         "topk_transform_512/c")


class Scripted(parity.Worker):
    """A worker whose answers are scripted: a crash leaves it without a process."""

    def __init__(self, answers):
        super().__init__()
        self.answers, self.asked = list(answers), []

    def judge(self, path):
        status = self.answers.pop(0)
        self.asked.append((path, self.process is None))
        self.process = None if status == "CRASH" else object()
        return status, path


class JudgedTest(unittest.TestCase):
    def test_a_crash_in_a_used_worker_is_asked_again_in_a_fresh_one(self):
        w = Scripted(["PASS", "CRASH", "PASS"])
        self.assertEqual(parity.judged(w, "a", False), ("PASS", "a"))
        self.assertEqual(parity.judged(w, "b", False), ("PASS", "b"))
        self.assertEqual(w.asked, [("a", True), ("b", False), ("b", True)])

    def test_a_crash_in_a_fresh_worker_or_of_a_known_finding_stands(self):
        w = Scripted(["CRASH"])
        self.assertEqual(parity.judged(w, "a", False), ("CRASH", "a"))
        w = Scripted(["FAIL", "CRASH"])
        self.assertEqual(parity.judged(w, "a", True)[0], "FAIL")
        self.assertEqual(parity.judged(w, "b", True), ("CRASH", "b"))
        self.assertEqual(w.asked, [("a", True), ("b", False)])
        w = Scripted(["PASS", "CRASH", "CRASH"])
        parity.judged(w, "a", False)
        self.assertEqual(parity.judged(w, "b", False), ("CRASH", "b"))
        self.assertEqual(w.asked, [("a", True), ("b", False), ("b", True)])


if __name__ == "__main__":
    unittest.main()


class Stalling(parity.Worker):
    """A real worker process that reads its request and never answers."""

    seconds = 1

    def start(self):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys, time; sys.stdin.readline(); time.sleep(600)"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)


class TimeoutTest(unittest.TestCase):
    def test_a_fixture_that_does_not_return_kills_its_worker(self):
        w = Stalling()
        status, detail = w.judge("a")
        self.assertEqual(status, "CRASH")
        self.assertIn("did not return within 1 s", detail)
        self.assertIsNone(w.process)
