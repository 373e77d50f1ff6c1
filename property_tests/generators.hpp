// RapidCheck generators shared by the property tests: scheduled batches (decodes first, then
// prefills), shuffled paged block tables with padded rows, index arrays in I32 or I64, and the
// seeds from which bulk contents (caches pre-filled with garbage, float rows) are drawn.
// Every generated struct prints itself, so a failing case shows its shrunk input and seed.
#pragma once
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <ostream>
#include <random>
#include <vector>

#include "dsv4cpu/tensor.hpp"
#include "testing/caches.hpp"

namespace dsv4cpu::prop {

template <class T>
std::ostream& print_list(std::ostream& os, const std::vector<T>& v, size_t limit = 64) {
  os << "[";
  for (size_t i = 0; i < v.size() && i < limit; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > limit) os << ", ... (" << v.size() << " total)";
  return os << "]";
}

// ---- batches ----

struct BatchLimits {
  int max_requests = 6;
  int64_t max_query = 48;             // longest prefill chunk
  int64_t max_position = 1 << 20;     // positions stay below this
  int64_t align = 0;                  // > 0: often end requests at a multiple of `align` minus 0..2
};

// One scheduled step: R requests, the first num_decodes with query length 1, the rest prefills
// with query length >= 2; seq_lens[r] >= query_lens[r] (request lengths from 1 up).
struct Batch {
  std::vector<int64_t> query_lens, seq_lens;
  int64_t num_decodes = 0;

  int64_t num_requests() const { return static_cast<int64_t>(query_lens.size()); }
  int64_t num_tokens() const {
    return std::accumulate(query_lens.begin(), query_lens.end(), int64_t{0});
  }
  std::vector<int64_t> query_start_loc() const {
    std::vector<int64_t> q(query_lens.size() + 1, 0);
    for (size_t r = 0; r < query_lens.size(); ++r) q[r + 1] = q[r] + query_lens[r];
    return q;
  }
  std::vector<int64_t> positions() const {
    std::vector<int64_t> p;
    for (size_t r = 0; r < query_lens.size(); ++r)
      for (int64_t i = 0; i < query_lens[r]; ++i) p.push_back(seq_lens[r] - query_lens[r] + i);
    return p;
  }
  std::vector<int64_t> token_to_req() const {
    std::vector<int64_t> t;
    for (size_t r = 0; r < query_lens.size(); ++r) t.insert(t.end(), query_lens[r], int64_t(r));
    return t;
  }
};

inline std::ostream& operator<<(std::ostream& os, const Batch& b) {
  os << "Batch{num_decodes=" << b.num_decodes << ", query_lens=";
  print_list(os, b.query_lens) << ", seq_lens=";
  return print_list(os, b.seq_lens) << "}";
}

// A context length (tokens before the step): mostly short, sometimes long, up to `max`.
inline rc::Gen<int64_t> gen_context(int64_t max) {
  return rc::gen::weightedOneOf<int64_t>(
      {{6, rc::gen::inRange<int64_t>(0, std::min<int64_t>(max, 64) + 1)},
       {3, rc::gen::inRange<int64_t>(0, std::min<int64_t>(max, 4096) + 1)},
       {1, rc::gen::inRange<int64_t>(0, max + 1)}});
}

inline rc::Gen<Batch> gen_batch(BatchLimits lim) {
  return rc::gen::exec([lim] {
    Batch b;
    const int R = *rc::gen::inRange(0, lim.max_requests + 1);
    b.num_decodes = *rc::gen::inRange(0, R + 1);
    for (int r = 0; r < R; ++r) {
      const int64_t q = r < b.num_decodes ? 1 : *rc::gen::inRange<int64_t>(2, lim.max_query + 1);
      int64_t ctx = *gen_context(lim.max_position - q);
      if (lim.align > 0 && *rc::gen::inRange(0, 2) == 0) {
        // End the request at k·align − 1 − back (a boundary token, or just before one).
        const int64_t back = *rc::gen::inRange<int64_t>(0, 3);
        const int64_t end = (ctx + q) / lim.align * lim.align + lim.align - 1 - back;
        if (end - q + 1 >= 0 && end < lim.max_position) ctx = end - q + 1;
      }
      b.query_lens.push_back(q);
      b.seq_lens.push_back(ctx + q);
    }
    return b;
  });
}

// ---- index arrays ----

// An index array in I32 or I64: rank 1 [rows] (cols = kVector) or rank 2 [rows, cols] with a
// (possibly padded) row stride whose padding holds garbage.
inline constexpr int64_t kVector = -1;
struct IndexArray {
  DType dtype = DType::I64;
  int64_t rows = 0, cols = kVector, row_stride = 1;
  std::vector<int64_t> data64;
  std::vector<int32_t> data32;

  IndexArray() = default;
  // values: rows × width row-major, width = 1 for a vector.
  IndexArray(const std::vector<int64_t>& values, DType dt, int64_t rows_, int64_t cols_,
             int64_t pad, uint64_t garbage_seed)
      : dtype(dt), rows(rows_), cols(cols_), row_stride(width() + (cols_ == kVector ? 0 : pad)) {
    std::mt19937_64 rng(garbage_seed);
    const size_t n = static_cast<size_t>(std::max<int64_t>(rows * row_stride, 1));
    if (dt == DType::I64) {
      data64.resize(n);
      for (auto& x : data64) x = static_cast<int64_t>(rng());
    } else {
      data32.resize(n);
      for (auto& x : data32) x = static_cast<int32_t>(rng());
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width(); ++c) set(r * row_stride + c, values[r * width() + c]);
  }
  int64_t width() const { return cols == kVector ? 1 : cols; }
  void set(int64_t i, int64_t v) {
    if (dtype == DType::I64)
      data64[i] = v;
    else
      data32[i] = static_cast<int32_t>(v);
  }
  const void* ptr() const {
    return dtype == DType::I64 ? static_cast<const void*>(data64.data()) : data32.data();
  }
  TensorView view() const {
    if (cols == kVector) return TensorView(ptr(), dtype, {rows});
    return TensorView(ptr(), dtype, {rows, cols}, {row_stride, 1});
  }
};

inline std::ostream& operator<<(std::ostream& os, const IndexArray& a) {
  os << dtype_name(a.dtype) << "[" << a.rows;
  if (a.cols != kVector) os << ", " << a.cols << "] row stride " << a.row_stride;
  return os << (a.cols == kVector ? "]" : "");
}

inline rc::Gen<DType> gen_index_dtype() { return rc::gen::element(DType::I32, DType::I64); }

// ---- block tables ----

// A paged block table [R, MB]: request r's pages [0, ceil(seq_lens[r] / P)) map to distinct
// physical pages drawn from a shuffled pool of `num_pages` (>= the pages needed); the other
// entries and the row padding hold garbage (including negative values), which no formula reads.
struct BlockTable {
  int64_t block_size = 1, num_pages = 0, cols = 0;
  std::vector<int64_t> entries;  // [R, cols], -1 beyond each request's pages
  IndexArray array;
  std::vector<int64_t> row(int64_t r) const {
    return std::vector<int64_t>(entries.begin() + r * cols, entries.begin() + (r + 1) * cols);
  }
};

inline std::ostream& operator<<(std::ostream& os, const BlockTable& t) {
  return os << "BlockTable{P=" << t.block_size << ", num_pages=" << t.num_pages << ", " << t.array
            << "}";
}

inline rc::Gen<BlockTable> gen_block_table(const std::vector<int64_t>& seq_lens,
                                           int64_t block_size) {
  return rc::gen::exec([seq_lens, block_size] {
    BlockTable t;
    t.block_size = block_size;
    int64_t needed = 0, cols = 0;
    for (int64_t s : seq_lens) {
      needed += (s + block_size - 1) / block_size;
      cols = std::max(cols, (s + block_size - 1) / block_size);
    }
    t.cols = cols + *rc::gen::inRange<int64_t>(0, 3);
    t.num_pages = needed + *rc::gen::inRange<int64_t>(0, 4);
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    std::mt19937_64 rng(seed);
    std::vector<int64_t> pool(static_cast<size_t>(t.num_pages));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    const int64_t R = static_cast<int64_t>(seq_lens.size());
    t.entries.assign(static_cast<size_t>(R * t.cols), -1);
    size_t next = 0;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < (seq_lens[r] + block_size - 1) / block_size; ++c)
        t.entries[r * t.cols + c] = pool[next++];
    // Unused entries: garbage the ops never read.
    std::vector<int64_t> values = t.entries;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = (seq_lens[r] + block_size - 1) / block_size; c < t.cols; ++c)
        values[r * t.cols + c] = static_cast<int32_t>(rng());
    t.array = IndexArray(values, *gen_index_dtype(), R, t.cols, *rc::gen::inRange<int64_t>(0, 3),
                         rng());
    return t;
  });
}

// ---- slots and paged caches ----

// n write slots into a cache of `num_slots` rows: distinct among the valid ones, each -1 with
// probability about 1 / invalid_one_in (0: never), drawn from a shuffled pool.
inline std::vector<int64_t> draw_slots(std::mt19937_64& rng, int64_t n, int64_t num_slots,
                                       int invalid_one_in) {
  std::vector<int64_t> pool(static_cast<size_t>(num_slots));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int64_t> out;
  size_t next = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool invalid = (invalid_one_in > 0 && rng() % invalid_one_in == 0) || next == pool.size();
    out.push_back(invalid ? -1 : pool[next++]);
  }
  return out;
}

// Extra elements past the packed size of a page or row: usually none, sometimes a few.
inline rc::Gen<int64_t> gen_pad(int64_t max) {
  return rc::gen::weightedOneOf<int64_t>(
      {{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, max + 1)}});
}

// ---- boundary indices ----

// The indices of an array of n elements where blocked and vectorised code changes step, in
// ascending order without repeats: 0 and 1; w − 1, w and w + 1 for the vector widths of 4, 8 and
// 16 floats and the steps of 2, 4 and 16 vectors a scan takes (32, 64, 256); the same around each
// mark (the K of a prefix of K elements: K − 1 and K); n − 2 and n − 1. A property places a
// special value at each of them in turn, besides the random places of its generator.
inline std::vector<int64_t> boundary_indices(int64_t n, std::initializer_list<int64_t> marks = {}) {
  std::vector<int64_t> at{0, 1, n - 2, n - 1};
  const auto around = [&](int64_t w) { at.insert(at.end(), {w - 1, w, w + 1}); };
  for (int64_t w : {4, 8, 16, 32, 64, 256}) around(w);
  for (int64_t m : marks) around(m);
  at.erase(std::remove_if(at.begin(), at.end(), [n](int64_t i) { return i < 0 || i >= n; }),
           at.end());
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

// The same for n slots in pages of P: boundary_indices(n) with the first and the last slot of
// every page.
inline std::vector<int64_t> page_boundary_indices(int64_t n, int64_t P) {
  std::vector<int64_t> at = boundary_indices(n);
  for (int64_t p = 0; p < n; p += P) at.insert(at.end(), {p, std::min(p + P, n) - 1});
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

// Where a property places a special value among n > 0 elements: half the time one of `at` (a
// boundary), else anywhere.
inline int64_t special_index(std::mt19937_64& rng, const std::vector<int64_t>& at, int64_t n) {
  return rng() % 2 ? at[rng() % at.size()] : static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

// ---- bulk contents ----

// A seed for bulk contents drawn inside a property (large float arrays are not shrunk).
struct Seed {
  uint64_t value = 0;
};
inline std::ostream& operator<<(std::ostream& os, const Seed& s) {
  return os << "Seed{" << s.value << "}";
}
inline rc::Gen<Seed> gen_seed() {
  return rc::gen::map(rc::gen::arbitrary<uint64_t>(), [](uint64_t v) { return Seed{v}; });
}

using testing::fill_garbage;  // garbage of any bit pattern

}  // namespace dsv4cpu::prop
