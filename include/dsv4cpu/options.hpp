// Per-call options shared by every operation.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  std::string_view variant = {};
  // bad-input.md §1.6: steps (e) and (f) of the check order.
  bool check_finite = true;
  // Threads for the parallel variants; 0 = OpenMP's default. Results never depend on it.
  int num_threads = 0;
};

// The registry, as seen by users: every op and its variants in order of preference (ref last).
struct VariantInfo {
  std::string name;    // "ref", "hwy", ...
  bool available;      // this CPU and OS can run it
  std::string target;  // what runs inside it now, e.g. the Highway target ("AVX3"); may be empty
};
struct OpInfo {
  std::string name;  // spec / fixture name of the op
  std::vector<VariantInfo> variants;
};
std::vector<OpInfo> registered_ops();  // availability and targets as of this call
// The variant Options would pick for `op` (throws ValueError for an unknown op or variant).
std::string selected_variant(std::string_view op, const Options& options = {});

}  // namespace dsv4cpu
