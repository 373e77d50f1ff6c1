#include "core/registry.hpp"

#include "core/errors.hpp"

namespace dsv4cpu::detail {

VariantInfo describe(const char* name, Role role, const Dispatch& d) {
  VariantInfo v;
  v.name = name;
  v.role = role;
  v.available = available(d);
  v.highway = d.highway;
  v.isa = isa_name(d.isa);
  if (v.available) v.target = d.highway ? highway_target() : isa_target(d.isa);
  return v;
}

void throw_unknown_variant(const char* op, const std::string& variant, const std::string& known) {
  fail<ValueError>(op, "variant", {}, variant, "unknown variant", "one of " + known);
}

void throw_unavailable_variant(const char* op, const std::string& variant) {
  fail<ValueError>(op, "variant", {}, variant, "not available on this CPU or OS",
                   "a variant listed as available");
}

}  // namespace dsv4cpu::detail
