// libFuzzer target: the fixture reader (verify/fixture.hpp) without running any op: every
// scalar reader on every metadata key, the compare override, every tensor as input, in-place
// buffer and output, then the comparisons. Bad files raise the reader's own errors only.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "verify/fixture.hpp"
#include "verify/safetensors.hpp"

using namespace dsv4cpu;
using namespace dsv4cpu::verify;

namespace {

template <class F>
void tolerate(F&& f) {
  try {
    f();
  } catch (const FixtureError&) {
  } catch (const std::invalid_argument&) {  // parse_compare
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile file;
  try {
    file = parse_safetensors(data, size);
  } catch (const SafetensorsError&) {
    return 0;
  }
  Case c(file);
  Tolerance tol;
  tolerate([&] { tol = parse_compare(file.metadata.count("compare") ? file.metadata.at("compare")
                                                                     : std::string()); });
  for (const auto& entry : file.metadata) {
    const std::string& key = entry.first;
    tolerate([&] { c.integer(key); });
    tolerate([&] { c.real(key); });
    tolerate([&] { c.real32(key); });
    tolerate([&] { c.boolean(key); });
    tolerate([&] { c.text(key); });
  }
  for (const auto& entry : file.tensors) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    if (name.rfind("expected.", 0) == 0) {
      const std::string base = name.substr(9);
      if (file.tensors.count(base))
        tolerate([&] { c.inout(base); });
      else
        tolerate([&] { c.output(base, t.dtype, t.shape); });
    } else {
      tolerate([&] { c.input(name); });
    }
  }
  tolerate([&] { c.check(tol); });
  tolerate([&] { c.check_untouched(); });
  c.unused_metadata();
  return 0;
}
