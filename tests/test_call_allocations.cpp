// A call that passes its checks allocates nothing on the heap: the checks are part of every call
// (bad-input.md), so a message, an index list or a scratch vector is built only once a check fails
// (core/check_index.hpp, ExpectedText). The ops of a decode step that move a few KiB (the
// benchmark suite's decode shapes, bench/bench_<area>.cpp) run once to warm the per-thread scratch
// their checks keep between calls, then once more on one thread with every global operator new
// counted, in the default selection (what an engine runs; the reference is written to be read).
// The compress ops keep theirs per calling thread too. Ops whose kernels keep per-call work
// buffers (the SWA insert's cache entries, logits, top-k, attention) are not listed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <set>
#include <string>

#include "bench_util.hpp"
#include "dsv4cpu/options.hpp"

namespace {

std::atomic<long> g_allocations{0};

void* counted(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void* counted_aligned(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace dsv4cpu {
namespace {

// The ops held to no allocation, and the shapes they are called at.
const std::set<std::string> kOps = {"save_partial_states", "map_local_to_global_slots",
                                    "compress_norm_rope_store", "compress_norm_rope_store_indexer",
                                    "inverse_gptj_rope_o_proj"};
bool small_shape(const std::string& shape) {  // "decode8", "C4/decode8", "decode8_h64", ...
  for (const char* d : {"decode1", "decode8"}) {
    const size_t at = shape.find(d);
    const size_t end = at + std::string(d).size();
    if (at != std::string::npos && (at == 0 || shape[at - 1] == '/') &&
        (end == shape.size() || shape[end] == '/' || shape[end] == '_'))
      return true;
  }
  return false;
}

// Allocations of one call of `run` with `options`, after a first call.
long allocations_of(const bench::Iteration& run, const Options& options) {
  run(options);
  const long before = g_allocations.load();
  run(options);
  return g_allocations.load() - before;
}

TEST(CallAllocations, TheCounterSeesTheLibrarysAllocations) {
  long before = g_allocations.load();
  // Longer than the small-string buffer: two allocations, kept (volatile) from being elided.
  std::string* volatile p = new std::string(64, 'x');
  delete p;
  EXPECT_EQ(g_allocations.load() - before, 2);
  // The shared library's own operator new calls land here too: its op listing builds vectors.
  before = g_allocations.load();
  EXPECT_FALSE(registered_ops().empty());
  EXPECT_GT(g_allocations.load() - before, 0);
}

TEST(CallAllocations, PassingDecodeCallsAllocateNothing) {
  bench::Cases cases;
  bench::compressor_cases(cases);
  bench::indexer_cases(cases);
  bench::attention_cases(cases);
  std::set<std::string> seen;
  for (const bench::Case& c : cases) {
    if (kOps.count(c.op) == 0 || !small_shape(c.shape)) continue;
    seen.insert(c.op);
    const bench::Prepared p = c.prepare();
    for (const bool checked : {true, false}) {
      Options o;
      o.num_threads = 1;
      o.check_finite = checked;
      EXPECT_EQ(allocations_of(p.run, o), 0)
          << c.op << " " << c.shape << (checked ? "" : ", unchecked");
    }
  }
  EXPECT_EQ(seen, kOps);  // every listed op has a decode shape in the suite
}

}  // namespace
}  // namespace dsv4cpu
