// The compute roofs of the vector units, measured like amx_roof: avx512bf16_roof (VDPBF16PS, the
// avx512bf16 variants' product, 32 multiply-adds) and avx3_roof (VFMADD231PS, the fp32 FMA of
// Highway's AVX3 targets, 16 multiply-adds), each on zmm registers in kChains independent
// accumulators, and avx2_roof (VFMADD231PS on ymm registers, Highway's AVX2 target, 8
// multiply-adds) in kChainsYmm; the accumulators start at 0, 1, ... (no two chains the same
// computation), the operands (bf16 1.0 pairs, fp32 1.0) are read through the optimizer's barrier:
// finite, normal values throughout.
// "peak_share" is the measured rate over the nominal roof of that target (peak_flops_per_cycle at
// Google Benchmark's clock). Only the loop carries the ISA (a target attribute: nothing else of
// this file, inline code included, is built for AVX-512 or AVX2); bench_main.cpp registers each
// where a run of its target is listed.
#include <immintrin.h>

#include <cstdint>

#include "bench_util.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int kChains = 24;  // more than either instruction's latency times its issue rate
constexpr int kChainsYmm = 12;  // AVX2 has 16 ymm registers: more would spill
constexpr int64_t kSteps = 4096;  // instructions per accumulator per iteration

// kChains · kSteps instructions per iteration: VDPBF16PS (kBf16) or VFMADD231PS. The FMA loop
// carries the BF16 target too (one function for both); it has no bf16 instruction, so it runs
// wherever AVX-512F does.
template <bool kBf16>
__attribute__((target("avx512f,avx512bf16"))) void run_chains(benchmark::State& state) {
  __m512i one = kBf16 ? _mm512_set1_epi16(0x3F80)  // bf16 1.0 pairs
                      : _mm512_castps_si512(_mm512_set1_ps(1.0f));
  benchmark::DoNotOptimize(one);
  const __m512bh one_bf16 = reinterpret_cast<__m512bh>(one);
  const __m512 one_f32 = _mm512_castsi512_ps(one);
  for (auto _ : state) {
    __m512 acc[kChains];
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
    for (int64_t k = 0; k < kSteps; ++k) {
#pragma GCC unroll 24
      for (int c = 0; c < kChains; ++c)
        acc[c] = kBf16 ? _mm512_dpbf16_ps(acc[c], one_bf16, one_bf16)
                       : _mm512_fmadd_ps(one_f32, one_f32, acc[c]);
    }
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) benchmark::DoNotOptimize(acc[c]);
  }
}

// kChainsYmm · kSteps VFMADD231PS on ymm registers per iteration.
__attribute__((target("avx2,fma"))) void run_chains_ymm(benchmark::State& state) {
  __m256 one = _mm256_set1_ps(1.0f);
  benchmark::DoNotOptimize(one);
  for (auto _ : state) {
    __m256 acc[kChainsYmm];
#pragma GCC unroll 12
    for (int c = 0; c < kChainsYmm; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
    for (int64_t k = 0; k < kSteps; ++k) {
#pragma GCC unroll 12
      for (int c = 0; c < kChainsYmm; ++c) acc[c] = _mm256_fmadd_ps(one, one, acc[c]);
    }
#pragma GCC unroll 12
    for (int c = 0; c < kChainsYmm; ++c) benchmark::DoNotOptimize(acc[c]);
  }
}

// The counters for `instructions` per iteration, `flops_per_instruction` each, against
// `target`'s nominal roof.
void report(benchmark::State& state, double instructions, double flops_per_instruction,
            const char* target) {
  set_flop_counters(
      state, static_cast<double>(state.iterations()) * instructions * flops_per_instruction,
      peak_flops_per_cycle(target) * benchmark::CPUInfo::Get().cycles_per_second);
}

}  // namespace

void avx512bf16_roof(benchmark::State& state) {
  run_chains<true>(state);
  report(state, kChains * kSteps, 2.0 * 32, "AVX512_BF16");
}

void avx3_roof(benchmark::State& state) {
  run_chains<false>(state);
  report(state, kChains * kSteps, 2.0 * 16, "AVX3");
}

void avx2_roof(benchmark::State& state) {
  run_chains_ymm(state);
  report(state, kChainsYmm * kSteps, 2.0 * 8, "AVX2");
}

}  // namespace dsv4cpu::bench
