// Lightning indexer ops (indexer.md). Argument names and order follow the spec's tables; outputs
// are TensorView parameters written by the op, then the per-call Options.
#pragma once
#include <cstdint>
#include <string_view>

#include "dsv4cpu/export.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// indexer.md §2 defaults: RN(128^-0.5) = 0x3DB504F3 and RN(64^-0.5) = 0.125.
inline constexpr float kIndexerSoftmaxScale = 0x1.6a09e6p-4f;
inline constexpr float kIndexerHeadScale = 0.125f;

// indexer.md §2: RoPE on the last 64 dims, per-head power-of-two fp8 quantisation (clamp-amax),
// the scale folded into the head weights.
// q: F32 [T, H, 128], weights: F32 [T, H], positions: I32/I64 [T], cos_sin_cache: F32 [R, 64];
// q_fp8: F8_E4M3 [T, H, 128] and weights_out: F32 [T, H] are written completely.
DSV4CPU_API void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                            const TensorView& positions,
                                            const TensorView& cos_sin_cache, float softmax_scale,
                                            float head_scale, const MutableTensorView& q_fp8,
                                            const MutableTensorView& weights_out,
                                            const Options& options = {});
// The same with softmax_scale = kIndexerSoftmaxScale and head_scale = kIndexerHeadScale.
DSV4CPU_API void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                            const TensorView& positions,
                                            const TensorView& cos_sin_cache,
                                            const MutableTensorView& q_fp8,
                                            const MutableTensorView& weights_out,
                                            const Options& options = {});

// indexer.md §4 and §8 (MTP): logits[b·next_n + j][p] = ks_p · Σ_h w_h · relu(q_h · k_p) for
// p < L_{b,j}, −inf up to max_seq_len.
// q_fp8: F8_E4M3 [B, next_n, H, 128] or [B·next_n, H, 128]; kv_cache: U8 [num_pages, page_bytes]
// (unit inner stride, page stride >= page_bytes >= block_size·132); weights: F32 [B·next_n, H];
// seq_lens: I32/I64 [B] or [B, next_n]; page_table: I32/I64 [B, MP] (row stride >= MP);
// logits: F32 [B·next_n, max_seq_len], written completely.
DSV4CPU_API void fp8_paged_mqa_logits(const TensorView& q_fp8, const TensorView& kv_cache,
                                      const TensorView& weights, const TensorView& seq_lens,
                                      const TensorView& page_table, int64_t block_size,
                                      int64_t max_seq_len, const MutableTensorView& logits,
                                      int64_t next_n = 1, const Options& options = {});

// indexer.md §5.3 / §5.4: the top-k selection order.
enum class TopkMode : uint8_t { canonical, vllm };
// "canonical" / "vllm" -> TopkMode; anything else throws ValueError naming `op` and "mode".
DSV4CPU_API TopkMode parse_topk_mode(const char* op, std::string_view text);

// indexer.md §5: per row the 512 selected local indices (−1 padded) and, when page_indices is
// present, their slots through page_table (which is then required; page_size a power of two).
// scores: F32 [B, S] contiguous rows; seq_lens: I32/I64 [B]; page_table: I32/I64 [B, MP] or
// absent; raw_indices: I32 [B, >=512] unit inner stride; page_indices: same shape, or absent.
// Only columns 0..511 are written.
DSV4CPU_API void topk_transform_512(const TensorView& scores, const TensorView& seq_lens,
                                    const TensorView& page_table, int64_t page_size, TopkMode mode,
                                    const MutableTensorView& raw_indices,
                                    const MutableTensorView& page_indices,
                                    const Options& options = {});

// indexer.md §5.7: the canonical selection with K = 1024; outputs [B, >=1024], columns
// 0..1023 written.
DSV4CPU_API void topk_transform_1024(const TensorView& scores, const TensorView& seq_lens,
                                     const TensorView& page_table, int64_t page_size,
                                     const MutableTensorView& raw_indices,
                                     const MutableTensorView& page_indices,
                                     const Options& options = {});

// indexer.md §6: identity rows [0 .. L_t − 1, −1 ...] with L_t = (positions[t] + 1) / 4 <= 512.
// positions: I32/I64 [T]; topk_indices: I32 [T, >=512], columns 0..511 written.
DSV4CPU_API void short_context_topk(const TensorView& positions,
                                    const MutableTensorView& topk_indices,
                                    const Options& options = {});

// indexer.md §7: one indexer step for a mixed batch, one row per token with its causal length.
// q_fp8: F8_E4M3 [T, H, 128]; weights: F32 [T, H]; query_start_loc: I32/I64 [R + 1];
// seq_lens: I32/I64 [R]; block_table: I32/I64 [R, MB]; kv_cache: U8 [num_pages, page_bytes];
// block_size a power of two; topk_indices: I32 [T, >=512], columns 0..511 written.
DSV4CPU_API void indexer_topk(const TensorView& q_fp8, const TensorView& weights,
                              const TensorView& query_start_loc, const TensorView& seq_lens,
                              const TensorView& block_table, const TensorView& kv_cache,
                              int64_t block_size, TopkMode mode,
                              const MutableTensorView& topk_indices, const Options& options = {});

}  // namespace dsv4cpu
