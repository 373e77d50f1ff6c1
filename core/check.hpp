// The shape vocabulary of the validation (bad-input.md §1.4 (b), (c)): presence, dtype, rank,
// extents, layout and overlap of arrays; and how index arrays (I32 or I64) are read.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::detail {

// An expected-shape entry: an extent, or kAny.
inline constexpr int64_t kAny = -1;

enum class Layout : uint8_t {
  contiguous,        // C-contiguous
  unit_inner,        // innermost stride 1, other strides free but >= the packed row size
  rows_contiguous,   // innermost stride 1; dim 0 stride >= product of the other extents, the
                     // rest contiguous (paged caches, block tables, kv/score rows)
};

// Checks presence, dtype, rank, extents and layout in that order; `dtypes` lists the accepted
// dtypes. The message's expectation is built from them, e.g. "I32 or I64 [8], contiguous", then
// `form` when given (how such an array is laid out or passed).
void check_array(const char* op, const char* name, const TensorView& v,
                 std::initializer_list<DType> dtypes, std::initializer_list<int64_t> shape,
                 Layout layout, const char* form = nullptr);
// Index arrays (I32 or I64).
inline void check_index_array(const char* op, const char* name, const TensorView& v,
                              std::initializer_list<int64_t> shape,
                              Layout layout = Layout::contiguous) {
  check_array(op, name, v, {DType::I32, DType::I64}, shape, layout);
}
// ShapeError when an output's bytes overlap an input's.
void check_no_overlap(const char* op, const char* out_name, const TensorView& out,
                      const char* in_name, const TensorView& in);
// ShapeError when two outputs overlap (named at the second).
void check_outputs_disjoint(const char* op, const char* a_name, const TensorView& a,
                            const char* b_name, const TensorView& b);

// Reads an I32 or I64 view as int64 through its strides (rank <= 2).
class IndexReader {
 public:
  IndexReader() = default;
  explicit IndexReader(const TensorView& v)
      : data_(static_cast<const char*>(v.data())),
        wide_(v.dtype() == DType::I64),
        s0_(v.rank() > 0 ? v.stride(0) : 0),
        s1_(v.rank() > 1 ? v.stride(1) : 0) {}
  int64_t operator()(int64_t i) const noexcept { return load(i * s0_); }
  int64_t operator()(int64_t i, int64_t j) const noexcept { return load(i * s0_ + j * s1_); }

 private:
  int64_t load(int64_t e) const noexcept {
    if (wide_) return reinterpret_cast<const int64_t*>(data_)[e];
    return reinterpret_cast<const int32_t*>(data_)[e];
  }
  const char* data_ = nullptr;
  bool wide_ = false;
  int64_t s0_ = 0, s1_ = 0;
};

// Multi-index of element `flat` (row-major) of a C-contiguous view.
std::vector<int64_t> unflatten(const TensorView& v, int64_t flat);

// Calls f(p) with the typed data of an index array (const int32_t* or const int64_t*).
template <class F>
decltype(auto) with_data(const TensorView& v, F&& f) {
  if (v.dtype() == DType::I64) return f(v.ptr<const int64_t>());
  return f(v.ptr<const int32_t>());
}
// f(pa, pb) with the typed data of two index arrays.
template <class F>
decltype(auto) with_data(const TensorView& a, const TensorView& b, F&& f) {
  return with_data(
      a, [&](const auto* pa) { return with_data(b, [&](const auto* pb) { return f(pa, pb); }); });
}

}  // namespace dsv4cpu::detail
