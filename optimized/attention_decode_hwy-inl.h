// The dequantisation of sparse_mla_attention (attention.md §2.4) for Highway per-target code: the
// gathered rows of a block into fp32 rows and the bf16 layouts of optimized/attention_kernel.hpp
// (DecodeBlock), the bf16 layouts alone straight from the codes for bf16-exact rows
// (DecodeBlockBf16, the same bits), and the tests of exactness. optimized/attention_hwy.cpp runs
// them; property_tests/prop_attention_decode_hwy.cpp checks DecodeBlockBf16 against DecodeBlock on
// every target.
// Include after <hwy/highway.h>, inside a file compiled once per target (foreach_target.h).

#if defined(DSV4CPU_OPTIMIZED_ATTENTION_DECODE_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DSV4CPU_OPTIMIZED_ATTENTION_DECODE_HWY_INL_H_
#undef DSV4CPU_OPTIMIZED_ATTENTION_DECODE_HWY_INL_H_
#else
#define DSV4CPU_OPTIMIZED_ATTENTION_DECODE_HWY_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hwy/highway.h>

#include "args/fp8_ds_mla.hpp"
#include "optimized/attention_kernel.hpp"
#include "optimized/numerics_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

constexpr size_t kN = kMaxLanesF;               // lanes per vector
using D16 = hn::Rebind<uint16_t, DF>;
using D8 = hn::Rebind<uint8_t, DF>;
using DI = hn::RebindToSigned<DF>;

// ---- dequantisation (attention.md §2.4) ----

// The kN values d .. d + kN − 1 of one row (d a multiple of kN). NoPE: the e4m3 value (E ≥ 1: the
// code's bits rebiased by +120 in the exponent; E = 0: m·2⁻⁹, or ±2⁻⁷·(1 + m/8) with vllm, which
// is the rebiased form too), times the tile factor `scale[d / 64]` (tile_scale), in vllm rounded
// to bf16 and +0 for a tile with byte 0. RoPE: the bf16 value widened.
HWY_INLINE VF DecodeChunk(const uint8_t* data, const uint8_t* bytes, const float* scale, bool vllm,
                          size_t d) {
  const DF df;
  const DU du;
  if (d >= static_cast<size_t>(kMlaNope)) {
    uint16_t rope[kN];
    std::memcpy(rope, data + kMlaNope + 2 * (d - kMlaNope), sizeof rope);  // little-endian host
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(D16(), rope))));
  }
  const size_t tile = d / kMlaTile;
  if (vllm && bytes[tile] == 0) return hn::Zero(df);
  const VU c = hn::PromoteTo(du, hn::LoadU(D8(), data + d));
  const VU mag = hn::And(c, hn::Set(du, 0x7Fu));
  VF v = hn::BitCast(df, hn::Add(hn::ShiftLeft<20>(mag), hn::Set(du, 120u << 23)));
  if (!vllm) {
    const VF sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(DI(), mag)), hn::Set(df, 0x1p-9f));
    v = hn::IfThenElse(hn::RebindMask(df, hn::Lt(mag, hn::Set(du, 8u))), sub, v);
  }
  v = hn::Or(v, hn::BitCast(df, hn::ShiftLeft<24>(hn::And(c, hn::Set(du, 0x80u)))));
  v = hn::IfThenElse(hn::RebindMask(df, hn::Eq(mag, hn::Set(du, 0x7Fu))),
                     SetBits(0x7FC00000u), v);  // NaN codes
  v = hn::Mul(v, hn::Set(df, scale[tile]));
  return vllm ? RoundBf16(v) : v;
}

// The lanes of v (bf16 patterns in 16-bit lanes) that are subnormals: exponent field 0,
// mantissa not 0.
template <class D16>
HWY_INLINE hn::Mask<D16> SubnormalBf16(D16 d16, hn::Vec<D16> v) {
  return hn::And(hn::Eq(hn::And(v, hn::Set(d16, 0x7F80)), hn::Zero(d16)),
                 hn::Ne(hn::And(v, hn::Set(d16, 0x007F)), hn::Zero(d16)));
}

// Whether the n bf16 values hold a subnormal.
bool HasSubnormalBf16(const uint16_t* x, size_t n) {
  const hn::ScalableTag<uint16_t> d16;
  using V16 = hn::Vec<decltype(d16)>;
  V16 any = hn::Zero(d16);
  for (size_t i = 0; i < n; i += hn::Lanes(d16))
    any = hn::Or(any, hn::VecFromMask(d16, SubnormalBf16(d16, hn::LoadU(d16, x + i))));
  return !hn::AllTrue(d16, hn::Eq(any, hn::Zero(d16)));
}

// Whether a row's values are exact normal bf16 numbers (or zero) for the bf16 products.
bool RowBf16Exact(const uint8_t* data, const uint8_t* bytes, bool vllm) {
  for (int k = 0; k < kMlaTiles; ++k)
    if (!ScaleByteBf16Exact(bytes[k], vllm)) return false;
  uint16_t rope[kMlaRope];
  std::memcpy(rope, data + kMlaNope, sizeof rope);  // little-endian host
  return !HasSubnormalBf16(rope, kMlaRope);
}

// Dequantises the n rows `data`, `scales` into the requested layouts: fp32 rows (`rows`, kF32Row
// apart), bf16 rows (`krows`, zero rows up to a multiple of kRowAlign) and row pairs (`vpairs`,
// zero pairs up to a multiple of 16 pairs). Returns false when a value is NaN or infinite.
bool DecodeBlock(const uint8_t* const* data, const uint8_t* const* scales, int64_t n,
                 NopeDecode mode, float* rows, uint16_t* krows, uint32_t* vpairs) {
  const DF df;
  const DU du;
  const bool vllm = mode == NopeDecode::vllm;
  VU emax = hn::Zero(du);  // the largest exponent field seen
  for (int64_t i = 0; 2 * i < n; ++i) {
    const int64_t j = 2 * i;
    const bool second = j + 1 < n;
    PrefetchPairAhead(data, scales, j, n);
    float scale_a[kMlaTiles], scale_b[kMlaTiles];
    for (int k = 0; k < kMlaTiles; ++k) {
      scale_a[k] = tile_scale(scales[j][k], mode);
      scale_b[k] = second ? tile_scale(scales[j + 1][k], mode) : 0.0f;
    }
    for (size_t d = 0; d < static_cast<size_t>(kMlaDim); d += kN) {
      const VF a = DecodeChunk(data[j], scales[j], scale_a, vllm, d);
      const VF vb = second ? DecodeChunk(data[j + 1], scales[j + 1], scale_b, vllm, d)
                           : hn::Zero(df);
      const VU ab = hn::BitCast(du, a), bb = hn::BitCast(du, vb);
      const VU exp_mask = hn::Set(du, 0x7F800000u);
      emax = hn::Max(emax, hn::Max(hn::And(ab, exp_mask), hn::And(bb, exp_mask)));
      if (rows) {
        hn::Store(a, df, rows + j * kF32Row + d);
        if (second) hn::Store(vb, df, rows + (j + 1) * kF32Row + d);
      }
      if (krows) {
        hn::StoreU(hn::TruncateTo(D16(), hn::ShiftRight<16>(ab)), D16(), krows + j * kKRow + d);
        hn::StoreU(hn::TruncateTo(D16(), hn::ShiftRight<16>(bb)), D16(),
                   krows + (j + 1) * kKRow + d);
        hn::Store(hn::Or(hn::ShiftRight<16>(ab), hn::And(bb, hn::Set(du, 0xFFFF0000u))), du,
                  vpairs + d / 64 * kVpBlock + i * 64 + d % 64);
      }
    }
  }
  if (krows) PadBf16Layouts(n, krows, vpairs);
  return hn::AllFalse(du, hn::Eq(emax, hn::Set(du, 0x7F800000u)));
}

#if HWY_TARGET != HWY_SCALAR
// The row pair words (Vp of attention_kernel.hpp) of one vector of dims of two bf16 rows, a and b:
// word k at w[k] holds a's value k in the low half and b's in the high half.
template <class DW>
HWY_INLINE void StorePairWords(DW dw, hn::Vec<DW> a, hn::Vec<DW> b, uint32_t* w) {
  const hn::Half<DW> dh;
  const hn::Repartition<uint32_t, DW> d32;
  hn::StoreU(hn::Or(hn::PromoteTo(d32, hn::LowerHalf(dh, a)),
                    hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LowerHalf(dh, b)))),
             d32, w);
  hn::StoreU(hn::Or(hn::PromoteTo(d32, hn::UpperHalf(dh, a)),
                    hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::UpperHalf(dh, b)))),
             d32, w + hn::Lanes(dw) / 2);
}

// DecodeBlock for blocks of bf16-exact rows (RowBf16Exact) when only the bf16 layouts are
// wanted: the same krows and vpairs and the same finiteness, computed on the codes in 16-bit lanes
// (an AttentionKernel may bring its own: decode_bf16), but for the zero rows and pairs after the
// rows (and the pad row of an odd n), which the caller adds where it needs them (PadBf16Layouts).
// Whether the rows are exact it finds on the way (Bf16Decode::not_exact), so that the driver reads
// them once.
// With every scale byte in [10, 246], a NoPE value is a normal bf16 whose bits are those of the
// code's e4m3 value (bf16_of_code: E ≥ 1 rebiased by +120, E = 0 normalised; vllm: the rebiased
// form for every code) with the tile's exponent s − 127 added; a vllm tile with byte 0 is +0.
// So the only non-finite values are NaN codes (outside vllm +0 tiles) and non-finite RoPE values.
Bf16Decode DecodeBlockBf16(const uint8_t* const* data, const uint8_t* const* scales, int64_t n,
                           bool vllm, uint16_t* krows, uint32_t* vpairs) {
  const hn::ScalableTag<uint16_t> dw;
  const hn::Rebind<uint8_t, decltype(dw)> db;
  using VW = hn::Vec<decltype(dw)>;
  constexpr size_t kW = HWY_LANES(uint16_t);
  static_assert(kMlaTile % kW == 0, "a vector of codes lies in one tile");
  const VW mag_mask = hn::Set(dw, 0x7F), sign = hn::Set(dw, 0x8000), exponent = hn::Set(dw, 0x7F80);
  VW bad = hn::Zero(dw);        // NaN codes, non-finite RoPE values
  VW subnormal = hn::Zero(dw);  // subnormal RoPE values
  bool bytes_exact = true;      // every scale byte in [10, 246] (or 0 with vllm)
  auto decode = [&](const uint8_t* row, const uint8_t* bytes, size_t d) -> VW {
    if (d >= static_cast<size_t>(kMlaNope)) {
      uint16_t rope[kW];
      std::memcpy(rope, row + kMlaNope + 2 * (d - kMlaNope), sizeof rope);  // little-endian host
      const VW v = hn::LoadU(dw, rope);
      bad = hn::Or(bad, hn::VecFromMask(dw, hn::Eq(hn::And(v, exponent), exponent)));
      subnormal = hn::Or(subnormal, hn::VecFromMask(dw, SubnormalBf16(dw, v)));
      return v;
    }
    const uint8_t b = bytes[d / kMlaTile];
    bytes_exact &= ScaleByteBf16Exact(b, vllm);
    if (vllm && b == 0) return hn::Zero(dw);
    const VW c = hn::PromoteTo(dw, hn::LoadU(db, row + d));
    const VW mag = hn::And(c, mag_mask);
    VW v = hn::Add(hn::ShiftLeft<4>(mag), hn::Set(dw, 120 << 7));
    if (!vllm) {  // E = 0: m ≥ 4: 2⁻⁷·(m/4); m ≥ 2: 2⁻⁸·(m/2); m = 1: 2⁻⁹; m = 0: zero
      const VW m4 = hn::Add(hn::ShiftLeft<5>(mag), hn::Set(dw, (120 << 7) - (4 << 5)));
      const VW m2 = hn::Add(hn::ShiftLeft<6>(mag), hn::Set(dw, (119 << 7) - (2 << 6)));
      const VW m1 = hn::IfThenElseZero(hn::Eq(mag, hn::Set(dw, 1)), hn::Set(dw, 118 << 7));
      const VW sub = hn::IfThenElse(hn::Lt(mag, hn::Set(dw, 4)),
                                    hn::IfThenElse(hn::Lt(mag, hn::Set(dw, 2)), m1, m2), m4);
      v = hn::IfThenElse(hn::Lt(mag, hn::Set(dw, 8)), sub, v);
    }
    // The tile's exponent (modulo 2¹⁶: s − 127 may be negative), then zero and sign.
    v = hn::Add(v, hn::Set(dw, static_cast<uint16_t>((b - 127) * 128)));
    if (!vllm) v = hn::IfThenZeroElse(hn::Eq(mag, hn::Zero(dw)), v);
    bad = hn::Or(bad, hn::VecFromMask(dw, hn::Eq(mag, mag_mask)));
    return hn::Or(v, hn::And(hn::ShiftLeft<8>(c), sign));
  };
  for (int64_t i = 0; 2 * i < n; ++i) {
    const int64_t j = 2 * i;
    const bool second = j + 1 < n;
    PrefetchPairAhead(data, scales, j, n);
    for (size_t d = 0; d < static_cast<size_t>(kMlaDim); d += kW) {
      const VW a = decode(data[j], scales[j], d);
      const VW b = second ? decode(data[j + 1], scales[j + 1], d) : hn::Zero(dw);
      hn::StoreU(a, dw, krows + j * kKRow + d);
      hn::StoreU(b, dw, krows + (j + 1) * kKRow + d);
      StorePairWords(dw, a, b, vpairs + d / 64 * kVpBlock + i * 64 + d % 64);
    }
  }
  if (!bytes_exact || !hn::AllFalse(dw, hn::Ne(subnormal, hn::Zero(dw))))
    return Bf16Decode::not_exact;
  return hn::AllFalse(dw, hn::Ne(bad, hn::Zero(dw))) ? Bf16Decode::ok : Bf16Decode::not_finite;
}
#endif

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // DSV4CPU_OPTIMIZED_ATTENTION_DECODE_HWY_INL_H_
