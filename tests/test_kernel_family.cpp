// A new kernel of a family with a kernel table is its kernel and one line: this file defines a
// logits kernel (the AMX block on the scalar tile model, which runs on any CPU) and registers it
// with the lines a DSV4CPU_LOGITS_KERNELS entry expands to (DSV4CPU_LOGITS_VARIANT,
// DSV4CPU_INDEXER_TOPK_VARIANT); nothing else names it. It is then listed, selectable by name,
// enumerated as a run for the tests and benchmarks, and gives logits within the bound of the exact
// ones and the selection of the band rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "api/registry.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/options.hpp"
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

}  // namespace opt

namespace {

// Its line: what `X(amx_model, false, none)` in DSV4CPU_LOGITS_KERNELS gives the registry.
const bool kRegistered =
    add_variant_for_test<Fp8PagedMqaLogitsArgs>(
        "fp8_paged_mqa_logits", {DSV4CPU_LOGITS_VARIANT(amx_model, false, none)}) &&
    add_variant_for_test<IndexerTopkArgs>("indexer_topk",
                                          {DSV4CPU_INDEXER_TOPK_VARIANT(amx_model, false, none)});

constexpr const char* kName = "amx_model";

TEST(KernelFamily, OneLineRegistersTheKernel) {
  ASSERT_TRUE(kRegistered);
  // A line of the wrong argument pack or op is refused.
  EXPECT_FALSE(add_variant_for_test<IndexerTopkArgs>(
      "fp8_paged_mqa_logits", {DSV4CPU_INDEXER_TOPK_VARIANT(amx_model, false, none)}));
  EXPECT_FALSE(add_variant_for_test<IndexerTopkArgs>(
      "no_such_op", {DSV4CPU_INDEXER_TOPK_VARIANT(amx_model, false, none)}));
  for (const char* op : {"fp8_paged_mqa_logits", "indexer_topk"}) {
    const std::vector<OpInfo> ops = registered_ops();
    const auto info = std::find_if(ops.begin(), ops.end(),
                                   [&](const OpInfo& o) { return o.name == op; });
    ASSERT_NE(info, ops.end()) << op;
    const auto v = std::find_if(info->variants.begin(), info->variants.end(),
                                [](const VariantInfo& x) { return x.name == kName; });
    ASSERT_NE(v, info->variants.end()) << op;
    EXPECT_TRUE(v->available) << op;
    EXPECT_EQ(v->role, Role::optimized) << op;
    EXPECT_EQ(info->variants.back().name, "ref") << op;  // the reference stays last
    Options o;
    o.variant = kName;
    EXPECT_EQ(selected_variant(op, o), kName) << op;
    // The tests' and benchmarks' enumeration finds it: one run per thread count asked.
    const testing::RunList runs = testing::runs(op);
    EXPECT_EQ(std::count_if(runs.runs.begin(), runs.runs.end(),
                            [](const testing::Run& r) { return r.variant.name == kName; }),
              1)
        << op;
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
