// make_cos_sin_cache (compressor.md §8.2, bad-input.md §4): the spec's YaRN f_i table, the ramp
// bounds low = 15 / high = 25, the plain table, mscale, the low == high rule, argument domains.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"

namespace dsv4cpu {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

std::vector<float> table(int64_t rows, double theta, const std::optional<YarnParams>& yarn) {
  std::vector<float> out(static_cast<size_t>(rows * 64), -7.0f);
  make_cos_sin_cache(rows, theta, yarn, MutableTensorView(out.data(), DType::F32, {rows, 64}));
  return out;
}

// Row `pos` must be RN(cos(RN(pos·f_i))), RN(sin(...)) (binary64 cos/sin, mscale 1) for `f`.
void expect_row(const std::vector<float>& t, int64_t pos, const std::vector<float>& f,
                const std::string& where) {
  for (int i = 0; i < 32; ++i) {
    const float angle = static_cast<float>(pos) * f[static_cast<size_t>(i)];
    EXPECT_EQ(t[static_cast<size_t>(pos * 64 + i)], static_cast<float>(std::cos(double(angle))))
        << where << " pos " << pos << " cos i=" << i;
    EXPECT_EQ(t[static_cast<size_t>(pos * 64 + 32 + i)], static_cast<float>(std::sin(double(angle))))
        << where << " pos " << pos << " sin i=" << i;
  }
}

// pf_i = RN(theta^(2i/64)) in binary64, rounded once.
float pf(double theta, int i) { return static_cast<float>(std::pow(theta, (2.0 * i) / 64.0)); }

TEST(MakeCosSinCache, YarnFrequencyTableOfTheSpec) {
  // compressor.md §8.2's f_i for theta 160000, YaRN (16, 65536, 32, 1, 1.0). The sin column of
  // row 1 and the cos/sin of row 4096 (angle 4096·f_i, exact) pin every f_i.
  const uint32_t f_bits[32] = {
      0x3F800000, 0x3F300A3A, 0x3EF21C1F, 0x3EA67D01, 0x3E64F92E, 0x3E1D7475, 0x3DD88CB4,
      0x3D94E963, 0x3D4CCCCD, 0x3D0CD4FB, 0x3CC1B019, 0x3C8530CE, 0x3C372DBF, 0x3BFBED88,
      0x3BAD3D5E, 0x3B6E4237, 0x3B147AE1, 0x3AB714E0, 0x3A5EBDB6, 0x3A0530CE, 0x399BB3AF,
      0x39305978, 0x38BE904D, 0x383E9B5F, 0x37A3D70C, 0x36B443D0, 0x3677EBA6, 0x362A7BE8,
      0x35EA77FF, 0x35A13BDC, 0x355DBF30, 0x35187C4D};
  std::vector<float> f;
  for (uint32_t b : f_bits) f.push_back(from_bits(b));
  const auto t = table(4097, 160000, YarnParams{});
  for (int64_t pos : {0, 1, 2, 3, 1000, 4096}) expect_row(t, pos, f, "yarn");
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(t[static_cast<size_t>(i)], 1.0f);
    EXPECT_EQ(t[static_cast<size_t>(32 + i)], 0.0f);
  }
}

TEST(MakeCosSinCache, YarnRampRunsFrom15To25) {
  // low = 15, high = 25: channels 0..15 keep ex_i = RN(1 / pf_i), channels 25..31 use
  // in_i = RN(1 / RN(16·pf_i)); channels 16..24 are blends that equal neither.
  const auto t = table(2, 160000, YarnParams{});
  std::vector<float> ex, in;
  for (int i = 0; i < 32; ++i) {
    ex.push_back(1.0f / pf(160000, i));
    in.push_back(1.0f / (16.0f * pf(160000, i)));
  }
  auto sin1 = [&](int i) { return t[static_cast<size_t>(64 + 32 + i)]; };
  auto sin_of = [](float f) { return static_cast<float>(std::sin(double(f))); };
  for (int i = 0; i <= 15; ++i) EXPECT_EQ(sin1(i), sin_of(ex[static_cast<size_t>(i)])) << i;
  for (int i = 25; i < 32; ++i) EXPECT_EQ(sin1(i), sin_of(in[static_cast<size_t>(i)])) << i;
  for (int i = 16; i <= 24; ++i) {
    EXPECT_NE(sin1(i), sin_of(ex[static_cast<size_t>(i)])) << i;
    EXPECT_NE(sin1(i), sin_of(in[static_cast<size_t>(i)])) << i;
  }
}

TEST(MakeCosSinCache, PlainTable) {
  // theta 10000 without scaling: f_i = RN(1 / RN(10000^(i/32))).
  std::vector<float> f;
  for (int i = 0; i < 32; ++i) f.push_back(1.0f / pf(10000, i));
  const auto t = table(300, 10000, std::nullopt);
  for (int64_t pos : {0, 1, 17, 128, 299}) expect_row(t, pos, f, "plain");
}

TEST(MakeCosSinCache, MscaleMultipliesAfterRounding) {
  // RN(RN(cos)·mscale): with mscale 2 every value is exactly twice the mscale-1 value.
  YarnParams y;
  const auto one = table(64, 160000, y);
  y.mscale = 2.0;
  const auto two = table(64, 160000, y);
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(two[i], 2.0f * one[i]) << i;
}

TEST(MakeCosSinCache, LowEqualsHighAddsOneThousandth) {
  // theta 10000, original_max 6, beta_slow 1: corr(1) = 64·ln(6 / 2π) / (2·ln 10000) ≈ −0.16, so
  // high = ceil(−0.16) = −0 and low = max(floor(corr(32)), 0) = 0: low == high, high = 0.001.
  // ramp_0 = 0 (f_0 = ex_0); ramp_i = RN(i / RN(0.001)) > 1 for i >= 1, so f_i = in_i.
  YarnParams y{4.0, 6.0, 32.0, 1.0, 1.0};
  std::vector<float> f;
  for (int i = 0; i < 32; ++i)
    f.push_back(i == 0 ? 1.0f / pf(10000, 0) : 1.0f / (4.0f * pf(10000, i)));
  const auto t = table(50, 10000, y);
  for (int64_t pos : {1, 2, 49}) expect_row(t, pos, f, "low == high");
}

TEST(MakeCosSinCache, ZeroRowsIsNoOp) {
  EXPECT_NO_THROW(
      make_cos_sin_cache(0, 10000, std::nullopt, MutableTensorView(nullptr, DType::F32, {0, 64})));
}

TEST(MakeCosSinCache, BadArguments) {
  std::vector<float> out(64 * 4, -7.0f);
  const MutableTensorView v(out.data(), DType::F32, {4, 64});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto value_error = [&](int64_t rows, double theta, std::optional<YarnParams> y) {
    EXPECT_THROW(
        make_cos_sin_cache(rows, theta, y,
                           MutableTensorView(out.data(), DType::F32, {rows < 0 ? 0 : 4, 64})),
        ValueError)
        << rows << " " << theta;
  };
  value_error(-1, 10000, std::nullopt);
  value_error((int64_t{1} << 24) + 1, 10000, std::nullopt);
  value_error(4, 1.0, std::nullopt);
  value_error(4, nan, std::nullopt);
  value_error(4, std::numeric_limits<double>::infinity(), std::nullopt);
  value_error(4, 10000, YarnParams{0.5, 65536, 32, 1, 1});
  value_error(4, 10000, YarnParams{16, 0.5, 32, 1, 1});
  value_error(4, 10000, YarnParams{16, 65536, 1, 1, 1});
  value_error(4, 10000, YarnParams{16, 65536, 32, 0, 1});
  value_error(4, 10000, YarnParams{16, 65536, 32, 1, 0});
  value_error(4, 10000, YarnParams{16, 65536, 32, 1, nan});
  try {
    make_cos_sin_cache(4, 0.5, std::nullopt, v);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "dsv4cpu::make_cos_sin_cache: theta = 0.5: outside its domain (expected finite "
                 "and > 1)");
  }
  EXPECT_THROW(make_cos_sin_cache(4, 10000, std::nullopt,
                                  MutableTensorView(out.data(), DType::F32, {3, 64})),
               ShapeError);
  EXPECT_THROW(make_cos_sin_cache(2, 10000, std::nullopt,
                                  MutableTensorView(out.data(), DType::F32, {2, 64}, {128, 1})),
               ShapeError);
  EXPECT_THROW(make_cos_sin_cache(4, 10000, std::nullopt, MutableTensorView()), ShapeError);
  EXPECT_EQ(out, std::vector<float>(64 * 4, -7.0f));
}

}  // namespace
}  // namespace dsv4cpu
