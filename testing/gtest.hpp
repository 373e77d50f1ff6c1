// GoogleTest adapters of the testing library: every run of an op, one registered test per run
// (DSV4CPU_RUN_TEST), the rule that a required ISA is never skipped, the error matchers of the
// bad-input tests, and the oracle's verdicts as assertion results. Every test binary including it
// lifts the thread thresholds of core/thresholds.hpp, so that runs with several threads split even
// the small calls of the tests.
#pragma once
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <functional>
#include <initializer_list>
#include <set>
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

// The ops a test declares: one name, a list of names, or every op (OpList::every(), named
// "every_op" in test names).
struct OpList {
  std::vector<std::string> names;
  std::string label;  // "": the names joined by "+"
  OpList(const char* op) : names{op} {}                           // NOLINT
  OpList(std::string op) : names{std::move(op)} {}                // NOLINT
  OpList(std::initializer_list<std::string> ops) : names(ops) {}  // NOLINT
  static OpList every() {
    OpList all{};
    all.names = op_names();
    all.label = "every_op";
    return all;
  }
};

// One registered test of register_run_tests: `body` with the test run's selection in force.
class RunTest : public ::testing::Test {
 public:
  RunTest(TestRun run, std::function<void()> body) : run_(std::move(run)), body_(std::move(body)) {}
  void TestBody() override {
    if (run_.absent) {
      const Absence a = absence(run_.selection.ops.front(), RunList{{}, {*run_.absent}});
      if (a.required) FAIL() << a.message;
      GTEST_SKIP() << a.message;
    }
    const ScopedSelection selection(run_.selection);
    body_();
    if (!HasFatalFailure() && !IsSkipped() && selection.entered() == 0)
      ADD_FAILURE() << "the test entered no run " << run_.path
                    << ": its loops over runs do not match the ops and plan it declares";
  }

 private:
  TestRun run_;
  std::function<void()> body_;
};

// Registers the GoogleTest tests <suite>.<name>/<op>/<variant>/<target>/<threads>, one per test
// run of `ops` under `plan` (testing::test_runs): each calls `body`, whose for_each_run,
// expect_error and runs() then visit that run only (`ctest -R 'hwy/AVX2'` selects the AVX2 runs).
// An absent fixed-ISA variant gives one test per suite, <suite>.AbsentVariant/<ops>/<variant>/absent,
// which skips, or fails where its ISA is required.
inline bool register_run_tests(const char* suite, const std::string& name, const char* file,
                               int line, const std::function<void()>& body, const OpList& ops,
                               const Plan& plan = {}, bool per_thread_count = true) {
  static std::set<std::string> absent_registered;  // one skip per suite and absent variant
  for (const TestRun& t : test_runs(ops.names, plan, per_thread_count, ops.label)) {
    if (t.absent && !absent_registered.insert(std::string(suite) + "." + t.path).second) continue;
    const std::string full = (t.absent ? "AbsentVariant" : name) + "/" + t.path;
    ::testing::RegisterTest(suite, full.c_str(), nullptr, nullptr, file, line,
                            [=]() -> ::testing::Test* { return new RunTest(t, body); });
  }
  return true;
}

// A test of the runs of an op, registered once per run: DSV4CPU_RUN_TEST(Suite, Name, ops[, plan])
// { body }, where the body loops with for_each_run or expect_error as a TEST would.
#define DSV4CPU_RUN_TEST(Suite, Name, ...)                                                  \
  void Suite##_##Name##_Runs();                                                             \
  [[maybe_unused]] const bool Suite##_##Name##_Registered =                                 \
      ::dsv4cpu::testing::register_run_tests(#Suite, #Name, __FILE__, __LINE__,             \
                                             &Suite##_##Name##_Runs, __VA_ARGS__);          \
  void Suite##_##Name##_Runs()

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
