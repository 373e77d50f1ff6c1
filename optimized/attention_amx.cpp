// The tile instructions of the AMX attention products (optimized/attention_amx.hpp holds the
// rest), the VBMI decode of the bf16 layouts (optimized/attention_decode_vbmi.hpp) and the AVX-512
// packing of q (optimized/attention_transpose.hpp). Built with
// -mamx-tile -mamx-bf16, -mavx512vbmi and AVX-512 flags; nothing here runs unless core/cpu.hpp
// finds Isa::amx (the CPU, and the OS granting the tile data state).
#include "optimized/attention_amx.hpp"
#include "optimized/attention_decode_vbmi.hpp"

namespace dsv4cpu::detail::opt {
namespace {

void scores_tiles(const uint16_t* K, int64_t rows, const uint32_t* Qp, int tiles, float* S,
                  void (*step)(void*), void* step_arg) {
  AmxTiles t;
  amx_scores(t, K, rows, Qp, tiles, S, step, step_arg);
}

void values_tiles(const uint32_t* Pp, const uint32_t* Vp, int64_t vp_block, int64_t pairs,
                  const float* alpha, float* acc, int64_t groups, int tiles) {
  AmxTiles t;
  amx_values(t, Pp, Vp, vp_block, pairs, alpha, acc, groups, tiles);
}

// Constant-initialised: no code of this file runs at load time.
constexpr AttentionKernel kAmxKernel = {&scores_tiles, &values_tiles,     &decode_block_bf16_vbmi,
                                        &pack_q,       &amx_thread_begin, &amx_thread_end};

}  // namespace

const AttentionKernel& amx_attention_kernel() { return kAmxKernel; }

}  // namespace dsv4cpu::detail::opt
