// The optimized indexer variants (indexer.md §2, §4, §5, §7) as registered in api/registry.cpp.
// Each kernel takes validated arguments, like the reference ones.
#pragma once
#include "args/indexer.hpp"
#include "optimized/indexer_logits.hpp"

namespace dsv4cpu::detail::opt {

// The logits kernels (optimized/indexer_amx.cpp, indexer_avx512bf16.cpp, indexer_hwy.cpp).
const LogitsKernel& amx_logits_kernel();
const LogitsKernel& avx512bf16_logits_kernel();
const LogitsKernel& hwy_logits_kernel();

// fp8_paged_mqa_logits: "amx", "avx512bf16", "hwy".
void fp8_paged_mqa_logits_amx(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx);
void fp8_paged_mqa_logits_avx512bf16(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx);
void fp8_paged_mqa_logits_hwy(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx);

// indexer_topk: the same three logits kernels, each with the optimized selection.
void indexer_topk_amx(const IndexerTopkArgs& a, const RunContext& ctx);
void indexer_topk_avx512bf16(const IndexerTopkArgs& a, const RunContext& ctx);
void indexer_topk_hwy(const IndexerTopkArgs& a, const RunContext& ctx);

// fused_indexer_q_rope_quant "hwy" (optimized/indexer_hwy.cpp), bit-exact with the reference.
void fused_indexer_q_rope_quant_hwy(const FusedIndexerQRopeQuantArgs& a, const RunContext& ctx);

// topk_transform_512 / topk_transform_1024 "hwy" (optimized/topk_hwy.cpp).
void topk_transform_hwy(const TopkTransformArgs& a, const RunContext& ctx);

}  // namespace dsv4cpu::detail::opt
