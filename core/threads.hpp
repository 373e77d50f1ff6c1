// How many threads an op may start: Options::num_threads is an upper bound, never above the
// hardware concurrency (the parallel variants ask here and nowhere else).
#pragma once

namespace dsv4cpu::detail {

// The processors this process may run on (at least 1).
int hardware_threads() noexcept;

// `requested` threads (Options::num_threads; 0 or negative: OpenMP's default) capped at
// hardware_threads().
int thread_cap(int requested) noexcept;

}  // namespace dsv4cpu::detail
