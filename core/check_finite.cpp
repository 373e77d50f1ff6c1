#include "core/check_finite.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace dsv4cpu::detail {
namespace {

constexpr int64_t kBlock = 64;

bool exponent_all_ones(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return (u & 0x7F800000u) == 0x7F800000u;
}

}  // namespace

int64_t first_non_finite(const float* x, int64_t n) {
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = n < b + kBlock ? n : b + kBlock;
    uint32_t bad = 0;
    for (int64_t i = b; i < e; ++i) bad |= static_cast<uint32_t>(exponent_all_ones(x[i]));
    if (bad)
      for (int64_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return n;
}

int64_t first_non_finite_bf16(const uint16_t* x, int64_t n) {
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = n < b + kBlock ? n : b + kBlock;
    uint32_t bad = 0;
    for (int64_t i = b; i < e; ++i) bad |= static_cast<uint32_t>((x[i] & 0x7F80u) == 0x7F80u);
    if (bad)
      for (int64_t i = b; i < e; ++i)
        if ((x[i] & 0x7F80u) == 0x7F80u) return i;
  }
  return n;
}

int64_t first_non_finite_sum(const float* a, const float* b, int64_t n) {
  for (int64_t k = 0; k < n; k += kBlock) {
    const int64_t e = n < k + kBlock ? n : k + kBlock;
    uint32_t bad = 0;
    for (int64_t i = k; i < e; ++i) bad |= static_cast<uint32_t>(exponent_all_ones(a[i] + b[i]));
    if (bad)
      for (int64_t i = k; i < e; ++i)
        if (!std::isfinite(a[i] + b[i])) return i;
  }
  return n;
}

void fail_non_finite(const char* op, const char* name, std::vector<int64_t> index, float value) {
  fail<NonFiniteError>(op, name, std::move(index), format_float(value), "not finite",
                       "a finite value");
}

void check_finite(const char* op, const char* name, const TensorView& v) {
  const float* x = v.ptr<const float>();
  const int64_t n = v.numel(), i = first_non_finite(x, n);
  if (i < n) fail_non_finite(op, name, unflatten(v, i), x[i]);
}

void check_finite_row(const char* op, const char* name, int64_t row, const float* x, int64_t n) {
  const int64_t i = first_non_finite(x, n);
  if (i < n) fail_non_finite(op, name, {row, i}, x[i]);
}

void check_fp8_codes(const char* op, const char* name, const TensorView& v) {
  const uint8_t* c = v.ptr<const uint8_t>();
  const int64_t n = v.numel();
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = n < b + kBlock ? n : b + kBlock;
    uint32_t bad = 0;
    for (int64_t i = b; i < e; ++i) bad |= static_cast<uint32_t>((c[i] & 0x7F) == 0x7F);
    if (!bad) continue;
    for (int64_t i = b; i < e; ++i) {
      if ((c[i] & 0x7F) != 0x7F) continue;
      char text[8];
      std::snprintf(text, sizeof text, "0x%02X", static_cast<unsigned>(c[i]));
      fail<NonFiniteError>(op, name, unflatten(v, i), text, "NaN code", "a finite fp8 e4m3 code");
    }
  }
}

}  // namespace dsv4cpu::detail
