// stream_read/<bytes>: one thread summing a 64 MiB buffer, the read-bandwidth roofline that the
// memory-bound ops are compared with (achieved bytes/s ÷ stream_read bytes/s).
#include <cstdint>

#include "bench_util.hpp"

namespace dsv4cpu::bench {
namespace {

void stream_read(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer<uint64_t> buf(bytes / sizeof(uint64_t));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  for (auto _ : state) {
    // Eight independent sums: the loop is bound by loads, not by an addition chain.
    uint64_t s[8] = {};
    for (size_t i = 0; i < buf.size(); i += 8)
      for (size_t j = 0; j < 8; ++j) s[j] += buf[i + j];
    uint64_t total = 0;
    for (uint64_t x : s) total += x;
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
}  // namespace

void register_stream_read() {
  benchmark::RegisterBenchmark("stream_read", stream_read)
      ->Arg(int64_t{64} << 20);  // CPU time, like the single-thread op runs
}

}  // namespace dsv4cpu::bench
