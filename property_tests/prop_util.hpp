// Helpers of the property tests: registering a property once per variant and target (the
// registry decides the runs, testing/runs.hpp), capturing the outcome of a call
// (success, or the exception's kind and message), and byte comparisons that report the first
// difference instead of printing whole buffers.
#pragma once
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"
#include "core/parallel.hpp"
#include "core/thresholds.hpp"
#include "testing/gtest.hpp"
#include "testing/runs.hpp"

namespace dsv4cpu::prop {

// Set before main: a run asking for up to 8 threads gets them even on a machine with fewer
// processors, so that every split a larger machine makes (e.g. 3 channel chunks of one token) is
// tested here too.
inline const bool kThreadsUpTo8 = (detail::set_processors_for_test(8), true);

// A property over the runs of one group of variants: it calls the op on every run of
// testing::runs(op, plan) and checks each.
using Property = std::function<void(const testing::Plan& plan)>;

// Registers `property` as the GoogleTest tests <suite>.<what>/<ops>/<variant>/<target>/<threads>,
// one per variant and target of the ops the property calls, with the plan's thread counts inside
// (testing::register_run_tests; checked with RapidCheck's case count, RC_PARAMS).
inline bool register_property(const char* suite, const std::string& what,
                              const testing::OpList& ops, const testing::Plan& plan,
                              const Property& property) {
  const std::string label = std::string(suite) + "." + what;
  return testing::register_run_tests(
      suite, what, __FILE__, __LINE__,
      [=] { EXPECT_TRUE(rc::check(label, [&] { property(plan); })); }, ops, plan, false);
}

// Registers `property` a second time, as <suite>.<what>AtLowestThresholds/<ops>/...: while a case
// runs, every threshold of core/thresholds.hpp is at its lowest (detail::lowest_thresholds()), so
// that the small generated cases take the paths of large calls (streamed stores, the sorted
// repeated-slot search, sampled top-k rows and a full candidate buffer, scans of one vector step
// per block, the insert's split with num_threads = 0).
inline bool register_gated_property(const char* suite, const std::string& what,
                                    const testing::OpList& ops, const testing::Plan& plan,
                                    const Property& property) {
  return register_property(suite, what + "AtLowestThresholds", ops, plan,
                           [property](const testing::Plan& p) {
                             const detail::ScopedThresholds lowest(detail::lowest_thresholds());
                             property(p);
                           });
}

// Success, or the exception a call threw.
struct Outcome {
  std::string kind;  // "" on success, else Error::kind()
  std::string message;
  bool operator==(const Outcome& o) const { return kind == o.kind && message == o.message; }
};
inline std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << (o.kind.empty() ? "success" : o.kind + ": " + o.message);
}

template <class F>
Outcome capture(const F& f) {
  try {
    f();
    return {};
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
}

// The reference variant, one thread: what every property compares with.
inline Options reference() {
  Options o;
  o.impl = Impl::reference;
  o.num_threads = 1;
  return o;
}

// Fails the property at the first byte where a and b differ.
inline void assert_same_bytes(const void* a, const void* b, size_t n, const std::string& what) {
  if (std::memcmp(a, b, n) == 0) return;
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  size_t i = 0;
  while (x[i] == y[i]) ++i;
  RC_FAIL(what + ": byte " + std::to_string(i) + " of " + std::to_string(n) + " differs (" +
          std::to_string(x[i]) + " vs " + std::to_string(y[i]) + ")");
}
template <class T>
void assert_same_bytes(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  RC_ASSERT(a.size() == b.size());
  assert_same_bytes(a.data(), b.data(), a.size() * sizeof(T), what);
}

// Fails the property at the first byte outside the writable mask where `after` differs from
// `before`.
inline void assert_untouched(const std::vector<uint8_t>& before, const void* after,
                             const std::vector<uint8_t>& writable, const std::string& what) {
  const auto* y = static_cast<const unsigned char*>(after);
  for (size_t i = 0; i < before.size(); ++i)
    if (!writable[i] && before[i] != y[i])
      RC_FAIL(what + ": byte " + std::to_string(i) + " changed but the op must not write it");
}

}  // namespace dsv4cpu::prop
