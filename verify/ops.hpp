// The op adapters: one table entry per fixture op name (fixtures.md, docs/fixture-ops.md). An
// adapter reads the inputs and scalars of a Case, allocates its outputs with their comparison
// contracts, and calls the library once with the given Options.
#pragma once
#include <string>
#include <vector>

#include "dsv4cpu/options.hpp"
#include "verify/fixture.hpp"

namespace dsv4cpu::verify {

struct OpAdapter {
  const char* name;
  void (*run)(Case& c, const Options& options);
};

const std::vector<OpAdapter>& op_adapters();
const OpAdapter* find_op_adapter(const std::string& name);  // nullptr for an unknown op

}  // namespace dsv4cpu::verify
