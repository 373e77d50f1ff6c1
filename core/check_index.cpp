#include "core/check_index.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <type_traits>

#include "core/thresholds.hpp"

namespace dsv4cpu::detail {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The pad-value rule shared by the slot checks: v is -1 or >= 0.
[[noreturn]] void fail_slot(const char* op, const char* name, const TensorView& v, int64_t flat,
                            int64_t slot, const SlotRange* range) {
  const std::string expected = range ? "-1 or 0 <= slot < " + str(range->size()) + " = " +
                                           str(range->pages) + " pages x " + str(range->per_page) +
                                           " " + range->unit
                                     : std::string("-1 or >= 0");
  const std::string problem = slot < 0 || range == nullptr
                                  ? std::string("negative slot other than -1")
                                  : std::string("slot beyond ") + range->cache;
  fail<IndexError>(op, name, unflatten(v, flat), str(slot), problem, expected);
}

// Per-thread scratch of first_repeated_slot, kept between calls.
struct RepeatScratch {
  std::vector<uint64_t> bits;                      // one bit per slot of the range
  std::vector<std::pair<uint64_t, int64_t>> a, b;  // (slot, token), radix-sorted by slot
};

// Stable LSD radix sort of `a` by slot (< range), 8 bits per pass, passes whose digit is the same
// for every pair skipped: linear in the pairs, tokens stay ascending within a slot.
void sort_by_slot(std::vector<std::pair<uint64_t, int64_t>>& a,
                  std::vector<std::pair<uint64_t, int64_t>>& b, int64_t range) {
  const int bits =
      64 - __builtin_clzll(static_cast<unsigned long long>(std::max<int64_t>(range - 1, 1)));
  b.resize(a.size());
  for (int shift = 0; shift < bits; shift += 8) {
    size_t count[257] = {};
    for (const auto& p : a) ++count[((p.first >> shift) & 0xFF) + 1];
    if (*std::max_element(count + 1, count + 257) == a.size()) continue;
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (const auto& p : a) b[count[(p.first >> shift) & 0xFF]++] = p;
    a.swap(b);
  }
}

}  // namespace

void check_block_size(const char* op, const char* name, int64_t value) {
  if (value < 1)
    fail_value(op, name, str(value), "not a positive block size", std::string(name) + " >= 1");
}

void check_power_of_two(const char* op, const char* name, int64_t value) {
  if (value < 1 || (value & (value - 1)) != 0)
    fail_value(op, name, str(value), "not a power of two", "1, 2, 4, ...");
}

void check_compress_ratio(const char* op, int64_t ratio) {
  if (ratio != 4 && ratio != 128)
    fail_value(op, "compress_ratio", str(ratio), "unsupported compress ratio", "4 or 128");
}

void check_max_model_len(const char* op, int64_t max_model_len) {
  if (max_model_len < 1)
    fail_value(op, "max_model_len", str(max_model_len), "not a positive length",
               "max_model_len >= 1");
}

int64_t check_query_start_loc_shape(const char* op, const TensorView& qsl) {
  check_index_array(op, "query_start_loc", qsl, {kAny});
  if (qsl.size(0) < 1)
    fail_shape(op, "query_start_loc", qsl, "I32 or I64 [R + 1] with R >= 0, contiguous");
  return qsl.size(0) - 1;
}

void check_num_tokens_padded(const char* op, int64_t padded, int64_t T) {
  if (padded < T)
    fail_value(op, "num_tokens_padded", str(padded), "fewer entries than tokens",
               "num_tokens_padded >= T = " + str(T));
}

int64_t check_query_start_loc(const char* op, const TensorView& v, int64_t R) {
  const IndexReader qsl(v);
  if (qsl(0) != 0)
    fail<IndexError>(op, "query_start_loc", {0}, str(qsl(0)), "does not start at 0",
                     "query_start_loc[0] = 0");
  for (int64_t r = 1; r <= R; ++r)
    if (qsl(r) < qsl(r - 1))
      fail<IndexError>(op, "query_start_loc", {r}, str(qsl(r)), "decreasing",
                       ">= query_start_loc[" + str(r - 1) + "] = " + str(qsl(r - 1)));
  return qsl(R);
}

void check_seq_lens_cover_queries(const char* op, const TensorView& qsl_v, const TensorView& seq_v,
                                  int64_t R) {
  const IndexReader qsl(qsl_v), seq(seq_v);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t q = qsl(r + 1) - qsl(r);
    if (seq(r) < q)
      fail<IndexError>(op, "seq_lens", {r}, str(seq(r)), "shorter than its request's query tokens",
                       "seq_len >= " + str(q) + " = query_start_loc[" + str(r + 1) +
                           "] - query_start_loc[" + str(r) + "]");
  }
}

void check_positions(const char* op, const TensorView& positions, const Limit* below) {
  const int64_t t = first_outside(positions, 0, below ? below->value : kNoLimit);
  if (t == positions.numel()) return;
  const int64_t p = IndexReader(positions)(t);
  if (p < 0) fail<IndexError>(op, "positions", {t}, str(p), "negative position", ">= 0");
  fail<IndexError>(op, "positions", {t}, str(p), below->problem,
                   below->expected(below->value));
}

void check_request_indices(const char* op, const char* name, const TensorView& v, int64_t R) {
  const int64_t n = first_outside(v, 0, R);
  if (n == v.numel()) return;
  fail<IndexError>(op, name, {n}, str(IndexReader(v)(n)), "request index out of range",
                   "0 <= " + std::string(name) + " < " + str(R));
}

void check_slots(const char* op, const char* name, const TensorView& v, const SlotRange& range,
                 int num_threads) {
  const int64_t i = first_outside(v, -1, range.size(), num_threads);
  if (i == v.numel()) return;
  const int64_t slot = with_data(v, [i](const auto* p) { return static_cast<int64_t>(p[i]); });
  fail_slot(op, name, v, i, slot, &range);
}

void check_slots(const char* op, const char* name, const TensorView& v) {
  const int64_t i = first_outside(v, -1, kNoLimit);
  if (i == v.numel()) return;
  const int64_t slot = with_data(v, [i](const auto* p) { return static_cast<int64_t>(p[i]); });
  fail_slot(op, name, v, i, slot, nullptr);
}

RepeatedSlot first_repeated_slot(const TensorView& slots, int64_t n, int64_t range,
                                 const uint8_t* writes) {
  thread_local RepeatScratch scratch;
  const IndexReader slot(slots);
  auto writing = [&](int64_t t) { return slot(t) >= 0 && (writes == nullptr || writes[t]); };
  RepeatedSlot found;
  const Thresholds& th = thresholds();
  if (range <= std::max(th.bitmap_floor, th.bitmap_slots_per_token * n)) {
    std::vector<uint64_t>& bits = scratch.bits;
    if (bits.size() < static_cast<size_t>(range / 64 + 1))
      bits.resize(static_cast<size_t>(range / 64 + 1), 0);
    // The word of the last slot stays in a register while the next slots fall in it (a prefill's
    // tokens fill a page's rows in order): a store and a load per run, not per slot.
    constexpr uint64_t kNoWord = ~uint64_t{0};
    uint64_t w = kNoWord, word = 0, lo = kNoWord, hi = 0;  // the words set lie in [lo, hi]
    int64_t t = 0;
    for (; t < n; ++t) {
      if (!writing(t)) continue;
      const auto g = static_cast<uint64_t>(slot(t));
      if (g / 64 != w) {
        if (w != kNoWord) bits[w] = word;
        w = g / 64;
        word = bits[w];
        lo = std::min(lo, w);
        hi = std::max(hi, w);
      }
      const uint64_t mask = uint64_t{1} << (g % 64);
      if (word & mask) {
        found.token = t;
        break;
      }
      word |= mask;
    }
    // Clear what this call set: the span of its words when no longer than the tokens read, else
    // word by word.
    if (lo <= hi && static_cast<int64_t>(hi - lo) < t) {
      std::fill(bits.begin() + static_cast<std::ptrdiff_t>(lo),
                bits.begin() + static_cast<std::ptrdiff_t>(hi) + 1, 0);
    } else {
      for (int64_t u = 0; u < t; ++u)
        if (writing(u)) bits[static_cast<uint64_t>(slot(u)) / 64] = 0;
    }
  } else {  // a range far larger than the tokens: their slots sorted, in linear time
    auto& sorted = scratch.a;
    sorted.clear();
    for (int64_t t = 0; t < n; ++t)
      if (writing(t)) sorted.emplace_back(static_cast<uint64_t>(slot(t)), t);
    sort_by_slot(sorted, scratch.b, range);
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].first == sorted[i - 1].first &&
          (found.token < 0 || sorted[i].second < found.token))
        found.token = sorted[i].second;  // the second writer of a slot, earliest over slots
  }
  if (!found) return found;
  for (int64_t u = 0; u < found.token; ++u)
    if (writing(u) && slot(u) == slot(found.token)) {
      found.first = u;
      break;
    }
  return found;
}

void fail_repeated_slot(const char* op, const char* name, const TensorView& slots,
                        const RepeatedSlot& r) {
  fail<IndexError>(op, name, {r.token}, str(IndexReader(slots)(r.token)),
                   "slot already written by token " + str(r.first),
                   "distinct slots among the tokens that write");
}

void check_distinct_slots(const char* op, const char* name, const TensorView& v,
                          const SlotRange& range) {
  const int64_t n = v.numel(), bad = first_outside(v, -1, range.size());
  if (const RepeatedSlot r = first_repeated_slot(v, bad, range.size()))
    fail_repeated_slot(op, name, v, r);
  if (bad < n) check_slots(op, name, v, range);
}

namespace {

// The first element of `lengths` (row-major) failing [0, max_len] (when `max_text` is given) or
// `fit`; fails there.
void scan_lengths(const char* op, const char* name, const TensorView& lengths, int64_t max_len,
                  ExpectedText max_text, const PageFit* fit) {
  const IndexReader len(lengths);
  const bool two_d = lengths.rank() == 2;
  const int64_t rows = lengths.size(0), cols = two_d ? lengths.size(1) : 1;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t L = two_d ? len(b, j) : len(b);
      const bool in_range = max_text == nullptr || (L >= 0 && L <= max_len);
      const int64_t pages = fit ? pages_for(L / fit->divisor, fit->P) : 0;
      if (in_range && (fit == nullptr || pages <= fit->MP)) continue;
      std::vector<int64_t> idx = two_d ? std::vector<int64_t>{b, j} : std::vector<int64_t>{b};
      if (!in_range)
        fail<IndexError>(op, name, std::move(idx), str(L),
                         L < 0 ? "negative length" : "longer than the row width",
                         "0 <= seq_len <= " + max_text(max_len));
      fail<IndexError>(op, name, std::move(idx), str(L),
                       "needs " + str(pages) + " pages of " + str(fit->P) + " entries",
                       fit->expected(fit->MP));
    }
}

}  // namespace

void check_lengths(const char* op, const char* name, const TensorView& lengths, int64_t max_len,
                   ExpectedText max_text, const PageFit* fit) {
  scan_lengths(op, name, lengths, max_len, max_text, fit);
}

void check_pages_fit(const char* op, const char* name, const TensorView& lengths,
                     const PageFit& fit) {
  scan_lengths(op, name, lengths, 0, nullptr, &fit);
}

void check_covered_blocks(const char* op, const char* name, const TensorView& table,
                          const std::vector<int64_t>& covered, const Limit& upper) {
  const IndexReader entry(table);
  for (int64_t b = 0; b < static_cast<int64_t>(covered.size()); ++b)
    for (int64_t c = 0; c < covered[static_cast<size_t>(b)]; ++c) {
      const int64_t id = entry(b, c);
      if (id < 0)
        fail<IndexError>(op, name, {b, c}, str(id), "negative block id in the covered range",
                         ">= 0");
      if (id >= upper.value)
        fail<IndexError>(op, name, {b, c}, str(id), upper.problem,
                         upper.expected(upper.value));
    }
}

Limit blocks_in_cache(int64_t num_pages) {
  return {num_pages, "block id beyond the cache",
          [](int64_t n) { return "block id < " + str(n) + " = num_pages"; }};
}

void check_i32_row_lengths(const char* op, const char* name, const TensorView& lengths,
                           int64_t divisor, const char* output) {
  constexpr int64_t kMaxRow = int64_t{1} << 31;  // indices 0 .. 2^31 - 1
  const IndexReader len(lengths);
  for (int64_t i = 0; i < lengths.size(0); ++i)
    if (len(i) / divisor > kMaxRow)
      fail<IndexError>(op, name, {i}, str(len(i)),
                       "selects indices beyond the int32 range of " + std::string(output),
                       divisor == 1 ? std::string(name) + " <= 2^31"
                                    : std::string(name) + " / " + str(divisor) + " <= 2^31");
}

}  // namespace dsv4cpu::detail
