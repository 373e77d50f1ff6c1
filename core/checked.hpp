// Checked int64 arithmetic: every product or sum of extents, strides, offsets and sizes that the
// library forms from its arguments goes through these (bad-input.md §1: no overflow, no unbounded
// allocation), so that a wrapped value never reaches a check or a loop.
#pragma once
#include <cstdint>
#include <string>

#include "core/errors.hpp"

namespace dsv4cpu::detail {

// a * b and a + b into *out; false when the exact result does not fit int64 (*out is then
// unspecified).
[[nodiscard]] inline bool checked_mul(int64_t a, int64_t b, int64_t* out) noexcept {
  return !__builtin_mul_overflow(a, b, out);
}
[[nodiscard]] inline bool checked_add(int64_t a, int64_t b, int64_t* out) noexcept {
  return !__builtin_add_overflow(a, b, out);
}

// The product of `n` extents (each >= 0) into *out; false when the product of the non-zero ones
// overflows int64, so that an empty extent never hides an overflowing product of the others.
[[nodiscard]] inline bool extent_product(const int64_t* extents, int n, int64_t* out) noexcept {
  int64_t nonzero = 1;
  bool empty = false;
  for (int d = 0; d < n; ++d) {
    if (extents[d] == 0) {
      empty = true;
      continue;
    }
    if (!checked_mul(nonzero, extents[d], &nonzero)) return false;
  }
  *out = empty ? 0 : nonzero;
  return true;
}

// a * b for a quantity derived from shapes (bad-input.md §3: checked in step (b) with the
// shapes). ShapeError "<what> = <a> x <b>: overflows int64 (expected a product below 2^63)".
inline int64_t shape_product(const char* op, const char* what, int64_t a, int64_t b) {
  int64_t p = 0;
  if (!checked_mul(a, b, &p))
    fail<ShapeError>(op, what, {}, std::to_string(a) + " x " + std::to_string(b),
                     "overflows int64", "a product below 2^63");
  return p;
}

// The most bytes one vector returned by a builder may hold when its size comes from argument
// values rather than from an array the caller allocated (docs/decisions.md): 256 MiB.
inline constexpr int64_t kMaxReturnedBytes = int64_t{1} << 28;

// True when `count` elements of `element_bytes` each fit kMaxReturnedBytes.
inline bool fits_returned(int64_t count, int64_t element_bytes) noexcept {
  return count >= 0 && count <= kMaxReturnedBytes / element_bytes;
}

}  // namespace dsv4cpu::detail
