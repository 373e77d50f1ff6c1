// DecodeBlockBf16 of optimized/attention_decode_hwy-inl.h with AVX-512 VBMI byte permutes, for the
// AMX unit (optimized/attention_amx.cpp, built with -mavx512vbmi; every AMX CPU has VBMI). The same
// krows, vpairs and result, bit for bit, 64 codes of a tile at a time: the code's magnitude looks
// up the low and high bytes of its bf16 pattern (optimized/code_bf16.hpp: bf16_of_code, or the
// rebiased form with vllm) in tables that already hold the tile's exponent s − 127. Its low bit
// (2⁷ in the pattern) picks the tables of the pattern + 2⁷, its other bits are one byte added to
// the high table (every entry but a zero code outside vllm, which stays ±0); the sign is ORed into
// the high byte (the sum stays below 2¹⁵, so the add may come after it) and the two bytes are
// interleaved into words. A vllm tile with byte 0 is +0. NaN codes (outside those tiles) and
// non-finite RoPE values make the result not_finite; a scale byte outside [10, 246] (but 0 with
// vllm) or a subnormal RoPE value not_exact.
// property_tests/prop_attention_decode_hwy.cpp checks it against DecodeBlock; its target pragma
// does not define __AVX512VBMI__, so it asks for it by DSV4CPU_VBMI_PIECES.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "args/fp8_ds_mla.hpp"
#include "optimized/attention_kernel.hpp"
#include "optimized/code_bf16.hpp"

#if defined(__AVX512VBMI__) || defined(DSV4CPU_VBMI_PIECES)
namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: see code_bf16.hpp

// vllm: every code's bits rebiased by +120 in the exponent (code 0 too).
constexpr uint16_t bf16_of_code_vllm(uint8_t c) {
  return static_cast<uint16_t>(((c & 0x7Fu) << 4) + (120u << 7));
}
// The patterns + 2⁷ (mod 2¹⁶) for an odd s − 127; outside vllm code 0 stays 0.
constexpr uint16_t bf16_of_code_odd(uint8_t c) {
  return c == 0 ? uint16_t{0} : static_cast<uint16_t>(bf16_of_code(c) + 0x80u);
}
constexpr uint16_t bf16_of_code_vllm_odd(uint8_t c) {
  return static_cast<uint16_t>(bf16_of_code_vllm(c) + 0x80u);
}

// Row pair words of 16 dims from the words of rows a (indices 0..31) and b (32..63): word 2k is
// a[16h + k], word 2k + 1 is b[16h + k].
template <class Seq>
struct PairTables;
template <size_t... W>
struct PairTables<std::index_sequence<W...>> {
  alignas(64) static constexpr uint16_t half[2][32] = {
      {static_cast<uint16_t>(W % 2 ? 32 + W / 2 : W / 2)...},
      {static_cast<uint16_t>(W % 2 ? 48 + W / 2 : 16 + W / 2)...}};
};
using Pairs = PairTables<std::make_index_sequence<32>>;

inline Bf16Decode decode_block_bf16_vbmi(const uint8_t* const* data, const uint8_t* const* scales,
                                         int64_t n, bool vllm, uint16_t* krows, uint32_t* vpairs) {
  // [s − 127 odd]: the tables of the patterns and of the patterns + 2⁷.
  const uint8_t* const lo_table[2] = {
      vllm ? ByteTables<&bf16_of_code_vllm>::lo : ByteTables<&bf16_of_code>::lo,
      vllm ? ByteTables<&bf16_of_code_vllm_odd>::lo : ByteTables<&bf16_of_code_odd>::lo};
  const uint8_t* const hi_table[2] = {
      vllm ? ByteTables<&bf16_of_code_vllm>::hi : ByteTables<&bf16_of_code>::hi,
      vllm ? ByteTables<&bf16_of_code_vllm_odd>::hi : ByteTables<&bf16_of_code_odd>::hi};
  const __mmask64 not_zero = vllm ? ~__mmask64{0} : ~__mmask64{1};  // entries that get s − 127
  const __m512i first = _mm512_load_si512(Interleave::half[0]);
  const __m512i second = _mm512_load_si512(Interleave::half[1]);
  const __m512i pair0 = _mm512_load_si512(Pairs::half[0]);
  const __m512i pair1 = _mm512_load_si512(Pairs::half[1]);
  const __m512i sign = _mm512_set1_epi8(-0x80), exponent = _mm512_set1_epi16(0x7F80);
  const __m512i mantissa = _mm512_set1_epi16(0x007F);
  __m512i nan = _mm512_setzero_si512();  // max of code | 0x80: 0xFF for a NaN code
  __mmask32 rope_bad = 0, rope_subnormal = 0;
  bool bytes_exact = true;
  // The 64 bf16 words of dims 64t .. 64t + 63 of one row (w[0]: the first 32).
  auto decode = [&](const uint8_t* row, const uint8_t* bytes, int t, __m512i* w) {
    if (t == kMlaTiles) {  // RoPE: the bf16 values, exponent all ones or subnormal flagged
      for (int h = 0; h < 2; ++h) {
        w[h] = _mm512_loadu_si512(row + kMlaNope + 64 * h);
        rope_bad |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(w[h], exponent), exponent);
        rope_subnormal |= _mm512_mask_test_epi16_mask(_mm512_testn_epi16_mask(w[h], exponent),
                                                      w[h], mantissa);
      }
      return;
    }
    const int b = bytes[t];
    bytes_exact &= ScaleByteBf16Exact(b, vllm);
    if (vllm && b == 0) {
      w[0] = w[1] = _mm512_setzero_si512();
      return;
    }
    const int e = b - 127, odd = e & 1;
    const __m512i q = _mm512_set1_epi8(static_cast<char>((e - odd) / 2));
    const __m512i lo0 = _mm512_load_si512(lo_table[odd]);
    const __m512i lo1 = _mm512_load_si512(lo_table[odd] + 64);
    const __m512i h0 = _mm512_load_si512(hi_table[odd]);
    const __m512i hi0 = _mm512_mask_add_epi8(h0, not_zero, h0, q);
    const __m512i hi1 = _mm512_add_epi8(_mm512_load_si512(hi_table[odd] + 64), q);
    const __m512i x = _mm512_loadu_si512(row + kMlaTile * t);
    // Entries 0..63 and 64..127 by bit 6 of the code (bit 7, the sign, is not an index bit).
    const __m512i lo = _mm512_permutex2var_epi8(lo0, x, lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, x, hi1), x, sign,
                                                 0xF8);  // hi | (x & 0x80)
    w[0] = _mm512_permutex2var_epi8(lo, first, hi);
    w[1] = _mm512_permutex2var_epi8(lo, second, hi);
    nan = _mm512_max_epu8(nan, _mm512_or_si512(x, sign));
  };
  for (int64_t i = 0; 2 * i < n; ++i) {
    const int64_t j = 2 * i;
    const bool has_b = j + 1 < n;
    PrefetchPairAhead(data, scales, j, n);
    for (int t = 0; t <= kMlaTiles; ++t) {  // the NoPE tiles, then the RoPE dims
      __m512i a[2], b[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      decode(data[j], scales[j], t, a);
      if (has_b) decode(data[j + 1], scales[j + 1], t, b);
      uint16_t* ka = krows + j * kKRow + kMlaTile * t;
      uint32_t* w = vpairs + t * kVpBlock + i * 64;
      for (int h = 0; h < 2; ++h) {
        _mm512_storeu_si512(ka + 32 * h, a[h]);
        _mm512_storeu_si512(ka + kKRow + 32 * h, b[h]);
        _mm512_storeu_si512(w + 32 * h, _mm512_permutex2var_epi16(a[h], pair0, b[h]));
        _mm512_storeu_si512(w + 32 * h + 16, _mm512_permutex2var_epi16(a[h], pair1, b[h]));
      }
    }
  }
  if (!bytes_exact || rope_subnormal != 0) return Bf16Decode::not_exact;
  return rope_bad == 0 && _mm512_cmpeq_epi8_mask(nan, _mm512_set1_epi8(-1)) == 0
             ? Bf16Decode::ok
             : Bf16Decode::not_finite;
}

}  // namespace
}  // namespace dsv4cpu::detail::opt
#endif  // VBMI
