// Per-call options shared by every operation, the contract every operation follows, and the
// registry of variants as users see it.
//
// The contract of every op (each op's comment adds its own Shapes / Writes / Allocates / Throws /
// Threads):
// - Arguments come in the spec's order: inputs as TensorView, outputs and in-place buffers as
//   MutableTensorView (tensor.hpp), scalars, then `const Options&`. Index arrays accept I32 or
//   I64 wherever the spec writes either. An optional array not given is an absent view
//   (TensorView() / MutableTensorView()).
// - Errors: every argument is validated before any output byte is written (bad-input.md §1.4
//   order); a failure throws a dsv4cpu::Error subclass (errors.hpp) and leaves every output and
//   in-place buffer unchanged. Options::variant naming a variant the op does not offer, or one
//   this CPU or OS cannot run, throws ValueError. std::bad_alloc may escape when scratch memory
//   cannot be allocated. A call whose work dimension is 0 is a valid no-op.
// - Aliasing: an output may not overlap any input or another output (ShapeError); an in-place
//   buffer may not overlap any input. Inputs may overlap each other.
// - Threads: concurrent calls from different threads are safe when their outputs and in-place
//   buffers are distinct (inputs may be shared). The reference variants run on the calling
//   thread. The optimized variants open OpenMP parallel regions of Options::num_threads threads
//   (0: omp_get_max_threads(), fewer when the call is too small to share) through the
//   `num_threads` clause: no call changes a global OpenMP setting (omp_set_num_threads is never
//   called). Called from inside an OpenMP parallel region, the op's region is nested, so it runs
//   on one thread unless the program enabled nested parallelism. Results never depend on the
//   thread count or the SIMD target (beyond the spec's bounds where it states one).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4cpu/export.hpp"

namespace dsv4cpu {

// Which implementation runs (spec README, "Implementations").
enum class Impl : uint8_t {
  best,       // the first variant, in this CPU's order (registered_ops()), that the CPU and OS run
  reference,  // the scalar fp32 oracle, always available
  optimized,  // the first available variant other than the reference (the reference if none)
};

struct Options {
  Impl impl = Impl::best;
  // Exact registry variant name ("ref", "hwy", "amx", ...), owned by the Options; overrides
  // `impl` when non-empty. Naming a variant the op does not offer, or one this CPU cannot run,
  // throws ValueError.
  std::string variant;
  // bad-input.md §1.6: steps (e) and (f) of the check order.
  bool check_finite = true;
  // Most threads the optimized variants' OpenMP regions start (the `num_threads` clause: no global
  // OpenMP setting changes); 0 = omp_get_max_threads(). Never more than the processors this
  // process may run on. Results never depend on it.
  int num_threads = 0;
  // The caller allocated the call's output arrays for it and drops them when it throws (vLLM's
  // functional ops, the Python wrappers' own outputs): with check_finite, an op may then run steps
  // (e) and (f) while it writes them, so that its inputs are read once (docs/decisions.md,
  // "Checks in the writing pass"). A call that throws leaves such outputs with unspecified
  // values; in-place buffers (caches, state caches) are never written before the checks. The one
  // op that uses it: inverse_gptj_rope_o_proj. Results never depend on it.
  bool fresh_outputs = false;
};

// A variant's role: the reference (the scalar oracle, last in every list) or an optimized one.
enum class Role : uint8_t { reference, optimized };

// The registry, as seen by users and tools: every op and its variants in this CPU's order of
// preference, the reference last. The order comes from a table measured per CPU vendor
// (docs/cpp-api.md, "Which variant runs"; a CPU of another vendor keeps the registry's own order):
// on Intel, Highway before AVX-512-BF16; on AMD the reverse; AMX first on both.
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
