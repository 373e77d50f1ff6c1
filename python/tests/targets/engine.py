"""An engine-style kernel: its own names, order and suffix, outputs written into an argument."""
import dsv4cpu


def fp8_paged_mqa_logits_cpu(out, q, k_cache, head_weights, context_lens, block_tables,
                             max_context_len, page_size=64):
    dsv4cpu.fp8_paged_mqa_logits(q, k_cache, head_weights, context_lens, block_tables,
                                 page_size, max_context_len, logits=out)
