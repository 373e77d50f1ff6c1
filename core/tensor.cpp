#include "dsv4cpu/tensor.hpp"

#include <algorithm>
#include <limits>

#include "core/checked.hpp"
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
    case DType::F16: return "F16";
  }
  return "?";
}

size_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
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

// The bytes the layout spans, (1 + sum of (max(extent, 1) - 1) x stride) x dtype size: the span of
// the view with every empty extent taken as 1, so that an empty extent never hides an overflowing
// span of the others. False when it overflows int64.
static bool layout_span(int rank, const int64_t* shape, const int64_t* strides, DType dtype,
                        int64_t* bytes) {
  int64_t last = 0, term = 0;
  for (int d = 0; d < rank; ++d)
    if (shape[d] > 1 && (!detail::checked_mul(shape[d] - 1, strides[d], &term) ||
                         !detail::checked_add(last, term, &last)))
      return false;
  return detail::checked_add(last, 1, &last) &&
         detail::checked_mul(last, static_cast<int64_t>(dtype_size(dtype)), bytes);
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
    if (!detail::checked_mul(acc, shape[d], &acc)) acc = 0;  // overflow: reported below
  }
  int64_t count = 0, span = 0;
  if (!detail::extent_product(shape, rank, &count))
    bad_view("shape " + shape_string() + ": element count overflows int64",
             "a product of the non-zero extents below 2^63");
  const bool span_fits =
      layout_span(rank, shape, strides_.data(), dtype, &span) &&
      (count == 0 || reinterpret_cast<uintptr_t>(data) <=
                         std::numeric_limits<uintptr_t>::max() - static_cast<uintptr_t>(span));
  if (!span_fits) {
    std::string text = std::string(dtype_name(dtype)) + " shape " + shape_string() + ", strides [";
    for (int d = 0; d < rank; ++d)
      text += (d ? ", " : "") + std::to_string(strides_[static_cast<size_t>(d)]);
    bad_view(text + "]: byte span overflows the address space", "a layout that fits");
  }
  if (data_ == nullptr && count != 0)
    bad_view("null data for " + std::to_string(count) + " elements",
             "a data pointer, or an extent of 0");
  numel_ = count;
  span_ = count == 0 ? 0 : static_cast<uintptr_t>(span);
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

bool TensorView::contiguous() const noexcept {
  int64_t expect = 1;
  for (int d = rank_ - 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    if (shape_[i] > 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
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
