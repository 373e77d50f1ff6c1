// The 32-bit word transposes of the bf16 attention kernels (optimized/attention_kernel.hpp), with
// AVX-512 F in the units built with it (the AMX and AVX-512-BF16 kernels) and plain loops
// elsewhere (the tile-model tests):
//   pack_q           q rows (bf16 pairs as words, 256 per head) into Qp, and the test for
//                    subnormal q values;
//   transpose_pairs  Pp (pairs × kHeadBlock words) into P[h][i], the AMX values' A layout.
#pragma once
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

#include "optimized/attention_kernel.hpp"

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: compiled into units of different ISA flags

// dst[k·dst_stride + r] = word k of source row r (rows src_stride words apart) for r, k < 16;
// rows r ≥ valid are zero (and are not read). With kSubnormal, returns whether a bf16 half of a
// word read is a subnormal (exponent field 0, mantissa not 0); else false.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 sees the undefined pass-through operand of the unmasked shuffle intrinsics as
// uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
template <bool kSubnormal = false>
inline bool transpose_16x16(const void* src, int64_t src_stride, int64_t valid, uint32_t* dst,
                            int64_t dst_stride) {
  // Source words by their address: q is bf16 data, read as words only through memcpy or loadu.
  auto row = [&](int64_t r) { return static_cast<const char*>(src) + 4 * r * src_stride; };
  bool subnormal = false;
#ifdef __AVX512F__
  __m512i r[16], t[16];
  for (int k = 0; k < 16; ++k) r[k] = k < valid ? _mm512_loadu_si512(row(k)) : _mm512_setzero_si512();
  if constexpr (kSubnormal) {
    const __m512i exponent = _mm512_set1_epi16(0x7F80), mantissa = _mm512_set1_epi16(0x007F);
    __mmask32 sub = 0;
    for (int k = 0; k < 16; ++k)
      sub |= _mm512_mask_test_epi16_mask(_mm512_testn_epi16_mask(r[k], exponent), r[k], mantissa);
    subnormal = sub != 0;
  }
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
  }
  // v[4j + q], 128-bit lane L: word 4L + q of rows 4j .. 4j + 3.
  __m512i v[16];
  for (int j = 0; j < 4; ++j) {
    v[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
    v[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
    v[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
    v[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
  }
  // Column 4L + q: lane j of it is lane L of v[4j + q].
  for (int q = 0; q < 4; ++q) {
    const __m512i x0 = _mm512_shuffle_i32x4(v[q], v[4 + q], 0x88);
    const __m512i x1 = _mm512_shuffle_i32x4(v[q], v[4 + q], 0xDD);
    const __m512i y0 = _mm512_shuffle_i32x4(v[8 + q], v[12 + q], 0x88);
    const __m512i y1 = _mm512_shuffle_i32x4(v[8 + q], v[12 + q], 0xDD);
    _mm512_storeu_si512(dst + q * dst_stride, _mm512_shuffle_i32x4(x0, y0, 0x88));
    _mm512_storeu_si512(dst + (4 + q) * dst_stride, _mm512_shuffle_i32x4(x1, y1, 0x88));
    _mm512_storeu_si512(dst + (8 + q) * dst_stride, _mm512_shuffle_i32x4(x0, y0, 0xDD));
    _mm512_storeu_si512(dst + (12 + q) * dst_stride, _mm512_shuffle_i32x4(x1, y1, 0xDD));
  }
#else
  for (int64_t k = 0; k < 16; ++k)
    for (int64_t r = 0; r < 16; ++r) {
      uint32_t w = 0;
      if (r < valid) std::memcpy(&w, row(r) + 4 * k, 4);
      dst[k * dst_stride + r] = w;
      for (const uint32_t half : {w & 0xFFFFu, w >> 16})
        subnormal |= kSubnormal && (half & 0x7F80u) == 0 && (half & 0x007Fu) != 0;
    }
#endif
  return subnormal;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Qp (kDimPairs × kHeadBlock words, attention_kernel.hpp) of the group whose first head row is q
// (rows of 512 bf16, one after the other): word p·kHeadBlock + h is the pair (q[h][2p],
// q[h][2p + 1]) for h < heads, zero for heads ≤ h < kHeadBlock. Returns whether none of the
// heads' values is a bf16 subnormal (the kernels' exactness test of q, read here once).
inline bool pack_q(const uint16_t* q, int64_t heads, uint32_t* Qp) {
  static_assert(kMlaDim % 32 == 0 && kHeadBlock % 16 == 0, "16 × 16 word blocks");
  bool subnormal = false;
  // A pair as a word: the first value in the low half, as in memory on a little-endian CPU.
  for (int64_t h0 = 0; h0 < kHeadBlock; h0 += 16)
    for (int64_t p0 = 0; p0 < kDimPairs; p0 += 16)
      subnormal |= transpose_16x16<true>(q + h0 * kMlaDim + 2 * p0, kDimPairs, heads - h0,
                                         Qp + p0 * kHeadBlock + h0, kHeadBlock);
  return !subnormal;
}

// P[h][i] = Pp[i·kHeadBlock + h] for the 16·steps pairs.
inline void transpose_pairs(const uint32_t* Pp, int64_t steps, int64_t heads,
                            uint32_t (*P)[kAttentionBlock / 2]) {
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t g = 0; g < heads; g += 16)
      transpose_16x16(Pp + 16 * s * kHeadBlock + g, kHeadBlock, 16, &P[g][16 * s],
                      kAttentionBlock / 2);
}

}  // namespace
}  // namespace dsv4cpu::detail::opt
