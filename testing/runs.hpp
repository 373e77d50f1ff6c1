// The run enumerator: what the unit tests, the property tests, the benchmarks and
// dsv4cpu-verify --impl all call, derived from the registry alone (the public registered_ops(): it
// links with dsv4cpu_internal or with the installed library). A Highway variant is one run
// per Highway target compiled into the library and supported by this CPU (dispatch forced to it
// with hwy::SetSupportedTargetsForTest while the run executes); a fixed-ISA variant is one run
// when core/cpu finds its ISA, and otherwise is listed as absent; the others are one run. Each of
// these is repeated for every thread count asked for.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dsv4cpu/options.hpp"

namespace dsv4cpu::testing {

// One call of one variant of an op.
struct Run {
  std::string op;
  VariantInfo variant;      // as registered_ops() lists it
  std::string target;       // the Highway target forced for the run, else the variant's target
  int64_t target_bits = 0;  // that Highway target's bit; 0: dispatch as usual
  int threads = 0;          // Options::num_threads

  Options options() const;  // the variant by name, the thread count
  // "ref", "hwy:AVX2", "avx512bf16:AVX512_BF16"; " 2t" appended when threads > 0.
  std::string label() const;
  // The run in test names: <op>/<variant>/<target>/<threads>, e.g.
  // "save_partial_states/hwy/AVX2/2" (run_path).
  std::string path() const;
};
// <op>/<variant>/<target>/<threads>: target "baseline" for a variant compiled for the build's
// baseline ISA, threads "auto" for 0 (OpenMP's default) and the counts joined by "+" for several.
std::string run_path(const std::string& op, const std::string& variant, const std::string& target,
                     const std::vector<int>& threads);

// Which runs a consumer wants.
struct Plan {
  bool reference = true;           // include the reference variant
  std::optional<std::string> isa;  // unset: every variant; "": those without a fixed ISA; else
                                   // the variants of that ISA only
  bool every_target = true;        // Highway variants once per target; false: the dispatched one
  std::vector<int> threads = {0};
};
// The variants of one fixed ISA (VariantInfo::isa), with these thread counts.
inline Plan isa_plan(const std::string& isa, std::vector<int> threads = {0}) {
  Plan p;
  p.isa = isa;
  p.threads = std::move(threads);
  return p;
}

struct RunList {
  std::vector<Run> runs;
  std::vector<VariantInfo> absent;  // selected fixed-ISA variants this CPU or OS cannot run
};

// The runs of `op` (std::invalid_argument for an unknown op), in registry order, threads inner.
RunList runs(const std::string& op, const Plan& plan = {});
// Every op name in registry order.
std::vector<std::string> op_names();
// The fixed ISAs among the variants of `op` ("avx512bf16", "amx"), in registry order.
std::vector<std::string> fixed_isas(const std::string& op);

// Forces dispatch to the run's Highway target for its lifetime (nothing for other runs), and
// restores the dispatch in force before.
class ScopedTarget {
 public:
  explicit ScopedTarget(const Run& run);
  ~ScopedTarget();
  ScopedTarget(const ScopedTarget&) = delete;
  ScopedTarget& operator=(const ScopedTarget&) = delete;

 private:
  int64_t saved_;
};

// Calls body(run) for every run, each under its ScopedTarget.
template <class Body>
void for_each(const RunList& list, const Body& body) {
  for (const Run& run : list.runs) {
    const ScopedTarget target(run);
    body(run);
  }
}

// ---- one test per run ----

// The runs one registered test stands for (testing/gtest.hpp): one variant on one target, with
// one thread count or every thread count of the plan, of each op the test declares.
struct RunSelection {
  std::string variant, target;   // target "absent": an absent fixed-ISA variant
  std::optional<int> threads;    // unset: every thread count
  std::vector<std::string> ops;  // the ops the test declares
};

// While one is in force, runs() yields only the runs the selection matches (and throws
// std::logic_error for an op the test does not declare), and counts the runs entered.
class ScopedSelection {
 public:
  explicit ScopedSelection(RunSelection selection);
  ~ScopedSelection();
  ScopedSelection(const ScopedSelection&) = delete;
  ScopedSelection& operator=(const ScopedSelection&) = delete;
  int64_t entered() const;  // ScopedTargets constructed for a matching run so far
};

// The tests to register for `ops` under `plan`, in registry order: one per run
// (`per_thread_count`) or one per variant and target with the plan's thread counts inside, each
// covering that run of every declared op that has it (path <label or the ops joined by "+">/...);
// each absent fixed-ISA variant gives one, <ops>/<variant>/absent, carrying the variant.
struct TestRun {
  std::string path;  // run_path, or <ops>/<variant>/absent
  RunSelection selection;
  std::optional<VariantInfo> absent;
};
std::vector<TestRun> test_runs(const std::vector<std::string>& ops, const Plan& plan,
                               bool per_thread_count, const std::string& label = "");

}  // namespace dsv4cpu::testing
