// The AMX-BF16 products of sparse_mla_attention (optimized/attention_kernel.hpp) as ordinary C++
// around the tile unit of optimized/amx_tiles.hpp, so that they run and are tested on machines
// without AMX (optimized/attention_amx.cpp runs them with the intrinsics):
//   scores  C[16 rows][16 heads] += A (16 bf16 rows × 32 dims, row-major) · B (Qp: 16 dim pairs ×
//           16 heads), 16 dim steps, four C tiles: two row tiles × the 32 heads of a group;
//   values  C[16 heads][16 dims] += A (P: 16 heads × 32 rows, Pp transposed) · B (Vp: 16 row pairs ×
//           16 dims), four C tiles (two head tiles × 32 dims) loaded from acc and stored back
//           after the rows.
#pragma once
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <cstdint>

#include "args/fp8_ds_mla.hpp"
#include "optimized/amx_tiles.hpp"
#include "optimized/attention_kernel.hpp"

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: see amx_tiles.hpp

inline constexpr int64_t kDimSteps = kMlaDim / 32;  // A tiles across the 512 dims

template <class Tiles>
void amx_scores(Tiles& t, const uint16_t* K, int64_t rows, const uint32_t* Qp, float* S) {
  // Two row tiles (A 0, 1) × two head tiles (B 0, 1): four accumulator chains, C tile 2r + c.
  for (int64_t j0 = 0; j0 < rows; j0 += 2 * kTileRows) {
    const int r_end = rows - j0 > kTileRows ? 2 : 1;
    for (int c = 0; c < 2 * r_end; ++c) t.zero(c);
    for (int64_t s = 0; s < kDimSteps; ++s) {
      for (int r = 0; r < r_end; ++r)
        t.load_a(r, K + (j0 + r * kTileRows) * kMlaDim + 32 * s, kMlaDim * 2);
      for (int c = 0; c < 2; ++c) {
        // Pairs 16s .. 16s + 15, heads 16c .. 16c + 15.
        t.load_b(c, Qp + 16 * s * kHeadBlock + 16 * c, kHeadBlock * 4);
        for (int r = 0; r < r_end; ++r) t.dot(2 * r + c, r, c);
      }
    }
    for (int r = 0; r < r_end; ++r)
      for (int c = 0; c < 2; ++c)
        t.store(2 * r + c, S + (j0 + r * kTileRows) * kHeadBlock + 16 * c, kHeadBlock * 4);
  }
}

// P[h][i] = Pp[i·kHeadBlock + h] for the 16·steps pairs, by 16 × 16 word transposes. (GCC 12
// sees the undefined pass-through operand of the unmasked shuffle intrinsics as uninitialized.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
inline void transpose_pairs(const uint32_t* Pp, int64_t steps,
                            uint32_t (*P)[kAttentionBlock / 2]) {
#ifdef __AVX512F__
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t g = 0; g < kHeadBlock / 16; ++g) {
      __m512i r[16], t[16];  // r[k]: pair 16s + k, heads 16g .. 16g + 15
      for (int k = 0; k < 16; ++k)
        r[k] = _mm512_loadu_si512(Pp + (16 * s + k) * kHeadBlock + 16 * g);
      for (int k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
      }
      // v[4j + q], 128-bit lane L: pairs 4j .. 4j + 3 of head 4L + q.
      __m512i v[16];
      for (int j = 0; j < 4; ++j) {
        v[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
        v[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
        v[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
        v[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
      }
      // Head 4L + q: lane j of it is lane L of v[4j + q].
      for (int q = 0; q < 4; ++q) {
        const __m512i x0 = _mm512_shuffle_i32x4(v[q], v[4 + q], 0x88);
        const __m512i x1 = _mm512_shuffle_i32x4(v[q], v[4 + q], 0xDD);
        const __m512i y0 = _mm512_shuffle_i32x4(v[8 + q], v[12 + q], 0x88);
        const __m512i y1 = _mm512_shuffle_i32x4(v[8 + q], v[12 + q], 0xDD);
        _mm512_store_si512(&P[16 * g + q][16 * s], _mm512_shuffle_i32x4(x0, y0, 0x88));
        _mm512_store_si512(&P[16 * g + 4 + q][16 * s], _mm512_shuffle_i32x4(x1, y1, 0x88));
        _mm512_store_si512(&P[16 * g + 8 + q][16 * s], _mm512_shuffle_i32x4(x0, y0, 0xDD));
        _mm512_store_si512(&P[16 * g + 12 + q][16 * s], _mm512_shuffle_i32x4(x1, y1, 0xDD));
      }
    }
#else
  for (int64_t i = 0; i < 16 * steps; ++i)
    for (int64_t h = 0; h < kHeadBlock; ++h) P[h][i] = Pp[i * kHeadBlock + h];
#endif
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Pp and Vp are zero up to a multiple of 16 pairs, the row steps of 32. A head with α = 1 keeps
// its acc (RN(x·1) = x). Two head tiles (A 0, 1) × two tiles of 16 dims (B 0, 1): each Vp tile,
// read from the second-level cache, feeds two products; C tile 2j + i is heads 16i .., dims
// d0 + 16j ..
template <class Tiles>
void amx_values(Tiles& t, const uint32_t* Pp, const uint32_t* Vp, int64_t pairs,
                const float* alpha, float* acc) {
  static_assert(kHeadBlock == 32, "two head tiles");
  for (int64_t h = 0; h < kHeadBlock; ++h)
    if (alpha[h] != 1.0f)
      for (int64_t d = 0; d < kMlaDim; ++d) acc[h * kMlaDim + d] = acc[h * kMlaDim + d] * alpha[h];
  const int64_t steps = (pairs + 15) / 16;
  alignas(64) uint32_t P[kHeadBlock][kAttentionBlock / 2];  // P[h][i]: row pairs of head h
  transpose_pairs(Pp, steps, P);
  for (int64_t d0 = 0; d0 < kMlaDim; d0 += 32) {
    const uint32_t* v = Vp + d0 / 64 * kVpBlock + d0 % 64;
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) t.load_c(2 * j + i, acc + 16 * i * kMlaDim + d0 + 16 * j, kMlaDim * 4);
    for (int64_t s = 0; s < steps; ++s) {
      for (int i = 0; i < 2; ++i) t.load_a(i, &P[16 * i][16 * s], kAttentionBlock * 2);
      for (int j = 0; j < 2; ++j) {
        t.load_b(j, v + 16 * s * 64 + 16 * j, 64 * 4);
        for (int i = 0; i < 2; ++i) t.dot(2 * j + i, i, j);
      }
    }
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) t.store(2 * j + i, acc + 16 * i * kMlaDim + d0 + 16 * j, kMlaDim * 4);
  }
}

}  // namespace
}  // namespace dsv4cpu::detail::opt
