// Optimized SWA insert (attention.md §3), written once with Highway and compiled for every target
// of HWY_TARGETS; the driver at the end (HWY_ONCE) runs tokens on OpenMP threads in two passes:
// the first computes the kv entries into scratch and checks every computed value (bad-input.md
// §1.2), the second writes q_out, then the entries. Tokens are independent and every value keeps
// the reference's operation order (optimized/numerics_hwy-inl.h), so the bytes equal the
// reference's on every target and for any thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/attention_insert_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>

#include "args/attention.hpp"
#include "args/fp8_ds_mla.hpp"
#include "core/check.hpp"
#include "optimized/numerics_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

using D16 = hn::Rebind<uint16_t, DF>;
using D8 = hn::Rebind<uint8_t, DF>;

// numerics.md §2: to_bf16 of n fp32 values (n a multiple of Lanes).
HWY_INLINE void StoreBf16(const float* HWY_RESTRICT x, size_t n, uint16_t* HWY_RESTRICT out) {
  const DF d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(hn::TruncateTo(D16(), hn::ShiftRight<16>(Bf16Bits(hn::Load(d, x + i)))), D16(),
               out + i);
}

// attention.md §3.2 for one head: SS (numerics.md §8.2), the RMS scale (§8.3), y = RN(x·inv),
// RoPE (§8.5) on the last 64 dims with table row `cs`; q_out's 512 bf16 values into `out` unless
// it is null. Returns whether ss, the RMS value, inv and every y (normalised, then rotated) are
// finite: a non-finite normalised value of a rotated pair makes both rotated values non-finite.
bool QueryHead(const uint16_t* q, float eps_f, const float* cs, uint16_t* out) {
  const DF d;
  HWY_ALIGN float y[kMlaDim];
  Widen16(q, false, kMlaDim, y);
  const float ss = SumSquares16(y, kMlaDim);
  float rms_t = 0.0f;
  const float inv = rms_inv(ss, kMlaDim, eps_f, &rms_t);
  const VF vinv = hn::Set(d, inv);
  for (size_t i = 0; i < static_cast<size_t>(kMlaDim); i += hn::Lanes(d))
    hn::Store(hn::Mul(hn::Load(d, y + i), vinv), d, y + i);
  RopePairs(cs, cs + 32, y + kMlaNope, 32, y + kMlaNope);
  if (out != nullptr) StoreBf16(y, kMlaDim, out);
  return std::isfinite(ss) && std::isfinite(rms_t) && std::isfinite(inv) && AllFinite(y, kMlaDim);
}

// attention.md §3.3 for one kv row with table row `cs`: the entry's 576 data bytes and 8 scale
// bytes (compressor.md §6.2 step 5 per NoPE tile; `flush`: |y| < 2^-6 stored as its signed zero).
// Returns whether the bf16 roundings of the rotated values are finite (so are the rotated values).
bool KvEntry(const uint16_t* kv, const float* cs, ScaleClamp clamp, bool flush, uint8_t* data,
             uint8_t* scales) {
  const DF d;
  const DU du;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float b[kMlaDim];
  Widen16(kv, false, kMlaDim, b);
  RopePairs(cs, cs + 32, b + kMlaNope, 32, b + kMlaNope);
  HWY_ALIGN uint16_t rope[kMlaRope];
  for (size_t k = 0; k < static_cast<size_t>(kMlaRope); k += N) {
    const VU bits = Bf16Bits(hn::Load(d, b + kMlaNope + k));
    hn::Store(hn::BitCast(d, bits), d, b + kMlaNope + k);
    hn::Store(hn::TruncateTo(D16(), hn::ShiftRight<16>(bits)), D16(), rope + k);
  }
  std::memcpy(data + kMlaNope, rope, sizeof rope);  // little-endian host
  const bool finite = AllFinite(b + kMlaNope, kMlaRope);
  const VF small = hn::Set(d, 0x1p-6f);
  for (int q = 0; q < kMlaTiles; ++q) {
    const float* x = b + q * kMlaTile;
    const int e = scale_exponent(AbsMax(x, kMlaTile), clamp);
    const VF inv_scale = hn::Set(d, pow2f(-e));
    for (size_t i = 0; i < static_cast<size_t>(kMlaTile); i += N) {
      const VF y = hn::Mul(hn::Load(d, x + i), inv_scale);
      VU code = E4m3Sat(y);
      if (flush)
        code = hn::IfThenElse(hn::RebindMask(du, hn::Lt(hn::Abs(y), small)),
                              hn::And(code, hn::Set(du, 0x80u)), code);
      hn::StoreU(hn::U8FromU32(code), D8(), data + q * kMlaTile + i);
    }
    scales[q] = static_cast<uint8_t>(e + 127);  // UE8M0 byte
  }
  scales[kMlaTiles] = 0x00;  // pad byte
  return finite;
}

// Pass 1 for token t: with `check_query`, every head's q path checked; the kv entry into `entry`
// (when not null). Returns whether everything computed is finite (false at the first non-finite
// value: the reference then reruns the call).
bool CheckToken(const FusedQnormRopeKvInsertArgs& a, int64_t t, bool check_query,
                uint8_t* entry) {
  const float* cs = a.cos_sin_cache.ptr<const float>() + IndexReader(a.positions)(t) * 64;
  if (check_query)
    for (int64_t h = 0; h < a.Hq; ++h)
      if (!QueryHead(a.q.ptr<const uint16_t>() + (t * a.Hq + h) * kMlaDim, a.eps_f, cs, nullptr))
        return false;
  return entry == nullptr ||
         KvEntry(a.kv.ptr<const uint16_t>() + t * kMlaDim, cs, a.scale_clamp,
                 a.fp8_subnormals == Fp8Subnormals::flush, entry, entry + kMlaDataBytes);
}

// Pass 2 for token t: its q_out row, heads >= Hq +0.
void WriteQuery(const FusedQnormRopeKvInsertArgs& a, int64_t t) {
  const float* cs = a.cos_sin_cache.ptr<const float>() + IndexReader(a.positions)(t) * 64;
  uint16_t* out = a.q_out.ptr<uint16_t>() + t * a.q_head_padded * kMlaDim;
  for (int64_t h = 0; h < a.Hq; ++h)
    QueryHead(a.q.ptr<const uint16_t>() + (t * a.Hq + h) * kMlaDim, a.eps_f, cs,
              out + h * kMlaDim);
  std::memset(out + a.Hq * kMlaDim, 0,
              static_cast<size_t>((a.q_head_padded - a.Hq) * kMlaDim) * sizeof(uint16_t));
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <vector>

#include "core/fallback.hpp"
#include "core/parallel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(CheckToken);
HWY_EXPORT(WriteQuery);

void fused_qnorm_rope_kv_insert(const FusedQnormRopeKvInsertArgs& a, const RunContext& ctx) {
  if (a.T == 0) return;
  const IndexReader slot(a.slot_mapping);
  // A token is a few KB of work: small calls stay on the calling thread.
  const int64_t min_heads = thresholds().insert_min_heads_per_thread;
  const int threads = ctx.num_threads > 0 ? max_threads(ctx.num_threads)
                      : a.T * (a.Hq + 1) >= 2 * min_heads ? max_threads(0)
                                                          : 1;
  std::vector<uint8_t> entries(static_cast<size_t>(a.T_ins * kMlaEntryBytes));
  std::vector<uint8_t> finite(static_cast<size_t>(a.T), 1);
  const auto check = HWY_DYNAMIC_DISPATCH(CheckToken);
  parallel_for(a.T, threads, [&](int64_t t) {
    uint8_t* entry =
        t < a.T_ins && slot(t) >= 0 ? entries.data() + t * kMlaEntryBytes : nullptr;
    finite[static_cast<size_t>(t)] = check(a, t, ctx.check_finite, entry);
  });
  if (ctx.check_finite && std::find(finite.begin(), finite.end(), 0) != finite.end())
    return hand_over(Fallback::fused_qnorm_rope_kv_insert, ref::fused_qnorm_rope_kv_insert, a, ctx);

  const auto write = HWY_DYNAMIC_DISPATCH(WriteQuery);
  parallel_for(a.T, threads, [&](int64_t t) { write(a, t); });
  const MlaCacheOut cache(a.swa_cache, a.cache_block_size);
  for (int64_t t = 0; t < a.T_ins; ++t) {
    if (slot(t) < 0) continue;
    const uint8_t* entry = entries.data() + t * kMlaEntryBytes;
    std::memcpy(cache.data(slot(t)), entry, kMlaDataBytes);
    std::memcpy(cache.scales(slot(t)), entry + kMlaDataBytes, kMlaScaleBytes);
  }
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
