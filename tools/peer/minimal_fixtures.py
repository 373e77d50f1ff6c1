"""Writes tools/peer/fixtures/: the smallest fixtures that reproduce vLLM CPU's unchecked-index
findings (docs/vllm-parity.md, Known findings). They are bad-input cases: each holds one defect
and expects the spec's error, so no expected output is computed.

    PYTHONPATH=<build>/python python3 tools/peer/minimal_fixtures.py
"""
import os

import torch

from dsv4cpu import fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def write(op, case, inputs, error, description, **scalars):
    os.makedirs(os.path.join(OUT, op), exist_ok=True)
    fixtures.save(os.path.join(OUT, op, case + ".safetensors"), op, inputs, {},
                  description=description, expected_error=error, **scalars)


def main():
    # compressor.md §3: C4 main (SW = 1024), one state page of 4 rows; the token's slot is row 4.
    write("save_partial_states", "bad_slot_one_past_cache_n1", {
        "kv": torch.ones(1, 1024), "score": torch.zeros(1, 1024), "ape": torch.zeros(4, 1024),
        "positions": torch.tensor([3]), "state_cache": torch.zeros(1, 4, 2048),
        "slot_mapping": torch.tensor([4])}, "IndexError",
        "One token, slot 4 = nb*sbs of a 1-page cache: bad-input.md §4 -> IndexError. vLLM "
        "0.32.0 writes the row past the cache.")
    # compressor.md §6: C4 indexer (head 128, window 8), one emitting token at position 3 whose
    # kv slot 64 lies past the single 64-entry cache page.
    write("compress_norm_rope_store_indexer", "bad_kv_slot_one_past_cache_n1", {
        "state_cache": torch.ones(1, 4, 512),
        "gather_slots": torch.tensor([[-1, -1, -1, -1, 0, 1, 2, 3]]),
        "positions": torch.tensor([3]), "kv_slot_mapping": torch.tensor([64]),
        "rms_norm_weight": torch.ones(128),
        "cos_sin_cache": torch.cat([torch.ones(4, 32), torch.zeros(4, 32)], 1),
        "kv_cache": torch.zeros(1, 64 * 132, dtype=torch.uint8)}, "IndexError",
        "kv slot 64 of a 1-page (64-entry) cache: bad-input.md §4 -> IndexError. vLLM 0.32.0 "
        "writes the entry past the cache.",
        rms_norm_eps=1e-6, kv_cache_block_size=64, compress_ratio=4)
    # indexer.md §2: one token, one head, position 4 of a 4-row RoPE table.
    write("fused_indexer_q_rope_quant", "bad_position_one_past_table_t1", {
        "q": torch.ones(1, 1, 128), "weights": torch.ones(1, 1), "positions": torch.tensor([4]),
        "cos_sin_cache": torch.cat([torch.ones(4, 32), torch.zeros(4, 32)], 1)}, "IndexError",
        "Position 4 of a 4-row cos_sin_cache: bad-input.md §4 -> IndexError. vLLM 0.32.0 reads "
        "the row past the table.")


if __name__ == "__main__":
    main()
