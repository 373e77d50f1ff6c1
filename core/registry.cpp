#include "registry.hpp"

#include "dsv4cpu/options.hpp"
#include "check.hpp"

namespace dsv4cpu {

namespace detail {

void throw_unknown_variant(const char* op, std::string_view variant, const std::string& known) {
  fail<ValueError>(op, "variant", {}, std::string(variant), "unknown variant",
                   "one of " + known);
}

void throw_unavailable_variant(const char* op, std::string_view variant) {
  fail<ValueError>(op, "variant", {}, std::string(variant),
                   "not available on this CPU or OS", "a variant listed as available");
}

}  // namespace detail

std::vector<OpInfo> registered_ops() {
  std::vector<OpInfo> out;
  detail::list_compressor_ops(out);
  detail::list_indexer_ops(out);
  detail::list_metadata_ops(out);
  return out;
}

std::string selected_variant(std::string_view op, const Options& o) {
  for (const OpInfo& info : registered_ops()) {
    if (info.name != op) continue;
    if (!o.variant.empty()) {
      for (const VariantInfo& v : info.variants)
        if (v.name == o.variant) {
          if (!v.available) detail::throw_unavailable_variant(info.name.c_str(), o.variant);
          return v.name;
        }
      detail::throw_unknown_variant(info.name.c_str(), o.variant, "a registered variant");
    }
    if (o.impl == Impl::reference) return info.variants.back().name;
    for (const VariantInfo& v : info.variants)
      if (v.available) return v.name;
    return info.variants.back().name;
  }
  detail::fail<ValueError>("registry", "op", {}, std::string(op), "unknown op",
                           "a registered op name");
}

}  // namespace dsv4cpu
