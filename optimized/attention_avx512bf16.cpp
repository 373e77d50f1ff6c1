// The AVX-512-BF16 products of sparse_mla_attention (optimized/attention_kernel.hpp): VDPBF16PS
// with heads in the lanes for the scores (Qp, each K pair broadcast) and dims in the lanes for the
// values (Vp, each Pp pair broadcast). Built with AVX-512 F/BW/VL/DQ/BF16 flags; nothing here runs
// unless core/cpu.hpp finds Isa::avx512bf16.
#include <immintrin.h>

#include "args/fp8_ds_mla.hpp"
#include "optimized/attention_kernel.hpp"
#include "optimized/attention_transpose.hpp"

namespace dsv4cpu::detail::opt {
namespace {

inline __m512bh pair_broadcast(const void* p) {
  int32_t w;
  __builtin_memcpy(&w, p, 4);
  return (__m512bh)_mm512_set1_epi32(w);
}

// Register block: R rows × the two head vectors, over the 256 pairs.
constexpr int kRows = 8;

template <int kTiles>
void scores_tiles(const uint16_t* K, int64_t rows, const uint32_t* Qp, float* S) {
  for (int64_t j0 = 0; j0 < rows; j0 += kRows) {
    __m512 acc[kRows][kTiles];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kTiles; ++c) acc[r][c] = _mm512_setzero_ps();
    const uint16_t* k = K + j0 * kKRow;
    for (int64_t p = 0; p < kDimPairs; ++p) {
      __m512bh q[kTiles];
      for (int c = 0; c < kTiles; ++c)
        q[c] = (__m512bh)_mm512_loadu_si512(Qp + p * kHeadBlock + 16 * c);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m512bh kv = pair_broadcast(k + r * kKRow + 2 * p);
        for (int c = 0; c < kTiles; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], q[c], kv);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kTiles; ++c)
        _mm512_storeu_ps(S + (j0 + r) * kHeadBlock + 16 * c, acc[r][c]);
  }
}

void scores(const uint16_t* K, int64_t rows, const uint32_t* Qp, int tiles, float* S,
            void (*)(void*), void*) {
  if (tiles == 2)
    scores_tiles<2>(K, rows, Qp, S);
  else
    scores_tiles<1>(K, rows, Qp, S);
}

// Register block: 4 heads × 4 vectors of 16 dims, over the row pairs.
constexpr int kHeads = 4, kDims = 4;

void group_values(const uint32_t* Pp, const uint32_t* Vp, int64_t vp_block, int64_t pairs,
                  const float* alpha, float* acc, int64_t heads) {
  for (int64_t d0 = 0; d0 < kMlaDim; d0 += 16 * kDims)
    for (int64_t h0 = 0; h0 < heads; h0 += kHeads) {
      __m512 c[kHeads][kDims];
#pragma GCC unroll 4
      for (int h = 0; h < kHeads; ++h)
#pragma GCC unroll 4
        for (int k = 0; k < kDims; ++k)  // RN(acc·α), or +0 without alpha
          c[h][k] = alpha ? _mm512_mul_ps(_mm512_load_ps(acc + (h0 + h) * kAccRow + d0 + 16 * k),
                                          _mm512_set1_ps(alpha[h0 + h]))
                          : _mm512_setzero_ps();
      for (int64_t i = 0; i < pairs; ++i) {
        __m512bh v[kDims];
#pragma GCC unroll 4
        for (int k = 0; k < kDims; ++k)
          v[k] = (__m512bh)_mm512_load_si512(Vp + d0 / 64 * vp_block + i * 64 + 16 * k);
#pragma GCC unroll 4
        for (int h = 0; h < kHeads; ++h) {
          const __m512bh p = pair_broadcast(Pp + i * kHeadBlock + h0 + h);
#pragma GCC unroll 4
          for (int k = 0; k < kDims; ++k) c[h][k] = _mm512_dpbf16_ps(c[h][k], p, v[k]);
        }
      }
#pragma GCC unroll 4
      for (int h = 0; h < kHeads; ++h)
#pragma GCC unroll 4
        for (int k = 0; k < kDims; ++k)
          _mm512_store_ps(acc + (h0 + h) * kAccRow + d0 + 16 * k, c[h][k]);
    }
}

void values(const uint32_t* Pp, const uint32_t* Vp, int64_t vp_block, int64_t pairs,
            const float* alpha, float* acc, int64_t groups, int tiles) {
  for (int64_t g = 0; g < groups; ++g)
    group_values(Pp + g * kPpGroup, Vp, vp_block, pairs, alpha ? alpha + g * kHeadBlock : nullptr,
                 acc + g * kHeadBlock * kAccRow, tiles * kHeadTile);
}

// Constant-initialised: no code of this file runs at load time.
constexpr AttentionKernel kAvx512Bf16Kernel = {&scores,  &values, nullptr,
                                               &pack_q, nullptr, nullptr};

}  // namespace

const AttentionKernel& avx512bf16_attention_kernel() { return kAvx512Bf16Kernel; }

}  // namespace dsv4cpu::detail::opt
