// The AMX tile set-up shared by the AMX kernels (optimized/indexer_amx.hpp, attention_amx.hpp):
// palette 1 with C tiles 0..3, the A tiles 4, 5 and the B tiles 6, 7, each 16 rows of 64 bytes
// (C: 16 × 16 fp32; A: 16 rows × 32 bf16; B: 16 pairs × 16 columns × 2 bf16). Two A and two B
// tiles let a kernel load the next operand while a product still reads the last one, and feed
// four accumulator chains from two loads each. The kernels are written against an abstract tile
// unit `Tiles`:
//   zero(c)                      C tile c (0..3) := 0
//   load_c(c, base, stride)      C tile c := 16 rows of 64 bytes
//   load_a(i, base, stride)      A tile i (0, 1: tile kTileA + i) := 16 rows of 64 bytes
//   load_b(j, base, stride)      B tile j (0, 1: tile kTileB + j) := 16 rows of 64 bytes
//   dot(c, i, j)                 TDPBF16PS C[c] += A[i]·B[j]
//   store(c, base, stride)       16 rows of 64 bytes := C tile c
// Translation units built with AMX flags get AmxTiles, the intrinsics; the tests a scalar model.
#pragma once
#include <cstdint>

// -mamx-tile defines __AMX_TILE__ (GCC) or __AMXTILE__ (Clang).
#if defined(__AMX_TILE__) || defined(__AMXTILE__)
#define DSV4CPU_AMX_TILE 1
#include <immintrin.h>
#endif

namespace dsv4cpu::detail::opt {
namespace {  // internal linkage: compiled into units with different ISA flags and into the tests

// The 64-byte operand of LDTILECFG (palette 1).
struct TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tiles 0..15
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG operand");

inline constexpr int kTileA = 4, kTileB = 6;  // C tiles are 0..3; A 4, 5; B 6, 7
inline constexpr int kTiles = 8;
inline constexpr int64_t kTileRows = 16;      // rows of every tile
inline constexpr int64_t kTileBytes = 64;     // 32 bf16, 16 pairs or 16 fp32 per row

inline TileConfig amx_tile_config() {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < kTiles; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(kTileRows);
    cfg.colsb[t] = static_cast<uint16_t>(kTileBytes);
  }
  return cfg;
}

#ifdef DSV4CPU_AMX_TILE
// The tile intrinsics take tile numbers as literal tokens.
static_assert(kTileA == 4 && kTileB == 6, "tile numbers below");

// The tile loads name only the address, so a compiler barrier makes every store to the operand
// (converted keys, packed rows, the tile configuration) happen before them.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

struct AmxTiles {
  void zero(int c) {
    switch (c) {
      case 0: _tile_zero(0); break;
      case 1: _tile_zero(1); break;
      case 2: _tile_zero(2); break;
      default: _tile_zero(3); break;
    }
  }
  void load_c(int c, const float* base, int64_t stride) {
    memory_barrier();
    switch (c) {
      case 0: _tile_loadd(0, base, stride); break;
      case 1: _tile_loadd(1, base, stride); break;
      case 2: _tile_loadd(2, base, stride); break;
      default: _tile_loadd(3, base, stride); break;
    }
  }
  void load_a(int i, const void* base, int64_t stride) {
    memory_barrier();
    if (i == 0)
      _tile_loadd(4, base, stride);
    else
      _tile_loadd(5, base, stride);
  }
  void load_b(int j, const void* base, int64_t stride) {
    memory_barrier();
    if (j == 0)
      _tile_loadd(6, base, stride);
    else
      _tile_loadd(7, base, stride);
  }
  void dot(int c, int i, int j) {
// The tile numbers of A[i] (4 + i) and B[j] (6 + j) as the literal tokens the intrinsic needs.
#define DSV4CPU_DOT(c, i, j, a, b) \
  case (c) * 4 + (i) * 2 + (j): _tile_dpbf16ps(c, a, b); break;
#define DSV4CPU_DOTS(c) \
  DSV4CPU_DOT(c, 0, 0, 4, 6) DSV4CPU_DOT(c, 0, 1, 4, 7) DSV4CPU_DOT(c, 1, 0, 5, 6) DSV4CPU_DOT(c, 1, 1, 5, 7)
    switch (c * 4 + i * 2 + j) {
      DSV4CPU_DOTS(0)
      DSV4CPU_DOTS(1)
      DSV4CPU_DOTS(2)
      DSV4CPU_DOTS(3)
      default: break;
    }
#undef DSV4CPU_DOTS
#undef DSV4CPU_DOT
  }
  void store(int c, float* base, int64_t stride) {
    switch (c) {
      case 0: _tile_stored(0, base, stride); break;
      case 1: _tile_stored(1, base, stride); break;
      case 2: _tile_stored(2, base, stride); break;
      default: _tile_stored(3, base, stride); break;
    }
    memory_barrier();
  }
};

// Per-thread tile configuration around a run of kernel calls.
inline void amx_thread_begin() {
  const TileConfig cfg = amx_tile_config();
  memory_barrier();
  _tile_loadconfig(&cfg);
}
inline void amx_thread_end() { _tile_release(); }
#endif  // DSV4CPU_AMX_TILE

}  // namespace
}  // namespace dsv4cpu::detail::opt
