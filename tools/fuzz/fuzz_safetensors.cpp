// libFuzzer target: the safetensors parser (verify/safetensors.hpp). Any input either parses
// or raises SafetensorsError; a parsed file serialises and parses back to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "verify/safetensors.hpp"

using namespace dsv4cpu::verify;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile file;
  try {
    file = parse_safetensors(data, size);
  } catch (const SafetensorsError&) {
    return 0;
  }
  const std::vector<uint8_t> image = serialize_safetensors(file);
  const SafetensorsFile again = parse_safetensors(image.data(), image.size());
  if (again.metadata != file.metadata || again.tensors.size() != file.tensors.size()) std::abort();
  for (const auto& [name, t] : file.tensors) {
    const Tensor& u = again.tensors.at(name);
    if (u.dtype != t.dtype || u.shape != t.shape || !(u.bytes == t.bytes)) std::abort();
  }
  return 0;
}
