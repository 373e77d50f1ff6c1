// Reference top-k selection (indexer.md §5, §6): identity rows, the canonical order (§5.3), the
// literal vLLM CPU heap steps (§5.4) and the page transform (§5.5).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "args/indexer.hpp"

namespace dsv4cpu::detail::ref {

namespace {

// §5.3: true iff (sa, ia) ranks before (sb, ib): non-NaN before NaN, then the larger score
// (numeric comparison, −0 = +0), then the smaller index.
bool ranks_before(float sa, int64_t ia, float sb, int64_t ib) {
  const bool nan_a = std::isnan(sa), nan_b = std::isnan(sb);
  if (nan_a != nan_b) return nan_b;
  if (!nan_a && sa != sb) return sa > sb;
  return ia < ib;
}

// §5.4: heap elements and the `below` relation (IEEE comparisons, false with a NaN).
struct HeapEntry {
  float s;
  int64_t i;
};

bool below(const HeapEntry& a, const HeapEntry& b) {
  return a.s > b.s || (a.s == b.s && a.i > b.i);
}

// §5.4 SIFT_UP (integer division rounds toward zero, as in the spec).
void sift_up(HeapEntry* h, int64_t hole, int64_t top, HeapEntry v) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && below(h[parent], v)) {
    h[hole] = h[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  h[hole] = v;
}

// §5.4 SIFT_DOWN; n is the number of live elements.
void sift_down(HeapEntry* h, int64_t hole, int64_t n, HeapEntry v) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (n - 1) / 2) {
    child = 2 * (child + 1);
    if (below(h[child], h[child - 1])) child = child - 1;
    h[hole] = h[child];
    hole = child;
  }
  if (n % 2 == 0 && child == (n - 2) / 2) {
    child = 2 * (child + 1);
    h[hole] = h[child - 1];
    hole = child - 1;
  }
  sift_up(h, hole, top, v);
}

// §5.4 MAKE.
void make_heap(HeapEntry* h, int64_t len) {
  for (int64_t p = (len - 2) / 2; p >= 0; --p) sift_down(h, p, len, h[p]);
}

// §5.4 REPLACE_TOP: pop the top, then push x.
void replace_top(HeapEntry* h, int64_t len, HeapEntry x) {
  const HeapEntry v = h[len - 1];
  h[len - 1] = h[0];
  sift_down(h, 0, len - 1, v);
  h[len - 1] = x;
  sift_up(h, len - 1, 0, x);
}

}  // namespace

void identity_row(int64_t L, int64_t K, int32_t* out) {
  for (int64_t i = 0; i < K; ++i) out[i] = i < L ? static_cast<int32_t>(i) : -1;
}

void topk_canonical_row(const float* scores, int64_t L, int64_t K, int32_t* out) {
  std::vector<int64_t> idx(static_cast<size_t>(L));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::partial_sort(idx.begin(), idx.begin() + K, idx.end(), [scores](int64_t a, int64_t b) {
    return ranks_before(scores[a], a, scores[b], b);
  });
  for (int64_t k = 0; k < K; ++k) out[k] = static_cast<int32_t>(idx[static_cast<size_t>(k)]);
}

void topk_vllm_row(const float* scores, int64_t L, int64_t K, int32_t* out) {
  std::vector<HeapEntry> heap(static_cast<size_t>(K));
  HeapEntry* h = heap.data();
  for (int64_t i = 0; i < K; ++i) h[i] = {scores[i], i};
  make_heap(h, K);
  for (int64_t i = K; i < L; ++i) {
    const HeapEntry f = h[0];
    // The spec's condition verbatim; its second clause never holds (i > every index in h).
    if (scores[i] > f.s || (scores[i] == f.s && i < f.i)) replace_top(h, K, {scores[i], i});
  }
  for (int64_t k = 0; k < K; ++k) out[k] = static_cast<int32_t>(h[k].i);  // array order
}

// §5: topk_transform_512 (K = 512, either mode) and topk_transform_1024 (K = 1024, canonical).
void topk_transform(const TopkTransformArgs& a, const RunContext&) {
  const IndexReader seq_lens(a.seq_lens);
  const bool paged = a.page_indices.present();
  const IndexReader page_table = paged ? IndexReader(a.page_table) : IndexReader();
  const int k = a.page_shift;
  const int64_t offset_mask = paged ? a.page_size - 1 : 0;
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t L = seq_lens(b);
    const float* scores = a.scores.ptr<const float>() + b * a.scores.stride(0);
    int32_t* raw = a.raw_indices.ptr<int32_t>() + b * a.raw_indices.stride(0);
    if (L <= a.K) {
      identity_row(L, a.K, raw);  // §5.2: scores are not read
    } else if (a.mode == TopkMode::canonical) {
      topk_canonical_row(scores, L, a.K, raw);
    } else {
      topk_vllm_row(scores, L, a.K, raw);
    }
    if (!paged) continue;
    // §5.5; validation has checked every covered page-table entry.
    int32_t* pages = a.page_indices.ptr<int32_t>() + b * a.page_indices.stride(0);
    for (int64_t i = 0; i < a.K; ++i) {
      const int64_t r = raw[i];
      pages[i] =
          r == -1 ? -1 : static_cast<int32_t>((page_table(b, r >> k) << k) | (r & offset_mask));
    }
  }
}

// §6
void short_context_topk(const ShortContextTopkArgs& a, const RunContext&) {
  const IndexReader positions(a.positions);
  for (int64_t t = 0; t < a.T; ++t)
    identity_row((positions(t) + 1) / 4, kIndexerTopk,
                 a.topk_indices.ptr<int32_t>() + t * a.topk_indices.stride(0));
}

}  // namespace dsv4cpu::detail::ref
