// indexer.md §7 (indexer_topk): the worked example, and mixed batches against a per-token brute
// force (identity rows exactly; longer rows by the band rule of numerics.md §11.7 against exact
// binary64 logits, and equal to topk_transform_512 of fp8_paged_mqa_logits, §7.2).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "dsv4cpu/indexer.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

constexpr int64_t K = 512;

Options reference() {
  Options o;
  o.impl = Impl::reference;
  return o;
}

struct Batch {
  int64_t H, P;
  std::vector<int64_t> qsl, seq_lens;
  int64_t MB;
  std::vector<int64_t> block_table;
  testing::KCache kv;
  std::vector<uint8_t> q;
  std::vector<float> w;
  int64_t T() const { return qsl.back(); }
  int64_t R() const { return static_cast<int64_t>(seq_lens.size()); }
};

// Random queries and a cache covering every request's compressed entries through a shuffled
// block table (−1 past the covered pages). Key values come from a few levels so rows have ties.
Batch make_batch(std::mt19937_64& rng, int64_t H, int64_t P, const std::vector<int64_t>& q_lens,
                 const std::vector<int64_t>& seq_lens, bool tie_heavy) {
  const auto R = static_cast<int64_t>(seq_lens.size());
  int64_t MB = 1;
  for (int64_t s : seq_lens) MB = std::max(MB, (s / 4 + P - 1) / P + 1);
  const int64_t pages = R * MB;
  Batch b{H, P, {0}, seq_lens, MB, {}, testing::KCache(P, pages, P * 132 + 64), {}, {}};
  for (int64_t ql : q_lens) b.qsl.push_back(b.qsl.back() + ql);
  std::vector<int64_t> perm(static_cast<size_t>(pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t m = 0; m < MB; ++m)
      b.block_table.push_back(m * P < seq_lens[static_cast<size_t>(r)] / 4
                                  ? perm[static_cast<size_t>(r * MB + m)]
                                  : -1);
  std::vector<uint8_t> codes(128);
  for (int64_t p = 0; p < pages; ++p)
    for (int64_t e = 0; e < P; ++e) {
      if (tie_heavy) {
        std::fill(codes.begin(), codes.end(), 0x00);
        codes[0] = static_cast<uint8_t>(0x30 + rng() % 3);
      } else {
        for (auto& x : codes) x = testing::random_code(rng);
      }
      b.kv.set(p, e, codes.data(), std::ldexp(1.0f, static_cast<int>(rng() % 4) - 6));
    }
  b.q.resize(static_cast<size_t>(b.T() * H * 128));
  for (auto& x : b.q) x = tie_heavy ? 0x38 : testing::random_code(rng);
  b.w.resize(static_cast<size_t>(b.T() * H));
  std::uniform_real_distribution<float> wd(-0.5f, 1.0f);
  for (auto& x : b.w) x = tie_heavy ? 1.0f : wd(rng);
  return b;
}

std::vector<int32_t> run_indexer_topk(const Batch& b, TopkMode mode, const Options& o,
                                      int64_t width = K) {
  std::vector<int32_t> out(static_cast<size_t>(b.T() * width), -7);
  std::vector<int32_t> qsl32(b.qsl.begin(), b.qsl.end());
  indexer_topk(TensorView(b.q.data(), DType::F8_E4M3, {b.T(), b.H, 128}),
               TensorView(b.w.data(), DType::F32, {b.T(), b.H}),
               TensorView(qsl32.data(), DType::I32, {b.R() + 1}),
               TensorView(b.seq_lens.data(), DType::I64, {b.R()}),
               TensorView(b.block_table.data(), DType::I64, {b.R(), b.MB}), b.kv.view(), b.P, mode,
               MutableTensorView(out.data(), DType::I32, {b.T(), width}), o);
  return out;
}

// The per-token brute force: L_t from §7.2 and, for rows with L_t > 512, the exact logits row.
struct Oracle {
  std::vector<int64_t> L;             // per token
  std::vector<int64_t> request;       // per token
  std::vector<testing::ExactLogits> exact;  // per token; empty for identity rows
};

Oracle brute_force(const Batch& b) {
  Oracle o;
  for (int64_t r = 0; r < b.R(); ++r) {
    const int64_t q0 = b.qsl[static_cast<size_t>(r)], q1 = b.qsl[static_cast<size_t>(r + 1)];
    for (int64_t t = q0; t < q1; ++t) {
      const int64_t pos = b.seq_lens[static_cast<size_t>(r)] - (q1 - q0) + (t - q0);
      const int64_t L = (pos + 1) / 4;
      o.L.push_back(L);
      o.request.push_back(r);
      o.exact.push_back(L <= K ? testing::ExactLogits{}
                               : testing::exact_logits(
                                     b.q.data() + t * b.H * 128, b.w.data() + t * b.H, b.H,
                                     b.kv.view(), b.P,
                                     std::vector<int64_t>(b.block_table.begin() + r * b.MB,
                                                          b.block_table.begin() + (r + 1) * b.MB),
                                     L));
    }
  }
  return o;
}

// Every variant and mode against the brute force: identity rows exactly, longer rows by the band
// rule; the reference's long rows also equal topk_transform_512 of that token's
// fp8_paged_mqa_logits row (the definition in §7.2).
void check_batch(const Batch& b) {
  const Oracle o = brute_force(b);
  int64_t long_rows = 0;
  for (TopkMode mode : {TopkMode::canonical, TopkMode::vllm}) {
    testing::for_each_run("indexer_topk", [&](const testing::Run& run) {
      const std::vector<int32_t> out = run_indexer_topk(b, mode, run.options());
      for (int64_t t = 0; t < b.T(); ++t) {
        const int64_t L = o.L[static_cast<size_t>(t)], r = o.request[static_cast<size_t>(t)];
        const int32_t* row = out.data() + t * K;
        if (L <= K) {
          for (int64_t i = 0; i < K; ++i) ASSERT_EQ(row[i], i < L ? i : -1) << "token " << t;
          continue;
        }
        ++long_rows;
        EXPECT_TRUE(testing::holds(testing::band_rule_violation(
            row, K, o.exact[static_cast<size_t>(t)], 1, mode == TopkMode::canonical)))
            << run.label() << " token " << t << " L=" << L;
        if (run.variant.role != Role::reference) continue;
        std::vector<float> logits(static_cast<size_t>(L));
        const std::vector<int64_t> len = {L};
        fp8_paged_mqa_logits(TensorView(b.q.data() + t * b.H * 128, DType::F8_E4M3, {1, b.H, 128}),
                             b.kv.view(), TensorView(b.w.data() + t * b.H, DType::F32, {1, b.H}),
                             TensorView(len.data(), DType::I64, {1}),
                             TensorView(b.block_table.data() + r * b.MB, DType::I64, {1, b.MB}),
                             b.P, L, MutableTensorView(logits.data(), DType::F32, {1, L}), 1,
                             reference());
        std::vector<int32_t> want(K);
        topk_transform_512(TensorView(logits.data(), DType::F32, {1, L}),
                           TensorView(len.data(), DType::I64, {1}), TensorView(), 1, mode,
                           MutableTensorView(want.data(), DType::I32, {1, K}), MutableTensorView(),
                           reference());
        EXPECT_EQ(std::vector<int32_t>(row, row + K), want) << "token " << t;
      }
    });
  }
  EXPECT_GT(long_rows, 0);
}

// §7.3: decodes of seq_len 10 and 300, a 6-token prefill of seq_len 9: short step, identity rows
// with L = [2, 75, 1, 1, 1, 1, 2, 2]. Nothing else is read: the block table is all −1 and the
// queries are NaN codes.
DSV4CPU_RUN_TEST(IndexerTopk, SpecExampleShortStep, "indexer_topk") {
  const std::vector<int32_t> qsl = {0, 1, 2, 8}, seq_lens = {10, 300, 9};
  const std::vector<int32_t> block_table(3 * 2, -1);
  const std::vector<uint8_t> q(8 * 1 * 128, 0x7F);
  const std::vector<float> w(8, std::numeric_limits<float>::quiet_NaN());
  testing::KCache kv(64, 1, 64 * 132);
  const std::vector<int64_t> L = {2, 75, 1, 1, 1, 1, 2, 2};
  for (TopkMode mode : {TopkMode::canonical, TopkMode::vllm}) {
    testing::for_each_run("indexer_topk", [&](const testing::Run& run) {
      std::vector<int32_t> out(8 * 600, -7);
      indexer_topk(TensorView(q.data(), DType::F8_E4M3, {8, 1, 128}),
                   TensorView(w.data(), DType::F32, {8, 1}),
                   TensorView(qsl.data(), DType::I32, {4}),
                   TensorView(seq_lens.data(), DType::I32, {3}),
                   TensorView(block_table.data(), DType::I32, {3, 2}), kv.view(), 64, mode,
                   MutableTensorView(out.data(), DType::I32, {8, 600}), run.options());
      for (int64_t t = 0; t < 8; ++t)
        for (int64_t i = 0; i < 600; ++i) {
          const int32_t want = i >= K ? -7 : i < L[static_cast<size_t>(t)] ? int32_t(i) : -1;
          ASSERT_EQ(out[static_cast<size_t>(t * 600 + i)], want) << run.label() << " row " << t;
        }
    });
  }
}

// §7.3 variant: request 1 has seq_len 2400 (L = 600), so the step is long; row 1 is the top 512
// of 600 logits, every other row is still an identity row.
DSV4CPU_RUN_TEST(IndexerTopk, SpecExampleLongRequest, "indexer_topk") {
  std::mt19937_64 rng(41);
  const Batch b = make_batch(rng, 4, 64, {1, 1, 6}, {10, 2400, 9}, false);
  check_batch(b);
}

// Mixed batch: decodes with query lengths 1 and 2 (MTP), a prefill whose causal lengths cross
// 512 inside the request (L_t = 511 .. 514), a long prefill, an empty request, block size 16.
DSV4CPU_RUN_TEST(IndexerTopk, MixedBatchAgainstBruteForce, "indexer_topk") {
  std::mt19937_64 rng(42);
  const Batch b = make_batch(rng, 3, 16, {1, 2, 0, 10, 3}, {2300, 2101, 7, 2056, 2500}, false);
  check_batch(b);
}

// Exactly tied scores (three key levels, equal queries and weights): the band rule alone cannot
// tell the modes apart, the composition check does.
DSV4CPU_RUN_TEST(IndexerTopk, TiedScores, "indexer_topk") {
  std::mt19937_64 rng(43);
  const Batch b = make_batch(rng, 2, 64, {1, 3}, {2600, 2208}, true);
  check_batch(b);
}

TEST(IndexerTopk, ZeroSizeIsNoOp) {
  testing::KCache kv(64, 1, 64 * 132);
  const std::vector<int32_t> qsl = {0};
  indexer_topk(TensorView(nullptr, DType::F8_E4M3, {0, 64, 128}),
               TensorView(nullptr, DType::F32, {0, 64}), TensorView(qsl.data(), DType::I32, {1}),
               TensorView(nullptr, DType::I32, {0}), TensorView(nullptr, DType::I32, {0, 3}),
               kv.view(), 64, TopkMode::canonical,
               MutableTensorView(nullptr, DType::I32, {0, 512}));
  SUCCEED();
}

}  // namespace
}  // namespace dsv4cpu
