"""fixtures.save / load round-trip every dtype bit for bit and interoperate with dsv4cpu-verify;
dsv4cpu.compare applies the verifier's contracts."""
import json
import math
import struct

import pytest
import torch

import dsv4cpu
from dsv4cpu import fixtures

from support import FIXTURES, METADATA_TABLE, fixture, fixture_files, verify


def special_f32():
    bits = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00001, 0xFFFFFFFF,
            0x00000001, 0x3F800000, 0xC0490FDB]
    return torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)


def test_round_trip_every_dtype(tmp_path):
    tensors = {
        "f32": special_f32(),
        "bf16": torch.tensor([0x0000, 0x8000, 0x7F80, 0x7FC1, 0x3F80, 0x0001],
                             dtype=torch.int32).to(torch.int16).view(torch.bfloat16),
        "codes": torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(2, 128),
        "bytes": torch.arange(256, dtype=torch.int32).to(torch.uint8).flip(0),
        "i32": torch.tensor([[-2**31, -1], [0, 2**31 - 1]], dtype=torch.int32),
        "i64": torch.tensor([-2**63, -1, 0, 2**63 - 1], dtype=torch.int64),
        "empty": torch.empty(0, 3, dtype=torch.int64),
        "strided": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
    }
    path = tmp_path / "all.safetensors"
    fixtures.save(path, "map_local_to_global_slots", tensors, {"slots": tensors["i64"]},
                  fp8=("codes",), description="every dtype", block_size=4, eps=1e-6, flag=True,
                  mode="vllm", ignored=None)
    f = fixtures.load(path)
    assert f.op == "map_local_to_global_slots" and f.fp8 == {"codes"}
    assert f.metadata == {"format": "dsv4cpu-fixture/1", "op": "map_local_to_global_slots",
                          "description": "every dtype", "block_size": "4", "eps": "1e-06",
                          "flag": "1", "mode": "vllm"}
    assert sorted(f.tensors) == sorted(list(tensors) + ["expected.slots"])
    for name, t in tensors.items():
        want = t.contiguous().view(dsv4cpu.FP8_DTYPE) if name in f.fp8 else t.contiguous()
        assert fixtures.same_bytes(f.tensors[name], want), name
    assert fixtures.same_bytes(f.expected["slots"], tensors["i64"])
    # The file as the spec describes it: the header names F8_E4M3 and BF16.
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["codes"]["dtype"] == "F8_E4M3" and header["bytes"]["dtype"] == "U8"
    assert header["bf16"]["dtype"] == "BF16" and header["strided"]["shape"] == [4, 3]


@pytest.mark.parametrize("path", [c[0] for c in fixture_files(FIXTURES)][::7])
def test_resaved_fixtures_verify(tmp_path, path):
    """A loaded fixture saved again holds the same tensors and metadata and verifies."""
    f = fixtures.load(path)
    scalars = {k: v for k, v in f.metadata.items() if k not in ("format", "op")}
    out = tmp_path / "again.safetensors"
    fixtures.save(out, f.op, f.inputs, f.expected, fp8=f.fp8, **scalars)
    g = fixtures.load(out)
    assert g.metadata == f.metadata and g.fp8 == f.fp8 and sorted(g.tensors) == sorted(f.tensors)
    for name, t in f.tensors.items():
        assert fixtures.same_bytes(g.tensors[name], t), name
    status, lines = verify("--impl", "reference", str(out))
    assert status == 0 and lines[-1] == "1 passed, 0 failed", lines


def test_unsupported_dtype(tmp_path):
    with pytest.raises(dsv4cpu.ShapeError, match="a: dtype Double"):
        fixtures.save(tmp_path / "x.safetensors", "slot_mapping",
                      {"a": torch.zeros(2, dtype=torch.float64)}, {})


def test_malformed_file(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", 100) + b"{}")
    with pytest.raises(RuntimeError, match="header"):
        fixtures.load(path)


def test_scalar_text():
    assert fixtures.scalar_text(0.1) == "0.1" and float(fixtures.scalar_text(1 / 3)) == 1 / 3
    assert fixtures.scalar_text(True) == "1" and fixtures.scalar_text(-5) == "-5"
    assert fixtures.scalar_text(math.inf) == "inf"
    # What the writer writes, the grammar reads back as the same value.
    for value in (0.1, 1 / 3, -1e-06, 5e-324, 1.7976931348623157e308, -math.inf, -0.0):
        text = fixtures.scalar_text(value)
        assert struct.pack("<d", fixtures.scalar("real", "x", text)) == struct.pack("<d", value)
    assert math.isnan(fixtures.scalar("real", "x", fixtures.scalar_text(math.nan)))
    for value in (0, -5, 2**63 - 1, -2**63, True, False):
        kind = "boolean" if isinstance(value, bool) else "integer"
        assert fixtures.scalar(kind, "x", fixtures.scalar_text(value)) == value


def table_rows():
    with open(METADATA_TABLE, encoding="utf-8") as f:
        return json.load(f)["rows"]


def shown(text):
    """Text as an error message quotes it: control bytes as \\xNN."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def test_metadata_grammar_table():
    """Every row of the table the verifier's test_metadata_grammar reads too, through the
    verifier's own parser (the one the runner uses)."""
    rows = table_rows()
    assert len(rows) > 50
    for row in rows:
        kind, text = row["kind"], row["text"]
        where = f"{kind} {text!r}"
        if not row.get("valid", True):
            with pytest.raises(RuntimeError) as e:
                fixtures.scalar(kind, "key", text)
            assert str(e.value).startswith(f"scalar key = '{shown(text)}' is not "), where
            continue
        value = fixtures.scalar(kind, "key", text)
        if row.get("nan"):
            assert math.isnan(value), where
        elif kind == "real":
            assert struct.pack("<d", value).hex() == \
                bytes.fromhex(row["bits"])[::-1].hex(), where
        elif kind == "real32":
            assert struct.pack("<f", value).hex() == \
                bytes.fromhex(row["bits"])[::-1].hex(), where
        else:
            assert value == row["value"] and type(value) is type(row["value"]), where
    with pytest.raises(ValueError, match="kind 'int'"):
        fixtures.scalar("int", "key", "1")


def test_compare_exact_contract():
    f = fixtures.load(fixture("map_local_to_global_slots", "spec_example"))
    want = f.expected["slots"]
    assert dsv4cpu.compare(f.op, "slots", want, want.clone(), f.inputs, **f.scalars) == \
        (True, "exact")
    wrong = want.clone()
    wrong.view(-1)[3] += 1
    v = dsv4cpu.compare(f.op, "slots", want, wrong, f.inputs, **f.scalars)
    assert not v and v.detail == "slots[0, 3]: got 40, expected 39 (1 of 4 elements differ)"
    v = dsv4cpu.compare(f.op, "slots", want, wrong.int(), f.inputs, **f.scalars)
    assert not v and "I32" in v.detail


def test_compare_fp8_step_contract():
    """fused_indexer_q_rope_quant: fp8 codes within one step (numerics.md §11.2)."""
    f = fixtures.load(fixture("fused_indexer_q_rope_quant", "h64_fp32_inputs"))
    want = f.expected["q_fp8"]
    codes = want.clone()
    bits = codes.view(-1).view(torch.uint8)  # the codes, also where torch has a float8 dtype
    k = int((bits < 0x7E).nonzero()[0])  # a positive code below the largest
    bits[k] += 1
    assert dsv4cpu.compare(f.op, "q_fp8", want, codes, f.inputs, **f.scalars).passed
    bits[k] += 1
    v = dsv4cpu.compare(f.op, "q_fp8", want, codes, f.inputs, **f.scalars)
    assert not v and "2 fp8 steps apart" in v.detail
    assert dsv4cpu.compare(f.op, "q_fp8", want, codes, f.inputs, compare="fp8_step=2",
                           **f.scalars).passed


def test_compare_logits_bound_contract():
    """fp8_paged_mqa_logits: |a - b| <= 2B with B from the inputs; -inf exactly past the rows."""
    f = fixtures.load(fixture("fp8_paged_mqa_logits", "bs64_padded_shuffled"))
    want = f.expected["logits"]
    got = want.clone()
    finite = torch.isfinite(got)
    r, c = (int(i) for i in finite.nonzero()[0])
    got[r, c] = torch.nextafter(got[r, c], torch.tensor(math.inf))
    v = dsv4cpu.compare(f.op, "logits", want, got, f.inputs, **f.scalars)
    assert v.passed and v.detail.startswith("max |Δ|/2B ")
    got[r, c] += 1.0
    v = dsv4cpu.compare(f.op, "logits", want, got, f.inputs, **f.scalars)
    assert not v and f"logits[{r}, {c}]" in v.detail and "> 2B" in v.detail
    got = want.clone()
    got[~finite] = 0.0
    v = dsv4cpu.compare(f.op, "logits", want, got, f.inputs, **f.scalars)
    assert not v and "past the row length" in v.detail
