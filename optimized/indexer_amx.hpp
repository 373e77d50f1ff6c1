// The AMX-BF16 logits kernel (indexer.md §4.3) as ordinary C++ around an abstract tile unit, so
// that everything but the tile instructions runs and is tested on machines without AMX: a block
// of keys (bf16 rows, the A operand) times the query row packed once in the VNNI layout (the B
// operand) gives C = dots[key][head] in fp32 tiles; the epilogue of indexer_bf16.hpp then applies
// ReLU, the head weights and the key scale.
//
// `Tiles` is the tile unit of optimized/amx_tiles.hpp (C[0..3]: 16 keys × 16 heads fp32; A: 16
// keys × 32 dims bf16; B: 16 pairs × 16 heads × 2 bf16). optimized/indexer_amx.cpp runs it with
// the AMX intrinsics and the vector pieces of indexer_avx512.hpp; the tests with a scalar model of
// TDPBF16PS and the scalar pieces.
#pragma once
#include <cstdint>

#include "optimized/amx_tiles.hpp"
#include "optimized/indexer_bf16.hpp"

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: see indexer_bf16.hpp

inline constexpr int64_t kKSteps = kDim / 32;  // A tiles across the 128 dims

// dots[k][c·16 + i] (row stride kHeadChunk floats) for the 16 keys of `keys` (bf16 rows of 128)
// and heads h0 + c·16 + i, c < groups (1..4), of the packed query q (indexer_bf16.hpp).
template <class Tiles>
void amx_dots_chunk(Tiles& t, const uint16_t* keys, const uint16_t* q, int64_t Hp, int64_t h0,
                    int groups, float* dots) {
  for (int c = 0; c < groups; ++c) t.zero(c);
  for (int64_t s = 0; s < kKSteps; ++s) {
    // A and B tiles alternate: a load does not wait for the product reading the tile before.
    const int i = static_cast<int>(s & 1);
    t.load_a(i, keys + 32 * s, kDim * 2);
    for (int c = 0; c < groups; ++c) {
      // Rows 16s .. 16s + 15 of the packed query, heads h0 + 16c .. h0 + 16c + 15.
      t.load_b(c & 1, q + 2 * (16 * s * Hp + h0 + 16 * c), Hp * 4);
      t.dot(c, i, c & 1);
    }
  }
  for (int c = 0; c < groups; ++c) t.store(c, dots + 16 * c, kHeadChunk * 4);
}

// LogitsKernel::block of the AMX variant (tiles configured by the caller), with the pieces
// `Pieces` (BasicPieces of indexer_bf16.hpp or a vector form: same output). The work comes in
// units of 16 keys × one head chunk. A tile load that reads freshly stored bytes waits for those
// stores, which wait for the tile products before them: so the keys are converted two key tiles
// ahead of their products, and the epilogue of unit u runs after the products of unit u + 1.
template <class Pieces, class Tiles>
void amx_block(Tiles& t, const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  alignas(64) uint16_t kb[kKeyBlock * kDim];
  alignas(64) float dots[2][kTileRows * kHeadChunk];
  alignas(64) float lanes[kKeyBlock][16] = {};
  bool nan[kKeyBlock];
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  auto convert = [&](int64_t kt) {  // key tile kt: keys 16·kt .. (rows past n zero)
    const int64_t k0 = kt * kTileRows, nk = n - k0 < kTileRows ? n - k0 : kTileRows;
    Pieces::convert(keys.codes + k0, nk, kTileRows, kb + k0 * kDim, nan + k0);
  };
  for (int64_t kt = 0; kt < tiles && kt < 2; ++kt) convert(kt);
  const auto* q = static_cast<const uint16_t*>(row.q);
  const int64_t chunks = (row.Hp + kHeadChunk - 1) / kHeadChunk, units = tiles * chunks;
  // Unit u: keys 16·(u / chunks) .., heads kHeadChunk·(u % chunks) ..
  auto products = [&](int64_t u) {
    const int64_t k0 = u / chunks * kTileRows, h0 = u % chunks * kHeadChunk;
    const int64_t nh = row.Hp - h0 < kHeadChunk ? row.Hp - h0 : kHeadChunk;
    amx_dots_chunk(t, kb + k0 * kDim, q, row.Hp, h0, static_cast<int>(nh / 16), dots[u & 1]);
  };
  auto epilogue = [&](int64_t u) {
    const int64_t k0 = u / chunks * kTileRows, h0 = u % chunks * kHeadChunk;
    const int64_t nk = n - k0 < kTileRows ? n - k0 : kTileRows;
    const int64_t nh = row.Hp - h0 < kHeadChunk ? row.Hp - h0 : kHeadChunk;
    Pieces::accumulate(dots[u & 1], kHeadChunk, nk, h0, nh, row.w, lanes + k0);
  };
  for (int64_t u = 0; u < units; ++u) {
    products(u);
    if (u > 0) epilogue(u - 1);
    if (u % chunks == 0 && u / chunks + 2 < tiles) convert(u / chunks + 2);
  }
  if (units > 0) epilogue(units - 1);
  for (int64_t kt = 2; kt < tiles && units == 0; ++kt) convert(kt);  // no heads: NaN flags only
  Pieces::finish(lanes, n, keys, nan, row.H, out);
}

}  // namespace
}  // namespace dsv4cpu::detail::opt
