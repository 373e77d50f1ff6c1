// The tile instructions of the AMX-BF16 logits kernel (optimized/indexer_amx.hpp holds the rest).
// Built with -mamx-tile -mamx-bf16 and AVX-512 flags; nothing here runs unless core/cpu.hpp finds
// Isa::amx (the CPU, and the OS granting the tile data state).
#include <immintrin.h>

#include "optimized/indexer_amx.hpp"
#include "optimized/indexer_avx512.hpp"

namespace dsv4cpu::detail::opt {
namespace {

// The tile intrinsics take tile numbers as literal tokens.
static_assert(kTileA == 4 && kTileB == 5, "tile numbers below");

// The tile loads name only the address, so a compiler barrier makes every store to the operand
// (the converted keys, the tile configuration) happen before them.
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
  void load_a(const uint16_t* base, int64_t stride) {
    memory_barrier();
    _tile_loadd(4, base, stride);
  }
  void load_b(const uint16_t* base, int64_t stride) {
    memory_barrier();
    _tile_loadd(5, base, stride);
  }
  void dot(int c) {
    switch (c) {
      case 0: _tile_dpbf16ps(0, 4, 5); break;
      case 1: _tile_dpbf16ps(1, 4, 5); break;
      case 2: _tile_dpbf16ps(2, 4, 5); break;
      default: _tile_dpbf16ps(3, 4, 5); break;
    }
  }
  void store(int c, float* base, int64_t stride) {
    switch (c) {
      case 0: _tile_stored(0, base, stride); break;
      case 1: _tile_stored(1, base, stride); break;
      case 2: _tile_stored(2, base, stride); break;
      default: _tile_stored(3, base, stride); break;
    }
  }
};

void amx_thread_begin() {
  const TileConfig cfg = amx_tile_config();
  memory_barrier();
  _tile_loadconfig(&cfg);
}

void amx_thread_end() { _tile_release(); }

void amx_block_tiles(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  AmxTiles t;
  amx_block(t, convert_keys_avx512, row, keys, n, out);
}

// Constant-initialised: no code of this file runs at load time.
constexpr LogitsKernel kAmxKernel = {&bf16_q_bytes, &bf16_prepare, &amx_block_tiles,
                                     &amx_thread_begin, &amx_thread_end};

}  // namespace

const LogitsKernel& amx_logits_kernel() { return kAmxKernel; }

}  // namespace dsv4cpu::detail::opt
