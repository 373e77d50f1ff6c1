// The optimized machinery shared by every variant of compress_norm_rope_store and
// compress_norm_rope_store_indexer (compressor.md §5-§7): a variant supplies a CompressorKernel
// (how one emitting token's window is pooled, and how its entry is finished from the pooled
// vector); the driver in compressor_driver.cpp finds the emitting tokens and their window rows,
// splits the work over threads, hands a call with a non-finite intermediate to the reference and
// writes the entries into the pages. Every entry is computed by the same kernel calls whatever the
// thread that runs them, so results do not depend on the thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "args/compressor.hpp"

namespace dsv4cpu::detail::opt {

struct CompressorKernel {
  // compressor.md §6.2 step 1 (numerics.md §8.4) for channels [d0, d1) (multiples of 64 within
  // HD) over the `valid` >= 1 window rows kv[j], score[j] in ascending w: c[d] = pooled channel d.
  // `next_kv`, `next_score`: the `next` window rows of the token pooled next (0: none), which the
  // kernel may fetch ahead.
  void (*pool)(const float* const* kv, const float* const* score, size_t valid, size_t d0,
               size_t d1, float* c, const float* const* next_kv, const float* const* next_score,
               size_t next);
  // compressor.md §6.2 steps 2-5 (head 512) or §7 (head 128) for the token at position p, from its
  // pooled c[HD]: the entry's data-region bytes into `data`, its scale-region bytes into `scale`.
  // Returns whether every intermediate of step 6 is finite.
  bool (*finish)(const CompressNormRopeStoreArgs& a, int64_t p, const float* c, uint8_t* data,
                 uint8_t* scale);
};

// The compressor kernels, one line each: X(name, highway, isa) for the kernel
// <name>_compressor_kernel() defined in optimized/compressor_<name>.cpp, run through Highway's
// dynamic dispatch (highway true) or built for one ISA (Isa::<isa>; the file's suffix gives it that
// ISA's flags). The registry (api/registry.cpp) makes each line a variant <name> of both compress
// ops: a new kernel of the family is its file and its line here.
#define DSV4CPU_COMPRESSOR_KERNELS(X) \
  X(hwy, true, none)

#define DSV4CPU_DECLARE_COMPRESSOR_KERNEL(name, highway, isa) \
  const CompressorKernel& name##_compressor_kernel();
DSV4CPU_COMPRESSOR_KERNELS(DSV4CPU_DECLARE_COMPRESSOR_KERNEL)
#undef DSV4CPU_DECLARE_COMPRESSOR_KERNEL

// compress_norm_rope_store and compress_norm_rope_store_indexer (a.layout) with the given kernel.
void run_compress_norm_rope_store(const CompressNormRopeStoreArgs& a, const RunContext& ctx,
                                  const CompressorKernel& k);

// The variant of a kernel: the registry's Kernel<CompressNormRopeStoreArgs>.
template <const CompressorKernel& (*kernel)()>
void compress_with(const CompressNormRopeStoreArgs& a, const RunContext& ctx) {
  run_compress_norm_rope_store(a, ctx, kernel());
}

}  // namespace dsv4cpu::detail::opt
