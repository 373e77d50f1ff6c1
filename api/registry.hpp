// The call path of every op: the variant lists of api/registry.cpp, found by argument pack, and
// run_op, which selects the variant, validates and runs it.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "core/registry.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail {

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

// Test hook: registers a copy of `op`'s reference kernel as an optimized variant `name` (placed
// before the reference) with `dispatch`, in the list `op` shares with the ops of its argument pack;
// false for an unknown op. Not thread-safe: call it before anything runs.
bool add_variant_for_test(const std::string& op, const char* name, const Dispatch& dispatch);

}  // namespace dsv4cpu::detail
