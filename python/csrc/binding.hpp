// What the translation units of the PyTorch extension share: the one conversion between torch
// tensors and dsv4cpu arrays, the one translation of dsv4cpu::Error for Python, and the native
// vLLM kernels' entry points.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::python {

// The dsv4cpu dtype of a CPU tensor: float32, bfloat16, float16, uint8, int32, int64 map to F32,
// BF16, F16, U8, I32, I64; float8_e4m3fn (where torch has it) to F8_E4M3, and so does uint8 when
// `fp8` (the argument holds e4m3fn codes). Anything else, and a tensor on another device, is a
// ShapeError naming `op` and `arg`.
DType dtype_of(const at::Tensor& t, bool fp8, std::string_view op, std::string_view arg);
// The torch dtype that holds a dsv4cpu dtype (F8_E4M3: float8_e4m3fn where torch has it, else
// uint8).
c10::ScalarType scalar_type_of(DType d);
// The view of a tensor argument, without a copy: data pointer (storage offset included), dtype,
// extents and strides as they are. An undefined tensor (None) gives the absent view. Mutable, as
// torch tensors are; an input is passed on as its TensorView. `op` and `arg` are copied only into
// an error.
MutableTensorView view_of(const at::Tensor& t, bool fp8, std::string_view op,
                          std::string_view arg);
// The dtype of the view of a defined tensor, after view_of's checks (device, dtype, rank).
DType view_dtype(const at::Tensor& t, bool fp8, std::string_view op, std::string_view arg);

// "best", "reference", "optimized" -> Impl; anything else is a ValueError naming `op` and "impl".
Impl parse_impl(const std::string& op, const std::string& text);

// Re-raises `e` as the exception torch turns into a Python one: c10::IndexError (IndexError) for
// dsv4cpu::IndexError, c10::ValueError (ValueError) for the others. The message is what()
// followed by one line "[dsv4cpu.<Kind>] <JSON of op, argument, index, value>" from which the
// dsv4cpu package rebuilds the typed exception.
[[noreturn]] void raise_for_python(const Error& e);
// The message raise_for_python gives `e`.
std::string python_message(const Error& e);

// Outputs allocated in C++ by the wrappers' rule (dsv4cpu._wrappers.allocate): the bytes of this
// machine's memory; whether `shape` of elements of `element_bytes` can be allocated (no negative
// extent, at most memory_bytes()); the output of `shape`, or, when it cannot be allocated, a
// placeholder (its out-of-range extents 0, or all of them) with `fits` false, so that the op
// reports what else is wrong, and raise_unallocatable reports the shape when nothing is.
int64_t memory_bytes();
bool allocatable(c10::IntArrayRef shape, int64_t element_bytes);
struct Allocated {
  at::Tensor tensor;
  bool fits;
};
Allocated allocate_output(c10::IntArrayRef shape, const at::TensorOptions& options);
[[noreturn]] void raise_unallocatable(const char* op, const char* name, c10::IntArrayRef shape);

// inverse_gptj_rope_o_proj with `out` (float32, o's shape, on o's device) allocated here and
// returned: nobody sees it before the call returns, so the op checks while it writes it
// (Options::fresh_outputs is set). The kernel of the overload .functional and of vLLM's
// inverse_gptj_rope_o_proj_cpu.
at::Tensor inverse_gptj_rope_o_proj_fresh(const at::Tensor& o, const at::Tensor& positions,
                                          const at::Tensor& cos_sin_cache, int64_t rope_dim,
                                          Options options);

// vLLM's operators served by C++ kernels (python/csrc/vllm.cpp), for the dsv4cpu.vllm plugin:
// their names (JSON list); serve one (registers the kernel on torch.ops._C.<name>; false for a
// name not served natively); drop every such registration; the calls served per name (JSON).
std::string vllm_natives_json();
bool vllm_serve(const std::string& name);
void vllm_unserve();
std::string vllm_counts_json();

}  // namespace dsv4cpu::python
