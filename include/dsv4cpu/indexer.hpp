// Lightning indexer ops (indexer.md). Every op follows the contract of options.hpp (errors before
// any write, aliasing, threads, zero-size calls); each comment below adds the op's Shapes (with
// the cache_sizes.hpp helper that gives each size), Writes, Allocates, Throws and Threads. All
// allocations are temporary (released before the call returns).
#pragma once
#include <cstdint>
#include <string_view>

#include "dsv4cpu/cache_sizes.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/export.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// indexer.md §2 defaults: RN(128^-0.5) = 0x3DB504F3 and RN(64^-0.5) = 0.125.
inline constexpr float kIndexerSoftmaxScale = 0x1.6a09e6p-4f;
inline constexpr float kIndexerHeadScale = 0.125f;

// fused_indexer_q_rope_quant (indexer.md §2): RoPE on the last 64 dims (table row positions[t]),
// per-head power-of-two fp8 quantisation (clamp-amax), the scale folded into the head weights.
// Shapes:    q F32 [T, H, 128] (kIndexerHeadDim); weights F32 [T, H]; positions I32/I64 [T];
//            cos_sin_cache F32 [R, 64]; q_fp8 F8_E4M3 [T, H, 128]; weights_out F32 [T, H]; all
//            contiguous. softmax_scale, head_scale finite and > 0.
// Writes:    every element of q_fp8 and weights_out.
// Allocates: O(T·H) bytes (the weights_out scratch, checked before anything is written).
// Throws:    ValueError (a scale); ShapeError (shapes; an output overlapping an input or the other
//            output); IndexError (position outside [0, R)); NonFiniteError (q, weights or a used
//            cos/sin row not finite; weights_out overflowing, named with its operands).
// Threads:   hwy: heads split across threads.
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

// fp8_paged_mqa_logits (indexer.md §4, §8 for next_n > 1): logits[b·next_n + j][p] =
// ks_p · Σ_h w_h · relu(q_h · k_p) for keys p < L_{b,j}, −inf for L_{b,j} <= p < max_seq_len.
// Shapes:    q_fp8 F8_E4M3 [B, next_n, H, 128] or [B·next_n, H, 128], contiguous; kv_cache U8
//            [num_pages, page_bytes], unit inner stride, page stride >= page_bytes >= P·132
//            (indexer_k_page_bytes(P)); weights F32 [B·next_n, H], contiguous; seq_lens
//            I32/I64 [B] (L_{b,j} = max(0, seq_lens[b] − next_n + j + 1)) or [B, next_n]
//            (L_{b,j} = seq_lens[b][j]), each in [0, max_seq_len]; page_table I32/I64 [B, MP],
//            contiguous rows, ceil(L / P) <= MP; block_size P >= 1; max_seq_len S >= 0; logits
//            F32 [B·next_n, S], contiguous; next_n >= 1.
// Writes:    every element of logits.
// Allocates: O(B·next_n) bytes; ref: H·128 floats per row.
// Throws:    ValueError (P, S, next_n); ShapeError; IndexError (a row length outside [0, S], a
//            covered page-table entry outside [0, num_pages)); NonFiniteError (a NaN code in
//            q_fp8, weights not finite). NaN codes in the cache give NaN logits.
// Threads:   amx, avx512bf16, hwy: rows and key chunks split across threads.
DSV4CPU_API void fp8_paged_mqa_logits(const TensorView& q_fp8, const TensorView& kv_cache,
                                      const TensorView& weights, const TensorView& seq_lens,
                                      const TensorView& page_table, int64_t block_size,
                                      int64_t max_seq_len, const MutableTensorView& logits,
                                      int64_t next_n = 1, const Options& options = {});

// indexer.md §5.3 / §5.4: the top-k selection order.
enum class TopkMode : uint8_t { canonical, vllm };
// "canonical" / "vllm" -> TopkMode; anything else throws ValueError naming `op` and "mode".
// Allocates nothing unless it throws; thread-safe.
DSV4CPU_API TopkMode parse_topk_mode(const char* op, std::string_view text);

// topk_transform_512 (indexer.md §5): per row the 512 selected local indices (−1 padded; rows
// with seq_lens[b] <= 512 are the identity [0 .. L−1, −1 ...]) and, when page_indices is given,
// their slots through page_table (§5.5).
// Shapes:    scores F32 [B, S], contiguous rows (any values: ±inf and NaN are ranked); seq_lens
//            I32/I64 [B], each in [0, S]; raw_indices I32 [B, >= 512] (kIndexerTopk), unit
//            inner stride; page_indices absent, or I32 of raw_indices' shape, unit inner stride;
//            page_table I32/I64 [B, MP], contiguous rows, given exactly when page_indices is;
//            page_size a power of two >= 1, the page size of page_table (without page_indices
//            nothing is paged and page_size, still checked, has no effect).
// Writes:    columns 0..511 of raw_indices and of page_indices; further columns are untouched.
// Allocates: O(B) bytes; per row scratch of O(seq_len) bytes (hwy: per thread).
// Throws:    ValueError (page_size, mode); ShapeError (shapes; page_table given without
//            page_indices or the reverse; an output overlapping an input or the other output);
//            IndexError (seq_lens outside [0, S]; with page_indices, a covered page-table entry
//            < 0, beyond MP, or a slot beyond int32).
// Threads:   hwy: rows split across threads.
DSV4CPU_API void topk_transform_512(const TensorView& scores, const TensorView& seq_lens,
                                    const TensorView& page_table, int64_t page_size, TopkMode mode,
                                    const MutableTensorView& raw_indices,
                                    const MutableTensorView& page_indices,
                                    const Options& options = {});

// topk_transform_1024 (indexer.md §5.7): the canonical selection with K = 1024; as
// topk_transform_512 with outputs I32 [B, >= 1024], columns 0..1023 written.
DSV4CPU_API void topk_transform_1024(const TensorView& scores, const TensorView& seq_lens,
                                     const TensorView& page_table, int64_t page_size,
                                     const MutableTensorView& raw_indices,
                                     const MutableTensorView& page_indices,
                                     const Options& options = {});

// short_context_topk (indexer.md §6): identity rows [0 .. L_t − 1, −1 ...] with
// L_t = (positions[t] + 1) / 4.
// Shapes:    positions I32/I64 [T], each with L_t <= 512; topk_indices I32 [T, >= 512], unit
//            inner stride.
// Writes:    columns 0..511 of topk_indices.
// Allocates: O(1) bytes.
// Throws:    ShapeError; IndexError (negative position, L_t > 512).
// Threads:   reference only: the calling thread.
DSV4CPU_API void short_context_topk(const TensorView& positions,
                                    const MutableTensorView& topk_indices,
                                    const Options& options = {});

// indexer_topk (indexer.md §7): one indexer step for a mixed batch, one row per token t of
// request r with its causal length L_t = (pos_t + 1) / 4, pos_t = seq_lens[r] − q_r + (t −
// query_start_loc[r]): identity rows when max_r seq_lens[r] / 4 <= 512 (nothing else read), else
// topk_transform_512 (mode) of the token's fp8_paged_mqa_logits row.
// Shapes:    q_fp8 F8_E4M3 [T, H, 128] and weights F32 [T, H], contiguous; query_start_loc
//            I32/I64 [R + 1] (0, non-decreasing, ending at T); seq_lens I32/I64 [R], seq_lens[r]
//            >= q_r; block_table I32/I64 [R, MB] (the indexer K group), contiguous rows;
//            kv_cache U8 [num_pages, page_bytes] as for fp8_paged_mqa_logits; block_size P a
//            power of two; topk_indices I32 [T, >= 512], unit inner stride.
// Writes:    columns 0..511 of topk_indices.
// Allocates: O(R) bytes; for a long step, scores of the longest row per thread (4 bytes per
//            key) and each thread's selection scratch.
// Throws:    ValueError (P, mode); ShapeError; IndexError (query_start_loc, seq_lens; for a long
//            step a covered block-table entry beyond MB or outside [0, num_pages));
//            NonFiniteError (long step: a NaN code in q_fp8, weights not finite).
// Threads:   amx, avx512bf16, hwy: rows (and the key chunks of a long row) split across threads.
DSV4CPU_API void indexer_topk(const TensorView& q_fp8, const TensorView& weights,
                              const TensorView& query_start_loc, const TensorView& seq_lens,
                              const TensorView& block_table, const TensorView& kv_cache,
                              int64_t block_size, TopkMode mode,
                              const MutableTensorView& topk_indices, const Options& options = {});

}  // namespace dsv4cpu
