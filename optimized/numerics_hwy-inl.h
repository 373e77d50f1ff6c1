// Vector forms of include/dsv4cpu/numerics.hpp for Highway per-target code. Lane by lane, every
// function returns the bits its scalar counterpart returns, on every target: each fma of the spec
// is one rounding (native where the target has FMA, lane-wise std::fma elsewhere), and roundings
// to integers use the 2^23 addition rather than target rounding instructions, whose emulation on
// EMU128 is not exact.
// Include after <hwy/highway.h>, inside a file compiled once per target (foreach_target.h).

#if defined(DSV4CPU_OPTIMIZED_NUMERICS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DSV4CPU_OPTIMIZED_NUMERICS_HWY_INL_H_
#undef DSV4CPU_OPTIMIZED_NUMERICS_HWY_INL_H_
#else
#define DSV4CPU_OPTIMIZED_NUMERICS_HWY_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <hwy/highway.h>

#include "dsv4cpu/numerics.hpp"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;
using MF = hn::Mask<DF>;
inline constexpr size_t kMaxLanesF = HWY_LANES(float);

// numerics.md §7: fma(a, b, c) = RN(a·b + c), one rounding.
HWY_INLINE VF Fma(VF a, VF b, VF c) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(a, b, c);
#else
  const DF d;
  HWY_ALIGN float la[kMaxLanesF], lb[kMaxLanesF], lc[kMaxLanesF];
  hn::Store(a, d, la);
  hn::Store(b, d, lb);
  hn::Store(c, d, lc);
  for (size_t i = 0; i < hn::Lanes(d); ++i) la[i] = std::fma(la[i], lb[i], lc[i]);
  return hn::Load(d, la);
#endif
}

HWY_INLINE VF SetBits(uint32_t bits) {
  const DF d;
  return hn::BitCast(d, hn::Set(DU(), bits));
}

// numerics.md §5, exp_lib. k = rint(RN(x·L2E)) is taken from the bits of RN(RN(x·L2E) + 1.5·2^23)
// (exact ties-to-even rounding for |k| < 2^22), so no lane conversion or rounding instruction is
// involved. For k in [−125, 127] the spec's RN(RN(u·2^k1)·2^k2) is u·2^k exactly, a normal number
// (u·2^k1 is exact), so vectors whose lanes all lie there add k to u's exponent; any other lane
// (subnormal or overflowing results, the special cases, where out-of-range lanes compute harmless
// garbage before being overwritten) sends the vector through the spec's two-step form.
// kNonPositive: for arguments ≤ 0 or NaN, as RN(s − max) of the §8.4 pooling is, so that k ≤ 0 and
// the range test needs only its lower bound; a lane above 88 would come out wrong.
template <bool kNonPositive = false>
HWY_INLINE VF ExpLib(VF x) {
  using namespace exp_consts;
  const DF d;
  const DU du;
  constexpr uint32_t kMagicBits = 0x4B400000u;  // 1.5·2^23; bits(magic + k) = kMagicBits + k
  const VF magic = SetBits(kMagicBits);
  const VF t = hn::Add(hn::Mul(x, SetBits(kL2E)), magic);
  const VF k = hn::Sub(t, magic);
  VF r = Fma(k, SetBits(kCHi | 0x80000000u), x);
  r = Fma(k, SetBits(kCLo | 0x80000000u), r);
  VF u = Fma(SetBits(kP6), r, SetBits(kP5));
  u = Fma(u, r, SetBits(kP4));
  u = Fma(u, r, SetBits(kP3));
  u = Fma(u, r, SetBits(kP2));
  u = Fma(u, r, hn::Set(d, 0.5f));
  u = Fma(hn::Mul(r, r), u, r);
  u = hn::Add(hn::Set(d, 1.0f), u);
  const VU kb = hn::BitCast(du, t);
  // u lies in [0.70, 1.42]: for k in [−125, 127] u·2^k is normal, and adding k to u's exponent
  // field gives its bits; kMagicBits·2^23 ≡ 0 (mod 2^32), so kb << 23 is k << 23.
  static_assert((kMagicBits << 23) == 0u, "the magic constant must vanish in the exponent shift");
  bool in_range;
  if constexpr (kNonPositive) {
    in_range = hn::AllTrue(d, hn::Ge(t, SetBits(kMagicBits - 125u)));  // k ≥ −125; NaN fails
  } else {
    const VU k125 = hn::Sub(kb, hn::Set(du, kMagicBits - 125u));  // k + 125, unsigned
    in_range = hn::AllTrue(du, hn::Lt(k125, hn::Set(du, 253u)));
  }
  if (HWY_LIKELY(in_range))
    return hn::BitCast(d, hn::Add(hn::BitCast(du, u), hn::ShiftLeft<23>(kb)));
  // kMagicBits is even: kb >> 1 = kMagicBits/2 + floor(k/2).
  const VU k1 = hn::ShiftRight<1>(kb);
  const VU k2 = hn::Sub(kb, k1);  // kMagicBits/2 + k − floor(k/2)
  const VU rebias = hn::Set(du, 127u - (kMagicBits >> 1));
  const VF p1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k1, rebias)));
  const VF p2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k2, rebias)));
  VF y = hn::Mul(hn::Mul(u, p1), p2);
  // Special cases: x < −104 → +0, x ≥ 0x1.62e430p+6 → +inf, NaN → 0x7FC00000.
  y = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -104.0f)), y);
  y = hn::IfThenElse(hn::Ge(x, SetBits(kOverflowBits)), SetBits(0x7F800000u), y);
  return hn::IfThenElse(hn::IsNaN(x), SetBits(0x7FC00000u), y);
}

// A running flag of non-finite lanes: m with the lanes set where v's lane is not finite. A
// compare into a mask: a running maximum of |v|'s bits instead made a memory-bound write loop on
// an AMD EPYC Zen 4 16% slower.
using DI = hn::RebindToSigned<DF>;
using FlagsI = hn::Mask<DI>;
HWY_INLINE FlagsI NoFlags() { return hn::FirstN(DI(), 0); }
HWY_INLINE FlagsI FlagNonFinite(FlagsI m, VF v) {
  const DI di;
  const auto magnitude = hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF));
  return hn::Or(m, hn::Gt(magnitude, hn::Set(di, 0x7F7FFFFF)));
}

// One vector of bf16 values at x (kF16: IEEE binary16) widened to fp32, lane by lane as
// bf16_to_f32 (f16_to_f32). Highway's binary16 widening without F16C reads exponent 31 as a finite
// exponent and F16C quiets signalling NaNs: lanes with exponent 31 are rebuilt from their bits.
template <bool kF16>
HWY_INLINE VF Widen16Vec(const uint16_t* HWY_RESTRICT x) {
  const DF d;
  const DU du;
  const hn::Rebind<uint16_t, DF> d16;
  const VU h = hn::PromoteTo(du, hn::LoadU(d16, x));
  if constexpr (!kF16) {
    return hn::BitCast(d, hn::ShiftLeft<16>(h));
  } else {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const VU exp_mask = hn::Set(du, 0x7C00u);
    const VF v = hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(x)));
    const VU special = hn::Or(hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u))),
                              hn::Or(hn::Set(du, 0x7F800000u),
                                     hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x3FFu)))));
    return hn::IfThenElse(hn::RebindMask(d, hn::Eq(hn::And(h, exp_mask), exp_mask)),
                          hn::BitCast(d, special), v);
  }
}

// n values at x widened to fp32 (Widen16Vec; f16: binary16, else bf16).
HWY_INLINE void Widen16(const uint16_t* HWY_RESTRICT x, bool f16, size_t n,
                        float* HWY_RESTRICT out) {
  const DF d;
  const size_t N = hn::Lanes(d), body = n - n % N;
  size_t i = 0;
  if (f16)
    for (; i < body; i += N) hn::StoreU(Widen16Vec<true>(x + i), d, out + i);
  else
    for (; i < body; i += N) hn::StoreU(Widen16Vec<false>(x + i), d, out + i);
  for (; i < n; ++i) out[i] = f16 ? f16_to_f32(x[i]) : bf16_to_f32(x[i]);
}

// numerics.md §2, to_bf16, returned as the fp32 bit pattern of the rounded value (the bf16 in the
// high 16 bits, low bits zero); NaN → 0x7FC0.
HWY_INLINE VU Bf16Bits(VF x) {
  const DU du;
  const VU b = hn::BitCast(du, x);
  const VU lsb = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u));
  const VU rounded =
      hn::And(hn::Add(hn::Add(b, hn::Set(du, 0x7FFFu)), lsb), hn::Set(du, 0xFFFF0000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), hn::Set(du, 0x7FC00000u), rounded);
}
// round_bf16: to_bf16 widened back to fp32.
HWY_INLINE VF RoundBf16(VF x) { return hn::BitCast(DF(), Bf16Bits(x)); }

// numerics.md §3.2, e4m3_sat, one code per 32-bit lane. Normals by integer rounding of the fp32
// pattern (exponent rebias −120, round bit 19, sticky bits 0..18); lanes below 2^−6 by
// RN(a·2^9 + 2^23) (a·2^9 < 8 is exact, the addition rounds ties to even).
HWY_INLINE VU E4m3Sat(VF y) {
  const DF d;
  const DU du;
  const VU sign = hn::And(hn::ShiftRight<24>(hn::BitCast(du, y)), hn::Set(du, 0x80u));
  const VF a = hn::Min(hn::Abs(y), hn::Set(d, 448.0f));
  const VU ab = hn::BitCast(du, a);
  const VU lsb = hn::And(hn::ShiftRight<20>(ab), hn::Set(du, 1u));
  const VU normal = hn::Sub(hn::ShiftRight<20>(hn::Add(hn::Add(ab, hn::Set(du, 0x7FFFFu)), lsb)),
                            hn::Set(du, 120u << 3));
  const VF two23 = hn::Set(d, 0x1p23f);
  const VU sub = hn::Sub(hn::BitCast(du, hn::Add(hn::Mul(a, hn::Set(d, 0x1p9f)), two23)),
                         hn::BitCast(du, two23));
  const VU code = hn::Or(sign, hn::IfThenElse(hn::RebindMask(du, hn::Lt(a, hn::Set(d, 0x1p-6f))),
                                              sub, normal));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(y)), hn::Or(sign, hn::Set(du, 0x7Fu)), code);
}

// numerics.md §8.2: SS(x, n), n a multiple of 16, with 16 fma lanes whatever the vector width
// (16 / Lanes accumulators hold lanes 0..15 in order), reduced by the §8.1 tree.
HWY_INLINE float SumSquares16(const float* HWY_RESTRICT x, size_t n) {
  const DF d;
  constexpr size_t kAcc = 16 / kMaxLanesF > 0 ? 16 / kMaxLanesF : 1;
  static_assert(kAcc * kMaxLanesF == 16, "16 lanes must be a whole number of vectors");
  const size_t N = hn::Lanes(d);
  VF L[kAcc];
  for (size_t a = 0; a < kAcc; ++a) L[a] = hn::Zero(d);
  for (size_t k = 0; k < n; k += 16) {
    for (size_t a = 0; a < kAcc; ++a) {
      const VF v = hn::LoadU(d, x + k + a * N);
      L[a] = Fma(v, v, L[a]);
    }
  }
  HWY_ALIGN float lanes[16];
  for (size_t a = 0; a < kAcc; ++a) hn::Store(L[a], d, lanes + a * N);
  return reduce16(lanes);
}

// Largest |x| over n values (n a multiple of Lanes); order-free.
HWY_INLINE float AbsMax(const float* HWY_RESTRICT x, size_t n) {
  const DF d;
  VF m = hn::Zero(d);
  for (size_t i = 0; i < n; i += hn::Lanes(d)) m = hn::Max(m, hn::Abs(hn::LoadU(d, x + i)));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// True iff every one of the n values (n a multiple of Lanes) is finite.
HWY_INLINE bool AllFinite(const float* HWY_RESTRICT x, size_t n) {
  const DF d;
  const DU du;
  VU m = hn::Zero(du);
  const VU abs_mask = hn::Set(du, 0x7FFFFFFFu);
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    m = hn::Max(m, hn::And(hn::BitCast(du, hn::LoadU(d, x + i)), abs_mask));
  return hn::GetLane(hn::MaxOfLanes(du, m)) < 0x7F800000u;
}

// The lanes RopePairs<kInverse> multiplies the 2n values of n pairs by (built once per vector
// there; once per token's table row by the inverse RoPE's WriteRows): cd duplicates each cos, sd
// holds (∓s, ±s) per pair.
template <bool kInverse>
HWY_INLINE void RopeLanes(const float* HWY_RESTRICT c, const float* HWY_RESTRICT s, size_t n,
                          float* HWY_RESTRICT cd, float* HWY_RESTRICT sd) {
  for (size_t i = 0; i < n; ++i) {
    const float sn = kInverse ? -s[i] : s[i];
    cd[2 * i] = cd[2 * i + 1] = c[i];
    sd[2 * i] = -sn;
    sd[2 * i + 1] = sn;
  }
}

// numerics.md §8.5 on n interleaved (even, odd) pairs: x[2i], x[2i+1] rotated by (c[i], s[i]);
// kInverse: by (c[i], −s[i]), the rotation back of attention.md §4.2. `out` may alias `x`; the
// pairs after the last whole vector are rotated one by one.
template <bool kInverse = false>
HWY_INLINE void RopePairs(const float* HWY_RESTRICT c, const float* HWY_RESTRICT s, const float* x,
                          size_t n, float* out) {
  size_t i = 0;  // values done
#if HWY_TARGET != HWY_SCALAR
  const DF d;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float cd[kMaxLanesF], sd[kMaxLanesF];
  for (; i + N <= 2 * n; i += N) {
    RopeLanes<kInverse>(c + i / 2, s + i / 2, N / 2, cd, sd);
    const VF v = hn::LoadU(d, x + i);
    // even lane: fma(e, c, RN(o·(−s))); odd lane: fma(o, c, RN(e·s)).
    hn::StoreU(Fma(v, hn::Load(d, cd), hn::Mul(hn::Shuffle2301(v), hn::Load(d, sd))), d, out + i);
  }
#endif
  for (; i < 2 * n; i += 2)
    rope_pair(x[i], x[i + 1], c[i / 2], kInverse ? -s[i / 2] : s[i / 2], &out[i], &out[i + 1]);
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
