// Per-call options shared by every operation, and the registry of variants as users see it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4cpu/export.hpp"

namespace dsv4cpu {

// Which implementation runs (spec README, "Implementations").
enum class Impl : uint8_t {
  best,       // the first variant of the op's list whose ISA the CPU (and OS) offers
  reference,  // the scalar fp32 oracle, always available
  optimized,  // the first available variant other than the reference (the reference if none)
};

struct Options {
  Impl impl = Impl::best;
  // Exact registry variant name ("ref", "hwy", "amx", ...); overrides `impl` when non-empty.
  // Naming a variant that this CPU cannot run throws ValueError.
  std::string variant;
  // bad-input.md §1.6: steps (e) and (f) of the check order.
  bool check_finite = true;
  // Most threads the parallel variants start; 0 = OpenMP's default. Never more than the
  // processors this process may run on. Results never depend on it.
  int num_threads = 0;
};

// A variant's role: the reference (the scalar oracle, last in every list) or an optimized one.
enum class Role : uint8_t { reference, optimized };

// The registry, as seen by users and tools: every op and its variants in order of preference.
struct VariantInfo {
  std::string name;  // "ref", "hwy", ...
  Role role = Role::reference;
  bool available = false;  // this CPU and OS can run it
  // Dispatch: a Highway variant runs on the best Highway target compiled in and supported (every
  // such target is a separate run for the tests); otherwise `isa` names the fixed ISA its code is
  // built for ("avx512bf16", "amx"), or is empty for portable code.
  bool highway = false;
  std::string isa;
  std::string target;  // what runs inside it now: the Highway target ("AVX3") or the ISA's name
};
struct OpInfo {
  std::string name;  // spec / fixture name of the op
  std::vector<VariantInfo> variants;
};
DSV4CPU_API std::vector<OpInfo> registered_ops();  // availability and targets as of this call
// The variant Options would pick for `op` (throws ValueError for an unknown op or variant): the
// selection of the call path itself.
DSV4CPU_API std::string selected_variant(std::string_view op, const Options& options = {});

}  // namespace dsv4cpu
