// Helpers of the metadata builder tests: index arrays of either dtype, output buffers, the runs.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsv4cpu/metadata.hpp"
#include "dsv4cpu/tensor.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu::test {

using V64 = std::vector<int64_t>;
using V32 = std::vector<int32_t>;

// An index input held as I32 or I64.
class Idx {
 public:
  Idx() = default;
  Idx(const std::vector<int64_t>& values, std::vector<int64_t> shape, DType dtype = DType::I32)
      : shape_(std::move(shape)), dtype_(dtype) {
    if (dtype == DType::I32)
      v32_.assign(values.begin(), values.end());
    else
      v64_ = values;
  }
  TensorView view() const {
    const void* data = dtype_ == DType::I32 ? static_cast<const void*>(v32_.data())
                                            : static_cast<const void*>(v64_.data());
    return TensorView(data, dtype_, static_cast<int>(shape_.size()), shape_.data());
  }
  operator TensorView() const { return view(); }  // NOLINT: used as an argument

 private:
  std::vector<int64_t> shape_;
  DType dtype_ = DType::I32;
  std::vector<int32_t> v32_;
  std::vector<int64_t> v64_;
};

inline Idx vec(const std::vector<int64_t>& v, DType dtype = DType::I32) {
  return Idx(v, {static_cast<int64_t>(v.size())}, dtype);
}

// Ragged rows padded with `pad` (entries no formula may read) to a [rows, width] table.
inline Idx table(const std::vector<std::vector<int64_t>>& rows, int64_t width, int64_t pad,
                 DType dtype = DType::I32) {
  std::vector<int64_t> v;
  for (const auto& row : rows)
    for (int64_t c = 0; c < width; ++c)
      v.push_back(c < static_cast<int64_t>(row.size()) ? row[static_cast<size_t>(c)] : pad);
  return Idx(v, {static_cast<int64_t>(rows.size()), width}, dtype);
}

inline MutableTensorView out_view(std::vector<int64_t>& v, std::initializer_list<int64_t> shape) {
  return MutableTensorView(v.data(), DType::I64, shape);
}
inline MutableTensorView out_view(std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
  return MutableTensorView(v.data(), DType::I32, shape);
}

// The metadata tests run every variant with 1, 2 and 8 threads (at most the processors).
inline const testing::Plan kThreads{true, std::nullopt, true, {1, 2, 8}};

// testing::expect_error on those runs.
inline std::string expect_error(const std::string& op, const char* kind,
                                const std::function<void(const Options&)>& call) {
  return testing::expect_error(op, kind, call, {}, kThreads);
}

}  // namespace dsv4cpu::test
