// The variant machinery behind every op (oneDNN style): an ordered list of implementations per
// argument pack, reference last and always available, selected per call from Options. The lists
// themselves, their selection, the op listing and the call path live in api/registry.hpp and
// api/registry.cpp.
#pragma once
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

inline bool available(const Dispatch& d) { return d.isa == Isa::none || isa_available(d.isa); }
// What VariantInfo publishes for a variant: availability, the ISA and the target running now.
VariantInfo describe(const char* name, Role role, const Dispatch& d);

}  // namespace dsv4cpu::detail
