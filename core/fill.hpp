// Vector fills of index outputs (core/fill_hwy.cpp: Highway, every target), shared by the
// metadata builders and the compressor: iota runs of slots, and rows written around the caches
// when an output is far larger than they are.
#pragma once
#include <cstdint>

namespace dsv4cpu::detail {

// Outputs from thresholds().stream_bytes (core/thresholds.hpp) bypass the caches (non-temporal
// stores): no later read of the call hits them, and streaming saves reading each line before it
// is written.

// out[i] = base + i for i in [0, n).
void iota64(int64_t* out, int64_t n, int64_t base);
// out[0, n) = src[0, n), then out[n, W) = -1; `stream`: non-temporal stores where aligned.
void copy_then_minus_one(int64_t* out, const int64_t* src, int64_t n, int64_t W, bool stream);
// out[i] = i for i in [0, n), then out[n, W) = -1; `stream`: as above.
void iota_then_minus_one(int32_t* out, int64_t n, int64_t W, bool stream);

}  // namespace dsv4cpu::detail
