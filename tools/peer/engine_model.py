"""The tiny DeepSeek-V4 of the engine run (tools/peer/engine.py, docs/vllm.md "The engine run"):
its config.json and a checkpoint whose weights do not depend on the tensor-parallel sharding.

    engine_model.py FOLDER     writes FOLDER/config.json and FOLDER/model.safetensors

The names, shapes and dtypes come from the config alone (`checkpoint_tensors`, no torch): the
checkpoint naming of DeepSeek-V4, which vLLM 0.32.0's `load_weights` and weights mapper accept
(vllm/models/deepseek_v4/cpu/model.py); engine.py checks in every worker that they load every
parameter of vLLM's model.
"""
import json
import os
import struct
import sys
import zlib

VOCAB = 4096
SEED = 0

#: The tiny DeepSeek-V4: the attention dimensions are the model's (head 512, rope 64, indexer
#: 64 heads x 128, top-k 512, window 128, compress ratios 4 and 128); the rest is shrunk. The
#: keys are those vLLM 0.32.0 reads (vllm/models/deepseek_v4/attention.py, cpu/model.py,
#: common/rope.py). vLLM's CPU routing kernels take 64/128/256/384 experts only.
CONFIG = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "torch_dtype": "bfloat16",
    "vocab_size": VOCAB,
    "hidden_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 16,
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "q_lora_rank": 256,
    "o_lora_rank": 256,
    "o_groups": 2,
    "n_routed_experts": 64,
    "num_experts_per_tok": 6,
    "n_shared_experts": 1,
    "moe_intermediate_size": 256,
    "num_hash_layers": 1,
    "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
    "routed_scaling_factor": 1.5,
    "swiglu_limit": 10.0,
    "hidden_act": "silu",
    "sliding_window": 128,
    "compress_ratios": [4, 128],
    "index_n_heads": 64,
    "index_head_dim": 128,
    "index_topk": 512,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_scaling": {"type": "yarn", "rope_type": "yarn", "factor": 16.0,
                     "original_max_position_embeddings": 65536, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "max_position_embeddings": 1048576,
    "num_nextn_predict_layers": 0,
    "expert_dtype": "bf16",
    "bos_token_id": 0,
    "eos_token_id": 1,
}


def checkpoint_tensors(config=CONFIG):
    """name -> (shape, dtype), dtype "bf16", "f32" (the parameters vLLM keeps in float32:
    hyper-connections, attention sinks, the compressors' APE, the routing bias) or "i32" (the
    hash-routing table). Full, unsharded shapes; each rank of a tensor-parallel run takes its
    part in vLLM's weight loaders."""
    c = config
    hidden, vocab, hc = c["hidden_size"], c["vocab_size"], c["hc_mult"]
    heads, head, q_rank = c["num_attention_heads"], c["head_dim"], c["q_lora_rank"]
    groups, o_rank = c["o_groups"], c["o_lora_rank"]
    experts, inter = c["n_routed_experts"], c["moe_intermediate_size"] * c["n_shared_experts"]
    mix = (2 + hc) * hc  # the hyper-connections' pre, post and combination weights

    def compressor(prefix, ratio, dim):
        width = (2 if ratio == 4 else 1) * dim  # C4A overlaps two windows
        return {f"{prefix}.ape": ((ratio, width), "f32"),
                f"{prefix}.wkv.weight": ((width, hidden), "bf16"),
                f"{prefix}.wgate.weight": ((width, hidden), "bf16"),
                f"{prefix}.norm.weight": ((dim,), "bf16")}

    def mlp(prefix, size):
        return {f"{prefix}.w1.weight": ((size, hidden), "bf16"),
                f"{prefix}.w2.weight": ((hidden, size), "bf16"),
                f"{prefix}.w3.weight": ((size, hidden), "bf16")}

    tensors = {"embed.weight": ((vocab, hidden), "bf16"),
               "head.weight": ((vocab, hidden), "bf16"),
               "norm.weight": ((hidden,), "bf16"),
               "hc_head_fn": ((hc, hc * hidden), "f32"),
               "hc_head_base": ((hc,), "f32"),
               "hc_head_scale": ((1,), "f32")}
    for layer, ratio in enumerate(c["compress_ratios"][:c["num_hidden_layers"]]):
        p = f"layers.{layer}"
        for block in ("attn", "ffn"):
            tensors[f"{p}.hc_{block}_fn"] = ((mix, hc * hidden), "f32")
            tensors[f"{p}.hc_{block}_base"] = ((mix,), "f32")
            tensors[f"{p}.hc_{block}_scale"] = ((3,), "f32")
            tensors[f"{p}.{block}_norm.weight"] = ((hidden,), "bf16")
        tensors.update({
            f"{p}.attn.attn_sink": ((heads,), "f32"),
            f"{p}.attn.wq_a.weight": ((q_rank, hidden), "bf16"),
            f"{p}.attn.q_norm.weight": ((q_rank,), "bf16"),
            f"{p}.attn.wq_b.weight": ((heads * head, q_rank), "bf16"),
            f"{p}.attn.wkv.weight": ((head, hidden), "bf16"),
            f"{p}.attn.kv_norm.weight": ((head,), "bf16"),
            f"{p}.attn.wo_a.weight": ((groups * o_rank, heads * head // groups), "bf16"),
            f"{p}.attn.wo_b.weight": ((hidden, groups * o_rank), "bf16"),
            f"{p}.ffn.gate.weight": ((experts, hidden), "bf16")})
        if ratio > 1:
            tensors.update(compressor(f"{p}.attn.compressor", ratio, head))
        if ratio == 4:  # the indexer: C4A layers only
            index_heads, index_dim = c["index_n_heads"], c["index_head_dim"]
            tensors[f"{p}.attn.indexer.wq_b.weight"] = ((index_heads * index_dim, q_rank), "bf16")
            tensors[f"{p}.attn.indexer.weights_proj.weight"] = ((index_heads, hidden), "bf16")
            tensors.update(compressor(f"{p}.attn.indexer.compressor", ratio, index_dim))
        if layer < c["num_hash_layers"]:
            tensors[f"{p}.ffn.gate.tid2eid"] = ((vocab, c["num_experts_per_tok"]), "i32")
        else:
            tensors[f"{p}.ffn.gate.bias"] = ((experts,), "f32")
        tensors.update(mlp(f"{p}.ffn.shared_experts", inter))
        for expert in range(experts):
            tensors.update(mlp(f"{p}.ffn.experts.{expert}", c["moe_intermediate_size"]))
    return tensors


#: The values, a distribution under which the tiny model computes something (vLLM's dummy
#: weights, uniform in [-1e-3, 1e-3], give logits within 1e-5 of each other): bf16 vectors (the
#: RMSNorm weights; the model has no bf16 biases) are 1; bf16 matrices (embedding, projections,
#: experts) uniform with standard deviation 1/sqrt(512) (hidden size 512); float32 tensors
#: uniform in [-1e-3, 1e-3] (the dummy loader's range); the hash-routing table a fixed pattern of
#: 6 distinct experts per token. Each tensor from a generator seeded by its name: the same bytes
#: every run.
WEIGHT_STD = 512 ** -0.5
FLOAT32_RANGE = 1e-3


def tensor_values(name, shape, dtype, config=CONFIG):
    import torch
    if dtype == "i32":
        rows = torch.arange(shape[0], dtype=torch.int64).unsqueeze(1) * 7
        columns = torch.arange(shape[1], dtype=torch.int64).unsqueeze(0) * 11
        return ((rows + columns) % config["n_routed_experts"]).to(torch.int32)
    if dtype == "bf16" and len(shape) == 1:
        return torch.ones(shape, dtype=torch.bfloat16)
    generator = torch.Generator().manual_seed(SEED * 2 ** 32 + zlib.crc32(name.encode()))
    half_width = 3 ** 0.5 * WEIGHT_STD if dtype == "bf16" else FLOAT32_RANGE
    values = (torch.rand(shape, generator=generator, dtype=torch.float32) * 2 - 1) * half_width
    return values.to(torch.bfloat16 if dtype == "bf16" else torch.float32)


_SAFETENSORS_DTYPE = {"bf16": "BF16", "f32": "F32", "i32": "I32"}


def write_checkpoint(path, config=CONFIG):
    """The safetensors file (header: a little-endian u64 length, then JSON; then the data)."""
    import torch
    tensors = checkpoint_tensors(config)
    header, offset = {}, 0
    for name, (shape, dtype) in tensors.items():
        size = 4 if dtype != "bf16" else 2
        for extent in shape:
            size *= extent
        header[name] = {"dtype": _SAFETENSORS_DTYPE[dtype], "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, (shape, dtype) in tensors.items():
            values = tensor_values(name, shape, dtype, config).contiguous()
            f.write(values.view(torch.uint8).numpy().tobytes())


def write_model(folder, config=CONFIG):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_checkpoint(os.path.join(folder, "model.safetensors"), config)


if __name__ == "__main__":
    write_model(sys.argv[1])
