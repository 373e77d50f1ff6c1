// Highway top-k selection (indexer.md §5), exactly the reference's output for the same scores.
//
// canonical (§5.3): a threshold t from a sample of the row (evenly spaced runs of 16 scores,
// thresholds().topk_sample_runs of them, core/thresholds.hpp),
// then one vector pass that compress-stores the indices of the candidates s >= t, in index
// order. If the candidate buffer fills, only the top K candidates are kept, t becomes the K-th of
// them and later elements must be > t (an element equal to it ranks below K kept ones); at the
// end the top K candidates are kept the same way and sorted by a stable radix sort of their order
// keys (ties stay in index order). If fewer than K elements reach t, the pass is repeated with a
// lower t, down to −inf, and NaN indices complete the row.
//
// vllm (§5.4): the heap steps verbatim; an element enters only if s > h[0].s, and h[0].s changes
// only when one enters, so a vector compare against h[0].s skips every block of elements that
// cannot enter. Without a NaN among the first K scores the heap holds one 64-bit key per element
// (score order key, index), so that every step of the libstdc++ algorithm is an integer compare,
// and the hole path of each replace comes from bits kept per node (PathHeap512).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/thresholds.hpp"
#include "dsv4cpu/numerics.hpp"
#include "optimized/topk.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/topk_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;

constexpr int64_t kRunLength = 16;  // the sample of a long row: runs of 16 scores
constexpr int64_t kSurvivorsPerK = 2;            // candidates per output the sample aims at

// §5.3 as an unsigned key: larger key ranks first; NaN is 0 (below −inf), −0 and +0 are equal.
inline uint32_t OrderKey(float x) {
  if (std::isnan(x)) return 0;
  const float y = x + 0.0f;  // −0 -> +0
  uint32_t b;
  std::memcpy(&b, &y, 4);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// The same for a vector of scores.
HWY_INLINE hn::Vec<DU> OrderKeys(VF x) {
  const DU du;
  const auto b = hn::BitCast(du, hn::Add(x, hn::Zero(DF())));
  const auto negative = hn::RebindMask(du, hn::Lt(hn::BitCast(DI(), b), hn::Zero(DI())));
  const auto key = hn::IfThenElse(negative, hn::Not(b), hn::Or(b, hn::Set(du, 0x80000000u)));
  return hn::IfThenZeroElse(hn::RebindMask(du, hn::IsNaN(x)), key);
}

// The score of a nonzero order key.
inline float FromOrderKey(uint32_t k) {
  const uint32_t b = (k & 0x80000000u) != 0 ? (k & 0x7FFFFFFFu) : ~k;
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// The candidates of the threshold pass: indices, in index order.
struct Candidates {
  int32_t* index;
  int64_t g, cap;
};

// Keeps the top min(K, g) candidates (§5.3 order) in index order; their keys go to keys[0 .. K).
// Returns the key of the K-th (0 if g < K).
uint32_t KeepTopK(const float* s, Candidates& c, int64_t K, TopkScratch& sc) {
  sc.keys.resize(static_cast<size_t>(c.g));
  sc.selection.resize(static_cast<size_t>(c.g));
  for (int64_t m = 0; m < c.g; ++m)
    sc.keys[size_t(m)] = sc.selection[size_t(m)] = OrderKey(s[c.index[m]]);
  if (c.g < K) return 0;
  std::nth_element(sc.selection.begin(), sc.selection.begin() + (K - 1), sc.selection.end(),
                   std::greater<uint32_t>());
  const uint32_t kth = sc.selection[size_t(K - 1)];
  int64_t above = 0;
  for (int64_t m = 0; m < c.g; ++m) above += sc.keys[size_t(m)] > kth;
  int64_t ties = K - above, kept = 0;  // the first `ties` candidates equal to the K-th
  for (int64_t m = 0; m < c.g; ++m) {
    const uint32_t key = sc.keys[size_t(m)];
    if (key > kth || (key == kth && ties-- > 0)) {
      c.index[kept] = c.index[m];
      sc.keys[size_t(kept++)] = key;
    }
  }
  c.g = kept;
  return kth;
}

// Stable LSD radix sort of (keys, index)[0 .. n) by descending key, 8 bits per pass; passes whose
// digit is the same for every key are skipped.
void RadixSortDescending(uint32_t* keys, int32_t* index, int64_t n, TopkScratch& sc) {
  sc.ranked.resize(static_cast<size_t>(n));  // (key, index) pairs of the other buffer
  uint32_t count[4][256] = {};
  for (int64_t m = 0; m < n; ++m)
    for (int d = 0; d < 4; ++d) ++count[d][(~keys[m] >> (8 * d)) & 0xFFu];
  uint64_t* other = sc.ranked.data();
  for (int d = 0; d < 4; ++d) {
    uint32_t* cnt = count[d];
    if (*std::max_element(cnt, cnt + 256) == static_cast<uint32_t>(n)) continue;
    uint32_t sum = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t c = cnt[b];
      cnt[b] = sum;
      sum += c;
    }
    for (int64_t m = 0; m < n; ++m)
      other[cnt[(~keys[m] >> (8 * d)) & 0xFFu]++] =
          (static_cast<uint64_t>(keys[m]) << 32) | static_cast<uint32_t>(index[m]);
    for (int64_t m = 0; m < n; ++m) {
      keys[m] = static_cast<uint32_t>(other[m] >> 32);
      index[m] = static_cast<int32_t>(other[m] & 0xFFFFFFFFu);
    }
  }
}

// The lanes of `m` that are true, in ascending order, as indices at + lane in the first
// CountTrue(m) lanes (the others unspecified).
#if HWY_TARGET == HWY_AVX2
// Highway 1.0.3's Compress on AVX2 keeps its 1 KiB table of lane orders in a local constexpr
// array, which GCC copies onto the stack at every call (`rep movsq`: 3 times the scan's time on an
// AMD EPYC Zen 1). The same orders, 4 bits a lane, with static storage.
struct LaneOrders {
  uint32_t packed[256];
};
constexpr LaneOrders MakeLaneOrders() {
  LaneOrders t{};
  for (uint32_t bits = 0; bits < 256; ++bits)
    for (uint32_t lane = 0, k = 0; lane < 8; ++lane)
      if ((bits >> lane) & 1u) t.packed[bits] |= lane << (4 * k++);
  return t;
}
constexpr LaneOrders kLaneOrders = MakeLaneOrders();

HWY_INLINE hn::Vec<DI> TrueLanes(hn::Mask<DF> m, int64_t at) {
  const DF d;
  const DU du;
  uint8_t bits[8] = {};
  hn::StoreMaskBits(d, m, bits);
  const auto lanes = hn::And(hn::Shr(hn::Set(du, kLaneOrders.packed[bits[0]]),
                                     hn::ShiftLeft<2>(hn::Iota(du, 0))),
                             hn::Set(du, 7u));
  return hn::Add(hn::BitCast(DI(), lanes), hn::Set(DI(), static_cast<int32_t>(at)));
}
#else
HWY_INLINE hn::Vec<DI> TrueLanes(hn::Mask<DF> m, int64_t at) {
  const DI di;
  const auto idx = hn::Add(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(at)));
  return hn::Compress(idx, hn::RebindMask(di, m));
}
#endif

// Appends the indices i >= `from` with s[i] >= t (kStrict: s[i] > t) until the buffer cannot take
// one more vector; returns where it stopped (L when done). NaN never qualifies.
template <bool kStrict>
int64_t Scan(const float* s, int64_t from, int64_t L, float t, Candidates& c) {
  const DF d;
  const DI di;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const VF tv = hn::Set(d, t);
  const auto pass = [&](VF x) { return kStrict ? hn::Gt(x, tv) : hn::Ge(x, tv); };
  const auto take = [&](VF x, int64_t at) {
    const auto m = pass(x);
    if (hn::AllFalse(d, m)) return;
    hn::StoreU(TrueLanes(m, at), di, c.index + c.g);
    c.g += static_cast<int64_t>(hn::CountTrue(d, m));
  };
  int64_t i = from;
  for (; i + 4 * N <= L; i += 4 * N) {
    if (c.g + 4 * N > c.cap) return i;
    const VF x0 = hn::LoadU(d, s + i), x1 = hn::LoadU(d, s + i + N);
    const VF x2 = hn::LoadU(d, s + i + 2 * N), x3 = hn::LoadU(d, s + i + 3 * N);
    if (hn::AllFalse(d, hn::Or(hn::Or(pass(x0), pass(x1)), hn::Or(pass(x2), pass(x3))))) continue;
    take(x0, i);
    take(x1, i + N);
    take(x2, i + 2 * N);
    take(x3, i + 3 * N);
  }
  for (; i < L; ++i) {
    if (c.g == c.cap) return i;
    if (kStrict ? s[i] > t : s[i] >= t) c.index[c.g++] = static_cast<int32_t>(i);
  }
  return L;
}

// The threshold pass from t: true iff at least K elements qualified (the candidates then hold the
// top K, possibly with others).
bool ThresholdPass(const float* s, int64_t L, int64_t K, float t, Candidates& c,
                   TopkScratch& sc) {
  c.g = 0;
  bool strict = false;
  for (int64_t i = 0;;) {
    i = strict ? Scan<true>(s, i, L, t, c) : Scan<false>(s, i, L, t, c);
    if (i == L) break;
    t = FromOrderKey(KeepTopK(s, c, K, sc));  // the buffer is full: g >= K
    strict = true;
  }
  return c.g >= K;
}

// The sample's order keys: the whole row if short, else `runs` runs of kRunLength.
void SampleKeys(const float* s, int64_t L, TopkScratch& sc) {
  const DF d;
  const DU du;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t runs = thresholds().topk_sample_runs;
  if (L <= runs * kRunLength * 2) {
    sc.sample.resize(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) sc.sample[size_t(i)] = OrderKey(s[i]);
    return;
  }
  sc.sample.resize(static_cast<size_t>(runs * kRunLength));
  for (int64_t r = 0; r < runs; ++r) {
    const float* run = s + r * (L / runs);
    for (int64_t j = 0; j < kRunLength; j += N)
      hn::StoreU(OrderKeys(hn::LoadU(d, run + j)), du, &sc.sample[size_t(r * kRunLength + j)]);
  }
}

void CanonicalRow(const float* s, int64_t L, int64_t K, int32_t* out, TopkScratch& sc) {
  const auto N = static_cast<int64_t>(hn::Lanes(DF()));
  const int64_t cap = std::max<int64_t>(8 * K, thresholds().topk_min_candidates);
  sc.survivor_index.resize(static_cast<size_t>(cap + N));
  Candidates c{sc.survivor_index.data(), 0, cap};
  SampleKeys(s, L, sc);
  std::vector<uint32_t>& sample = sc.sample;
  const auto ns = static_cast<int64_t>(sample.size());
  // The exact K-th key when the sample is the row, else the one expected to leave
  // kSurvivorsPerK·K candidates.
  int64_t rank = ns == L ? K - 1 : (kSurvivorsPerK * K * ns + L - 1) / L;
  const float lowest = -std::numeric_limits<float>::infinity();
  float t = lowest;
  for (;;) {
    t = lowest;
    if (rank < ns) {
      std::nth_element(sample.begin(), sample.begin() + rank, sample.end(),
                       std::greater<uint32_t>());
      if (sample[size_t(rank)] != 0) t = FromOrderKey(sample[size_t(rank)]);
    }
    if (ThresholdPass(s, L, K, t, c, sc) || t == lowest) break;
    rank = 4 * rank + 1;  // the sample overestimated t
  }
  KeepTopK(s, c, K, sc);
  RadixSortDescending(sc.keys.data(), c.index, c.g, sc);
  std::copy(c.index, c.index + c.g, out);
  // Fewer than K non-NaN scores (t = −inf): then the NaNs, by index.
  for (int64_t i = 0, m = c.g; m < K; ++i)
    if (std::isnan(s[i])) out[m++] = static_cast<int32_t>(i);
}

// §5.4 heap, structure of arrays: the scores s[] and the indices i[] of the elements.
struct Heap {
  float* s;
  int32_t* i;
};

// below(a, b): a.s > b.s, or a.s == b.s and a.i > b.i (IEEE: false with a NaN).
inline bool Below(float as, int32_t ai, float bs, int32_t bi) {
  return as > bs || (as == bs && ai > bi);
}

void SiftUp(Heap h, int64_t hole, int64_t top, float vs, int32_t vi) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && Below(h.s[parent], h.i[parent], vs, vi)) {
    h.s[hole] = h.s[parent];
    h.i[hole] = h.i[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  h.s[hole] = vs;
  h.i[hole] = vi;
}

void SiftDown(Heap h, int64_t hole, int64_t n, float vs, int32_t vi) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (n - 1) / 2) {
    child = 2 * (child + 1);
    if (Below(h.s[child], h.i[child], h.s[child - 1], h.i[child - 1])) --child;
    h.s[hole] = h.s[child];
    h.i[hole] = h.i[child];
    hole = child;
  }
  if (n % 2 == 0 && child == (n - 2) / 2) {
    child = 2 * (child + 1);
    h.s[hole] = h.s[child - 1];
    h.i[hole] = h.i[child - 1];
    hole = child - 1;
  }
  SiftUp(h, hole, top, vs, vi);
}

void ReplaceTop(Heap h, int64_t len, float xs, int32_t xi) {
  const float vs = h.s[len - 1];
  const int32_t vi = h.i[len - 1];
  h.s[len - 1] = h.s[0];
  h.i[len - 1] = h.i[0];
  SiftDown(h, 0, len - 1, vs, vi);
  h.s[len - 1] = xs;
  h.i[len - 1] = xi;
  SiftUp(h, len - 1, 0, xs, xi);
}

// The same heap as 64-bit keys (OrderKey(s) << 32 | i) when no score in it is NaN: then
// below(a, b) is key(a) > key(b) (−0 and +0 share a key and compare by index, as IEEE does) and
// every comparison is one integer compare.
inline uint64_t HeapKey(float s, int64_t i) {
  return (static_cast<uint64_t>(OrderKey(s)) << 32) | static_cast<uint32_t>(i);
}

inline void SiftUpKey(uint64_t* k, int64_t hole, int64_t top, uint64_t v) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && k[parent] > v) {
    k[hole] = k[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  k[hole] = v;
}

inline void SiftDownKey(uint64_t* k, int64_t hole, int64_t n, uint64_t v) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (n - 1) / 2) {
    child = 2 * (child + 1);
    child -= static_cast<int64_t>(k[child] > k[child - 1]);
    k[hole] = k[child];
    hole = child;
  }
  if (n % 2 == 0 && child == (n - 2) / 2) {
    child = 2 * (child + 1);
    k[hole] = k[child - 1];
    hole = child - 1;
  }
  SiftUpKey(k, hole, top, v);
}

// The key heap of K = 512 (§5.4 exists for K = 512 only) with the choice of SIFT_DOWN at every
// node kept as a bit: up(q) = k[2q + 2] > k[2q + 1], the upper child of q being 2q + 2 − up(q).
// REPLACE_TOP's pop sifts over the first 511 keys, a perfect tree of 9 levels whose 255 inner
// nodes 0 .. 254 have two children each, so its hole path p0 = 0, ..., p8 (a leaf) comes from the
// bits alone, in registers: no load waits on the previous step's compare. The bits are those of
// the keys k[1 .. 510]; a replace changes keys only on the hole path and, when the pushed key
// rises, on the path of 511, so only their nodes' bits are recomputed.
class PathHeap512 {
 public:
  static constexpr int64_t kK = 512;

  explicit PathHeap512(uint64_t* k) : k_(k) {
    for (int64_t q = 0; q < 255; ++q) set(q, up(q));
  }

  // REPLACE_TOP(x): pop_heap (the top to 511, the key there sifted into the first 511) and
  // push_heap of x at 511.
  void Replace(uint64_t x) {
    uint64_t* k = k_;
    const uint64_t v = k[511];
    const uint64_t w = levels0to5_;
    const int64_t p1 = Step(0, w, 0), p2 = Step(p1, w, p1), p3 = Step(p2, w, p2);
    const int64_t p4 = Step(p3, w, p3), p5 = Step(p4, w, p4), p6 = Step(p5, w, p5);
    const int64_t p7 = Step(p6, level6_, p6 - 63), i7 = p7 - 127;
    const int64_t p8 = Step(p7, level7_[i7 >> 6], i7);
    const uint64_t k1 = k[p1], k2 = k[p2], k3 = k[p3], k4 = k[p4], k5 = k[p5], k6 = k[p6],
                   k7 = k[p7], k8 = k[p8];
    const uint64_t s1 = k[Sibling(p1)], s2 = k[Sibling(p2)], s3 = k[Sibling(p3)],
                   s4 = k[Sibling(p4)], s5 = k[Sibling(p5)], s6 = k[Sibling(p6)],
                   s7 = k[Sibling(p7)], s8 = k[Sibling(p8)];
    k[0] = k1, k[p1] = k2, k[p2] = k3, k[p3] = k4, k[p4] = k5, k[p5] = k6, k[p6] = k7, k[p7] = k8;
    k[p8] = v;
    // v stays at the leaf unless its parent (now k8) is above it; x stays at 511 unless k[255] is.
    if (HWY_LIKELY(k8 < v && k[255] < x)) {
      k[511] = x;
      // Each inner node of the path has one new child (the next node) beside an unchanged one.
      const uint64_t mask = 1 | Bit(p1) | Bit(p2) | Bit(p3) | Bit(p4) | Bit(p5);
      const uint64_t bits = NewUp(p1, k2, s1) | NewUp(p2, k3, s2) << p1 | NewUp(p3, k4, s3) << p2 |
                            NewUp(p4, k5, s4) << p3 | NewUp(p5, k6, s5) << p4 |
                            NewUp(p6, k7, s6) << p5;
      levels0to5_ = (w & ~mask) | bits;
      level6_ = (level6_ & ~Bit(p6 - 63)) | NewUp(p7, k8, s7) << (p6 - 63);
      uint64_t& w7 = level7_[i7 >> 6];
      w7 = (w7 & ~Bit(i7 & 63)) | NewUp(p8, v, s8) << (i7 & 63);
      return;
    }
    SiftUpKey(k, p8, 0, v);
    SiftUpKey(k, 511, 0, x);
    for (const int64_t q : {int64_t{0}, p1, p2, p3, p4, p5, p6, p7}) set(q, up(q));
    for (int64_t q = 127; q > 0; q = (q - 1) / 2) set(q, up(q));  // the inner nodes above 511
  }

 private:
  static uint64_t Bit(int64_t i) { return uint64_t{1} << i; }
  // The upper child of p, its bit at position i of word w.
  static int64_t Step(int64_t p, uint64_t w, int64_t i) {
    return 2 * p + 2 - static_cast<int64_t>((w >> (i & 63)) & 1);
  }
  static int64_t Sibling(int64_t c) { return c - 1 + 2 * (c & 1); }
  // up(parent of c) when c holds nv beside sibling sv (keys are distinct; c odd: the left child).
  static uint64_t NewUp(int64_t c, uint64_t nv, uint64_t sv) {
    return static_cast<uint64_t>(nv > sv) ^ static_cast<uint64_t>(c & 1);
  }
  uint64_t up(int64_t q) const { return static_cast<uint64_t>(k_[2 * q + 2] > k_[2 * q + 1]); }
  // The bits by level: nodes 0 .. 62 in levels0to5_, 63 .. 126 in level6_, 127 .. 254 in level7_.
  void set(int64_t q, uint64_t b) {
    uint64_t& w = q < 63 ? levels0to5_ : q < 127 ? level6_ : level7_[(q - 127) >> 6];
    const int64_t i = q < 63 ? q : q < 127 ? q - 63 : (q - 127) & 63;
    w = (w & ~Bit(i)) | b << i;
  }

  uint64_t* k_;
  uint64_t levels0to5_ = 0, level6_ = 0, level7_[2] = {0, 0};
};

// The first i in [from, L) with s[i] > t, or L: the first element alone (rows where most elements
// enter), then four vectors per decision.
int64_t NextAbove(const float* s, int64_t from, int64_t L, float t) {
  if (from < L && s[from] > t) return from;
  const DF d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const VF tv = hn::Set(d, t);
  int64_t i = from;
  for (; i + 4 * N <= L; i += 4 * N) {
    const auto m0 = hn::Gt(hn::LoadU(d, s + i), tv), m1 = hn::Gt(hn::LoadU(d, s + i + N), tv);
    const auto m2 = hn::Gt(hn::LoadU(d, s + i + 2 * N), tv);
    const auto m3 = hn::Gt(hn::LoadU(d, s + i + 3 * N), tv);
    if (HWY_LIKELY(hn::AllFalse(d, hn::Or(hn::Or(m0, m1), hn::Or(m2, m3))))) continue;
    if (!hn::AllFalse(d, m0)) return i + static_cast<int64_t>(hn::FindFirstTrue(d, m0));
    if (!hn::AllFalse(d, m1)) return i + N + static_cast<int64_t>(hn::FindFirstTrue(d, m1));
    if (!hn::AllFalse(d, m2)) return i + 2 * N + static_cast<int64_t>(hn::FindFirstTrue(d, m2));
    return i + 3 * N + static_cast<int64_t>(hn::FindFirstTrue(d, m3));
  }
  for (; i < L; ++i)
    if (s[i] > t) return i;
  return L;
}

void VllmRow(const float* s, int64_t L, int64_t K, int32_t* out, TopkScratch& sc) {
  // The spec's entry test s[i] > f.s or (s[i] == f.s and i < f.i); its second clause never
  // holds because every index in the heap is below i. A NaN never enters (IEEE).
  bool nan_in_heap = false;
  for (int64_t i = 0; i < K; ++i) nan_in_heap |= std::isnan(s[i]);
  if (!nan_in_heap && K == PathHeap512::kK) {
    sc.heap_keys.resize(static_cast<size_t>(K));
    uint64_t* k = sc.heap_keys.data();
    for (int64_t i = 0; i < K; ++i) k[i] = HeapKey(s[i], i);
    for (int64_t p = (K - 2) / 2; p >= 0; --p) SiftDownKey(k, p, K, k[p]);  // MAKE
    PathHeap512 h(k);
    for (int64_t i = NextAbove(s, K, L, FromOrderKey(static_cast<uint32_t>(k[0] >> 32))); i < L;
         i = NextAbove(s, i + 1, L, FromOrderKey(static_cast<uint32_t>(k[0] >> 32))))
      h.Replace(HeapKey(s[i], i));
    for (int64_t i = 0; i < K; ++i) out[i] = static_cast<int32_t>(k[i] & 0xFFFFFFFFu);
    return;
  }
  sc.heap_scores.resize(static_cast<size_t>(K));
  sc.survivor_index.resize(static_cast<size_t>(K));
  const Heap h{sc.heap_scores.data(), sc.survivor_index.data()};
  for (int64_t i = 0; i < K; ++i) {
    h.s[i] = s[i];
    h.i[i] = static_cast<int32_t>(i);
  }
  for (int64_t p = (K - 2) / 2; p >= 0; --p) SiftDown(h, p, K, h.s[p], h.i[p]);  // MAKE
  for (int64_t i = NextAbove(s, K, L, h.s[0]); i < L; i = NextAbove(s, i + 1, L, h.s[0]))
    ReplaceTop(h, K, s[i], static_cast<int32_t>(i));
  std::copy(h.i, h.i + K, out);  // array order
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/parallel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(CanonicalRow);
HWY_EXPORT(VllmRow);

void topk_row(const float* scores, int64_t L, int64_t K, TopkMode mode, int32_t* out,
              TopkScratch& scratch) {
  if (mode == TopkMode::canonical)
    HWY_DYNAMIC_DISPATCH(CanonicalRow)(scores, L, K, out, scratch);
  else
    HWY_DYNAMIC_DISPATCH(VllmRow)(scores, L, K, out, scratch);
}

// §5: rows in parallel; §5.2 identity rows; §5.5 page transform.
void topk_transform_hwy(const TopkTransformArgs& a, const RunContext& ctx) {
  const IndexReader seq_lens(a.seq_lens);
  const bool paged = a.page_indices.present();
  const IndexReader page_table = paged ? IndexReader(a.page_table) : IndexReader();
  const int k = a.page_shift;
  const int64_t offset_mask = paged ? a.page_size - 1 : 0;
  int64_t bytes = 0;  // the scores of the rows that select
  for (int64_t b = 0; b < a.B; ++b) bytes += seq_lens(b) > a.K ? seq_lens(b) * 4 : 0;
  const int nt = threads_for(ctx.num_threads, bytes);
  std::vector<TopkScratch> scratch(static_cast<size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1 && a.B > 1)
  {
    FpEnvGuard env;  // numerics.md §9: subnormal scores compare as themselves
    TopkScratch& sc = scratch[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < a.B; ++b) {
      const int64_t L = seq_lens(b);
      int32_t* raw = a.raw_indices.ptr<int32_t>() + b * a.raw_indices.stride(0);
      if (L <= a.K)
        ref::identity_row(L, a.K, raw);
      else
        topk_row(a.scores.ptr<const float>() + b * a.scores.stride(0), L, a.K, a.mode, raw, sc);
      if (!paged) continue;
      int32_t* pages = a.page_indices.ptr<int32_t>() + b * a.page_indices.stride(0);
      for (int64_t i = 0; i < a.K; ++i) {
        const int64_t r = raw[i];
        pages[i] = r == -1 ? -1
                           : static_cast<int32_t>((page_table(b, r >> k) << k) | (r & offset_mask));
      }
    }
  }
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
