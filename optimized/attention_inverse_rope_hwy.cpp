// Optimized inverse_gptj_rope_o_proj (attention.md §4), written once with Highway and compiled for
// every target of HWY_TARGETS; the driver at the end (HWY_ONCE) runs (token, head) rows on OpenMP
// threads in up to two passes: with check_finite, unless a bound over the whole call proves every
// rotated value finite, the first checks every head's rotated values without writing
// (bad-input.md §1.2); the second writes out (WriteRows). With check_in_write (a fresh out) one
// pass writes out and watches every value it writes. Widening is exact and the rotation keeps the
// reference's operation order (that of RopePairs in optimized/numerics_hwy-inl.h), so the bytes
// equal the reference's on every target and for any thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/attention_inverse_rope_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "args/attention.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "optimized/numerics_hwy-inl.h"

#ifndef DSV4CPU_INVERSE_ROPE_ONCE  // once per translation unit, for every target and the driver
#define DSV4CPU_INVERSE_ROPE_ONCE
namespace dsv4cpu::detail::opt {
// max_i(|c_i| + |s_i|) of a table row cs (cos_i at i, sin_i at half + i): |x|·bound <= 2^127 for
// every RoPE value x a row rotates with it keeps every rotated value below 2^127·(1 + 2^-23).
inline double rope_row_bound(const float* cs, int64_t half) {
  double bound = 0.0;
  for (int64_t i = 0; i < half; ++i)
    bound = std::max(bound, std::fabs(double{cs[i]}) + std::fabs(double{cs[half + i]}));
  return bound;
}

// What InverseRows does with each row.
enum class RowPass : int {
  kCheck,         // (inputs known finite) check the rotated values, write nothing
  kWrite,         // write the row (WriteRows)
  kWriteWatched,  // write the row, testing every value written (inputs not checked)
};
}  // namespace dsv4cpu::detail::opt
#endif

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

// Pairs per step of the exact check: its scratch lives on the stack.
constexpr size_t kCheckPairs = 64;
// Pairs whose RoPE lanes (RopeLanes, reused by the rows of a token) fit on the stack.
constexpr size_t kLanePairs = 256;

#if HWY_TARGET != HWY_SCALAR
using D64 = hn::Repartition<uint64_t, DF>;
using Order = decltype(hn::SetTableIndices(D64(), static_cast<const uint64_t*>(nullptr)));

// The qword order that makes ZipLower and ZipUpper of WidenBf16x2 return the lanes in order: the
// first half of the input qwords to the even positions, the second half to the odd ones.
HWY_INLINE Order WidenBf16x2Order() {
  const D64 d64;
  const size_t N64 = hn::Lanes(d64);
  HWY_ALIGN uint64_t order[HWY_LANES(uint64_t)];
  for (size_t j = 0; j < N64; ++j) order[j] = j % 2 ? N64 / 2 + j / 2 : j / 2;
  return hn::SetTableIndices(d64, order);
}

// 2·Lanes bf16 values at x widened to fp32 (bf16_to_f32): one load, one qword permutation and
// two interleaves with zero, where Widen16Vec takes a widening load and a shift per vector.
HWY_INLINE void WidenBf16x2(const uint16_t* HWY_RESTRICT x, Order order, VF& w0, VF& w1) {
  const hn::Repartition<uint16_t, DF> d16;
  const D64 d64;
  const auto p = hn::BitCast(d16, hn::TableLookupLanes(hn::BitCast(d64, hn::LoadU(d16, x)), order));
  w0 = hn::BitCast(DF(), hn::ZipLower(DU(), hn::Zero(d16), p));
  w1 = hn::BitCast(DF(), hn::ZipUpper(DU(), hn::Zero(d16), p));
}
#endif

// kWrite and kWriteWatched for the rows [begin, end) of the flattened (token, head) rows, token by
// token: the token's RoPE lanes are built once (RopeLanes), then each of its rows is written in one
// sweep, the first n = D − rope_dim values widened (Widen16Vec), the rope_dim RoPE values widened
// and rotated back in registers (attention.md §4.2, the operations of RopePairs<true>, so the same
// bits), each output byte stored once. kWatch also tests every value written (a non-finite o
// value widens to a non-finite value, and a non-finite cos or sin rotates its pair to one).
// Returns the first row with a non-finite value (end when none, and always without kWatch).
template <bool kF16, bool kWatch>
int64_t WriteRows(const InverseGptjRopeOProjArgs& a, int64_t begin, int64_t end,
                  float* HWY_RESTRICT cd, float* HWY_RESTRICT sd) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const IndexReader pos(a.positions);
  const auto R = static_cast<size_t>(a.rope_dim), D = static_cast<size_t>(a.D);
  const size_t n = D - R, n_body = n - n % N;
#if HWY_TARGET != HWY_SCALAR
  const size_t r_body = R - R % N;  // whole vectors of pairs (N is even)
  const Order order = WidenBf16x2Order();
#else
  const size_t r_body = 0;
#endif
  const uint16_t* const o = a.o.ptr<const uint16_t>();
  float* const out = a.out.ptr<float>();
  auto widen = [](uint16_t v) { return kF16 ? f16_to_f32(v) : bf16_to_f32(v); };
  for (int64_t t = begin / a.H, r = begin; r < end; ++t) {
    const float* cs = a.cos_sin_cache.ptr<const float>() + pos(t) * a.rope_dim;
    RopeLanes<true>(cs, cs + R / 2, R / 2, cd, sd);
    for (const int64_t stop = std::min(end, (t + 1) * a.H); r < stop; ++r) {
      const uint16_t* HWY_RESTRICT x = o + r * a.D;
      float* HWY_RESTRICT y = out + r * a.D;
      FlagsI m = NoFlags();  // kWatch: FlagNonFinite of the values written
      size_t i0 = 0;
#if HWY_TARGET != HWY_SCALAR
      if constexpr (!kF16) {
        for (; i0 + 2 * N <= n_body; i0 += 2 * N) {
          VF w0, w1;
          WidenBf16x2(x + i0, order, w0, w1);
          hn::StoreU(w0, d, y + i0);
          hn::StoreU(w1, d, y + i0 + N);
          if (kWatch) m = FlagNonFinite(FlagNonFinite(m, w0), w1);
        }
      }
#endif
      for (size_t i = i0; i < n_body; i += N) {
        const VF w = Widen16Vec<kF16>(x + i);
        hn::StoreU(w, d, y + i);
        if (kWatch) m = FlagNonFinite(m, w);
      }
#if HWY_TARGET != HWY_SCALAR
      for (size_t i = 0; i < r_body; i += N) {
        const VF v = Widen16Vec<kF16>(x + n + i);
        const VF w =
            Fma(v, hn::LoadU(d, cd + i), hn::Mul(hn::Shuffle2301(v), hn::LoadU(d, sd + i)));
        hn::StoreU(w, d, y + n + i);
        if (kWatch) m = FlagNonFinite(m, w);
      }
#endif
      bool finite = !kWatch || hn::AllFalse(DI(), m);
      for (size_t i = n_body; i < n; ++i) {
        y[i] = widen(x[i]);
        if (kWatch) finite = finite && std::isfinite(y[i]);
      }
      for (size_t i = r_body; i < R; i += 2) {
        rope_pair(widen(x[n + i]), widen(x[n + i + 1]), cd[i], sd[i + 1], &y[n + i],
                  &y[n + i + 1]);
        if (kWatch) finite = finite && std::isfinite(y[n + i]) && std::isfinite(y[n + i + 1]);
      }
      if (!finite) return r;
    }
  }
  return end;
}

// The rows [begin, end) of the flattened (token, head) rows, table row positions[t] per token:
// kWrite and kWriteWatched write them (WriteRows). kCheck checks each row: a row whose RoPE values
// x all have |x|·rope_row_bound <= 2^127 rotates to finite values; other rows are rotated into a
// stack buffer, kCheckPairs pairs at a time, and tested. Returns the first row with a non-finite
// value (end for kWrite).
int64_t InverseRows(const InverseGptjRopeOProjArgs& a, int64_t begin, int64_t end, RowPass pass) {
  const bool f16 = a.o.dtype() == DType::F16;
  const auto half = static_cast<size_t>(a.rope_dim / 2);
  if (pass != RowPass::kCheck) {
    HWY_ALIGN float stack_lanes[4 * kLanePairs];
    std::vector<float> heap_lanes(half > kLanePairs ? 4 * half : 0);
    float* const cd = half > kLanePairs ? heap_lanes.data() : stack_lanes;
    float* const sd = cd + 2 * half;
    const bool watch = pass == RowPass::kWriteWatched;
    if (f16)
      return watch ? WriteRows<true, true>(a, begin, end, cd, sd)
                   : WriteRows<true, false>(a, begin, end, cd, sd);
    return watch ? WriteRows<false, true>(a, begin, end, cd, sd)
                 : WriteRows<false, false>(a, begin, end, cd, sd);
  }
  const IndexReader pos(a.positions);
  const auto n = static_cast<size_t>(a.D - a.rope_dim);
  HWY_ALIGN float rot[2 * kCheckPairs];
  double bound = 0.0;  // rope_row_bound of the row's token
  for (int64_t r = begin; r < end; ++r) {
    const float* cs = a.cos_sin_cache.ptr<const float>() + pos(r / a.H) * a.rope_dim;
    const uint16_t* x = a.o.ptr<const uint16_t>() + r * a.D;
    if (r == begin || r % a.H == 0) bound = rope_row_bound(cs, a.rope_dim / 2);
    const uint16_t m = max_magnitude16(x + n, static_cast<int64_t>(2 * half));
    if (static_cast<double>(f16 ? f16_to_f32(m) : bf16_to_f32(m)) * bound <= 0x1p127) continue;
    for (size_t i = 0; i < half; i += kCheckPairs) {
      const size_t pairs = std::min(kCheckPairs, half - i);
      Widen16(x + n + 2 * i, f16, 2 * pairs, rot);
      RopePairs<true>(cs + i, cs + half + i, rot, pairs, rot);
      for (size_t k = 0; k < 2 * pairs; ++k)
        if (!std::isfinite(rot[k])) return r;
    }
  }
  return end;
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/fallback.hpp"
#include "core/parallel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(InverseRows);

namespace {

// Whether every rotated value is finite by the bound of InverseRows' row check taken over the
// whole call: |o|max (found by the validation's scan of o) · the largest rope_row_bound of the
// tokens' table rows <= 2^127. When so, no row needs the check.
bool rotation_bounded(const InverseGptjRopeOProjArgs& a) {
  const double x = a.o.dtype() == DType::F16 ? f16_to_f32(a.o_max_magnitude)
                                              : bf16_to_f32(a.o_max_magnitude);
  const IndexReader pos(a.positions);
  double bound = 0.0;
  for (int64_t t = 0; t < a.T; ++t)
    bound = std::max(bound, rope_row_bound(a.cos_sin_cache.ptr<const float>() +
                                               pos(t) * a.rope_dim,
                                           a.rope_dim / 2));
  return x * bound <= 0x1p127;
}

}  // namespace

void inverse_gptj_rope_o_proj(const InverseGptjRopeOProjArgs& a, const RunContext& ctx) {
  const int64_t rows = a.T * a.H;
  if (rows == 0) return;  // bad-input.md §1.5
  const auto run = HWY_DYNAMIC_DISPATCH(InverseRows);
  const int write_threads = threads_for(ctx.num_threads, rows * a.D * 6);
  if (ctx.check_finite && a.check_in_write) {
    // One pass: out (fresh, Options::fresh_outputs) written and every value watched. A value not
    // finite: the inputs' error, step (e), or else the reference's of step (f).
    if (parallel_first(rows, write_threads, [&](int64_t b, int64_t e) {
          return run(a, b, e, RowPass::kWriteWatched);
        }) == rows)
      return;
    check_inverse_rope_inputs(a, ctx.num_threads);
    return hand_over(Fallback::inverse_gptj_rope_o_proj, ref::inverse_gptj_rope_o_proj, a, ctx);
  }
  if (ctx.check_finite && !rotation_bounded(a)) {
    // Pass 1: every row checked, nothing written (reads 2·rope_dim bytes a row).
    const int threads = threads_for(ctx.num_threads, rows * a.rope_dim * 2);
    if (parallel_first(rows, threads, [&](int64_t b, int64_t e) {
          return run(a, b, e, RowPass::kCheck);
        }) < rows)
      return hand_over(Fallback::inverse_gptj_rope_o_proj, ref::inverse_gptj_rope_o_proj, a, ctx);
  }
  // Pass 2: every row of out (reads 2·D bytes a row, writes 4·D). Plain stores, also for large
  // calls: out is read next (the output projection), and a buffer just allocated comes zeroed by
  // the kernel, which leaves its pages in the caches (non-temporal stores measured slower there).
  parallel_ranges(rows, write_threads,
                  [&](int64_t b, int64_t e) { run(a, b, e, RowPass::kWrite); });
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
