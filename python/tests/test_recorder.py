"""Fixtures recorded from calls pass dsv4cpu-verify and the Python runner: docs/python.md's script,
every N-th call, an engine-style kernel with its own names, in-place buffers, fp8 outputs and
returned values."""
import os
import re
import sys

import torch

import dsv4cpu
from dsv4cpu import fixtures
from dsv4cpu.recorder import record

from support import DOCS, conformance, fixture, run, verify


def both_pass(folder, count):
    """dsv4cpu-verify (reference) and the Python runner accept the folder's `count` fixtures."""
    status, lines = verify("--impl", "reference", str(folder))
    assert status == 0 and lines[-1] == f"{count} passed, 0 failed", lines
    status, lines = conformance("--impl", "reference", str(folder))
    assert status == 0 and lines[-1] == f"{count} passed, 0 failed", lines


def test_docs_script(tmp_path):
    text = open(os.path.join(DOCS, "python.md"), encoding="utf-8").read()
    section = text[text.index("## Recorder"):]
    script = next(block for block in re.findall(r"```python\n(.*?)```", section, re.S)
                  if block.startswith("import torch, dsv4cpu") and "recorder.record" in block)
    assert len(script.strip().split("\n")) == 5
    status, out = run([sys.executable, "-c", script], cwd=tmp_path)
    assert status == 0, out
    assert os.listdir(tmp_path / "recorded") == ["map_local_to_global_slots_00000.safetensors"]
    both_pass(tmp_path / "recorded", 1)
    f = fixtures.load(tmp_path / "recorded" / "map_local_to_global_slots_00000.safetensors")
    assert sorted(f.tensors) == ["block_table", "expected.slots", "local_indices", "req_idx"]
    assert f.expected["slots"].tolist() == [[28, 9, -1], [19, 0, 13]]
    assert f.scalars == {"block_size": "4"}


def test_every_nth_call(tmp_path):
    kernel = record(torch.ops.dsv4cpu.short_context_topk, tmp_path, every=2)
    for n in range(5):
        out = torch.empty(3, 512, dtype=torch.int32)
        kernel(torch.tensor([3, 40 + n, 2047]), out)
    assert kernel.calls == 5 and len(kernel.paths) == 3
    recorded = fixtures.load(kernel.paths[1])
    assert recorded.inputs["positions"].tolist() == [3, 42, 2047]  # the third call
    both_pass(tmp_path, 3)


def test_engine_kernel_with_its_own_names(tmp_path):
    def engine_block_slots(table, local, which, page, out):  # an engine's own kernel
        dsv4cpu.map_local_to_global_slots(local, which, table, page, slots=out)

    kernel = record(engine_block_slots, tmp_path, "map_local_to_global_slots",
                    names={"table": "block_table", "local": "local_indices", "which": "req_idx",
                           "page": "block_size", "out": "slots"})
    out = torch.empty(2, 3, dtype=torch.int64)
    kernel(torch.tensor([[7, 2, 1], [4, 0, 3]], dtype=torch.int32),
           torch.tensor([[0, 5, -1], [3, 4, 9]]), torch.tensor([0, 1], dtype=torch.int32), 4, out)
    assert sorted(fixtures.load(kernel.paths[0]).tensors) == \
        ["block_table", "expected.slots", "local_indices", "req_idx"]
    both_pass(tmp_path, 1)


def test_inplace_buffer_and_fp8_outputs(tmp_path):
    t = fixtures.load(fixture("save_partial_states", "c4_indexer_two_requests")).inputs
    state = t["state_cache"].clone()
    record(dsv4cpu.save_partial_states, tmp_path)(t["kv"], t["score"], t["ape"], t["positions"],
                                                  state, t["slot_mapping"])
    q = fixtures.load(fixture("fused_indexer_q_rope_quant", "h64_fp32_inputs")).inputs
    record(torch.ops.dsv4cpu.fused_indexer_q_rope_quant, tmp_path)(
        q["q"], q["weights"], q["positions"], q["cos_sin_cache"], None, 0.25,
        torch.empty(q["q"].shape, dtype=dsv4cpu.FP8_DTYPE), torch.empty(q["weights"].shape))
    saved = fixtures.load(tmp_path / "save_partial_states_00000.safetensors")
    assert fixtures.same_bytes(saved.inputs["state_cache"], t["state_cache"])
    assert fixtures.same_bytes(saved.expected["state_cache"], state)
    quant = fixtures.load(tmp_path / "fused_indexer_q_rope_quant_00000.safetensors")
    assert quant.fp8 == {"expected.q_fp8"} and quant.scalars == {"head_scale": "0.25"}
    both_pass(tmp_path, 2)


def test_returned_values(tmp_path):
    kernel = record(dsv4cpu.indexer_metadata, tmp_path)
    kernel(torch.tensor([0, 1, 2, 5], dtype=torch.int32),
           torch.tensor([10, 20, 30], dtype=torch.int32), torch.zeros(3, 4, dtype=torch.int32), 64)
    split = record(torch.ops.dsv4cpu.split_decodes_and_prefills, tmp_path)
    assert split(torch.tensor([0, 1, 2, 5], dtype=torch.int32), 1) == (2, 1, 2, 3)
    f = fixtures.load(tmp_path / "split_decodes_and_prefills_00000.safetensors")
    assert f.expected["num_prefill_tokens"].tolist() == [3]
    both_pass(tmp_path, 2)


def test_raw_op_without_prefills(tmp_path):
    """The raw indexer_metadata of a decode-only step gives the prefill chunk as empty tensors:
    recorded as the wrapper gives it (no chunk), which both checkers accept."""
    kernel = record(torch.ops.dsv4cpu.indexer_metadata, tmp_path)
    kernel(torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([10, 20], dtype=torch.int32),
           torch.zeros(2, 4, dtype=torch.int32), 64, None, torch.empty(2, dtype=torch.int64))
    f = fixtures.load(tmp_path / "indexer_metadata_00000.safetensors")
    assert "chunk" not in f.expected and f.expected["num_prefills"].tolist() == [0]
    assert f.expected["num_decodes"].tolist() == [2]
    both_pass(tmp_path, 1)


def test_attention_ops(tmp_path):
    """The attention ops: an in-place cache, the optional lse, string and fp32 scalars."""
    t = fixtures.load(fixture("fused_qnorm_rope_kv_insert", "tiny_tiles_gpu_flush")).inputs
    cache = t["swa_cache"].clone()
    record(dsv4cpu.fused_qnorm_rope_kv_insert, tmp_path)(
        t["q"], t["kv"], t["positions"], t["slot_mapping"], cache, t["cos_sin_cache"], 1, 1e-6, 4,
        "gpu", "flush")
    a = fixtures.load(fixture("sparse_mla_attention", "c4a_512_identity_and_random"))
    inputs = dict(a.inputs)
    lse = torch.empty(a.expected["lse"].shape) if "lse" in a.expected else None
    kernel = record(torch.ops.dsv4cpu.sparse_mla_attention, tmp_path)
    out = torch.empty(a.expected["out"].shape, dtype=torch.bfloat16)
    kernel(inputs["q"], inputs["window_cache"], int(a.scalars["window_block_size"]),
           inputs["window_slots"], inputs["compressed_cache"],
           int(a.scalars["compressed_block_size"]), inputs["compressed_slots"],
           inputs.get("attn_sink"), None, None, out, lse)
    insert = fixtures.load(tmp_path / "fused_qnorm_rope_kv_insert_00000.safetensors")
    assert sorted(insert.expected) == ["q_out", "swa_cache"]
    assert insert.scalars["scale_clamp"] == "gpu" and insert.scalars["fp8_subnormals"] == "flush"
    attention = fixtures.load(tmp_path / "sparse_mla_attention_00000.safetensors")
    assert sorted(attention.expected) == sorted(a.expected)
    assert "scale" not in attention.scalars and "nope_decode" not in attention.scalars
    both_pass(tmp_path, 2)
