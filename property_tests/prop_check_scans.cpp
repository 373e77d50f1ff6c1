// Properties of the validation scans (core/check_hwy.cpp): a special value placed at each boundary
// index of an array in turn (generators.hpp: 0, the vector widths and scan steps ±1, the block
// ends of 1- and 2-byte elements, n − 1), with finite decoys elsewhere (the largest finite value,
// −0, subnormals, 0x7E and 0xFE codes) and sometimes a second offender after it, is the offender
// every scan reports, on every Highway target, with 1, 2 or 8 threads, at the production
// thresholds and at the lowest ones (blocks of one vector step: every block edge is a boundary).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/check_finite.hpp"
#include "core/check_index.hpp"
#include "core/thresholds.hpp"
#include "generators.hpp"
#include "prop_util.hpp"

namespace dsv4cpu::prop {
namespace {

struct ScanCase {
  int64_t n = 1;
  bool second = false;  // a second offender after the first
  bool lowest = false;  // thresholds at their lowest
  int threads = 1;      // of the scans that split (8: more than the processors, prop_util.hpp)
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const ScanCase& c) {
  return os << "ScanCase{n=" << c.n << ", second=" << c.second << ", lowest=" << c.lowest
            << ", threads=" << c.threads << ", " << c.seed << "}";
}

rc::Gen<ScanCase> gen_scan_case() {
  return rc::gen::exec([] {
    ScanCase c;
    // Short arrays (vector tails), the 256-float blocks, the 512- and 1024-element blocks of
    // 2- and 1-byte elements.
    c.n = *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::inRange<int64_t>(1, 80)},
                                            {2, rc::gen::inRange<int64_t>(80, 600)},
                                            {1, rc::gen::inRange<int64_t>(1000, 2100)}});
    c.second = *rc::gen::arbitrary<bool>();
    c.lowest = *rc::gen::arbitrary<bool>();
    c.threads = *rc::gen::element(1, 2, 8);
    c.seed = *gen_seed();
    return c;
  });
}

// Fails unless `found` (a scan's answer with the offender at `at`) is `at`.
void expect_found(int64_t found, int64_t at, const std::string& what) {
  if (found != at)
    RC_FAIL(what + ": offender at " + std::to_string(at) + ", the scan reports " +
            std::to_string(found));
}

// The random offender after `at`, if any: an index in (at, n).
int64_t after(std::mt19937_64& rng, int64_t at, int64_t n) {
  return at + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - at - 1));
}

void scan_property() {
  const ScanCase c = *gen_scan_case();
  std::mt19937_64 rng(c.seed.value);
  const detail::ScopedThresholds thresholds(c.lowest ? detail::lowest_thresholds()
                                                     : detail::thresholds());
  const int64_t n = c.n;
  const float kMax = std::numeric_limits<float>::max();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Finite contents with decoys: the largest finite magnitude, −0, a subnormal.
  const auto finite = [&] {
    const uint64_t r = rng() % 8;
    return r == 0 ? (rng() % 2 ? kMax : -kMax)
           : r == 1 ? -0.0f
           : r == 2 ? 1e-40f
                    : std::ldexp(static_cast<float>(rng() % 2000) - 1000.0f, -5);
  };
  const uint16_t bf16_bad[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFFF};
  const uint16_t f16_bad[] = {0x7C00, 0xFC00, 0x7E00, 0xFFFF};
  const uint8_t fp8_bad[] = {0x7F, 0xFF};
  const uint8_t fp8_decoys[] = {0x7E, 0xFE, 0x80, 0x00, 0x78};
  for (const int64_t at : boundary_indices(n, {512, 1024})) {
    const bool two = c.second && at + 1 < n;
    const int64_t next = two ? after(rng, at, n) : n;
    std::vector<float> x(static_cast<size_t>(n)), a(x.size()), b(x.size());
    std::vector<float> clean(x.size()), zero(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = clean[i] = finite();
      zero[i] = rng() % 2 ? 0.0f : -0.0f;
      a[i] = rng() % 2 ? 1.0f : -kMax;  // a + b is finite
      b[i] = rng() % 2 ? 1.0f : kMax;
    }
    const float special[] = {nan, inf, -inf};
    x[size_t(at)] = special[rng() % 3];
    if (two) x[size_t(next)] = special[rng() % 3];
    a[size_t(at)] = b[size_t(at)] = kMax;  // RN(a + b) = inf
    if (two) a[size_t(next)] = nan;
    std::vector<uint16_t> bf16(x.size()), f16(x.size());
    std::vector<uint8_t> codes(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      // Any finite pattern, the largest finite magnitude a quarter of the time, either sign.
      const auto sign = static_cast<uint16_t>(rng() % 2 ? 0x8000 : 0);
      bf16[i] = static_cast<uint16_t>((rng() % 4 ? rng() % 0x7F80 : 0x7F7F) | sign);
      f16[i] = static_cast<uint16_t>((rng() % 4 ? rng() % 0x7C00 : 0x7BFF) | sign);
      codes[i] = rng() % 4 ? static_cast<uint8_t>(rng() % 0x7F | (rng() % 2 ? 0x80 : 0))
                           : fp8_decoys[rng() % 5];
    }
    for (const int64_t i : {at, next}) {
      if (i == n) continue;
      bf16[size_t(i)] = bf16_bad[rng() % 4];
      f16[size_t(i)] = f16_bad[rng() % 4];
      codes[size_t(i)] = fp8_bad[rng() % 2];
    }
    // An index array in [-1, n): one element outside at `at` (n, or -2).
    std::vector<int64_t> idx64(x.size());
    std::vector<int32_t> idx32(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      idx32[i] = static_cast<int32_t>(idx64[i] = static_cast<int64_t>(rng() % (n + 1)) - 1);
    for (const int64_t i : {at, next}) {
      if (i == n) continue;
      idx64[size_t(i)] = rng() % 2 ? n : -2;
      idx32[size_t(i)] = static_cast<int32_t>(idx64[size_t(i)]);
    }
    testing::for_each_highway_target([&](const std::string& target) {
      const std::string where = target + (c.lowest ? " (lowest thresholds)" : "");
      const std::string w = where + ", " + std::to_string(c.threads) + " threads";
      const int nt = c.threads;
      expect_found(detail::first_non_finite(x.data(), n, nt), at, "f32 " + w);
      expect_found(detail::first_non_finite_bf16(bf16.data(), n, nt), at, "bf16 " + w);
      expect_found(detail::first_non_finite_f16(f16.data(), n, nt), at, "f16 " + w);
      expect_found(detail::first_nan_code(codes.data(), n, nt), at, "fp8 codes " + w);
      expect_found(detail::first_outside(TensorView(idx64.data(), DType::I64, {n}), -1, n, nt),
                   at, "I64 indices " + w);
      expect_found(detail::first_outside(TensorView(idx32.data(), DType::I32, {n}), -1, n, nt),
                   at, "I32 indices " + w);
      expect_found(detail::first_non_finite_sum(a.data(), b.data(), n), at, "a + b " + where);
      // Each of the three rows of finite_with_sum holding the offender; the clean rows pass.
      const std::string fws = "finite_with_sum " + where + ": passes with an offender at ";
      if (detail::finite_with_sum(x.data(), clean.data(), zero.data(), n)) RC_FAIL(fws + "a");
      if (detail::finite_with_sum(clean.data(), x.data(), zero.data(), n)) RC_FAIL(fws + "b");
      if (detail::finite_with_sum(clean.data(), a.data(), b.data(), n)) RC_FAIL(fws + "b + c");
      if (!detail::finite_with_sum(clean.data(), clean.data(), zero.data(), n))
        RC_FAIL("finite_with_sum " + where + ": fails on finite rows");
    });
  }
}

TEST(CheckScans, SpecialAtEveryBoundaryIsTheFirstOffender) {
  EXPECT_TRUE(rc::check("CheckScans.SpecialAtEveryBoundaryIsTheFirstOffender", scan_property));
}

}  // namespace
}  // namespace dsv4cpu::prop
