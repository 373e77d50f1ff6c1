// The compute roof of the AMX unit, measured rather than taken from the nominal clock:
// TDPBF16PS (16·16·32 multiply-adds) on resident tiles, four accumulator tiles in turn, through
// the kernels' tile unit (optimized/amx_tiles.hpp). Its "peak_share" is this roof over the
// nominal one of the AMX runs' counter (1024 FLOP per cycle at Google Benchmark's clock), so an
// AMX run's share of the measured roof is its peak_share divided by this one. Built with AMX
// flags; bench_main.cpp registers it only where the library runs its amx variants (the CPU lists
// AMX and the OS granted the tile data).
#include <algorithm>
#include <cstdint>

#include "bench_util.hpp"
#include "optimized/amx_tiles.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kDots = 4096;  // products per iteration
constexpr double kFlopsPerDot = 2.0 * 16 * 16 * 32;

}  // namespace

void amx_roof(benchmark::State& state) {
  using namespace detail::opt;
  // The tile data is the process's since the library's ISA check (the amx runs are listed).
  alignas(64) uint16_t ones[kTileRows * 32];
  std::fill(ones, ones + kTileRows * 32, uint16_t{0x3F80});  // bf16 1.0
  amx_thread_begin();
  AmxTiles t;
  for (int i = 0; i < 2; ++i) {
    t.load_a(i, ones, kTileBytes);
    t.load_b(i, ones, kTileBytes);
  }
  for (auto _ : state) {
    for (int c = 0; c < 4; ++c) t.zero(c);
    for (int64_t k = 0; k < kDots; k += 4) {  // C tile 2i + j += A[i]·B[j]
      t.dot(0, 0, 0);
      t.dot(1, 0, 1);
      t.dot(2, 1, 0);
      t.dot(3, 1, 1);
    }
    alignas(64) float c[kTileRows * 16];
    t.store(0, c, kTileBytes);
    benchmark::DoNotOptimize(c);
  }
  amx_thread_end();
  set_flop_counters(state, static_cast<double>(state.iterations()) * kDots * kFlopsPerDot,
                    peak_flops_per_cycle("AMX_BF16") * benchmark::CPUInfo::Get().cycles_per_second);
}

}  // namespace dsv4cpu::bench
