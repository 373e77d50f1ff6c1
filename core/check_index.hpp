// The element vocabulary of the validation (bad-input.md §1.4 (a), (d), §3): the checks that
// several ops share, each with one wording. Every check takes whole arrays (contiguous I32 or I64
// views unless stated) and their bounds, scans them, and reports the first offending element in
// row-major order; the passing path is a branch-free scan.
#pragma once
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "core/checked.hpp"

namespace dsv4cpu::detail {

// ---- (a) scalars ----

// "<name> = 0: not a positive block size (expected <name> >= 1)", ValueError.
void check_block_size(const char* op, const char* name, int64_t value);
// "<name> = 48: not a power of two (expected 1, 2, 4, ...)", ValueError.
void check_power_of_two(const char* op, const char* name, int64_t value);
// "compress_ratio = 8: unsupported compress ratio (expected 4 or 128)", ValueError.
void check_compress_ratio(const char* op, int64_t ratio);
// "max_model_len = 0: not a positive length (expected max_model_len >= 1)", ValueError.
void check_max_model_len(const char* op, int64_t max_model_len);

// ---- (b) shapes ----

// query_start_loc I32 or I64 [R + 1], R >= 0, contiguous; returns R.
int64_t check_query_start_loc_shape(const char* op, const TensorView& qsl);
// num_tokens_padded, given by an output's extent (metadata.md §1), >= T: "num_tokens_padded = 3:
// fewer entries than tokens (expected num_tokens_padded >= T = 4)", ValueError.
void check_num_tokens_padded(const char* op, int64_t padded, int64_t T);

// ---- (d) index elements ----

// No upper limit, for first_outside.
inline constexpr int64_t kNoLimit = INT64_MAX;
// Index (flat, row-major) of the first element of the index array `v` (C-contiguous, or rank 2
// with unit inner stride) outside [lo, hi) (lo is 0 or -1; hi >= 1, or kNoLimit), or v.numel().
// A vector scan (core/check_hwy.cpp) on up to `num_threads` threads (core/parallel.hpp).
int64_t first_outside(const TensorView& v, int64_t lo, int64_t hi, int num_threads = 1);

// The words of a rule made from its bound, only when a check fails (a call that passes builds no
// string), e.g. [](int64_t R) { return "position < " + std::to_string(R) + " = rows of ..."; }.
using ExpectedText = std::string (*)(int64_t bound);

// An exclusive upper bound with the words of its rule, e.g. {R, "position beyond the cos/sin
// table", ...} whose expected(8) is "position < 8 = rows of cos_sin_cache".
struct Limit {
  int64_t value;
  const char* problem;
  ExpectedText expected;
};

// query_start_loc[0] = 0 ("does not start at 0") and non-decreasing ("decreasing"); returns
// T = query_start_loc[R]. An op that learns T here checks the extents tied to T (outputs of T
// rows, token_slot_mapping, num_tokens_padded) right after, before its other element checks.
int64_t check_query_start_loc(const char* op, const TensorView& qsl, int64_t R);
// seq_lens[r] >= query_start_loc[r + 1] - query_start_loc[r] for a checked query_start_loc:
// "shorter than its request's query tokens".
void check_seq_lens_cover_queries(const char* op, const TensorView& qsl, const TensorView& seq_lens,
                                  int64_t R);
// positions[t] >= 0 ("negative position"), and < below->value when given.
void check_positions(const char* op, const TensorView& positions, const Limit* below = nullptr);
// 0 <= v[i] < R: "request index out of range".
void check_request_indices(const char* op, const char* name, const TensorView& v, int64_t R);

// The slots of a paged cache of `pages` pages of `per_page` rows or entries: -1 (nothing) or in
// [0, pages x per_page).
struct SlotRange {
  int64_t pages, per_page;
  const char* cache;  // "the state cache"
  const char* unit;   // "rows"
  // Saturated: a cache of more than 2^63 - 1 slots holds every int64 slot.
  int64_t size() const noexcept {
    int64_t n = 0;
    return checked_mul(pages, per_page, &n) ? n : INT64_MAX;
  }
};
// Every element of `v` (rank 1 or 2) is -1 or in the range: "negative slot other than -1",
// "slot beyond <cache>" (expected "-1 or 0 <= slot < 4096 = 1024 pages x 4 rows"). The scan runs
// on up to `num_threads` threads (first_outside).
void check_slots(const char* op, const char* name, const TensorView& v, const SlotRange& range,
                 int num_threads = 1);
// The same with no upper bound (expected "-1 or >= 0").
void check_slots(const char* op, const char* name, const TensorView& v);

// The first token t < n among the writing ones (writes[t] != 0; every valid slot when `writes` is
// null) whose slot an earlier writing token wrote, and that earlier token. The n slots are -1 or
// in [0, range). A bitmap over the range when it is small against n (at most max(2^20, 64·n)
// bits), else a radix sort of the writers' slots (linear); either kept per thread between calls,
// bounded by the range or the tokens of the largest call.
struct RepeatedSlot {
  int64_t token = -1, first = -1;
  explicit operator bool() const noexcept { return token >= 0; }
};
RepeatedSlot first_repeated_slot(const TensorView& slots, int64_t n, int64_t range,
                                 const uint8_t* writes = nullptr);
// "<name>[t] = g: slot already written by token <first> (expected distinct slots among the
// tokens that write)", IndexError.
[[noreturn]] void fail_repeated_slot(const char* op, const char* name, const TensorView& slots,
                                     const RepeatedSlot& r);
// check_slots, and the valid slots distinct, in one pass: the first offending element for
// either rule.
void check_distinct_slots(const char* op, const char* name, const TensorView& v,
                          const SlotRange& range);

// How many columns of a page table a row length needs: ceil((L / divisor) / P) <= MP, worded
// "needs 3 pages of 64 entries (expected <expected>)".
struct PageFit {
  int64_t divisor, P, MP;
  ExpectedText expected;  // of MP: "ceil(seq_len / block_size) <= 2 = page_table columns"
};
// Row lengths (rank 1 or 2, row-major): 0 <= L ("negative length") <= max_len ("longer than
// the row width", expected "0 <= seq_len <= " + max_text(max_len)), and with `fit` the pages they
// need.
void check_lengths(const char* op, const char* name, const TensorView& lengths, int64_t max_len,
                   ExpectedText max_text, const PageFit* fit = nullptr);
// The pages row lengths need, without a range (lengths already known to be >= 0).
void check_pages_fit(const char* op, const char* name, const TensorView& lengths,
                     const PageFit& fit);
// The covered entries of a page or block table [B, MP]: columns [0, covered[b]) of row b lie in
// [0, upper.value): "negative block id in the covered range" (expected ">= 0"), or upper's words.
void check_covered_blocks(const char* op, const char* name, const TensorView& table,
                          const std::vector<int64_t>& covered, const Limit& upper);
// The block ids of a cache of `num_pages` pages, as check_covered_blocks' upper limit: "block id
// beyond the cache" (expected "block id < 8 = num_pages").
Limit blocks_in_cache(int64_t num_pages);

// Row lengths (>= 0, rank 1) whose selected indices [0, L / divisor) an I32 output holds:
// "selects indices beyond the int32 range of <output>" (expected "<name> / divisor <= 2^31").
void check_i32_row_lengths(const char* op, const char* name, const TensorView& lengths,
                           int64_t divisor, const char* output);
// The end of the run of tokens from t (t < T = positions.numel()) at consecutive positions of one
// request (positions, token_to_req: contiguous I32 or I64 [T]): the first u > t with
// positions[u] != positions[t] + (u - t) or token_to_req[u] != token_to_req[t], or T. A vector
// scan (core/check_hwy.cpp): the tokens of a prefill are one run, whose block-table columns are
// consecutive.
int64_t position_run_end(const TensorView& positions, const TensorView& token_to_req, int64_t t);

// ceil(L / P) without overflow (L >= 0, P >= 1).
inline int64_t pages_for(int64_t L, int64_t P) { return L / P + (L % P != 0 ? 1 : 0); }

}  // namespace dsv4cpu::detail
