"""Tests of engine_model.py's checkpoint names and shapes (no vLLM, no torch): the tiny
DeepSeek-V4's tensors in DeepSeek-V4's checkpoint naming, written out by hand here from the
shapes of vLLM 0.32.0's parameters (vllm/models/deepseek_v4: attention.py, compressor.py,
cpu/model.py) before its loaders fuse and shard them."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import engine_model  # noqa: E402

BF16, F32, I32 = "bf16", "f32", "i32"

TOP = {
    "embed.weight": ((4096, 512), BF16),
    "head.weight": ((4096, 512), BF16),
    "norm.weight": ((512,), BF16),
    "hc_head_fn": ((4, 2048), F32),
    "hc_head_base": ((4,), F32),
    "hc_head_scale": ((1,), F32),
}

# Layer 0: compress ratio 4 (C4A: overlapping compressor, indexer), hash-routed.
LAYER_0 = {
    "hc_attn_fn": ((24, 2048), F32), "hc_attn_base": ((24,), F32), "hc_attn_scale": ((3,), F32),
    "hc_ffn_fn": ((24, 2048), F32), "hc_ffn_base": ((24,), F32), "hc_ffn_scale": ((3,), F32),
    "attn_norm.weight": ((512,), BF16),
    "ffn_norm.weight": ((512,), BF16),
    "attn.attn_sink": ((16,), F32),
    "attn.wq_a.weight": ((256, 512), BF16),
    "attn.q_norm.weight": ((256,), BF16),
    "attn.wq_b.weight": ((8192, 256), BF16),
    "attn.wkv.weight": ((512, 512), BF16),
    "attn.kv_norm.weight": ((512,), BF16),
    "attn.wo_a.weight": ((512, 4096), BF16),
    "attn.wo_b.weight": ((512, 512), BF16),
    "attn.compressor.ape": ((4, 1024), F32),
    "attn.compressor.wkv.weight": ((1024, 512), BF16),
    "attn.compressor.wgate.weight": ((1024, 512), BF16),
    "attn.compressor.norm.weight": ((512,), BF16),
    "attn.indexer.wq_b.weight": ((8192, 256), BF16),
    "attn.indexer.weights_proj.weight": ((64, 512), BF16),
    "attn.indexer.compressor.ape": ((4, 256), F32),
    "attn.indexer.compressor.wkv.weight": ((256, 512), BF16),
    "attn.indexer.compressor.wgate.weight": ((256, 512), BF16),
    "attn.indexer.compressor.norm.weight": ((128,), BF16),
    "ffn.gate.weight": ((64, 512), BF16),
    "ffn.gate.tid2eid": ((4096, 6), I32),
    "ffn.shared_experts.w1.weight": ((256, 512), BF16),
    "ffn.shared_experts.w2.weight": ((512, 256), BF16),
    "ffn.shared_experts.w3.weight": ((256, 512), BF16),
}
EXPERT = {"w1.weight": ((256, 512), BF16), "w2.weight": ((512, 256), BF16),
          "w3.weight": ((256, 512), BF16)}


class CheckpointTensorsTest(unittest.TestCase):
    def setUp(self):
        self.tensors = {name: (tuple(shape), dtype) for name, (shape, dtype)
                        in engine_model.checkpoint_tensors().items()}

    def layer(self, index):
        prefix = f"layers.{index}."
        return {name[len(prefix):]: v for name, v in self.tensors.items()
                if name.startswith(prefix) and ".ffn.experts." not in "." + name[len(prefix):]}

    def test_top_level(self):
        self.assertEqual({n: v for n, v in self.tensors.items() if not n.startswith("layers.")},
                         TOP)

    def test_c4a_hash_layer(self):
        self.assertEqual(self.layer(0), LAYER_0)

    def test_c128a_layer(self):
        # No indexer, a compressor without overlap (128 x 512), the routing bias instead of the
        # hash table.
        expected = {n: v for n, v in LAYER_0.items()
                    if ".indexer." not in n and n != "ffn.gate.tid2eid"}
        expected.update({"attn.compressor.ape": ((128, 512), F32),
                         "attn.compressor.wkv.weight": ((512, 512), BF16),
                         "attn.compressor.wgate.weight": ((512, 512), BF16),
                         "ffn.gate.bias": ((64,), F32)})
        self.assertEqual(self.layer(1), expected)

    def test_routed_experts(self):
        for layer in (0, 1):
            expected = {f"layers.{layer}.ffn.experts.{e}.{n}": v
                        for e in range(64) for n, v in EXPERT.items()}
            prefix = f"layers.{layer}.ffn.experts."
            self.assertEqual({n: v for n, v in self.tensors.items() if n.startswith(prefix)},
                             expected)

    def test_nothing_else(self):
        self.assertEqual(len(self.tensors), len(TOP) + len(LAYER_0) + (len(LAYER_0) - 7 + 1)
                         + 2 * 64 * len(EXPERT))


if __name__ == "__main__":
    unittest.main()
