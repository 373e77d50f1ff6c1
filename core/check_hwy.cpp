// The whole-array scans of the validation vocabulary (check_finite.hpp, check_index.hpp), written
// once with Highway and compiled for every target of the library (dynamic dispatch, as
// core/cpu_hwy.cpp). Each scan decides a block of elements at a time with vector compares folded
// into one maximum, so the passing path runs at the speed of the loads; the first flagged block is
// searched element by element, so the answer is the first offender in index order, exactly as a
// scalar loop finds it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/check_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/check_block_table.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"
#include "core/parallel.hpp"
#include "core/thresholds.hpp"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements per block of `elem_bytes` each, a multiple of `step` (the vector step):
// thresholds().check_block_bytes per block, one decision (a reduction and a branch) each.
HWY_INLINE int64_t BlockElements(int64_t elem_bytes, int64_t step) {
  return std::max<int64_t>(thresholds().check_block_bytes / elem_bytes / step, 1) * step;
}

// The first i in [0, n) with bad(i), or n: blocks of `block` elements, then what remains in
// multiples of `step` (the vector step; `block` is a multiple of it), are decided by
// flagged(begin, end), which must hold for every block holding a bad element (it may also hold
// for others); flagged blocks and the last elements are searched with bad(i).
template <class Flagged, class Bad>
HWY_INLINE int64_t FirstBad(int64_t n, int64_t block, int64_t step, const Flagged& flagged,
                            const Bad& bad) {
  int64_t b = 0;
  while (b < n - n % step) {
    const int64_t e = std::min(b + block, n - n % step);
    if (HWY_UNLIKELY(flagged(b, e)))
      for (int64_t i = b; i < e; ++i)
        if (bad(i)) return i;
    b = e;
  }
  for (int64_t i = b; i < n; ++i)
    if (bad(i)) return i;
  return n;
}

using DU32 = hn::ScalableTag<uint32_t>;
using DF32 = hn::ScalableTag<float>;
constexpr uint32_t kAbsMask = 0x7FFFFFFFu, kInfBits = 0x7F800000u;

template <class V>
HWY_INLINE hn::Vec<DU32> AbsBits(V x) {
  return hn::And(hn::BitCast(DU32(), x), hn::Set(DU32(), kAbsMask));
}

// Index of the first i in [0, n) whose value(i) is NaN or ±inf, or n; vec(i) is the vector of
// value(i .. i + N). A value is not finite exactly when its |bits| are >= 0x7F800000.
template <class Vec, class Value>
HWY_INLINE int64_t FirstNonFiniteOf(int64_t n, const Vec& vec, const Value& value) {
  const DU32 du;
  const auto N = static_cast<int64_t>(hn::Lanes(du));
  const int64_t block = BlockElements(4, 2 * N);
  return FirstBad(
      n, block, 2 * N,
      [&](int64_t b, int64_t e) {
        auto m = hn::Zero(du);
        for (int64_t i = b; i < e; i += 2 * N)
          m = hn::Max(m, hn::Max(AbsBits(vec(i)), AbsBits(vec(i + N))));
        return hn::GetLane(hn::MaxOfLanes(du, m)) >= kInfBits;
      },
      [&](int64_t i) { return !std::isfinite(value(i)); });
}

// Index of the first NaN or ±inf of x[0 .. n), or n.
int64_t FirstNonFinite(const float* HWY_RESTRICT x, int64_t n) {
  const DF32 df;
  return FirstNonFiniteOf(
      n, [&](int64_t i) { return hn::LoadU(df, x + i); }, [&](int64_t i) { return x[i]; });
}

// Index of the first i with RN(a[i] + b[i]) NaN or ±inf, or n.
int64_t FirstNonFiniteSum(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t n) {
  const DF32 df;
  return FirstNonFiniteOf(
      n, [&](int64_t i) { return hn::Add(hn::LoadU(df, a + i), hn::LoadU(df, b + i)); },
      [&](int64_t i) { return a[i] + b[i]; });
}

// Four running maxima of the lanes bits(i) over the whole vectors of [0, n): four chains of Max
// instead of one. Returns the first index not folded (the tail, for the caller's scalar loop).
template <class V, class Bits>
HWY_INLINE int64_t FoldMax4(V (&m)[4], int64_t n, const Bits& bits) {
  const auto N = static_cast<int64_t>(hn::Lanes(DU32()));
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N)
    for (int k = 0; k < 4; ++k) m[k] = hn::Max(m[k], bits(i + k * N));
  for (; i + N <= n; i += N) m[0] = hn::Max(m[0], bits(i));
  return i;
}

// The largest lane of the four maxima.
template <class V>
HWY_INLINE uint32_t MaxOf4(const V (&m)[4]) {
  return hn::GetLane(hn::MaxOfLanes(DU32(), hn::Max(hn::Max(m[0], m[1]), hn::Max(m[2], m[3]))));
}

// True iff a[0 .. n), b[0 .. n) and every RN(b[i] + c[i]) are finite: one pass over three rows.
// A sum with an infinite or NaN operand is infinite or NaN, so a finite sum has a finite b[i]:
// only the sums are tested. Four running maxima: with one, the check of a prefill's rows (32 MiB)
// read them at 25-30 GB/s where a plain read streams 40 GB/s (AMD EPYC Zen 4); with four, 30-34.
bool FiniteWithSum(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                   const float* HWY_RESTRICT c, int64_t n) {
  const DF32 df;
  const DU32 du;
  decltype(hn::Zero(du)) m[4] = {hn::Zero(du), hn::Zero(du), hn::Zero(du), hn::Zero(du)};
  // a first, then b with c: a and b are often the halves of one row (kv and score of kv_score),
  // so the pass reads memory in address order, which the prefetchers follow across pages.
  FoldMax4(m, n, [&](int64_t j) { return AbsBits(hn::LoadU(df, a + j)); });
  const auto sum = [&](int64_t j) { return hn::Add(hn::LoadU(df, b + j), hn::LoadU(df, c + j)); };
  int64_t i = FoldMax4(m, n, [&](int64_t j) { return AbsBits(sum(j)); });
  bool finite = MaxOf4(m) < kInfBits;
  for (; i < n; ++i) finite = finite && std::isfinite(a[i]) && std::isfinite(b[i] + c[i]);
  return finite;
}

// True iff every |a[i]| of [0, na) is finite and every |b[i]| of [0, nb) is below 2^(128 - k)
// for b_bias = k · 2^23 (k >= 1): |b|'s bits plus b_bias stay below those of infinity (a NaN's
// bits, and those of the largest magnitudes, do not). The rows are read once, and no sum formed.
// The b row keeps maxima of its own, biased once at the end: |b|'s bits plus b_bias stay below
// 2^32, so the largest biased element is the biased largest (one Add fewer per vector).
bool FiniteAndBelow(const float* HWY_RESTRICT a, int64_t na, const float* HWY_RESTRICT b,
                    int64_t nb, uint32_t b_bias) {
  const DF32 df;
  const DU32 du;
  decltype(hn::Zero(du)) ma[4] = {hn::Zero(du), hn::Zero(du), hn::Zero(du), hn::Zero(du)};
  decltype(hn::Zero(du)) mb[4] = {hn::Zero(du), hn::Zero(du), hn::Zero(du), hn::Zero(du)};
  const int64_t ia = FoldMax4(ma, na, [&](int64_t j) { return AbsBits(hn::LoadU(df, a + j)); });
  const int64_t ib = FoldMax4(mb, nb, [&](int64_t j) { return AbsBits(hn::LoadU(df, b + j)); });
  bool below = MaxOf4(ma) < kInfBits && MaxOf4(mb) + b_bias < kInfBits;
  for (int64_t i = ia; i < na && below; ++i) below = std::isfinite(a[i]);
  for (int64_t i = ib; i < nb && below; ++i) {
    uint32_t u;
    std::memcpy(&u, &b[i], sizeof u);
    below = (u & kAbsMask) + b_bias < kInfBits;
  }
  return below;
}

// Index of the first of p[0 .. n) outside [lo, hi) (lo is 0 or -1; hi >= 1, or kNoLimit), or n.
// In the element's own width, p - lo (unsigned) is >= `limit` for every element outside: limit =
// hi - lo when hi fits T, else 2^(bits - 1) (the sign bit of p - lo: only T's largest value is
// flagged without being outside, and the element search clears it).
template <class T>
int64_t FirstOutsideT(const T* HWY_RESTRICT p, int64_t n, int64_t lo, int64_t hi) {
  using U = std::make_unsigned_t<T>;
  const hn::ScalableTag<U> du;
  const auto N = static_cast<int64_t>(hn::Lanes(du));
  const bool bounded = hi != kNoLimit && hi <= static_cast<int64_t>(std::numeric_limits<T>::max());
  const U limit = bounded ? static_cast<U>(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo))
                          : static_cast<U>(U{1} << (8 * sizeof(U) - 1));
  const auto shift = hn::Set(du, static_cast<U>(-lo));
  const U* u = reinterpret_cast<const U*>(p);
  const int64_t block = BlockElements(static_cast<int64_t>(sizeof(T)), 4 * N);
  return FirstBad(
      n, block, 4 * N,
      [&](int64_t b, int64_t e) {
        auto m = hn::Zero(du);
        for (int64_t i = b; i < e; i += 4 * N) {
          const auto x = hn::Max(hn::Add(hn::LoadU(du, u + i), shift),
                                 hn::Add(hn::LoadU(du, u + i + N), shift));
          const auto y = hn::Max(hn::Add(hn::LoadU(du, u + i + 2 * N), shift),
                                 hn::Add(hn::LoadU(du, u + i + 3 * N), shift));
          m = hn::Max(m, hn::Max(x, y));
        }
        return hn::GetLane(hn::MaxOfLanes(du, m)) >= limit;
      },
      [&](int64_t i) { return p[i] < lo || (hi != kNoLimit && p[i] >= hi); });
}
int64_t FirstOutside32(const int32_t* p, int64_t n, int64_t lo, int64_t hi) {
  return FirstOutsideT(p, n, lo, hi);
}
int64_t FirstOutside64(const int64_t* p, int64_t n, int64_t lo, int64_t hi) {
  return FirstOutsideT(p, n, lo, hi);
}

// Index of the first of p[0 .. n) with every bit of `mask` set, or n. A masked value is at most
// `mask`, and equal to it only with every bit set: a block is flagged by its masked maximum.
template <class T>
int64_t FirstWithAllBits(const T* HWY_RESTRICT p, int64_t n, T mask) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t block = BlockElements(static_cast<int64_t>(sizeof(T)), N);
  const auto bits = hn::Set(d, mask);
  return FirstBad(
      n, block, N,
      [&](int64_t b, int64_t e) {
        auto m = hn::Zero(d);
        for (int64_t i = b; i < e; i += N) m = hn::Max(m, hn::And(hn::LoadU(d, p + i), bits));
        return !hn::AllFalse(d, hn::Eq(m, bits));
      },
      [&](int64_t i) { return (p[i] & mask) == mask; });
}

// The largest of x[i] & 0x7FFF over x[0 .. n) (0 for n = 0).
uint16_t MaxMagnitude16(const uint16_t* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<uint16_t> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const auto mask = hn::Set(d, uint16_t{0x7FFF});
  auto m0 = hn::Zero(d), m1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    m0 = hn::Max(m0, hn::And(hn::LoadU(d, x + i), mask));
    m1 = hn::Max(m1, hn::And(hn::LoadU(d, x + i + N), mask));
  }
  auto best = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  for (; i < n; ++i) best = std::max(best, static_cast<uint16_t>(x[i] & 0x7FFF));
  return best;
}

// Index of the first fp8 e4m3 NaN code (0x7F or 0xFF) of c[0 .. n), or n.
int64_t FirstNanCode(const uint8_t* c, int64_t n) {
  return FirstWithAllBits<uint8_t>(c, n, 0x7F);
}

// Index of the first NaN or ±inf of the bf16 values x[0 .. n) (exponent bits all ones), or n.
int64_t FirstNonFiniteBf16(const uint16_t* x, int64_t n) {
  return FirstWithAllBits<uint16_t>(x, n, 0x7F80);
}

// Index of the first NaN or ±inf of the IEEE binary16 values x[0 .. n) (exponent bits all ones),
// or n.
int64_t FirstNonFiniteF16(const uint16_t* x, int64_t n) {
  return FirstWithAllBits<uint16_t>(x, n, 0x7C00);
}

// The smallest and the largest of p[0 .. n) (n >= 1), signed.
template <class T>
void MinMaxOfT(const T* HWY_RESTRICT p, int64_t n, int64_t* lo, int64_t* hi) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  auto mn = hn::Set(d, p[0]), mx = mn;
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a = hn::LoadU(d, p + i), b = hn::LoadU(d, p + i + N);
    mn = hn::Min(mn, hn::Min(a, b));
    mx = hn::Max(mx, hn::Max(a, b));
  }
  *lo = hn::GetLane(hn::MinOfLanes(d, mn));
  *hi = hn::GetLane(hn::MaxOfLanes(d, mx));
  for (; i < n; ++i) {
    *lo = std::min<int64_t>(*lo, p[i]);
    *hi = std::max<int64_t>(*hi, p[i]);
  }
}
void MinMaxOf32(const int32_t* p, int64_t n, int64_t* lo, int64_t* hi) { MinMaxOfT(p, n, lo, hi); }
void MinMaxOf64(const int64_t* p, int64_t n, int64_t* lo, int64_t* hi) { MinMaxOfT(p, n, lo, hi); }

// The end of the run of tokens from t (t < T) with consecutive positions of one request:
// the first u > t with pos[u] != pos[t] + (u - t) or req[u] != req[t], or T. Blocks of 4 vectors
// of positions (and the requests of the same tokens, in their own width) per decision.
template <class TP, class TR>
int64_t RunEndT(const TP* HWY_RESTRICT pos, const TR* HWY_RESTRICT req, int64_t t, int64_t T) {
  const int64_t p0 = pos[t], r0 = req[t];
  int64_t u = t + 1;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<TP> dp;
  const hn::ScalableTag<TR> dr;
  const auto N = static_cast<int64_t>(hn::Lanes(dp));  // positions per vector
  const auto NR = static_cast<int64_t>(hn::Lanes(dr));
  const auto r = hn::Set(dr, static_cast<TR>(r0));
  const auto step = hn::Set(dp, static_cast<TP>(N));
  auto expect = hn::Add(hn::Set(dp, static_cast<TP>(p0 + 1)), hn::Iota(dp, 0));  // at u = t + 1
  for (; u + 4 * N <= T; u += 4 * N) {
    auto same = hn::Eq(hn::LoadU(dp, pos + u), expect);
    for (int64_t k = 1; k < 4; ++k) {
      expect = hn::Add(expect, step);
      same = hn::And(same, hn::Eq(hn::LoadU(dp, pos + u + k * N), expect));
    }
    expect = hn::Add(expect, step);
    auto same_req = hn::Eq(hn::LoadU(dr, req + u), r);
    for (int64_t k = NR; k < 4 * N; k += NR)
      same_req = hn::And(same_req, hn::Eq(hn::LoadU(dr, req + u + k), r));
    if (!hn::AllTrue(dp, same) || !hn::AllTrue(dr, same_req)) break;
  }
#endif
  for (; u < T; ++u)
    if (pos[u] != p0 + (u - t) || req[u] != r0) return u;
  return T;
}
int64_t RunEnd88(const int64_t* p, const int64_t* r, int64_t t, int64_t T) {
  return RunEndT(p, r, t, T);
}
int64_t RunEnd84(const int64_t* p, const int32_t* r, int64_t t, int64_t T) {
  return RunEndT(p, r, t, T);
}
int64_t RunEnd48(const int32_t* p, const int64_t* r, int64_t t, int64_t T) {
  return RunEndT(p, r, t, T);
}
int64_t RunEnd44(const int32_t* p, const int32_t* r, int64_t t, int64_t T) {
  return RunEndT(p, r, t, T);
}

// Block-table references of one row of locals (check_block_table.hpp), block size 2^shift, with
// locals and table entries of the same width T: true iff every l >= 0 of local[0 .. K) has its
// column l >> shift below MB and the entry row[column] in [0, max_entry]. Columns are gathered
// (lanes of negative locals read column 0; MB >= 1).
template <class T>
bool LocalRefsOkT(const T* HWY_RESTRICT local, int64_t K, const T* HWY_RESTRICT row, int64_t MB,
                  int shift, int64_t max_entry) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const T top = std::numeric_limits<T>::max();
  const auto mb = hn::Set(d, static_cast<T>(std::min<int64_t>(MB, top)));
  const auto hi = hn::Set(d, static_cast<T>(std::min<int64_t>(max_entry, top)));
  const auto zero = hn::Zero(d);
  auto bad = hn::Zero(d);
  int64_t k = 0;
  for (; k + N <= K; k += N) {
    const auto l = hn::LoadU(d, local + k);
    const auto col = hn::ShiftRightSame(l, shift);
    const auto skip = hn::Lt(l, zero);
    const auto inside = hn::AndNot(skip, hn::Lt(col, mb));
    const auto entry = hn::GatherIndex(d, row, hn::IfThenElseZero(inside, col));
    const auto fails = hn::Or(hn::Not(inside), hn::Or(hn::Lt(entry, zero), hn::Gt(entry, hi)));
    bad = hn::Or(bad, hn::VecFromMask(d, hn::AndNot(skip, fails)));
  }
  bool good = hn::AllFalse(d, hn::Ne(bad, zero));
  for (; k < K && good; ++k) {
    const int64_t l = local[k], c = l >> shift;
    good = l < 0 || (c < MB && row[c] >= 0 && row[c] <= max_entry);
  }
  return good;
}
bool LocalRefsOk32(const int32_t* local, int64_t K, const int32_t* row, int64_t MB, int shift,
                   int64_t max_entry) {
  return LocalRefsOkT(local, K, row, MB, shift, max_entry);
}
bool LocalRefsOk64(const int64_t* local, int64_t K, const int64_t* row, int64_t MB, int shift,
                   int64_t max_entry) {
  return LocalRefsOkT(local, K, row, MB, shift, max_entry);
}

}  // namespace dsv4cpu::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dsv4cpu::detail {

HWY_EXPORT(FirstNonFinite);
HWY_EXPORT(FirstNonFiniteSum);
HWY_EXPORT(FiniteWithSum);
HWY_EXPORT(FiniteAndBelow);
HWY_EXPORT(FirstOutside32);
HWY_EXPORT(FirstOutside64);
HWY_EXPORT(FirstNanCode);
HWY_EXPORT(FirstNonFiniteBf16);
HWY_EXPORT(FirstNonFiniteF16);
HWY_EXPORT(MaxMagnitude16);
HWY_EXPORT(LocalRefsOk32);
HWY_EXPORT(LocalRefsOk64);
HWY_EXPORT(MinMaxOf32);
HWY_EXPORT(MinMaxOf64);
HWY_EXPORT(RunEnd88);
HWY_EXPORT(RunEnd84);
HWY_EXPORT(RunEnd48);
HWY_EXPORT(RunEnd44);

namespace {

// Element `i` of a row of an index array, as a byte address.
const char* element(const TensorView& v, int64_t row, int64_t i) {
  return static_cast<const char*>(v.data()) +
         (row * (v.rank() > 1 && v.size(0) > 1 ? v.stride(0) : 0) + i) *
             static_cast<int64_t>(dtype_size(v.dtype()));
}

}  // namespace

int64_t first_non_finite(const float* x, int64_t n, int num_threads) {
  const auto scan = HWY_DYNAMIC_DISPATCH(FirstNonFinite);
  return parallel_first(n, threads_for(num_threads, n * 4),
                        [&](int64_t b, int64_t e) { return b + scan(x + b, e - b); });
}

int64_t first_non_finite_sum(const float* a, const float* b, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(FirstNonFiniteSum)(a, b, n);
}

int64_t first_non_finite_bf16(const uint16_t* x, int64_t n, int num_threads) {
  const auto scan = HWY_DYNAMIC_DISPATCH(FirstNonFiniteBf16);
  return parallel_first(n, threads_for(num_threads, n * 2),
                        [&](int64_t b, int64_t e) { return b + scan(x + b, e - b); });
}

int64_t first_non_finite_f16(const uint16_t* x, int64_t n, int num_threads) {
  const auto scan = HWY_DYNAMIC_DISPATCH(FirstNonFiniteF16);
  return parallel_first(n, threads_for(num_threads, n * 2),
                        [&](int64_t b, int64_t e) { return b + scan(x + b, e - b); });
}

uint16_t max_magnitude16(const uint16_t* x, int64_t n, int num_threads) {
  const auto scan = HWY_DYNAMIC_DISPATCH(MaxMagnitude16);
  const int threads = threads_for(num_threads, n * 2);
  if (threads <= 1 || n <= 1) return scan(x, n);
  uint16_t part[64];
  const int64_t parts = std::min<int64_t>({threads, n, 64});
  parallel_for(parts, threads, [&](int64_t i) {
    const int64_t b = n * i / parts, e = n * (i + 1) / parts;
    part[i] = scan(x + b, e - b);
  });
  return *std::max_element(part, part + parts);
}

bool finite_with_sum(const float* a, const float* b, const float* c, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(FiniteWithSum)(a, b, c, n);
}

bool finite_and_below(const float* a, int64_t na, const float* b, int64_t nb, int below_log2) {
  return HWY_DYNAMIC_DISPATCH(FiniteAndBelow)(a, na, b, nb,
                                              static_cast<uint32_t>(128 - below_log2) << 23);
}

int64_t first_outside(const TensorView& v, int64_t lo, int64_t hi, int num_threads) {
  const int64_t n = v.numel();
  if (n == 0) return 0;
  const bool wide = v.dtype() == DType::I64;
  const int threads = threads_for(num_threads, n * (wide ? 8 : 4));
  // Elements [b, e) of the contiguous run starting at byte address p.
  const auto scan = [&](const void* p, int64_t b, int64_t e) {
    return wide ? b + HWY_DYNAMIC_DISPATCH(FirstOutside64)(static_cast<const int64_t*>(p) + b,
                                                           e - b, lo, hi)
                : b + HWY_DYNAMIC_DISPATCH(FirstOutside32)(static_cast<const int32_t*>(p) + b,
                                                           e - b, lo, hi);
  };
  if (v.rank() < 2 || v.contiguous())
    return parallel_first(n, threads, [&](int64_t b, int64_t e) { return scan(v.data(), b, e); });
  const int64_t rows = v.size(0), K = v.size(1);  // rank 2, unit inner stride
  const auto row = [&](int64_t r) { return element(v, r, 0); };
  const int64_t bad = parallel_first(rows, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      if (scan(row(r), 0, K) < K) return r;
    return r1;
  });
  return bad == rows ? n : bad * K + scan(row(bad), 0, K);
}

int64_t first_nan_code(const uint8_t* c, int64_t n, int num_threads) {
  const auto scan = HWY_DYNAMIC_DISPATCH(FirstNanCode);
  return parallel_first(n, threads_for(num_threads, n),
                        [&](int64_t b, int64_t e) { return b + scan(c + b, e - b); });
}

std::pair<int64_t, int64_t> row_min_max(const TensorView& v, int64_t row) {
  const int64_t n = v.size(v.rank() - 1);
  int64_t lo = 0, hi = 0;
  const char* p = element(v, row, 0);
  if (v.dtype() == DType::I64) {
    const auto scan = HWY_DYNAMIC_DISPATCH(MinMaxOf64);
    scan(reinterpret_cast<const int64_t*>(p), n, &lo, &hi);
  } else {
    const auto scan = HWY_DYNAMIC_DISPATCH(MinMaxOf32);
    scan(reinterpret_cast<const int32_t*>(p), n, &lo, &hi);
  }
  return {lo, hi};
}

bool entries_within(const TensorView& table, int64_t row, int64_t c0, int64_t c1, int64_t hi) {
  if (table.dtype() == DType::I64)
    return HWY_DYNAMIC_DISPATCH(FirstOutside64)(
               reinterpret_cast<const int64_t*>(element(table, row, c0)), c1 - c0, 0, hi) ==
           c1 - c0;
  return HWY_DYNAMIC_DISPATCH(FirstOutside32)(
             reinterpret_cast<const int32_t*>(element(table, row, c0)), c1 - c0, 0, hi) == c1 - c0;
}

bool local_refs_ok(const TensorView& local, int64_t n, const TensorView& block_table, int64_t r,
                   int shift, int64_t max_entry) {
  const int64_t K = local.size(1), MB = block_table.size(1);
  if (local.dtype() == DType::I64)
    return HWY_DYNAMIC_DISPATCH(LocalRefsOk64)(
        reinterpret_cast<const int64_t*>(element(local, n, 0)), K,
        reinterpret_cast<const int64_t*>(element(block_table, r, 0)), MB, shift, max_entry);
  return HWY_DYNAMIC_DISPATCH(LocalRefsOk32)(
      reinterpret_cast<const int32_t*>(element(local, n, 0)), K,
      reinterpret_cast<const int32_t*>(element(block_table, r, 0)), MB, shift, max_entry);
}

int64_t position_run_end(const TensorView& positions, const TensorView& token_to_req, int64_t t) {
  const int64_t T = positions.numel();
  return with_data(positions, token_to_req, [&](const auto* p, const auto* r) -> int64_t {
    using P = std::remove_const_t<std::remove_pointer_t<decltype(p)>>;
    using R = std::remove_const_t<std::remove_pointer_t<decltype(r)>>;
    if constexpr (sizeof(P) == 8 && sizeof(R) == 8)
      return HWY_DYNAMIC_DISPATCH(RunEnd88)(p, r, t, T);
    else if constexpr (sizeof(P) == 8)
      return HWY_DYNAMIC_DISPATCH(RunEnd84)(p, r, t, T);
    else if constexpr (sizeof(R) == 8)
      return HWY_DYNAMIC_DISPATCH(RunEnd48)(p, r, t, T);
    else
      return HWY_DYNAMIC_DISPATCH(RunEnd44)(p, r, t, T);
  });
}

}  // namespace dsv4cpu::detail
#endif  // HWY_ONCE
