"""A correct implementation of a few ops as plain Python functions that return their outputs
(through the dsv4cpu wrappers), for the conformance runner's generic binding. Its
fp8_paged_mqa_logits has no next_n: MTP fixtures must be skipped."""
import dsv4cpu


def map_local_to_global_slots(local_indices, req_idx, block_table, block_size):
    return dsv4cpu.map_local_to_global_slots(local_indices, req_idx, block_table, block_size)


def save_partial_states(kv, score, ape, positions, state_cache, slot_mapping):
    dsv4cpu.save_partial_states(kv, score, ape, positions, state_cache, slot_mapping)


def fp8_paged_mqa_logits(q_fp8, kv_cache, weights, seq_lens, page_table, block_size: int,
                         max_seq_len: int):
    return dsv4cpu.fp8_paged_mqa_logits(q_fp8, kv_cache, weights, seq_lens, page_table,
                                        block_size, max_seq_len)


def topk_transform_512(scores, seq_lens, page_table=None, page_size=None, mode="canonical"):
    raw, pages = dsv4cpu.topk_transform_512(scores, seq_lens, page_table, page_size, mode)
    return {"raw_indices": raw, "page_indices": pages}
