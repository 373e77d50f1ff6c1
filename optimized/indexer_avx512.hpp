// The vector form of convert_keys (optimized/indexer_bf16.hpp) for the AVX-512 translation units
// (indexer_avx512bf16.cpp, indexer_amx.cpp, both built with AVX-512 BW flags): each code's
// magnitude looks up the bf16 pattern that bf16_of_code gives it (a 128-entry table of words,
// computed at compile time from that function), the sign bit is moved to bit 15, and NaN codes are
// flagged by a byte compare. Same output as convert_keys, bit for bit.
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

inline void convert_keys_avx512(const KeyBlock& keys, int64_t n, int64_t rows, uint16_t* out,
                                bool* nan) {
  const __m512i t0 = _mm512_load_si512(Magnitudes::bf16);
  const __m512i t1 = _mm512_load_si512(Magnitudes::bf16 + 32);
  const __m512i t2 = _mm512_load_si512(Magnitudes::bf16 + 64);
  const __m512i t3 = _mm512_load_si512(Magnitudes::bf16 + 96);
  const __m512i bit6 = _mm512_set1_epi16(0x40), sign = _mm512_set1_epi16(-0x8000);
  const __m512i mag = _mm512_set1_epi8(0x7F);
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* c = keys.codes[k];
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

}  // namespace
}  // namespace dsv4cpu::detail::opt
