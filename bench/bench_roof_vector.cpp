// The compute roofs of the vector units, measured like amx_roof: avx512bf16_roof (VDPBF16PS, the
// avx512bf16 variants' product, 32 multiply-adds) and avx3_roof (VFMADD231PS, the fp32 FMA of
// Highway's AVX3 targets, 16 multiply-adds), each on zmm registers in kChains independent
// accumulators started at 0, 1, ... (no two chains the same computation), the operands (bf16 1.0
// pairs, fp32 1.0) read through the optimizer's barrier: finite, normal values throughout.
// "peak_share" is the measured rate over the nominal roof of that target (peak_flops_per_cycle at
// Google Benchmark's clock). Only the two loops carry the ISA (target attributes: nothing else of
// this file, inline code included, is built for AVX-512); bench_main.cpp registers each where a
// run of its target is listed.
#include <immintrin.h>

#include <cstdint>

#include "bench_util.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int kChains = 24;  // more than either instruction's latency times its issue rate
constexpr int64_t kSteps = 4096;  // instructions per accumulator per iteration

__attribute__((target("avx512f,avx512bf16"))) void dpbf16_chains(benchmark::State& state) {
  __m512i ones = _mm512_set1_epi16(0x3F80);  // bf16 1.0
  benchmark::DoNotOptimize(ones);
  const __m512bh a = reinterpret_cast<__m512bh>(ones);
  for (auto _ : state) {
    __m512 acc[kChains];
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
    for (int64_t k = 0; k < kSteps; ++k) {
#pragma GCC unroll 24
      for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, a);
    }
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) benchmark::DoNotOptimize(acc[c]);
  }
}

__attribute__((target("avx512f"))) void fma_chains(benchmark::State& state) {
  __m512 one = _mm512_set1_ps(1.0f);
  benchmark::DoNotOptimize(one);
  for (auto _ : state) {
    __m512 acc[kChains];
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
    for (int64_t k = 0; k < kSteps; ++k) {
#pragma GCC unroll 24
      for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(one, one, acc[c]);
    }
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) benchmark::DoNotOptimize(acc[c]);
  }
}

// flops, the nominal roof peak_flops of `target` and peak_share, for `flops_per_instruction`.
void report(benchmark::State& state, double flops_per_instruction, const char* target) {
  const double flops =
      static_cast<double>(state.iterations()) * kChains * kSteps * flops_per_instruction;
  const double peak = peak_flops_per_cycle(target) * benchmark::CPUInfo::Get().cycles_per_second;
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["peak_flops"] = peak;
  state.counters["peak_share"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsRate);
}

}  // namespace

void avx512bf16_roof(benchmark::State& state) {
  dpbf16_chains(state);
  report(state, 2.0 * 32, "AVX512_BF16");
}

void avx3_roof(benchmark::State& state) {
  fma_chains(state);
  report(state, 2.0 * 16, "AVX3");
}

}  // namespace dsv4cpu::bench
