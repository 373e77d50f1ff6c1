// The variant machinery behind every op: an ordered list of implementations per op, reference last
// and always available (oneDNN-style), selected per call from Options.
#pragma once
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/options.hpp"

namespace dsv4cpu::detail {

struct RunContext {
  bool check_finite = true;
  int num_threads = 0;  // 0 = OpenMP default
};

template <class Args>
struct Variant {
  const char* name;                             // "ref", "hwy", "amx", ...
  bool (*available)();                          // nullptr: always available
  std::string (*target)();                      // what runs inside (Highway target); may be nullptr
  void (*run)(const Args&, const RunContext&);  // arguments already validated
};

template <class Args>
using VariantList = std::vector<Variant<Args>>;

[[noreturn]] void throw_unknown_variant(const char* op, std::string_view variant,
                                        const std::string& known);
[[noreturn]] void throw_unavailable_variant(const char* op, std::string_view variant);

template <class Args>
bool variant_available(const Variant<Args>& v) {
  return v.available == nullptr || v.available();
}

template <class Args>
const Variant<Args>& select_variant(const char* op, const VariantList<Args>& list,
                                    const Options& o) {
  if (!o.variant.empty()) {
    std::string known;
    for (const auto& v : list) {
      if (o.variant == v.name) {
        if (!variant_available(v)) throw_unavailable_variant(op, o.variant);
        return v;
      }
      known += known.empty() ? "" : ", ";
      known += v.name;
    }
    throw_unknown_variant(op, o.variant, known);
  }
  if (o.impl == Impl::reference) return list.back();
  for (const auto& v : list)
    if (variant_available(v)) return v;  // optimized and best coincide: ref is last
  return list.back();
}

template <class Args>
OpInfo make_op_info(const char* op, const VariantList<Args>& list) {
  OpInfo info{op, {}};
  for (const auto& v : list)
    info.variants.push_back(
        {v.name, variant_available(v), v.target && variant_available(v) ? v.target() : ""});
  return info;
}

// Runs `validate` then the selected variant with the FP environment of numerics.md §9.
template <class Args, class Validate>
void run_op(const char* op, const VariantList<Args>& list, Args& args, const Options& o,
            Validate&& validate) {
  FpEnvGuard guard;
  const Variant<Args>& v = select_variant(op, list, o);
  validate(args, o);
  v.run(args, RunContext{o.check_finite, o.num_threads});
}

// Each area appends its ops (in spec order) to the public registry.
void list_compressor_ops(std::vector<OpInfo>& out);
void list_indexer_ops(std::vector<OpInfo>& out);
void list_metadata_ops(std::vector<OpInfo>& out);

}  // namespace dsv4cpu::detail
