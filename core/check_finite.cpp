#include "core/check_finite.hpp"

#include <algorithm>
#include <cstdio>

namespace dsv4cpu::detail {

void fail_non_finite(const char* op, const char* name, std::vector<int64_t> index, float value) {
  fail<NonFiniteError>(op, name, std::move(index), format_float(value), "not finite",
                       "a finite value");
}

void check_finite(const char* op, const char* name, const TensorView& v, int num_threads) {
  const float* x = v.ptr<const float>();
  const int64_t n = v.numel(), i = first_non_finite(x, n, num_threads);
  if (i < n) fail_non_finite(op, name, unflatten(v, i), x[i]);
}

void check_finite_row(const char* op, const char* name, int64_t row, const float* x, int64_t n) {
  const int64_t i = first_non_finite(x, n);
  if (i < n) fail_non_finite(op, name, {row, i}, x[i]);
}

void check_finite_rows(const char* op, const char* name, const TensorView& table,
                       const TensorView& rows) {
  const IndexReader row_of(rows);
  const float* x = table.ptr<const float>();
  const int64_t T = rows.size(0), width = table.size(1);
  bool finite = true;  // the passing path: every token's row, no order needed
  for (int64_t t = 0; t < T && finite; ++t)
    finite = first_non_finite(x + row_of(t) * width, width) == width;
  if (finite) return;
  std::vector<int64_t> used(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) used[static_cast<size_t>(t)] = row_of(t);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  for (int64_t row : used) check_finite_row(op, name, row, x + row * width, width);
}

void check_fp8_codes(const char* op, const char* name, const TensorView& v, int num_threads) {
  const uint8_t* c = v.ptr<const uint8_t>();
  const int64_t n = v.numel(), i = first_nan_code(c, n, num_threads);
  if (i == n) return;
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", static_cast<unsigned>(c[i]));
  fail<NonFiniteError>(op, name, unflatten(v, i), text, "NaN code", "a finite fp8 e4m3 code");
}

}  // namespace dsv4cpu::detail
