#include "testing/attention.hpp"

// Small products: OpenMP threads in Eigen's GEMM only spin on a shared machine.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::testing {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double gamma_n(double n) {
  const double u = pow2(-24);
  return n * u / (1 - n * u);
}

// q[t, :H, :] widened, [H, 512].
RowMatrix query_rows(const AttentionInputs& in, int64_t t) {
  const int64_t H = in.q.size(1);
  RowMatrix Q(H, 512);
  const uint16_t* q = in.q.ptr<const uint16_t>() + t * in.q.stride(0);
  for (int64_t h = 0; h < H; ++h)
    for (int d = 0; d < 512; ++d) Q(h, d) = bf16_to_f32(q[h * 512 + d]);
  return Q;
}

Eigen::Map<const RowMatrix> key_rows(const TokenRows& r) {
  return {r.rows.data(), static_cast<Eigen::Index>(r.size()), 512};
}

bool bf16_row_has_nan(const uint16_t* row) {
  for (int d = 0; d < 512; ++d)
    if (bf16_is_nan(row[d])) return true;
  return false;
}

}  // namespace

void decode_entry_f64(const TensorView& cache, int64_t P, int64_t slot, NopeDecode mode,
                      double* out) {
  const uint8_t* page = cache.ptr<const uint8_t>() + (slot / P) * cache.stride(0);
  const uint8_t* data = page + (slot % P) * 576;
  const uint8_t* scales = page + P * 576 + (slot % P) * 8;
  const auto& dec = fp8_table();
  for (int d = 0; d < 448; ++d) {
    const uint8_t c = data[d], b = scales[d / 64];
    double v = dec[c];
    if (mode == NopeDecode::vllm && (c & 0x78) == 0)  // E = 0: ±2^-7·(1 + m/8)
      v = ((c & 0x80) ? -1.0 : 1.0) * std::ldexp(1.0 + (c & 7) / 8.0, -7);
    v = b == 255 ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(v, b == 0 ? -127 : b - 127);
    if (std::fabs(v) > std::numeric_limits<float>::max()) v = v > 0 ? HUGE_VAL : -HUGE_VAL;
    if (mode == NopeDecode::vllm) v = b == 0 ? 0.0 : round_bf16(static_cast<float>(v));
    out[d] = v;
  }
  for (int k = 0; k < 64; ++k) out[448 + k] = bf16_to_f32(load_u16(data + 448 + 2 * k));
}

TokenRows token_rows(const AttentionInputs& in, int64_t t) {
  TokenRows r;
  for (int set = 0; set < 2; ++set) {
    const TensorView& slots = set == 0 ? in.window_slots : in.compressed_slots;
    const TensorView& cache = set == 0 ? in.window_cache : in.compressed_cache;
    const int64_t P = set == 0 ? in.window_block_size : in.compressed_block_size;
    for (int64_t c = 0; c < slots.size(1); ++c) {
      const int64_t s = slots.index_at({t, c});
      if (s < 0) continue;
      r.rows.resize(r.rows.size() + 512);
      decode_entry_f64(cache, P, s, in.nope_decode, r.rows.data() + r.rows.size() - 512);
    }
  }
  return r;
}

double AttentionBound::out_bound(int64_t t, int64_t h, double ref) const {
  return std::ldexp(std::fabs(ref), -7) +
         (std::ldexp(1.0, -7) + 8 * delta[size_t(t * H + h)] +
          2 * gamma_n(static_cast<double>(n + 1))) *
             M[size_t(t)];
}

double AttentionBound::lse_bound(int64_t t, int64_t h, double ref) const {
  return std::ldexp(std::fabs(ref), -20) + 2 * delta[size_t(t * H + h)] +
         2 * gamma_n(static_cast<double>(n + 1));
}

AttentionBound attention_bound(const AttentionInputs& in) {
  AttentionBound b;
  b.T = in.q.size(0);
  b.H = in.q.size(1);
  b.n = in.window_slots.size(1) + in.compressed_slots.size(1);
  b.M.assign(size_t(b.T), 0.0);
  b.delta.assign(size_t(b.T * b.H), 0.0);
  b.empty.assign(size_t(b.T), false);
  for (int64_t t = 0; t < b.T; ++t) {
    const TokenRows r = token_rows(in, t);
    b.empty[size_t(t)] = r.size() == 0;
    if (r.size() == 0) continue;
    for (double v : r.rows) b.M[size_t(t)] = std::max(b.M[size_t(t)], std::fabs(v));
    const RowMatrix Q = query_rows(in, t);
    const auto K = key_rows(r);
    const RowMatrix abs_dots = Q.cwiseAbs() * K.cwiseAbs().transpose();
    const RowMatrix dots = Q * K.transpose();
    for (int64_t h = 0; h < b.H; ++h) {
      double max_abs = 0, max_s = 0;  // NaN rows (NaN or inf values) compare exactly anyway
      for (Eigen::Index j = 0; j < dots.cols(); ++j) {
        max_abs = std::max(max_abs, abs_dots(h, j));
        max_s = std::max(max_s, std::fabs(dots(h, j) * in.scale));
      }
      b.delta[size_t(t * b.H + h)] = gamma_n(512) * in.scale * max_abs + std::ldexp(max_s, -22);
    }
  }
  return b;
}

std::string attention_out_violation(const AttentionBound& b, const uint16_t* got,
                                    const uint16_t* ref, double* worst) {
  double w = 0;
  for (int64_t t = 0; t < b.T; ++t)
    for (int64_t h = 0; h < b.H; ++h) {
      const uint16_t* g = got + (t * b.H + h) * 512;
      const uint16_t* r = ref + (t * b.H + h) * 512;
      const std::string at = "out[" + std::to_string(t) + ", " + std::to_string(h) + "]";
      if (b.empty[size_t(t)] || bf16_row_has_nan(g) || bf16_row_has_nan(r)) {
        if (!std::equal(g, g + 512, r))
          return at + ": " + (b.empty[size_t(t)] ? "the zero row" : "a NaN row") + " differs";
        continue;
      }
      for (int d = 0; d < 512; ++d) {
        const double o = bf16_to_f32(g[d]), o_ref = bf16_to_f32(r[d]);
        const double bound = b.out_bound(t, h, o_ref);
        if (!(std::fabs(o - o_ref) <= bound))
          return at + "[" + std::to_string(d) + "] = " + fmt("%.9g", o) + ", reference " +
                 fmt("%.9g", o_ref) + ": beyond the bound " + fmt("%.3g", bound);
        if (bound > 0) w = std::max(w, std::fabs(o - o_ref) / bound);
      }
    }
  if (worst) *worst = w;
  return "";
}

std::string attention_lse_violation(const AttentionBound& b, const float* got, const float* ref,
                                    double* worst) {
  double w = 0;
  for (int64_t i = 0; i < b.T * b.H; ++i) {
    const double g = got[i], r = ref[i];
    const std::string at = "lse[" + std::to_string(i / b.H) + ", " + std::to_string(i % b.H) + "]";
    if (b.empty[size_t(i / b.H)] || !std::isfinite(g) || !std::isfinite(r)) {
      if (!(g == r || (std::isnan(g) && std::isnan(r))))
        return at + " = " + float_text(got[i]) + ", reference " + float_text(ref[i]);
      continue;
    }
    const double bound = b.lse_bound(i / b.H, i % b.H, r);
    if (!(std::fabs(g - r) <= bound))
      return at + " = " + float_text(got[i]) + ", reference " + float_text(ref[i]) +
             ": beyond the bound " + fmt("%.3g", bound);
    if (bound > 0) w = std::max(w, std::fabs(g - r) / bound);
  }
  if (worst) *worst = w;
  return "";
}

Verdict compare_attention(const AttentionBound& b, const std::string& name, const ArrayRef& got,
                          const ArrayRef& want) {
  double worst = 0;
  const std::string v =
      want.dtype == DType::BF16
          ? attention_out_violation(b, reinterpret_cast<const uint16_t*>(got.data),
                                    reinterpret_cast<const uint16_t*>(want.data), &worst)
          : attention_lse_violation(b, reinterpret_cast<const float*>(got.data),
                                    reinterpret_cast<const float*>(want.data), &worst);
  if (!v.empty()) return {false, name + ": " + v};
  const size_t bytes = static_cast<size_t>(want.numel()) * dtype_size(want.dtype);
  if (bytes == 0 || std::memcmp(got.data, want.data, bytes) == 0) return {true, "exact"};
  return {true, fmt("max |Δ|/bound %.4f", worst)};
}

ExactAttention exact_attention(const AttentionInputs& in) {
  const int64_t T = in.q.size(0), H = in.q.size(1);
  ExactAttention x;
  x.out.assign(size_t(T * H * 512), 0);
  x.lse.assign(size_t(T * H), std::numeric_limits<float>::infinity());
  const float* sink = in.attn_sink.present() ? in.attn_sink.ptr<const float>() : nullptr;
  for (int64_t t = 0; t < T; ++t) {
    const TokenRows r = token_rows(in, t);
    if (r.size() == 0) continue;
    const RowMatrix Q = query_rows(in, t);
    const auto K = key_rows(r);
    const RowMatrix S = (Q * K.transpose()) * static_cast<double>(in.scale);
    for (int64_t h = 0; h < H; ++h) {
      uint16_t* orow = x.out.data() + (t * H + h) * 512;
      float& lse = x.lse[size_t(t * H + h)];
      bool finite = true;  // every score finite in fp32 terms
      for (Eigen::Index j = 0; j < S.cols(); ++j)
        finite = finite && std::fabs(S(h, j)) <= std::numeric_limits<float>::max();
      if (!finite) {
        std::fill(orow, orow + 512, uint16_t{0x7FC0});
        lse = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const double m = S.row(h).maxCoeff();
      const Eigen::RowVectorXd p = (S.row(h).array() - m).exp().matrix();
      const double l = p.sum();
      const double den = l + (sink ? std::exp(static_cast<double>(sink[h]) - m) : 0.0);
      const Eigen::RowVectorXd o = p * K / den;
      for (int d = 0; d < 512; ++d) orow[d] = to_bf16(static_cast<float>(o(d)));
      lse = static_cast<float>(m + std::log(l));
    }
  }
  return x;
}

}  // namespace dsv4cpu::testing
