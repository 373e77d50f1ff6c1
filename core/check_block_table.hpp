// Block-table references (bad-input.md §3): the entries of a block table [R, MB] (I32 or I64)
// with block size P that a formula reads. A referenced column must be < MB, its entry >= 0, and
// entry * P + P - 1 must fit int64; entries no formula reads are never read. Failures are
// IndexErrors named at the input element that makes the formula read the entry:
//   "<referrer>: references block-table column c beyond the table (expected column < MB)",
//   "block_table[r, c] = v: negative block id referenced by <referrer> (expected >= 0)",
//   "block_table[r, c] = v: slot overflows int64, referenced by <referrer> (expected ...)".
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/check.hpp"

namespace dsv4cpu::detail {

// The arrays of a mapping of local indices through a block table (compressor.md §4.1, metadata.md
// §8), block size first: `block_size` >= 1; `local` I32 or I64 [N, K] with unit inner stride; the
// request of each row, `req` [N]; the block table [R, MB] with contiguous rows. Returns {N, K}.
std::pair<int64_t, int64_t> check_mapping_arrays(const char* op, const char* local_name,
                                                 const TensorView& local, const char* req_name,
                                                 const TensorView& req,
                                                 const TensorView& block_table,
                                                 int64_t block_size);

// The input element that makes a formula read an entry, as messages name it:
// "<argument><index> = <value><detail>" (`detail` says how the element leads to the entry, e.g.
// " (window column 6, local index 4)", or is empty).
struct BlockTableReferrer {
  const char* argument;
  std::vector<int64_t> index;
  int64_t value;
  std::string detail;
};

class BlockTableRefs {
 public:
  BlockTableRefs(const char* op, const TensorView& block_table, int64_t block_size);
  int64_t columns() const noexcept { return MB_; }
  const TensorView& table() const noexcept { return table_; }
  int shift() const noexcept { return shift_; }  // log2 P, or -1
  int64_t max_entry() const noexcept { return max_entry_; }
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
  TensorView table_;
  IndexReader bt_;
  int64_t MB_, P_;
  int64_t max_entry_;  // the largest entry whose slots fit int64: (2^63 - 1 - (P - 1)) / P
  int shift_;          // log2 P, or -1 when P is not a power of two
};

// Every local index l >= 0 of row n of `local` (I32 or I64 [N, K], unit inner stride) reads column
// l / P of block-table row req[n] (compressor.md §4.1; `req` already checked): checked in
// row-major order, the referrer named "<local_name>[n, k] = l". Only when local_refs_pass fails
// is the array scanned element by element, so that the first offender is found.
void check_local_refs(const BlockTableRefs& refs, const char* local_name, const TensorView& local,
                      const TensorView& req, int num_threads = 1);
// The passing path of check_local_refs, with `lowest` a bound every element must also respect
// (INT64_MIN: none): true when every element is >= lowest and every reference is valid; false
// when one is not, or the arrays' form has no vector path (P not a power of two, locals and table
// of different widths). Vector code on up to `num_threads` threads: a row whose largest local
// falls in the columns already found valid for its request (consecutive rows of a request) costs
// one pass for its minimum and maximum; otherwise the columns up to it are scanned when that is
// short (valid columns prove every reference below them valid), else the row's entries are
// gathered.
bool local_refs_pass(const BlockTableRefs& refs, const TensorView& local, const TensorView& req,
                     int num_threads, int64_t lowest = INT64_MIN);

// Vector pieces of local_refs_pass (core/check_hwy.cpp).
// The smallest and largest element of row `row` of an I32 or I64 array [rows, n] with unit inner
// stride (n >= 1).
std::pair<int64_t, int64_t> row_min_max(const TensorView& v, int64_t row);
// True iff entries [c0, c1) of row `row` of an I32 or I64 table lie in [0, hi).
bool entries_within(const TensorView& table, int64_t row, int64_t c0, int64_t c1, int64_t hi);
// True iff every l >= 0 of row n of `local` (same width as the table, P = 2^shift, MB >= 1) has
// column l >> shift < MB and block_table[r, column] in [0, max_entry]: the entries gathered.
bool local_refs_ok(const TensorView& local, int64_t n, const TensorView& block_table, int64_t r,
                   int shift, int64_t max_entry);

// Checks the columns [c0, c1] of row r that one referrer reads, ascending, skipping those the
// previous referrers of the same row verified (kept as one interval): consecutive tokens of a
// request read the same or adjacent columns, so most cost a few compares. A referrer fails at
// its first bad column, as when every column of every referrer is checked.
class ColumnRuns {
 public:
  explicit ColumnRuns(const BlockTableRefs& refs) : refs_(refs) {}
  template <class By>
  void check(int64_t r, int64_t c0, int64_t c1, By&& by) {
    visit(r, c0, c1, [&](int64_t c) {
      refs_.check(r, c, by);
      return true;
    });
  }
  // The same without a referrer: false at the first bad column (the call then checks in order).
  bool ok(int64_t r, int64_t c0, int64_t c1) {
    return visit(r, c0, c1, [&](int64_t c) { return refs_.ok(r, c); });
  }

 private:
  template <class Column>
  bool visit(int64_t r, int64_t c0, int64_t c1, Column&& column) {
    if (r == r_ && c0 >= lo_ && c1 <= hi_) return true;
    if (r != r_ || c1 < lo_ - 1 || c0 > hi_ + 1) {  // not touching the verified interval
      r_ = r;
      lo_ = c0;
      hi_ = c0 - 1;
    }
    for (int64_t c = c0; c <= c1; ++c)
      if ((c < lo_ || c > hi_) && !column(c)) return false;
    lo_ = std::min(lo_, c0);
    hi_ = std::max(hi_, c1);  // verified columns are < MB: hi_ + 1 cannot overflow
    return true;
  }

  const BlockTableRefs& refs_;
  int64_t r_ = -1, lo_ = 0, hi_ = -1;
};

// Token t as the referrer: "positions[t] = <position>".
inline BlockTableReferrer by_position(int64_t position, int64_t t) {
  return {"positions", {t}, position, ""};
}

// Tokens t < T reading the columns [first(p), last(p)] of row token_to_req[t], p = positions[t]
// (metadata.md §3: one column, §6: the window's columns), in token order.
template <class First, class Last>
void check_token_columns(const char* op, const TensorView& positions,
                         const TensorView& token_to_req, const TensorView& block_table,
                         int64_t block_size, int64_t T, First&& first, Last&& last) {
  with_data(positions, token_to_req, [&](const auto* pos, const auto* req) {
    const BlockTableRefs refs(op, block_table, block_size);
    ColumnRuns runs(refs);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = pos[t];
      runs.check(req[t], refs.column(first(p)), refs.column(last(p)),
                 [&] { return by_position(p, t); });
    }
  });
}

}  // namespace dsv4cpu::detail
