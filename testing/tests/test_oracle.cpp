// testing/oracle: the exact logits of numerics.md §11.6, the bound checks and the band rule of
// §11.7 on hand-built cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "testing/oracle.hpp"

namespace dsv4cpu::testing {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// numerics.md §11.6 example: H = 64, all codes 1.0, w = 0.01, ks = 2^-8.
struct LogitsExample {
  std::vector<uint8_t> q = std::vector<uint8_t>(64 * 128, 0x38);
  std::vector<float> w = std::vector<float>(64, 0.01f);
  std::vector<uint8_t> cache = std::vector<uint8_t>(2 * 132, 0x38);  // P = 2, one page
  LogitsExample() {
    const float ks = 0x1p-8f;
    std::memcpy(cache.data() + 256, &ks, 4);
    std::memcpy(cache.data() + 260, &ks, 4);
  }
  ExactLogits row(int64_t L) const {
    return exact_logits(q.data(), w.data(), 64, TensorView(cache.data(), DType::U8, {1, 264}), 2,
                        {0}, L);
  }
};

TEST(Oracle, ExactLogitSpecExample) {
  const LogitsExample ex;
  const ExactLogits row = ex.row(2);
  ASSERT_EQ(row.size(), 2);
  const double w = 0.01f;
  EXPECT_DOUBLE_EQ(row.X[1], 0x1p-8 * 64 * w * 128);  // 0.32
  EXPECT_NEAR(row.X[1], 0.32, 1e-8);
  EXPECT_NEAR(row.B[1], 3.66e-6, 0.01e-6);
  EXPECT_FALSE(row.nan[1]);
  // A key beyond the page list is reported.
  EXPECT_THROW(ex.row(3), std::out_of_range);
}

TEST(Oracle, NaNKeyCodesGiveNaNLogits) {
  LogitsExample ex;
  ex.cache[132 + 5] = 0xFF;  // key 1 holds a NaN code
  const ExactLogits row = ex.row(2);
  EXPECT_FALSE(row.nan[0]);
  EXPECT_TRUE(row.nan[1]);
  const float ninf = -std::numeric_limits<float>::infinity();
  const float X0 = static_cast<float>(row.X[0]);
  std::vector<float> got = {X0, std::nanf(""), ninf};
  EXPECT_EQ(logits_violation(got.data(), 3, row), "");
  got[1] = X0;
  EXPECT_TRUE(contains(logits_violation(got.data(), 3, row), "want NaN"));
}

TEST(Oracle, NoHeadsGivePlusZeroEvenForNaNKeys) {
  // indexer.md §4.2: with H = 0 the head sum is empty, so every visible logit is +0, a key with a
  // NaN code included.
  LogitsExample ex;
  ex.cache[132 + 5] = 0xFF;  // key 1 holds a NaN code
  const ExactLogits row = exact_logits(ex.q.data(), ex.w.data(), 0,
                                       TensorView(ex.cache.data(), DType::U8, {1, 264}), 2, {0}, 2);
  EXPECT_FALSE(row.nan[0]);
  EXPECT_FALSE(row.nan[1]);
  EXPECT_EQ(row.X[1], 0.0);
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> got = {0.0f, 0.0f, ninf};
  EXPECT_EQ(logits_violation(got.data(), 3, row), "");
  got[1] = std::nanf("");
  EXPECT_TRUE(contains(logits_violation(got.data(), 3, row), "want +0"));
  got[1] = -0.0f;
  EXPECT_TRUE(contains(logits_violation(got.data(), 3, row), "want +0"));
}

TEST(Oracle, LogitsWithinTheBound) {
  const LogitsExample ex;
  const ExactLogits row = ex.row(2);
  const float X = static_cast<float>(row.X[0]);
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> got = {X, X + 3e-6f, ninf};  // B = 3.66e-6
  EXPECT_EQ(logits_violation(got.data(), 3, row), "");
  got[1] = X + 5e-6f;
  EXPECT_TRUE(contains(logits_violation(got.data(), 3, row), "col 1"))
      << logits_violation(got.data(), 3, row);
  got[1] = X;
  got[2] = 0;  // must be -inf past L
  EXPECT_TRUE(contains(logits_violation(got.data(), 3, row), "col 2"));
}

TEST(Oracle, LogitsWithinTwiceTheBoundOfEachOther) {
  const LogitsExample ex;
  const float X = static_cast<float>(0x1p-8 * 64 * static_cast<double>(0.01f) * 128);
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> want = {X, X, ninf};  // S = 3, L = 2
  std::vector<float> got = want;
  got[1] = X + 6e-6f;  // < 2B = 7.3e-6
  Verdict v = compare_logits({ex.row(2)}, got.data(), want.data(), 3, 2);
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_TRUE(contains(v.detail, "max |Δ|/2B 0.8")) << v.detail;
  got[1] = X + 9e-6f;
  v = compare_logits({ex.row(2)}, got.data(), want.data(), 3, 2);
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "logits[0, 1]")) << v.detail;
  got = want;
  got[2] = 0;  // must stay -inf past L
  EXPECT_FALSE(compare_logits({ex.row(2)}, got.data(), want.data(), 3, 2).pass);
  got = want;
  got[0] = std::nanf("");
  EXPECT_FALSE(compare_logits({ex.row(2)}, got.data(), want.data(), 3, 2).pass);
  EXPECT_EQ(compare_logits({ex.row(2)}, want.data(), want.data(), 3, 2).detail,
            "max |Δ| 0 (exact)");
}

// numerics.md §11.7 with L = 600 distinct scores X_i = 600 - i and bounds B.
struct BandRow {
  ExactLogits ex;
  std::vector<int32_t> sel;
  explicit BandRow(double b) : sel(512) {
    for (int i = 0; i < 600; ++i) {
      ex.X.push_back(600 - i);
      ex.B.push_back(b);
      ex.nan.push_back(false);
    }
    for (int i = 0; i < 512; ++i) sel[static_cast<size_t>(i)] = i;  // canonical top 512
  }
  std::string violation(bool canonical, double factor = 1) const {
    return band_rule_violation(sel.data(), 512, ex, factor, canonical);
  }
};

TEST(Oracle, BandRuleAcceptsTheExactSelection) {
  BandRow r(0.1);
  EXPECT_EQ(r.violation(true), "");
}

TEST(Oracle, BandRuleAcceptsNearTiesOnly) {
  BandRow r(0.6);  // X_511 - B = 88.4 < X_512 + B = 88.6: 511 and 512 are interchangeable
  r.sel[511] = 512;
  EXPECT_EQ(r.violation(true), "");
  BandRow s(0.4);  // 89 - 0.4 > 88 + 0.4: the swap is wrong
  s.sel[511] = 512;
  EXPECT_TRUE(contains(s.violation(true), "ranks below"));
}

TEST(Oracle, BandRuleFactorScalesTheBound) {
  BandRow s(0.4);  // wrong with B, right with 2B: 89 - 0.8 < 88 + 0.8
  s.sel[511] = 512;
  EXPECT_FALSE(s.violation(true, 1).empty());
  EXPECT_EQ(s.violation(true, 2), "");
  // The message names the selected key's upper end X + B and the unselected one's lower X - B.
  EXPECT_EQ(s.violation(true, 1),
            "selected 512 (X+B = 88.4) ranks below unselected 511 (X-B = 88.6)");
}

TEST(Oracle, BandRuleStructuralChecks) {
  BandRow r(0.1);
  r.sel[3] = 2;
  EXPECT_TRUE(contains(r.violation(false), "twice"));
  r.sel[3] = 600;
  EXPECT_TRUE(contains(r.violation(false), "outside"));
  r.sel[3] = -1;
  EXPECT_TRUE(contains(r.violation(false), "outside"));
}

TEST(Oracle, BandRuleCanonicalOrder) {
  BandRow r(0.1);
  std::swap(r.sel[10], r.sel[11]);  // the set is right, the order is not
  EXPECT_TRUE(contains(r.violation(true), "order"));
  EXPECT_EQ(r.violation(false), "");  // vllm: set only
}

TEST(Oracle, BandRuleNaNScoresRankLastByIndex) {
  BandRow r(0.1);
  // Scores 0..99 are NaN: they rank after every number, among themselves by index.
  for (int i = 0; i < 100; ++i) r.ex.nan[static_cast<size_t>(i)] = true;
  for (int i = 0; i < 500; ++i) r.sel[static_cast<size_t>(i)] = 100 + i;
  for (int i = 0; i < 12; ++i) r.sel[static_cast<size_t>(500 + i)] = i;
  EXPECT_EQ(r.violation(true), "");
  std::swap(r.sel[500], r.sel[501]);
  EXPECT_TRUE(contains(r.violation(true), "order"));
  std::swap(r.sel[500], r.sel[501]);
  r.sel[0] = 50;  // a NaN chosen over the number at index 100
  EXPECT_FALSE(r.violation(true).empty());
}

}  // namespace
}  // namespace dsv4cpu::testing
