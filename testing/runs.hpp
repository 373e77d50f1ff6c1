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
};

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

// The groups of variants of `op` a property test registers one test for, given the runs it wants
// (`plan`): the variants without a fixed ISA ("EveryVariant", when the plan selects any) and each
// fixed ISA of the registry ("Amx", "Avx512bf16"), each with its own plan.
struct Group {
  std::string name;
  Plan plan;
};
std::vector<Group> groups(const std::string& op, const Plan& plan);

}  // namespace dsv4cpu::testing
