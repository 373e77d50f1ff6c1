// The call path of every op: the selection of a variant from Options, the variant lists of
// api/registry.cpp, found by argument pack, and run_op, which selects the variant, validates and
// runs it.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "core/registry.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail {

// ValueError for Options::variant naming no variant of `op`: "not offered for this op" when
// another op offers it, "unknown variant" when none does; `offered` lists the op's variants.
[[noreturn]] void throw_unknown_variant(const char* op, const std::string& variant,
                                        const std::string& offered);
// ValueError for Options::variant naming a variant of `op` this CPU or OS cannot run; `available`
// lists those it can.
[[noreturn]] void throw_unavailable_variant(const char* op, const std::string& variant,
                                            const std::string& available);

// The variant Options select (Options::variant by name, else by Impl: the first variant this CPU
// runs, the list being in this CPU's order); ValueError for an unknown variant or an unavailable
// one named explicitly. selected_variant() runs this very code.
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
  return first_runnable(this_cpu(), list);  // optimized and best coincide: the reference is last
}

// The variant of one line of a kernel family's table (DSV4CPU_COMPRESSOR_KERNELS of
// optimized/compressor_kernel.hpp, DSV4CPU_LOGITS_KERNELS of optimized/indexer_logits.hpp,
// DSV4CPU_ATTENTION_KERNELS of optimized/attention_kernel.hpp), with a trailing comma: the lists of
// api/registry.cpp expand each table through these. Inside namespace dsv4cpu::detail, with the
// family's header included.
#define DSV4CPU_COMPRESS_VARIANT(name, highway, isa)                                  \
  Variant<CompressNormRopeStoreArgs>{#name, Role::optimized, {highway, Isa::isa}, \
                                     opt::compress_with<&opt::name##_compressor_kernel>},
#define DSV4CPU_LOGITS_VARIANT(name, highway, isa)                             \
  Variant<Fp8PagedMqaLogitsArgs>{#name, Role::optimized, {highway, Isa::isa}, \
                                 opt::logits_with<&opt::name##_logits_kernel>},
#define DSV4CPU_INDEXER_TOPK_VARIANT(name, highway, isa)                \
  Variant<IndexerTopkArgs>{#name, Role::optimized, {highway, Isa::isa}, \
                           opt::indexer_topk_with<&opt::name##_logits_kernel>},
#define DSV4CPU_ATTENTION_VARIANT(name, isa)                                \
  Variant<SparseMlaAttentionArgs>{#name, Role::optimized, {false, Isa::isa}, \
                                  opt::attention_with<&opt::name##_attention_kernel>},

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
  // Test hook: a copy of the reference kernel under `name` with `dispatch`, placed in this CPU's
  // order (after the variants of its rank, before the reference).
  void (*add_copy_of_reference)(const OpEntry&, const char* name, const Dispatch& dispatch);
};

// Puts `list` in this CPU's order (order_for; twice for a shared list changes nothing).
template <class Args>
OpEntry op_entry(const char* name, VariantList<Args>& list) {
  order_for(this_cpu(), list);
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
    order_for(this_cpu(), l);
  };
  return e;
}

// The list of the ops taking `Args` (ops sharing an argument pack share their list).
template <class Args>
const VariantList<Args>& variants() {
  static const VariantList<Args>* const list = [] {
    for (const OpEntry& e : registered_op_entries())
      if (*e.args == typeid(Args)) return static_cast<const VariantList<Args>*>(e.list);
    throw std::logic_error(std::string("no variant list in api/registry.cpp for ") +
                           typeid(Args).name());
  }();
  return *list;
}

// Runs `validate` then the selected variant with the FP environment of numerics.md §9 (ops on
// indices only: the caller's).
template <class Args, class Validate>
void run_op(const char* op, Args& args, const Options& o, Validate&& validate) {
  struct CallerFpEnv {};
  const std::conditional_t<IndicesOnly<Args>::value, CallerFpEnv, FpEnvGuard> guard;
  (void)guard;
  const Variant<Args>& v = select_variant(op, variants<Args>(), o);
  validate(args, o);
  v.run(args, RunContext{o.check_finite, o.num_threads});
}

// run_op with the op's own validate(Args&, const Options&), defined before its entry point in
// api/<op>.cpp and found by argument-dependent lookup.
template <class Args>
void run(const char* op, Args& args, const Options& o) {
  run_op(op, args, o, [](Args& a, const Options& opts) { validate(a, opts); });
}

// The entry of the op named `op`, or null.
const OpEntry* find_op_entry(std::string_view op);

// Test hook: registers `variant` in the list of `op` (placed in this CPU's order, before the
// reference), as a line of api/registry.cpp would; false for an unknown op or one whose argument
// pack is not Args. Not thread-safe: call it before anything runs.
template <class Args>
bool add_variant_for_test(const std::string& op, const Variant<Args>& variant) {
  const OpEntry* e = find_op_entry(op);
  if (e == nullptr || *e->args != typeid(Args)) return false;
  auto& l = *static_cast<VariantList<Args>*>(e->list);
  l.insert(l.end() - 1, variant);
  order_for(this_cpu(), l);
  return true;
}

// Test hook: registers a copy of `op`'s reference kernel as an optimized variant `name` (placed
// in this CPU's order, before the reference) with `dispatch`, in the list `op` shares with the
// ops of its argument pack; false for an unknown op. Not thread-safe: call it before anything runs.
bool add_variant_for_test(const std::string& op, const char* name, const Dispatch& dispatch);

}  // namespace dsv4cpu::detail
