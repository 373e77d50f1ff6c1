// Threads of the library (one OpenMP team per call): how many a call uses and the loops that
// split work over them. Each worker sets the FP environment of numerics.md §9 for itself (the
// control word is per thread); work items are independent, so results never depend on the thread
// count or the schedule.
//
// Options::num_threads is an upper bound (0: OpenMP's default), capped at the processors of the
// machine; below a work threshold a call stays on the calling thread, since starting and joining
// the team costs more than the work it would share. The threshold is bytes touched (read plus
// written) per thread, measured on the reference machine (docs/benchmarks.md), and lives with the
// other thresholds in core/thresholds.hpp.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/thresholds.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail {

// Threads a call may use: min(num_threads or OpenMP's default, the processors), at least 1.
int max_threads(int num_threads);
// Threads for a call touching `bytes` (read + written): max_threads(num_threads), but no more than
// one per `min_bytes` (1 below it; min_bytes <= 0: every call that may split does).
int threads_for(int num_threads, int64_t bytes, int64_t min_bytes);
inline int threads_for(int num_threads, int64_t bytes) {
  return threads_for(num_threads, bytes, thresholds().min_bytes_per_thread);
}
// Test hook: caps max_threads at `processors` instead of the machine's processors (<= 0 restores
// the machine's), so that a run asking for 8 threads splits 8 ways on a smaller machine. Not
// thread-safe: call it before anything runs.
void set_processors_for_test(int processors);

// Calls f(i) for i in [0, n) on up to `threads` threads; f must not throw.
template <class F>
void parallel_for(int64_t n, int threads, const F& f) {
  const int nt = static_cast<int>(std::min<int64_t>(threads, n));
  if (nt <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    FpEnvGuard guard;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

// Splits [0, n) into min(threads, n) contiguous ranges and runs f(begin, end) on each.
template <class F>
void parallel_ranges(int64_t n, int threads, const F& f) {
  const int64_t parts = std::min<int64_t>(std::max(threads, 1), n);
  parallel_for(parts, threads, [&](int64_t i) { f(n * i / parts, n * (i + 1) / parts); });
}

// The first i in [0, n) where first(begin, end) finds something, or n: first(begin, end) returns
// the first such i in [begin, end), or end. Ranges are scanned in parallel; the earliest wins, so
// the answer is the serial scan's.
template <class F>
int64_t parallel_first(int64_t n, int threads, const F& first) {
  if (threads <= 1 || n <= 1) return first(int64_t{0}, n);
  int64_t found[64];
  const int64_t parts = std::min<int64_t>({threads, n, 64});
  parallel_for(parts, threads, [&](int64_t i) {
    const int64_t b = n * i / parts, e = n * (i + 1) / parts;
    const int64_t f = first(b, e);
    found[i] = f < e ? f : n;
  });
  return *std::min_element(found, found + parts);
}

}  // namespace dsv4cpu::detail
