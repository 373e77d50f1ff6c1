// The variant machinery behind every op (oneDNN style): an ordered list of implementations per
// argument pack, reference last and always available, put in the order of preference of this CPU
// (order_for) and selected per call from Options. The lists
// themselves, their selection, the op listing and the call path live in api/registry.hpp and
// api/registry.cpp.
#pragma once
#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "core/cpu.hpp"
#include "dsv4cpu/options.hpp"

namespace dsv4cpu::detail {

// An argument pack whose op computes on indices only declares
//   static constexpr bool kIndicesOnly = true;
// its calls then run in the caller's FP environment: nothing they compute depends on it.
template <class Args, class = void>
struct IndicesOnly : std::false_type {};
template <class Args>
struct IndicesOnly<Args, std::void_t<decltype(Args::kIndicesOnly)>>
    : std::bool_constant<Args::kIndicesOnly> {};

struct RunContext {
  bool check_finite = true;
  int num_threads = 0;  // 0 = OpenMP default; capped at the processors (core/parallel.hpp)
};

// How a variant reaches its instructions.
struct Dispatch {
  bool highway = false;  // Highway dynamic dispatch: runs on the best compiled target of this CPU
  Isa isa = Isa::none;   // the fixed ISA its translation unit is built for (core/cpu.hpp)
};

template <class Args>
using Kernel = void (*)(const Args&, const RunContext&);

template <class Args>
struct Variant {
  const char* name;  // "ref", "hwy", "opt", "avx512bf16", "amx", ...
  Role role;
  Dispatch dispatch;
  Kernel<Args> run;  // arguments already validated
};

template <class Args>
using VariantList = std::vector<Variant<Args>>;

// The entries of a list line in api/registry.cpp.
template <class Args>
Variant<Args> reference(Kernel<Args> run) {
  return {"ref", Role::reference, {}, run};
}
template <class Args>
Variant<Args> highway(const char* name, Kernel<Args> run) {
  return {name, Role::optimized, {true, Isa::none}, run};
}
template <class Args>
Variant<Args> fixed_isa(const char* name, Isa isa, Kernel<Args> run) {
  return {name, Role::optimized, {false, isa}, run};
}
template <class Args>
Variant<Args> portable(const char* name, Kernel<Args> run) {
  return {name, Role::optimized, {false, Isa::none}, run};
}

// Whether a variant of dispatch `d` runs on `cpu`; available: on this CPU and OS.
inline bool runs_on(const CpuDescription& cpu, const Dispatch& d) { return isa_on(cpu, d.isa); }
inline bool available(const Dispatch& d) { return runs_on(this_cpu(), d); }

// The variant order on a CPU (docs/cpp-api.md, "Which variant runs"): the rank of a variant of
// `d`'s dispatch on a CPU of `vendor`, from a table measured per vendor (lower runs first; equal
// ranks keep the list's order). The reference is ranked by order_for, after every other variant.
int variant_rank(CpuVendor vendor, const Dispatch& d) noexcept;

// Puts `list` in the order of preference on `cpu`: by variant_rank, ties in the list's own order
// (api/registry.cpp, the fallback), the reference last.
template <class Args>
void order_for(const CpuDescription& cpu, VariantList<Args>& list) {
  const auto rank = [&cpu](const Variant<Args>& v) {
    return v.role == Role::reference ? INT_MAX : variant_rank(cpu.vendor, v.dispatch);
  };
  std::stable_sort(list.begin(), list.end(), [&](const Variant<Args>& a, const Variant<Args>& b) {
    return rank(a) < rank(b);
  });
}

// The variant Impl::best runs on `cpu` from a list in its order: the first that runs there.
template <class Args>
const Variant<Args>& first_runnable(const CpuDescription& cpu, const VariantList<Args>& list) {
  for (const Variant<Args>& v : list)
    if (runs_on(cpu, v.dispatch)) return v;
  return list.back();
}

// What VariantInfo publishes for a variant: availability, the ISA and the target running now.
VariantInfo describe(const char* name, Role role, const Dispatch& d);

}  // namespace dsv4cpu::detail
