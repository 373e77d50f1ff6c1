// numerics.md §2 (bf16), §4 (scale rules, UE8M0), §8.1-§8.3 (reduction orders, RMS scale);
// §3 (fp8) is in test_numerics_fp8.cpp, §5/§7/§8.5 in test_numerics_fma.cpp. Expected values
// come from the spec's tables and worked examples, from hand-computed cases, and from oracles
// written independently of numerics.hpp:
//   - bf16: binary64 scaling to the bf16 quantum and an explicit ties-to-even decision;
//   - scales, RMS: binary64 arithmetic rounded once to fp32 (binary64 has more than 2·24 + 2
//     significant bits, so division, addition and sqrt rounded twice equal one fp32 rounding).
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

// ---------------------------------------------------------------------------------------------
// §2 bf16

// Oracle: nearest multiple of the bf16 quantum of |x| (8 significant bits, at least 2^-133),
// ties to an even multiple; magnitudes of 2^128 and above are infinite.
uint16_t bf16_oracle(float x) {
  if (std::isnan(x)) return 0x7FC0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7F80);
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int quantum_exp = std::max(e, -125) - 8;
  const double r = std::ldexp(a, -quantum_exp);  // exact
  double n = std::floor(r);
  const double rest = r - n;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
  const double v = std::ldexp(n, quantum_exp);
  if (v >= 0x1p128) return static_cast<uint16_t>(sign | 0x7F80);
  const uint32_t b = bits(static_cast<float>(v));  // v has at most 8 significant bits: exact
  EXPECT_EQ(b & 0xFFFFu, 0u);
  return static_cast<uint16_t>(sign | (b >> 16));
}

TEST(Bf16, SpecTable) {
  const struct {
    uint32_t in;
    uint16_t out;
  } table[] = {{0x3F800000u, 0x3F80}, {0x3F808000u, 0x3F80}, {0x3F818000u, 0x3F82},
               {0x3F808001u, 0x3F81}, {0x3F7FFFFFu, 0x3F80}, {0x3EAAAAABu, 0x3EAB},
               {0x7F7FFFFFu, 0x7F80}, {0x00000001u, 0x0000}, {0x80000000u, 0x8000}};
  for (const auto& row : table) {
    EXPECT_EQ(to_bf16(from_bits(row.in)), row.out) << std::hex << row.in;
    EXPECT_EQ(bf16_oracle(from_bits(row.in)), row.out) << std::hex << row.in;  // oracle sanity
  }
}

TEST(Bf16, NanAndInfinities) {
  for (uint32_t nan :
       {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u})
    EXPECT_EQ(to_bf16(from_bits(nan)), 0x7FC0) << std::hex << nan;
  EXPECT_EQ(to_bf16(from_bits(0x7F800000u)), 0x7F80);
  EXPECT_EQ(to_bf16(from_bits(0xFF800000u)), 0xFF80);
  // |x| >= 0x1.ffp+127 (the midpoint above the largest bf16, odd 0x7F7F) overflows; just below
  // it rounds to the largest bf16.
  EXPECT_EQ(to_bf16(0x1.ffp+127f), 0x7F80);
  EXPECT_EQ(to_bf16(-0x1.ffp+127f), 0xFF80);
  EXPECT_EQ(to_bf16(from_bits(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(to_bf16(from_bits(0xFF7F7FFFu)), 0xFF7F);
  EXPECT_EQ(to_bf16(0.0f), 0x0000);
}

TEST(Bf16, SubnormalsRoundLikeOtherValues) {
  // 2^-133 is the smallest bf16 subnormal (0x0001); half of it is a tie and rounds to even 0.
  EXPECT_EQ(to_bf16(0x1p-133f), 0x0001);
  EXPECT_EQ(to_bf16(0x1p-134f), 0x0000);
  EXPECT_EQ(to_bf16(0x1.8p-133f), 0x0002);  // tie between 1 and 2 quanta -> even
  EXPECT_EQ(to_bf16(-0x1.8p-134f), 0x8001);
  EXPECT_EQ(to_bf16(from_bits(0x007FFFFFu)), 0x0080);  // largest fp32 subnormal -> 2^-126
}

TEST(Bf16, WidenIsExactAndRoundBf16Composes) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(to_bf16(f), h) << std::hex << h;  // bf16 values are fixed points
    }
  }
  EXPECT_EQ(bits(round_bf16(from_bits(0x3F808001u))), 0x3F810000u);
  EXPECT_EQ(bits(round_bf16(from_bits(0x7F7FFFFFu))), 0x7F800000u);
  EXPECT_EQ(bits(round_bf16(std::numeric_limits<float>::quiet_NaN())), 0x7FC00000u);
}

TEST(Bf16, AgreesWithOracle) {
  // 2^20 uniformly random fp32 patterns (every exponent, NaNs included), then every low half
  // below high halves covering subnormals, values near FLT_MAX, 1.0 and the signed variants.
  std::mt19937 rng(0xB16B00B5u);
  for (int i = 0; i < (1 << 20); ++i) {
    const float x = from_bits(static_cast<uint32_t>(rng()));
    ASSERT_EQ(to_bf16(x), bf16_oracle(x)) << std::hex << bits(x);
  }
  for (uint32_t high :
       {0x0000u, 0x0001u, 0x007Fu, 0x0080u, 0x3F80u, 0x7F7Eu, 0x7F7Fu, 0x8000u, 0x807Fu, 0xFF7Fu})
    for (uint32_t low = 0; low < 0x10000u; ++low) {
      const float x = from_bits(high << 16 | low);
      ASSERT_EQ(to_bf16(x), bf16_oracle(x)) << std::hex << bits(x);
    }
}

// ---------------------------------------------------------------------------------------------
// §4 scale rules

// Oracle: least integer e with 2^e >= x (x > 0, finite).
int ceil_log2_oracle(double x) {
  int e;
  const double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  return m == 0.5 ? e - 1 : e;
}

const float kEps = from_bits(0x38D1B717u);

int scale_exponent_oracle(float amax, ScaleClamp rule) {
  const double eps = kEps;
  double sc;
  if (rule == ScaleClamp::cpu)
    sc = std::max(static_cast<double>(static_cast<float>(static_cast<double>(amax) / 448.0)), eps);
  else
    sc = static_cast<float>(std::max(static_cast<double>(amax), eps) / 448.0);
  return ceil_log2_oracle(sc);
}

TEST(F16, HandPickedPatterns) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);  // largest finite
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);  // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x83FF), -1023 * 0x1p-24f);
  EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(bits(f16_to_f32(0x7C00)), 0x7F800000u);  // +inf
  EXPECT_EQ(bits(f16_to_f32(0xFC00)), 0xFF800000u);  // -inf
  EXPECT_EQ(bits(f16_to_f32(0x7E00)), 0x7FC00000u);  // quiet NaN
  EXPECT_EQ(bits(f16_to_f32(0x7C01)), 0x7F802000u);  // signalling NaN: payload kept
}

TEST(F16, EveryFinitePatternAgreesWithTheDefinition) {
  // (-1)^s · 2^(E - 15) · (1 + m/1024), or (-1)^s · m · 2^-24 for E = 0, in binary64.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t E = h >> 10 & 31, m = h & 1023;
    if (E == 31) continue;
    const double mag = E == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024.0, int(E) - 15);
    const double want = h & 0x8000 ? -mag : mag;
    ASSERT_EQ(static_cast<double>(f16_to_f32(static_cast<uint16_t>(h))), want) << std::hex << h;
    ASSERT_EQ(std::signbit(f16_to_f32(static_cast<uint16_t>(h))), (h & 0x8000) != 0) << h;
  }
}

TEST(Scale, EpsilonIsRoundedOneE4) { EXPECT_EQ(bits(1e-4f), 0x38D1B717u); }

TEST(Scale, CeilLog2PowersOfTwoAndNeighbours) {
  for (int e = -126; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    EXPECT_EQ(ceil_log2(p), e) << e;
    if (e < 127) {
      EXPECT_EQ(ceil_log2(std::nextafter(p, 2 * p)), e + 1) << e;
    }
    if (e > -126) {
      EXPECT_EQ(ceil_log2(std::nextafter(p, 0.0f)), e) << e;
    }
    EXPECT_EQ(ceil_log2(1.5f * p), e + 1) << e;
  }
  EXPECT_EQ(ceil_log2(std::numeric_limits<float>::max()), 128);
  std::mt19937 rng(0xC0FFEEu);
  for (int i = 0; i < 100000; ++i) {
    const float x =
        from_bits(0x00800000u + static_cast<uint32_t>(rng()) % (0x7F800000u - 0x00800000u));
    ASSERT_EQ(ceil_log2(x), ceil_log2_oracle(x)) << std::hexfloat << x;
  }
}

TEST(Scale, Pow2fIsExact) {
  for (int e = -126; e <= 127; ++e) EXPECT_EQ(pow2f(e), std::ldexp(1.0f, e)) << e;
}

TEST(Scale, CompressorWorkedExampleOneHead512) {
  // compressor.md §9.1: amax = 1 -> sc = RN(1/448) = 0x3B124925, e = -8, byte 0x77;
  // y = 256 -> code 0x78.
  EXPECT_EQ(bits(1.0f / 448.0f), 0x3B124925u);
  for (ScaleClamp rule : {ScaleClamp::cpu, ScaleClamp::gpu}) {
    EXPECT_EQ(scale_exponent(1.0f, rule), -8);
    EXPECT_EQ(scale_exponent(1.0f, rule) + 127, 0x77);
  }
  EXPECT_EQ(e4m3_sat(1.0f * pow2f(8)), 0x78);
}

TEST(Scale, CompressorWorkedExampleClampModes) {
  // compressor.md §9.2: amax = bf16 0x3C24 = 0.010009765625, small value 5.3125 * 2^-22.
  const float amax = bf16_to_f32(0x3C24);
  ASSERT_EQ(amax, 0.010009765625f);
  const float small = 5.3125f * 0x1p-22f;
  ASSERT_EQ(round_bf16(small), small);

  const int e_cpu = scale_exponent(amax, ScaleClamp::cpu);
  EXPECT_EQ(e_cpu, -13);
  EXPECT_EQ(e_cpu + 127, 0x72);
  const int e_gpu = scale_exponent(amax, ScaleClamp::gpu);
  EXPECT_EQ(e_gpu, -15);
  EXPECT_EQ(e_gpu + 127, 0x70);

  const float inv_cpu = pow2f(-e_cpu), inv_gpu = pow2f(-e_gpu);
  EXPECT_EQ(amax * inv_cpu, 82.0f);
  EXPECT_EQ(e4m3_sat(amax * inv_cpu), 0x6A);
  EXPECT_EQ(fp8_e4m3_decode(0x6A) * pow2f(e_cpu), 0.009765625f);
  EXPECT_EQ(amax * inv_gpu, 328.0f);
  EXPECT_EQ(e4m3_sat(amax * inv_gpu), 0x7A);
  EXPECT_EQ(fp8_e4m3_decode(0x7A) * pow2f(e_gpu), 0.009765625f);

  EXPECT_EQ(small * inv_cpu, 5.3125f * 0x1p-9f);
  EXPECT_EQ(e4m3_sat(small * inv_cpu), 0x05);
  EXPECT_EQ(fp8_e4m3_decode(0x05) * pow2f(e_cpu), 5 * 0x1p-22f);
  EXPECT_EQ(small * inv_gpu, 1.328125f * 0x1p-5f);
  EXPECT_EQ(e4m3_sat(small * inv_gpu), 0x13);
  EXPECT_EQ(fp8_e4m3_decode(0x13) * pow2f(e_gpu), 1.375f * 0x1p-20f);
}

TEST(Scale, ClampRulesAtAndBelowTheThreshold) {
  // amax <= 448 * 2^-14 = 0.02734375: clamp-scale pins e at -13 (byte 114); clamp-amax follows
  // amax down to -22 (byte 105, for amax <= eps).
  const float threshold = 0.02734375f;
  EXPECT_EQ(scale_exponent(threshold, ScaleClamp::cpu), -13);
  EXPECT_EQ(scale_exponent(threshold, ScaleClamp::gpu), -14);  // sc = 2^-14 exactly
  const float above = std::nextafter(threshold, 1.0f);
  EXPECT_EQ(scale_exponent(above, ScaleClamp::cpu), -13);
  EXPECT_EQ(scale_exponent(above, ScaleClamp::gpu), -13);
  EXPECT_EQ(scale_exponent(0.0f, ScaleClamp::cpu), -13);
  EXPECT_EQ(scale_exponent(0.0f, ScaleClamp::gpu), -22);  // RN(eps/448) ~ 2.2e-7 in (2^-23, 2^-22]
  EXPECT_EQ(scale_exponent(kEps, ScaleClamp::gpu), -22);
  EXPECT_EQ(scale_exponent(0x1p-20f, ScaleClamp::gpu), -22);
  EXPECT_EQ(scale_exponent(0x1p-20f, ScaleClamp::cpu), -13);
  EXPECT_EQ(scale_exponent(448.0f * 0x1p-20f, ScaleClamp::gpu), -20);
  EXPECT_EQ(scale_exponent(448.0f * 0x1p-20f, ScaleClamp::cpu), -13);
  EXPECT_EQ(scale_exponent(448.0f, ScaleClamp::gpu), 0);
  EXPECT_EQ(scale_exponent(std::nextafter(448.0f, 1e9f), ScaleClamp::cpu), 1);
}

TEST(Scale, BothRulesAgreeWithOracleOnEveryFiniteBf16) {
  // Every non-negative finite bf16 amax: e matches the oracle, bytes lie in [105, 247]
  // ([114, 247] with clamp-scale), and the rules differ only for amax <= 0.02734375.
  for (uint32_t h = 0; h < 0x7F80u; ++h) {
    const float amax = bf16_to_f32(static_cast<uint16_t>(h));
    const int ec = scale_exponent(amax, ScaleClamp::cpu);
    const int eg = scale_exponent(amax, ScaleClamp::gpu);
    ASSERT_EQ(ec, scale_exponent_oracle(amax, ScaleClamp::cpu)) << std::hexfloat << amax;
    ASSERT_EQ(eg, scale_exponent_oracle(amax, ScaleClamp::gpu)) << std::hexfloat << amax;
    ASSERT_GE(ec + 127, 114);
    ASSERT_LE(ec + 127, 247);
    ASSERT_GE(eg + 127, 105);
    ASSERT_LE(eg + 127, 247);
    if (amax > 0.02734375f) {
      ASSERT_EQ(ec, eg) << std::hexfloat << amax;
    }
  }
}

TEST(Scale, BothRulesAgreeWithOracleOnRandomFp32) {
  std::mt19937 rng(0x5CA1Eu);
  for (int i = 0; i < 200000; ++i) {
    const float amax = from_bits(static_cast<uint32_t>(rng()) % 0x7F800000u);  // finite, >= 0
    ASSERT_EQ(scale_exponent(amax, ScaleClamp::cpu), scale_exponent_oracle(amax, ScaleClamp::cpu))
        << std::hexfloat << amax;
    ASSERT_EQ(scale_exponent(amax, ScaleClamp::gpu), scale_exponent_oracle(amax, ScaleClamp::gpu))
        << std::hexfloat << amax;
  }
}

TEST(Scale, Ue8m0DecodeAllBytes) {
  EXPECT_EQ(bits(ue8m0_decode(0)), 0x00400000u);  // the subnormal 2^-127
  EXPECT_EQ(ue8m0_decode(0), 0x1p-127f);
  EXPECT_TRUE(std::isnan(ue8m0_decode(255)));
  for (int b = 0; b < 255; ++b)
    EXPECT_EQ(static_cast<double>(ue8m0_decode(static_cast<uint8_t>(b))), std::ldexp(1.0, b - 127))
        << b;
  EXPECT_EQ(ue8m0_decode(0x77), 0x1p-8f);
  EXPECT_EQ(ue8m0_decode(127), 1.0f);
  EXPECT_EQ(ue8m0_decode(254), 0x1p127f);
}

// ---------------------------------------------------------------------------------------------
// §8.1 reduce16, §8.2 sum_squares16, §8.3 rms_inv

float sequential_sum(const float* v, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += v[i];
  return s;
}

TEST(Reduce16, TreeOrderDiffersFromSequentialAndAdjacentPairs) {
  const float d = 3 * 0x1p-26f;  // 0.375 ulp of 1: lost when added to 1 alone, kept in pairs
  // Lanes 4 and 12 meet first in the §8.1 tree (a[4] = L[4] + L[12] = 0.75 ulp), then join lane 0.
  float L[16] = {};
  L[0] = 1.0f;
  L[4] = d;
  L[12] = d;
  EXPECT_EQ(bits(reduce16(L)), bits(1.0f + 0x1p-23f));
  EXPECT_EQ(sequential_sum(L, 16), 1.0f);  // the sequential sum loses both
  // Lanes 8 and 9 never meet before lane 0 in the §8.1 tree: (1 + L8) + L9 = 1. A tree over
  // adjacent pairs or a reversed sequential sum would give 1 + 2^-23.
  float M[16] = {};
  M[0] = 1.0f;
  M[8] = d;
  M[9] = d;
  EXPECT_EQ(bits(reduce16(M)), bits(1.0f));
  float reversed = 0.0f;
  for (int i = 15; i >= 0; --i) reversed += M[i];
  EXPECT_EQ(bits(reversed), bits(1.0f + 0x1p-23f));
  // Ties: 1 + 2^-24 rounds to 1 in a[0]; the 2^-24's of lanes 1..7 and 9..15 pair up exactly.
  float T[16];
  std::fill(T, T + 16, 0x1p-24f);
  T[0] = 1.0f;
  EXPECT_EQ(bits(reduce16(T)), bits(1.0f + 7 * 0x1p-23f));
  EXPECT_EQ(sequential_sum(T, 16), 1.0f);
}

TEST(Reduce16, MatchesHalvingTreeOnRandomInputs) {
  // §8.1 restated as in-place halving with strides 8, 4, 2, 1.
  std::mt19937 rng(0x16u);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int trial = 0; trial < 20000; ++trial) {
    float L[16], v[16];
    for (int i = 0; i < 16; ++i)
      L[i] = v[i] = std::ldexp(dist(rng), static_cast<int>(rng() % 40) - 20);
    for (int stride = 8; stride >= 1; stride /= 2)
      for (int i = 0; i < stride; ++i) v[i] = v[i] + v[i + stride];
    ASSERT_EQ(bits(reduce16(L)), bits(v[0]));
  }
}

TEST(SumSquares16, LaneTreeOrder) {
  // x[0] = 1, x[4] = x[12] = 2^-12: squares 1, 2^-24, 2^-24. The lanes hold them unrounded;
  // the tree adds 2^-24 + 2^-24 = 2^-23 first, then 1 + 2^-23. In index order each 2^-24 is a
  // tie that rounds back to 1.
  float x[16] = {};
  x[0] = 1.0f;
  x[4] = 0x1p-12f;
  x[12] = 0x1p-12f;
  EXPECT_EQ(bits(sum_squares16(x, 16)), bits(1.0f + 0x1p-23f));
  float seq = 0.0f;
  for (float v : x) seq += v * v;
  EXPECT_EQ(seq, 1.0f);
}

TEST(SumSquares16, LanesAccumulateAcrossBlocks) {
  // n = 48: lane j accumulates x[j], x[16 + j], x[32 + j]. Lane 0 gets 1 + 2^-24 + 2^-24
  // (each step a tie back to 1), lane 1 gets 2^-22 + 2^-22 + 1 = 1 + 2^-21.
  std::vector<float> x(48, 0.0f);
  x[0] = 1.0f;
  x[16] = x[32] = 0x1p-12f;
  x[1] = x[17] = 0x1p-11f;
  x[33] = 1.0f;
  EXPECT_EQ(bits(sum_squares16(x.data(), 48)), bits(2.0f + 0x1p-21f));  // 1 + (1 + 2^-21), exact
  EXPECT_EQ(sum_squares16(x.data(), 0), 0.0f);
}

TEST(SumSquares16, CompressorWorkedExample) {
  // compressor.md §9.1: 512 values of 3.0 -> every lane 32 * 9 = 288, tree -> 4608.
  std::vector<float> x(512, 3.0f);
  EXPECT_EQ(sum_squares16(x.data(), 512), 4608.0f);
  // §9.3: 128 values -> 1152.
  EXPECT_EQ(sum_squares16(x.data(), 128), 1152.0f);
}

TEST(RmsInv, CompressorWorkedExample) {
  const float eps_f = 1e-6f;
  EXPECT_EQ(bits(eps_f), 0x358637BDu);
  // compressor.md §9.1 gives t as "0x41100002 (9.00000095)". The decimal is right, the pattern
  // is not: eps_f = 1.0486 ulp of 9 (ulp 2^-20), so t = 9 + 2^-20 = 9.00000095 = 0x41100001
  // (0x41100002 is 9.0000019). sqrt and inv are the same for both patterns.
  EXPECT_EQ(static_cast<double>(from_bits(0x41100001u)), 9.0 + 0x1p-20);
  float t = 0.0f;
  const float inv = rms_inv(4608.0f, 512, eps_f, &t);
  EXPECT_EQ(bits(t), 0x41100001u);
  EXPECT_EQ(bits(std::sqrt(t)), 0x40400001u);
  EXPECT_EQ(bits(inv), 0x3EAAAAAAu);
  EXPECT_EQ(bits(3.0f * inv), 0x3F7FFFFFu);  // n[d] = RN(3 * inv) * 1
  EXPECT_EQ(to_bf16(3.0f * inv), 0x3F80);
  // §9.3: ss = 1152, n = 128 gives the same t.
  float t128 = 0.0f;
  EXPECT_EQ(bits(rms_inv(1152.0f, 128, eps_f, &t128)), 0x3EAAAAAAu);
  EXPECT_EQ(bits(t128), 0x41100001u);
}

TEST(RmsInv, AttentionWorkedExample) {
  // attention.md §3.5: ss = 512 -> t = 0x3F800008, sqrt = 0x3F800004, inv = 0x3F7FFFF8.
  float t = 0.0f;
  const float inv = rms_inv(512.0f, 512, 1e-6f, &t);
  EXPECT_EQ(bits(t), 0x3F800008u);
  EXPECT_EQ(bits(std::sqrt(t)), 0x3F800004u);
  EXPECT_EQ(bits(inv), 0x3F7FFFF8u);
  EXPECT_EQ(to_bf16(1.0f * inv), 0x3F80);
  EXPECT_EQ(bits(rms_inv(512.0f, 512, 1e-6f)), 0x3F7FFFF8u);  // t_out is optional
}

TEST(RmsInv, AgreesWithBinary64Oracle) {
  std::mt19937 rng(0x12345u);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  for (int i = 0; i < 100000; ++i) {
    const int n = (i & 1) ? 512 : 128;
    const float ss = static_cast<float>(std::ldexp(mant(rng), static_cast<int>(rng() % 60) - 30));
    const float eps_f = (i % 3 == 0) ? 1e-5f : 1e-6f;
    float t = static_cast<float>(static_cast<double>(ss) / n);
    t = static_cast<float>(static_cast<double>(t) + eps_f);
    const float root = static_cast<float>(std::sqrt(static_cast<double>(t)));
    const float want = static_cast<float>(1.0 / root);
    float got_t = 0.0f;
    ASSERT_EQ(bits(rms_inv(ss, n, eps_f, &got_t)), bits(want)) << std::hexfloat << ss << " " << n;
    ASSERT_EQ(bits(got_t), bits(t));
  }
}

}  // namespace
}  // namespace dsv4cpu
