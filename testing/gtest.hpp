// GoogleTest adapters of the testing library: every run of an op, the rule that a required ISA
// is never skipped, the error matchers of the bad-input tests, and the oracle's verdicts as
// assertion results. Every test binary including it lifts the thread thresholds of
// core/thresholds.hpp, so that runs with several threads split even the small calls of the tests.
#pragma once
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/cpu.hpp"
#include "core/parallel.hpp"
#include "dsv4cpu/errors.hpp"
#include "testing/isa.hpp"
#include "testing/oracle.hpp"
#include "testing/runs.hpp"

namespace dsv4cpu::testing {

// Set before main: a call with several threads splits whatever its size (the tests' thread-count
// checks then cover the parallel paths).
inline const bool kEveryCallSplits = [] {
  detail::Thresholds t = detail::thresholds();
  t.min_bytes_per_thread = t.min_copy_bytes_per_thread = 0;
  detail::g_thresholds = t;
  return true;
}();

// Calls body(name) with Highway's dispatch forced to each target the library offers here, then
// restores it: for the internal scans of core/, which are no registered op.
template <class Body>
void for_each_highway_target(const Body& body) {
  for (const detail::HighwayTarget& t : detail::highway_targets()) {
    hwy::SetSupportedTargetsForTest(t.bits);
    body(t.name);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Calls body(run) for every run of `op` (testing/runs.hpp), each with its Highway target forced.
// An absent fixed-ISA variant whose ISA this machine must offer (isa_required) fails the test.
template <class Body>
void for_each_run(const std::string& op, const Plan& plan, const Body& body) {
  const RunList list = runs(op, plan);
  const Absence a = absence(op, list);
  if (a.required) ADD_FAILURE() << a.message;
  for_each(list, body);
}
template <class Body>
void for_each_run(const std::string& op, const Body& body) {
  for_each_run(op, Plan{}, body);
}

// In a test of one ISA's variants (`list` = runs(op, {.isa = ...})): fails when an absent one's
// ISA is required here, else skips when one is absent.
#define DSV4CPU_SKIP_IF_ABSENT(op, list)                                                \
  do {                                                                                  \
    const ::dsv4cpu::testing::Absence absence_ = ::dsv4cpu::testing::absence(op, list); \
    if (absence_.required) FAIL() << absence_.message;                                  \
    if (absence_.absent) GTEST_SKIP() << absence_.message;                              \
  } while (0)

// A check of testing/oracle.hpp ("" when it holds) as an assertion result.
inline ::testing::AssertionResult holds(const std::string& violation) {
  if (violation.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << violation;
}

// Runs `call`, which must throw exactly E with message `what`.
template <class E>
::testing::AssertionResult throws_exactly(const std::function<void()>& call,
                                          const std::string& what) {
  try {
    call();
  } catch (const Error& e) {
    if (typeid(e) != typeid(E))
      return ::testing::AssertionFailure() << "threw " << e.kind() << ": " << e.what();
    if (what != e.what())
      return ::testing::AssertionFailure() << "message\n  " << e.what() << "\nexpected\n  " << what;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// The bytes of buffers, one after the other, for expect_error's snapshots.
template <class... T>
std::vector<uint8_t> bytes_of(const std::vector<T>&... v) {
  std::vector<uint8_t> out;
  (out.insert(out.end(), reinterpret_cast<const uint8_t*>(v.data()),
              reinterpret_cast<const uint8_t*>(v.data()) + v.size() * sizeof(T)),
   ...);
  return out;
}

// bad-input.md §1: calls call(options) for every run of `op`; each must throw an Error of class
// `kind` ("IndexError") with the same message and, when `snapshot` is given, leave the bytes it
// returns (the outputs and in-place buffers) unchanged. Returns the message.
inline std::string expect_error(const std::string& op, const char* kind,
                                const std::function<void(const Options&)>& call,
                                const std::function<std::vector<uint8_t>()>& snapshot = {},
                                const Plan& plan = {}) {
  std::string first;
  for_each_run(op, plan, [&](const Run& run) {
    const std::vector<uint8_t> before = snapshot ? snapshot() : std::vector<uint8_t>{};
    try {
      call(run.options());
      ADD_FAILURE() << run.label() << ": no exception, expected " << kind;
    } catch (const Error& e) {
      EXPECT_STREQ(e.kind(), kind) << run.label() << ": " << e.what();
      if (first.empty()) first = e.what();
      EXPECT_EQ(e.what(), first) << run.label();
    }
    if (snapshot) {
      EXPECT_EQ(snapshot(), before) << run.label() << ": a buffer changed";
    }
  });
  return first;
}

}  // namespace dsv4cpu::testing
