// OpenMP loop shared by the optimized kernels. Each worker sets the FP environment of
// numerics.md §9 for itself (the control word is per thread); work items are independent, so the
// results never depend on the thread count or the schedule.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/registry.hpp"
#include "core/threads.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail::opt {

inline int thread_count(const RunContext& ctx) { return thread_cap(ctx.num_threads); }

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

}  // namespace dsv4cpu::detail::opt
