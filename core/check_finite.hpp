// Finiteness scans (bad-input.md §1.4 (e)): whole arrays or rows, the first offender reported in
// row-major order as "<name>[i, j] = <value>: not finite (expected a finite value)".
#pragma once
#include <cstdint>
#include <vector>

#include "core/check.hpp"

namespace dsv4cpu::detail {

// The scans (core/check_hwy.cpp: Highway, every target; blocks decided by vector compares, the
// first flagged block searched element by element). `num_threads` bounds the threads of a long
// scan (core/parallel.hpp); the answer never depends on it.
// Index of the first NaN or ±inf among x[0 .. n), or n.
int64_t first_non_finite(const float* x, int64_t n, int num_threads = 1);
// Index of the first NaN or ±inf among the bf16 values x[0 .. n), or n.
int64_t first_non_finite_bf16(const uint16_t* x, int64_t n, int num_threads = 1);
// Index of the first NaN or ±inf among the IEEE binary16 values x[0 .. n), or n.
int64_t first_non_finite_f16(const uint16_t* x, int64_t n, int num_threads = 1);
// The largest |x| among the bf16 or IEEE binary16 values x[0 .. n), as the 15 bits of its
// magnitude (0 for n = 0): both formats order magnitudes like their bit patterns, and a NaN or
// ±inf has every exponent bit set, so the result is below the exponent mask (0x7F80, 0x7C00) iff
// every value is finite.
uint16_t max_magnitude16(const uint16_t* x, int64_t n, int num_threads = 1);
// Index of the first i whose RN(a[i] + b[i]) is NaN or ±inf, or n.
int64_t first_non_finite_sum(const float* a, const float* b, int64_t n);
// True iff every a[i], b[i] and RN(b[i] + c[i]) of [0, n) is finite (one pass over three rows: the
// passing path of a check whose failures first_non_finite and first_non_finite_sum then locate).
bool finite_with_sum(const float* a, const float* b, const float* c, int64_t n);
// True iff every a[i] of [0, na) is finite and every |b[i]| of [0, nb) is below 2^below_log2
// (below_log2 <= 127; a NaN is not below): the sufficient condition of save_partial_states's pass,
// which finite_with_sum then decides for the rows that miss it.
bool finite_and_below(const float* a, int64_t na, const float* b, int64_t nb, int below_log2);
// Index of the first fp8 e4m3 NaN code (0x7F or 0xFF: bad-input.md §4) among c[0 .. n), or n.
int64_t first_nan_code(const uint8_t* c, int64_t n, int num_threads = 1);

// NonFiniteError for element `index` of `name` holding `value`.
[[noreturn]] void fail_non_finite(const char* op, const char* name, std::vector<int64_t> index,
                                  float value);

// The first NaN or ±inf of a C-contiguous F32 array.
void check_finite(const char* op, const char* name, const TensorView& v, int num_threads = 1);
// The first NaN or ±inf of row `row` (`n` values from `x`) of `name`, reported at [row, i].
void check_finite_row(const char* op, const char* name, int64_t row, const float* x, int64_t n);
// The rows `rows[t]` (an index array [T], validated to lie in [0, R)) of an F32 table [R, width]
// contiguous: the first NaN or ±inf in row-major order over the table, reported at [row, i].
void check_finite_rows(const char* op, const char* name, const TensorView& table,
                       const TensorView& rows);
// The first NaN code (0x7F or 0xFF: bad-input.md §4) of a C-contiguous F8_E4M3 array.
void check_fp8_codes(const char* op, const char* name, const TensorView& v, int num_threads = 1);

}  // namespace dsv4cpu::detail
