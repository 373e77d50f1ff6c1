// The optimized machinery of sparse_mla_attention (attention.md §2) shared by its variants. The
// driver (optimized/attention_hwy.cpp, Highway) gathers and dequantises every 128-column block of a
// token's valid rows once for all heads, runs the online softmax of §2.5 with the vector exp_lib
// and finalises §2.6; per block and group of kHeadBlock heads, the two matrix products
// (scores [heads, 512] × [512, rows], values [heads, rows] × [rows, 512]) run in fp32 (Highway, on
// every target) or through an AttentionKernel on bf16 operands (AVX-512-BF16, AMX) where those are
// exact (see attention_hwy.cpp). Every (token, head) is computed by the same operations whatever
// thread runs it, so results do not depend on the thread count (numerics.md §11.9).
#pragma once
#include <cstdint>
#include <cstring>

#include "args/attention.hpp"
#include "args/fp8_ds_mla.hpp"

namespace dsv4cpu::detail::opt {

inline constexpr int64_t kHeadBlock = 32;  // heads per group: two tiles of kHeadTile
inline constexpr int64_t kHeadTile = 16;
inline constexpr int64_t kDimPairs = 256;  // the 512 dims as bf16 pairs
// Rows of a block in the bf16 layouts are padded with zero rows to a multiple of this.
inline constexpr int64_t kRowAlign = 16;
inline constexpr int64_t kVpBlock = kAttentionBlock / 2 * 64;  // words per 64 dims of Vp
inline constexpr int64_t kPpGroup = kAttentionBlock / 2 * kHeadBlock;  // words of Pp per group
// Row strides of K (bf16 words), acc and the fp32 rows (floats): 32, 16 and 16 more than the 512
// dims, so that the 16 rows of an AMX tile, or a range of dims across a block's fp32 rows, fall in
// different sets of the first-level cache, where a stride of 1 or 2 KiB maps them to four or two.
inline constexpr int64_t kKRow = kMlaDim + 32, kAccRow = kMlaDim + 16, kF32Row = kMlaDim + 16;

namespace {  // internal linkage: compiled into units of different ISA flags

// Whether a tile's scale byte b keeps its NoPE values exact normal bf16 numbers for the bf16
// products (attention_hwy.cpp): b in [10, 246], or 0 with nope_decode = vllm (a +0 tile).
inline bool ScaleByteBf16Exact(int b, bool vllm) {
  return (b >= 10 && b <= 246) || (vllm && b == 0);
}

// Zero bf16 rows after the n rows (and the pad row of an odd n) up to a multiple of kRowAlign, and
// zero row pairs up to a multiple of 16 pairs.
inline void PadBf16Layouts(int64_t n, uint16_t* krows, uint32_t* vpairs) {
  const int64_t rows_end = (n + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t done = (n + 1) / 2 * 2;  // rows written, the pad row of an odd n included
  if (rows_end > done)
    std::memset(krows + done * kKRow, 0, static_cast<size_t>((rows_end - done) * kKRow) * 2);
  const int64_t pairs = (n + 1) / 2, pairs_end = (pairs + 15) / 16 * 16;
  for (int64_t d0 = 0; d0 < kMlaDim; d0 += 64)
    std::memset(vpairs + d0 / 64 * kVpBlock + pairs * 64, 0,
                static_cast<size_t>((pairs_end - pairs) * 64) * sizeof(uint32_t));
}

// Called by a block decode at its row pair j (of n rows): fetches the pair kDecodeAhead rows on
// (codes, RoPE values, scale bytes) into the first-level cache. The driver prefetches a block's
// rows a block ahead (attention_hwy.cpp, PrefetchRows), yet rows from beyond the second-level cache
// (a decode batch of many requests) still kept the decode waiting on their loads
// (docs/benchmarks.md, "Rows fetched into the first-level cache as the decode reaches them").
// Not written as a call of PrefetchRows over rows [j + 16, j + 18): GCC 12 compiled that loop,
// inlined into the decodes, to no instruction at all.
inline constexpr int64_t kDecodeAhead = 16;
inline void PrefetchPairAhead(const uint8_t* const* data, const uint8_t* const* scales, int64_t j,
                              int64_t n) {
  for (int64_t r = j + kDecodeAhead; r < n && r < j + kDecodeAhead + 2; ++r) {
    for (int64_t o = 0; o < kMlaDataBytes; o += 64) __builtin_prefetch(data[r] + o, 0, 3);
    __builtin_prefetch(scales[r], 0, 3);
  }
}

}  // namespace

// What a decode of a block into the bf16 layouts found (DecodeBlockBf16): ok, the rows are
// bf16-exact (RowBf16Exact) and finite; not_finite, exact with a NaN or infinite value (§2.6);
// not_exact, a row is not bf16-exact, and the layouts are not the rows' values.
enum class Bf16Decode : uint8_t { ok, not_finite, not_exact };

// The bf16 matrix products of one block for one group of kHeadBlock heads. Layouts (bf16 values
// as their 16-bit patterns, a pair as one 32-bit word with the first value in the low half):
//   K   rows × 512 bf16, row-major, rows kKRow words apart: the block's rows (zero rows past the
//       valid ones);
//   Qp  kDimPairs × kHeadBlock words: word p·kHeadBlock + h is the pair (q[h][2p], q[h][2p + 1]);
//   Vp  8 blocks of 64 dims, each of the rows' pairs × 64 words (kept apart so that a product
//       over 64 dims reads one contiguous run): word (d / 64)·vp_block + i·64 + d % 64 is the pair
//       (V[2i][d], V[2i + 1][d]); vp_block is kVpBlock for a block's own layout (64 pairs), more
//       for rows shared by consecutive tokens (attention_hwy.cpp, RowStrip);
//   Pp  pairs × kHeadBlock words: word i·kHeadBlock + h is the pair (P[h][2i], P[h][2i + 1]) of
//       the bf16-rounded probabilities.
// Vp and Pp hold zero pairs from `pairs` up to a multiple of 16 pairs.
// Both instructions treat bf16 subnormal inputs as zero and flush subnormal results (numerics.md
// §9); the driver gives them only exact normal bf16 operands.
// Each product runs for whole tiles of kHeadTile heads; `tiles` of them (1 or 2) start at the
// head of Qp, S, Pp, alpha and acc they are given (a group, or its second half for tiles = 1).
struct AttentionKernel {
  // S[j·kHeadBlock + h] = Σ_d K[j][d]·q[h][d] for j < rows (a multiple of kRowAlign) and the
  // heads h < kHeadTile·tiles. A non-null `step` is vector work of the driver (another group's
  // softmax) that the kernel may call, step(step_arg), between its products, so that the two
  // overlap; the driver runs the steps left after the call.
  void (*scores)(const uint16_t* K, int64_t rows, const uint32_t* Qp, int tiles, float* S,
                 void (*step)(void*), void* step_arg);
  // For `groups` groups of heads, one after the other in Pp (kPpGroup words each), alpha and acc
  // (of one group the heads h < kHeadTile·tiles; tiles = 2 where groups > 1):
  // acc[h·kAccRow + d] = RN(acc[h·kAccRow + d]·alpha[h]) (0 without alpha), then
  // += Σ_{j < 2·pairs} P[h][j]·V[j][d].
  void (*values)(const uint32_t* Pp, const uint32_t* Vp, int64_t vp_block, int64_t pairs,
                 const float* alpha, float* acc, int64_t groups, int tiles);
  // DecodeBlockBf16 of optimized/attention_decode_hwy-inl.h (the same krows, vpairs and result,
  // no padding) in the kernel's ISA; null: the Highway one.
  Bf16Decode (*decode_bf16)(const uint8_t* const* data, const uint8_t* const* scales, int64_t n,
                            bool vllm, uint16_t* krows, uint32_t* vpairs);
  // Qp of a group from its first head row q (rows of 512 bf16 one after the other), zero for the
  // heads from `heads` on: pack_q of optimized/attention_transpose.hpp in the kernel's ISA.
  // Returns whether no q value read is a bf16 subnormal (else Qp is not used).
  bool (*pack_q)(const uint16_t* q, int64_t heads, uint32_t* Qp);
  // Per-thread set-up and tear-down around a run of calls (AMX tile configuration); may be null.
  void (*thread_begin)();
  void (*thread_end)();
};

// The bf16 kernels, one line each: X(name, isa) for the kernel <name>_attention_kernel() defined
// in optimized/attention_<name>.cpp, built for Isa::<isa> (the file's suffix gives it that ISA's
// flags). The registry (api/registry.cpp) makes each line a variant <name> of
// sparse_mla_attention: a new kernel of the family is its file and its line here.
#define DSV4CPU_ATTENTION_KERNELS(X) \
  X(amx, amx)                        \
  X(avx512bf16, avx512bf16)

#define DSV4CPU_DECLARE_ATTENTION_KERNEL(name, isa) const AttentionKernel& name##_attention_kernel();
DSV4CPU_ATTENTION_KERNELS(DSV4CPU_DECLARE_ATTENTION_KERNEL)
#undef DSV4CPU_DECLARE_ATTENTION_KERNEL

// sparse_mla_attention with the fp32 products on every block (kernel = nullptr: the "hwy"
// variant), or with `kernel` on every block whose bf16 operands are exact and the fp32 products on
// the others.
void run_attention(const SparseMlaAttentionArgs& a, const RunContext& ctx,
                   const AttentionKernel* kernel);

// The variant of a kernel: the registry's Kernel<SparseMlaAttentionArgs>.
template <const AttentionKernel& (*kernel)()>
void attention_with(const SparseMlaAttentionArgs& a, const RunContext& ctx) {
  run_attention(a, ctx, &kernel());
}

}  // namespace dsv4cpu::detail::opt
