"""Deliberately wrong implementations: each must fail the conformance run with a clear message."""
import torch

import dsv4cpu


def map_local_to_global_slots(local_indices, req_idx, block_table, block_size, slots):
    """One byte changed."""
    dsv4cpu.map_local_to_global_slots(local_indices, req_idx, block_table, block_size,
                                      slots=slots)
    if slots.numel():
        slots.view(-1).view(torch.uint8)[0] ^= 1


def fp8_paged_mqa_logits(q_fp8, kv_cache, weights, seq_lens, page_table, block_size,
                         max_seq_len, logits, next_n=1):
    """Positions past a row's length left 0 instead of -inf."""
    dsv4cpu.fp8_paged_mqa_logits(q_fp8, kv_cache, weights, seq_lens, page_table, block_size,
                                 max_seq_len, next_n, logits=logits)
    logits[torch.isinf(logits)] = 0.0


def topk_transform_512(scores, seq_lens, page_table, page_size, mode, raw_indices,
                       page_indices=None):
    """The first two selected entries of each row swapped (a wrong top-k order)."""
    dsv4cpu.topk_transform_512(scores, seq_lens, page_table, page_size, mode,
                               raw_indices=raw_indices, page_indices=page_indices)
    for out in (raw_indices, page_indices):
        if out is not None:
            out[:, [0, 1]] = out[:, [1, 0]]


def short_context_topk(positions, topk_indices):
    """Writes its output before finding a bad position."""
    topk_indices.fill_(-1)
    dsv4cpu.short_context_topk(positions, topk_indices=topk_indices)
