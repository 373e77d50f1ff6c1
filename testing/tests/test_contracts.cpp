// testing/contracts and testing/cache_compare: the comparison contracts of numerics.md §11 on
// hand-built cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "testing/cache_compare.hpp"
#include "testing/contracts.hpp"

namespace dsv4cpu::testing {
namespace {

template <class T>
ArrayRef ref(DType dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  return {dtype, std::move(shape), reinterpret_cast<const uint8_t*>(v.data())};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Contracts, Ord8AndStepDistance) {
  // numerics.md §11.2: +0/-0 one apart, 0x01/0x81 three apart, 0x7D/0x7E one apart.
  EXPECT_EQ(ord8(0x00), 0);
  EXPECT_EQ(ord8(0x80), -1);
  EXPECT_EQ(ord8(0x81), -2);
  EXPECT_EQ(fp8_steps(0x00, 0x80), 1);
  EXPECT_EQ(fp8_steps(0x01, 0x81), 3);
  EXPECT_EQ(fp8_steps(0x7D, 0x7E), 1);
  EXPECT_EQ(fp8_steps(0xFE, 0x7E), 0x7E + 0x7E + 1);
  // A NaN code matches only the identical byte.
  EXPECT_EQ(fp8_steps(0x7F, 0x7F), 0);
  EXPECT_EQ(fp8_steps(0xFF, 0xFF), 0);
  EXPECT_EQ(fp8_steps(0x7F, 0xFF), kNaNMismatch);
  EXPECT_EQ(fp8_steps(0x7F, 0x7E), kNaNMismatch);
}

TEST(Contracts, Ord16AndUlpDistance) {
  // numerics.md §11.3.
  EXPECT_EQ(ord16(0x8000), -1);
  EXPECT_EQ(bf16_ulps(0x0000, 0x8000), 1);
  EXPECT_EQ(bf16_ulps(0x0001, 0x8001), 3);
  EXPECT_EQ(bf16_ulps(0x3F80, 0x3F81), 1);
  EXPECT_EQ(bf16_ulps(0x7F7F, 0x7F80), 1);  // largest finite to +inf
  EXPECT_EQ(bf16_ulps(0x7FC0, 0xFFC1), 0);  // any two NaNs
  EXPECT_EQ(bf16_ulps(0x7FC0, 0x7F80), kNaNMismatch);
}

TEST(Contracts, ExactTreatsAnyTwoNaNsAlike) {
  const std::vector<uint32_t> a = {0x7FC00000, 0x3F800000, 0x80000000};
  const std::vector<uint32_t> b = {0xFFC00001, 0x3F800000, 0x80000000};
  EXPECT_TRUE(compare_exact("x", ref(DType::F32, {3}, a), ref(DType::F32, {3}, b)).pass);
  const std::vector<uint32_t> c = {0x7FC00000, 0x3F800000, 0x00000000};  // -0 vs +0
  const Verdict v = compare_exact("x", ref(DType::F32, {3}, c), ref(DType::F32, {3}, a));
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "x[2]")) << v.detail;
}

TEST(Contracts, ExactReportsFirstMismatchAndCount) {
  const std::vector<int64_t> got = {-1, 28, 13, 40, 7, 8};
  const std::vector<int64_t> want = {-1, 28, 13, 39, 7, 9};
  const Verdict v =
      compare_exact("slots", ref(DType::I64, {3, 2}, got), ref(DType::I64, {3, 2}, want));
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail, "slots[1, 1]: got 40, expected 39 (2 of 6 elements differ)");
  EXPECT_TRUE(
      compare_exact("slots", ref(DType::I64, {3, 2}, want), ref(DType::I64, {3, 2}, want)).pass);
}

TEST(Contracts, ExactRejectsDtypeOrShapeMismatch) {
  const std::vector<int32_t> a = {1, 2};
  const std::vector<int64_t> b = {1, 2};
  const Verdict v = compare_exact("lens", ref(DType::I64, {2}, b), ref(DType::I32, {2}, a));
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail, "expected.lens is I32 [2], the op returns I64 [2]");
  EXPECT_FALSE(compare_exact("lens", ref(DType::I32, {1, 2}, a), ref(DType::I32, {2}, a)).pass);
}

TEST(Contracts, Fp8CodesWithinOneStep) {
  const std::vector<uint8_t> want = {0x38, 0x00, 0x7E};
  const std::vector<uint8_t> one = {0x39, 0x80, 0x7D};
  const std::vector<uint8_t> two = {0x3A, 0x00, 0x7E};
  Tolerance t;
  const Verdict v =
      compare_fp8_codes("q", ref(DType::F8_E4M3, {3}, one), ref(DType::F8_E4M3, {3}, want), t);
  EXPECT_TRUE(v.pass);
  EXPECT_EQ(v.detail, "worst fp8 step 1");
  EXPECT_FALSE(
      compare_fp8_codes("q", ref(DType::F8_E4M3, {3}, two), ref(DType::F8_E4M3, {3}, want), t)
          .pass);
  t.fp8_step = 2;
  EXPECT_TRUE(
      compare_fp8_codes("q", ref(DType::F8_E4M3, {3}, two), ref(DType::F8_E4M3, {3}, want), t)
          .pass);
}

TEST(Contracts, Bf16WithinUlps) {
  // numerics.md §11.3: -0/+0 one apart, the largest finite one below inf, any two NaNs match.
  const std::vector<uint16_t> want = {0x3F80, 0x0000, 0x7FC0, 0x7F7F, 0xC040, 0x8001};
  const std::vector<uint16_t> one = {0x3F81, 0x8000, 0xFFC1, 0x7F80, 0xC040, 0x8002};
  const std::vector<uint16_t> two = {0x3F80, 0x0000, 0x7FC0, 0x7F7F, 0xC042, 0x0000};
  const std::vector<uint16_t> nan = {0x3F80, 0x0000, 0x7FC0, 0x7FC0, 0x3F80, 0x8001};
  Tolerance t;  // 1 ulp
  Verdict v =
      compare_bf16("q_out", ref(DType::BF16, {2, 3}, one), ref(DType::BF16, {2, 3}, want), t);
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_EQ(v.detail, "worst bf16 ulp 1 (4 of 6 elements not exact)");
  EXPECT_EQ(
      compare_bf16("q_out", ref(DType::BF16, {2, 3}, want), ref(DType::BF16, {2, 3}, want), t)
          .detail,
      "exact");
  v = compare_bf16("q_out", ref(DType::BF16, {2, 3}, two), ref(DType::BF16, {2, 3}, want), t);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail,
            "q_out[1, 1]: got -3.03125 (0xC042), expected -3 (0xC040) 2 bf16 ulps apart "
            "(2 of 6 elements differ)");
  v = compare_bf16("q_out", ref(DType::BF16, {2, 3}, nan), ref(DType::BF16, {2, 3}, want), t);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail,
            "q_out[1, 0]: got nan (0x7FC0), expected 3.3895314e+38 (0x7F7F) (NaN against a "
            "number) (2 of 6 elements differ)");
  t.bf16_ulp = 2;
  EXPECT_TRUE(
      compare_bf16("q_out", ref(DType::BF16, {2, 3}, two), ref(DType::BF16, {2, 3}, want), t)
          .pass);
  t.bf16_ulp = 0;  // exact, but NaNs still match
  v = compare_bf16("q_out", ref(DType::BF16, {2, 3}, one), ref(DType::BF16, {2, 3}, want), t);
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "q_out[0, 0]") && contains(v.detail, "(4 of 6 elements differ)"))
      << v.detail;
  const std::vector<float> f = {1, 2, 3, 4, 5, 6};
  EXPECT_FALSE(
      compare_bf16("q_out", ref(DType::F32, {6}, f), ref(DType::F32, {6}, f), t).pass);
  EXPECT_EQ(
      compare_bf16("q_out", ref(DType::BF16, {6}, one), ref(DType::BF16, {2, 3}, want), t).detail,
      "expected.q_out is BF16 [2, 3], the op returns BF16 [6]");
}

TEST(Contracts, F32RelativeTolerance) {
  const std::vector<float> want = {1.0f, -2.0f, std::nanf(""), -INFINITY, 0.0f};
  const std::vector<float> ok = {1.0f + 9e-6f, -2.0f, std::nanf(""), -INFINITY, 0.0f};
  const std::vector<float> bad = {1.0f + 2e-5f, -2.0f, std::nanf(""), -INFINITY, 0.0f};
  const std::vector<float> inf = {1.0f, -2.0f, std::nanf(""), INFINITY, 0.0f};
  const Tolerance t;  // rtol 1e-5
  EXPECT_TRUE(compare_f32_rel("w", ref(DType::F32, {5}, ok), ref(DType::F32, {5}, want), t).pass);
  EXPECT_FALSE(compare_f32_rel("w", ref(DType::F32, {5}, bad), ref(DType::F32, {5}, want), t).pass);
  EXPECT_FALSE(compare_f32_rel("w", ref(DType::F32, {5}, inf), ref(DType::F32, {5}, want), t).pass);
  EXPECT_EQ(compare_f32_rel("w", ref(DType::F32, {5}, want), ref(DType::F32, {5}, want), t).detail,
            "exact");
}

// numerics.md §11.5 rule 1: equal scales, codes within one step.
TEST(Contracts, QuantBlockEqualScales) {
  const Tolerance t;
  const uint8_t a[3] = {0x78, 0x80, 0x10}, b[3] = {0x77, 0x00, 0x10}, c[3] = {0x76, 0x00, 0x10};
  int steps = 0;
  double coarse = 0;
  std::string why;
  EXPECT_TRUE(quant_block_ok(a, b, 3, 0x1p-8, 0x1p-8, t, &steps, &coarse, &why));
  EXPECT_EQ(steps, 1);
  EXPECT_FALSE(quant_block_ok(c, a, 3, 0x1p-8, 0x1p-8, t, &steps, &coarse, &why));
  EXPECT_TRUE(contains(why, "2 fp8 steps")) << why;
}

// numerics.md §11.5 rule 2: one scale twice the other; one step of the coarser grid.
TEST(Contracts, QuantBlockScalesOneStepApart) {
  const Tolerance t;
  int steps = 0;
  double coarse = 0;
  std::string why;
  // 1.0 as 256·2^-8 (0x78) and as 128·2^-7 (0x70): identical values.
  const uint8_t fine[1] = {0x78};
  const uint8_t same[1] = {0x70};
  EXPECT_TRUE(quant_block_ok(fine, same, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
  EXPECT_EQ(coarse, 0.0);
  // 144·2^-7 = 1.125: the coarse grid at |v| = 1.125 has step 2^-7·2^(7-3) = 0.125: exactly one
  // step.
  const uint8_t up1[1] = {0x71};
  EXPECT_TRUE(quant_block_ok(fine, up1, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why)) << why;
  EXPECT_DOUBLE_EQ(coarse, 1.0);
  // 160·2^-7 = 1.25: two coarse steps.
  const uint8_t up2[1] = {0x72};
  EXPECT_FALSE(quant_block_ok(fine, up2, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
  // Symmetric: the got side may hold the larger scale.
  EXPECT_TRUE(quant_block_ok(up1, fine, 1, 0x1p-7, 0x1p-8, t, &steps, &coarse, &why));
  // Subnormal range: the step is S·2^-9 (exponent floor −6): 2^-7·2^-9 = 2^-16.
  const uint8_t tiny1[1] = {0x01};  // 2^-9·2^-8 = 2^-17
  const uint8_t tiny3[1] = {0x03};  // 3·2^-17
  const uint8_t zero[1] = {0x00};
  EXPECT_TRUE(quant_block_ok(tiny1, zero, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
  EXPECT_FALSE(quant_block_ok(tiny3, zero, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
  // NaN codes match only NaN codes.
  const uint8_t nan[1] = {0x7F};
  EXPECT_FALSE(quant_block_ok(nan, same, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
  EXPECT_TRUE(quant_block_ok(nan, nan, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
}

TEST(Contracts, QuantBlockScalesFurtherApart) {
  Tolerance t;
  int steps = 0;
  double coarse = 0;
  std::string why;
  const uint8_t a[1] = {0x78}, b[1] = {0x68};  // 1.0 as 256·2^-8 and 64·2^-6
  EXPECT_FALSE(quant_block_ok(a, b, 1, 0x1p-8, 0x1p-6, t, &steps, &coarse, &why));
  t.scale_step = 2;
  EXPECT_TRUE(quant_block_ok(a, b, 1, 0x1p-8, 0x1p-6, t, &steps, &coarse, &why)) << why;
  t.scale_step = 0;  // equal scales required
  EXPECT_FALSE(quant_block_ok(a, b, 1, 0x1p-8, 0x1p-7, t, &steps, &coarse, &why));
  // A scale that is not a power of two never matches a different one.
  t.scale_step = 1;
  EXPECT_FALSE(quant_block_ok(a, a, 1, 0x1p-8, 0x1.8p-8, t, &steps, &coarse, &why));
}

// fp8_ds_mla page (compressor.md §6.3) with P = 2 entries and 8 bytes of page padding.
struct MlaPage {
  static constexpr int64_t P = 2, kBytes = 2 * 584 + 8;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kBytes, 0x11);
  // Writes entry j: every NoPE code `code`, tile scale bytes `scale`, RoPE bf16 `rope`, pad 0.
  void write(int64_t j, uint8_t code, uint8_t scale, uint16_t rope) {
    for (int d = 0; d < 448; ++d) bytes[static_cast<size_t>(j * 576 + d)] = code;
    for (int k = 0; k < 64; ++k) {
      bytes[static_cast<size_t>(j * 576 + 448 + 2 * k)] = static_cast<uint8_t>(rope);
      bytes[static_cast<size_t>(j * 576 + 449 + 2 * k)] = static_cast<uint8_t>(rope >> 8);
    }
    for (int q = 0; q < 7; ++q) bytes[static_cast<size_t>(P * 576 + 8 * j + q)] = scale;
    bytes[static_cast<size_t>(P * 576 + 8 * j + 7)] = 0;
  }
  ArrayRef view() const { return {DType::U8, {1, kBytes}, bytes.data()}; }
};

TEST(Contracts, CompressedCacheMla) {
  const Tolerance t;
  MlaPage want;
  want.write(1, 0x78, 0x77, 0x3F80);  // §9.1: 1.0 everywhere, scale 2^-8
  const std::vector<int64_t> slots = {1};
  const auto cmp = [&](const MlaPage& got) {
    return compare_compressed_cache("kv_cache", got.view(), want.view(), EntryLayout::fp8_ds_mla,
                                    MlaPage::P, slots, t);
  };
  EXPECT_EQ(cmp(want).detail, "exact");

  MlaPage near = want;
  near.bytes[576 + 100] = 0x79;       // one fp8 step
  near.bytes[576 + 448 + 10] = 0x81;  // RoPE 0x3F81: one bf16 ulp
  Verdict v = cmp(near);
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_EQ(v.detail, "worst fp8 step 1, bf16 ulp 1");

  MlaPage rescaled = want;  // tile 3 stored with scale 2^-7: 1.0 = 128·2^-7 = 0x70
  for (int d = 192; d < 256; ++d) rescaled.bytes[static_cast<size_t>(576 + d)] = 0x70;
  rescaled.bytes[2 * 576 + 8 + 3] = 0x78;
  v = cmp(rescaled);
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_TRUE(contains(v.detail, "1 block(s) one scale step apart")) << v.detail;

  MlaPage bad_code = want;
  bad_code.bytes[576 + 5] = 0x7A;
  v = cmp(bad_code);
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "slot 1 (page 0, entry 1) NoPE tile 0")) << v.detail;

  MlaPage bad_rope = want;
  bad_rope.bytes[576 + 448 + 4] = 0x82;  // two ulps
  EXPECT_FALSE(cmp(bad_rope).pass);

  MlaPage bad_pad = want;
  bad_pad.bytes[2 * 576 + 8 + 7] = 1;
  v = cmp(bad_pad);
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "pad byte")) << v.detail;

  MlaPage bad_scale = want;
  bad_scale.bytes[2 * 576 + 8 + 6] = 0x75;  // two scale steps
  EXPECT_FALSE(cmp(bad_scale).pass);

  // Bytes of entry 0 (not written), the scale region of entry 0 and the page padding are exact.
  for (int64_t off : {int64_t{3}, int64_t{2 * 576 + 2}, MlaPage::kBytes - 1}) {
    MlaPage other = want;
    other.bytes[static_cast<size_t>(off)] ^= 1;
    v = cmp(other);
    EXPECT_FALSE(v.pass) << off;
    EXPECT_TRUE(contains(v.detail, "outside the written entries")) << v.detail;
  }
}

TEST(Contracts, CompressedCacheIndexer) {
  // compressor.md §7, P = 1: 128 codes then the fp32 scale; 4 padding bytes.
  const Tolerance t;
  std::vector<uint8_t> want(136, 0x22), got;
  std::fill_n(want.begin(), 128, 0x78);
  const float s = 0x1p-8f;
  std::memcpy(want.data() + 128, &s, 4);
  const auto cmp = [&] {
    return compare_compressed_cache("kv_cache", {DType::U8, {1, 136}, got.data()},
                                    {DType::U8, {1, 136}, want.data()}, EntryLayout::indexer_k, 1,
                                    {0}, t);
  };
  got = want;
  got[7] = 0x77;
  EXPECT_TRUE(cmp().pass);
  got = want;  // the same values with scale 2^-7
  std::fill_n(got.begin(), 128, 0x70);
  const float s2 = 0x1p-7f;
  std::memcpy(got.data() + 128, &s2, 4);
  EXPECT_TRUE(cmp().pass) << cmp().detail;
  const float s4 = 0x1p-6f;
  std::memcpy(got.data() + 128, &s4, 4);
  EXPECT_FALSE(cmp().pass);
  got = want;
  got[135] = 0;  // padding
  EXPECT_FALSE(cmp().pass);
}

}  // namespace
}  // namespace dsv4cpu::testing
