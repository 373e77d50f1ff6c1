// The compute roof of the AMX unit, measured rather than taken from the nominal clock:
// TDPBF16PS (16·16·32 multiply-adds) on resident tiles, four accumulator tiles in turn, through
// the kernels' tile unit (optimized/amx_tiles.hpp). Its "peak_share" is this roof over the nominal
// one of the AMX runs' counter (1024 FLOP per cycle at Google Benchmark's clock), so an AMX run's
// share of the measured roof is its peak_share divided by this one. The unit's rate moves from
// minute to minute on some machines (docs/benchmarks.md, "AMX"), so amx_unit_flops() also measures
// it beside each AMX run (bench_runs.cpp). Built with AMX flags; used only where the library runs
// its amx variants (the CPU lists AMX and the OS granted the tile data).
// amx_loaded_roof is the roof of the kernels' 2 × 2 blocks: the same products, each step's two A
// and two B tiles loaded first (amx_scores' order), the A tiles from the first-level or the
// second-level cache.
#include <algorithm>
#include <chrono>
#include <cstdint>

#include "bench_util.hpp"
#include "optimized/amx_tiles.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kDots = 4096;  // products per iteration
constexpr double kFlopsPerDot = 2.0 * 16 * 16 * 32;
constexpr int64_t kTileWords = detail::opt::kTileRows * 32;  // bf16 words of an A or B tile

// Tiles of bf16 1.0: four B tiles, then A tiles filling 256 KiB.
const uint16_t* ones() {
  constexpr int64_t kWords = 4 * kTileWords + (256 << 10) / 2;
  static const Buffer<uint16_t> v = [] {
    Buffer<uint16_t> b(kWords);
    std::fill(b.data(), b.data() + kWords, uint16_t{0x3F80});
    return b;
  }();
  return v.data();
}

// The four accumulator tiles stored, so that the products are not optimised away.
void keep(detail::opt::AmxTiles& t) {
  alignas(64) float c[detail::opt::kTileRows * 16];
  t.store(0, c, detail::opt::kTileBytes);
  benchmark::DoNotOptimize(c);
}

// `dots` products (a multiple of 4) into four accumulator tiles from A and B tiles of bf16 1.0,
// in the calling thread's tile configuration.
void run_dots(int64_t dots) {
  using namespace detail::opt;
  AmxTiles t;
  for (int i = 0; i < 2; ++i) {
    t.load_a(i, ones(), kTileBytes);
    t.load_b(i, ones(), kTileBytes);
  }
  for (int c = 0; c < 4; ++c) t.zero(c);
  for (int64_t k = 0; k < dots; k += 4) {  // C tile 2i + j += A[i]·B[j]
    t.dot(0, 0, 0);
    t.dot(1, 0, 1);
    t.dot(2, 1, 0);
    t.dot(3, 1, 1);
  }
  keep(t);
}

// `steps` steps of four products, each step's two A and two B tiles loaded first: the B tiles
// from 4 KiB, the A tiles in turn from `a_bytes` (16 KiB: the first-level cache; 256 KiB, as a
// block's K or Vp: the second-level cache).
void run_loaded_dots(int64_t steps, int64_t a_bytes) {
  using namespace detail::opt;
  const uint16_t* b = ones();
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
  keep(t);
}

// A compute roof: `run` (kDots products) an iteration, with the AMX counters.
template <class Run>
void time_products(benchmark::State& state, const Run& run) {
  // The tile data is the process's since the library's ISA check (the amx runs are listed).
  detail::opt::amx_thread_begin();
  for (auto _ : state) run();
  detail::opt::amx_thread_end();
  set_flop_counters(state, static_cast<double>(state.iterations()) * kDots * kFlopsPerDot,
                    peak_flops_per_cycle("AMX_BF16") * benchmark::CPUInfo::Get().cycles_per_second);
}

}  // namespace

void amx_roof(benchmark::State& state) {
  time_products(state, [] { run_dots(kDots); });
}

void amx_loaded_roof(benchmark::State& state) {
  const int64_t a_bytes = state.range(0);
  time_products(state, [a_bytes] { run_loaded_dots(kDots / 4, a_bytes); });
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
