// The bf16 patterns of e4m3 codes (numerics.md §3.1) shared by the bf16 kernels of the logits
// (optimized/indexer_bf16.hpp) and of the attention (optimized/attention_decode_vbmi.hpp), and the
// constant tables of their VBMI lookups: the low and high bytes of a pattern by code magnitude,
// and the byte interleave of the two into 16-bit words. Internal linkage: see indexer_bf16.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dsv4cpu::detail::opt {
namespace {

// numerics.md §3.1 as bf16 bits: every finite e4m3 value is a normal bf16. E ≥ 1: the exponent
// rebiased by +120 and the mantissa widened; E = 0 (m·2⁻⁹) normalised: m ≥ 4 is 2⁻⁷·(m/4),
// m ≥ 2 is 2⁻⁸·(m/2), m = 1 is 2⁻⁹. The NaN codes give ±480 here; callers flag NaN codes
// separately (the logits: key_has_nan).
constexpr uint16_t bf16_of_code(uint8_t c) {
  const uint32_t mag = c & 0x7Fu, sign = (c & 0x80u) << 8;
  const uint32_t sub = mag >= 4   ? (120u << 7) | ((mag - 4) << 5)
                       : mag >= 2 ? (119u << 7) | ((mag - 2) << 6)
                       : mag == 1 ? (118u << 7)
                                  : 0u;
  const uint32_t bits = mag >= 8 ? (mag << 4) + (120u << 7) : sub;
  return static_cast<uint16_t>(bits | sign);
}

// The low and high bytes of F(c) for the 128 magnitudes c (the index bits of a byte permute).
template <uint16_t (*F)(uint8_t), class Seq = std::make_index_sequence<128>>
struct ByteTables;
template <uint16_t (*F)(uint8_t), size_t... I>
struct ByteTables<F, std::index_sequence<I...>> {
  alignas(64) static constexpr uint8_t lo[] = {
      static_cast<uint8_t>(F(static_cast<uint8_t>(I)) & 0xFFu)...};
  alignas(64) static constexpr uint8_t hi[] = {
      static_cast<uint8_t>(F(static_cast<uint8_t>(I)) >> 8)...};
};

// Word i of the 32 words of codes 32h .. 32h + 31 (bytes 2i, 2i + 1) as indices into the pair of
// registers (lo, hi) of 64 looked-up bytes: lo[32h + i], then hi[32h + i] (64 + ...).
template <class Seq>
struct InterleaveTables;
template <size_t... B>
struct InterleaveTables<std::index_sequence<B...>> {
  alignas(64) static constexpr uint8_t half[2][64] = {
      {static_cast<uint8_t>(B % 2 ? 64 + B / 2 : B / 2)...},
      {static_cast<uint8_t>(B % 2 ? 96 + B / 2 : 32 + B / 2)...}};
};
using Interleave = InterleaveTables<std::make_index_sequence<64>>;

}  // namespace
}  // namespace dsv4cpu::detail::opt
