// The scalar fp32 reference kernels of the indexer (the oracle). Each takes validated arguments.
#pragma once
#include <cstdint>

#include "args/indexer.hpp"

namespace dsv4cpu::detail::ref {

void fused_indexer_q_rope_quant(const FusedIndexerQRopeQuantArgs& a, const RunContext& ctx);
void fp8_paged_mqa_logits(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx);
void topk_transform(const TopkTransformArgs& a, const RunContext& ctx);  // K = 512 and 1024
void short_context_topk(const ShortContextTopkArgs& a, const RunContext& ctx);
void indexer_topk(const IndexerTopkArgs& a, const RunContext& ctx);

// Row building blocks, shared by the kernels above (and reachable from tests).

// indexer.md §4.3: logits of one query row (q: H·128 codes, w: H weights) for keys 0 .. L−1,
// key j at entry j % P of page page_table(row, j / P); out[0 .. L) is written.
void mqa_logits_row(const uint8_t* q, const float* w, int64_t H, const IndexerKCache& kv,
                    const IndexReader& page_table, int64_t row, int64_t L, float* out);

// indexer.md §5.2 / §6: out[i] = i for i < L, −1 for L <= i < K.
void identity_row(int64_t L, int64_t K, int32_t* out);

// indexer.md §5.3: the first K of 0 .. L−1 in the canonical order (L > K).
void topk_canonical_row(const float* scores, int64_t L, int64_t K, int32_t* out);

// indexer.md §5.4 with a heap of len = K (the model uses 512; the spec's examples use 4), L > K.
void topk_vllm_row(const float* scores, int64_t L, int64_t K, int32_t* out);

}  // namespace dsv4cpu::detail::ref
