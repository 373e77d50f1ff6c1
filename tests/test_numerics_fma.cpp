// numerics.md §5 (exp_lib), §7 (fused multiply-add and no contraction), §8.2 and §8.5 (the fused
// steps of sum_squares16 and rope_pair).
//
// Oracles, independent of numerics.hpp and of std::fma:
//   - fp32 operations emulated in binary64: a product of two fp32 values is exact in binary64;
//     +, * and / rounded to binary64 and then to fp32 equal one fp32 rounding (53 >= 2·24 + 2);
//     fma32 below rounds the exact a·b + c once, using an exact binary64 two-sum to settle the
//     fp32 midpoint case.
//   - exp_lib: the correctly rounded value from binary64 std::exp (error < 1 ulp of binary64,
//     about 2^-29 fp32 ulps), and a transcription of the §5 steps on the emulated operations,
//     with each fma either fused (the spec) or rounded twice (a build that fails to fuse).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu {
namespace {

uint32_t bits(float x) { return f32_bits(x); }
float from_bits(uint32_t b) { return f32_from_bits(b); }

// Every optimised Release build gets the dense sweeps; Debug and sanitizer builds a sparser one.
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
constexpr bool kFullSweep = true;
#else
constexpr bool kFullSweep = false;
#endif

// RN of fp32 a·b + c, rounded once (finite, non-overflowing inputs).
float fma32(float a, float b, float c) {
  const double p = static_cast<double>(a) * b;  // exact
  const double s = p + c;
  const double bv = s - p;  // two-sum: p + c = s + err exactly
  const double err = (p - (s - bv)) + (c - bv);
  // |err| is at most half a binary64 ulp of s, so RN(p + c) = RN(s) unless s is the midpoint of
  // two fp32 values and err != 0: then err's sign decides.
  const float f = static_cast<float>(s);
  if (err == 0 || static_cast<double>(f) == s) return f;
  const float other = std::nextafter(
      f, s > f ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity());
  if (s - f != (static_cast<double>(other) - f) / 2) return f;  // not a midpoint
  return (err > 0) == (other > f) ? other : f;
}
float mul32(float a, float b) { return static_cast<float>(static_cast<double>(a) * b); }
float add32(float a, float b) { return static_cast<float>(static_cast<double>(a) + b); }
// RN(RN(a·b) + c): what a build that does not fuse computes.
float unfused32(float a, float b, float c) { return add32(mul32(a, b), c); }

TEST(Fma32Oracle, HandCases) {
  const float a = 1.0f + 0x1p-12f;  // a² = 1 + 2^-11 + 2^-24
  EXPECT_EQ(fma32(a, a, -1.0f), 0x1p-11f + 0x1p-24f);
  EXPECT_EQ(unfused32(a, a, -1.0f), 0x1p-11f);
  EXPECT_EQ(fma32(a, a, 0.0f), 1.0f + 0x1p-11f);  // tie, to even
  // a² + 2^-60 lies just above the tie: the single rounding goes up.
  EXPECT_EQ(fma32(a, a, 0x1p-60f), 1.0f + 0x1p-11f + 0x1p-23f);
  EXPECT_EQ(fma32(a, a, -0x1p-60f), 1.0f + 0x1p-11f);
  EXPECT_EQ(fma32(-a, a, 0x1p-60f), -(1.0f + 0x1p-11f));
  EXPECT_EQ(fma32(-a, a, -0x1p-60f), -(1.0f + 0x1p-11f + 0x1p-23f));
  // Subnormal results: 2^-75 · 2^-75 = 2^-150 is a tie between 0 and 2^-149 (to even: 0);
  // 0.75 · 2^-149 rounds up; 2^-150 + 2^-149 is a tie between 2^-149 and 2^-148 (to even).
  EXPECT_EQ(bits(fma32(0x1p-75f, 0x1p-75f, 0.0f)), 0u);
  EXPECT_EQ(fma32(0x1.8p-75f, 0x1p-75f, 0.0f), 0x1p-149f);
  EXPECT_EQ(fma32(0x1p-75f, 0x1p-75f, 0x1p-149f), 0x1p-148f);
}

// ---------------------------------------------------------------------------------------------
// §7: this translation unit is compiled like the library, without contraction.

TEST(Contraction, PlainMultiplyAddRoundsTwice) {
  volatile float va = 1.0f + 0x1p-12f, vc = -1.0f;
  const float a = va, c = vc;
  const float r = a * a + c;  // contracted, this would be 2^-11 + 2^-24
  EXPECT_EQ(r, 0x1p-11f);
  EXPECT_NE(fma32(a, a, c), unfused32(a, a, c));
}

// ---------------------------------------------------------------------------------------------
// §8.5 rope_pair: e' = fma(e, c, RN(o·(−s))), o' = fma(o, c, RN(e·s)).

struct RopeCase {
  float e, o, c, s, e_out, o_out;
};

TEST(RopePair, HandComputedFusedResults) {
  const float q = 1.0f + 0x1p-12f;  // q² = 1 + 2^-11 + 2^-24, not an fp32 value
  const RopeCase cases[] = {
      // e·c + (−1) fused keeps the 2^-24 that RN(e·c) would lose; o' = q + q exactly.
      {q, 1.0f, q, 1.0f, 0x1p-11f + 0x1p-24f, 2.0f + 0x1p-11f},
      // RN(o·(−s)) = −(1 + 2^-11) is rounded before the fma: e' = 1 − (1 + 2^-11) = −2^-11
      // (fusing o·s instead would give −(2^-11 + 2^-24)).
      {1.0f, q, 1.0f, q, -0x1p-11f, 2.0f + 0x1p-11f},
      // The odd output: o·c + RN(e·s) = q² − 1; e' = −q − q.
      {-1.0f, q, q, 1.0f, -(2.0f + 0x1p-11f), 0x1p-11f + 0x1p-24f},
      // Identity rotation (compressor.md §9.1, row 0): e' = fma(e, 1, −0) = e, o' = o.
      {0.3f, -1.7f, 1.0f, 0.0f, 0.3f, -1.7f},
  };
  for (const RopeCase& k : cases) {
    float e_out = 0.0f, o_out = 0.0f;
    rope_pair(k.e, k.o, k.c, k.s, &e_out, &o_out);
    EXPECT_EQ(bits(e_out), bits(k.e_out)) << std::hexfloat << k.e << " " << k.o;
    EXPECT_EQ(bits(o_out), bits(k.o_out)) << std::hexfloat << k.e << " " << k.o;
    // The hand values are the oracle's, and each fused output of the first three cases differs
    // from the doubly rounded one.
    EXPECT_EQ(bits(fma32(k.e, k.c, mul32(k.o, -k.s))), bits(k.e_out));
    EXPECT_EQ(bits(fma32(k.o, k.c, mul32(k.e, k.s))), bits(k.o_out));
  }
  EXPECT_NE(fma32(q, q, mul32(1.0f, -1.0f)), unfused32(q, q, mul32(1.0f, -1.0f)));
  EXPECT_NE(fma32(q, q, mul32(-1.0f, 1.0f)), unfused32(q, q, mul32(-1.0f, 1.0f)));
  // Case 2 separates the spec's order from fusing the other product: fma(o, −s, RN(e·c)).
  EXPECT_NE(fma32(1.0f, 1.0f, mul32(q, -q)), fma32(q, -q, mul32(1.0f, 1.0f)));
}

TEST(RopePair, AgreesWithOracleOnRandomInputs) {
  std::mt19937 rng(0x20BEu);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  int fused_differs = 0;
  for (int i = 0; i < 200000; ++i) {
    const float e = std::ldexp(unit(rng), static_cast<int>(rng() % 16) - 8);
    const float o = std::ldexp(unit(rng), static_cast<int>(rng() % 16) - 8);
    const float angle = unit(rng) * 3.2f;
    const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
    const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
    float e_out = 0.0f, o_out = 0.0f;
    rope_pair(e, o, c, s, &e_out, &o_out);
    const float e_want = fma32(e, c, mul32(o, -s));
    const float o_want = fma32(o, c, mul32(e, s));
    ASSERT_EQ(bits(e_out), bits(e_want)) << std::hexfloat << e << " " << o << " " << c << " " << s;
    ASSERT_EQ(bits(o_out), bits(o_want)) << std::hexfloat << e << " " << o << " " << c << " " << s;
    fused_differs += e_want != unfused32(e, c, mul32(o, -s));
  }
  EXPECT_GT(fused_differs, 1000);  // the sweep does separate fused from unfused
}

// ---------------------------------------------------------------------------------------------
// §8.2 sum_squares16: L[j] = fma(x, x, L[j]).

TEST(SumSquares16, LanesFuse) {
  // x[j] = 2^-12 then x[16 + j] = 1 + 2^-12: each lane is fma(q, q, 2^-24) = 1 + 2^-11 + 2^-23
  // (exact); unfused, RN(q²) = 1 + 2^-11 (tie to even) and + 2^-24 is another tie back to it.
  // The tree sums 16 equal lanes exactly: 16 + 2^-7 + 2^-19.
  const float q = 1.0f + 0x1p-12f;
  std::vector<float> x(32, 0x1p-12f);
  std::fill(x.begin() + 16, x.end(), q);
  EXPECT_EQ(bits(sum_squares16(x.data(), 32)), bits(16.0f + 0x1p-7f + 0x1p-19f));
  EXPECT_EQ(fma32(q, q, 0x1p-24f), 1.0f + 0x1p-11f + 0x1p-23f);
  EXPECT_EQ(unfused32(q, q, 0x1p-24f), 1.0f + 0x1p-11f);
}

TEST(SumSquares16, AgreesWithOracleOnRandomInputs) {
  std::mt19937 rng(0x55u);
  std::uniform_real_distribution<float> unit(-4.0f, 4.0f);
  int fused_differs = 0;
  std::vector<float> x(512);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = (trial % 2) ? 512 : 128;
    for (int i = 0; i < n; ++i) x[i] = unit(rng);
    double L[16] = {}, U[16] = {};  // fp32 values held in binary64
    for (int i = 0; i < n; ++i) {
      L[i % 16] = fma32(x[i], x[i], static_cast<float>(L[i % 16]));
      U[i % 16] = unfused32(x[i], x[i], static_cast<float>(U[i % 16]));
    }
    for (int stride = 8; stride >= 1; stride /= 2)
      for (int j = 0; j < stride; ++j) {
        L[j] = add32(static_cast<float>(L[j]), static_cast<float>(L[j + stride]));
        U[j] = add32(static_cast<float>(U[j]), static_cast<float>(U[j + stride]));
      }
    ASSERT_EQ(bits(sum_squares16(x.data(), n)), bits(static_cast<float>(L[0]))) << trial;
    fused_differs += L[0] != U[0];
  }
  EXPECT_GT(fused_differs, 20);
}

// ---------------------------------------------------------------------------------------------
// §5 exp_lib

const float kThreshold = from_bits(0x42B17218u);  // 0x1.62e430p+6

// §5 step by step on the emulated operations. Bit i of `unfused` rounds the i-th fma of §5
// twice instead of once (0: k·C_HI, 1: k·C_LO, 2..6: the Horner steps P5..0.5, 7: RN(r·r)·u + r);
// 0 is the spec.
constexpr unsigned kAllFused = 0, kNoneFused = 0xFF;
float exp_transcribed(float x, unsigned unfused) {
  if (std::isnan(x)) return from_bits(0x7FC00000u);
  if (x >= kThreshold) return std::numeric_limits<float>::infinity();
  if (x < -104.0f) return 0.0f;
  int step = 0;
  auto f = [&](float a, float b, float c) {
    return (unfused >> step++ & 1u) ? unfused32(a, b, c) : fma32(a, b, c);
  };
  const float v = mul32(x, from_bits(0x3FB8AA3Bu));  // RN(x · L2E)
  double k = std::floor(v);                          // rint, ties to even
  const double frac = v - k;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(k, 2.0) != 0.0)) k += 1.0;
  const float kf = static_cast<float>(k);
  float r = f(kf, -from_bits(0x3F317200u), x);
  r = f(kf, -from_bits(0x35BFBE8Eu), r);
  float u = from_bits(0x39502BDAu);
  u = f(u, r, from_bits(0x3AB696C9u));
  u = f(u, r, from_bits(0x3C0888A6u));
  u = f(u, r, from_bits(0x3D2AAA7Au));
  u = f(u, r, from_bits(0x3E2AAAABu));
  u = f(u, r, 0.5f);
  u = f(mul32(r, r), u, r);
  u = add32(1.0f, u);
  const int k1 = static_cast<int>(std::floor(k / 2)), k2 = static_cast<int>(k) - k1;
  const float y1 =
      static_cast<float>(static_cast<double>(u) * std::ldexp(1.0, k1));  // exact, then RN
  return static_cast<float>(static_cast<double>(y1) * std::ldexp(1.0, k2));
}

// Error of exp_lib(x) in ulps of the correctly rounded fp32 result (2^-149 for subnormal results).
double exp_error_ulps(float x, float got) {
  const double exact = std::exp(static_cast<double>(x));
  const float cr = static_cast<float>(exact);
  const double ulp = std::fabs(cr) < 0x1p-126f ? 0x1p-149 : std::ldexp(1.0, std::ilogb(cr) - 23);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

TEST(ExpLib, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(exp_lib(0.0f)), bits(1.0f));
  EXPECT_EQ(bits(exp_lib(-0.0f)), bits(1.0f));
  EXPECT_EQ(bits(exp_lib(-inf)), 0u);  // +0
  EXPECT_EQ(bits(exp_lib(inf)), 0x7F800000u);
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FA5A5A5u})
    EXPECT_EQ(bits(exp_lib(from_bits(nan))), 0x7FC00000u) << std::hex << nan;
  // The overflow threshold 0x1.62e430p+6 = 88.72283935546875 and above give +inf; the fp32 just
  // below it is finite (exp(88.7228317) < FLT_MAX).
  EXPECT_EQ(kThreshold, 88.72283935546875f);
  EXPECT_EQ(bits(exp_lib(kThreshold)), 0x7F800000u);
  EXPECT_EQ(bits(exp_lib(std::nextafter(kThreshold, inf))), 0x7F800000u);
  EXPECT_EQ(bits(exp_lib(1000.0f)), 0x7F800000u);
  const float below = from_bits(0x42B17217u);
  EXPECT_TRUE(std::isfinite(exp_lib(below)));
  EXPECT_GT(exp_lib(below), 0x1.fffp127f);
  EXPECT_LE(exp_error_ulps(below, exp_lib(below)), 0.988);
  // x < −104 gives +0.
  EXPECT_EQ(bits(exp_lib(std::nextafter(-104.0f, -inf))), 0u);
  EXPECT_EQ(bits(exp_lib(-105.0f)), 0u);
  EXPECT_EQ(bits(exp_lib(-1e30f)), 0u);
  EXPECT_EQ(bits(exp_lib(-std::numeric_limits<float>::max())), 0u);
  // Subnormal results are not flushed.
  EXPECT_GT(exp_lib(-100.0f), 0.0f);
  EXPECT_LT(exp_lib(-100.0f), 0x1p-126f);
}

TEST(ExpLib, FusesWhereTheSpecWritesFma) {
  // x = 0x1.00000cp-1: the §5 steps give 0x1.a612a2p+0 (the correctly rounded exp, error 0.39
  // ulp) with one rounding per fma and 0x1.a612a4p+0 with two.
  const float x = 0x1.00000cp-1f;
  EXPECT_EQ(bits(exp_transcribed(x, kAllFused)), bits(0x1.a612a2p+0f));
  EXPECT_EQ(bits(exp_transcribed(x, kNoneFused)), bits(0x1.a612a4p+0f));
  EXPECT_EQ(bits(static_cast<float>(std::exp(static_cast<double>(x)))), bits(0x1.a612a2p+0f));
  EXPECT_EQ(bits(exp_lib(x)), bits(0x1.a612a2p+0f));
}

TEST(ExpLib, FusesEachFmaThatCanMatter) {
  // For each fma of §5, an input where rounding that fma twice (alone) changes exp_lib's result,
  // found by searching the transcription. Two have none: fma(k, −C_HI, x) never matters (C_HI
  // has 15 significant bits and |k| <= 150 has 8, so k·C_HI is exact in fp32, checked below),
  // and for fma(P6, r, P5) a search of every x with 0.125 <= |x| in range found no input.
  const struct {
    float x;
    int step;
  } witnesses[] = {{-0x1.f31408p+4f, 1}, {0x1.1e6b08p-2f, 3}, {0x1.9eb798p-3f, 4},
                   {0x1.09724p-2f, 5},   {0x1.5e96acp-3f, 6}, {0x1.8c3006p-6f, 7}};
  for (const auto& w : witnesses) {
    const float fused = exp_transcribed(w.x, kAllFused);
    EXPECT_NE(bits(fused), bits(exp_transcribed(w.x, 1u << w.step))) << std::hexfloat << w.x;
    EXPECT_EQ(bits(exp_lib(w.x)), bits(fused)) << std::hexfloat << w.x;
  }
  for (int k = -150; k <= 128; ++k) {
    const float c_hi = from_bits(0x3F317200u);
    EXPECT_EQ(static_cast<double>(mul32(static_cast<float>(k), c_hi)),
              k * static_cast<double>(c_hi));
  }
}

// Sweep of [−104, 0x1.62e430p+6): every `stride`-th fp32 pattern of both signs, plus dense
// windows at the ends, around the subnormal boundary (ln 2^-126) and around each switch of
// k = rint(x · L2E), i.e. x = (j + 1/2) · ln 2. Checks, at every point:
//   exp_lib(x) == the fused transcription of §5 (bit-exact),
//   the error bound 0.988 ulp;
// and counts the points where fusing changes the result (it must, somewhere).
std::vector<float> exp_sweep_points() {
  const uint32_t stride = kFullSweep ? 1031 : 8191;  // ~2.3·10^6 or ~3.2·10^5 points in all
  const uint32_t window = kFullSweep ? 1u << 14 : 1u << 10;
  std::vector<float> xs;
  const uint32_t pos_end = 0x42B17218u, neg_end = 0xC2D00000u;  // exclusive / inclusive (−104)
  for (uint32_t b = 0; b < pos_end; b += stride) xs.push_back(from_bits(b));
  for (uint32_t b = 0x80000000u; b <= neg_end; b += stride) xs.push_back(from_bits(b));
  auto dense = [&](uint32_t first, uint32_t count) {
    for (uint32_t b = first; b < first + count; ++b) xs.push_back(from_bits(b));
  };
  dense(pos_end - window, window);                       // just below the overflow threshold
  dense(neg_end - window + 1, window);                   // just above −104
  dense(bits(-87.3365447505531f) - window / 2, window);  // results near 2^-126
  dense(bits(-103.278929903431f) - window / 2, window);  // results near 2^-149
  dense(bits(1.0f) - window / 2, window);
  dense(bits(-1.0f) - window / 2, window);
  for (int j = -151; j <= 128; ++j)  // 129 patterns around each switch of k
    dense(bits(static_cast<float>((j + 0.5) * 0.69314718055994531)) - 64, 129);
  std::vector<float> in_range;
  for (float x : xs)
    if (x >= -104.0f && x < kThreshold) in_range.push_back(x);
  return in_range;
}

TEST(ExpLib, BitExactToSpecTranscriptionAndWithinErrorBound) {
  const std::vector<float> xs = exp_sweep_points();
  double max_err = 0.0;
  float worst = 0.0f;
  long fused_differs = 0;
  for (float x : xs) {
    const float got = exp_lib(x);
    const float want = exp_transcribed(x, kAllFused);
    ASSERT_EQ(bits(got), bits(want)) << std::hexfloat << x;
    const double err = exp_error_ulps(x, got);
    ASSERT_LE(err, 0.988) << std::hexfloat << x << " -> " << got;
    if (err > max_err) {
      max_err = err;
      worst = x;
    }
    fused_differs += bits(want) != bits(exp_transcribed(x, kNoneFused));
  }
  RecordProperty("points", static_cast<int>(xs.size()));
  RecordProperty("fused_differs", static_cast<int>(fused_differs));
  std::printf("exp_lib: %zu points, max error %.6f ulp at %a, fused != unfused at %ld points\n",
              xs.size(), max_err, static_cast<double>(worst), fused_differs);
  EXPECT_GT(fused_differs, 0);
}

}  // namespace
}  // namespace dsv4cpu
