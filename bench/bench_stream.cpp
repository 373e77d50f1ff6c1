// The rooflines the memory-bound ops are compared with (achieved bytes/s ÷ roofline bytes/s), each
// over 64 MiB buffers, on one thread (CPU time, like the single-thread op runs) and on two
// (`/threads:2/real_time`, each thread streaming its half, like the two-thread op runs).
// stream_copy also runs on buffers from 64 KiB to 4 MiB, where the two-thread runs show from which
// size a split pays for starting and joining the second thread (the work threshold of
// core/parallel.hpp):
//   stream_read   sums a buffer (bytes read);
//   stream_copy   std::memcpy of a buffer into another (bytes read + bytes written);
//   stream_write  std::memset of a buffer (bytes written).
// The C library's memcpy and memset pick their best instructions for this CPU (non-temporal
// stores for buffers this large), which is the bar an op's own copies and writes are held to.
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "bench_util.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kBytes = int64_t{64} << 20;
constexpr int64_t kSplitSizes[] = {int64_t{64} << 10, int64_t{256} << 10, int64_t{1} << 20,
                                   int64_t{4} << 20};

// Eight independent sums: the loop is bound by loads, not by an addition chain.
uint64_t sum(const uint64_t* p, size_t n) {
  uint64_t s[8] = {};
  for (size_t i = 0; i < n; i += 8)
    for (size_t j = 0; j < 8; ++j) s[j] += p[i + j];
  uint64_t total = 0;
  for (uint64_t x : s) total += x;
  return total;
}

// Runs f(begin, end) over [0, n) split in `threads` parts, one per thread.
template <class F>
void split(size_t n, int threads, const F& f) {
  if (threads == 1) return f(size_t{0}, n);
#pragma omp parallel num_threads(threads)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    const auto parts = static_cast<size_t>(omp_get_num_threads());
    f(n * t / parts / 8 * 8, n * (t + 1) / parts / 8 * 8);
  }
}

void stream_read(benchmark::State& state, int64_t bytes, int threads) {
  Buffer<uint64_t> buf(static_cast<size_t>(bytes) / sizeof(uint64_t));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  for (auto _ : state)
    split(buf.size(), threads,
          [&](size_t b, size_t e) { benchmark::DoNotOptimize(sum(buf.data() + b, e - b)); });
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel("traffic=read");
}

void stream_copy(benchmark::State& state, int64_t bytes, int threads) {
  Buffer<uint8_t> src(static_cast<size_t>(bytes)), dst(static_cast<size_t>(bytes));
  std::memset(src.data(), 1, src.size());
  for (auto _ : state) {
    split(src.size(), threads,
          [&](size_t b, size_t e) { std::memcpy(dst.data() + b, src.data() + b, e - b); });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  state.SetLabel("traffic=copy");
}

void stream_write(benchmark::State& state, int64_t bytes, int threads) {
  Buffer<uint8_t> dst(static_cast<size_t>(bytes));
  int value = 0;
  for (auto _ : state) {
    ++value;
    split(dst.size(), threads,
          [&](size_t b, size_t e) { std::memset(dst.data() + b, value, e - b); });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel("traffic=write");
}

using Roofline = void (*)(benchmark::State&, int64_t, int);

void register_roofline(const char* name, Roofline f, int64_t bytes) {
  const std::string base = name + ("/" + std::to_string(bytes));
  benchmark::RegisterBenchmark(base.c_str(), [f, bytes](benchmark::State& s) { f(s, bytes, 1); });
  benchmark::RegisterBenchmark((base + "/threads:2").c_str(), [f, bytes](benchmark::State& s) {
    f(s, bytes, 2);
  })->UseRealTime();
}

}  // namespace

void register_rooflines() {
  register_roofline("stream_read", &stream_read, kBytes);
  register_roofline("stream_copy", &stream_copy, kBytes);
  register_roofline("stream_write", &stream_write, kBytes);
  for (int64_t bytes : kSplitSizes) register_roofline("stream_copy", &stream_copy, bytes);
}

}  // namespace dsv4cpu::bench
