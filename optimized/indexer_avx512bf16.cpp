// The AVX-512-BF16 logits kernel (indexer.md §4.3): VDPBF16PS dot products with heads in the
// lanes, the query row in the VNNI layout and each key pair broadcast; key conversion from
// indexer_avx512.hpp, epilogue as in indexer_bf16.hpp. Built with AVX-512 F/BW/VL/DQ/BF16 flags;
// nothing here runs unless core/cpu.hpp finds Isa::avx512bf16.
//
// VDPBF16PS treats bf16 subnormal inputs as zero and flushes subnormal results (numerics.md §9):
// decoded fp8 values are normal bf16, and every partial dot product is a multiple of 2⁻¹⁸, so
// neither ever happens here; the epilogue runs in ordinary fp32 with gradual underflow.
#include <immintrin.h>

#include <utility>

#include "optimized/indexer_avx512.hpp"

namespace dsv4cpu::detail::opt {
namespace {

// Register block: NK keys × G groups of 16 heads accumulate over the 64 pairs; then the first
// epilogue step (epilogue_accumulate of indexer_bf16.hpp, in registers): for g ascending,
// lanes[k] = fma(w[h0 + 16g .. + 15], relu(dot), lanes[k]).
template <int G, int NK>
void dots_micro(const uint16_t* keys, const uint16_t* q, int64_t Hp, int64_t h0, const float* w,
                float (*lanes)[16]) {
  __m512 acc[NK][G];
#pragma GCC unroll 8
  for (int k = 0; k < NK; ++k)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[k][g] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kPairs; ++p) {
    __m512i qv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) qv[g] = _mm512_loadu_si512(q + 2 * (p * Hp + h0 + 16 * g));
#pragma GCC unroll 8
    for (int k = 0; k < NK; ++k) {
      int32_t pair;
      __builtin_memcpy(&pair, keys + k * kDim + 2 * p, 4);
      const __m512i kv = _mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        acc[k][g] = _mm512_dpbf16_ps(acc[k][g], (__m512bh)qv[g], (__m512bh)kv);
    }
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int k = 0; k < NK; ++k) {
    __m512 l = _mm512_loadu_ps(lanes[k]);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)  // max(dot, +0) is +0 for −0 (NaN keys are patched later)
      l = _mm512_fmadd_ps(_mm512_loadu_ps(w + h0 + 16 * g),
                          _mm512_maskz_max_ps(__mmask16(0xFFFF), acc[k][g], zero), l);
    _mm512_storeu_ps(lanes[k], l);
  }
}

constexpr int kMaxKeys = 6;  // 6 keys × 4 groups = 24 accumulators + 4 query registers
using DotsMicro = void (*)(const uint16_t*, const uint16_t*, int64_t, int64_t, const float*,
                          float (*)[16]);

// Micro<S>::fn[G − 1][NK − 1] = dots_micro<G, NK>.
template <class Seq>
struct Micro;
template <int... K>
struct Micro<std::integer_sequence<int, K...>> {
  static constexpr DotsMicro fn[4][kMaxKeys] = {{&dots_micro<1, K + 1>...},
                                                {&dots_micro<2, K + 1>...},
                                                {&dots_micro<3, K + 1>...},
                                                {&dots_micro<4, K + 1>...}};
};
using Micros = Micro<std::make_integer_sequence<int, kMaxKeys>>;

void bf16_block(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  alignas(64) uint16_t kb[kKeyBlock * kDim];
  alignas(64) float lanes[kKeyBlock][16] = {};
  bool nan[kKeyBlock];
  convert_keys_avx512(keys.codes, n, n, kb, nan);
  const auto* q = static_cast<const uint16_t*>(row.q);
  for (int64_t h0 = 0; h0 < row.Hp; h0 += kHeadChunk) {
    const int64_t nh = row.Hp - h0 < kHeadChunk ? row.Hp - h0 : kHeadChunk;
    const DotsMicro* micro = Micros::fn[nh / 16 - 1];
    for (int64_t k0 = 0; k0 < n; k0 += kMaxKeys) {
      const int64_t nk = n - k0 < kMaxKeys ? n - k0 : kMaxKeys;
      micro[nk - 1](kb + k0 * kDim, q, row.Hp, h0, row.w, lanes + k0);
    }
  }
  epilogue_finish_avx512(lanes, n, keys, nan, row.H, out);
}

// Constant-initialised: no code of this file runs at load time.
constexpr LogitsKernel kBf16Kernel = {&bf16_q_bytes, &bf16_prepare, &bf16_block, nullptr,
                                      nullptr};

}  // namespace

const LogitsKernel& avx512bf16_logits_kernel() { return kBf16Kernel; }

}  // namespace dsv4cpu::detail::opt
