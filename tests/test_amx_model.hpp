// A scalar model of the AMX tile unit of optimized/amx_tiles.hpp (Intel SDM, TDPBF16PS), so that
// the AMX kernels run and are tested on machines without AMX.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dsv4cpu/numerics.hpp"
#include "optimized/amx_tiles.hpp"

namespace dsv4cpu::test {
namespace {  // internal linkage, as the tile configuration it uses

// TDPBF16PS treats bf16 subnormal inputs as zero and flushes subnormal fp32 results.
inline float daz_bf16(uint16_t h) { return (h & 0x7F80u) == 0 ? 0.0f : bf16_to_f32(h); }
inline float ftz(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

// Tiles as rows of 64 bytes; tile numbers and shapes from amx_tile_config(). For every row m of C
// and column n, in k order: c += a[m][2k]·b[k][2n], then c += a[m][2k+1]·b[k][2n+1], each product
// of two bf16 exact in fp32 and each sum rounded to nearest even, then flushed.
struct EmulatedTiles {
  detail::opt::TileConfig cfg = detail::opt::amx_tile_config();
  std::vector<std::vector<uint8_t>> tile = std::vector<std::vector<uint8_t>>(detail::opt::kTiles);
  int dots = 0;

  void load(int t, const void* base, int64_t stride) {
    tile[t].assign(static_cast<size_t>(cfg.rows[t] * cfg.colsb[t]), 0);
    for (int r = 0; r < cfg.rows[t]; ++r)
      std::memcpy(&tile[t][static_cast<size_t>(r * cfg.colsb[t])],
                  static_cast<const uint8_t*>(base) + r * stride, cfg.colsb[t]);
  }
  uint16_t bf16_at(int t, int row, int col) const {
    uint16_t h;
    std::memcpy(&h, &tile[t][static_cast<size_t>(row * cfg.colsb[t] + 2 * col)], 2);
    return h;
  }
  float* f32_at(int t, int row, int col) {
    return reinterpret_cast<float*>(&tile[t][static_cast<size_t>(row * cfg.colsb[t] + 4 * col)]);
  }

  void zero(int c) { tile[c].assign(static_cast<size_t>(cfg.rows[c] * cfg.colsb[c]), 0); }
  void load_c(int c, const float* base, int64_t stride) { load(c, base, stride); }
  void load_a(int i, const void* base, int64_t stride) {
    load(detail::opt::kTileA + i, base, stride);
  }
  void load_b(int j, const void* base, int64_t stride) {
    load(detail::opt::kTileB + j, base, stride);
  }
  void dot(int c, int i, int j) {
    ++dots;
    const int A = detail::opt::kTileA + i, B = detail::opt::kTileB + j;
    for (int m = 0; m < cfg.rows[c]; ++m)
      for (int k = 0; k < cfg.colsb[A] / 4; ++k)
        for (int n = 0; n < cfg.colsb[c] / 4; ++n) {
          float* acc = f32_at(c, m, n);
          *acc = ftz(*acc + daz_bf16(bf16_at(A, m, 2 * k)) * daz_bf16(bf16_at(B, k, 2 * n)));
          *acc = ftz(*acc +
                     daz_bf16(bf16_at(A, m, 2 * k + 1)) * daz_bf16(bf16_at(B, k, 2 * n + 1)));
        }
  }
  void store(int c, float* base, int64_t stride) {
    for (int r = 0; r < cfg.rows[c]; ++r)
      std::memcpy(reinterpret_cast<uint8_t*>(base) + r * stride,
                  &tile[c][static_cast<size_t>(r * cfg.colsb[c])], cfg.colsb[c]);
  }
};

}  // namespace
}  // namespace dsv4cpu::test
