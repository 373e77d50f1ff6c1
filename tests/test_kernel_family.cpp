// A new kernel of a family with a kernel table is its kernel and one line: this file defines a
// logits kernel (the AMX block on the scalar tile model, which runs on any CPU) and a compressor
// kernel (pooling in the spec's order, one channel at a time, with the Highway finish), and
// registers each with the lines an entry of its table expands to (DSV4CPU_LOGITS_KERNELS:
// DSV4CPU_LOGITS_VARIANT, DSV4CPU_INDEXER_TOPK_VARIANT; DSV4CPU_COMPRESSOR_KERNELS:
// DSV4CPU_COMPRESS_VARIANT); nothing else names them. Each is then listed, selectable by name,
// enumerated as a run for the tests and benchmarks, and gives what its contract asks: logits within
// the bound of the exact ones, compressed entries bit-equal to the reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "api/registry.hpp"
#include "dsv4cpu/cache_sizes.hpp"
#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/options.hpp"
#include "optimized/compressor_kernel.hpp"
#include "optimized/indexer_amx.hpp"
#include "optimized/indexer_logits.hpp"
#include "test_amx_model.hpp"
#include "testing/caches.hpp"
#include "testing/contracts.hpp"
#include "testing/gtest.hpp"
#include "testing/oracle.hpp"
#include "testing/runs.hpp"

namespace dsv4cpu::detail {
namespace opt {

// The kernel: the AMX block of optimized/indexer_amx.hpp on the tile model, scalar pieces.
void amx_model_block(const PreparedRow& row, const KeyBlock& keys, int64_t n, float* out) {
  test::EmulatedTiles tiles;
  amx_block<BasicPieces>(tiles, row, keys, n, out);
}
const LogitsKernel& amx_model_logits_kernel() {
  static constexpr LogitsKernel kernel = {&bf16_q_bytes, &bf16_prepare, &amx_model_block, nullptr,
                                          nullptr};
  return kernel;
}

// The compressor kernel: numerics.md §8.4 channel by channel (m, then den and acc over w
// ascending, c = RN(acc / den)), and the Highway finish.
void scalar_pool(const float* const* kv, const float* const* score, size_t valid, size_t d0,
                 size_t d1, float* c, const float* const*, const float* const*, size_t) {
  for (size_t d = d0; d < d1; ++d) {
    float m = score[0][d];
    for (size_t j = 1; j < valid; ++j) m = std::max(m, score[j][d]);
    float den = 0.0f, acc = 0.0f;
    for (size_t j = 0; j < valid; ++j) {
      const float e = exp_lib(score[j][d] - m);
      den += e;
      acc = std::fma(e, kv[j][d], acc);
    }
    c[d] = acc / den;
  }
}
const CompressorKernel& scalar_pool_compressor_kernel() {
  static const CompressorKernel kernel = {&scalar_pool, hwy_compressor_kernel().finish};
  return kernel;
}

}  // namespace opt

namespace {

// Its line: what `X(amx_model, false, none)` in DSV4CPU_LOGITS_KERNELS gives the registry.
const bool kRegistered =
    add_variant_for_test<Fp8PagedMqaLogitsArgs>(
        "fp8_paged_mqa_logits", {DSV4CPU_LOGITS_VARIANT(amx_model, false, none)}) &&
    add_variant_for_test<IndexerTopkArgs>("indexer_topk",
                                          {DSV4CPU_INDEXER_TOPK_VARIANT(amx_model, false, none)});

// Its line: what `X(scalar_pool, false, none)` in DSV4CPU_COMPRESSOR_KERNELS gives the registry
// (one list for both compress ops).
const bool kCompressorRegistered = add_variant_for_test<CompressNormRopeStoreArgs>(
    "compress_norm_rope_store", {DSV4CPU_COMPRESS_VARIANT(scalar_pool, false, none)});

constexpr const char* kName = "amx_model";
constexpr const char* kCompressorName = "scalar_pool";

// `name` is listed among the variants of `op` (available, optimized, before the reference),
// selected by name and enumerated as one run (one per thread count asked).
void expect_registered(const char* op, const char* name) {
  const std::vector<OpInfo> ops = registered_ops();
  const auto info =
      std::find_if(ops.begin(), ops.end(), [&](const OpInfo& o) { return o.name == op; });
  ASSERT_NE(info, ops.end()) << op;
  const auto v = std::find_if(info->variants.begin(), info->variants.end(),
                              [&](const VariantInfo& x) { return x.name == name; });
  ASSERT_NE(v, info->variants.end()) << op;
  EXPECT_TRUE(v->available) << op;
  EXPECT_EQ(v->role, Role::optimized) << op;
  EXPECT_EQ(info->variants.back().name, "ref") << op;  // the reference stays last
  Options o;
  o.variant = name;
  EXPECT_EQ(selected_variant(op, o), name) << op;
  const testing::RunList runs = testing::runs(op);
  EXPECT_EQ(std::count_if(runs.runs.begin(), runs.runs.end(),
                          [&](const testing::Run& r) { return r.variant.name == name; }),
            1)
      << op;
}

TEST(KernelFamily, OneLineRegistersTheKernel) {
  ASSERT_TRUE(kRegistered);
  // A line of the wrong argument pack or op is refused.
  EXPECT_FALSE(add_variant_for_test<IndexerTopkArgs>(
      "fp8_paged_mqa_logits", {DSV4CPU_INDEXER_TOPK_VARIANT(amx_model, false, none)}));
  EXPECT_FALSE(add_variant_for_test<IndexerTopkArgs>(
      "no_such_op", {DSV4CPU_INDEXER_TOPK_VARIANT(amx_model, false, none)}));
  for (const char* op : {"fp8_paged_mqa_logits", "indexer_topk"}) expect_registered(op, kName);
}

TEST(KernelFamily, OneLineRegistersTheCompressorKernel) {
  ASSERT_TRUE(kCompressorRegistered);
  for (const char* op : {"compress_norm_rope_store", "compress_norm_rope_store_indexer"})
    expect_registered(op, kCompressorName);
}

// Both heads, C4A windows with overlap (W = 8): the new kernel's cache bytes equal the
// reference's, on one thread and on two.
TEST(KernelFamily, NewCompressorKernelWritesTheReferenceBytes) {
  ASSERT_TRUE(kCompressorRegistered);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t r = 4, W = 8, N = 40, sbs = 4, nb = 16, P = 8, nblk = 8, R = N;
  for (const bool indexer : {false, true}) {
    const int64_t HD = indexer ? 128 : 512, SW = 2 * HD;
    const int64_t page_bytes = indexer ? indexer_k_page_bytes(P) : fp8_ds_mla_page_bytes(P);
    std::vector<float> state(static_cast<size_t>(nb * sbs * 2 * SW));
    for (float& x : state) x = normal(rng);
    std::vector<int64_t> gather(static_cast<size_t>(N * W)), pos(N), slot(N);
    for (int64_t t = 0; t < N; ++t) {
      pos[static_cast<size_t>(t)] = t;
      slot[static_cast<size_t>(t)] = t % r == r - 1 ? (t * 5) % (nblk * P) : -1;
      for (int64_t w = 0; w < W; ++w)  // a few columns -1, never the token's own (w = W - 1)
        gather[static_cast<size_t>(t * W + w)] =
            w < W - 1 && rng() % 5 == 0 ? -1 : static_cast<int64_t>(rng() % (nb * sbs));
    }
    std::vector<float> weight(static_cast<size_t>(HD)), table(static_cast<size_t>(R * 64));
    for (float& x : weight) x = 1.0f + 0.1f * normal(rng);
    for (int64_t p = 0; p < R; ++p)
      for (int64_t i = 0; i < 32; ++i) {
        table[static_cast<size_t>(p * 64 + i)] = std::cos(0.1f * static_cast<float>(p * (i + 1)));
        table[static_cast<size_t>(p * 64 + 32 + i)] =
            std::sin(0.1f * static_cast<float>(p * (i + 1)));
      }
    std::vector<uint8_t> garbage(static_cast<size_t>(nblk * page_bytes));
    testing::fill_garbage(rng, garbage.data(), garbage.size());
    const auto run = [&](const Options& o) {
      std::vector<uint8_t> cache = garbage;
      const TensorView st(state.data(), DType::F32, {nb, sbs, 2 * SW}),
          gs(gather.data(), DType::I64, {N, W}), ps(pos.data(), DType::I64, {N}),
          sl(slot.data(), DType::I64, {N}), wt(weight.data(), DType::F32, {HD}),
          cs(table.data(), DType::F32, {R, 64});
      const MutableTensorView out(cache.data(), DType::U8, {nblk, page_bytes});
      if (indexer)
        compress_norm_rope_store_indexer(st, gs, ps, sl, wt, cs, out, 1e-6, P, r, ScaleClamp::gpu,
                                         o);
      else
        compress_norm_rope_store(st, gs, ps, sl, wt, cs, out, 1e-6, P, r, ScaleClamp::cpu, o);
      return cache;
    };
    Options ref;
    ref.impl = Impl::reference;
    const std::vector<uint8_t> want = run(ref);
    ASSERT_NE(want, garbage) << HD;  // the case writes entries
    for (const int threads : {1, 2}) {
      Options o;
      o.variant = kCompressorName;
      o.num_threads = threads;
      EXPECT_EQ(run(o), want) << "HD " << HD << ", " << threads << " threads";
    }
  }
}

TEST(KernelFamily, NewKernelGivesLogitsWithinTheBound) {
  ASSERT_TRUE(kRegistered);
  std::mt19937_64 rng(11);
  const int64_t P = 16, H = 32, L = 300, S = 310, pages = L / P + 2;
  testing::KCache kv(P, pages, P * 132 + 24);
  std::vector<uint8_t> q(H * 128), key(128);
  for (auto& x : q) x = testing::random_code(rng);
  std::vector<float> w(H);
  for (auto& x : w) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  std::vector<int64_t> table(static_cast<size_t>(pages));
  for (int64_t i = 0; i < pages; ++i) table[static_cast<size_t>(i)] = (i * 5 + 1) % pages;
  for (int64_t j = 0; j < L; ++j) {
    for (auto& x : key) x = testing::random_code(rng);
    if (j % 37 == 5) key[static_cast<size_t>(j % 128)] = 0xFF;  // NaN keys
    kv.set(table[static_cast<size_t>(j / P)], j % P, key.data(),
           std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10));
  }
  std::vector<int32_t> pt(table.begin(), table.end()), lens = {static_cast<int32_t>(L)};
  Options o;
  o.variant = kName;
  std::vector<float> out(S, 12345.0f);
  fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, H, 128}), kv.view(),
                       TensorView(w.data(), DType::F32, {1, H}),
                       TensorView(lens.data(), DType::I32, {1}),
                       TensorView(pt.data(), DType::I32, {1, pages}), P, S,
                       MutableTensorView(out.data(), DType::F32, {1, S}), 1, o);
  const testing::ExactLogits ex = testing::exact_logits(q.data(), w.data(), H, kv.view(), P, table, L);
  EXPECT_TRUE(testing::holds(testing::logits_violation(out.data(), S, ex)));
}

}  // namespace
}  // namespace dsv4cpu::detail
