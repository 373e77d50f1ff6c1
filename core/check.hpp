// Argument checking helpers (bad-input.md): uniform messages, I32/I64 index reads.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::detail {

std::string format_float(double v);  // "nan", "inf", "-inf", else shortest round-trip text
std::string format_index(const std::vector<int64_t>& idx);  // "[3, 7]" or ""

// "<argument><index> = <value>: <problem> (expected <expected>)"
template <class E>
[[noreturn]] void fail(const char* op, const std::string& argument, std::vector<int64_t> index,
                       const std::string& value, const std::string& problem,
                       const std::string& expected) {
  std::string msg = argument + format_index(index) + " = " + value + ": " + problem +
                    " (expected " + expected + ")";
  throw E(op, argument, std::move(index), value, msg);
}

// Scalar argument: ValueError "<name> = <value>: <problem> (expected <expected>)".
[[noreturn]] void fail_value(const char* op, const char* name, const std::string& value,
                             const std::string& problem, const std::string& expected);

// Whole-array problem: ShapeError "<name>: dtype F32, shape [4, 64] (expected <expected>)",
// or "<name>: missing (expected ...)" when absent.
[[noreturn]] void fail_shape(const char* op, const char* name, const TensorView& v,
                             const std::string& expected);

// An expected-shape entry: an extent, or kAny.
inline constexpr int64_t kAny = -1;

enum class Layout : uint8_t {
  contiguous,        // C-contiguous
  unit_inner,        // innermost stride 1, other strides free but >= the packed row size
  rows_contiguous,   // innermost stride 1; dim 0 stride >= product of the other extents, the
                     // rest contiguous (paged caches, block tables, kv/score rows)
};

// Checks presence, dtype, rank, extents and layout in that order; `dtypes` lists the accepted
// dtypes. `what` describes the expectation for the message, e.g. "I32 or I64 [8]".
void check_array(const char* op, const char* name, const TensorView& v,
                 std::initializer_list<DType> dtypes, std::initializer_list<int64_t> shape,
                 Layout layout);
// Index arrays (I32 or I64).
inline void check_index_array(const char* op, const char* name, const TensorView& v,
                              std::initializer_list<int64_t> shape,
                              Layout layout = Layout::contiguous) {
  check_array(op, name, v, {DType::I32, DType::I64}, shape, layout);
}
// ShapeError when an output's bytes overlap an input's.
void check_no_overlap(const char* op, const char* out_name, const TensorView& out,
                      const char* in_name, const TensorView& in);

// Index of the first NaN or ±inf among value(0) .. value(n − 1), or n. Blocks are scanned
// branch-free on the exponent bits so that the passing path vectorises.
template <class Value>
int64_t first_non_finite(int64_t n, Value value) {
  constexpr int64_t kBlock = 64;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = n < b + kBlock ? n : b + kBlock;
    uint32_t bad = 0;
    for (int64_t i = b; i < e; ++i) {
      const float v = value(i);
      uint32_t u;
      std::memcpy(&u, &v, 4);
      bad |= static_cast<uint32_t>((u & 0x7F800000u) == 0x7F800000u);
    }
    if (bad)
      for (int64_t i = b; i < e; ++i)
        if (!std::isfinite(value(i))) return i;
  }
  return n;
}

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

// ---- block-table references (bad-input.md §3) ----

// The input element that makes a formula read a block-table entry, as messages name it:
// "<argument><index> = <value><detail>" (`detail` says how the element leads to the entry, e.g.
// " (window column 6, local index 4)", or is empty).
struct BlockTableReferrer {
  const char* argument;
  std::vector<int64_t> index;
  int64_t value;
  std::string detail;
};

// The entries of a block table [R, MB] (I32 or I64) with block size P that formulas read: a
// referenced column must be < MB, its entry >= 0, and entry * P + P - 1 must fit int64. Entries
// no formula reads are never passed here. Failures are IndexErrors:
//   "<referrer>: <lead>block-table column c beyond the table<detail> (expected <bound> < MB)",
//   "block_table[r, c] = v: negative block id referenced by <referrer> (expected >= 0)",
//   "block_table[r, c] = v: slot overflows int64, referenced by <referrer> (expected ...)".
class BlockTableRefs {
 public:
  // How an area words a column beyond the table: `lead` opens the problem, `bound` names the
  // limit, e.g. {"", "local index / block_size"}.
  struct ColumnWording {
    const char* lead;
    const char* bound;
  };
  BlockTableRefs(const char* op, const TensorView& block_table, int64_t block_size,
                 ColumnWording wording);
  int64_t columns() const noexcept { return MB_; }
  // The column holding local index l >= 0: l / P (a shift for power-of-two P).
  int64_t column(int64_t l) const noexcept { return shift_ >= 0 ? l >> shift_ : l / P_; }
  bool ok(int64_t r, int64_t col) const noexcept {
    if (col >= MB_) return false;
    const int64_t entry = bt_(r, col);
    return entry >= 0 && entry <= max_entry_;
  }
  // Checks column `col` of row r; `by()` makes the referrer, only on failure.
  template <class By>
  void check(int64_t r, int64_t col, By&& by) const {
    if (!ok(r, col)) fail(r, col, by());
  }
  [[noreturn]] void fail(int64_t r, int64_t col, const BlockTableReferrer& by) const;

 private:
  const char* op_;
  IndexReader bt_;
  int64_t MB_, P_;
  int64_t max_entry_;  // the largest entry whose slots fit int64: (2^63 - 1 - (P - 1)) / P
  int shift_;          // log2 P, or -1 when P is not a power of two
  ColumnWording wording_;
};

}  // namespace dsv4cpu::detail
