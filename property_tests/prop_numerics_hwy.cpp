// Properties of the vector numerics (optimized/numerics_hwy-inl.h), compiled here for every
// Highway target: lane by lane, every function returns the bits of its scalar counterpart in
// include/dsv4cpu/numerics.hpp (numerics.md §2, §3.2, §5, §7, §8.2, §8.5). The op-level
// properties compare quantised bytes, where a one-ulp slip in an intermediate rarely shows; these
// compare the fp32 intermediates themselves.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "prop_numerics_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "optimized/numerics_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

// n values (a multiple of 16) per call; results as fp32 bit patterns or codes.
void ExpN(const float* x, uint32_t* y, size_t n) {
  const DF d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(hn::BitCast(DU(), ExpLib(hn::LoadU(d, x + i))), DU(), y + i);
}
// x ≤ 0 or NaN only.
void ExpNonPositiveN(const float* x, uint32_t* y, size_t n) {
  const DF d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(hn::BitCast(DU(), ExpLib<true>(hn::LoadU(d, x + i))), DU(), y + i);
}
void FmaN(const float* a, const float* b, const float* c, uint32_t* y, size_t n) {
  const DF d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(
        hn::BitCast(DU(), Fma(hn::LoadU(d, a + i), hn::LoadU(d, b + i), hn::LoadU(d, c + i))),
        DU(), y + i);
}
void Bf16N(const float* x, uint32_t* y, size_t n) {
  const DF d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(Bf16Bits(hn::LoadU(d, x + i)), DU(), y + i);
}
void E4m3N(const float* x, uint32_t* y, size_t n) {
  const DF d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(E4m3Sat(hn::LoadU(d, x + i)), DU(), y + i);
}
float SumSquaresN(const float* x, size_t n) { return SumSquares16(x, n); }
void RopeN(const float* c, const float* s, const float* x, size_t pairs, bool inverse,
           float* out) {
  if (inverse) return RopePairs<true>(c, s, x, pairs, out);
  RopePairs(c, s, x, pairs, out);
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "dsv4cpu/numerics.hpp"
#include "generators.hpp"

namespace dsv4cpu::detail::opt {
HWY_EXPORT(ExpN);
HWY_EXPORT(ExpNonPositiveN);
HWY_EXPORT(FmaN);
HWY_EXPORT(Bf16N);
HWY_EXPORT(E4m3N);
HWY_EXPORT(SumSquaresN);
HWY_EXPORT(RopeN);
}  // namespace dsv4cpu::detail::opt

namespace dsv4cpu::prop {
namespace {

constexpr size_t kValues = 1024;

// Calls body(target name) with dispatch forced to each compiled and supported target.
template <class F>
void for_each_target(const F& body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    try {
      body(std::string(hwy::TargetName(target)));
    } catch (...) {
      hwy::SetSupportedTargetsForTest(0);
      throw;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

void assert_bits(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
                 const std::vector<float>& in, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      RC_FAIL(what + ": input bits " + std::to_string(f32_bits(in[i])) + " gives " +
              std::to_string(got[i]) + ", scalar " + std::to_string(want[i]));
}

// exp_lib of x lane by lane on every target, by both vector forms: the general one on x, the one
// for softmax arguments on x with its sign bit set (x ≤ 0 or NaN).
void check_exp(const std::vector<float>& x) {
  std::vector<float> nonpositive(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    nonpositive[i] = f32_from_bits(f32_bits(x[i]) | 0x80000000u);
  std::vector<uint32_t> want(x.size()), want_np(x.size()), got(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want[i] = f32_bits(exp_lib(x[i]));
    want_np[i] = f32_bits(exp_lib(nonpositive[i]));
  }
  for_each_target([&](const std::string& target) {
    HWY_DYNAMIC_DISPATCH(detail::opt::ExpN)(x.data(), got.data(), x.size());
    assert_bits(got, want, x, "exp_lib on " + target);
    HWY_DYNAMIC_DISPATCH(detail::opt::ExpNonPositiveN)(nonpositive.data(), got.data(), x.size());
    assert_bits(got, want_np, nonpositive, "exp_lib (x <= 0) on " + target);
  });
}

// A float drawn from a mixture: any bit pattern, a uniform value in [lo, hi], or a value a few
// ulps from a point p.
float any_bits(std::mt19937_64& rng) { return f32_from_bits(static_cast<uint32_t>(rng())); }
float uniform(std::mt19937_64& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}
float near(std::mt19937_64& rng, float p) {
  return f32_from_bits(f32_bits(p) + static_cast<uint32_t>(rng() % 9) - 4u);
}

RC_GTEST_PROP(NumericsHwy, ExpLibLanesEqualScalar, ()) {
  const Seed seed = *gen_seed();
  std::mt19937_64 rng(seed.value);
  std::vector<float> x(kValues);
  for (float& v : x) {
    switch (rng() % 5) {
      case 0: v = any_bits(rng); break;
      case 1: v = uniform(rng, -110.0f, 90.0f); break;
      case 2: v = -std::ldexp(uniform(rng, 0.0f, 1.0f), -static_cast<int>(rng() % 40)); break;
      // RN(x·L2E) near a half-integer (the rint tie) and the range edges.
      case 3: v = near(rng, (static_cast<float>(rng() % 300) - 150.5f) / 1.44269502f); break;
      default: v = near(rng, rng() % 2 ? -104.0f : f32_from_bits(exp_consts::kOverflowBits));
    }
  }
  check_exp(x);
}

// Whole vectors of values whose k = rint(x·L2E) lies at an edge of the one-multiply range
// [−125, 127] or just outside it (every lane alike, so the vector takes the path its k selects),
// with results near the smallest normal and the largest finite value.
RC_GTEST_PROP(NumericsHwy, ExpLibScalingEdgesEqualScalar, ()) {
  const Seed seed = *gen_seed();
  std::mt19937_64 rng(seed.value);
  constexpr float kLn2 = 0.693147182f;
  const float edges[] = {-127.0f, -126.5f, -126.0f, -125.5f, -125.0f, -124.5f, 126.5f, 127.0f};
  std::vector<float> x(kValues);
  for (size_t i = 0; i < kValues; i += 16) {
    const float edge = edges[rng() % 8] * kLn2;
    for (size_t j = i; j < i + 16; ++j) x[j] = near(rng, edge + uniform(rng, -0.3f, 0.3f));
  }
  check_exp(x);
}

RC_GTEST_PROP(NumericsHwy, FmaIsOneRounding, ()) {
  const Seed seed = *gen_seed();
  std::mt19937_64 rng(seed.value);
  std::vector<float> a(kValues), b(kValues), c(kValues);
  for (size_t i = 0; i < kValues; ++i) {
    a[i] = rng() % 4 ? uniform(rng, -4.0f, 4.0f) : any_bits(rng);
    b[i] = rng() % 4 ? uniform(rng, -4.0f, 4.0f) : any_bits(rng);
    // Mostly c ≈ −a·b, where one and two roundings differ most.
    c[i] = rng() % 4 ? near(rng, -(a[i] * b[i])) : any_bits(rng);
  }
  std::vector<uint32_t> want(kValues), got(kValues);
  for (size_t i = 0; i < kValues; ++i) want[i] = f32_bits(std::fma(a[i], b[i], c[i]));
  for_each_target([&](const std::string& target) {
    HWY_DYNAMIC_DISPATCH(detail::opt::FmaN)(a.data(), b.data(), c.data(), got.data(), kValues);
    for (size_t i = 0; i < kValues; ++i)  // any two NaNs match (numerics.md §11.1)
      if (got[i] != want[i] &&
          !(std::isnan(f32_from_bits(got[i])) && std::isnan(f32_from_bits(want[i]))))
        RC_FAIL("fma on " + target + " differs for lane " + std::to_string(i));
  });
}

RC_GTEST_PROP(NumericsHwy, Bf16AndE4m3LanesEqualScalar, ()) {
  const Seed seed = *gen_seed();
  std::mt19937_64 rng(seed.value);
  std::vector<float> x(kValues);
  for (float& v : x) {
    switch (rng() % 4) {
      case 0: v = any_bits(rng); break;
      case 1: v = uniform(rng, -500.0f, 500.0f); break;
      case 2: v = std::ldexp(uniform(rng, -1.0f, 1.0f), -static_cast<int>(rng() % 140)); break;
      // Ties: a bf16 midpoint, an e4m3 midpoint of the normal or subnormal range.
      default:
        v = near(rng, std::ldexp(static_cast<float>(2 * (rng() % 16) + 17),
                                 static_cast<int>(rng() % 20) - 14));
    }
  }
  std::vector<uint32_t> want(kValues), got(kValues);
  for (size_t i = 0; i < kValues; ++i) want[i] = static_cast<uint32_t>(to_bf16(x[i])) << 16;
  for_each_target([&](const std::string& target) {
    HWY_DYNAMIC_DISPATCH(detail::opt::Bf16N)(x.data(), got.data(), kValues);
    assert_bits(got, want, x, "to_bf16 on " + target);
  });
  for (size_t i = 0; i < kValues; ++i) want[i] = e4m3_sat(x[i]);
  for_each_target([&](const std::string& target) {
    HWY_DYNAMIC_DISPATCH(detail::opt::E4m3N)(x.data(), got.data(), kValues);
    assert_bits(got, want, x, "e4m3_sat on " + target);
  });
}

RC_GTEST_PROP(NumericsHwy, SumSquaresAndRopeEqualScalar, ()) {
  const Seed seed = *gen_seed();
  std::mt19937_64 rng(seed.value);
  const size_t n = *rc::gen::element<size_t>(16, 64, 128, 512);
  const int spread = *rc::gen::inRange(0, 60);  // exponent spread of the values
  std::vector<float> x(n);
  for (float& v : x)
    v = std::ldexp(uniform(rng, -1.0f, 1.0f), static_cast<int>(rng() % (spread + 1)) - spread / 2);
  for_each_target([&](const std::string& target) {
    const float got = HWY_DYNAMIC_DISPATCH(detail::opt::SumSquaresN)(x.data(), n);
    RC_ASSERT(f32_bits(got) == f32_bits(sum_squares16(x.data(), static_cast<int>(n))));
    (void)target;
  });
  // Any number of pairs (a tail after the last whole vector), forward or back (s negated).
  const int np = *rc::gen::inRange(1, 33);
  const bool inverse = *rc::gen::arbitrary<bool>();
  float c[32], s[32], rot[64], want[64];
  for (int i = 0; i < np; ++i) {
    const double angle = uniform(rng, 0.0f, 6.2831855f);
    c[i] = static_cast<float>(std::cos(angle));
    s[i] = static_cast<float>(std::sin(angle));
    rope_pair(x[2 * i % n], x[(2 * i + 1) % n], c[i], inverse ? -s[i] : s[i], &want[2 * i],
              &want[2 * i + 1]);
  }
  std::vector<float> pairs(64);
  for (int k = 0; k < 64; ++k) pairs[k] = x[k % n];
  for_each_target([&](const std::string& target) {
    HWY_DYNAMIC_DISPATCH(detail::opt::RopeN)(c, s, pairs.data(), static_cast<size_t>(np),
                                             inverse, rot);
    for (int k = 0; k < 2 * np; ++k)
      if (f32_bits(rot[k]) != f32_bits(want[k]))
        RC_FAIL("rope_pair on " + target + " differs at " + std::to_string(k) + " of " +
                std::to_string(np) + (inverse ? " pairs, inverse" : " pairs"));
  });
}

}  // namespace
}  // namespace dsv4cpu::prop
#endif  // HWY_ONCE
