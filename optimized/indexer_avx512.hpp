// The vector forms of the ordinary pieces of indexer_bf16.hpp for the AVX-512 translation units
// (indexer_avx512bf16.cpp, indexer_amx.cpp, both built with AVX-512 BW flags; the AMX one with
// VBMI as well), each giving the same output as its scalar form, bit for bit:
// - convert_keys_avx512: each code's magnitude looks up the bf16 pattern that bf16_of_code gives
//   it (a 128-entry table of words, computed at compile time from that function), the sign bit is
//   moved to bit 15, and NaN codes are flagged by a byte compare;
// - convert_keys_vbmi: the same lookup 64 codes at a time, as two byte tables (low and high bytes
//   of the bf16 pattern) and a byte interleave;
// - epilogue_accumulate_avx512, epilogue_finish_avx512: the epilogue with the same fma order and
//   the same summation tree, the tree taken for 16 keys at once by lane shuffles.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "optimized/indexer_bf16.hpp"

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: see indexer_bf16.hpp

template <class Seq>
struct MagnitudeTable;
template <size_t... I>
struct MagnitudeTable<std::index_sequence<I...>> {
  alignas(64) static constexpr uint16_t bf16[] = {bf16_of_code(static_cast<uint8_t>(I))...};
};
using Magnitudes = MagnitudeTable<std::make_index_sequence<128>>;

inline void convert_keys_avx512(const uint8_t* const* codes, int64_t n, int64_t rows, uint16_t* out,
                                bool* nan) {
  const __m512i t0 = _mm512_load_si512(Magnitudes::bf16);
  const __m512i t1 = _mm512_load_si512(Magnitudes::bf16 + 32);
  const __m512i t2 = _mm512_load_si512(Magnitudes::bf16 + 64);
  const __m512i t3 = _mm512_load_si512(Magnitudes::bf16 + 96);
  const __m512i bit6 = _mm512_set1_epi16(0x40), sign = _mm512_set1_epi16(-0x8000);
  const __m512i mag = _mm512_set1_epi8(0x7F);
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* c = codes[k];
    for (int64_t i = 0; i < kDim; i += 32) {
      const __m512i x =
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + i)));
      // Entries 0..63 and 64..127 by the low six bits, chosen by bit 6.
      const __m512i lo = _mm512_permutex2var_epi16(t0, x, t1);
      const __m512i hi = _mm512_permutex2var_epi16(t2, x, t3);
      const __m512i v = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(x, bit6), lo, hi);
      // v | (x << 8 & 0x8000)
      _mm512_storeu_si512(out + k * kDim + i,
                          _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(x, 8), sign, 0xF8));
    }
    const __m512i b0 = _mm512_loadu_si512(c), b1 = _mm512_loadu_si512(c + 64);
    nan[k] = (_mm512_cmpeq_epi8_mask(_mm512_and_si512(b0, mag), mag) |
              _mm512_cmpeq_epi8_mask(_mm512_and_si512(b1, mag), mag)) != 0;
  }
  for (int64_t k = n; k < rows; ++k)
    for (int64_t i = 0; i < kDim; i += 32)
      _mm512_storeu_si512(out + k * kDim + i, _mm512_setzero_si512());
}

// VBMI: the AMX unit, built with -mavx512vbmi, uses these (and tests/test_avx512_pieces.cpp, whose
// target pragma does not define __AVX512VBMI__, asks for them by DSV4CPU_VBMI_PIECES).
#if defined(__AVX512VBMI__) || defined(DSV4CPU_VBMI_PIECES)
using CodeBytes = ByteTables<&bf16_of_code>;

inline void convert_keys_vbmi(const uint8_t* const* codes, int64_t n, int64_t rows, uint16_t* out,
                              bool* nan) {
  const __m512i lo0 = _mm512_load_si512(CodeBytes::lo), lo1 = _mm512_load_si512(CodeBytes::lo + 64);
  const __m512i hi0 = _mm512_load_si512(CodeBytes::hi), hi1 = _mm512_load_si512(CodeBytes::hi + 64);
  const __m512i first = _mm512_load_si512(Interleave::half[0]);
  const __m512i second = _mm512_load_si512(Interleave::half[1]);
  const __m512i sign = _mm512_set1_epi8(-0x80), mag = _mm512_set1_epi8(0x7F);
  for (int64_t k = 0; k < n; ++k) {
    __mmask64 nan_codes = 0;
    for (int64_t i = 0; i < kDim; i += 64) {
      const __m512i x = _mm512_loadu_si512(codes[k] + i);
      // Entries 0..63 and 64..127 by bit 6 of the code (bit 7, the sign, is not an index bit).
      const __m512i lo = _mm512_permutex2var_epi8(lo0, x, lo1);
      const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, x, hi1), x, sign,
                                                   0xF8);  // hi | (x & 0x80)
      _mm512_storeu_si512(out + k * kDim + i, _mm512_permutex2var_epi8(lo, first, hi));
      _mm512_storeu_si512(out + k * kDim + i + 32, _mm512_permutex2var_epi8(lo, second, hi));
      nan_codes |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(x, mag), mag);
    }
    nan[k] = nan_codes != 0;
  }
  for (int64_t k = n; k < rows; ++k)
    for (int64_t i = 0; i < kDim; i += 32)
      _mm512_storeu_si512(out + k * kDim + i, _mm512_setzero_si512());
}
#endif  // VBMI

// max(dot, +0) with +0 for NaN and −0 (the second operand wins); the mask keeps the compiler from
// swapping the operands.
inline __m512 relu_avx512(__m512 dot) {
  return _mm512_maskz_max_ps(__mmask16(0xFFFF), dot, _mm512_setzero_ps());
}

inline void epilogue_accumulate_avx512(const float* dots, int64_t ld, int64_t n, int64_t h0,
                                       int64_t nh, const float* w, float (*lanes)[16]) {
  for (int64_t k = 0; k < n; ++k) {
    __m512 l = _mm512_loadu_ps(lanes[k]);
    for (int64_t g = 0; g < nh; g += 16)
      l = _mm512_fmadd_ps(_mm512_loadu_ps(w + h0 + g),
                          relu_avx512(_mm512_loadu_ps(dots + k * ld + g)), l);
    _mm512_storeu_ps(lanes[k], l);
  }
}

// Reads the lanes of keys up to n rounded up to 16 (rows past n are read, not used). (GCC 12 sees
// the undefined pass-through operand of the unmasked shuffle intrinsics as uninitialized.)
static_assert(kKeyBlock % 16 == 0, "lanes arrays of kKeyBlock rows hold whole groups of 16");
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
inline void epilogue_finish_avx512(float (*lanes)[16], int64_t n, const KeyBlock& keys,
                                   const bool* nan, int64_t H, float* out) {
  alignas(64) static constexpr int32_t key_order[16] = {0, 4, 8,  12, 1, 5, 9,  13,
                                                        2, 6, 10, 14, 3, 7, 11, 15};
  const __m512i order = _mm512_load_si512(key_order);
  const __m512 qnan = _mm512_set1_ps(__builtin_nanf(""));
  for (int64_t k0 = 0; k0 < n; k0 += 16) {
    // Width 8: s1[j] = keys 2j, 2j + 1 (eight sums each).
    __m512 s1[8];
    for (int j = 0; j < 8; ++j) {
      const __m512 a = _mm512_loadu_ps(lanes[k0 + 2 * j]),
                   b = _mm512_loadu_ps(lanes[k0 + 2 * j + 1]);
      s1[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    // Width 4: 128-bit lane l of s2[j] = key 4j + l.
    __m512 s2[4];
    for (int j = 0; j < 4; ++j)
      s2[j] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * j], s1[2 * j + 1], 0x88),
                            _mm512_shuffle_f32x4(s1[2 * j], s1[2 * j + 1], 0xDD));
    // Width 2: lane l of s3[j] = keys 8j + l (elements 0, 1) and 8j + 4 + l (elements 2, 3).
    __m512 s3[2];
    for (int j = 0; j < 2; ++j)
      s3[j] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * j], s2[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_ps(s2[2 * j], s2[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // Width 1: element 4l + p = key l + 4p; then in key order.
    const __m512 sum = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 head_sum = _mm512_permutexvar_ps(order, sum);
    const int64_t m = n - k0 < 16 ? n - k0 : 16;
    const auto valid = static_cast<__mmask16>((1u << m) - 1u);
    __m512 r = _mm512_mul_ps(head_sum, _mm512_maskz_loadu_ps(valid, keys.scale + k0));
    if (H > 0) {
      __mmask16 nan_keys = 0;
      for (int64_t k = 0; k < m; ++k)
        nan_keys |= static_cast<__mmask16>(nan[k0 + k] ? 1u << k : 0u);
      r = _mm512_mask_blend_ps(nan_keys, r, qnan);
    }
    _mm512_mask_storeu_ps(out + k0, valid, r);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// The pieces of the bf16 kernels in vector form (BasicPieces of indexer_bf16.hpp).
struct Avx512Pieces {
  static constexpr auto convert = &convert_keys_avx512;
  static constexpr auto accumulate = &epilogue_accumulate_avx512;
  static constexpr auto finish = &epilogue_finish_avx512;
};
#if defined(__AVX512VBMI__) || defined(DSV4CPU_VBMI_PIECES)
struct VbmiPieces : Avx512Pieces {
  static constexpr auto convert = &convert_keys_vbmi;
};
#endif

}  // namespace
}  // namespace dsv4cpu::detail::opt
