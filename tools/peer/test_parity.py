"""Tests of parity.py's pure-Python parts (no vLLM, no torch): the Known findings table of
docs/vllm-parity.md names existing fixtures, and case names map to `op/case`."""
import os
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


if __name__ == "__main__":
    unittest.main()
