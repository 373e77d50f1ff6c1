#include "core/fallback.hpp"

#include <atomic>

namespace dsv4cpu::detail {
namespace {
constexpr int kSites = static_cast<int>(Fallback::kSites);
std::atomic<uint64_t> counts[kSites];
}  // namespace

void count_fallback(Fallback site) {
  counts[static_cast<int>(site)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t fallback_count(Fallback site) {
  return counts[static_cast<int>(site)].load(std::memory_order_relaxed);
}

uint64_t fallback_count() {
  uint64_t n = 0;
  for (int s = 0; s < kSites; ++s) n += fallback_count(static_cast<Fallback>(s));
  return n;
}

}  // namespace dsv4cpu::detail
