// The ordinary C++ pieces of the bf16 logits kernels (AMX-BF16 and AVX-512-BF16), indexer.md §4.3:
// fp8 codes widened to bf16 (exact, numerics.md §3.1), the query row packed once in the VNNI
// layout, key blocks laid out as bf16 rows, and the epilogue (ReLU, head weights, key scale,
// NaN keys). The dot products in between are the only ISA-specific part.
//
// Everything here has internal linkage: the header is compiled into translation units built with
// different ISA flags (and into the tests without any), and no copy may be shared between them.
// For the same reason it calls compiler builtins rather than library inline functions, whose
// out-of-line copies (unoptimised builds) the linker would merge across those units.
#pragma once
#include <cstdint>

#include "optimized/code_bf16.hpp"
#include "optimized/indexer_logits.hpp"

namespace dsv4cpu::detail::opt {
namespace {

inline constexpr int64_t kDim = kIndexerHeadDim;  // 128 = 64 bf16 pairs
inline constexpr int64_t kPairs = kDim / 2;
// Heads per epilogue chunk: four groups of 16 (four AMX C tiles, or four zmm accumulators).
inline constexpr int64_t kHeadChunk = 64;

// True iff one of the 128 codes is a NaN code (0x7F, 0xFF): (c & 0x7F) + 1 reaches 0x80 only
// for them.
inline bool key_has_nan(const uint8_t* codes) {
  uint32_t any = 0;
  for (int64_t d = 0; d < kDim; ++d) any |= (codes[d] & 0x7Fu) + 1u;
  return (any & 0x80u) != 0;
}

// The query row in the VNNI layout shared by TDPBF16PS (the B operand) and VDPBF16PS: pair p of
// head h (dims 2p and 2p + 1, low half first) is the 32-bit word p·Hp + h; heads H .. Hp − 1 are
// zero. q: H·128 codes; out: 64·Hp words.
inline void pack_q_vnni(const uint8_t* q, int64_t H, int64_t Hp, uint16_t* out) {
  for (int64_t p = 0; p < kPairs; ++p) {
    uint16_t* row = out + 2 * p * Hp;
    for (int64_t h = 0; h < Hp; ++h) {
      row[2 * h] = h < H ? bf16_of_code(q[h * kDim + 2 * p]) : 0;
      row[2 * h + 1] = h < H ? bf16_of_code(q[h * kDim + 2 * p + 1]) : 0;
    }
  }
}

inline size_t bf16_q_bytes(int64_t Hp) { return static_cast<size_t>(kPairs * Hp * 4); }

// LogitsKernel::prepare of the bf16 kernels.
inline void bf16_prepare(const uint8_t* q, const float* w, int64_t H, int64_t Hp, void* q_out,
                         float* w_out) {
  pack_q_vnni(q, H, Hp, static_cast<uint16_t*>(q_out));
  for (int64_t h = 0; h < Hp; ++h) w_out[h] = h < H ? w[h] : 0.0f;
}

// Keys codes[0 .. n−1] as bf16 rows of 128 (row k at out + 128·k, the AMX A-tile layout with a
// 256-byte stride), rows n .. rows−1 zero; nan[k] for k < n.
inline void convert_keys(const uint8_t* const* codes, int64_t n, int64_t rows, uint16_t* out,
                         bool* nan) {
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* c = codes[k];
    for (int64_t d = 0; d < kDim; ++d) out[k * kDim + d] = bf16_of_code(c[d]);
    nan[k] = key_has_nan(c);
  }
  for (int64_t k = n; k < rows; ++k)
    for (int64_t d = 0; d < kDim; ++d) out[k * kDim + d] = 0;
}

// The epilogue, in two steps so that heads can come in chunks. For key k, 16 fp32 lanes collect
// lane[i] = Σ over head groups g (ascending) of w[16g + i]·relu(dot), one fma each; then the lanes
// are summed by the tree of numerics.md §8.1 and the key scale multiplies the head sum (§4.2).
// dots: rows of `ld` floats, heads h0 .. h0 + nh − 1 (nh a multiple of 16) at columns 0 .. nh − 1.
inline void epilogue_accumulate(const float* dots, int64_t ld, int64_t n, int64_t h0, int64_t nh,
                                const float* w, float (*lanes)[16]) {
  for (int64_t k = 0; k < n; ++k) {
    float acc[16];  // in a register: dots, w and lanes may alias as far as the compiler knows
    for (int i = 0; i < 16; ++i) acc[i] = lanes[k][i];
    for (int64_t g = 0; g < nh; g += 16) {
      for (int i = 0; i < 16; ++i) {
        const float dot = dots[k * ld + g + i];
        const float relu = dot > 0.0f ? dot : 0.0f;  // NaN keys are patched by epilogue_finish
        acc[i] = __builtin_fmaf(w[h0 + g + i], relu, acc[i]);
      }
    }
    for (int i = 0; i < 16; ++i) lanes[k][i] = acc[i];
  }
}

inline void epilogue_finish(float (*lanes)[16], int64_t n, const KeyBlock& keys, const bool* nan,
                            int64_t H, float* out) {
  for (int64_t k = 0; k < n; ++k) {
    float* l = lanes[k];
    for (int width = 8; width >= 1; width /= 2)
      for (int i = 0; i < width; ++i) l[i] = l[i] + l[i + width];
    out[k] = nan[k] && H > 0 ? __builtin_nanf("") : l[0] * keys.scale[k];
  }
}

// The ordinary pieces a bf16 kernel is assembled from, as one type: these scalar forms, or the
// vector forms of indexer_avx512.hpp (same output).
struct BasicPieces {
  static constexpr auto convert = &convert_keys;
  static constexpr auto accumulate = &epilogue_accumulate;
  static constexpr auto finish = &epilogue_finish;
};

}  // namespace
}  // namespace dsv4cpu::detail::opt
