// The compute roof of the AMX unit, measured rather than taken from the nominal clock:
// TDPBF16PS (16·16·32 multiply-adds) on resident tiles, four accumulator tiles in turn. Its
// "peak_share" is this roof over the nominal one of the AMX runs' counter (1024 FLOP per cycle
// at Google Benchmark's clock), so an AMX run's share of the measured roof is its peak_share
// divided by this one. Registered only where the library runs its amx variants (the CPU lists
// AMX and the OS granted the tile data); built with AMX flags.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "bench_util.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kDots = 4096;  // products per iteration
constexpr double kFlopsPerDot = 2.0 * 16 * 16 * 32;

void amx_roof(benchmark::State& state) {
  // Permission for the tile data (already granted to the process by the library's ISA check).
  syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
  struct {
    uint8_t palette_id = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  alignas(64) uint16_t ones[16 * 32];
  std::fill(ones, ones + 16 * 32, uint16_t{0x3F80});  // bf16 1.0
  _tile_loadconfig(&cfg);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (auto _ : state) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t i = 0; i < kDots; i += 4) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    alignas(64) float c[16 * 16];
    _tile_stored(0, c, 64);
    benchmark::DoNotOptimize(c);
  }
  _tile_release();
  const double flops = static_cast<double>(state.iterations()) * kDots * kFlopsPerDot;
  const double peak = peak_flops_per_cycle("AMX_BF16") * benchmark::CPUInfo::Get().cycles_per_second;
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["peak_flops"] = peak;
  state.counters["peak_share"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsRate);
}

}  // namespace

void register_amx_roofline() {
  const std::vector<BenchRun> runs = benchmark_runs();
  if (std::any_of(runs.begin(), runs.end(),
                  [](const BenchRun& b) { return b.run.target == "AMX_BF16"; }))
    benchmark::RegisterBenchmark("amx_roof", &amx_roof);
}

}  // namespace dsv4cpu::bench
