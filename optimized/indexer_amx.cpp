// The tile instructions of the AMX-BF16 logits kernel (optimized/indexer_amx.hpp holds the rest).
// Built with -mamx-tile -mamx-bf16 and AVX-512 flags (VBMI included); nothing here runs unless core/cpu.hpp finds
// Isa::amx (the CPU, and the OS granting the tile data state).
#include <immintrin.h>

#include "optimized/indexer_amx.hpp"
#include "optimized/indexer_avx512.hpp"

namespace dsv4cpu::detail::opt {
namespace {

void amx_block_tiles(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  AmxTiles t;
  amx_block<VbmiPieces>(t, row, keys, n, out);
}

// Constant-initialised: no code of this file runs at load time.
constexpr LogitsKernel kAmxKernel = {&bf16_q_bytes, &bf16_prepare, &amx_block_tiles,
                                     &amx_thread_begin, &amx_thread_end};

}  // namespace

const LogitsKernel& amx_logits_kernel() { return kAmxKernel; }

}  // namespace dsv4cpu::detail::opt
