// Finiteness scans (bad-input.md §1.4 (e)): whole arrays or rows, the first offender reported in
// row-major order as "<name>[i, j] = <value>: not finite (expected a finite value)".
#pragma once
#include <cstdint>
#include <vector>

#include "core/check.hpp"

namespace dsv4cpu::detail {

// Index of the first NaN or ±inf among x[0 .. n), or n. Scanned in blocks, branch-free on the
// exponent bits, so that the passing path vectorises.
int64_t first_non_finite(const float* x, int64_t n);
// Index of the first NaN or ±inf among the bf16 values x[0 .. n), or n (scanned alike).
int64_t first_non_finite_bf16(const uint16_t* x, int64_t n);
// Index of the first i whose RN(a[i] + b[i]) is NaN or ±inf, or n.
int64_t first_non_finite_sum(const float* a, const float* b, int64_t n);

// NonFiniteError for element `index` of `name` holding `value`.
[[noreturn]] void fail_non_finite(const char* op, const char* name, std::vector<int64_t> index,
                                  float value);

// The first NaN or ±inf of a C-contiguous F32 array.
void check_finite(const char* op, const char* name, const TensorView& v);
// The first NaN or ±inf of row `row` (`n` values from `x`) of `name`, reported at [row, i].
void check_finite_row(const char* op, const char* name, int64_t row, const float* x, int64_t n);
// The first NaN code (0x7F or 0xFF: bad-input.md §4) of a C-contiguous F8_E4M3 array.
void check_fp8_codes(const char* op, const char* name, const TensorView& v);

}  // namespace dsv4cpu::detail
