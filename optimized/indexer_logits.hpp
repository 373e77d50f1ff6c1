// The optimized logits machinery shared by every variant of fp8_paged_mqa_logits and indexer_topk
// (indexer.md §4, §7, §8): a variant supplies a LogitsKernel (how one query row is prepared and
// how a block of keys is scored); the drivers in indexer_driver.cpp do the paging, the threading
// and the −inf fill. Every logit is computed by one kernel call whose order does not depend on the
// thread that runs it, so results do not depend on the thread count (numerics.md §11.9).
#pragma once
#include <cstddef>
#include <cstdint>

#include "args/indexer.hpp"

namespace dsv4cpu::detail::opt {

// Keys per kernel call (three AMX tiles of 16 rows, eight AVX-512 register blocks of 6) and keys
// per unit of parallel work.
inline constexpr int64_t kKeyBlock = 48;
inline constexpr int64_t kKeyChunk = 12 * kKeyBlock;

// Heads are padded to a multiple of 16 with zero queries and zero weights: a padded head adds
// fma(0, relu(0), acc) = acc exactly, so padding changes no value.
inline int64_t padded_heads(int64_t H) { return (H + 15) / 16 * 16; }

// One query row in the kernel's own layout: `q` (LogitsKernel::q_bytes(Hp) bytes) and the Hp
// padded head weights.
struct PreparedRow {
  const void* q;
  const float* w;
  int64_t H, Hp;
};

// Up to kKeyBlock consecutive keys of one row: their fp8 codes (128 each) and raw fp32 scales.
struct KeyBlock {
  const uint8_t* codes[kKeyBlock];
  float scale[kKeyBlock];
};

struct LogitsKernel {
  // Bytes of the prepared query of one row with Hp padded heads.
  size_t (*q_bytes)(int64_t Hp);
  // q: H·128 fp8 codes, w: H weights -> q_out (q_bytes(Hp) bytes, 64-byte aligned), w_out[Hp].
  void (*prepare)(const uint8_t* q, const float* w, int64_t H, int64_t Hp, void* q_out,
                  float* w_out);
  // out[k] = logit of key k of `keys` for k < n (1 <= n <= kKeyBlock): within the bound of
  // numerics.md §11.6, NaN exactly when the key has a NaN code and H >= 1.
  void (*block)(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out);
  // Per-thread set-up and tear-down around a run of block calls (AMX tile configuration); may be
  // nullptr.
  void (*thread_begin)();
  void (*thread_end)();
};

// The logits kernels, one line each: X(name, highway, isa) for the kernel <name>_logits_kernel()
// defined in optimized/indexer_<name>.cpp, run through Highway's dynamic dispatch (highway true)
// or built for one ISA (Isa::<isa>; the file's suffix gives it that ISA's flags). The registry
// (api/registry.cpp) makes each line a variant <name> of fp8_paged_mqa_logits and of indexer_topk:
// a new kernel of the family is its file and its line here.
#define DSV4CPU_LOGITS_KERNELS(X)     \
  X(amx, false, amx)                  \
  X(avx512bf16, false, avx512bf16)    \
  X(hwy, true, none)

#define DSV4CPU_DECLARE_LOGITS_KERNEL(name, highway, isa) const LogitsKernel& name##_logits_kernel();
DSV4CPU_LOGITS_KERNELS(DSV4CPU_DECLARE_LOGITS_KERNEL)
#undef DSV4CPU_DECLARE_LOGITS_KERNEL

// fp8_paged_mqa_logits with the given kernel.
void run_logits(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx, const LogitsKernel& k);
// indexer_topk with the given kernel and the optimized selection (topk.hpp).
void run_indexer_topk(const IndexerTopkArgs& a, const RunContext& ctx, const LogitsKernel& k);

// The variants of a kernel: the registry's Kernel<Args> of each op.
template <const LogitsKernel& (*kernel)()>
void logits_with(const Fp8PagedMqaLogitsArgs& a, const RunContext& ctx) {
  run_logits(a, ctx, kernel());
}
template <const LogitsKernel& (*kernel)()>
void indexer_topk_with(const IndexerTopkArgs& a, const RunContext& ctx) {
  run_indexer_topk(a, ctx, kernel());
}

}  // namespace dsv4cpu::detail::opt
