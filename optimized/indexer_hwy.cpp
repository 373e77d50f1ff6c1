// Highway variants of the indexer for every x86 target: the fp32 logits kernel (indexer.md §4.3,
// exact fp8 decode, fma dot products with heads in the lanes; within numerics.md §11.6) and
// fused_indexer_q_rope_quant (§2, bit-exact with the reference through the vector forms of
// optimized/numerics_hwy-inl.h).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "args/indexer.hpp"
#include "core/check.hpp"
#include "dsv4cpu/numerics.hpp"
#include "optimized/indexer_logits.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/indexer_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "optimized/numerics_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::RebindToSigned<DF>;
using D8 = hn::Rebind<uint8_t, DF>;  // one code per fp32 lane
constexpr int64_t kDim = kIndexerHeadDim;

// numerics.md §3.1 for Lanes codes, exact in fp32: E ≠ 0 by rebiasing the exponent field, E = 0
// (m·2⁻⁹) by an exact int -> float conversion. The NaN codes give ±480; `nan` collects them.
HWY_INLINE VF DecodeE4m3(const uint8_t* codes, VU& nan) {
  const DF d;
  const DU du;
  const VU c = hn::PromoteTo(du, hn::LoadU(D8(), codes));
  const VU mag = hn::And(c, hn::Set(du, 0x7Fu));
  const VU normal = hn::Add(hn::ShiftLeft<20>(mag), hn::Set(du, 120u << 23));
  const VF sub = hn::Mul(hn::ConvertTo(d, hn::BitCast(DI(), mag)), hn::Set(d, 0x1p-9f));
  const auto is_sub = hn::RebindMask(du, hn::Lt(hn::BitCast(DI(), mag), hn::Set(DI(), 8)));
  const VU bits = hn::IfThenElse(is_sub, hn::BitCast(du, sub), normal);
  nan = hn::Or(nan, hn::VecFromMask(du, hn::Eq(mag, hn::Set(du, 0x7Fu))));
  return hn::BitCast(d, hn::Or(bits, hn::ShiftLeft<24>(hn::And(c, hn::Set(du, 0x80u)))));
}

// 128 codes -> out[0..127]; true iff one is a NaN code.
HWY_INLINE bool DecodeRow(const uint8_t* codes, float* HWY_RESTRICT out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VU nan = hn::Zero(DU());
  for (size_t i = 0; i < static_cast<size_t>(kDim); i += N)
    hn::Store(DecodeE4m3(codes + i, nan), d, out + i);
  return !hn::AllFalse(DU(), hn::Ne(nan, hn::Zero(DU())));
}

// LogitsKernel::prepare: the query row transposed, qt[d·Hp + h] (heads H .. Hp − 1 zero).
void PrepareRowF32(const uint8_t* q, const float* w, int64_t H, int64_t Hp, void* q_out,
                   float* w_out) {
  float* qt = static_cast<float*>(q_out);
  HWY_ALIGN float row[kDim];
  for (int64_t h = 0; h < Hp; ++h) {
    if (h < H) {
      DecodeRow(q + h * kDim, row);  // NaN query codes are bad input, rejected by validation
    } else {
      std::fill(row, row + kDim, 0.0f);
    }
    for (int64_t dd = 0; dd < kDim; ++dd) qt[dd * Hp + h] = row[dd];
    w_out[h] = h < H ? w[h] : 0.0f;
  }
}

// Register block: NK keys × G vectors of heads. acc = Σ_d q·k by MulAdd (each q·k is exact, so
// fused or not every step rounds once); then per key hsum[lane] += w·relu(acc) over the G vectors.
template <size_t G, size_t NK>
void Micro(const float* HWY_RESTRICT kf, const float* HWY_RESTRICT qt, int64_t Hp, int64_t h0,
           const float* HWY_RESTRICT w, float* HWY_RESTRICT hsum) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF acc[NK][G];
  for (size_t k = 0; k < NK; ++k)
    for (size_t g = 0; g < G; ++g) acc[k][g] = hn::Zero(d);
  for (int64_t dd = 0; dd < kDim; ++dd) {
    VF qv[G];
    for (size_t g = 0; g < G; ++g) qv[g] = hn::Load(d, qt + dd * Hp + h0 + g * N);
    for (size_t k = 0; k < NK; ++k) {
      const VF kv = hn::Set(d, kf[k * kDim + dd]);
      for (size_t g = 0; g < G; ++g) acc[k][g] = hn::MulAdd(qv[g], kv, acc[k][g]);
    }
  }
  const VF zero = hn::Zero(d);
  for (size_t k = 0; k < NK; ++k) {
    VF hs = hn::Load(d, hsum + k * 16);
    for (size_t g = 0; g < G; ++g)
      hs = hn::MulAdd(hn::LoadU(d, w + h0 + g * N), hn::Max(acc[k][g], zero), hs);
    hn::Store(hs, d, hsum + k * 16);
  }
}

constexpr size_t kGroups = 4;                            // head vectors per register block
constexpr size_t kKeys = kMaxLanesF >= 16 ? 6 : 2;        // 32 or 16 vector registers
using MicroFn = void (*)(const float*, const float*, int64_t, int64_t, const float*, float*);

template <size_t G, size_t... K>
constexpr std::array<MicroFn, sizeof...(K)> MicroRow(std::index_sequence<K...>) {
  return {&Micro<G, K + 1>...};
}
// kMicro[G − 1][NK − 1]
constexpr std::array<std::array<MicroFn, kKeys>, kGroups> kMicro = {
    MicroRow<1>(std::make_index_sequence<kKeys>()), MicroRow<2>(std::make_index_sequence<kKeys>()),
    MicroRow<3>(std::make_index_sequence<kKeys>()),
    MicroRow<4>(std::make_index_sequence<kKeys>())};

// LogitsKernel::block: per key the Lanes head-sum lanes are reduced by halving (for 16 lanes the
// tree of numerics.md §8.1), then multiplied by the key scale; NaN keys give NaN.
void BlockF32(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  const DF d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float kf[kKeyBlock * kDim];
  HWY_ALIGN float hsum[kKeyBlock * 16] = {};
  bool nan[kKeyBlock];
  for (int64_t k = 0; k < n; ++k) nan[k] = DecodeRow(keys.codes[k], kf + k * kDim);
  const auto* qt = static_cast<const float*>(row.q);
  const int64_t chunk = static_cast<int64_t>(kGroups) * N;
  // Heads past H rounded up to Lanes are zero padding: skipping them changes nothing.
  const int64_t heads = (row.H + N - 1) / N * N;
  for (int64_t h0 = 0; h0 < heads; h0 += chunk) {
    const int64_t groups = std::min(chunk, heads - h0) / N;
    const auto& micro = kMicro[static_cast<size_t>(groups - 1)];
    for (int64_t k0 = 0; k0 < n; k0 += static_cast<int64_t>(kKeys)) {
      const int64_t nk = std::min(static_cast<int64_t>(kKeys), n - k0);
      micro[static_cast<size_t>(nk - 1)](kf + k0 * kDim, qt, row.Hp, h0, row.w, hsum + k0 * 16);
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    float* l = hsum + k * 16;
    for (int64_t width = N / 2; width >= 1; width /= 2)
      for (int64_t i = 0; i < width; ++i) l[i] = l[i] + l[i + width];
    out[k] = nan[k] && row.H > 0 ? std::numeric_limits<float>::quiet_NaN() : l[0] * keys.scale[k];
  }
}

// indexer.md §2 steps 2–5 for tokens [t0, t1): the codes of every head into codes[th·128 ..] and
// weights_out into w_out[th] (th = t·H + h). The rotation's duplicated cos and signed sin lanes
// (numerics.md §8.5 as optimized/numerics_hwy-inl.h's RopePairs computes it) are built once per
// token and serve its H heads.
void QuantTokens(const FusedIndexerQRopeQuantArgs& a, int64_t t0, int64_t t1, uint8_t* codes,
                 float* w_out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const hn::Rebind<uint8_t, DU> d8;
  const IndexReader positions(a.positions);
  const float* q = a.q.ptr<const float>();
  const float* w = a.weights.ptr<const float>();
  const float* table = a.cos_sin_cache.ptr<const float>();
  HWY_ALIGN float z[64];
#if HWY_TARGET != HWY_SCALAR
  HWY_ALIGN float cd[64], sd[64];
#endif
  for (int64_t t = t0; t < t1; ++t) {
    const float* cs = table + positions(t) * 64;
#if HWY_TARGET != HWY_SCALAR
    for (size_t f = 0; f < 64; ++f) {
      cd[f] = cs[f / 2];
      sd[f] = f % 2 == 0 ? -cs[32 + f / 2] : cs[32 + f / 2];
    }
#endif
    for (int64_t th = t * a.H; th < (t + 1) * a.H; ++th) {
      const float* x = q + th * kDim;
#if HWY_TARGET == HWY_SCALAR
      RopePairs(cs, cs + 32, x + 64, 32, z);
      for (size_t i = 0; i < 64; ++i) z[i] = hn::GetLane(RoundBf16(hn::Set(d, z[i])));
      const float amax = std::max(AbsMax(x, 64), AbsMax(z, 64));
#else
      VF m = hn::Zero(d);  // |x| and |z| together: one reduction per head
      for (size_t i = 0; i < 64; i += N) {
        const VF v = hn::LoadU(d, x + 64 + i);
        const VF r = RoundBf16(
            Fma(v, hn::Load(d, cd + i), hn::Mul(hn::Shuffle2301(v), hn::Load(d, sd + i))));
        hn::Store(r, d, z + i);
        m = hn::Max(m, hn::Max(hn::Abs(r), hn::Abs(hn::LoadU(d, x + i))));
      }
      const float amax = hn::GetLane(hn::MaxOfLanes(d, m));
#endif
      const int e = scale_exponent(amax, ScaleClamp::gpu);  // numerics.md §4, clamp-amax
      const VF inv = hn::Set(d, pow2f(-e));
      uint8_t* c = codes + th * kDim;
      for (size_t i = 0; i < 64; i += N) {
        hn::StoreU(hn::TruncateTo(d8, E4m3Sat(hn::Mul(hn::LoadU(d, x + i), inv))), d8, c + i);
        hn::StoreU(hn::TruncateTo(d8, E4m3Sat(hn::Mul(hn::Load(d, z + i), inv))), d8, c + 64 + i);
      }
      w_out[th] = ((w[th] * pow2f(e)) * a.softmax_scale) * a.head_scale;
    }
  }
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/check_finite.hpp"
#include "core/fallback.hpp"
#include "core/parallel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(PrepareRowF32);
HWY_EXPORT(BlockF32);
HWY_EXPORT(QuantTokens);

namespace {

size_t hwy_q_bytes(int64_t Hp) { return static_cast<size_t>(kIndexerHeadDim * Hp * 4); }

void hwy_prepare(const uint8_t* q, const float* w, int64_t H, int64_t Hp, void* q_out,
                 float* w_out) {
  HWY_DYNAMIC_DISPATCH(PrepareRowF32)(q, w, H, Hp, q_out, w_out);
}

void hwy_block(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(BlockF32)(row, keys, n, out);
}

constexpr LogitsKernel kHwyKernel = {&hwy_q_bytes, &hwy_prepare, &hwy_block, nullptr, nullptr};

}  // namespace

const LogitsKernel& hwy_logits_kernel() { return kHwyKernel; }

// indexer.md §2 in one pass over q: codes and weights_out into scratch (the codes are a quarter of
// q's bytes), the check of the computed weights (a non-finite one hands the call to the
// reference, core/fallback.hpp), then both outputs.
void fused_indexer_q_rope_quant_hwy(const FusedIndexerQRopeQuantArgs& a, const RunContext& ctx) {
  thread_local std::vector<uint8_t> scratch;  // grows to the largest call of the calling thread
  std::vector<float> w_out(static_cast<size_t>(a.T * a.H));
  const size_t n = static_cast<size_t>(a.T * a.H * kIndexerHeadDim);
  scratch.resize(n);
  uint8_t* codes = scratch.data();  // (the workers' thread_local would be their own)
  const int threads = threads_for(ctx.num_threads, a.T * a.H * (kIndexerHeadDim * 5 + 8));
  parallel_ranges(a.T, threads, [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(QuantTokens)(a, t0, t1, codes, w_out.data());
  });
  if (ctx.check_finite &&
      first_non_finite(w_out.data(), static_cast<int64_t>(w_out.size())) <
          static_cast<int64_t>(w_out.size()))
    return hand_over(Fallback::fused_indexer_q_rope_quant, ref::fused_indexer_q_rope_quant, a, ctx);
  std::copy(codes, codes + n, a.q_fp8.ptr<uint8_t>());
  std::copy(w_out.begin(), w_out.end(), a.weights_out.ptr<float>());
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
