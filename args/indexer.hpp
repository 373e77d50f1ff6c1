// The kernel-facing argument packs of the indexer ops (validated by api/ before any variant runs,
// read by every variant), the small pieces of the spec that every variant needs (row lengths, the
// K-cache layout), and the kernels of every variant (reference/, optimized/).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/check.hpp"
#include "core/registry.hpp"
#include "dsv4cpu/indexer.hpp"

namespace dsv4cpu::detail {

// indexer.md §1: D = kIndexerHeadDim, K = kIndexerTopk; the K-cache entry is
// kIndexerKEntryBytes (dsv4cpu/cache_sizes.hpp).

struct FusedIndexerQRopeQuantArgs {
  TensorView q, weights, positions, cos_sin_cache;
  float softmax_scale, head_scale;
  MutableTensorView q_fp8, weights_out;
  // Derived by validation.
  int64_t T = 0, H = 0;
};

struct Fp8PagedMqaLogitsArgs {
  TensorView q_fp8, kv_cache, weights, seq_lens, page_table;
  int64_t block_size, max_seq_len;
  MutableTensorView logits;
  int64_t next_n;
  // Derived by validation: batch entries, heads, and whether seq_lens is [B, next_n].
  int64_t B = 0, H = 0;
  bool seq_lens_2d = false;
};

// indexer.md §8: visible length of logits row (b, j); with next_n = 1 this is seq_lens[b] (§4.1).
inline int64_t mqa_row_length(const Fp8PagedMqaLogitsArgs& a, const IndexReader& seq_lens,
                              int64_t b, int64_t j) {
  if (a.seq_lens_2d) return seq_lens(b, j);
  return std::max<int64_t>(0, seq_lens(b) - a.next_n + j + 1);
}

// indexer.md §3: page `page` of the indexer K cache holds, for entry e < P, 128 fp8 codes at
// byte e·128 and the raw little-endian fp32 scale at byte P·128 + 4e.
class IndexerKCache {
 public:
  IndexerKCache(const TensorView& kv_cache, int64_t block_size)
      : base_(kv_cache.ptr<const uint8_t>()),
        page_stride_(kv_cache.rank() == 2 ? kv_cache.stride(0) : 0),
        P_(block_size) {}
  const uint8_t* codes(int64_t page, int64_t e) const noexcept {
    return base_ + page * page_stride_ + e * kIndexerHeadDim;
  }
  float scale(int64_t page, int64_t e) const noexcept {
    float s;
    std::memcpy(&s, base_ + page * page_stride_ + P_ * kIndexerHeadDim + 4 * e, 4);
    return s;
  }
  int64_t block_size() const noexcept { return P_; }

 private:
  const uint8_t* base_;
  int64_t page_stride_, P_;
};

// topk_transform_512 and topk_transform_1024 (indexer.md §5, §5.7).
struct TopkTransformArgs {
  TensorView scores, seq_lens, page_table;
  int64_t page_size;
  TopkMode mode;
  MutableTensorView raw_indices, page_indices;
  int64_t K;  // selection width: 512, or 1024 (canonical only)
  // Derived by validation.
  int64_t B = 0, S = 0;
  int page_shift = 0;  // log2(page_size)
};

struct ShortContextTopkArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView positions;
  MutableTensorView topk_indices;
  int64_t T = 0;
};

struct IndexerTopkArgs {
  TensorView q_fp8, weights, query_start_loc, seq_lens, block_table, kv_cache;
  int64_t block_size;
  TopkMode mode;
  MutableTensorView topk_indices;
  // Derived by validation: tokens, heads, requests, and the branch of indexer.md §7.2.
  int64_t T = 0, H = 0, R = 0;
  bool short_context = true;
};

// ---- the kernels, registered in api/registry.cpp: void(const Args&, const RunContext&) on
// validated arguments ----

// The scalar fp32 reference kernels (the oracle; reference/indexer.cpp, reference/topk.cpp).
namespace ref {

// Computes weights_out into scratch, checks it when ctx.check_finite (bad-input.md §1.4 (f), the
// first offender token-major), then writes both outputs.
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

}  // namespace ref

// The optimized variants (indexer.md §2, §4, §5, §7).
namespace opt {

// fp8_paged_mqa_logits and indexer_topk: one variant per logits kernel, from the family's table
// (DSV4CPU_LOGITS_KERNELS, optimized/indexer_logits.hpp; the drivers in indexer_driver.cpp).

// fused_indexer_q_rope_quant "hwy" (optimized/indexer_hwy.cpp), bit-exact with the reference.
// When ctx.check_finite and a computed weight is not finite, the reference reruns the call and
// throws its NonFiniteError (core/fallback.hpp).
void fused_indexer_q_rope_quant_hwy(const FusedIndexerQRopeQuantArgs& a, const RunContext& ctx);

// topk_transform_512 / topk_transform_1024 "hwy" (optimized/topk_hwy.cpp).
void topk_transform_hwy(const TopkTransformArgs& a, const RunContext& ctx);

}  // namespace opt

}  // namespace dsv4cpu::detail
