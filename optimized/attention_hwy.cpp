// Optimized sparse_mla_attention (attention.md §2): the driver of every variant and the fp32
// products ("hwy"), written once with Highway and compiled for every target of HWY_TARGETS.
//
// Per token, every 128-column block of each set (§2.5) is gathered once: its valid rows are
// dequantised (§2.4, the same fp32 operations as args/fp8_ds_mla.hpp on 16 lanes) into fp32 rows
// and, for a bf16 kernel, into bf16 rows and row pairs (optimized/attention_kernel.hpp). Then, for
// each group of kHeadBlock heads (heads in the vector lanes):
//   scores   S[j][h] = Σ_d K[j][d]·q[h][d], fp32 fma chains over d ascending (as `ref`), or the
//            kernel's bf16 product;
//   softmax  s = RN(S·scale), m_new, α = exp_lib(RN(m − m_new)), p = exp_lib(RN(s − m_new)),
//            l = RN(RN(l·α) + Σ p) with Σ over j ascending, vector exp_lib bit-identical to the
//            scalar one;
//   values   acc = RN(acc·α), then += bf16(p)·V: fp32 fma chains over j ascending (as `ref`), or
//            the kernel's bf16 product.
// On targets with native FMA the fp32 path gives the reference's bits.
//
// bf16 operands (VDPBF16PS, TDPBF16PS flush bf16 subnormal inputs and subnormal results,
// numerics.md §9) are used for a block and head group only when they are exact normal numbers:
// every scale byte of the block's rows in [10, 246] (or 0 with nope_decode = vllm, a +0 tile),
// no bf16 subnormal among their RoPE values, none among the group's q values. Other blocks and
// groups take the fp32 products. What the instructions still flush are products and partial sums
// below 2⁻¹²⁶ in magnitude, an absolute error far below the terms of numerics.md §11.8.
//
// Rows shared by consecutive tokens: in a prefill the window of a token is the window of the token
// before it shifted by one entry, and a C128A token's full compressed blocks are those of the
// tokens before it. A thread's first kStrips blocks of a token may be read from a strip (RowStrip)
// of rows decoded once for its run of tokens, where the block's entries are strip rows
// k .. k + n − 1 (the same data and scale addresses, checked entry by entry); the kernel gets the
// bf16 values its own decode would give, so no result depends on whether a strip served a block.
//
// §2.6: a gathered row with a NaN or infinite value makes every score of the token non-finite
// (q·inf and 0·inf are not finite, and an fma chain never returns from there), so the whole token
// is NaN rows at once; a head whose computed scores include a non-finite one (overflow) gets its
// NaN row. Tokens are split into (token, head group) items, or into (token, head group, tile of
// 16 heads) items where there are fewer of the former than threads; a thread takes a contiguous
// range of items and runs every block of its tokens for its heads. Every (token, head) is computed
// by the same operations in any item, so no value depends on the split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/attention_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "args/attention.hpp"
#include "args/fp8_ds_mla.hpp"
#include "core/check.hpp"
#include "optimized/attention_decode_hwy-inl.h"
#include "optimized/attention_kernel.hpp"
#include "optimized/numerics_hwy-inl.h"

#ifndef DSV4CPU_OPTIMIZED_ATTENTION_SCRATCH
#define DSV4CPU_OPTIMIZED_ATTENTION_SCRATCH
namespace dsv4cpu::detail::opt {

// Head groups per AttendToken call (the driver splits longer runs).
inline constexpr int64_t kMaxHeadGroups = 8;

template <class T>
struct ScratchBuffer {
  hwy::AlignedFreeUniquePtr<T[]> p;
  size_t n = 0;
  T* get(size_t need) {
    if (need > n) {
      p = hwy::AllocateAligned<T>(need);
      n = need;
    }
    return p.get();
  }
};

// Blocks of a token (its first ones, in block order) that may be read from a strip: the window's
// and four of compressed rows (C128A's, and C4A's where each row holds the entries before the
// token in order: L ≤ 512, indexer.md §5.2).
inline constexpr int64_t kStrips = 5;
// Rows of a strip: a run of tokens of a prefill restarts it every kStripRows − 127 tokens.
inline constexpr int64_t kStripRows = 512;
// Words between the 64-dim blocks of a strip's Vp, and between its two copies.
inline constexpr int64_t kStripVpBlock = kStripRows / 2 * 64, kStripVpCopy = 8 * kStripVpBlock;
// New entries a block may add to a strip (a block with more is decoded on its own).
inline constexpr int64_t kStripAppend = 4;

// Rows 0 .. end − 1 decoded once for consecutive tokens. For a kernel, in its bf16 layouts: K rows
// kKRow words apart as in a block's krows, and Vp twice (vp_block kStripVpBlock), copy c holding
// the pairs of rows (2i + c, 2i + c + 1) below `end`, so that a block of rows starting at row k is
// whole pairs of copy k % 2 from pair k / 2 (after a block of odd n, row `end` is zero and paired
// with the last row; the pairs of both copies below row `clean`, which clear() keeps, are zero or
// pairs of rows decoded before, so finite); for the fp32 products, as fp32 rows (`f`, kF32Row
// apart). `data`, `scales` are the rows' entries; rows begin .. are the last block read here.
// `last` holds the entries of the last block not read here: a block that continues it (the same
// entries, or shifted by one) starts a strip.
struct RowStrip {
  ScratchBuffer<uint16_t> k;
  ScratchBuffer<uint32_t> vp;
  ScratchBuffer<float> f;
  ScratchBuffer<const uint8_t*> data, scales, last_data, last_scales;
  int64_t begin = 0, end = 0, last_n = 0, clean = 0;
  void clear() { begin = end = last_n = 0; }
};

// Per-thread buffers of the driver, kept between calls (sized for the largest call seen).
struct AttentionScratch {
  template <class T>
  using Buffer = ScratchBuffer<T>;
  // The token's valid rows in column order (data and scale bytes) and its non-empty blocks, as
  // [begin, end) ranges of those rows.
  Buffer<const uint8_t*> data, scales;
  Buffer<int64_t> blocks;
  Buffer<float> rows;       // fp32 rows [kAttentionBlock][kF32Row] (512 dims, padding)
  Buffer<uint16_t> krows;   // bf16 rows [kAttentionBlock][kKRow] (512 dims, padding)
  Buffer<uint32_t> vpairs;  // bf16 row pairs (Vp) of two blocks, 8 · kVpBlock each
  Buffer<float> s;          // scores, then p: [2][kAttentionBlock][kHeadBlock], groups alternate
  Buffer<uint32_t> ppairs;  // bf16 probability pairs (Pp) of each head group, kPpGroup words each
  // Per head group of the token: q transposed (fp32 [512][kHeadBlock]) and packed (Qp), the
  // running m, l, α, the non-finite flags and acc [kHeadBlock][kAccRow] (512 dims, padding).
  Buffer<float> qt, m, l, alpha, acc;
  Buffer<uint32_t> qp, bad;
  RowStrip strips[kStrips];  // emptied at the start of every call
};

}  // namespace dsv4cpu::detail::opt
#endif

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

constexpr size_t kHeadVecs = kHeadBlock / kN;  // vectors per head group

// Prefetches the cache lines of rows b .. e − 1 (576 data bytes and the scale bytes each) into
// the second-level cache: a block's rows are fetched while the block before is computed.
void PrefetchRows(const uint8_t* const* data, const uint8_t* const* scales, int64_t b,
                  int64_t e) {
  for (int64_t j = b; j < e; ++j) {
    for (int64_t o = 0; o < kMlaDataBytes; o += 64) __builtin_prefetch(data[j] + o, 0, 2);
    __builtin_prefetch(scales[j], 0, 2);
  }
}

// ---- the fp32 products ----

// S[j][h] for rows j0 .. j0 + R − 1 and V vectors of kN heads, dims d0 .. d0 + kScoreDims − 1:
// fma chains over d ascending, from +0 at d0 = 0, else from the sums S holds. q transposed
// (qt[d][h], rows kHeadBlock apart) times the broadcast K[j][d].
constexpr size_t kScoreDims = 128;
static_assert(kMlaDim % kScoreDims == 0, "the ranges cover the dims");
template <size_t R, size_t V>
HWY_INLINE void ScoresRows(const float* HWY_RESTRICT rows, const float* HWY_RESTRICT qt,
                           float* HWY_RESTRICT S, size_t d0) {
  const DF df;
  VF acc[R][V];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < V; ++v)
      acc[r][v] = d0 == 0 ? hn::Zero(df) : hn::Load(df, S + r * kHeadBlock + v * kN);
  for (size_t d = d0; d < d0 + kScoreDims; ++d) {
    VF q[V];
    for (size_t v = 0; v < V; ++v) q[v] = hn::Load(df, qt + d * kHeadBlock + v * kN);
    for (size_t r = 0; r < R; ++r) {
      const VF k = hn::Set(df, rows[r * kF32Row + d]);
      for (size_t v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(q[v], k, acc[r][v]);
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < V; ++v) hn::Store(acc[r][v], df, S + r * kHeadBlock + v * kN);
}

// ScoresRows of the last `tail` < R rows in one register block (a chain per row and vector).
template <size_t R, size_t V>
HWY_INLINE void ScoresTail(size_t tail, const float* rows, const float* qt, float* S, size_t d0) {
  if constexpr (R > 1) {
    if (tail == R - 1) return ScoresRows<R - 1, V>(rows, qt, S, d0);
    ScoresTail<R - 1, V>(tail, rows, qt, S, d0);
  }
}

// The rows' scores a range of kScoreDims dims at a time over every row, so that q's range stays
// in the first-level cache (the whole of qt is 32 or 64 KiB).
template <size_t V>
void ScoresRowsF32(const float* rows, int64_t n, const float* qt, float* S) {
  constexpr size_t R = V >= 12 ? 1 : 12 / V;  // about 12 accumulators
  const int64_t full = n / static_cast<int64_t>(R) * static_cast<int64_t>(R);
  for (size_t d0 = 0; d0 < static_cast<size_t>(kMlaDim); d0 += kScoreDims) {
    for (int64_t j = 0; j < full; j += R)
      ScoresRows<R, V>(rows + j * kF32Row, qt, S + j * kHeadBlock, d0);
    ScoresTail<R, V>(static_cast<size_t>(n - full), rows + full * kF32Row, qt,
                     S + full * kHeadBlock, d0);
  }
}

// The scores of the computed heads: both tiles of the group (vecs = kHeadVecs) or one.
void ScoresF32(const float* rows, int64_t n, const float* qt, float* S, size_t vecs) {
  if (vecs == kHeadVecs)
    ScoresRowsF32<kHeadVecs>(rows, n, qt, S);
  else
    ScoresRowsF32<kHeadVecs / 2>(rows, n, qt, S);
}

// qt[d][c] (rows kHeadBlock apart) for c < cols, a multiple of kN: q's value of head c, zero from
// hq on (q: rows of 512 bf16). kN heads by kN dims at a time: the heads' values widened, then
// transposed by log2(kN) rounds of ConcatEven / ConcatOdd. A round takes the even, then the odd
// elements of the rows read as one array (row-major), which rotates the bits of an element's
// index (row, lane) right by one; log2(kN) rounds swap row and lane.
void TransposeQ(const uint16_t* q, int64_t hq, size_t cols, float* qt) {
  const DF df;
  const DU du;
  const hn::Rebind<uint16_t, DF> d16;
  for (size_t c0 = 0; c0 < cols; c0 += kN)
    for (size_t d0 = 0; d0 < static_cast<size_t>(kMlaDim); d0 += kN) {
      VF r[kN];
      for (size_t k = 0; k < kN; ++k)
        r[k] = static_cast<int64_t>(c0 + k) < hq
                   ? hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(
                                         du, hn::LoadU(d16, q + (c0 + k) * kMlaDim + d0))))
                   : hn::Zero(df);
#if HWY_TARGET != HWY_SCALAR
      for (size_t round = 1; round < kN; round *= 2) {
        VF t[kN];
        for (size_t k = 0; k < kN / 2; ++k) {
          t[k] = hn::ConcatEven(df, r[2 * k + 1], r[2 * k]);
          t[kN / 2 + k] = hn::ConcatOdd(df, r[2 * k + 1], r[2 * k]);
        }
        for (size_t k = 0; k < kN; ++k) r[k] = t[k];
      }
#endif
      for (size_t k = 0; k < kN; ++k) hn::Store(r[k], df, qt + (d0 + k) * kHeadBlock + c0);
    }
}

// acc[h][d] = RN(acc·α[h]), then fma(bf16(p_j), V_j[d], acc) for j ascending, for the heads
// h < heads (a multiple of 4); p holds the bf16-rounded probabilities as fp32, p[j][h].
void ValuesF32(const float* HWY_RESTRICT p, const float* HWY_RESTRICT rows, int64_t n,
               const float* HWY_RESTRICT alpha, float* HWY_RESTRICT acc, size_t heads) {
  const DF df;
  constexpr size_t kH = 4, kD = 4;  // register block: 4 heads × 4 vectors of dims
  for (size_t d0 = 0; d0 < static_cast<size_t>(kMlaDim); d0 += kD * kN)
    for (size_t h0 = 0; h0 < heads; h0 += kH) {
      VF c[kH][kD];
      for (size_t h = 0; h < kH; ++h)
        for (size_t k = 0; k < kD; ++k)
          c[h][k] = hn::Mul(hn::Load(df, acc + (h0 + h) * kAccRow + d0 + k * kN),
                            hn::Set(df, alpha[h0 + h]));
      for (int64_t j = 0; j < n; ++j) {
        VF v[kD];
        for (size_t k = 0; k < kD; ++k) v[k] = hn::Load(df, rows + j * kF32Row + d0 + k * kN);
        for (size_t h = 0; h < kH; ++h) {
          const VF pj = hn::Set(df, p[j * kHeadBlock + h0 + h]);
          for (size_t k = 0; k < kD; ++k) c[h][k] = hn::MulAdd(pj, v[k], c[h][k]);
        }
      }
      for (size_t h = 0; h < kH; ++h)
        for (size_t k = 0; k < kD; ++k)
          hn::Store(c[h][k], df, acc + (h0 + h) * kAccRow + d0 + k * kN);
    }
}

// ---- the online softmax of one block (attention.md §2.5), heads in the lanes ----

// One block's softmax for `vecs` vectors of kN heads, in steps after SoftmaxBegin: the first
// steps scale a few of the n rows of raw dots in S each, flag non-finite scores in `bad` and take
// the maximum; the step after the last row updates m and writes α. Each step after it turns a
// pair of rows into probabilities: without `pairs`, into S rounded to bf16 (fp32, p[j][h]); else
// as bf16 pairs (Pp of attention_kernel.hpp); the step after the last pair adds the sum to l and
// writes the zero pairs up to a multiple of 16 pairs. SoftmaxEnd runs the steps left. A kernel's
// score products of the next group run the steps between their tiles.
struct SoftmaxRun {
  float* S;
  int64_t n, j;
  float scale;
  float *m, *l, *alpha;
  uint32_t *bad, *pairs;
  size_t vecs;
  int phase;  // 0: the scaled scores and their maximum, 1: the probabilities, 2: done
  VF m_new[kHeadVecs], sum[kHeadVecs];
  VU nonfinite[kHeadVecs];
};

void SoftmaxBegin(SoftmaxRun& r, float* S, int64_t n, float scale, float* m, float* l,
                  float* alpha, uint32_t* bad, uint32_t* pairs, size_t vecs) {
  const DF df;
  const DU du;
  r = SoftmaxRun{S, n, 0, scale, m, l, alpha, bad, pairs, vecs, 0, {}, {}, {}};
  for (size_t v = 0; v < vecs; ++v) {
    r.m_new[v] = hn::Load(df, m + v * kN);
    r.nonfinite[v] = hn::Load(du, bad + v * kN);
    r.sum[v] = hn::Zero(df);
  }
}

// Rows per step of the first phase.
constexpr int64_t kScaleRows = 4;

void SoftmaxStep(void* arg) {
  SoftmaxRun& r = *static_cast<SoftmaxRun*>(arg);
  const DF df;
  const DU du;
  const int64_t j = r.j;
  if (r.phase == 0) {
    if (j < r.n) {
      const VF vscale = hn::Set(df, r.scale);
      for (size_t v = 0; v < r.vecs; ++v)
        for (int64_t i = j; i < std::min(r.n, j + kScaleRows); ++i) {
          float* row = r.S + i * kHeadBlock + v * kN;
          const VF s = hn::Mul(hn::Load(df, row), vscale);
          hn::Store(s, df, row);
          const VU bad_s = hn::VecFromMask(du, hn::RebindMask(du, hn::Not(hn::IsFinite(s))));
          r.nonfinite[v] = hn::Or(r.nonfinite[v], bad_s);
          r.m_new[v] = hn::Max(r.m_new[v], s);
        }
      r.j = j + kScaleRows;
      return;
    }
    for (size_t v = 0; v < r.vecs; ++v) {
      const size_t o = v * kN;
      hn::Store(ExpLib(hn::Sub(hn::Load(df, r.m + o), r.m_new[v])), df, r.alpha + o);
      hn::Store(r.m_new[v], df, r.m + o);
      hn::Store(r.nonfinite[v], du, r.bad + o);
    }
    r.phase = 1;
    r.j = 0;
    return;
  }
  if (r.phase == 2) return;
  const VU high = hn::Set(du, 0xFFFF0000u);
  if (j >= r.n) {
    for (size_t v = 0; v < r.vecs; ++v) {
      const size_t o = v * kN;
      if (r.pairs)
        for (int64_t i = (r.n + 1) / 2; i < (r.n + 31) / 32 * 16; ++i)
          hn::Store(hn::Zero(du), du, r.pairs + i * kHeadBlock + o);
      hn::Store(hn::Add(hn::Mul(hn::Load(df, r.l + o), hn::Load(df, r.alpha + o)), r.sum[v]), df,
                r.l + o);
    }
    r.phase = 2;
    return;
  }
  for (size_t v = 0; v < r.vecs; ++v) {
    const size_t o = v * kN;
    float* row = r.S + j * kHeadBlock + o;
    const VF p0 = ExpLib(hn::Sub(hn::Load(df, row), r.m_new[v]));
    r.sum[v] = hn::Add(r.sum[v], p0);
    const bool two = j + 1 < r.n;
    const VF p1 = two ? ExpLib(hn::Sub(hn::Load(df, row + kHeadBlock), r.m_new[v])) : hn::Zero(df);
    if (two) r.sum[v] = hn::Add(r.sum[v], p1);
    if (!r.pairs) {
      hn::Store(RoundBf16(p0), df, row);
      if (two) hn::Store(RoundBf16(p1), df, row + kHeadBlock);
    } else {
      const VU odd = two ? hn::And(Bf16Bits(p1), high) : hn::Zero(du);
      hn::Store(hn::Or(hn::ShiftRight<16>(Bf16Bits(p0)), odd), du,
                r.pairs + j / 2 * kHeadBlock + o);
    }
  }
  r.j = j + 2;
}

void SoftmaxEnd(SoftmaxRun& r) {
  while (r.phase != 2) SoftmaxStep(&r);
}

// ---- one token ----

// attention.md §2.6 for head h (slot i of its group): the output row and lse.
void Finish(const SparseMlaAttentionArgs& a, int64_t t, int64_t h, bool nan_row, bool empty,
            float m, float l, const float* acc) {
  const DF df;
  uint16_t* out = a.out.ptr<uint16_t>() + (t * a.H + h) * kMlaDim;
  float lse;
  if (nan_row) {
    for (int d = 0; d < kMlaDim; ++d) out[d] = 0x7FC0;
    lse = std::numeric_limits<float>::quiet_NaN();
  } else if (empty) {
    std::memset(out, 0, kMlaDim * sizeof(uint16_t));
    lse = std::numeric_limits<float>::infinity();
  } else {
    lse = m + static_cast<float>(std::log(static_cast<double>(l)));
    float f = 1.0f / l;
    if (a.attn_sink.present())
      f = f * (1.0f / (1.0f + exp_lib(a.attn_sink.ptr<const float>()[h] - lse)));
    const VF vf = hn::Set(df, f);
    for (size_t d = 0; d < static_cast<size_t>(kMlaDim); d += kN)
      hn::StoreU(hn::TruncateTo(D16(), hn::ShiftRight<16>(Bf16Bits(hn::Mul(hn::Load(df, acc + d), vf)))),
                 D16(), out + d);
  }
  if (a.lse.present()) a.lse.ptr<float>()[t * a.H + h] = lse;
}

#if HWY_TARGET != HWY_SCALAR
// DecodeBlockBf16, or the kernel's own (no padding).
Bf16Decode DecodeBf16(const AttentionKernel* kernel, const uint8_t* const* data,
                      const uint8_t* const* scales, int64_t n, bool vllm, uint16_t* krows,
                      uint32_t* vpairs) {
  return kernel->decode_bf16 ? kernel->decode_bf16(data, scales, n, vllm, krows, vpairs)
                             : DecodeBlockBf16(data, scales, n, vllm, krows, vpairs);
}

// The strip's Vp words of rows x, x + 1 (pair x / 2 of copy x % 2) from its K rows.
void StripPair(RowStrip& st, int64_t x) {
  const hn::ScalableTag<uint16_t> dw;
  const uint16_t* a = st.k.p.get() + x * kKRow;
  const uint16_t* b = a + kKRow;
  uint32_t* w = st.vp.p.get() + x % 2 * kStripVpCopy + x / 2 * 64;
  for (size_t d = 0; d < static_cast<size_t>(kMlaDim); d += hn::Lanes(dw))
    StorePairWords(dw, hn::LoadU(dw, a + d), hn::LoadU(dw, b + d),
                   w + d / 64 * kStripVpBlock + d % 64);
}

// Whether a block may continue the strip (a cheap test of its first entry, for the prefetch).
bool StripLikely(const RowStrip& st, const uint8_t* const* data) {
  if (st.end == 0) return false;
  const int64_t k = st.begin + 1 < st.end ? st.begin + 1 : st.begin;
  return st.data.p[k] == data[0] || st.data.p[st.begin] == data[0];
}

// The strip row where the block of n entries starts, its new rows decoded (and, for a kernel,
// its Vp pairs built), or −1: the block is not there (or one of its rows is not finite, or for a
// kernel not bf16-exact), and the driver decodes it itself. A block always ends at the strip's
// end; a kernel reads its rows and pairs on to a multiple of 16 pairs, whose products with the
// zero probabilities past the block add +0. Without a kernel (nullptr) the strip holds fp32 rows.
// `vpairs`: scratch for a decode's own Vp.
int64_t StripBlock(RowStrip& st, const AttentionKernel* kernel, const uint8_t* const* data,
                   const uint8_t* const* scales, int64_t n, NopeDecode mode, uint32_t* vpairs) {
  // Strip rows a block of n rows reads (for a kernel, on to a multiple of 16 pairs); for a block
  // at row k, the rows and pairs from `clean` (even) on to them are zeroed.
  const int64_t span = kernel == nullptr ? n : ((n + 1) / 2 + 15) / 16 * 32;
  auto clean_to = [&](int64_t k) {
    const int64_t e = (k + span + 1) / 2 * 2;
    if (kernel == nullptr || e <= st.clean) return;
    std::fill(st.k.p.get() + st.clean * kKRow, st.k.p.get() + e * kKRow, uint16_t{0});
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t d = 0; d < kMlaDim / 64; ++d) {
        uint32_t* w = st.vp.p.get() + c * kStripVpCopy + d * kStripVpBlock;
        std::fill(w + st.clean / 2 * 64, w + e / 2 * 64, 0u);
      }
    st.clean = e;
  };
  // Entries j .. j + count − 1 as strip rows r .., and for a kernel the row pairs they complete;
  // false where a row is not finite (or, for a kernel, not bf16-exact).
  auto decode_rows = [&](int64_t j, int64_t count, int64_t r) {
    if (kernel == nullptr)
      return DecodeBlock(data + j, scales + j, count, mode, st.f.p.get() + r * kF32Row, nullptr,
                         nullptr);
    if (DecodeBf16(kernel, data + j, scales + j, count, mode == NopeDecode::vllm,
                   st.k.p.get() + r * kKRow, vpairs) != Bf16Decode::ok)
      return false;
    for (int64_t x = std::max<int64_t>(r - 1, 0); x + 1 < r + count; ++x) StripPair(st, x);
    return true;
  };
  // For a kernel, a block of odd n (ending at row `end`) ends with the pair of its last row and a
  // zero row `end`, which the next appended row replaces.
  auto pair_last = [&] {
    if (kernel == nullptr || n % 2 == 0) return;
    std::fill_n(st.k.p.get() + st.end * kKRow, kMlaDim, uint16_t{0});
    StripPair(st, st.end - 1);
  };
  auto same = [](const uint8_t* const* x, const uint8_t* const* y, const uint8_t* const* xs,
                 const uint8_t* const* ys, int64_t len) {
    for (int64_t i = 0; i < len; ++i)
      if (x[i] != y[i] || xs[i] != ys[i]) return false;
    return true;
  };
  // The block as strip rows k .. end − 1 and n − (end − k) new entries: the last block's rows
  // shifted by one, or the same rows.
  int64_t k = -1;
  for (int64_t c : {st.begin + 1, st.begin}) {
    const int64_t have = st.end - c;
    if (st.end == 0 || have < n - kStripAppend || have > n) continue;
    if (same(st.data.p.get() + c, data, st.scales.p.get() + c, scales, have)) {
      k = c;
      break;
    }
  }
  if (k >= 0 && k + span <= kStripRows) {
    clean_to(k);
    for (int64_t j = st.end - k; j < n; ++j) {  // appended as row `end`
      const int64_t r = st.end;
      if (!decode_rows(j, 1, r)) {
        st.clear();
        return -1;
      }
      st.data.p[r] = data[j];
      st.scales.p[r] = scales[j];
      st.end = r + 1;
    }
    st.begin = k;
    pair_last();
    return k;
  }
  // Not in the strip: a block continuing the last one not read here (or a strip that is full)
  // starts the strip anew.
  const bool full = k >= 0;
  const bool continues =
      full || (st.last_n == n &&
               (same(st.last_data.p.get() + 1, data, st.last_scales.p.get() + 1, scales, n - 1) ||
                same(st.last_data.p.get(), data, st.last_scales.p.get(), scales, n)));
  if (!continues) {
    std::copy(data, data + n, st.last_data.get(kAttentionBlock));
    std::copy(scales, scales + n, st.last_scales.get(kAttentionBlock));
    st.last_n = n;
    st.end = 0;
    return -1;
  }
  st.data.get(kStripRows);
  st.scales.get(kStripRows);
  st.clear();
  if (kernel == nullptr) {
    st.f.get(kStripRows * kF32Row);
  } else {
    st.k.get((kStripRows + kRowAlign) * kKRow);
    st.vp.get(2 * kStripVpCopy);
    clean_to(0);
  }
  if (!decode_rows(0, n, 0)) return -1;
  std::copy(data, data + n, st.data.p.get());
  std::copy(scales, scales + n, st.scales.p.get());
  st.end = n;
  pair_last();
  return 0;
}
#endif

// Token t, head groups g0 .. g1 − 1 (heads 32·g0 .. min(H, 32·g1) − 1), of each group the head
// tiles c0 .. c1 − 1 (0 .. 1 but for a call of one group).
void AttendToken(const SparseMlaAttentionArgs& a, const AttentionKernel* kernel, int64_t t,
                 int64_t g0, int64_t g1, int c0, int c1, AttentionScratch& s) {
  const int64_t groups = g1 - g0;
  // The computed heads of each group: h_lo .. h_lo + h_tiles·kHeadTile − 1.
  const int h_tiles = c1 - c0;
  const size_t h_lo = static_cast<size_t>(c0 * kHeadTile);
  const size_t heads = static_cast<size_t>(groups * kHeadBlock);
  float* m = s.m.get(heads);
  float* l = s.l.get(heads);
  float* alpha = s.alpha.get(heads);
  uint32_t* bad = s.bad.get(heads);
  float* acc = s.acc.get(heads * kAccRow);
  float* qt = s.qt.get(heads * kMlaDim);
  uint32_t* qp = s.qp.get(heads * kDimPairs);
  float* rows = s.rows.get(kAttentionBlock * kF32Row);
  uint16_t* krows = s.krows.get(kAttentionBlock * kKRow);
  uint32_t* vpairs = s.vpairs.get(2 * kMlaDim / 64 * kVpBlock);
  float* S = s.s.get(2 * kAttentionBlock * kHeadBlock);
  uint32_t* ppairs = s.ppairs.get(static_cast<size_t>(groups * kPpGroup));
  std::fill(m, m + heads, -std::numeric_limits<float>::infinity());
  std::fill(l, l + heads, 0.0f);
  std::fill(bad, bad + heads, 0u);

  // §2.2: the valid rows in column order, window then compressed, and the non-empty blocks.
  const size_t width = static_cast<size_t>(a.Nw + a.Nc);
  const uint8_t** data = s.data.get(width);
  const uint8_t** scales = s.scales.get(width);
  int64_t* blocks = s.blocks.get(width / kAttentionBlock + 4);
  int64_t total = 0, nblocks = 0;
  blocks[0] = 0;
  for (int set = 0; set < 2; ++set) {
    const TensorView& slots = set == 0 ? a.window_slots : a.compressed_slots;
    const MlaCache cache(set == 0 ? a.window_cache : a.compressed_cache,
                         set == 0 ? a.window_block_size : a.compressed_block_size);
    const IndexReader slot(slots);
    const int64_t cols = slots.size(1);
    for (int64_t n0 = 0; n0 < cols; n0 += kAttentionBlock) {
      for (int64_t c = n0; c < std::min(cols, n0 + kAttentionBlock); ++c) {
        const int64_t sl = slot(t, c);
        if (sl < 0) continue;  // -1: no entry
        data[total] = cache.data(sl);
        scales[total] = cache.scales(sl);
        ++total;
      }
      if (total > blocks[nblocks]) blocks[++nblocks] = total;  // J empty: no block
    }
  }

  // q of the groups: for a kernel, packed in pairs, used where every value of the group is an
  // exact normal bf16 (or zero); fp32 transposed on first use by the fp32 products (zero past H).
  const uint16_t* q = a.q.ptr<const uint16_t>() + t * a.q.stride(0);
  bool q_exact[kMaxHeadGroups], qt_done[kMaxHeadGroups], all_q_exact = kernel != nullptr;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t h0 = (g0 + g) * kHeadBlock, hn = std::min<int64_t>(kHeadBlock, a.H - h0);
    qt_done[g] = false;
    q_exact[g] = kernel != nullptr &&
                 kernel->pack_q(q + h0 * kMlaDim, hn, qp + g * kHeadBlock * kDimPairs);
    all_q_exact &= q_exact[g];
  }

  const bool vllm = a.nope_decode == NopeDecode::vllm;
  bool nan_token = false;
  // Where every group of a block runs on the kernel, the blocks form a pipeline: a group's
  // softmax runs its steps during the score products of the group after it (of the next block
  // for the last group), and a block's values run once the next block's first group has its
  // scores. Blocks alternate between two Vp buffers, (block, group) items between two S. acc
  // sees the same operations in the same order as without the pipeline.
  const size_t vp_words = kMlaDim / 64 * kVpBlock;
  // Each parity's block's Vp and its vp_block: the block's own layout, or a strip's.
  const uint32_t* vp_at[2] = {vpairs, vpairs + vp_words};
  int64_t vp_block_at[2] = {kVpBlock, kVpBlock};
  SoftmaxRun run;
  bool pending = false;  // run has steps left
  int64_t due = -1;      // the block whose kernel values are left
  auto end_softmax = [&] {
    if (pending) SoftmaxEnd(run);
    pending = false;
  };
  // The kernel's values of block bb, each run of consecutive groups in one call (the block's Vp
  // read once for them); before the first block acc is +0, RN(+0·α) = +0: no alpha, no acc read.
  auto kernel_values = [&](int64_t bb) {
    const int64_t nn = blocks[bb + 1] - blocks[bb];
    for (int64_t g = 0; g < groups;) {
      int64_t e = g;
      while (e < groups && q_exact[e]) ++e;
      const size_t oh = static_cast<size_t>(g * kHeadBlock) + h_lo;
      if (e > g)
        kernel->values(ppairs + g * kPpGroup + h_lo, vp_at[bb % 2], vp_block_at[bb % 2],
                       (nn + 1) / 2, bb == 0 ? nullptr : alpha + oh, acc + oh * kAccRow, e - g,
                       h_tiles);
      g = e + 1;
    }
  };
  auto values_due = [&] {
    if (due >= 0) kernel_values(due);
    due = -1;
  };
  // Blocks a strip is likely to hold are not prefetched (strips serve a kernel where every
  // group's q is exact, and the fp32 products without a kernel).
  auto prefetch = [&](int64_t bb) {
#if HWY_TARGET != HWY_SCALAR
    if ((all_q_exact || kernel == nullptr) && bb < kStrips &&
        StripLikely(s.strips[bb], data + blocks[bb]))
      return;
#endif
    PrefetchRows(data, scales, blocks[bb], blocks[bb + 1]);
  };
  int64_t item = 0;
  if (nblocks > 0) prefetch(0);
  for (int64_t b = 0; b < nblocks && !nan_token; ++b) {
    const int64_t j0 = blocks[b], n = blocks[b + 1] - j0;
    if (b + 1 < nblocks) prefetch(b + 1);
    uint32_t* vp = vpairs + (b % 2) * vp_words;
    const uint16_t* kb = krows;  // the block's K
    const float* fb = rows;      // the block's fp32 rows
    vp_at[b % 2] = vp;
    vp_block_at[b % 2] = kVpBlock;
    // Where every group's q is exact, the block is decoded into the bf16 layouts alone, the
    // decode finding whether its rows are exact; rows that are not (rare) are decoded again below.
    bool rows_exact = false, decoded = false, finite = true;
#if HWY_TARGET != HWY_SCALAR
    if (kernel == nullptr && b < kStrips) {
      const int64_t k =
          StripBlock(s.strips[b], nullptr, data + j0, scales + j0, n, a.nope_decode, vp);
      if (k >= 0) {
        fb = s.strips[b].f.p.get() + k * kF32Row;
        decoded = true;
      }
    } else if (all_q_exact) {
      const int64_t k = b < kStrips ? StripBlock(s.strips[b], kernel, data + j0, scales + j0, n,
                                                 a.nope_decode, vp)
                                    : -1;
      if (k >= 0) {
        const RowStrip& st = s.strips[b];
        kb = st.k.p.get() + k * kKRow;
        vp_at[b % 2] = st.vp.p.get() + k % 2 * kStripVpCopy + k / 2 * 64;
        vp_block_at[b % 2] = kStripVpBlock;
        decoded = rows_exact = true;
      } else {
        const Bf16Decode r = DecodeBf16(kernel, data + j0, scales + j0, n, vllm, krows, vp);
        PadBf16Layouts(n, krows, vp);
        decoded = rows_exact = r != Bf16Decode::not_exact;
        finite = r == Bf16Decode::ok;
      }
    } else
#endif
    if (kernel != nullptr) {
      rows_exact = true;
      for (int64_t j = j0; j < j0 + n && rows_exact; ++j)
        rows_exact = RowBf16Exact(data[j], scales[j], vllm);
    }
    bool any_bf16 = false, any_f32 = false;
    for (int64_t g = 0; g < groups; ++g) {
      any_bf16 |= rows_exact && q_exact[g];
      any_f32 |= !(rows_exact && q_exact[g]);
    }
    if (!decoded)
      finite = DecodeBlock(data + j0, scales + j0, n, a.nope_decode, any_f32 ? rows : nullptr,
                           any_bf16 ? krows : nullptr, vp);
    if (!finite) {
      nan_token = true;  // §2.6: every score of the token is non-finite
      break;
    }
    if (any_f32) {  // the pipeline drains before a block with fp32 products
      end_softmax();
      values_due();
    }
    for (int64_t g = 0; g < groups; ++g) {
      const size_t o = static_cast<size_t>(g * kHeadBlock);
      const size_t oh = o + h_lo, vecs = static_cast<size_t>(h_tiles * kHeadTile) / kN;
      const int64_t parity = item++ % 2;
      float* Sg = S + parity * kAttentionBlock * kHeadBlock;
      if (rows_exact && q_exact[g]) {
        kernel->scores(kb, (n + kRowAlign - 1) / kRowAlign * kRowAlign,
                       qp + o * kDimPairs + h_lo, h_tiles, Sg + h_lo,
                       pending ? &SoftmaxStep : nullptr, &run);
        end_softmax();
        if (g == 0) values_due();
        SoftmaxBegin(run, Sg + h_lo, n, a.scale, m + oh, l + oh, alpha + oh, bad + oh,
                     ppairs + g * kPpGroup + h_lo, vecs);
        pending = true;
        continue;
      }
      end_softmax();
      // acc of the computed heads is +0 before the first block.
      if (b == 0) std::fill(acc + oh * kAccRow, acc + (oh + vecs * kN) * kAccRow, 0.0f);
      float* qt_g = qt + o * kMlaDim;
      if (!qt_done[g]) {  // q of the computed heads (zero past H)
        qt_done[g] = true;
        const int64_t h0 = (g0 + g) * kHeadBlock + static_cast<int64_t>(h_lo);
        TransposeQ(q + h0 * kMlaDim, a.H - h0, vecs * kN, qt_g + h_lo);
      }
      ScoresF32(fb, n, qt_g + h_lo, Sg + h_lo, vecs);
      SoftmaxBegin(run, Sg + h_lo, n, a.scale, m + oh, l + oh, alpha + oh, bad + oh, nullptr, vecs);
      SoftmaxEnd(run);
      ValuesF32(Sg + h_lo, fb, n, alpha + oh, acc + oh * kAccRow,
                static_cast<size_t>(h_tiles * kHeadTile));
    }
    if (!any_f32) {
      due = b;
    } else if (any_bf16) {
      end_softmax();
      kernel_values(b);
    }
  }
  if (!nan_token) {
    end_softmax();
    values_due();
  }

  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = static_cast<int64_t>(h_lo); i < c1 * kHeadTile; ++i) {
      const int64_t h = (g0 + g) * kHeadBlock + i;
      if (h >= a.H) break;
      const size_t k = static_cast<size_t>(g * kHeadBlock + i);
      Finish(a, t, h, nan_token || bad[k] != 0, total == 0, m[k], l[k], acc + k * kAccRow);
    }
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/parallel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(AttendToken);

void run_attention(const SparseMlaAttentionArgs& a, const RunContext& ctx,
                   const AttentionKernel* kernel) {
  if (a.T == 0 || a.H == 0) return;
  const int64_t groups = (a.H + kHeadBlock - 1) / kHeadBlock, items = a.T * groups;
  // About 2 MFLOP per thread at least: small calls stay on the calling thread.
  const double flops = 2048.0 * static_cast<double>(a.T * a.H * (a.Nw + a.Nc));
  const int threads = ctx.num_threads > 0 ? max_threads(ctx.num_threads)
                      : flops >= 4e6          ? max_threads(0)
                                              : 1;
  const auto attend = HWY_DYNAMIC_DISPATCH(AttendToken);
  // Items (token, head group), or, with fewer of those than threads, (token, group, tile of 16
  // heads): every group two tiles but a last one of up to 16 heads. Each item decodes its token's
  // rows itself.
  const bool by_tile = items < threads;
  const int64_t last_tiles = (a.H - (groups - 1) * kHeadBlock + kHeadTile - 1) / kHeadTile;
  const int64_t per_token = by_tile ? 2 * (groups - 1) + last_tiles : groups;
  const int64_t units = a.T * per_token;
  const int64_t workers = std::min<int64_t>(threads, units);
  parallel_for(workers, static_cast<int>(workers), [&](int64_t w) {
    thread_local AttentionScratch scratch;
    for (RowStrip& st : scratch.strips) st.clear();  // the caches' rows may have changed
    if (kernel && kernel->thread_begin) kernel->thread_begin();
    // Items i0 .. i1 − 1, item i the r-th of token i / per_token, r = i % per_token.
    const int64_t i0 = units * w / workers, i1 = units * (w + 1) / workers;
    for (int64_t i = i0; i < i1;) {
      const int64_t t = i / per_token, r = i % per_token;
      if (by_tile) {  // tile r % 2 of group r / 2, and the group's second tile where it is here
        const int c0 = static_cast<int>(r % 2);
        const int c1 = c0 == 0 && i + 1 < i1 && r + 1 < per_token ? 2 : c0 + 1;
        attend(a, kernel, t, r / 2, r / 2 + 1, c0, c1, scratch);
        i += c1 - c0;
        continue;
      }
      const int64_t g1 = std::min(groups, r + (i1 - i));  // this token's groups here
      for (int64_t g = r; g < g1; g += kMaxHeadGroups) {
        const int64_t ge = std::min(g1, g + kMaxHeadGroups);
        // A call of the last group alone runs its tiles only (one where H % 32 is 1 .. 16).
        const int c1 = ge - g == 1 && ge == groups ? static_cast<int>(last_tiles) : 2;
        attend(a, kernel, t, g, ge, 0, c1, scratch);
      }
      i += g1 - r;
    }
    if (kernel && kernel->thread_end) kernel->thread_end();
  });
}

void sparse_mla_attention_hwy(const SparseMlaAttentionArgs& a, const RunContext& ctx) {
  run_attention(a, ctx, nullptr);
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
