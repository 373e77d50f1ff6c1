#include "core/threads.hpp"

#include <omp.h>

#include <algorithm>

namespace dsv4cpu::detail {

int hardware_threads() noexcept { return std::max(1, omp_get_num_procs()); }

int thread_cap(int requested) noexcept {
  return std::min(requested > 0 ? requested : omp_get_max_threads(), hardware_threads());
}

}  // namespace dsv4cpu::detail
