// The public entry points of the indexer ops: each packs its arguments and runs the op
// (api/registry.hpp: variant selection, validation in api/indexer_validate.cpp, the kernel).
#include "api/indexer_validate.hpp"
#include "api/registry.hpp"
#include "core/errors.hpp"

namespace dsv4cpu {

void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                const TensorView& positions, const TensorView& cos_sin_cache,
                                float softmax_scale, float head_scale, const TensorView& q_fp8,
                                const TensorView& weights_out, const Options& options) {
  detail::FusedIndexerQRopeQuantArgs a{q,          weights, positions,  cos_sin_cache,
                                       softmax_scale, head_scale, q_fp8, weights_out};
  detail::run("fused_indexer_q_rope_quant", a, options);
}

void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                const TensorView& positions, const TensorView& cos_sin_cache,
                                const TensorView& q_fp8, const TensorView& weights_out,
                                const Options& options) {
  fused_indexer_q_rope_quant(q, weights, positions, cos_sin_cache, kIndexerSoftmaxScale,
                             kIndexerHeadScale, q_fp8, weights_out, options);
}

void fp8_paged_mqa_logits(const TensorView& q_fp8, const TensorView& kv_cache,
                          const TensorView& weights, const TensorView& seq_lens,
                          const TensorView& page_table, int64_t block_size, int64_t max_seq_len,
                          const TensorView& logits, int64_t next_n, const Options& options) {
  detail::Fp8PagedMqaLogitsArgs a{q_fp8,      kv_cache,    weights, seq_lens, page_table,
                                  block_size, max_seq_len, logits,  next_n};
  detail::run("fp8_paged_mqa_logits", a, options);
}

TopkMode parse_topk_mode(const char* op, std::string_view text) {
  if (text == "canonical") return TopkMode::canonical;
  if (text == "vllm") return TopkMode::vllm;
  detail::fail_value(op, "mode", std::string(text), "unknown mode", "canonical or vllm");
}

void topk_transform_512(const TensorView& scores, const TensorView& seq_lens,
                        const TensorView& page_table, int64_t page_size, TopkMode mode,
                        const TensorView& raw_indices, const TensorView& page_indices,
                        const Options& options) {
  detail::TopkTransformArgs a{scores,      seq_lens,     page_table, page_size, mode,
                              raw_indices, page_indices, 512};
  detail::run("topk_transform_512", a, options);
}

void topk_transform_1024(const TensorView& scores, const TensorView& seq_lens,
                         const TensorView& page_table, int64_t page_size,
                         const TensorView& raw_indices, const TensorView& page_indices,
                         const Options& options) {
  detail::TopkTransformArgs a{scores,      seq_lens,     page_table, page_size, TopkMode::canonical,
                              raw_indices, page_indices, 1024};
  detail::run("topk_transform_1024", a, options);
}

void short_context_topk(const TensorView& positions, const TensorView& topk_indices,
                        const Options& options) {
  detail::ShortContextTopkArgs a{positions, topk_indices};
  detail::run("short_context_topk", a, options);
}

void indexer_topk(const TensorView& q_fp8, const TensorView& weights,
                  const TensorView& query_start_loc, const TensorView& seq_lens,
                  const TensorView& block_table, const TensorView& kv_cache, int64_t block_size,
                  TopkMode mode, const TensorView& topk_indices, const Options& options) {
  detail::IndexerTopkArgs a{q_fp8,       weights,  query_start_loc, seq_lens, block_table,
                            kv_cache,    block_size, mode,          topk_indices};
  detail::run("indexer_topk", a, options);
}

}  // namespace dsv4cpu
