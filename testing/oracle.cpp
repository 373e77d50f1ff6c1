#include "testing/oracle.hpp"

// Small products: OpenMP threads in Eigen's GEMM only spin on a shared machine.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::testing {

ExactLogits exact_logits(const uint8_t* q, const float* w, int64_t H,
                         const std::vector<const uint8_t*>& keys,
                         const std::vector<float>& scales) {
  const auto L = static_cast<Eigen::Index>(keys.size());
  const auto& dec = fp8_table();
  Eigen::MatrixXd Q(H, 128), K(L, 128);
  ExactLogits r;
  r.heads = H;
  r.nan.assign(keys.size(), false);
  for (int64_t h = 0; h < H; ++h)
    for (int d = 0; d < 128; ++d) Q(h, d) = dec[q[h * 128 + d]];
  for (Eigen::Index j = 0; j < L; ++j)
    for (int d = 0; d < 128; ++d) {
      const uint8_t c = keys[static_cast<size_t>(j)][d];
      if (fp8_is_nan(c)) r.nan[static_cast<size_t>(j)] = H > 0;  // indexer.md §4.2: H = 0 gives +0
      K(j, d) = fp8_is_nan(c) ? 0.0 : dec[c];
    }
  const Eigen::MatrixXd dots = Q * K.transpose();
  const Eigen::MatrixXd abs_dots = Q.cwiseAbs() * K.cwiseAbs().transpose();
  const double u = pow2(-24), n = static_cast<double>(128 + H);
  const double gamma = n * u / (1 - n * u);
  for (Eigen::Index j = 0; j < L; ++j) {
    double x = 0, b = 0;
    for (int64_t h = 0; h < H; ++h) {
      x += static_cast<double>(w[h]) * std::max(0.0, dots(h, j));
      b += std::fabs(static_cast<double>(w[h])) * abs_dots(h, j);
    }
    const double ks = scales[static_cast<size_t>(j)];
    r.X.push_back(ks * x);
    r.B.push_back(ks * gamma * b + (ks * static_cast<double>(H) + 1) * pow2(-149));
  }
  return r;
}

ExactLogits exact_logits(const uint8_t* q, const float* w, int64_t H, const TensorView& kv_cache,
                         int64_t P, const std::vector<int64_t>& pages, int64_t L) {
  std::vector<const uint8_t*> keys;
  std::vector<float> scales;
  const auto* base = kv_cache.ptr<const uint8_t>();
  for (int64_t j = 0; j < L; ++j) {
    const auto col = static_cast<size_t>(j / P);
    if (col >= pages.size() || pages[col] < 0 || pages[col] >= kv_cache.size(0))
      throw std::out_of_range("key " + std::to_string(j) + " outside the paged cache");
    const uint8_t* page = base + pages[col] * kv_cache.stride(0);
    keys.push_back(page + (j % P) * 128);
    scales.push_back(load_f32(page + P * 128 + 4 * (j % P)));
  }
  return exact_logits(q, w, H, keys, scales);
}

std::string logits_violation(const float* row, int64_t S, const ExactLogits& ex) {
  const int64_t L = ex.size();
  for (int64_t j = 0; j < S; ++j) {
    const double v = row[j];
    const std::string col = "col " + std::to_string(j) + " = " + float_text(row[j]);
    if (j >= L) {
      if (!(std::isinf(v) && v < 0)) return col + ", want -inf past the row length";
      continue;
    }
    const auto i = static_cast<size_t>(j);
    if (ex.nan[i]) {
      if (!std::isnan(v)) return col + ", want NaN (a NaN key)";
      continue;
    }
    if (ex.heads == 0 && !(v == 0 && !std::signbit(v)))
      return col + ", want +0 (H = 0: an empty head sum)";
    if (!(std::fabs(v - ex.X[i]) <= ex.B[i]))
      return col + ", exact " + fmt("%.9g", ex.X[i]) + ", bound " + fmt("%.3g", ex.B[i]);
  }
  return "";
}

std::string band_rule_violation(const int32_t* sel, int64_t K, const ExactLogits& ex, double factor,
                                bool canonical) {
  const int64_t L = ex.size();
  const double ninf = -std::numeric_limits<double>::infinity();
  const auto upper = [&](int64_t i) {
    return ex.nan[size_t(i)] ? ninf : ex.X[size_t(i)] + factor * ex.B[size_t(i)];
  };
  const auto lower = [&](int64_t i) {
    return ex.nan[size_t(i)] ? ninf : ex.X[size_t(i)] - factor * ex.B[size_t(i)];
  };
  std::vector<char> chosen(static_cast<size_t>(L), 0);
  int64_t weakest = -1;  // the selected key with the least upper value
  for (int64_t k = 0; k < K; ++k) {
    const int64_t v = sel[k];
    if (v < 0 || v >= L)
      return "entry " + std::to_string(k) + " = " + std::to_string(v) + " outside [0, " +
             std::to_string(L) + ")";
    if (chosen[static_cast<size_t>(v)])
      return "entry " + std::to_string(k) + " = " + std::to_string(v) + " selected twice";
    chosen[static_cast<size_t>(v)] = 1;
    if (weakest < 0 || upper(v) < upper(weakest) || (upper(v) == upper(weakest) && v > weakest))
      weakest = v;
  }
  // vllm mode: a row with a NaN score is checked for distinct in-range entries only.
  if (!canonical && std::find(ex.nan.begin(), ex.nan.end(), true) != ex.nan.end()) return "";
  int64_t strongest = -1;  // the unselected key with the greatest lower value (least index)
  for (int64_t j = 0; j < L; ++j)
    if (!chosen[static_cast<size_t>(j)] && (strongest < 0 || lower(j) > lower(strongest)))
      strongest = j;
  // NaN keys tie by index: a selected NaN key ranks below every unselected one of lower index.
  const bool ranked = weakest >= 0 && strongest >= 0;
  const bool nan_out_of_order =
      ranked && ex.nan[size_t(weakest)] && ex.nan[size_t(strongest)] && strongest < weakest;
  if (ranked && (upper(weakest) < lower(strongest) || nan_out_of_order))
    return "selected " + std::to_string(weakest) + " (X+B = " + fmt("%.9g", upper(weakest)) +
           ") ranks below unselected " + std::to_string(strongest) +
           " (X-B = " + fmt("%.9g", lower(strongest)) + ")";
  if (canonical)
    for (int64_t k = 0; k + 1 < K; ++k) {
      const int64_t a = sel[k], b = sel[k + 1];
      const bool ok = ex.nan[size_t(a)] && ex.nan[size_t(b)] ? a < b : upper(a) >= lower(b);
      if (!ok)
        return "canonical order: " + std::to_string(a) + " (entry " + std::to_string(k) +
               ") before " + std::to_string(b);
    }
  return "";
}

Verdict compare_logits(const std::vector<ExactLogits>& rows, const float* got, const float* want,
                       int64_t S, double factor) {
  const std::string bound = (factor == 2 ? std::string("2") : fmt("%g", factor)) + "B";
  double worst = 0;
  bool identical = true;
  for (size_t r = 0; r < rows.size(); ++r) {
    const ExactLogits& row = rows[r];
    const int64_t L = row.size();
    for (int64_t j = 0; j < S; ++j) {
      const float a = got[static_cast<int64_t>(r) * S + j];
      const float b = want[static_cast<int64_t>(r) * S + j];
      const std::string at = "logits[" + std::to_string(r) + ", " + std::to_string(j) + "]";
      const auto values = [&] { return ": got " + float_text(a) + ", expected " + float_text(b); };
      if (j >= L) {
        if (!(std::isinf(b) && b < 0))
          return {false, "expected." + at + " = " + float_text(b) + ": not -inf at or past the " +
                             "row length " + std::to_string(L)};
        if (!(std::isinf(a) && a < 0))
          return {false, at + values() + " (past the row length " + std::to_string(L) + ")"};
        continue;
      }
      // NaN exactly at the NaN keys, in both (§11.6).
      if (row.nan[static_cast<size_t>(j)] || std::isnan(a) || std::isnan(b)) {
        if (!(std::isnan(a) && std::isnan(b) && row.nan[static_cast<size_t>(j)]))
          return {false, at + values() + (row.nan[static_cast<size_t>(j)]
                                              ? " (a NaN key: NaN in both)"
                                              : " (no NaN key: a number in both)")};
        continue;
      }
      if (std::isinf(a) || std::isinf(b)) {
        if (a != b) return {false, at + values()};
        continue;
      }
      const double X = row.X[static_cast<size_t>(j)], B = row.B[static_cast<size_t>(j)];
      const double diff = std::fabs(static_cast<double>(a) - static_cast<double>(b));
      if (diff > 0) identical = false;
      const double ratio = diff / (factor * B);
      if (ratio > 1) {
        const double ea = std::fabs(a - X) / B, eb = std::fabs(b - X) / B;
        return {false, at + values() + ", |Δ| = " + fmt("%.3g", diff) + " > " + bound + " = " +
                           fmt("%.3g", factor * B) + "; exact " + fmt("%.9g", X) +
                           ", library off by " + fmt("%.3g", ea) + "B, fixture off by " +
                           fmt("%.3g", eb) + "B"};
      }
      worst = std::max(worst, ratio);
    }
  }
  if (identical) return {true, "max |Δ| 0 (exact)"};
  return {true, "max |Δ|/" + bound + " " + fmt("%.2g", worst)};
}

}  // namespace dsv4cpu::testing
