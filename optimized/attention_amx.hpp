// The AMX-BF16 products of sparse_mla_attention (optimized/attention_kernel.hpp) as ordinary C++
// around the tile unit of optimized/amx_tiles.hpp, so that they run and are tested on machines
// without AMX (optimized/attention_amx.cpp runs them with the intrinsics):
//   scores  C[16 rows][16 heads] += A (16 bf16 rows × 32 dims, row-major) · B (Qp: 16 dim pairs ×
//           16 heads), 16 dim steps, four C tiles: two row tiles × the 32 heads of a group (two
//           C tiles for a half group); the driver's step after each B tile's products (the
//           core queues few tile instructions: vector work placed after a long run of them
//           waits, placed between them it runs while they do);
//   values  C[16 heads][16 dims] += A (P: 16 heads × 32 rows, Pp transposed) · B (Vp: 16 row pairs ×
//           16 dims), four C tiles (the four head tiles of two groups × 16 dims, or two head
//           tiles × 32 dims; one head tile × 32 dims for a half group) loaded from acc and stored
//           back after the rows.
#pragma once
#include <cstdint>

#include "args/fp8_ds_mla.hpp"
#include "optimized/amx_tiles.hpp"
#include "optimized/attention_kernel.hpp"
#include "optimized/attention_transpose.hpp"

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: see amx_tiles.hpp

inline constexpr int64_t kDimSteps = kMlaDim / 32;  // A tiles across the 512 dims

template <class Tiles>
void amx_scores(Tiles& t, const uint16_t* K, int64_t rows, const uint32_t* Qp, int tiles,
                float* S, void (*step)(void*) = nullptr, void* step_arg = nullptr) {
  // Two row tiles (A 0, 1) × the head tiles (B 0, 1): up to four accumulator chains, C tile
  // 2r + c.
  for (int64_t j0 = 0; j0 < rows; j0 += 2 * kTileRows) {
    const int r_end = rows - j0 > kTileRows ? 2 : 1;
    for (int r = 0; r < r_end; ++r)
      for (int c = 0; c < tiles; ++c) t.zero(2 * r + c);
    for (int64_t s = 0; s < kDimSteps; ++s) {
      for (int r = 0; r < r_end; ++r)
        t.load_a(r, K + (j0 + r * kTileRows) * kKRow + 32 * s, kKRow * 2);
      for (int c = 0; c < tiles; ++c) {
        // Pairs 16s .. 16s + 15, heads 16c .. 16c + 15.
        t.load_b(c, Qp + 16 * s * kHeadBlock + 16 * c, kHeadBlock * 4);
        for (int r = 0; r < r_end; ++r) t.dot(2 * r + c, r, c);
        if (step) step(step_arg);
      }
    }
    for (int r = 0; r < r_end; ++r)
      for (int c = 0; c < tiles; ++c)
        t.store(2 * r + c, S + (j0 + r * kTileRows) * kHeadBlock + 16 * c, kHeadBlock * 4);
  }
}

// Pp and Vp are zero up to a multiple of 16 pairs, the row steps of 32. A head with α = 1 keeps
// its acc (RN(x·1) = x); without alpha the products start from zero. Groups go two at a time:
// four head tiles (C tile c: heads 16c .. of the two groups, dims d0 .. d0 + 15) take turns in A 0
// and A 1, so that each Vp tile (B 0), read from the second-level cache, feeds four products. A
// last single group: its head tiles (A 0, 1) × two tiles of 16 dims (B 0, 1), C tile 2j + i is
// heads 16i .., dims d0 + 16j ..
template <class Tiles>
void amx_values(Tiles& t, const uint32_t* Pp, const uint32_t* Vp, int64_t vp_block,
                int64_t pairs, const float* alpha, float* acc, int64_t groups, int tiles) {
  static_assert(kHeadBlock == 2 * kHeadTile, "two head tiles");
  if (alpha)
    for (int64_t h = 0; h < (groups - 1) * kHeadBlock + tiles * kHeadTile; ++h)
      if (alpha[h] != 1.0f)
        for (int64_t d = 0; d < kMlaDim; ++d) acc[h * kAccRow + d] = acc[h * kAccRow + d] * alpha[h];
  const int64_t steps = (pairs + 15) / 16;
  // P[i][h][k]: row pairs of head h of the i-th group of the two.
  alignas(64) uint32_t P[2][kHeadBlock][kAttentionBlock / 2];
  constexpr int64_t kPStride = kAttentionBlock * 2, kAccStride = kAccRow * 4;  // bytes
  // C tile c from acc at p, or from zero without alpha.
  auto begin = [&](int c, const float* p) {
    if (alpha)
      t.load_c(c, p, kAccStride);
    else
      t.zero(c);
  };
  for (int64_t g = 0; g < groups; g += 2) {
    const bool two = g + 1 < groups;
    for (int64_t i = 0; i < (two ? 2 : 1); ++i)
      transpose_pairs(Pp + (g + i) * kPpGroup, steps, two ? kHeadBlock : tiles * kHeadTile, P[i]);
    float* a = acc + g * kHeadBlock * kAccRow;
    if (two) {
      for (int64_t d0 = 0; d0 < kMlaDim; d0 += 16) {
        const uint32_t* v = Vp + d0 / 64 * vp_block + d0 % 64;
        for (int c = 0; c < 4; ++c) begin(c, a + 16 * c * kAccRow + d0);
        for (int64_t s = 0; s < steps; ++s) {
          t.load_b(0, v + 16 * s * 64, 64 * 4);
          for (int c = 0; c < 4; ++c) {
            t.load_a(c % 2, &P[c / 2][16 * (c % 2)][16 * s], kPStride);
            t.dot(c, c % 2, 0);
          }
        }
        for (int c = 0; c < 4; ++c) t.store(c, a + 16 * c * kAccRow + d0, kAccStride);
      }
      continue;
    }
    for (int64_t d0 = 0; d0 < kMlaDim; d0 += 32) {
      const uint32_t* v = Vp + d0 / 64 * vp_block + d0 % 64;
      for (int j = 0; j < 2; ++j)
        for (int i = 0; i < tiles; ++i) begin(2 * j + i, a + 16 * i * kAccRow + d0 + 16 * j);
      for (int64_t s = 0; s < steps; ++s) {
        for (int i = 0; i < tiles; ++i) t.load_a(i, &P[0][16 * i][16 * s], kPStride);
        for (int j = 0; j < 2; ++j) {
          t.load_b(j, v + 16 * s * 64 + 16 * j, 64 * 4);
          for (int i = 0; i < tiles; ++i) t.dot(2 * j + i, i, j);
        }
      }
      for (int j = 0; j < 2; ++j)
        for (int i = 0; i < tiles; ++i)
          t.store(2 * j + i, a + 16 * i * kAccRow + d0 + 16 * j, kAccStride);
    }
  }
}

}  // namespace
}  // namespace dsv4cpu::detail::opt
