#include "core/registry.hpp"

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

}  // namespace dsv4cpu::detail
