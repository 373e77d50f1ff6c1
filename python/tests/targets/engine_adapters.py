"""The adapter of targets.engine for the conformance runner."""
from dsv4cpu.conformance import Unsupported, adapter


@adapter("targets.engine", "fp8_paged_mqa_logits")
def _(kernel, a, fixture):
    if a.get("next_n", 1) != 1:
        raise Unsupported("no MTP (next_n)")
    kernel(a["logits"], a["q_fp8"], a["kv_cache"], a["weights"], a["seq_lens"], a["page_table"],
           a["max_seq_len"], page_size=a["block_size"])
