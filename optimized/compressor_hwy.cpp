// Optimized compressor kernels (compressor.md §3, §4.1, §6, §7), written once with Highway and
// compiled for every target of HWY_TARGETS. The end (HWY_ONCE) holds the "hwy" CompressorKernel
// (pool and finish, run by the compress ops' driver in compressor_driver.cpp) and the drivers of
// save_partial_states and map_local_to_global_slots, which split the work over OpenMP threads;
// all call the per-target code through dynamic dispatch.
//
// Bit-exactness with the reference: channels are independent, so vectors run across channels and
// every per-channel sequence (pooling over w ascending, numerics.md §8.4) keeps the reference's
// order; the sum of squares keeps 16 explicit fma lanes and the §8.1 tree; every fma is one
// rounding on every target (optimized/numerics_hwy-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/compressor_hwy.cpp"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "args/compressor.hpp"
#include "core/check.hpp"
#include "core/fill.hpp"
#include "optimized/numerics_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

// compressor.md §3.3 for tokens [t0, t1): kv bit copy, RN(score + ape). `stream`: non-temporal
// stores where the row is aligned (rows far larger than the caches, read by a later call).
// `last_first`: the tokens in descending order (the slots are distinct, so the order is not seen).
void SaveRows(const SavePartialStatesArgs& a, int64_t t0, int64_t t1, bool stream,
              bool last_first) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  const size_t SW = static_cast<size_t>(a.SW);
  for (int64_t k = t0; k < t1; ++k) {
    const int64_t t = last_first ? t0 + t1 - 1 - k : k;
    const int64_t g = slot(t);
    if (g < 0) continue;
    const float* kv = a.kv.ptr<const float>() + t * a.kv.stride(0);
    const float* score = a.score.ptr<const float>() + t * a.score.stride(0);
    const float* ape = a.ape.ptr<const float>() + (pos(t) % a.r) * a.SW;
    float* row = a.state_cache.ptr<float>() + (g / a.sbs) * a.state_cache.stride(0) +
                 (g % a.sbs) * 2 * a.SW;
    if (stream && reinterpret_cast<uintptr_t>(row) % 64 == 0) {
      for (size_t i = 0; i < SW; i += N) {
        hn::Stream(hn::LoadU(d, kv + i), d, row + i);
        hn::Stream(hn::Add(hn::LoadU(d, score + i), hn::LoadU(d, ape + i)), d, row + SW + i);
      }
      continue;
    }
    // Two loops: kv and score rows often lie 4 KiB apart, as do the halves of a state row, and a
    // load right after a store at the same address modulo 4 KiB waits for the store.
    for (size_t i = 0; i < SW; i += N) hn::StoreU(hn::LoadU(d, kv + i), d, row + i);
    for (size_t i = 0; i < SW; i += N)
      hn::StoreU(hn::Add(hn::LoadU(d, score + i), hn::LoadU(d, ape + i)), d, row + SW + i);
  }
  if (stream) hwy::FlushStream();
}

// compressor.md §4.1 for one local l of a block-table row, P = 2^shift.
template <class TL, class TB>
HWY_INLINE int64_t SlotOf(TL l, const TB* row, int shift) {
  return l < 0 ? -1
               : (static_cast<int64_t>(row[l >> shift]) << shift) |
                     (l & static_cast<TL>((int64_t{1} << shift) - 1));
}

// compressor.md §4.1 for one row of K locals of the table's own width T with P = 2^shift: the
// entries gathered by column (lanes of negative locals gather column 0 and write -1), widened to
// the int64 slots entry·P + l % P; `stream`: non-temporal stores (when the row is aligned).
// Returns the number of locals >= 0.
template <class T>
int64_t MapRowGather(const T* HWY_RESTRICT l, int64_t K, const T* HWY_RESTRICT row, int64_t MB,
                     int shift, int64_t* HWY_RESTRICT out, bool stream) {
  int64_t k = 0, negatives = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<T> d;
  const hn::ScalableTag<int64_t> d64;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const auto offset = hn::Set(d64, (int64_t{1} << shift) - 1);
  const auto align = static_cast<uintptr_t>(hn::Lanes(d64) * 8);
  if (stream)  // up to the first aligned slot one by one (rows of 8-byte slots)
    for (; k < K && reinterpret_cast<uintptr_t>(out + k) % align != 0; ++k) {
      out[k] = SlotOf(l[k], row, shift);
      negatives += l[k] < 0;
    }
  // int64 lanes; a negative local comes with entry and local -1, whose slot is -1.
  const auto slots = [&](auto entry, auto local, int64_t* to) {
    const auto slot = hn::OrAnd(hn::ShiftLeftSame(entry, shift), local, offset);
    if (stream)
      hn::Stream(slot, d64, to);
    else
      hn::StoreU(slot, d64, to);
  };
  // When every column the row reads lies in one window of N columns (the rows of a short request,
  // or of consecutive locals), the entries come from one vector by a lane permutation.
  const hn::RebindToUnsigned<decltype(d)> du;
  auto top = hn::Set(d, T{-1});
  auto bottom =
      hn::Set(du, std::numeric_limits<hn::TFromD<decltype(du)>>::max());  // negatives last
  int64_t j = k;
  for (; j + N <= K; j += N) {
    const auto v = hn::LoadU(d, l + j);
    top = hn::Max(top, v);
    bottom = hn::Min(bottom, hn::BitCast(du, v));
  }
  int64_t hi = hn::GetLane(hn::MaxOfLanes(d, top));
  auto lo = static_cast<uint64_t>(hn::GetLane(hn::MinOfLanes(du, bottom)));
  for (; j < K; ++j) {
    hi = std::max<int64_t>(hi, l[j]);
    if (l[j] >= 0) lo = std::min<uint64_t>(lo, static_cast<uint64_t>(l[j]));
  }
  int64_t window = -1;  // the first column of the window, or -1: gather
  if (hi >= 0 && MB >= N && (hi >> shift) - static_cast<int64_t>(lo >> shift) < N)
    window = std::min<int64_t>(static_cast<int64_t>(lo >> shift), MB - N);
  const auto table = window >= 0 ? hn::LoadU(d, row + window) : hn::Zero(d);
  const auto first = hn::Set(d, static_cast<T>(std::max<int64_t>(window, 0)));
  const auto minus_one = hn::Set(d, T{-1});
  auto negative_lanes = hn::Zero(d);  // per lane, the negative locals it has seen
  for (; k + N <= K; k += N) {
    const auto local = hn::LoadU(d, l + k);
    const auto negative = hn::Lt(local, hn::Zero(d));
    negative_lanes = hn::Sub(negative_lanes, hn::VecFromMask(d, negative));
    const auto col = hn::IfThenZeroElse(negative, hn::ShiftRightSame(local, shift));
    const auto entry = hn::IfThenElse(
        negative, minus_one,
        window >= 0
            ? hn::TableLookupLanes(
                  table, hn::IndicesFromVec(d, hn::IfThenZeroElse(negative, hn::Sub(col, first))))
            : hn::GatherIndex(d, row, col));
    const auto v = hn::IfThenElse(negative, minus_one, local);
    if constexpr (sizeof(T) == 8) {
      slots(entry, v, out + k);
    } else {
      const hn::Half<decltype(d)> dh;
      const auto N64 = static_cast<int64_t>(hn::Lanes(d64));
      slots(hn::PromoteTo(d64, hn::LowerHalf(dh, entry)), hn::PromoteTo(d64, hn::LowerHalf(dh, v)),
            out + k);
      slots(hn::PromoteTo(d64, hn::UpperHalf(dh, entry)), hn::PromoteTo(d64, hn::UpperHalf(dh, v)),
            out + k + N64);
    }
  }
  negatives += static_cast<int64_t>(hn::GetLane(hn::SumOfLanes(d, negative_lanes)));
#endif
  (void)stream;
  (void)MB;
  for (; k < K; ++k) {
    out[k] = SlotOf(l[k], row, shift);
    negatives += l[k] < 0;
  }
  return K - negatives;
}

// compressor.md §4.1 for rows [n0, n1), with the element types as template arguments: a vector
// gather when the locals and the table share their width and P is a power of two, else a shift
// (power-of-two P) or a division per element. `valid` (when not null): each row's count of locals
// >= 0 at valid[n].
template <class TL, class TB>
void MapRowsT(const MapLocalToGlobalSlotsArgs& a, int64_t n0, int64_t n1, bool stream,
              int32_t* valid) {
  const TL* local = a.local_indices.ptr<const TL>();
  const TB* bt = a.block_table.ptr<const TB>();
  const int64_t ls = a.local_indices.stride(0), bs = a.block_table.stride(0), K = a.K;
  const int64_t P = a.block_size;
  const IndexReader req(a.req_idx);
  int64_t* out = a.slots.ptr<int64_t>();
  const auto count = [&](int64_t n, int64_t c) {
    if (valid) valid[n] = static_cast<int32_t>(c);
  };
  if ((P & (P - 1)) == 0) {
    int shift = 0;
    while ((int64_t{1} << shift) < P) ++shift;
    if constexpr (std::is_same_v<TL, TB>) {
      if (a.block_table.size(1) >= 1) {
        // Outputs far larger than the caches (`stream`) are written last row first: the locals
        // the validation has just read in ascending order are still cached from the end. The
        // next row's locals are fetched while this row's slots are stored.
        for (int64_t i = n0; i < n1; ++i) {
          const int64_t n = stream ? n1 - 1 - (i - n0) : i;
          const int64_t next = stream ? n - 1 : n + 1;
          if (next >= n0 && next < n1)
            for (int64_t k = 0; k < K; k += 64 / sizeof(TL)) hwy::Prefetch(local + next * ls + k);
          count(n, MapRowGather(local + n * ls, K, bt + req(n) * bs, a.block_table.size(1), shift,
                                out + n * K, stream));
        }
        if (stream) hwy::FlushStream();
        return;
      }
    }
    for (int64_t n = n0; n < n1; ++n) {
      const TB* row = bt + req(n) * bs;
      const TL* l = local + n * ls;
      int64_t c = 0;
      for (int64_t k = 0; k < K; ++k) {
        out[n * K + k] = SlotOf(l[k], row, shift);
        c += l[k] >= 0;
      }
      count(n, c);
    }
    return;
  }
  for (int64_t n = n0; n < n1; ++n) {
    const TB* row = bt + req(n) * bs;
    const TL* l = local + n * ls;
    int64_t c = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t v = l[k];
      out[n * K + k] = v < 0 ? -1 : static_cast<int64_t>(row[v / P]) * P + v % P;
      c += v >= 0;
    }
    count(n, c);
  }
}

void MapRows(const MapLocalToGlobalSlotsArgs& a, int64_t n0, int64_t n1, bool stream,
             int32_t* valid) {
  const bool l64 = a.local_indices.dtype() == DType::I64;
  const bool b64 = a.block_table.dtype() == DType::I64;
  if (l64 && b64) return MapRowsT<int64_t, int64_t>(a, n0, n1, stream, valid);
  if (l64) return MapRowsT<int64_t, int32_t>(a, n0, n1, stream, valid);
  if (b64) return MapRowsT<int32_t, int64_t>(a, n0, n1, stream, valid);
  MapRowsT<int32_t, int32_t>(a, n0, n1, stream, valid);
}

// numerics.md §8.4 for channels [d0, d1) over the `valid` window rows kv[j], score[j] (ascending
// w): c[d] = RN(acc / den). Two loop orders with the same per-channel sequence:
// - short windows (C4A, 8 rows): blocks of kBlockVectors vectors of channels, rows inner, the
//   block's max, den and acc in registers;
// - long windows (C128A, 128 rows): rows outer, each row's contiguous channel range streamed once
//   per pass (hardware prefetch follows it), max, den and acc in an L1-resident scratch.
// The exponent's argument RN(s − m) is ≤ 0 (ExpLib<true>), except in a channel whose scores hold
// a NaN, which the vector max can skip; that channel's den and c are NaN whatever e is.
constexpr size_t kBlockVectors = 4;
constexpr size_t kShortWindow = 16;
constexpr size_t kLineFloats = 64 / sizeof(float);  // one cache line
constexpr size_t kRowsAhead = 4;

// `next_kv`, `next_score`: the `next` rows the next work item pools (0: none); PoolShort moves
// them into L2 block by block while it pools its own, so that their scattered pages arrive in time.
void PoolShort(const float* const* kv, const float* const* score, size_t valid, size_t d0,
               size_t d1, float* c, const float* const* next_kv, const float* const* next_score,
               size_t next) {
  const DF d;
  const size_t N = hn::Lanes(d);
  for (size_t base = d0; base < d1; base += kBlockVectors * N) {
    VF m[kBlockVectors], den[kBlockVectors], acc[kBlockVectors];
    for (size_t u = 0; u < kBlockVectors; ++u) m[u] = hn::LoadU(d, score[0] + base + u * N);
    for (size_t j = 1; j < valid; ++j)
      for (size_t u = 0; u < kBlockVectors; ++u)
        m[u] = hn::Max(m[u], hn::LoadU(d, score[j] + base + u * N));
    for (size_t u = 0; u < kBlockVectors; ++u) den[u] = acc[u] = hn::Zero(d);
    for (size_t j = 0; j < valid; ++j) {
      // The next token's lines of this block, a few per step (a burst would fill the miss
      // buffers and stall the loads of this block).
      if (j < next)
        for (size_t off = 0; off < kBlockVectors * N; off += kLineFloats) {
          __builtin_prefetch(next_score[j] + base + off, 0, 2);
          __builtin_prefetch(next_kv[j] + base + off, 0, 2);
        }
      for (size_t u = 0; u < kBlockVectors; ++u) {
        const VF e = ExpLib<true>(hn::Sub(hn::LoadU(d, score[j] + base + u * N), m[u]));
        den[u] = hn::Add(den[u], e);
        acc[u] = Fma(e, hn::LoadU(d, kv[j] + base + u * N), acc[u]);
      }
    }
    for (size_t u = 0; u < kBlockVectors; ++u)
      hn::StoreU(hn::Div(acc[u], den[u]), d, c + base + u * N);
  }
}

void PoolLong(const float* const* kv, const float* const* score, size_t valid, size_t d0,
              size_t d1, float* c) {
  const DF d;
  const size_t N = hn::Lanes(d), n = d1 - d0;
  HWY_ALIGN float m[512], den[512], acc[512];
  for (size_t i = 0; i < n; i += N) {
    hn::Store(hn::LoadU(d, score[0] + d0 + i), d, m + i);
    hn::Store(hn::Zero(d), d, den + i);
    hn::Store(hn::Zero(d), d, acc + i);
  }
  // Each row is a new page: row j + kRowsAhead is requested while row j is processed, one line
  // per line processed (a burst of a row's lines would fill the miss buffers and stall).
  const size_t step = std::max(kLineFloats, N);
  for (size_t j = 1; j < valid; ++j) {
    const float* ahead = j + kRowsAhead < valid ? score[j + kRowsAhead] + d0 : nullptr;
    for (size_t line = 0; line < n; line += step) {
      if (ahead) hwy::Prefetch(ahead + line);
      for (size_t i = line; i < line + step; i += N)
        hn::Store(hn::Max(hn::Load(d, m + i), hn::LoadU(d, score[j] + d0 + i)), d, m + i);
    }
  }
  for (size_t j = 0; j < valid; ++j) {
    const float* ahead = j + kRowsAhead < valid ? kv[j + kRowsAhead] + d0 : nullptr;
    for (size_t line = 0; line < n; line += step) {
      if (ahead) hwy::Prefetch(ahead + line);
      for (size_t i = line; i < line + step; i += N) {
        const VF e = ExpLib<true>(hn::Sub(hn::LoadU(d, score[j] + d0 + i), hn::Load(d, m + i)));
        hn::Store(hn::Add(hn::Load(d, den + i), e), d, den + i);
        hn::Store(Fma(e, hn::LoadU(d, kv[j] + d0 + i), hn::Load(d, acc + i)), d, acc + i);
      }
    }
  }
  for (size_t i = 0; i < n; i += N)
    hn::StoreU(hn::Div(hn::Load(d, acc + i), hn::Load(d, den + i)), d, c + d0 + i);
}

// Channels [d0, d1) are multiples of 64 within 512.
void Pool(const float* const* kv, const float* const* score, size_t valid, size_t d0, size_t d1,
          float* c, const float* const* next_kv, const float* const* next_score, size_t next) {
  if (valid <= kShortWindow)
    PoolShort(kv, score, valid, d0, d1, c, next_kv, next_score, next);
  else
    PoolLong(kv, score, valid, d0, d1, c);
}

// compressor.md §6.2 steps 2-5 (head 512) or §7 (head 128) for the token at position p, from its
// pooled vector c. Writes the entry's data-region bytes to `data` and its scale-region bytes to
// `scale`; returns whether every checked intermediate (c, ss, the RMS value, inv, n, the rotated
// values and all bf16 roundings) is finite. n and the rotated values need no test of their own:
// to_bf16 of a non-finite value is non-finite.
bool Finish(const CompressNormRopeStoreArgs& a, int64_t p, const float* c, uint8_t* data,
            uint8_t* scale) {
  const DF d;
  const DU du;
  const hn::Rebind<uint8_t, DF> d8;
  const size_t N = hn::Lanes(d);
  const EntryLayout& L = a.layout;
  const size_t HD = static_cast<size_t>(L.hd), nope = static_cast<size_t>(L.nope);
  bool finite = AllFinite(c, HD);

  // RMSNorm, numerics.md §8.2-§8.3.
  const float ss = SumSquares16(c, HD);
  float rms_t = 0.0f;
  const float inv = rms_inv(ss, L.hd, a.eps_f, &rms_t);
  finite = finite && std::isfinite(ss) && std::isfinite(rms_t) && std::isfinite(inv);
  const float* weight = a.rms_norm_weight.ptr<const float>();
  HWY_ALIGN float n[512];
  HWY_ALIGN float v[512];  // the bf16-rounded vector: NoPE dims, then the rotated dims
  const VF vinv = hn::Set(d, inv);
  for (size_t i = 0; i < HD; i += N) {
    const VF x = hn::Mul(hn::Mul(hn::LoadU(d, c + i), vinv), hn::LoadU(d, weight + i));
    hn::Store(x, d, n + i);
    if (i < nope) hn::Store(RoundBf16(x), d, v + i);
  }
  // RoPE on n[nope..HD) with table row rope_row(p, r), then bf16 (interleaved order kept).
  const float* cs = a.cos_sin_cache.ptr<const float>() + rope_row(p, a.compress_ratio) * 64;
  RopePairs(cs, cs + 32, n + nope, 32, n + nope);
  HWY_ALIGN uint32_t rope_bits[64];
  for (size_t k = 0; k < 64; k += N) {
    const VU b = Bf16Bits(hn::Load(d, n + nope + k));
    hn::Store(b, du, rope_bits + k);
    hn::Store(hn::BitCast(d, b), d, v + nope + k);
  }
  finite = finite && AllFinite(v, HD);

  // Quantisation blocks of v[0..quant_dims), numerics.md §4.
  const size_t block = static_cast<size_t>(L.block);
  for (size_t q = 0; q < static_cast<size_t>(L.quant_dims) / block; ++q) {
    const float* x = v + q * block;
    const int e = scale_exponent(AbsMax(x, block), a.clamp);
    const VF inv_scale = hn::Set(d, pow2f(-e));
    for (size_t i = 0; i < block; i += N)
      hn::StoreU(hn::U8FromU32(E4m3Sat(hn::Mul(hn::Load(d, x + i), inv_scale))), d8,
                 data + q * block + i);
    if (L.raw_scale) {
      const uint32_t bits = f32_bits(pow2f(e));  // §7: raw little-endian fp32 2^e
      std::memcpy(scale, &bits, 4);
    } else {
      scale[q] = static_cast<uint8_t>(e + 127);  // §6.3: UE8M0 byte
    }
  }
  if (!L.raw_scale) {  // §6.3: bf16 RoPE values after the codes, then the pad byte
    for (size_t k = 0; k < 64; ++k) {
      const uint16_t h = static_cast<uint16_t>(rope_bits[k] >> 16);
      std::memcpy(data + L.quant_dims + 2 * k, &h, 2);
    }
    scale[L.scale_bytes - 1] = 0x00;
  }
  return finite;
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/parallel.hpp"
#include "optimized/compressor_kernel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(SaveRows);
HWY_EXPORT(MapRows);
HWY_EXPORT(Pool);
HWY_EXPORT(Finish);

namespace {

void hwy_pool(const float* const* kv, const float* const* score, size_t valid, size_t d0,
              size_t d1, float* c, const float* const* next_kv, const float* const* next_score,
              size_t next) {
  HWY_DYNAMIC_DISPATCH(Pool)(kv, score, valid, d0, d1, c, next_kv, next_score, next);
}

bool hwy_finish(const CompressNormRopeStoreArgs& a, int64_t p, const float* c, uint8_t* data,
                uint8_t* scale) {
  return HWY_DYNAMIC_DISPATCH(Finish)(a, p, c, data, scale);
}

constexpr CompressorKernel kHwyKernel = {&hwy_pool, &hwy_finish};

}  // namespace

const CompressorKernel& hwy_compressor_kernel() { return kHwyKernel; }

void save_partial_states(const SavePartialStatesArgs& a, const RunContext& ctx) {
  const auto rows = HWY_DYNAMIC_DISPATCH(SaveRows);
  const bool stream = a.N * a.SW * 8 >= thresholds().stream_bytes;
  // Small calls copy last token first: validation's finiteness pass (api/save_partial_states.cpp)
  // read the rows in order, so the last ones are still in L1.
  const bool last_first = a.N * a.SW * 8 < thresholds().in_order_copy_bytes;
  const int threads =
      threads_for(ctx.num_threads, a.N * a.SW * 16, thresholds().min_copy_bytes_per_thread);
  parallel_ranges(a.N, threads,
                  [&](int64_t t0, int64_t t1) { rows(a, t0, t1, stream, last_first); });
}

void map_slot_rows(const MapLocalToGlobalSlotsArgs& a, int64_t n0, int64_t n1, bool stream,
                   int32_t* valid) {
  HWY_DYNAMIC_DISPATCH(MapRows)(a, n0, n1, stream, valid);
}

void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext& ctx) {
  const bool stream = a.N * a.K * 8 >= thresholds().stream_bytes;
  parallel_ranges(a.N, threads_for(ctx.num_threads, a.N * a.K * 16),
                  [&](int64_t n0, int64_t n1) { map_slot_rows(a, n0, n1, stream, nullptr); });
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
