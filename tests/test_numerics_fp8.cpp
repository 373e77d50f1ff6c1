// numerics.md §3: fp8 e4m3fn decode and encode (e4m3_sat). Oracles independent of
// numerics.hpp: the decoded value from the fields with ldexp in binary64, and the encoding as an
// exhaustive search for the nearest of the 127 non-negative finite codes (ties to the even code).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu {
namespace {

uint32_t bits(float x) { return f32_bits(x); }
float from_bits(uint32_t b) { return f32_from_bits(b); }

// Oracle decode: the value from the fields, NaN for 0x7F and 0xFF.
double fp8_oracle_decode(int c) {
  const int s = c >> 7, E = (c >> 3) & 15, m = c & 7;
  if (E == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = E == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, E - 10);
  return s ? -mag : mag;
}

// Oracle encode: the nearest of the 127 non-negative finite codes to min(|y|, 448), by exhaustive
// search, ties to the even code; the sign bit of y is kept (NaN -> sign | 0x7F).
uint8_t e4m3_oracle(float y) {
  struct Table {
    double v[0x7F];
    Table() {
      for (int c = 0; c <= 0x7E; ++c) v[c] = fp8_oracle_decode(c);
    }
  };
  static const Table table;
  const double* values = table.v;
  const int sign = std::signbit(y) ? 0x80 : 0;
  if (std::isnan(y)) return static_cast<uint8_t>(sign | 0x7F);
  const double a = std::min(std::fabs(static_cast<double>(y)), 448.0);
  int best = 0;
  double best_dist = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7E; ++c) {
    const double d = values[c] > a ? values[c] - a : a - values[c];
    if (d < best_dist || (d == best_dist && c % 2 == 0)) {
      best = c;
      best_dist = d;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(Fp8, DecodeAll256CodesExactly) {
  for (int c = 0; c < 256; ++c) {
    const float got = fp8_e4m3_decode(static_cast<uint8_t>(c));
    const double want = fp8_oracle_decode(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << c;
    EXPECT_EQ(std::signbit(got), c >= 0x80) << c;  // 0x80 is -0
  }
  EXPECT_EQ(fp8_e4m3_decode(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x08), 0x1p-6f);
  EXPECT_EQ(fp8_e4m3_decode(0x01), 0x1p-9f);
  EXPECT_EQ(bits(fp8_e4m3_decode(0x80)), 0x80000000u);
  EXPECT_EQ(bits(fp8_e4m3_decode(0x00)), 0x00000000u);
}

TEST(Fp8, EncodeRoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(e4m3_sat(fp8_e4m3_decode(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(Fp8, EncodeSpecTable) {
  const struct {
    float y;
    uint8_t code;
    float decoded;
  } table[] = {{0.0f, 0x00, 0.0f},
               {-0.0f, 0x80, -0.0f},
               {1.0f, 0x38, 1.0f},
               {-1.0f, 0xB8, -1.0f},
               {448.0f, 0x7E, 448.0f},
               {-448.0f, 0xFE, -448.0f},
               {1000.0f, 0x7E, 448.0f},
               {0x1p-9f, 0x01, 0x1p-9f},
               {0x1p-10f, 0x00, 0.0f},
               {0x1.8p-10f, 0x01, 0x1p-9f},
               {0x1.8p-9f, 0x02, 0x1p-8f},
               {0.013671875f, 0x07, 7 * 0x1p-9f},
               {0.0146484375f, 0x08, 0x1p-6f},
               {17.0f, 0x58, 16.0f},
               {232.0f, 0x76, 224.0f},
               {240.0f, 0x77, 240.0f},
               {0.3f, 0x2A, 0.3125f},
               {-2.75f, 0xC3, -2.75f}};
  for (const auto& row : table) {
    EXPECT_EQ(e4m3_sat(row.y), row.code) << row.y;
    EXPECT_EQ(e4m3_oracle(row.y), row.code) << row.y;  // oracle sanity
    EXPECT_EQ(bits(fp8_e4m3_decode(row.code)), bits(row.decoded)) << row.y;
  }
}

TEST(Fp8, EncodeSaturatesAndKeepsSign) {
  EXPECT_EQ(e4m3_sat(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(e4m3_sat(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(e4m3_sat(464.0f), 0x7E);  // the midpoint to the (absent) 480 still saturates
  EXPECT_EQ(e4m3_sat(std::numeric_limits<float>::max()), 0x7E);
  EXPECT_EQ(e4m3_sat(-0x1p-149f), 0x80);  // rounds to zero, keeps the sign
  EXPECT_EQ(e4m3_sat(-0x1p-11f), 0x80);
  EXPECT_EQ(e4m3_sat(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(e4m3_sat(-std::numeric_limits<float>::quiet_NaN()), 0xFF);
}

TEST(Fp8, EncodeAgreesWithExhaustiveOracle) {
  std::vector<float> ys = {0.0f, -0.0f};
  // Every midpoint between adjacent non-negative finite codes (exact in fp32: 5 significant
  // bits), its fp32 neighbours, and the negatives; plus the codes themselves.
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = fp8_e4m3_decode(static_cast<uint8_t>(c));
    const float hi = fp8_e4m3_decode(static_cast<uint8_t>(c + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
    for (float y : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f), lo, hi}) {
      ys.push_back(y);
      ys.push_back(-y);
    }
  }
  std::mt19937 rng(0xF8E4u);
  auto u32 = [&] { return static_cast<uint32_t>(rng()); };
  // Magnitudes 2^-14 .. 2^11 (fp8 subnormals, normals, above 448), random mantissa and sign.
  for (int i = 0; i < 700000; ++i) {
    const uint32_t e = 127 - 14 + u32() % 26;
    ys.push_back(from_bits((u32() & 0x80000000u) | e << 23 | (u32() & 0x7FFFFFu)));
  }
  // fp32 subnormals and every other pattern (huge values, infinities, NaNs).
  for (int i = 0; i < 50000; ++i) ys.push_back(from_bits((u32() & 0x807FFFFFu)));
  for (int i = 0; i < 200000; ++i) ys.push_back(from_bits(u32()));
  // Above 448: up to FLT_MAX.
  for (int i = 0; i < 50000; ++i)
    ys.push_back(
        from_bits((u32() & 0x80000000u) | (0x43E00000u + u32() % (0x7F800000u - 0x43E00000u))));
  ASSERT_GE(ys.size(), 1000000u);
  for (float y : ys) ASSERT_EQ(e4m3_sat(y), e4m3_oracle(y)) << std::hexfloat << y;
}

}  // namespace
}  // namespace dsv4cpu
