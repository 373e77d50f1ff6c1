// indexer.md §5 (topk_transform_512, topk_transform_1024) and §6 (short_context_topk): the
// spec's examples, the canonical order against a full sort, the vllm heap against libstdc++'s
// heap functions with the same comparator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "args/indexer.hpp"
#include "dsv4cpu/indexer.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// §5.6 with a heap of 4, through the reference's row selection (which takes K as a parameter).
TEST(TopkSelection, SpecExamplesHeapOf4) {
  struct Example {
    std::vector<float> scores;
    std::vector<int32_t> canonical, vllm;
  };
  const std::vector<Example> examples = {
      {{5, 1, 3, 3, 2, 7, 3, 0}, {5, 0, 2, 3}, {2, 3, 0, 5}},
      {{1, 1, 1, 1, 1, 1, 2, 1}, {6, 0, 1, 2}, {1, 3, 2, 6}},
      {{kNaN, 1, 2, 3, 4, kNaN, 6, 0.5f}, {6, 4, 3, 2}, {0, 3, 4, 6}},
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 8, 7, 6}, {6, 7, 8, 9}},
  };
  for (const Example& ex : examples) {
    const auto L = static_cast<int64_t>(ex.scores.size());
    std::vector<int32_t> out(4, -7);
    detail::ref::topk_canonical_row(ex.scores.data(), L, 4, out.data());
    EXPECT_EQ(out, ex.canonical);
    detail::ref::topk_vllm_row(ex.scores.data(), L, 4, out.data());
    EXPECT_EQ(out, ex.vllm);
  }
}

// The canonical examples of §5.6 at K = 512 through the public op: 508 entries of +inf placed
// after the example fill the first 508 places (by index), the last four are the example's answer.
DSV4CPU_RUN_TEST(TopkTransform512, SpecCanonicalExamplesPadded, "topk_transform_512") {
  const std::vector<std::pair<std::vector<float>, std::vector<int32_t>>> examples = {
      {{5, 1, 3, 3, 2, 7, 3, 0}, {5, 0, 2, 3}},
      {{1, 1, 1, 1, 1, 1, 2, 1}, {6, 0, 1, 2}},
      {{kNaN, 1, 2, 3, 4, kNaN, 6, 0.5f}, {6, 4, 3, 2}},
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 8, 7, 6}},
  };
  testing::for_each_run("topk_transform_512", [&](const testing::Run& run) {
    for (const auto& [head, want] : examples) {
      std::vector<float> scores = head;
      scores.resize(head.size() + 508, kInf);
      const auto L = static_cast<int64_t>(scores.size());
      const std::vector<int32_t> seq_lens = {static_cast<int32_t>(L)};
      std::vector<int32_t> raw(512, -7);
      topk_transform_512(TensorView(scores.data(), DType::F32, {1, L}),
                         TensorView(seq_lens.data(), DType::I32, {1}), TensorView(), 1,
                         TopkMode::canonical, MutableTensorView(raw.data(), DType::I32, {1, 512}),
                         MutableTensorView(), run.options());
      for (int i = 0; i < 508; ++i)
        ASSERT_EQ(raw[static_cast<size_t>(i)], static_cast<int32_t>(head.size()) + i);
      EXPECT_EQ(std::vector<int32_t>(raw.begin() + 508, raw.end()), want) << run.label();
    }
  });
}

// §5.6 page transform: page_size 64, page_table [5, 7, 2]; raw 3 -> 323, 64 -> 448, 130 -> 130,
// −1 -> −1 (a short row L = 131 gives raw = identity, so every one of these raws occurs).
DSV4CPU_RUN_TEST(TopkTransform512, SpecPageTransformExample, "topk_transform_512") {
  testing::for_each_run("topk_transform_512", [&](const testing::Run& run) {
    std::vector<float> scores(200, 0.0f);
    const std::vector<int64_t> seq_lens = {131}, page_table = {5, 7, 2, -1};
    std::vector<int32_t> raw(512, -7), pages(512, -7);
    topk_transform_512(TensorView(scores.data(), DType::F32, {1, 200}),
                       TensorView(seq_lens.data(), DType::I64, {1}),
                       TensorView(page_table.data(), DType::I64, {1, 4}), 64, TopkMode::vllm,
                       MutableTensorView(raw.data(), DType::I32, {1, 512}),
                       MutableTensorView(pages.data(), DType::I32, {1, 512}), run.options());
    EXPECT_EQ(raw[3], 3);
    EXPECT_EQ(pages[3], 323) << run.label();
    EXPECT_EQ(pages[64], 448);
    EXPECT_EQ(pages[130], 130);
    EXPECT_EQ(raw[131], -1);
    EXPECT_EQ(pages[131], -1);
    EXPECT_EQ(pages[511], -1);
  });
}

// §5.2: rows with L <= 512 are identity rows in both modes; scores are not read (NaN here), and
// columns past 512 keep their content.
DSV4CPU_RUN_TEST(TopkTransform512, ShortRowsAreIdentity, "topk_transform_512") {
  const int64_t B = 4, S = 600, W = 520;
  const std::vector<float> scores(B * S, kNaN);
  const std::vector<int32_t> seq_lens = {0, 1, 511, 512};
  for (TopkMode mode : {TopkMode::canonical, TopkMode::vllm}) {
    testing::for_each_run("topk_transform_512", [&](const testing::Run& run) {
      std::vector<int32_t> raw(B * W, -7);
      topk_transform_512(TensorView(scores.data(), DType::F32, {B, S}),
                         TensorView(seq_lens.data(), DType::I32, {B}), TensorView(), 4, mode,
                         MutableTensorView(raw.data(), DType::I32, {B, W}), MutableTensorView(),
                         run.options());
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t i = 0; i < W; ++i) {
          const int32_t want = i >= 512                               ? -7
                               : i < seq_lens[static_cast<size_t>(b)] ? int32_t(i)
                                                                      : -1;
          ASSERT_EQ(raw[static_cast<size_t>(b * W + i)], want) << run.label() << " row " << b;
        }
      }
    });
  }
}

// Rows drawn with heavy ties and every special value. Kinds: 0 distinct, 1 five levels,
// 2 specials only, 3 specials among integers, 4 signed zeros with a few ones (so the cut falls
// among the zeros).
std::vector<float> random_row(std::mt19937_64& rng, int64_t L, int kind) {
  static const float specials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1.0f, -1.0f, 3e38f, 2.5f};
  std::vector<float> row(static_cast<size_t>(L));
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  for (auto& x : row) {
    switch (kind) {
      case 0: x = u(rng); break;
      case 1: x = static_cast<float>(rng() % 5); break;
      case 2: x = specials[rng() % 9]; break;
      case 3: x = rng() % 3 == 0 ? specials[rng() % 9] : std::round(u(rng)); break;
      default: x = rng() % 10 == 0 ? 1.0f : rng() % 2 == 0 ? 0.0f : -0.0f; break;
    }
  }
  return row;
}

// §5.3 oracle: a full sort by (is NaN, −score, index); −(±0) compare equal, so ±0 tie.
std::vector<int32_t> sorted_prefix(const std::vector<float>& s, int64_t L, int64_t K) {
  std::vector<std::tuple<bool, float, int32_t>> keyed;
  for (int64_t i = 0; i < L; ++i) {
    const float x = s[static_cast<size_t>(i)];
    keyed.emplace_back(std::isnan(x), std::isnan(x) ? 0.0f : -x, static_cast<int32_t>(i));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int32_t> out;
  for (int64_t k = 0; k < K; ++k) out.push_back(std::get<2>(keyed[static_cast<size_t>(k)]));
  return out;
}

void check_canonical_against_sort(const char* op, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int64_t B = 10;
  const int64_t S = K + 1500, W = K + 3;
  std::vector<float> scores;
  std::vector<int64_t> seq_lens;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> row = random_row(rng, S, static_cast<int>(b % 5));
    scores.insert(scores.end(), row.begin(), row.end());
    seq_lens.push_back(b == 0 ? S : K + 1 + static_cast<int64_t>(rng() % (S - K)));
  }
  testing::for_each_run(op, [&](const testing::Run& run) {
    std::vector<int32_t> raw(static_cast<size_t>(B * W), -7);
    const TensorView sv(scores.data(), DType::F32, {B, S}), lv(seq_lens.data(), DType::I64, {B});
    const MutableTensorView rv(raw.data(), DType::I32, {B, W});
    if (K == 512)
      topk_transform_512(sv, lv, TensorView(), 1, TopkMode::canonical, rv, MutableTensorView(),
                         run.options());
    else
      topk_transform_1024(sv, lv, TensorView(), 1, rv, MutableTensorView(), run.options());
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<float> row(scores.begin() + b * S, scores.begin() + (b + 1) * S);
      const std::vector<int32_t> got(raw.begin() + b * W, raw.begin() + b * W + K);
      EXPECT_EQ(got, sorted_prefix(row, seq_lens[static_cast<size_t>(b)], K))
          << op << " " << run.label() << " row " << b;
      EXPECT_EQ(raw[static_cast<size_t>(b * W + K)], -7);  // past column K: untouched
    }
  });
}

DSV4CPU_RUN_TEST(TopkTransform512, CanonicalAgainstFullSort, "topk_transform_512") {
  check_canonical_against_sort("topk_transform_512", 512, 11);
}
DSV4CPU_RUN_TEST(TopkTransform1024, CanonicalAgainstFullSort, "topk_transform_1024") {
  check_canonical_against_sort("topk_transform_1024", 1024, 12);
}

// §5.4 oracle: libstdc++'s make_heap / pop_heap / push_heap with `below` (allowed in tests).
std::vector<int32_t> std_heap_select(const std::vector<float>& s, int64_t L) {
  using E = std::pair<float, int64_t>;
  const auto below = [](const E& a, const E& b) {
    return a.first > b.first || (a.first == b.first && a.second > b.second);
  };
  std::vector<E> h;
  for (int64_t i = 0; i < 512; ++i) h.emplace_back(s[static_cast<size_t>(i)], i);
  std::make_heap(h.begin(), h.end(), below);
  for (int64_t i = 512; i < L; ++i) {
    const float x = s[static_cast<size_t>(i)];
    if (x > h[0].first || (x == h[0].first && i < h[0].second)) {
      std::pop_heap(h.begin(), h.end(), below);
      h.back() = {x, i};
      std::push_heap(h.begin(), h.end(), below);
    }
  }
  std::vector<int32_t> out;
  for (const E& e : h) out.push_back(static_cast<int32_t>(e.second));
  return out;
}

// topk_transform_512 in vllm mode on rows [B, S] of `scores` (row b selecting from its first
// seq_lens[b]) equals std_heap_select for every run of the op.
void check_vllm_against_std_heap(const std::vector<float>& scores,
                                 const std::vector<int32_t>& seq_lens, int64_t S) {
  const auto B = static_cast<int64_t>(seq_lens.size());
  testing::for_each_run("topk_transform_512", [&](const testing::Run& run) {
    std::vector<int32_t> raw(static_cast<size_t>(B * 512), -7);
    topk_transform_512(TensorView(scores.data(), DType::F32, {B, S}),
                       TensorView(seq_lens.data(), DType::I32, {B}), TensorView(), 1,
                       TopkMode::vllm, MutableTensorView(raw.data(), DType::I32, {B, 512}),
                       MutableTensorView(), run.options());
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<float> row(scores.begin() + b * S, scores.begin() + (b + 1) * S);
      const std::vector<int32_t> got(raw.begin() + b * 512, raw.begin() + (b + 1) * 512);
      EXPECT_EQ(got, std_heap_select(row, seq_lens[static_cast<size_t>(b)]))
          << run.label() << " row " << b;
    }
  });
}

DSV4CPU_RUN_TEST(TopkTransform512, VllmAgainstStdHeap, "topk_transform_512") {
  std::mt19937_64 rng(21);
  constexpr int64_t B = 12, S = 3000;
  std::vector<float> scores;
  std::vector<int32_t> seq_lens;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> row = random_row(rng, S, static_cast<int>(b % 5));
    scores.insert(scores.end(), row.begin(), row.end());
    seq_lens.push_back(b == 0 ? 513 : static_cast<int32_t>(513 + rng() % (S - 512)));
  }
  check_vllm_against_std_heap(scores, seq_lens, S);
}

// §5.4 on rows where most scores enter the heap, so that nearly every step replaces its top
// (the hole paths of the optimized heap): ascending, ascending with noise (keys that rise past
// their parents on the push), a sawtooth and a random walk, 20,000 scores each.
DSV4CPU_RUN_TEST(TopkTransform512, VllmAgainstStdHeapWhereMostScoresEnter, "topk_transform_512") {
  std::mt19937_64 rng(22);
  std::normal_distribution<float> noise;
  constexpr int64_t B = 4, S = 20000;
  std::vector<float> scores(static_cast<size_t>(B * S));
  float walk = 0.0f;
  for (int64_t i = 0; i < S; ++i) {
    walk += noise(rng);
    const auto x = static_cast<float>(i);
    scores[static_cast<size_t>(i)] = x;
    scores[static_cast<size_t>(S + i)] = x + 50.0f * noise(rng);
    scores[static_cast<size_t>(2 * S + i)] = static_cast<float>(i % 3000);
    scores[static_cast<size_t>(3 * S + i)] = walk;
  }
  check_vllm_against_std_heap(scores, std::vector<int32_t>(B, static_cast<int32_t>(S)), S);
}

// §5.5 through the public op on selected rows: page_indices agree with the formula applied to
// raw_indices, for page sizes 1 and 64 and I32 / I64 tables with negative tails.
TEST(TopkTransform512, PageTransformOfSelectedRows) {
  std::mt19937_64 rng(31);
  constexpr int64_t B = 3, S = 1300;
  for (int64_t page_size : {1, 64}) {
    const int64_t MP = S / page_size + 2;
    std::vector<float> scores = random_row(rng, B * S, 3);
    const std::vector<int32_t> seq_lens = {1300, 700, 100};
    std::vector<int64_t> table(B * MP);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t m = 0; m < MP; ++m)
        table[static_cast<size_t>(b * MP + m)] = m * page_size < seq_lens[static_cast<size_t>(b)]
                                                     ? static_cast<int64_t>(rng() % 5000)
                                                     : -1;
    for (TopkMode mode : {TopkMode::canonical, TopkMode::vllm}) {
      std::vector<int32_t> raw(B * 512), pages(B * 512);
      topk_transform_512(TensorView(scores.data(), DType::F32, {B, S}),
                         TensorView(seq_lens.data(), DType::I32, {B}),
                         TensorView(table.data(), DType::I64, {B, MP}), page_size, mode,
                         MutableTensorView(raw.data(), DType::I32, {B, 512}),
                         MutableTensorView(pages.data(), DType::I32, {B, 512}));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < 512; ++i) {
          const int64_t r = raw[static_cast<size_t>(b * 512 + i)];
          const int64_t want =
              r < 0
                  ? -1
                  : table[static_cast<size_t>(b * MP + r / page_size)] * page_size + r % page_size;
          ASSERT_EQ(pages[static_cast<size_t>(b * 512 + i)], want);
        }
    }
  }
}

TEST(TopkTransform512, ModeText) {
  EXPECT_EQ(parse_topk_mode("topk_transform_512", "canonical"), TopkMode::canonical);
  EXPECT_EQ(parse_topk_mode("topk_transform_512", "vllm"), TopkMode::vllm);
  EXPECT_TRUE(testing::throws_exactly<ValueError>(
      [] { parse_topk_mode("topk_transform_512", "heap"); },
      "dsv4cpu::topk_transform_512: mode = heap: unknown mode (expected canonical or vllm)"));
}

TEST(TopkTransform512, ZeroSizeIsNoOp) {
  topk_transform_512(TensorView(nullptr, DType::F32, {0, 700}),
                     TensorView(nullptr, DType::I32, {0}), TensorView(nullptr, DType::I32, {0, 3}),
                     64, TopkMode::vllm, MutableTensorView(nullptr, DType::I32, {0, 512}),
                     MutableTensorView(nullptr, DType::I32, {0, 512}));
  topk_transform_1024(TensorView(nullptr, DType::F32, {0, 0}), TensorView(nullptr, DType::I32, {0}),
                      TensorView(), 1, MutableTensorView(nullptr, DType::I32, {0, 1024}),
                      MutableTensorView());
  short_context_topk(TensorView(nullptr, DType::I64, {0}),
                     MutableTensorView(nullptr, DType::I32, {0, 512}));
  SUCCEED();
}

// §6: L_t = (positions[t] + 1) / 4.
DSV4CPU_RUN_TEST(ShortContextTopk, IdentityRows, "short_context_topk") {
  const std::vector<int64_t> positions = {0, 2, 3, 7, 9, 2050};
  const std::vector<int64_t> lens = {0, 0, 1, 2, 2, 512};
  const int64_t T = 6, W = 513;
  testing::for_each_run("short_context_topk", [&](const testing::Run& run) {
    std::vector<int32_t> out(T * W, -7);
    short_context_topk(TensorView(positions.data(), DType::I64, {T}),
                       MutableTensorView(out.data(), DType::I32, {T, W}), run.options());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < W; ++i) {
        const int32_t want = i == 512 ? -7 : i < lens[static_cast<size_t>(t)] ? int32_t(i) : -1;
        ASSERT_EQ(out[static_cast<size_t>(t * W + i)], want) << run.label() << " row " << t;
      }
  });
}

}  // namespace
}  // namespace dsv4cpu
