// KV compressor ops (compressor.md). Argument names and order follow the spec's tables.
#pragma once
#include <cstdint>
#include <optional>

#include "dsv4cpu/export.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// compressor.md §3: write each token's kv and score(+ape) row into the fp32 state cache.
// state_cache is updated in place.
DSV4CPU_API void save_partial_states(const TensorView& kv, const TensorView& score,
                                     const TensorView& ape, const TensorView& positions,
                                     const MutableTensorView& state_cache,
                                     const TensorView& slot_mapping, const Options& options = {});

// compressor.md §4.1: local indices -> slots through a block table; negative locals give -1.
// slots: I64 [N, K], written completely.
DSV4CPU_API void map_local_to_global_slots(const TensorView& local_indices,
                                           const TensorView& req_idx, const TensorView& block_table,
                                           int64_t block_size, const MutableTensorView& slots,
                                           const Options& options = {});

// compressor.md §4.2: the W state slots each token pools, oldest first. gather_slots: I64 [N, W]
// with W = (1 + overlap) * compress_ratio.
DSV4CPU_API void compressor_window_slots(const TensorView& positions,
                                         const TensorView& token_to_req,
                                         const TensorView& block_table, int64_t block_size,
                                         int64_t compress_ratio, bool overlap,
                                         const MutableTensorView& gather_slots,
                                         const Options& options = {});

// compressor.md §6: head 512, pool -> RMSNorm -> RoPE -> fp8 + UE8M0 -> fp8_ds_mla page entry.
// kv_cache is updated in place.
DSV4CPU_API void compress_norm_rope_store(
    const TensorView& state_cache, const TensorView& gather_slots, const TensorView& positions,
    const TensorView& kv_slot_mapping, const TensorView& rms_norm_weight,
    const TensorView& cos_sin_cache, const MutableTensorView& kv_cache, double rms_norm_eps,
    int64_t kv_cache_block_size, int64_t compress_ratio, ScaleClamp scale_clamp = ScaleClamp::cpu,
    const Options& options = {});

// compressor.md §7: head 128 into the indexer K cache (always clamp-amax; scale_clamp ignored).
DSV4CPU_API void compress_norm_rope_store_indexer(
    const TensorView& state_cache, const TensorView& gather_slots, const TensorView& positions,
    const TensorView& kv_slot_mapping, const TensorView& rms_norm_weight,
    const TensorView& cos_sin_cache, const MutableTensorView& kv_cache, double rms_norm_eps,
    int64_t kv_cache_block_size, int64_t compress_ratio, ScaleClamp scale_clamp = ScaleClamp::gpu,
    const Options& options = {});

// compressor.md §8.2: YaRN parameters; DeepSeek-V4: {16, 65536, 32, 1, 1.0}.
struct YarnParams {
  double factor = 16;
  double original_max = 65536;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1.0;
};

// compressor.md §8.2: fills out (F32 [rows, 64], contiguous) with cos in columns 0..31 and sin in
// 32..63. Throws ValueError for rows outside [0, 2^24], theta <= 1, or bad YaRN parameters.
DSV4CPU_API void make_cos_sin_cache(int64_t rows, double theta,
                                    const std::optional<YarnParams>& yarn,
                                    const MutableTensorView& out);

// "cpu" / "gpu" -> ScaleClamp; anything else throws ValueError naming op and argument.
DSV4CPU_API ScaleClamp parse_scale_clamp(const char* op, std::string_view text);

}  // namespace dsv4cpu
