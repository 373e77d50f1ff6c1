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

void throw_unknown_variant(const char* op, const std::string& variant,
                           const std::string& offered) {
  for (const OpEntry& e : registered_op_entries())
    for (const VariantInfo& v : e.info(e).variants)
      if (v.name == variant)
        fail<ValueError>(op, "variant", {}, variant,
                         "not offered for this op: offered are " + offered, "one of " + offered);
  fail<ValueError>(op, "variant", {}, variant, "unknown variant, offered by no op",
                   "one of " + offered);
}

void throw_unavailable_variant(const char* op, const std::string& variant,
                               const std::string& available) {
  fail<ValueError>(op, "variant", {}, variant, "not available on this CPU or OS",
                   "an available variant of this op: " + available);
}

}  // namespace dsv4cpu::detail
