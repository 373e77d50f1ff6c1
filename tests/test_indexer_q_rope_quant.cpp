// indexer.md §2 (fused_indexer_q_rope_quant): the spec's example and hand-computed cases for each
// step (RoPE with its fma, bf16 rounding of the rotated dims only, clamp-amax exponent, fp8
// subnormals, the weight product order).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

// The e4m3 code of a value that e4m3 represents exactly (normal or subnormal), by hand.
uint8_t code_of_exact(double v) {
  const uint8_t s = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(v);
  if (a < 0x1p-6) return static_cast<uint8_t>(s | static_cast<uint8_t>(a * 512));
  int k;
  const double m = std::frexp(a, &k);  // a = m·2^k, m in [0.5, 1)
  const int E = k - 1 + 7, M = static_cast<int>((m * 2 - 1) * 8);
  return static_cast<uint8_t>(s | (E << 3) | M);
}

struct QuantOut {
  std::vector<uint8_t> q_fp8;
  std::vector<float> weights_out;
};

// Table with `rows` rows of the identity rotation (cos 1, sin 0) unless overwritten.
std::vector<float> identity_table(int64_t rows) {
  std::vector<float> t(static_cast<size_t>(rows * 64), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < 32; ++i) t[static_cast<size_t>(r * 64 + i)] = 1.0f;
  return t;
}

QuantOut quantize(const std::vector<float>& q, const std::vector<float>& w,
                  const std::vector<int64_t>& pos, const std::vector<float>& table, int64_t H,
                  const Options& o, float softmax_scale = kIndexerSoftmaxScale,
                  float head_scale = kIndexerHeadScale) {
  const auto T = static_cast<int64_t>(pos.size());
  const auto R = static_cast<int64_t>(table.size() / 64);
  QuantOut r{std::vector<uint8_t>(static_cast<size_t>(T * H * 128), 0xEE),
             std::vector<float>(static_cast<size_t>(T * H), -5.0f)};
  fused_indexer_q_rope_quant(
      TensorView(q.data(), DType::F32, {T, H, 128}), TensorView(w.data(), DType::F32, {T, H}),
      TensorView(pos.data(), DType::I64, {T}), TensorView(table.data(), DType::F32, {R, 64}),
      softmax_scale, head_scale, MutableTensorView(r.q_fp8.data(), DType::F8_E4M3, {T, H, 128}),
      MutableTensorView(r.weights_out.data(), DType::F32, {T, H}), o);
  return r;
}

TEST(FusedIndexerQRopeQuant, DefaultScales) {
  EXPECT_EQ(f32_bits(kIndexerSoftmaxScale), 0x3DB504F3u);
  EXPECT_EQ(kIndexerHeadScale, 0.125f);
}

// §2 example: 128 inputs of 1.0 at position 0, weight 0.5: amax 1, e = −8, codes 0x78,
// weights_out 0x37B504F3. Head 1 (zeros and a −0, weight 1) exercises the ε clamp: sc =
// RN(ε / 448) ≈ 2.23e-7, e = −22, codes ±0, weights_out 2⁻²⁵·0x3DB504F3 = 0x313504F3.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuant, SpecExample, "fused_indexer_q_rope_quant") {
  std::vector<float> q(2 * 128, 0.0f);
  for (int d = 0; d < 128; ++d) q[static_cast<size_t>(d)] = 1.0f;
  q[128 + 3] = -0.0f;
  const std::vector<float> w = {0.5f, 1.0f};
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    const QuantOut r = quantize(q, w, {0}, identity_table(1), 2, run.options());
    for (int d = 0; d < 128; ++d) ASSERT_EQ(r.q_fp8[static_cast<size_t>(d)], 0x78) << d;
    for (int d = 0; d < 128; ++d)
      ASSERT_EQ(r.q_fp8[static_cast<size_t>(128 + d)], d == 3 ? 0x80 : 0x00) << d;
    EXPECT_EQ(f32_bits(r.weights_out[0]), 0x37B504F3u) << run.label();
    EXPECT_EQ(f32_bits(r.weights_out[1]), 0x313504F3u) << run.label();
  });
  // The overload without scalars uses the same defaults.
  std::vector<uint8_t> codes(2 * 128);
  std::vector<float> w_out(2);
  const std::vector<int32_t> pos = {0};
  const std::vector<float> table = identity_table(1);
  fused_indexer_q_rope_quant(
      TensorView(q.data(), DType::F32, {1, 2, 128}), TensorView(w.data(), DType::F32, {1, 2}),
      TensorView(pos.data(), DType::I32, {1}), TensorView(table.data(), DType::F32, {1, 64}),
      MutableTensorView(codes.data(), DType::F8_E4M3, {1, 2, 128}),
      MutableTensorView(w_out.data(), DType::F32, {1, 2}));
  EXPECT_EQ(f32_bits(w_out[0]), 0x37B504F3u);
}

// RoPE uses fma (numerics.md §8.5), then bf16 rounding. Pair 0 at a row with
// c = 2 + 2⁻¹¹ + 2⁻¹², s = 1, (e, o) = (1 + 2⁻¹³, 1 − 2⁻⁴ − 2⁻⁸ + 2⁻¹⁰):
//   e' = fma(e, c, −o) = 1 + 2⁻⁴ + 2⁻⁸ + 2⁻²³ (unfused: 1 + 2⁻⁴ + 2⁻⁸, a bf16 tie rounding down)
//   bf16(e') = 1 + 2⁻⁴ + 2⁻⁷;  o' = fma(o, c, e) = 0x1.6f5a6ep+1, bf16 2.875 = amax
//   e = −7: codes 137 -> 144 (0x71) and 368 -> 384 (0x7C, tie to even); weights_out
//   0.5·2⁻⁷·0x3DB504F3·0.125 = 0x383504F3.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuant, RopeFmaAndBf16Rounding, "fused_indexer_q_rope_quant") {
  std::vector<float> table = identity_table(6);
  table[5 * 64 + 0] = 2.0f + 0x1p-11f + 0x1p-12f;
  table[5 * 64 + 32] = 1.0f;
  std::vector<float> q(128, 0.0f);
  q[64] = 1.0f + 0x1p-13f;
  q[65] = 1.0f - 0x1p-4f - 0x1p-8f + 0x1p-10f;
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    const QuantOut r = quantize(q, {0.5f}, {5}, table, 1, run.options());
    for (int d = 0; d < 128; ++d) {
      const uint8_t want = d == 64 ? 0x71 : d == 65 ? 0x7C : 0x00;
      ASSERT_EQ(r.q_fp8[static_cast<size_t>(d)], want) << run.label() << " dim " << d;
    }
    EXPECT_EQ(f32_bits(r.weights_out[0]), 0x383504F3u);
  });
}

// A quarter turn (cos 0, sin 1) maps (e, o) to (−o, e) exactly; NoPE dims stay as given (not
// bf16-rounded): 1 + 2⁻⁴ + 2⁻²⁰ at e = 0 is just above the fp8 tie 1.0625 and gives 0x39
// (rounding it to bf16 first would give the tie and 0x38). Two tokens, two heads, I64 positions.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuant, QuarterTurnAndUnroundedNope,
                 "fused_indexer_q_rope_quant") {
  std::vector<float> table = identity_table(4);
  for (int i = 0; i < 32; ++i) {
    table[static_cast<size_t>(3 * 64 + i)] = 0.0f;
    table[static_cast<size_t>(3 * 64 + 32 + i)] = 1.0f;
  }
  constexpr int64_t T = 2, H = 2;
  std::vector<float> q(T * H * 128, 0.0f);
  for (int64_t th = 0; th < T * H; ++th)
    for (int k = 0; k < 64; ++k)
      q[static_cast<size_t>(th * 128 + 64 + k)] =
          static_cast<float>((k % 8 + 1) * (k % 3 == 0 ? -1 : 1)) * 0.5f;  // |x| <= 4: e = −6
  // Head (1, 1): NoPE amax 448 -> e = 0.
  q[static_cast<size_t>(3 * 128 + 0)] = 1.0f + 0x1p-4f + 0x1p-20f;
  q[static_cast<size_t>(3 * 128 + 1)] = 448.0f;
  const std::vector<float> w = {1.0f, -2.0f, 0.25f, 3.0f};
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    const QuantOut r = quantize(q, w, {0, 3}, table, H, run.options());
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t th = t * H + h;
        const float* x = q.data() + th * 128;
        const uint8_t* c = r.q_fp8.data() + th * 128;
        const int e = th == 3 ? 0 : -6;
        for (int i = 0; i < 32; ++i) {
          const double ze = t == 1 ? -double(x[65 + 2 * i]) : x[64 + 2 * i];
          const double zo = t == 1 ? double(x[64 + 2 * i]) : x[65 + 2 * i];
          ASSERT_EQ(c[64 + 2 * i], code_of_exact(std::ldexp(ze, -e))) << run.label() << th << i;
          ASSERT_EQ(c[65 + 2 * i], code_of_exact(std::ldexp(zo, -e))) << run.label() << th << i;
        }
        EXPECT_EQ(r.weights_out[static_cast<size_t>(th)],
                  w[static_cast<size_t>(th)] * std::ldexp(1.0f, e) * kIndexerSoftmaxScale * 0.125f);
      }
    }
    EXPECT_EQ(r.q_fp8[3 * 128 + 0], 0x39);
    EXPECT_EQ(r.q_fp8[3 * 128 + 1], 0x7E);
    EXPECT_EQ(r.q_fp8[3 * 128 + 2], 0x00);
  });
}

// Step 2 rounds the rotated dims to bf16 and step 3 takes amax over the rounded values.
// Head 0 (identity rotation): 224·(1 + 2⁻¹²) rounds to 224, so amax = 224, e = −1 and the code
// is 448 (0x7E) (unrounded: e = 0, 0x76); 1 + 2⁻⁴ + 2⁻²⁰ rounds to the tie 1.0625, ·2 = 2.125 is
// an fp8 tie -> 2.0 (0x40) (unrounded: 0x41). Head 1: the same value in a NoPE dim at e = 0 is
// not rounded -> 0x39. weights_out: 2⁻¹·0x3DB504F3·0.125 = 0x3BB504F3 and 2⁰·... = 0x3C3504F3.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuant, RotatedDimsRoundedToBf16BeforeAmax,
                 "fused_indexer_q_rope_quant") {
  std::vector<float> q(2 * 128, 0.0f);
  q[64] = 224.0f * (1.0f + 0x1p-12f);
  q[66] = 1.0f + 0x1p-4f + 0x1p-20f;
  q[128 + 0] = 448.0f;
  q[128 + 1] = 1.0f + 0x1p-4f + 0x1p-20f;
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    const QuantOut r = quantize(q, {1.0f, 1.0f}, {0}, identity_table(1), 2, run.options());
    EXPECT_EQ(r.q_fp8[64], 0x7E) << run.label();
    EXPECT_EQ(r.q_fp8[66], 0x40) << run.label();
    EXPECT_EQ(r.q_fp8[128 + 0], 0x7E) << run.label();
    EXPECT_EQ(r.q_fp8[128 + 1], 0x39) << run.label();
    EXPECT_EQ(f32_bits(r.weights_out[0]), 0x3BB504F3u) << run.label();
    EXPECT_EQ(f32_bits(r.weights_out[1]), 0x3C3504F3u) << run.label();
  });
}

// fp8 subnormals at e = −8 (amax 1): 2⁻¹⁷ -> 2⁻⁹ (0x01), 1.5·2⁻¹⁷ -> tie -> 2⁻⁸ (0x02),
// 2⁻¹⁹ -> 0 (0x00), −2⁻¹⁷ -> 0x81, 7·2⁻¹⁷ -> 0x07, 7.5·2⁻¹⁷ -> tie -> 2⁻⁶ (0x08).
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuant, SubnormalCodes, "fused_indexer_q_rope_quant") {
  std::vector<float> q(128, 0.0f);
  q[0] = 1.0f;
  q[1] = 0x1p-17f;
  q[2] = 1.5f * 0x1p-17f;
  q[3] = 0x1p-19f;
  q[4] = -0x1p-17f;
  q[5] = 7.0f * 0x1p-17f;
  q[6] = 7.5f * 0x1p-17f;
  q[64] = 0x1p-17f;  // rotated by the identity, bf16-exact
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    const QuantOut r = quantize(q, {1.0f}, {0}, identity_table(1), 1, run.options(), 0.5f, 1.0f);
    const std::vector<uint8_t> want = {0x78, 0x01, 0x02, 0x00, 0x81, 0x07, 0x08};
    EXPECT_EQ(std::vector<uint8_t>(r.q_fp8.begin(), r.q_fp8.begin() + 7), want) << run.label();
    EXPECT_EQ(r.q_fp8[64], 0x01);
    EXPECT_EQ(r.weights_out[0], 0x1p-9f);  // 1·2⁻⁸·0.5·1
  });
}

// Custom scales: the product order RN(RN(RN(w·2^e)·softmax_scale)·head_scale) (numerics.md
// §8.6). With w = 3, e = −8, softmax_scale = 0.3, head_scale = 0.7: each step rounds.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuant, WeightProductOrder, "fused_indexer_q_rope_quant") {
  const std::vector<float> q(128, 1.0f);
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    const QuantOut r = quantize(q, {3.0f}, {0}, identity_table(1), 1, run.options(), 0.3f, 0.7f);
    const float a = 3.0f * 0x1p-8f;                                  // exact
    const auto rn = [](double x) { return static_cast<float>(x); };  // one rounding of an exact
    const float b = rn(static_cast<double>(a) * 0.3f);               // 24x24-bit product
    EXPECT_EQ(f32_bits(r.weights_out[0]), f32_bits(rn(static_cast<double>(b) * 0.7f)))
        << run.label();
  });
}

TEST(FusedIndexerQRopeQuant, ZeroSizeIsNoOp) {
  const std::vector<float> table = identity_table(1);
  fused_indexer_q_rope_quant(
      TensorView(nullptr, DType::F32, {0, 64, 128}), TensorView(nullptr, DType::F32, {0, 64}),
      TensorView(nullptr, DType::I64, {0}), TensorView(table.data(), DType::F32, {1, 64}),
      kIndexerSoftmaxScale, kIndexerHeadScale,
      MutableTensorView(nullptr, DType::F8_E4M3, {0, 64, 128}),
      MutableTensorView(nullptr, DType::F32, {0, 64}));
  SUCCEED();
}

}  // namespace
}  // namespace dsv4cpu
