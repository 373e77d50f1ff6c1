// The compute roof of the AMX unit, measured rather than taken from the nominal clock:
// TDPBF16PS (16·16·32 multiply-adds) on resident tiles, four accumulator tiles in turn, through
// the kernels' tile unit (optimized/amx_tiles.hpp). Its "peak_share" is this roof over the nominal
// one of the AMX runs' counter (1024 FLOP per cycle at Google Benchmark's clock), so an AMX run's
// share of the measured roof is its peak_share divided by this one. The unit's rate
// moves from minute to minute on some machines (docs/benchmarks.md, "AMX"), so amx_unit_flops()
// also measures it beside each AMX run (bench_runs.cpp). Built with AMX flags; used only where the
// library runs its amx variants (the CPU lists AMX and the OS granted the tile data).
// amx_loaded_roof is the roof of the kernels' 2 × 2 blocks: the same products, each step's two A
// and two B tiles loaded first (amx_scores' order), the A tiles from the first-level or the
// second-level cache.
#include <algorithm>
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

// `steps` steps of four products, each step's two A and two B tiles loaded first, all tiles of
// bf16 1.0: the B tiles from 4 KiB, the A tiles in turn from `a_bytes` (16 KiB: the first-level
// cache; 256 KiB, as a block's K or Vp: the second-level cache).
void run_loaded_dots(int64_t steps, int64_t a_bytes) {
  using namespace detail::opt;
  constexpr int64_t kTileWords = kTileRows * 32, kWords = (256 << 10) / 2 + 4 * kTileWords;
  static const Buffer<uint16_t> ones = [] {
    Buffer<uint16_t> v(kWords);
    std::fill(v.data(), v.data() + kWords, uint16_t{0x3F80});
    return v;
  }();
  const uint16_t* b = ones.data();
  const uint16_t* a = b + 4 * kTileWords;
  const int64_t a_tiles = a_bytes / (kTileWords * 2);
  AmxTiles t;
  for (int c = 0; c < 4; ++c) t.zero(c);
  for (int64_t s = 0; s < steps; ++s) {  // C tile 2i + j += A[i]·B[j]
    for (int i = 0; i < 2; ++i) t.load_a(i, a + (2 * s + i) % a_tiles * kTileWords, kTileBytes);
    for (int j = 0; j < 2; ++j) {
      t.load_b(j, b + (2 * s + j) % 4 * kTileWords, kTileBytes);
      t.dot(j, 0, j);
      t.dot(2 + j, 1, j);
    }
  }
  alignas(64) float c[kTileRows * 16];
  t.store(0, c, kTileBytes);
  benchmark::DoNotOptimize(c);
}

}  // namespace

void amx_loaded_roof(benchmark::State& state) {
  detail::opt::amx_thread_begin();
  for (auto _ : state) run_loaded_dots(kDots / 4, state.range(0));
  detail::opt::amx_thread_end();
  set_flop_counters(state, static_cast<double>(state.iterations()) * kDots * kFlopsPerDot,
                    peak_flops_per_cycle("AMX_BF16") * benchmark::CPUInfo::Get().cycles_per_second);
}

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
