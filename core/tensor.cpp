#include "dsv4cpu/tensor.hpp"

#include <algorithm>

#include "dsv4cpu/errors.hpp"

namespace dsv4cpu {

const char* dtype_name(DType d) noexcept {
  switch (d) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::U8: return "U8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

size_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: return 2;
    case DType::F8_E4M3: case DType::U8: return 1;
    case DType::I64: return 8;
  }
  return 1;
}

bool is_index_dtype(DType d) noexcept { return d == DType::I32 || d == DType::I64; }

// ShapeError "dsv4cpu::TensorView: view: <what> (expected <expected>)".
static void bad_view(const std::string& what, const std::string& expected) {
  throw ShapeError("TensorView", "view", {}, what,
                   "view: " + what + " (expected " + expected + ")");
}

void TensorView::init(const void* data, DType dtype, int rank, const int64_t* shape,
                      const int64_t* strides) {
  if (rank < 0 || rank > kMaxRank)
    bad_view("rank " + std::to_string(rank), "0 <= rank <= 4");
  data_ = data;
  dtype_ = dtype;
  rank_ = rank;
  present_ = true;
  int64_t acc = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] < 0)
      bad_view("shape[" + std::to_string(d) + "] = " + std::to_string(shape[d]), "extents >= 0");
    shape_[static_cast<size_t>(d)] = shape[d];
    strides_[static_cast<size_t>(d)] = strides ? strides[d] : acc;
    if (strides_[static_cast<size_t>(d)] < 0)
      bad_view("strides[" + std::to_string(d) + "] = " + std::to_string(strides[d]),
               "strides >= 0");
    acc *= shape[d];
  }
  if (data_ == nullptr && numel() != 0)
    bad_view("null data for " + std::to_string(numel()) + " elements",
             "a data pointer, or an extent of 0");
}

TensorView::TensorView(const void* data, DType dtype, std::initializer_list<int64_t> shape) {
  init(data, dtype, static_cast<int>(shape.size()), shape.begin(), nullptr);
}
TensorView::TensorView(const void* data, DType dtype, int rank, const int64_t* shape) {
  init(data, dtype, rank, shape, nullptr);
}
TensorView::TensorView(const void* data, DType dtype, std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> strides) {
  if (shape.size() != strides.size())
    bad_view(std::to_string(shape.size()) + " extents and " + std::to_string(strides.size()) +
                 " strides",
             "one stride per extent");
  init(data, dtype, static_cast<int>(shape.size()), shape.begin(), strides.begin());
}
TensorView::TensorView(const void* data, DType dtype, int rank, const int64_t* shape,
                       const int64_t* strides) {
  init(data, dtype, rank, shape, strides);
}

int64_t TensorView::numel() const noexcept {
  if (!present_) return 0;
  int64_t n = 1;
  for (int d = 0; d < rank_; ++d) n *= shape_[static_cast<size_t>(d)];
  return n;
}

bool TensorView::contiguous() const noexcept {
  int64_t expect = 1;
  for (int d = rank_ - 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    if (shape_[i] > 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

uintptr_t TensorView::byte_lo() const noexcept { return reinterpret_cast<uintptr_t>(data_); }

uintptr_t TensorView::byte_hi() const noexcept {
  if (numel() == 0) return byte_lo();
  int64_t last = 0;
  for (int d = 0; d < rank_; ++d)
    last += (shape_[static_cast<size_t>(d)] - 1) * strides_[static_cast<size_t>(d)];
  return byte_lo() + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(dtype_size(dtype_)));
}

bool TensorView::overlaps(const TensorView& o) const noexcept {
  if (numel() == 0 || o.numel() == 0) return false;
  return byte_lo() < o.byte_hi() && o.byte_lo() < byte_hi();
}

int64_t TensorView::index_at(std::initializer_list<int64_t> idx) const noexcept {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx) off += i * strides_[static_cast<size_t>(d++)];
  if (dtype_ == DType::I64) return static_cast<const int64_t*>(data_)[off];
  return static_cast<const int32_t*>(data_)[off];
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < rank_; ++d)
    s += (d ? ", " : "") + std::to_string(shape_[static_cast<size_t>(d)]);
  return s + "]";
}

}  // namespace dsv4cpu
