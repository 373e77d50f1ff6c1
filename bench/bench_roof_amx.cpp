// The compute roof of the AMX unit, measured rather than taken from the nominal clock:
// TDPBF16PS (16·16·32 multiply-adds) on resident tiles, four accumulator tiles in turn, through
// the kernels' tile unit (optimized/amx_tiles.hpp). Its "peak_share" is this roof over the
// nominal one of the AMX runs' counter (1024 FLOP per cycle at Google Benchmark's clock), so an
// AMX run's share of the measured roof is its peak_share divided by this one. The unit's rate
// moves from minute to minute on some machines (docs/benchmarks.md, "AMX"), so amx_unit_flops()
// also measures it beside each AMX run (bench_runs.cpp). Built with AMX flags; used only where the
// library runs its amx variants (the CPU lists AMX and the OS granted the tile data).
#include <array>
#include <chrono>
#include <cstdint>

#include "bench_util.hpp"
#include "optimized/amx_tiles.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kDots = 4096;  // products per iteration
constexpr double kFlopsPerDot = 2.0 * 16 * 16 * 32;

// `dots` products (a multiple of 4) into four accumulator tiles from A and B tiles of bf16 1.0,
// in the calling thread's tile configuration.
void run_dots(int64_t dots) {
  using namespace detail::opt;
  alignas(64) static const std::array<uint16_t, kTileRows * 32> ones = [] {
    std::array<uint16_t, kTileRows * 32> v;
    v.fill(0x3F80);  // bf16 1.0
    return v;
  }();
  AmxTiles t;
  for (int i = 0; i < 2; ++i) {
    t.load_a(i, ones.data(), kTileBytes);
    t.load_b(i, ones.data(), kTileBytes);
  }
  for (int c = 0; c < 4; ++c) t.zero(c);
  for (int64_t k = 0; k < dots; k += 4) {  // C tile 2i + j += A[i]·B[j]
    t.dot(0, 0, 0);
    t.dot(1, 0, 1);
    t.dot(2, 1, 0);
    t.dot(3, 1, 1);
  }
  alignas(64) float c[kTileRows * 16];
  t.store(0, c, kTileBytes);
  benchmark::DoNotOptimize(c);
}

}  // namespace

void amx_roof(benchmark::State& state) {
  // The tile data is the process's since the library's ISA check (the amx runs are listed).
  detail::opt::amx_thread_begin();
  for (auto _ : state) run_dots(kDots);
  detail::opt::amx_thread_end();
  set_flop_counters(state, static_cast<double>(state.iterations()) * kDots * kFlopsPerDot,
                    peak_flops_per_cycle("AMX_BF16") * benchmark::CPUInfo::Get().cycles_per_second);
}

double amx_unit_flops() {
  detail::opt::amx_thread_begin();
  run_dots(256);  // the unit awake
  const auto t0 = std::chrono::steady_clock::now();
  run_dots(kDots);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  detail::opt::amx_thread_end();
  return kDots * kFlopsPerDot / s;
}

}  // namespace dsv4cpu::bench
