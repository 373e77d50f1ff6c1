// The whole-array scans of the validation vocabulary (core/check_hwy.cpp, core/check_index.cpp,
// core/check_block_table.cpp) against element-by-element loops written here: random arrays of
// every length around the vector and block sizes, offenders planted anywhere (or nowhere), every
// Highway target, 1 to 8 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/check_block_table.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"
#include "core/thresholds.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

// Lengths around the vector widths and the scans' 1 KiB blocks.
const std::vector<int64_t> kLengths = {0,   1,   3,   15,  16,   17,   63,   64,   65,   255,
                                       256, 257, 511, 700, 1023, 1024, 1025, 4097, 20000};
const std::vector<int> kThreads = {1, 2, 3, 8};

TEST(CheckScans, FirstNonFiniteIsTheFirstNanOrInf) {
  std::mt19937_64 rng(1);
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float& v : x)
          v = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f,
                         static_cast<int>(rng() % 200) - 100);
        const int planted = n == 0 ? 0 : static_cast<int>(rng() % 3);  // 0, 1 or 2 offenders
        for (int k = 0; k < planted; ++k) x[rng() % static_cast<uint64_t>(n)] = bad[rng() % 3];
        int64_t want = n;
        for (int64_t i = n - 1; i >= 0; --i)
          if (!std::isfinite(x[static_cast<size_t>(i)])) want = i;
        for (int threads : kThreads)
          EXPECT_EQ(detail::first_non_finite(x.data(), n, threads), want)
              << target << " n=" << n << " threads=" << threads;
        std::vector<float> a(x.size()), b(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          a[i] = rng() % 2 ? 3e38f : 1.0f;  // a + b overflows for some pairs
          b[i] = rng() % 2 ? 3e38f : -1.0f;
        }
        int64_t want_sum = n;
        for (int64_t i = n - 1; i >= 0; --i)
          if (!std::isfinite(a[static_cast<size_t>(i)] + b[static_cast<size_t>(i)])) want_sum = i;
        EXPECT_EQ(detail::first_non_finite_sum(a.data(), b.data(), n), want_sum) << target;
        bool all = true;
        for (size_t i = 0; i < x.size(); ++i)
          all = all && std::isfinite(x[i]) && std::isfinite(a[i]) && std::isfinite(a[i] + b[i]);
        EXPECT_EQ(detail::finite_with_sum(x.data(), a.data(), b.data(), n), all) << target;
      }
  });
}

TEST(CheckScans, FiniteAndBelowIsTheBoundOnEveryElement) {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  const float two127 = std::ldexp(1.0f, 127), below127 = std::nextafter(two127, 0.0f);
  const float a[] = {1.0f, -2.0f, FLT_MAX}, b[] = {below127, -below127, two127, -two127};
  EXPECT_TRUE(detail::finite_and_below(a, 3, b, 2, 127));
  EXPECT_FALSE(detail::finite_and_below(a, 3, b + 2, 1, 127));  // 2^127 is not below 2^127
  EXPECT_FALSE(detail::finite_and_below(a, 3, b + 3, 1, 127));
  EXPECT_FALSE(detail::finite_and_below(a, 3, b, 2, 126));
  EXPECT_TRUE(detail::finite_and_below(nullptr, 0, nullptr, 0, 126));
  std::mt19937_64 rng(11);
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 8; ++trial) {
        const int k = trial % 2 ? 127 : 126;
        const float bound = std::ldexp(1.0f, k);
        // Planted at one random element (or none): values at, just below and above the bound.
        const float near[] = {bound, -bound, std::nextafter(bound, 0.0f),
                              -std::nextafter(bound, 0.0f), std::nextafter(bound, inf),
                              FLT_MAX, inf, -inf, nan};
        std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f,
                            static_cast<int>(rng() % 240) - 120);
          y[i] = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f,
                            static_cast<int>(rng() % 240) - 120);
        }
        if (n > 0 && trial % 4 != 0) {
          auto& row = trial % 4 == 1 ? x : y;
          row[rng() % static_cast<uint64_t>(n)] = near[rng() % 9];
        }
        // The row lengths differ: the a row is a prefix of x.
        const int64_t na = n - static_cast<int64_t>(rng() % 3 == 0 && n > 0);
        bool want = true;
        for (int64_t i = 0; i < na; ++i) want = want && std::isfinite(x[static_cast<size_t>(i)]);
        for (float v : y) want = want && std::fabs(v) < bound;  // false for NaN
        EXPECT_EQ(detail::finite_and_below(x.data(), na, y.data(), n, k), want)
            << target << " n=" << n << " k=" << k;
      }
  });
}

TEST(CheckScans, FirstOutsideIsTheFirstElementOutsideTheBounds) {
  std::mt19937_64 rng(2);
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 4; ++trial) {
        const int64_t lo = rng() % 2 ? 0 : -1;
        const int64_t hi = trial == 0 ? detail::kNoLimit : 1 + static_cast<int64_t>(rng() % 5000);
        std::vector<int64_t> v64(static_cast<size_t>(n));
        for (int64_t& v : v64)
          v = lo + static_cast<int64_t>(
                       rng() % static_cast<uint64_t>(hi == detail::kNoLimit ? 1 << 30 : hi - lo));
        if (n > 0 && rng() % 3 != 0) {
          const int64_t outside[] = {lo - 1, hi == detail::kNoLimit ? -7 : hi, INT32_MIN,
                                     hi == detail::kNoLimit ? INT64_MIN : INT32_MAX};
          v64[rng() % static_cast<uint64_t>(n)] = outside[rng() % 4];
        }
        if (n > 1 && trial == 0 && lo == -1) v64[rng() % static_cast<uint64_t>(n)] = INT32_MAX;
        std::vector<int32_t> v32(v64.begin(), v64.end());
        const auto first = [&](const auto& v) {
          for (int64_t i = 0; i < n; ++i)
            if (v[static_cast<size_t>(i)] < lo ||
                (hi != detail::kNoLimit && v[static_cast<size_t>(i)] >= hi))
              return i;
          return n;
        };
        for (int threads : kThreads) {
          EXPECT_EQ(detail::first_outside(TensorView(v64.data(), DType::I64, {n}), lo, hi, threads),
                    first(v64))
              << target << " I64 n=" << n;
          EXPECT_EQ(detail::first_outside(TensorView(v32.data(), DType::I32, {n}), lo, hi, threads),
                    first(v32))
              << target << " I32 n=" << n;
        }
        // The same elements as the rows of a padded [rows, 3] array: the flat index of the
        // offender.
        if (n % 3 == 0 && n > 0) {
          std::vector<int32_t> padded(static_cast<size_t>(n / 3 * 5), INT32_MIN);
          for (int64_t i = 0; i < n; ++i)
            padded[static_cast<size_t>(i / 3 * 5 + i % 3)] = v32[static_cast<size_t>(i)];
          EXPECT_EQ(detail::first_outside(TensorView(padded.data(), DType::I32, {n / 3, 3}, {5, 1}),
                                          lo, hi, 2),
                    first(v32))
              << target << " rows n=" << n;
        }
      }
  });
}

TEST(CheckScans, FirstNanCodeIsTheFirst0x7FOr0xFF) {
  std::mt19937_64 rng(3);
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths) {
      std::vector<uint8_t> c(static_cast<size_t>(n));
      for (uint8_t& v : c)
        v = static_cast<uint8_t>(rng() % 0x7F) | static_cast<uint8_t>(rng() % 2 << 7);
      if (n > 0 && rng() % 2) c[rng() % static_cast<uint64_t>(n)] = rng() % 2 ? 0x7F : 0xFF;
      int64_t want = n;
      for (int64_t i = n - 1; i >= 0; --i)
        if ((c[static_cast<size_t>(i)] & 0x7F) == 0x7F) want = i;
      for (int threads : kThreads)
        EXPECT_EQ(detail::first_nan_code(c.data(), n, threads), want) << target << " n=" << n;
    }
  });
}

TEST(CheckScans, FirstNonFiniteBf16IsTheFirstNanOrInf) {
  std::mt19937_64 rng(4);
  // bf16 NaN, +inf, -inf, and the largest finite values (exponent 0xFE) just below them
  const uint16_t bad[] = {0x7FC0, 0x7F80, 0xFF80, 0x7F81};
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<uint16_t> x(static_cast<size_t>(n));
        for (uint16_t& v : x) v = static_cast<uint16_t>(rng() % 2 ? 0x7F7F : rng() % 0x7F80);
        if (n > 0 && trial % 2) x[rng() % static_cast<uint64_t>(n)] = bad[rng() % 4];
        int64_t want = n;
        for (int64_t i = n - 1; i >= 0; --i) {
          uint32_t bits = uint32_t{x[static_cast<size_t>(i)]} << 16;
          float f;
          std::memcpy(&f, &bits, 4);
          if (!std::isfinite(f)) want = i;
        }
        for (int threads : kThreads)
          EXPECT_EQ(detail::first_non_finite_bf16(x.data(), n, threads), want)
              << target << " n=" << n;
      }
  });
}

TEST(CheckScans, FirstNonFiniteF16IsTheFirstNanOrInf) {
  std::mt19937_64 rng(5);
  // binary16 NaN, +inf, -inf, a NaN with the lowest payload; 0x7BFF (65504) is the largest finite
  const uint16_t bad[] = {0x7E00, 0x7C00, 0xFC00, 0x7C01};
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<uint16_t> x(static_cast<size_t>(n));
        for (uint16_t& v : x)
          v = static_cast<uint16_t>(rng() % 2 ? 0x7BFF | (rng() % 2) << 15 : rng() % 0x7C00);
        if (n > 0 && trial % 2) x[rng() % static_cast<uint64_t>(n)] = bad[rng() % 4];
        int64_t want = n;
        for (int64_t i = n - 1; i >= 0; --i)
          if ((x[static_cast<size_t>(i)] >> 10 & 31) == 31) want = i;  // exponent field 31
        for (int threads : kThreads)
          EXPECT_EQ(detail::first_non_finite_f16(x.data(), n, threads), want)
              << target << " n=" << n;
      }
  });
}

// Hand cases, then random bf16 values of both signs (one large magnitude, NaN or ±inf planted at
// any index) against the largest |x| of their fp32 widening: equal to it when every value is
// finite, at least the exponent mask 0x7F80 otherwise.
TEST(CheckScans, MaxMagnitude16IsTheLargestMagnitude) {
  const uint16_t hand[] = {0x3F80, 0xC040, 0x4000, 0x8000};  // bf16 1, -3, 2, -0
  EXPECT_EQ(detail::max_magnitude16(hand, 4), 0x4040);        // |-3|
  EXPECT_EQ(detail::max_magnitude16(hand + 3, 1), 0);         // |-0|
  EXPECT_EQ(detail::max_magnitude16(hand, 0), 0);
  std::mt19937_64 rng(6);
  const uint16_t planted[] = {0x7F7F, 0xFF7F, 0x7FC0, 0xFF80, 0x7F80, 0xFFFF};
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<uint16_t> x(static_cast<size_t>(n));
        for (uint16_t& v : x) v = static_cast<uint16_t>(rng() % 0x7000 | (rng() % 2) << 15);
        if (n > 0 && trial % 2) x[rng() % static_cast<uint64_t>(n)] = planted[rng() % 6];
        bool finite = true;
        float largest = 0.0f;
        for (uint16_t v : x) {
          const float f = std::fabs(bf16_to_f32(v));
          finite = finite && std::isfinite(f);
          if (std::isfinite(f)) largest = std::max(largest, f);
        }
        for (int threads : kThreads) {
          const uint16_t got = detail::max_magnitude16(x.data(), n, threads);
          if (finite) {
            EXPECT_EQ(bf16_to_f32(got), largest) << target << " n=" << n;
          } else {
            EXPECT_GE(got, 0x7F80) << target << " n=" << n;
          }
        }
      }
  });
}

TEST(CheckScans, PositionRunEndStopsAtTheFirstBreak) {
  std::mt19937_64 rng(4);
  testing::for_each_highway_target([&](const std::string& target) {
    for (int64_t T : kLengths) {
      if (T == 0) continue;
      std::vector<int64_t> pos(static_cast<size_t>(T));
      std::vector<int32_t> req(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) {
        pos[static_cast<size_t>(t)] = 1000 + t;
        req[static_cast<size_t>(t)] = 3;
      }
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) {  // breaks
        const size_t at = rng() % static_cast<uint64_t>(T);
        if (rng() % 2)
          pos[at] += 1 + static_cast<int64_t>(rng() % 3);
        else
          req[at] = 4;
      }
      const std::vector<int32_t> pos32(pos.begin(), pos.end());
      const std::vector<int64_t> req64(req.begin(), req.end());
      for (int64_t t : {int64_t{0}, T / 2, T - 1}) {
        int64_t want = t + 1;
        while (want < T &&
               pos[static_cast<size_t>(want)] == pos[static_cast<size_t>(t)] + (want - t) &&
               req[static_cast<size_t>(want)] == req[static_cast<size_t>(t)])
          ++want;
        EXPECT_EQ(detail::position_run_end(TensorView(pos.data(), DType::I64, {T}),
                                           TensorView(req.data(), DType::I32, {T}), t),
                  want)
            << target << " T=" << T << " t=" << t;
        EXPECT_EQ(detail::position_run_end(TensorView(pos32.data(), DType::I32, {T}),
                                           TensorView(req64.data(), DType::I64, {T}), t),
                  want)
            << target << " T=" << T << " t=" << t;
      }
    }
  });
}

// The repeated-slot search against a quadratic scan, for a range small enough for the bitmap and
// ranges far beyond it (the radix sort, whose last digit is whole or 5 bits wide); at the lowest
// thresholds every range takes the radix sort, a 10-bit range included (two digits, the second of
// 2 bits: slots 256 apart share their first digit). Every fourth trial lays the slots out as a
// prefill does, pages of 8 rows filled in order (runs of slots within one bitmap word), with now
// and then a slot of an earlier token.
void expect_first_repeated_slot(int64_t range, bool lowest, std::mt19937_64& rng) {
  for (int64_t n : {1, 2, 7, 100, 3000})
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int64_t> slots(static_cast<size_t>(n));
      std::vector<uint8_t> writes(static_cast<size_t>(n));
      const uint64_t span = static_cast<uint64_t>(trial % 2 ? range : 4 * n);
      const uint64_t pages = std::max<uint64_t>(1, static_cast<uint64_t>(range) / 8);
      uint64_t page = rng() % pages;
      for (int64_t t = 0; t < n; ++t) {
        if (trial % 4 == 3) {
          if (t % 8 == 0) page = rng() % pages;
          slots[static_cast<size_t>(t)] =
              rng() % 50 == 0 && t > 0
                  ? slots[static_cast<size_t>(rng() % static_cast<uint64_t>(t))]
                  : static_cast<int64_t>(std::min<uint64_t>(
                        page * 8 + static_cast<uint64_t>(t % 8), static_cast<uint64_t>(range) - 1));
        } else {
          slots[static_cast<size_t>(t)] =
              rng() % 5 == 0
                  ? -1
                  : static_cast<int64_t>(
                        rng() % std::min<uint64_t>(span, static_cast<uint64_t>(range)));
        }
        writes[static_cast<size_t>(t)] = rng() % 4 != 0;
      }
      for (const uint8_t* w :
           {static_cast<const uint8_t*>(nullptr), static_cast<const uint8_t*>(writes.data())}) {
        const auto writing = [&](int64_t t) {
          return slots[static_cast<size_t>(t)] >= 0 && (w == nullptr || w[t]);
        };
        int64_t token = -1, first = -1;
        for (int64_t t = 0; t < n && token < 0; ++t)
          for (int64_t u = 0; u < t && writing(t); ++u)
            if (writing(u) && slots[static_cast<size_t>(u)] == slots[static_cast<size_t>(t)]) {
              token = t;
              first = u;
              break;
            }
        std::optional<detail::ScopedThresholds> scope;
        if (lowest) scope.emplace(detail::lowest_thresholds());
        const detail::RepeatedSlot r =
            detail::first_repeated_slot(TensorView(slots.data(), DType::I64, {n}), n, range, w);
        EXPECT_EQ(r.token, token) << "range=" << range << " n=" << n << " lowest=" << lowest;
        EXPECT_EQ(r.first, first) << "range=" << range << " n=" << n << " lowest=" << lowest;
      }
    }
}

TEST(CheckScans, FirstRepeatedSlotIsTheEarliestSecondWriter) {
  std::mt19937_64 rng(5);
  for (const bool lowest : {false, true})
    for (int64_t range : {int64_t{700}, int64_t{1} << 40, (int64_t{1} << 36) + 12345})
      expect_first_repeated_slot(range, lowest, rng);
}

// The passing path of the block-table reference check against the element-by-element rule, on
// short requests (the prefix scan), long random rows (the gathers) and bad entries anywhere.
TEST(CheckScans, LocalRefsPassIsTheRule) {
  std::mt19937_64 rng(6);
  testing::for_each_highway_target([&](const std::string& target) {
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t R = 1 + rng() % 3, MB = 1 + rng() % 40, N = 1 + rng() % 9, K = 1 + rng() % 70;
      const int64_t P = int64_t{1} << (rng() % 4);
      std::vector<int32_t> bt(static_cast<size_t>(R * MB));
      for (int32_t& e : bt) e = static_cast<int32_t>(rng() % 1000);
      if (rng() % 2) bt[rng() % bt.size()] = -1 - static_cast<int32_t>(rng() % 3);
      std::vector<int32_t> req(static_cast<size_t>(N)), local(static_cast<size_t>(N * K));
      for (int32_t& r : req) r = static_cast<int32_t>(rng() % R);
      const int64_t reach = (MB + (rng() % 4 == 0 ? 2 : 0)) * P;  // sometimes beyond the table
      for (int32_t& l : local)
        l = rng() % 4 == 0 ? -1 - static_cast<int32_t>(rng() % 5)
                           : static_cast<int32_t>(rng() % reach);
      bool want = true;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          const int64_t l = local[static_cast<size_t>(n * K + k)], c = l / P;
          if (l >= 0 &&
              (c >= MB || bt[static_cast<size_t>(req[static_cast<size_t>(n)] * MB + c)] < 0))
            want = false;
        }
      const detail::BlockTableRefs refs("op", TensorView(bt.data(), DType::I32, {R, MB}), P);
      for (int threads : kThreads)
        EXPECT_EQ(detail::local_refs_pass(refs, TensorView(local.data(), DType::I32, {N, K}),
                                          TensorView(req.data(), DType::I32, {N}), threads),
                  want)
            << target << " trial " << trial;
    }
  });
}

}  // namespace
}  // namespace dsv4cpu
