// The variant machinery behind every op (oneDNN style): an ordered list of implementations per
// argument pack, reference last and always available, selected per call from Options. The lists
// themselves, the op listing and the call path live in api/registry.hpp and api/registry.cpp.
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

// ValueError for Options::variant naming no variant of `op`: "not offered for this op" when
// another op offers it, "unknown variant" when none does; `offered` lists the op's variants.
[[noreturn]] void throw_unknown_variant(const char* op, const std::string& variant,
                                        const std::string& offered);
// ValueError for Options::variant naming a variant of `op` this CPU or OS cannot run; `available`
// lists those it can.
[[noreturn]] void throw_unavailable_variant(const char* op, const std::string& variant,
                                            const std::string& available);

// The variant Options select (Options::variant by name, else by Impl); ValueError for an unknown
// variant or an unavailable one named explicitly. selected_variant() runs this very code.
template <class Args>
const Variant<Args>& select_variant(const char* op, const VariantList<Args>& list,
                                    const Options& o) {
  if (!o.variant.empty()) {
    for (const Variant<Args>& v : list)
      if (o.variant == v.name && available(v.dispatch)) return v;  // the whole name: no NUL cut
    // The error lists the offered or the runnable variants (built only here).
    std::string offered, runnable;
    bool named = false;
    for (const Variant<Args>& v : list) {
      named = named || o.variant == v.name;
      offered += (offered.empty() ? "" : ", ") + std::string(v.name);
      if (available(v.dispatch)) runnable += (runnable.empty() ? "" : ", ") + std::string(v.name);
    }
    if (!named) throw_unknown_variant(op, o.variant, offered);
    throw_unavailable_variant(op, o.variant, runnable);
  }
  if (o.impl == Impl::reference) return list.back();
  for (const Variant<Args>& v : list)
    if (available(v.dispatch)) return v;  // optimized and best coincide: the reference is last
  return list.back();
}

struct OpEntry;
// Every op in spec order with its list (defined with the lists, in api/registry.cpp); the lists
// are built on first use.
const std::vector<OpEntry>& registered_op_entries();

// One registered op: its name and its list, type-erased so that the listing, selected_variant
// and the test hook handle every argument pack alike.
struct OpEntry {
  const char* name;
  void* list;                  // VariantList<Args>*
  const std::type_info* args;  // typeid(Args)
  OpInfo (*info)(const OpEntry&);
  const char* (*select)(const OpEntry&, const Options&);
  // Test hook: a copy of the reference kernel under `name` with `dispatch`, before the reference.
  void (*add_copy_of_reference)(const OpEntry&, const char* name, const Dispatch& dispatch);
};

template <class Args>
OpEntry op_entry(const char* name, VariantList<Args>& list) {
  OpEntry e{name, &list, &typeid(Args), nullptr, nullptr, nullptr};
  e.info = [](const OpEntry& op) {
    OpInfo info{op.name, {}};
    for (const Variant<Args>& v : *static_cast<const VariantList<Args>*>(op.list))
      info.variants.push_back(describe(v.name, v.role, v.dispatch));
    return info;
  };
  e.select = [](const OpEntry& op, const Options& o) {
    return select_variant(op.name, *static_cast<const VariantList<Args>*>(op.list), o).name;
  };
  e.add_copy_of_reference = [](const OpEntry& op, const char* variant, const Dispatch& d) {
    auto& l = *static_cast<VariantList<Args>*>(op.list);
    l.insert(l.end() - 1, Variant<Args>{variant, Role::optimized, d, l.back().run});
  };
  return e;
}

}  // namespace dsv4cpu::detail
