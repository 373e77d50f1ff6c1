// The C4A layer step of examples/decode_step (a batch of decode requests) run with the optimized
// variants against the step composed from the reference variants: the outputs of the exact ops
// byte for byte (metadata, q_out, every cache byte, the indexer's Q codes and weights), the
// logits within numerics.md §11.6 and the selection by the band rule (§11.7) of the exact logits,
// then downstream of the selection the C4A slots byte for byte and the attention output within
// §11.8 of the reference ops run on that selection. The optimized step gives the same bytes on
// 1 and 2 threads, so the downstream check of the 1-thread step covers both.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "layer_step.hpp"
#include "testing/attention.hpp"
#include "testing/gtest.hpp"
#include "testing/oracle.hpp"

namespace dsv4cpu::test {
namespace {

using decode_step::LayerStep;
using decode_step::StepOptions;

StepOptions step_options(Impl impl, int threads) {
  StepOptions o;
  o.impl = impl;
  o.threads = threads;
  return o;
}

template <class T>
::testing::AssertionResult same(const char* name, const std::vector<T>& got,
                                const std::vector<T>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << name << ": " << got.size() << " elements, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure() << name << "[" << i << "] = " << +got[i]
                                           << ", expected " << +want[i];
  return ::testing::AssertionSuccess();
}

// What the exact ops write: metadata, the SWA insert, both compressors, the indexer's Q
// quantisation (README, "Implementations": exact or bit-exact).
void expect_exact_ops_equal(const LayerStep& got, const LayerStep& want) {
  EXPECT_TRUE(same("positions", got.positions, want.positions));
  EXPECT_TRUE(same("token_to_req", got.token_to_req, want.token_to_req));
  EXPECT_TRUE(same("swa_slots", got.swa_slots, want.swa_slots));
  EXPECT_TRUE(same("main_state_slots", got.main_state_slots, want.main_state_slots));
  EXPECT_TRUE(same("index_state_slots", got.index_state_slots, want.index_state_slots));
  EXPECT_TRUE(same("main_pool_slots", got.main_pool_slots, want.main_pool_slots));
  EXPECT_TRUE(same("index_pool_slots", got.index_pool_slots, want.index_pool_slots));
  EXPECT_TRUE(same("c4a_slots", got.c4a_slots, want.c4a_slots));
  EXPECT_TRUE(same("index_k_slots", got.index_k_slots, want.index_k_slots));
  EXPECT_TRUE(same("compressed_seq_lens", got.indexer.compressed_seq_lens,
                   want.indexer.compressed_seq_lens));
  ASSERT_TRUE(got.indexer.decode && want.indexer.decode);
  EXPECT_TRUE(same("decode_seq_lens", got.indexer.decode->decode_seq_lens,
                   want.indexer.decode->decode_seq_lens));
  EXPECT_TRUE(same("window_slots", got.window_slots, want.window_slots));
  EXPECT_TRUE(same("q_out", got.q_out, want.q_out));
  EXPECT_TRUE(same("swa cache", got.swa.bytes, want.swa.bytes));
  EXPECT_TRUE(same("main state cache", got.main_state.bytes, want.main_state.bytes));
  EXPECT_TRUE(same("C4A cache", got.c4a.bytes, want.c4a.bytes));
  EXPECT_TRUE(same("index state cache", got.index_state.bytes, want.index_state.bytes));
  EXPECT_TRUE(same("indexer K cache", got.index_k.bytes, want.index_k.bytes));
  EXPECT_TRUE(same("index_q_fp8", got.index_q_fp8, want.index_q_fp8));
  EXPECT_TRUE(same("index_weights_out", got.index_weights_out, want.index_weights_out));
}

// The exact logits of token t (its own request's keys 0 .. L-1 through the K cache's table).
testing::ExactLogits exact_row(const LayerStep& s, int64_t t) {
  const int64_t L = s.indexer.decode->decode_seq_lens[static_cast<size_t>(t)];
  std::vector<int64_t> pages;
  for (int64_t c = 0; c * decode_step::kCompressedBlock < L; ++c)
    pages.push_back(s.index_k.block_table[static_cast<size_t>(t * s.index_k.columns + c)]);
  return testing::exact_logits(&s.index_q_fp8[static_cast<size_t>(t * 64 * 128)],
                               &s.index_weights_out[static_cast<size_t>(t * 64)], 64,
                               s.index_k.cache(), decode_step::kCompressedBlock, pages, L);
}

// The selection of every token: identity rows [0 .. L_t - 1, -1 ...] where L_t <= 512 (and in a
// short-context step), else the logits within §11.6 and the 512 indices by the band rule.
void expect_selection_accepted(const LayerStep& s) {
  for (int64_t t = 0; t < s.T; ++t) {
    const int32_t* row = &s.topk[static_cast<size_t>(t * 512)];
    const int64_t L = (s.positions[static_cast<size_t>(t)] + 1) / 4;
    if (s.short_context || L <= 512) {
      for (int64_t i = 0; i < 512; ++i)
        ASSERT_EQ(row[i], i < L ? i : -1) << "token " << t << ", column " << i;
      continue;
    }
    const testing::ExactLogits ex = exact_row(s, t);
    ASSERT_EQ(ex.size(), L);
    EXPECT_TRUE(testing::holds(testing::logits_violation(
        &s.logits[static_cast<size_t>(t * s.logits_width)], s.logits_width, ex)))
        << "token " << t;
    EXPECT_TRUE(testing::holds(testing::band_rule_violation(row, 512, ex, 1.0, true)))
        << "token " << t;
  }
}

struct StepCase {
  const char* name;
  decode_step::Shape shape;
};

void PrintTo(const StepCase& c, std::ostream* os) { *os << c.name; }

class LayerStepTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(LayerStepTest, OptimizedEqualsReferenceComposition) {
  const decode_step::Shape& shape = GetParam().shape;
  LayerStep ref(shape);
  ref.run(step_options(Impl::reference, 1));
  expect_selection_accepted(ref);

  std::vector<LayerStep> optimized;
  for (int threads : {1, 2}) {
    SCOPED_TRACE("optimized step, threads " + std::to_string(threads));
    LayerStep& opt = optimized.emplace_back(shape);
    opt.run(step_options(Impl::optimized, threads));
    expect_exact_ops_equal(opt, ref);
    EXPECT_EQ(opt.short_context, ref.short_context);
    expect_selection_accepted(opt);
  }
  // Thread count: every byte the step writes.
  const LayerStep& opt = optimized[0];
  const LayerStep& two = optimized[1];
  expect_exact_ops_equal(two, opt);
  EXPECT_TRUE(same("logits", two.logits, opt.logits));
  EXPECT_TRUE(same("topk", two.topk, opt.topk));
  EXPECT_TRUE(same("compressed_slots", two.compressed_slots, opt.compressed_slots));
  EXPECT_TRUE(same("out", two.out, opt.out));

  // Downstream of the selection: the reference ops on the optimized step's selection (the
  // reference step itself wherever both selections agree).
  LayerStep expect = opt;
  expect.attend(step_options(Impl::reference, 1));
  EXPECT_TRUE(same("compressed_slots", opt.compressed_slots, expect.compressed_slots));
  EXPECT_TRUE(same("compressed_lens", opt.compressed_lens, expect.compressed_lens));
  if (opt.topk == ref.topk) {
    EXPECT_TRUE(same("reference out", expect.out, ref.out));
  }
  const testing::AttentionInputs in{
      TensorView(expect.q_out.data(), DType::BF16, {shape.batch, shape.heads, 512}),
      expect.swa.cache(),
      decode_step::kSwaBlock,
      TensorView(expect.window_slots.data(), DType::I64, {shape.batch, decode_step::kWindow}),
      expect.c4a.cache(),
      decode_step::kCompressedBlock,
      TensorView(expect.compressed_slots.data(), DType::I64, {shape.batch, 512}),
      TensorView(expect.attn_sink.data(), DType::F32, {shape.heads}),
      kAttentionScale,
      NopeDecode::exact};
  EXPECT_TRUE(testing::holds(testing::attention_out_violation(
      testing::attention_bound(in), opt.out.data(), expect.out.data())));
}

// Short-context steps take the identity rows (one at the 512-entry limit), long ones the logits
// and top-k; "first_tokens" has windows and pooled rows before position 0.
INSTANTIATE_TEST_SUITE_P(
    Shapes, LayerStepTest,
    ::testing::Values(StepCase{"first_tokens", {3, 9, 64, 1}},
                      StepCase{"short_one_request", {1, 300, 64, 2}},
                      StepCase{"short_at_limit", {2, 2049, 64, 3}},
                      StepCase{"long_h64", {3, 2600, 64, 4}},
                      StepCase{"long_h128", {2, 4100, 128, 5}}),
    [](const ::testing::TestParamInfo<StepCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace dsv4cpu::test
