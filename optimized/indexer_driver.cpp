// The drivers of the optimized logits variants (indexer.md §4, §7, §8): query rows prepared once,
// keys gathered through the page table in blocks, OpenMP over (batch entry, key chunk) work items
// or over rows, −inf past each row's length, and the per-row selection of indexer_topk. Each logit
// comes from one kernel call whatever the thread, so the output never depends on the thread count.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "args/indexer.hpp"
#include "core/parallel.hpp"
#include "dsv4cpu/numerics.hpp"
#include "optimized/indexer_logits.hpp"
#include "optimized/topk.hpp"

namespace dsv4cpu::detail::opt {
namespace {

constexpr int64_t D = kIndexerHeadDim;
// Work of one key against one query row (H = 64 heads of 128 MACs), in bytes streamed in the same
// time on one thread: the unit of threads_for (core/parallel.hpp).
constexpr int64_t kKeyWorkBytes = 2048;

// Query rows prepared by a kernel, each at a 64-byte aligned address.
class PreparedRows {
 public:
  PreparedRows(const LogitsKernel& k, int64_t H, int64_t rows)
      : k_(k), H_(H), Hp_(padded_heads(H)),
        q_stride_((k.q_bytes(Hp_) + 63) / 64 * 64),
        q_(new uint8_t[static_cast<size_t>(rows) * q_stride_ + 64]),
        w_(static_cast<size_t>(rows * Hp_)) {}
  void prepare(int64_t i, const uint8_t* q, const float* w) {
    k_.prepare(q, w, H_, Hp_, q_at(i), w_.data() + i * Hp_);  // (H = 0: no weights at all)
  }
  PreparedRow row(int64_t i) const { return {q_at(i), w_.data() + i * Hp_, H_, Hp_}; }

 private:
  uint8_t* q_at(int64_t i) const {
    const auto base = reinterpret_cast<uintptr_t>(q_.get());
    return reinterpret_cast<uint8_t*>((base + 63) / 64 * 64) + static_cast<size_t>(i) * q_stride_;
  }
  const LogitsKernel& k_;
  int64_t H_, Hp_;
  size_t q_stride_;
  std::unique_ptr<uint8_t[]> q_;
  std::vector<float> w_;
};

// Where keys j0 .. j0 + n − 1 of page-table row `pt_row` live (indexer.md §3): entry e = j % P
// of page pt[j / P], codes into keys.codes, the address of its raw fp32 scale (byte P·128 + 4e of
// the page) into `scales`. Only the page-table entries of those keys are read.
void locate_keys(const IndexerKCache& kv, const IndexReader& pt, int64_t pt_row, int64_t j0,
                 int64_t n, KeyBlock& keys, const uint8_t** scales) {
  const int64_t P = kv.block_size();
  int64_t col = j0 / P, e = j0 % P, page = pt(pt_row, col);
  for (int64_t k = 0; k < n; ++k) {
    keys.codes[k] = kv.codes(page, e);
    scales[k] = kv.codes(page, 0) + P * kIndexerHeadDim + 4 * e;
    if (++e == P && k + 1 < n) {
      e = 0;
      page = pt(pt_row, ++col);
    }
  }
}

// Calls f(jb, n, keys) for the blocks of keys [j0, j1) of page-table row `pt_row`, in order.
// The pages are scattered, so the hardware prefetcher cannot follow them: while one block is
// scored, the codes and scales of the next are prefetched, and its scales are read only when its
// turn comes.
template <class F>
void for_each_block(const IndexerKCache& kv, const IndexReader& pt, int64_t pt_row, int64_t j0,
                    int64_t j1, const F& f) {
  KeyBlock blocks[2];
  const uint8_t* scales[2][kKeyBlock];
  int cur = 0;
  if (j0 < j1) locate_keys(kv, pt, pt_row, j0, std::min(kKeyBlock, j1 - j0), blocks[0], scales[0]);
  for (int64_t jb = j0; jb < j1; jb += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, j1 - jb), next = jb + kKeyBlock;
    if (next < j1) {
      const int64_t m = std::min(kKeyBlock, j1 - next);
      locate_keys(kv, pt, pt_row, next, m, blocks[1 - cur], scales[1 - cur]);
      for (int64_t k = 0; k < m; ++k) {
        __builtin_prefetch(blocks[1 - cur].codes[k]);
        __builtin_prefetch(blocks[1 - cur].codes[k] + 64);
        __builtin_prefetch(scales[1 - cur][k]);
      }
    }
    for (int64_t k = 0; k < n; ++k) std::memcpy(&blocks[cur].scale[k], scales[cur][k], 4);
    f(jb, n, blocks[cur]);
    cur = 1 - cur;
  }
}

// Logits of keys [j0, j1) of one row into out[j0 .. j1).
void score_keys(const LogitsKernel& k, const PreparedRow& row, const IndexerKCache& kv,
                const IndexReader& pt, int64_t pt_row, int64_t j0, int64_t j1, float* out) {
  for_each_block(kv, pt, pt_row, j0, j1, [&](int64_t jb, int64_t n, const KeyBlock& keys) {
    k.block(row, keys, n, out + jb);
  });
}

// Per-thread state of a parallel region: the FP environment of numerics.md §9 and the kernel's
// thread set-up.
class KernelThread {
 public:
  explicit KernelThread(const LogitsKernel& k) : k_(k) {
    if (k_.thread_begin) k_.thread_begin();
  }
  ~KernelThread() {
    if (k_.thread_end) k_.thread_end();
  }
  KernelThread(const KernelThread&) = delete;
  KernelThread& operator=(const KernelThread&) = delete;

 private:
  FpEnvGuard env_;
  const LogitsKernel& k_;
};

}  // namespace

// indexer.md §4 and §8. Work item = (batch entry b, chunk of kKeyChunk keys); the keys of a block
// are gathered once and scored for every row b·next_n + j that sees them.
void run_logits(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx, const LogitsKernel& k) {
  const int64_t nn = a.next_n, rows = a.B * nn, S = a.max_seq_len;
  if (rows == 0 || S == 0) return;
  const IndexReader seq_lens(a.seq_lens), pt(a.page_table);
  const IndexerKCache kv(a.kv_cache, a.block_size);
  std::vector<int64_t> L(static_cast<size_t>(rows)), items_b, items_j0;
  for (int64_t b = 0; b < a.B; ++b) {
    int64_t longest = 0;
    for (int64_t j = 0; j < nn; ++j) {
      L[static_cast<size_t>(b * nn + j)] = mqa_row_length(a, seq_lens, b, j);
      longest = std::max(longest, L[static_cast<size_t>(b * nn + j)]);
    }
    for (int64_t j0 = 0; j0 < longest; j0 += kKeyChunk) {
      items_b.push_back(b);
      items_j0.push_back(j0);
    }
  }
  PreparedRows prepared(k, a.H, rows);
  const auto* q = a.q_fp8.ptr<const uint8_t>();
  const auto* w = a.weights.ptr<const float>();
  float* logits = a.logits.ptr<float>();
  const auto n_items = static_cast<int64_t>(items_b.size());
  int64_t scored = 0;
  for (int64_t l : L) scored += l;
  const int nt = threads_for(ctx.num_threads, scored * kKeyWorkBytes);
#pragma omp parallel num_threads(nt) if (nt > 1 && n_items > 1)
  {
    KernelThread thread(k);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      prepared.prepare(r, q + r * a.H * D, w + r * a.H);
      std::fill(logits + r * S + L[static_cast<size_t>(r)], logits + (r + 1) * S,
                -std::numeric_limits<float>::infinity());
    }
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t it = 0; it < n_items; ++it) {
      const int64_t b = items_b[static_cast<size_t>(it)], j0 = items_j0[static_cast<size_t>(it)];
      const int64_t* Lb = &L[static_cast<size_t>(b * nn)];
      const int64_t j1 = std::min(j0 + kKeyChunk, *std::max_element(Lb, Lb + nn));
      for_each_block(kv, pt, b, j0, j1, [&](int64_t jb, int64_t n, const KeyBlock& keys) {
        for (int64_t j = 0; j < nn; ++j) {
          const int64_t m = std::min(n, Lb[j] - jb);
          if (m > 0) k.block(prepared.row(b * nn + j), keys, m, logits + (b * nn + j) * S + jb);
        }
      });
    }
  }
}

// indexer.md §7.2. Identity rows first; then the long rows, either one row per thread (many rows)
// or one row at a time with its key chunks spread over the threads (few rows). The logits of a
// row live only in a per-row buffer.
void run_indexer_topk(const IndexerTopkArgs& a, const RunContext& ctx, const LogitsKernel& k) {
  const IndexReader qsl(a.query_start_loc), seq_lens(a.seq_lens), bt(a.block_table);
  const IndexerKCache kv(a.kv_cache, a.block_size);
  auto* out = a.topk_indices.ptr<int32_t>();
  const int64_t ld = a.topk_indices.stride(0);
  struct LongRow {
    int64_t t, r, L;
  };
  std::vector<LongRow> long_rows;
  int64_t longest = 0;
  for (int64_t r = 0; r < a.R; ++r) {
    const int64_t q0 = qsl(r), q1 = qsl(r + 1);
    for (int64_t t = q0; t < q1; ++t) {
      const int64_t L = (seq_lens(r) - (q1 - q0) + (t - q0) + 1) / 4;
      if (a.short_context || L <= kIndexerTopk) {
        ref::identity_row(L, kIndexerTopk, out + t * ld);
      } else {
        long_rows.push_back({t, r, L});
        longest = std::max(longest, L);
      }
    }
  }
  if (long_rows.empty()) return;
  const auto* q = a.q_fp8.ptr<const uint8_t>();
  const auto* w = a.weights.ptr<const float>();
  const auto n_rows = static_cast<int64_t>(long_rows.size());
  int64_t scored = 0;
  for (const LongRow& lr : long_rows) scored += lr.L;
  const int nt = threads_for(ctx.num_threads, scored * kKeyWorkBytes);
  if (n_rows >= 2 * static_cast<int64_t>(nt)) {
    PreparedRows prepared(k, a.H, nt);
    std::vector<float> scores(static_cast<size_t>(nt * longest));
    std::vector<TopkScratch> scratch(static_cast<size_t>(nt));
#pragma omp parallel num_threads(nt)
    {
      KernelThread thread(k);
      const int me = omp_get_thread_num();
      float* row_scores = &scores[static_cast<size_t>(me * longest)];
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < n_rows; ++i) {
        const LongRow& lr = long_rows[static_cast<size_t>(i)];
        prepared.prepare(me, q + lr.t * a.H * D, w + lr.t * a.H);
        score_keys(k, prepared.row(me), kv, bt, lr.r, 0, lr.L, row_scores);
        topk_row(row_scores, lr.L, kIndexerTopk, a.mode, out + lr.t * ld,
                 scratch[static_cast<size_t>(me)]);
      }
    }
    return;
  }
  PreparedRows prepared(k, a.H, 1);
  std::vector<float> scores(static_cast<size_t>(longest));
  TopkScratch scratch;
  for (const LongRow& lr : long_rows) {
    prepared.prepare(0, q + lr.t * a.H * D, w + lr.t * a.H);
    const int64_t chunks = (lr.L + kKeyChunk - 1) / kKeyChunk;
#pragma omp parallel num_threads(nt) if (nt > 1 && chunks > 1)
    {
      KernelThread thread(k);
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t c = 0; c < chunks; ++c)
        score_keys(k, prepared.row(0), kv, bt, lr.r, c * kKeyChunk,
                   std::min(lr.L, (c + 1) * kKeyChunk), scores.data());
    }
    topk_row(scores.data(), lr.L, kIndexerTopk, a.mode, out + lr.t * ld, scratch);
  }
}

}  // namespace dsv4cpu::detail::opt
