// Fixture files and the comparison contracts of the verifier, for the dsv4cpu package:
// safetensors I/O of dsv4cpu-fixture/1 files from and to torch tensors, the library's own results
// for a fixture, and the verdict of numerics.md §11 on results computed elsewhere. Fixture data is
// copied (unlike the op arguments of ops.cpp); F8_E4M3 tensors travel as uint8 where torch has no
// float8 dtype, their names listed beside them. The fixture metadata values read by the verifier's
// grammar (docs/conformance.md), so that both runners read a file alike.
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "python/csrc/binding.hpp"
#include "verify/fixture.hpp"
#include "verify/runner.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu::python {
namespace {

using TensorDict = c10::Dict<std::string, at::Tensor>;
using TextDict = c10::Dict<std::string, std::string>;

// Runs `f`, raising a dsv4cpu::Error (an unsupported dtype, the library's own) for Python.
template <class F>
auto translated(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    raise_for_python(e);
  }
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

verify::Tensor to_fixture_tensor(const at::Tensor& t, bool fp8, const std::string& name) {
  verify::Tensor out;
  out.dtype = dtype_of(t, fp8, "fixture", name);
  const at::Tensor c = t.contiguous();
  out.shape.assign(t.sizes().begin(), t.sizes().end());
  out.bytes = verify::Bytes(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  return out;
}

at::Tensor to_torch(const verify::Tensor& t) {
  at::Tensor out = at::empty(t.shape, at::TensorOptions().dtype(scalar_type_of(t.dtype)));
  if (t.bytes.size() > 0) std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
  return out;
}

// A fixture from its tensors (inputs and expected.*), metadata and the names of its fp8 tensors.
verify::SafetensorsFile fixture_of(const TensorDict& tensors, const TextDict& metadata,
                                   const std::vector<std::string>& fp8) {
  verify::SafetensorsFile file;
  for (const auto& entry : metadata) file.metadata[entry.key()] = entry.value();
  for (const auto& entry : tensors)
    file.tensors[entry.key()] =
        to_fixture_tensor(entry.value(), listed(fp8, entry.key()), entry.key());
  return file;
}

std::tuple<TensorDict, TextDict, std::vector<std::string>> load(const std::string& path) {
  const verify::SafetensorsFile file = verify::read_safetensors(path);
  TensorDict tensors;
  TextDict metadata;
  std::vector<std::string> fp8;
  for (const auto& [name, t] : file.tensors) {
    tensors.insert(name, to_torch(t));
    if (t.dtype == DType::F8_E4M3) fp8.push_back(name);
  }
  for (const auto& [key, value] : file.metadata) metadata.insert(key, value);
  return {tensors, metadata, fp8};
}

void save(const std::string& path, const TensorDict& tensors, const TextDict& metadata,
          const std::vector<std::string>& fp8) {
  translated([&] { verify::write_safetensors(path, fixture_of(tensors, metadata, fp8)); });
}

// A result is fp8 when its expected.* tensor is.
std::map<std::string, verify::Tensor> results_of(const TensorDict& results,
                                                 const std::vector<std::string>& fp8) {
  std::map<std::string, verify::Tensor> out;
  for (const auto& entry : results)
    out[entry.key()] = to_fixture_tensor(
        entry.value(), listed(fp8, "expected." + entry.key()) || listed(fp8, entry.key()),
        entry.key());
  return out;
}

std::tuple<bool, std::string> check(const TensorDict& tensors, const TextDict& metadata,
                                    const std::vector<std::string>& fp8,
                                    const TensorDict& results) {
  const testing::Verdict v = translated([&] {
    return verify::check_results(fixture_of(tensors, metadata, fp8), results_of(results, fp8));
  });
  return {v.pass, v.detail};
}

TensorDict run(const TensorDict& tensors, const TextDict& metadata,
               const std::vector<std::string>& fp8, const std::string& impl,
               const c10::optional<std::string>& variant) {
  return translated([&] {
    Options o;
    o.impl = parse_impl("_run", impl);
    if (variant) o.variant = *variant;
    TensorDict out;
    for (const auto& [name, t] : verify::library_results(fixture_of(tensors, metadata, fp8), o))
      out.insert(name, to_torch(t));
    return out;
  });
}

// Metadata values by the verifier's grammar (Case::integer, real, real32, boolean): a
// FixtureError naming the key and the text when it lies outside.
template <class T, T (verify::Case::*Read)(const std::string&, std::optional<T>)>
T scalar(const std::string& name, const std::string& text) {
  verify::SafetensorsFile file;
  file.metadata[name] = text;
  verify::Case c(file);
  return (c.*Read)(name, std::nullopt);
}
int64_t integer(const std::string& name, const std::string& text) {
  return scalar<int64_t, &verify::Case::integer>(name, text);
}
double real(const std::string& name, const std::string& text) {
  return scalar<double, &verify::Case::real>(name, text);
}
double real32(const std::string& name, const std::string& text) {
  return scalar<float, &verify::Case::real32>(name, text);
}
bool boolean(const std::string& name, const std::string& text) {
  return scalar<bool, &verify::Case::boolean>(name, text);
}

}  // namespace
}  // namespace dsv4cpu::python

TORCH_LIBRARY_FRAGMENT(_dsv4cpu, m) {
  using namespace dsv4cpu::python;
  m.def("_load(str path) -> (Dict(str, Tensor) tensors, Dict(str, str) metadata, str[] fp8)",
        &load);
  m.def("_save(str path, Dict(str, Tensor) tensors, Dict(str, str) metadata, str[] fp8) -> ()",
        &save);
  m.def("_check(Dict(str, Tensor) tensors, Dict(str, str) metadata, str[] fp8, "
        "Dict(str, Tensor) results) -> (bool passed, str detail)",
        &check);
  m.def("_run(Dict(str, Tensor) tensors, Dict(str, str) metadata, str[] fp8, str impl, "
        "str? variant) -> Dict(str, Tensor)",
        &run);
  m.def("_integer(str name, str text) -> int", &integer);
  m.def("_real(str name, str text) -> float", &real);
  m.def("_real32(str name, str text) -> float", &real32);
  m.def("_boolean(str name, str text) -> bool", &boolean);
}
