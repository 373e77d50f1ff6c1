// Independent oracles for the indexer tests: a paged indexer K cache builder, the exact logits
// X and their bound B in binary64 (numerics.md §11.6), the band rule (§11.7), error checks.
#pragma once
#include <gtest/gtest.h>

// Small products: OpenMP threads in Eigen's GEMM only spin on a shared machine.
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::test {

// A paged indexer K cache (indexer.md §3) of `pages` pages of P entries, page stride `stride`
// bytes >= P·132. Every byte starts as 0x7F (a NaN code), so reading an entry that was never
// set shows up as NaN.
struct KCache {
  int64_t P, pages, stride;
  std::vector<uint8_t> bytes;
  KCache(int64_t P_, int64_t pages_, int64_t stride_)
      : P(P_),
        pages(pages_),
        stride(stride_),
        bytes(static_cast<size_t>(pages_ * stride_ + 1), 0x7F) {}
  void set(int64_t page, int64_t e, const uint8_t* codes, float scale) {
    std::memcpy(&bytes[static_cast<size_t>(page * stride + e * 128)], codes, 128);
    std::memcpy(&bytes[static_cast<size_t>(page * stride + P * 128 + 4 * e)], &scale, 4);
  }
  const uint8_t* codes(int64_t page, int64_t e) const {
    return &bytes[static_cast<size_t>(page * stride + e * 128)];
  }
  float scale(int64_t page, int64_t e) const {
    float s;
    std::memcpy(&s, &bytes[static_cast<size_t>(page * stride + P * 128 + 4 * e)], 4);
    return s;
  }
  TensorView view() const {
    return TensorView(bytes.data(), DType::U8, {pages, P * 132}, {stride, 1});
  }
};

inline bool is_nan_code(uint8_t c) { return (c & 0x7F) == 0x7F; }

// A random finite e4m3 code; about one in four is subnormal or zero (E = 0).
inline uint8_t random_code(std::mt19937_64& rng) {
  for (;;) {
    uint8_t c = static_cast<uint8_t>(rng() & 0xFF);
    if (rng() % 4 == 0) c &= 0x87;  // E = 0: ±m·2⁻⁹
    if (!is_nan_code(c)) return c;
  }
}

// Exact logits of one query row against keys given by their codes and scales, in binary64:
// every q·k product and every inner sum is exact there (multiples of 2⁻¹⁸ below 2²⁵).
struct ExactRow {
  std::vector<double> X, B;  // value and bound per key
  std::vector<bool> nan;     // key has a NaN code
};

inline ExactRow exact_logits(const uint8_t* q, const float* w, int64_t H,
                             const std::vector<const uint8_t*>& keys,
                             const std::vector<float>& scales) {
  const auto L = static_cast<Eigen::Index>(keys.size());
  Eigen::MatrixXd Q(H, 128), K(L, 128);
  ExactRow r;
  r.nan.assign(keys.size(), false);
  for (int64_t h = 0; h < H; ++h)
    for (int d = 0; d < 128; ++d) Q(h, d) = fp8_e4m3_decode(q[h * 128 + d]);
  for (Eigen::Index j = 0; j < L; ++j)
    for (int d = 0; d < 128; ++d) {
      const uint8_t c = keys[static_cast<size_t>(j)][d];
      if (is_nan_code(c)) r.nan[static_cast<size_t>(j)] = true;
      K(j, d) = is_nan_code(c) ? 0.0 : fp8_e4m3_decode(c);
    }
  const Eigen::MatrixXd dots = Q * K.transpose();
  const Eigen::MatrixXd abs_dots = Q.cwiseAbs() * K.cwiseAbs().transpose();
  const double u = std::ldexp(1.0, -24), n = static_cast<double>(128 + H);
  const double gamma = n * u / (1 - n * u);
  for (Eigen::Index j = 0; j < L; ++j) {
    double x = 0, b = 0;
    for (int64_t h = 0; h < H; ++h) {
      x += static_cast<double>(w[h]) * std::max(0.0, dots(h, j));
      b += std::fabs(static_cast<double>(w[h])) * abs_dots(h, j);
    }
    const double ks = scales[static_cast<size_t>(j)];
    r.X.push_back(ks * x);
    r.B.push_back(ks * gamma * b + (ks * static_cast<double>(H) + 1) * std::ldexp(1.0, -149));
  }
  return r;
}

// The keys 0 .. L−1 a row reads through page-table row `pt` (entry j % P of page pt[j / P]).
inline ExactRow exact_row_from_cache(const uint8_t* q, const float* w, int64_t H, const KCache& kv,
                                     const std::function<int64_t(int64_t)>& pt, int64_t L) {
  std::vector<const uint8_t*> keys;
  std::vector<float> scales;
  for (int64_t j = 0; j < L; ++j) {
    keys.push_back(kv.codes(pt(j / kv.P), j % kv.P));
    scales.push_back(kv.scale(pt(j / kv.P), j % kv.P));
  }
  return exact_logits(q, w, H, keys, scales);
}

// numerics.md §11.6: one computed logits row against the exact row (NaN where a key is NaN,
// −inf from L to the row's end).
inline ::testing::AssertionResult logits_within_bound(const float* row, int64_t S,
                                                      const ExactRow& ex) {
  const auto L = static_cast<int64_t>(ex.X.size());
  for (int64_t j = 0; j < S; ++j) {
    const double v = row[j];
    if (j >= L) {
      if (!(std::isinf(v) && v < 0))
        return ::testing::AssertionFailure() << "col " << j << " = " << v << ", want -inf";
      continue;
    }
    const auto i = static_cast<size_t>(j);
    if (ex.nan[i]) {
      if (!std::isnan(v)) return ::testing::AssertionFailure() << "col " << j << " not NaN";
      continue;
    }
    if (!(std::fabs(v - ex.X[i]) <= ex.B[i]))
      return ::testing::AssertionFailure()
             << "col " << j << " = " << v << ", exact " << ex.X[i] << ", bound " << ex.B[i];
  }
  return ::testing::AssertionSuccess();
}

// numerics.md §11.7: the band rule for a selection R of K indices from a row of L > K exact
// scores (NaN counts as −inf with bound 0); `ordered` adds the canonical order check.
inline ::testing::AssertionResult band_rule(const int32_t* R, int64_t K, const ExactRow& ex,
                                            bool ordered) {
  const auto L = static_cast<int64_t>(ex.X.size());
  const double inf = std::numeric_limits<double>::infinity();
  auto lo = [&](int64_t i) { return ex.nan[size_t(i)] ? -inf : ex.X[size_t(i)] - ex.B[size_t(i)]; };
  auto hi = [&](int64_t i) { return ex.nan[size_t(i)] ? -inf : ex.X[size_t(i)] + ex.B[size_t(i)]; };
  std::vector<bool> in(static_cast<size_t>(L), false);
  double min_in = inf;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t i = R[k];
    if (i < 0 || i >= L) return ::testing::AssertionFailure() << "entry " << k << " = " << i;
    if (in[size_t(i)]) return ::testing::AssertionFailure() << "duplicate " << i;
    in[size_t(i)] = true;
    min_in = std::min(min_in, hi(i));
    if (ordered && k > 0) {
      const int64_t p = R[k - 1];
      const bool both_nan = ex.nan[size_t(p)] && ex.nan[size_t(i)];
      if (both_nan ? p > i : !(hi(p) >= lo(i)))
        return ::testing::AssertionFailure() << "order: " << p << " before " << i;
    }
  }
  double max_out = -inf;
  for (int64_t j = 0; j < L; ++j)
    if (!in[size_t(j)]) max_out = std::max(max_out, lo(j));
  if (!(min_in >= max_out))
    return ::testing::AssertionFailure() << "band: min in " << min_in << " < max out " << max_out;
  return ::testing::AssertionSuccess();
}

// Runs `call`, which must throw exactly E with message `what`.
template <class E>
::testing::AssertionResult throws_exactly(const std::function<void()>& call,
                                          const std::string& what) {
  try {
    call();
  } catch (const Error& e) {
    if (typeid(e) != typeid(E))
      return ::testing::AssertionFailure() << "threw " << e.kind() << ": " << e.what();
    if (what != e.what())
      return ::testing::AssertionFailure() << "message\n  " << e.what() << "\nexpected\n  " << what;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace dsv4cpu::test
