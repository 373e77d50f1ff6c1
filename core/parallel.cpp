#include "core/parallel.hpp"

#include <atomic>

namespace dsv4cpu::detail {
namespace {
std::atomic<int> g_processors_override{0};
}  // namespace

int max_threads(int num_threads) {
  static const int machine = omp_get_num_procs();  // a system call: asked once
  const int override_processors = g_processors_override.load(std::memory_order_relaxed);
  const int processors = override_processors > 0 ? override_processors : machine;
  const int wanted = num_threads > 0 ? num_threads : omp_get_max_threads();
  return std::max(1, std::min(wanted, processors));
}

int threads_for(int num_threads, int64_t bytes, int64_t min_bytes) {
  if (min_bytes > 0 && bytes < 2 * min_bytes) return 1;  // without asking OpenMP
  const int cap = max_threads(num_threads);
  if (min_bytes <= 0) return cap;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(cap, bytes / min_bytes)));
}

void set_processors_for_test(int processors) {
  g_processors_override.store(processors, std::memory_order_relaxed);
}

}  // namespace dsv4cpu::detail
