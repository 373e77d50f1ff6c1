// The public entry points of the compressor ops: each packs its arguments and runs the op
// (api/registry.hpp: variant selection, validation in api/compressor_validate.cpp, the kernel).
#include "api/compressor_validate.hpp"
#include "api/registry.hpp"
#include "core/errors.hpp"

namespace dsv4cpu {

void save_partial_states(const TensorView& kv, const TensorView& score, const TensorView& ape,
                         const TensorView& positions, const TensorView& state_cache,
                         const TensorView& slot_mapping, const Options& options) {
  detail::SavePartialStatesArgs a{kv, score, ape, positions, state_cache, slot_mapping};
  detail::run("save_partial_states", a, options);
}

void map_local_to_global_slots(const TensorView& local_indices, const TensorView& req_idx,
                               const TensorView& block_table, int64_t block_size,
                               const TensorView& slots, const Options& options) {
  detail::MapLocalToGlobalSlotsArgs a{local_indices, req_idx, block_table, block_size, slots};
  detail::run("map_local_to_global_slots", a, options);
}

void compressor_window_slots(const TensorView& positions, const TensorView& token_to_req,
                             const TensorView& block_table, int64_t block_size,
                             int64_t compress_ratio, bool overlap, const TensorView& gather_slots,
                             const Options& options) {
  detail::CompressorWindowSlotsArgs a{positions,      token_to_req, block_table, block_size,
                                      compress_ratio, overlap,      gather_slots};
  detail::run("compressor_window_slots", a, options);
}

void compress_norm_rope_store(const TensorView& state_cache, const TensorView& gather_slots,
                              const TensorView& positions, const TensorView& kv_slot_mapping,
                              const TensorView& rms_norm_weight, const TensorView& cos_sin_cache,
                              const TensorView& kv_cache, double rms_norm_eps,
                              int64_t kv_cache_block_size, int64_t compress_ratio,
                              ScaleClamp scale_clamp, const Options& options) {
  constexpr const char* op = "compress_norm_rope_store";
  detail::CompressNormRopeStoreArgs a{op,           detail::kMainEntry,  state_cache,
                                      gather_slots, positions,           kv_slot_mapping,
                                      rms_norm_weight, cos_sin_cache,    kv_cache,
                                      rms_norm_eps, kv_cache_block_size, compress_ratio,
                                      scale_clamp};
  detail::run(op, a, options);
}

void compress_norm_rope_store_indexer(const TensorView& state_cache,
                                      const TensorView& gather_slots, const TensorView& positions,
                                      const TensorView& kv_slot_mapping,
                                      const TensorView& rms_norm_weight,
                                      const TensorView& cos_sin_cache, const TensorView& kv_cache,
                                      double rms_norm_eps, int64_t kv_cache_block_size,
                                      int64_t compress_ratio, ScaleClamp scale_clamp,
                                      const Options& options) {
  constexpr const char* op = "compress_norm_rope_store_indexer";
  detail::CompressNormRopeStoreArgs a{op,           detail::kIndexerEntry, state_cache,
                                      gather_slots, positions,             kv_slot_mapping,
                                      rms_norm_weight, cos_sin_cache,      kv_cache,
                                      rms_norm_eps, kv_cache_block_size,   compress_ratio,
                                      scale_clamp};
  detail::run(op, a, options);
}

void make_cos_sin_cache(int64_t rows, double theta, const std::optional<YarnParams>& yarn,
                        const TensorView& out) {
  detail::MakeCosSinCacheArgs a{rows, theta, yarn, out};
  detail::run("make_cos_sin_cache", a, Options{});
}

ScaleClamp parse_scale_clamp(const char* op, std::string_view text) {
  if (text == "cpu") return ScaleClamp::cpu;
  if (text == "gpu") return ScaleClamp::gpu;
  detail::fail_value(op, "scale_clamp", std::string(text), "unknown mode", "cpu or gpu");
}

}  // namespace dsv4cpu
