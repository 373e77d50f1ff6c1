"""Tests of differences.py's SWA insert rule without vLLM: vLLM's fused_qnorm_rope_kv_insert_cpu
is stood in for by dsv4cpu serving it (dsv4cpu.vllm, at vLLM's option values), its q_out moved by
a known number of bf16 ulps on elements the test picks. q_out is judged by the verifier through
the package (the fixture with compare=bf16_ulp=1): within 1 ulp it is the documented difference
of attention.md §3.4, past it, or a NaN for a number, a failure."""
import os
import sys
import types
import unittest

import torch

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.modules["vllm_kernels"] = types.SimpleNamespace(FUNCTIONS={})  # vLLM's kernels: none here
import differences  # noqa: E402
import dsv4cpu  # noqa: E402
from dsv4cpu import fixtures, vllm  # noqa: E402

OP = "fused_qnorm_rope_kv_insert"
FOLDER = os.path.join(ROOT, "fixtures", OP)
FLUSH = differences.OPTION_SECTIONS["fp8_subnormals"]


def served(q, kv, positions, swa_kv_cache_2d, slot_mapping, cos_sin_cache, q_head_padded, eps,
           cache_block_size):
    """vLLM's signature, dsv4cpu's op at vLLM's options (what the plugin serves it with)."""
    _, q_out = dsv4cpu.fused_qnorm_rope_kv_insert(
        q=q, kv=kv, positions=positions, slot_mapping=slot_mapping, swa_cache=swa_kv_cache_2d,
        cos_sin_cache=cos_sin_cache, q_head_padded=q_head_padded, eps=eps,
        cache_block_size=cache_block_size, **vllm.OPTIONS[OP])
    return q_out


def moved(xor, every=None, nan_at=None):
    """The stand-in with q_out's bit pattern XORed with ``xor`` (1: one ulp, 2: two ulps, for a
    finite value) on every ``every``-th finite element (else the first finite one), or a NaN put
    on element ``nan_at``; also the flat indices it changed."""
    changed = []

    def kernel(*args):
        q_out = served(*args)
        bits = q_out.view(torch.int16).view(-1)
        if nan_at is not None:
            bits[nan_at] = 0x7FC0
            changed[:] = [nan_at]
            return q_out
        finite = q_out.view(-1).isfinite().nonzero().view(-1)
        picked = finite[::every] if every else finite[:1]
        bits[picked] ^= xor
        changed[:] = picked.tolist()
        return q_out
    return kernel, changed


def index_text(shape, flat):
    index = []
    for extent in reversed(shape):
        index.append(flat % extent)
        flat //= extent
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


class InsertTest(unittest.TestCase):
    def setUp(self):
        differences.FUNCTIONS[OP] = served

    def tearDown(self):
        differences.FUNCTIONS.pop(OP)

    def judge(self, name, kernel):
        differences.FUNCTIONS[OP] = kernel
        return differences.judge(os.path.join(FOLDER, name + ".safetensors"))

    def test_exact_q_out_passes(self):
        self.assertEqual(self.judge("spec_example_3_5", served), ("PASS", "exact (2 outputs)"))
        fixture = fixtures.load(os.path.join(FOLDER, "spec_example_3_5.safetensors"))
        self.assertEqual(differences.run_insert(fixture, served),
                         ("PASS", "exact (2 outputs)", False))

    def test_one_ulp_is_the_documented_difference(self):
        for name, sections in (("spec_example_3_5", [differences.QNORM_SECTION]),
                               ("tiny_tiles_cpu_exact", [FLUSH, differences.QNORM_SECTION])):
            with self.subTest(fixture=name):
                kernel, changed = moved(1, every=3)
                fixture = fixtures.load(os.path.join(FOLDER, name + ".safetensors"))
                numel = fixture.tensors["expected.q_out"].numel()
                status, text = self.judge(name, kernel)
                self.assertGreater(len(changed), 1)
                self.assertEqual(status, "EXPECTED", text)
                self.assertEqual(text, f"q_out worst bf16 ulp 1 ({len(changed)} of {numel} "
                                       f"elements not exact) — expected ({'; '.join(sections)})")

    def test_two_ulps_fail(self):
        kernel, changed = moved(2)
        fixture = fixtures.load(os.path.join(FOLDER, "spec_example_3_5.safetensors"))
        status, detail, inexact = differences.run_insert(fixture, kernel)
        shape = list(fixture.tensors["expected.q_out"].shape)
        self.assertEqual(status, "FAIL")
        self.assertFalse(inexact)
        self.assertTrue(detail.startswith(f"q_out{index_text(shape, changed[0])}: got "), detail)
        self.assertIn("2 bf16 ulps apart (1 of", detail)
        self.assertEqual(self.judge("spec_example_3_5", kernel)[0], "FAIL")

    def test_nan_for_a_number_fails(self):
        fixture = fixtures.load(os.path.join(FOLDER, "spec_example_3_5.safetensors"))
        want = fixture.tensors["expected.q_out"].view(-1)
        at = int(want.isfinite().nonzero()[-1])  # the last finite element
        kernel, _ = moved(0, nan_at=at)
        status, detail, _ = differences.run_insert(fixture, kernel)
        self.assertEqual(status, "FAIL")
        shape = list(fixture.tensors["expected.q_out"].shape)
        self.assertTrue(detail.startswith(f"q_out{index_text(shape, at)}: got nan"), detail)
        self.assertIn("(NaN against a number)", detail)


if __name__ == "__main__":
    unittest.main()
