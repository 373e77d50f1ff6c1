// Non-owning strided tensor views (spec README, "Arrays").
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "dsv4cpu/export.hpp"

namespace dsv4cpu {

enum class DType : uint8_t { F32, BF16, F8_E4M3, U8, I32, I64, F16 };  // F16: IEEE binary16

// "F32", "BF16", "F8_E4M3", "U8", "I32", "I64", "F16"
DSV4CPU_API const char* dtype_name(DType d) noexcept;
DSV4CPU_API size_t dtype_size(DType d) noexcept;
DSV4CPU_API bool is_index_dtype(DType d) noexcept;  // I32 or I64

inline constexpr int kMaxRank = 4;

// A read-only view of `rank` dimensions with extents and strides counted in elements: what every
// input argument takes. A default-constructed view is "absent" (an optional argument that was not
// given). Construction checks that the rank is in [0, kMaxRank], extents and strides are
// non-negative, the element count and the byte span fit int64 and the address space (an empty
// extent counted as 1, so that it never hides an overflowing product of the others) and a
// non-empty view has data; violations throw ShapeError naming the op "TensorView". Outputs and
// in-place buffers take a MutableTensorView (below).
class DSV4CPU_API TensorView {
 public:
  TensorView() = default;
  // C-contiguous view.
  TensorView(const void* data, DType dtype, std::initializer_list<int64_t> shape);
  TensorView(const void* data, DType dtype, int rank, const int64_t* shape);
  // Explicit strides (elements).
  TensorView(const void* data, DType dtype, std::initializer_list<int64_t> shape,
             std::initializer_list<int64_t> strides);
  TensorView(const void* data, DType dtype, int rank, const int64_t* shape,
             const int64_t* strides);

  bool present() const noexcept { return present_; }
  DType dtype() const noexcept { return dtype_; }
  int rank() const noexcept { return rank_; }
  int64_t size(int dim) const noexcept { return shape_[static_cast<size_t>(dim)]; }
  int64_t stride(int dim) const noexcept { return strides_[static_cast<size_t>(dim)]; }
  int64_t numel() const noexcept { return numel_; }
  bool empty() const noexcept { return numel() == 0; }
  bool contiguous() const noexcept;  // C-contiguous (extents of 1 or 0 ignore their stride)
  const void* data() const noexcept { return data_; }
  template <class T>
  const T* ptr() const noexcept { return static_cast<const T*>(data_); }
  // Byte range [lo, hi) the view can address; empty views address nothing.
  uintptr_t byte_lo() const noexcept { return reinterpret_cast<uintptr_t>(data_); }
  uintptr_t byte_hi() const noexcept { return byte_lo() + span_; }
  bool overlaps(const TensorView& other) const noexcept;
  // Index element read widened to int64 (I32 or I64 views only); `i` is a multi-index.
  int64_t index_at(std::initializer_list<int64_t> i) const noexcept;
  // "[4, 64, 512]"
  std::string shape_string() const;

 private:
  void init(const void* data, DType dtype, int rank, const int64_t* shape, const int64_t* strides);
  const void* data_ = nullptr;
  DType dtype_ = DType::U8;
  int rank_ = 0;
  bool present_ = false;
  std::array<int64_t, kMaxRank> shape_{};
  std::array<int64_t, kMaxRank> strides_{};
  int64_t numel_ = 0;  // set by init: the checks of every call read these
  uintptr_t span_ = 0;  // bytes addressed past byte_lo(); 0 when empty
};

// A view an op writes: every output and in-place buffer parameter takes one. It is constructed
// only from non-const memory, so a view of `const` data cannot be passed as an output (it does not
// compile); it converts implicitly to TensorView (a MutableTensorView is a TensorView), which the
// overlap checks and read-only uses take. Default-constructed: absent (an optional output).
class MutableTensorView : public TensorView {
 public:
  MutableTensorView() = default;
  MutableTensorView(void* data, DType dtype, std::initializer_list<int64_t> shape)
      : TensorView(data, dtype, shape) {}
  MutableTensorView(void* data, DType dtype, int rank, const int64_t* shape)
      : TensorView(data, dtype, rank, shape) {}
  MutableTensorView(void* data, DType dtype, std::initializer_list<int64_t> shape,
                    std::initializer_list<int64_t> strides)
      : TensorView(data, dtype, shape, strides) {}
  MutableTensorView(void* data, DType dtype, int rank, const int64_t* shape, const int64_t* strides)
      : TensorView(data, dtype, rank, shape, strides) {}

  // Constructed from non-const memory, so writing through it is well-defined.
  void* data() const noexcept { return const_cast<void*>(TensorView::data()); }
  template <class T>
  T* ptr() const noexcept { return static_cast<T*>(data()); }
};

}  // namespace dsv4cpu
