// Helpers shared by the unit tests.
#pragma once
#include <string>
#include <vector>

#include "dsv4cpu/options.hpp"

namespace dsv4cpu::test {

// Names of the variants of `op` that this machine can run, in registry order.
inline std::vector<std::string> variants_of(const std::string& op) {
  std::vector<std::string> out;
  for (const OpInfo& info : registered_ops())
    if (info.name == op)
      for (const VariantInfo& v : info.variants)
        if (v.available) out.push_back(v.name);
  return out;
}

inline Options with_variant(const std::string& name, int threads = 0) {
  Options o;
  o.variant = name;
  o.num_threads = threads;
  return o;
}

}  // namespace dsv4cpu::test
