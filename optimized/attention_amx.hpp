// The AMX-BF16 products of sparse_mla_attention (optimized/attention_kernel.hpp) as ordinary C++
// around the tile unit of optimized/amx_tiles.hpp, so that they run and are tested on machines
// without AMX (optimized/attention_amx.cpp runs them with the intrinsics):
//   scores  C[16 rows][16 heads] += A (16 bf16 rows × 32 dims, row-major) · B (Qp: 16 dim pairs ×
//           16 heads), 16 dim steps, two C tiles for the 32 heads of a group;
//   values  C[16 heads][16 dims] += A (P: 16 heads × 32 rows, Pp transposed) · B (Vp: 16 row pairs ×
//           16 dims), four C tiles of 16 dims loaded from acc and stored back after the rows.
#pragma once
#include <cstdint>

#include "args/fp8_ds_mla.hpp"
#include "optimized/amx_tiles.hpp"
#include "optimized/attention_kernel.hpp"

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: see amx_tiles.hpp

inline constexpr int64_t kDimSteps = kMlaDim / 32;  // A tiles across the 512 dims

template <class Tiles>
void amx_scores(Tiles& t, const uint16_t* K, int64_t rows, const uint32_t* Qp, float* S) {
  for (int64_t j0 = 0; j0 < rows; j0 += kTileRows) {
    t.zero(0);
    t.zero(1);
    for (int64_t s = 0; s < kDimSteps; ++s) {
      t.load_a(K + j0 * kMlaDim + 32 * s, kMlaDim * 2);
      for (int c = 0; c < 2; ++c) {
        // Pairs 16s .. 16s + 15, heads 16c .. 16c + 15.
        t.load_b(Qp + 16 * s * kHeadBlock + 16 * c, kHeadBlock * 4);
        t.dot(c);
      }
    }
    t.store(0, S + j0 * kHeadBlock, kHeadBlock * 4);
    t.store(1, S + j0 * kHeadBlock + 16, kHeadBlock * 4);
  }
}

// Pp and Vp are zero up to a multiple of 16 pairs, the row steps of 32.
template <class Tiles>
void amx_values(Tiles& t, const uint32_t* Pp, const uint32_t* Vp, int64_t pairs,
                const float* alpha, float* acc) {
  for (int64_t h = 0; h < kHeadBlock; ++h)
    for (int64_t d = 0; d < kMlaDim; ++d) acc[h * kMlaDim + d] = acc[h * kMlaDim + d] * alpha[h];
  const int64_t steps = (pairs + 15) / 16;
  alignas(64) uint32_t P[kHeadBlock][kAttentionBlock / 2];  // P[h][i]: row pairs of head h
  for (int64_t i = 0; i < 16 * steps; ++i)
    for (int64_t h = 0; h < kHeadBlock; ++h) P[h][i] = Pp[i * kHeadBlock + h];
  for (int64_t g = 0; g < kHeadBlock / 16; ++g)
    for (int64_t d0 = 0; d0 < kMlaDim; d0 += 64) {
      float* c0 = acc + 16 * g * kMlaDim + d0;
      for (int c = 0; c < 4; ++c) t.load_c(c, c0 + 16 * c, kMlaDim * 4);
      for (int64_t s = 0; s < steps; ++s) {
        t.load_a(&P[16 * g][16 * s], kAttentionBlock * 2);
        for (int c = 0; c < 4; ++c) {
          t.load_b(Vp + d0 / 64 * kVpBlock + 16 * s * 64 + 16 * c, 64 * 4);
          t.dot(c);
        }
      }
      for (int c = 0; c < 4; ++c) t.store(c, c0 + 16 * c, kMlaDim * 4);
    }
}

}  // namespace
}  // namespace dsv4cpu::detail::opt
