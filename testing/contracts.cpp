#include "testing/contracts.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::testing {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string float_text(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[48];
  for (int p = 6; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llX", digits, static_cast<unsigned long long>(v));
  return buf;
}

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

bool fp8_is_nan(uint8_t c) { return (c & 0x7F) == 0x7F; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0; }

const std::array<double, 256>& fp8_table() {
  static const std::array<double, 256> table = [] {
    std::array<double, 256> t{};
    for (int c = 0; c < 256; ++c)
      t[static_cast<size_t>(c)] = fp8_e4m3_decode(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

namespace {

std::string mismatch_text(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                          int64_t first, int64_t count, const std::string& how) {
  return name + index_text(want.shape, first) + ": got " + element_text(got, first) +
         ", expected " + element_text(want, first) + (how.empty() ? "" : " " + how) + " (" +
         std::to_string(count) + " of " + std::to_string(want.numel()) + " elements differ)";
}

}  // namespace

double pow2(int e) { return std::ldexp(1.0, e); }

std::string layout_mismatch(const std::string& name, const ArrayRef& got, const ArrayRef& want) {
  if (got.dtype != want.dtype || got.shape != want.shape) {
    auto shape_text = [](const std::vector<int64_t>& s) {
      std::string t = "[";
      for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
      return t + "]";
    };
    return "expected." + name + " is " + dtype_name(want.dtype) + " " + shape_text(want.shape) +
           ", the op returns " + dtype_name(got.dtype) + " " + shape_text(got.shape);
  }
  return "";
}

int ord8(uint8_t c) noexcept { return c < 0x80 ? c : -(c & 0x7F) - 1; }
int ord16(uint16_t h) noexcept { return h < 0x8000 ? h : -(h & 0x7FFF) - 1; }

int fp8_steps(uint8_t a, uint8_t b) noexcept {
  if (a == b) return 0;
  if (fp8_is_nan(a) || fp8_is_nan(b)) return kNaNMismatch;
  return std::abs(ord8(a) - ord8(b));
}

int bf16_ulps(uint16_t a, uint16_t b) noexcept {
  const bool na = bf16_is_nan(a), nb = bf16_is_nan(b);
  if (na || nb) return na && nb ? 0 : kNaNMismatch;
  return std::abs(ord16(a) - ord16(b));
}

int64_t ArrayRef::numel() const noexcept {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

std::string index_text(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return "[]";
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  std::string t = "[";
  for (size_t d = 0; d < idx.size(); ++d) t += (d ? ", " : "") + std::to_string(idx[d]);
  return t + "]";
}

std::string element_text(const ArrayRef& a, int64_t i) {
  const uint8_t* p = a.data + i * static_cast<int64_t>(dtype_size(a.dtype));
  switch (a.dtype) {
    case DType::F32: {
      uint32_t bits;
      std::memcpy(&bits, p, 4);
      return float_text(load_f32(p)) + " (" + hex(bits, 8) + ")";
    }
    case DType::BF16: {
      const uint16_t h = load_u16(p);
      return float_text(bf16_to_f32(h)) + " (" + hex(h, 4) + ")";
    }
    case DType::F16: {
      const uint16_t h = load_u16(p);
      return float_text(f16_to_f32(h)) + " (" + hex(h, 4) + ")";
    }
    case DType::F8_E4M3:
      return hex(*p, 2) + " (" + float_text(fp8_e4m3_decode(*p)) + ")";
    case DType::U8:
      return hex(*p, 2);
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return std::to_string(v);
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return std::to_string(v);
    }
  }
  return "?";
}

Verdict compare_exact(const std::string& name, const ArrayRef& got, const ArrayRef& want) {
  if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
  const int64_t n = want.numel();
  const size_t es = dtype_size(want.dtype);
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* a = got.data + static_cast<size_t>(i) * es;
    const uint8_t* b = want.data + static_cast<size_t>(i) * es;
    if (std::memcmp(a, b, es) == 0) continue;
    if (want.dtype == DType::F32 && std::isnan(load_f32(a)) && std::isnan(load_f32(b))) continue;
    if (want.dtype == DType::BF16 && bf16_is_nan(load_u16(a)) && bf16_is_nan(load_u16(b))) continue;
    if (want.dtype == DType::F16 && std::isnan(f16_to_f32(load_u16(a))) &&
        std::isnan(f16_to_f32(load_u16(b))))
      continue;
    if (first < 0) first = i;
    ++count;
  }
  if (count == 0) return {true, "exact"};
  return {false, mismatch_text(name, got, want, first, count, "")};
}

Verdict compare_fp8_codes(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                          const Tolerance& tol) {
  if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
  if (want.dtype != DType::F8_E4M3 && want.dtype != DType::U8)
    return {false, "expected." + name + " is not fp8 codes"};
  int worst = 0;
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int d = fp8_steps(got.data[i], want.data[i]);
    if (d > tol.fp8_step) {
      if (first < 0) first = i;
      ++count;
    }
    worst = std::max(worst, d);
  }
  if (count > 0) {
    const int d = fp8_steps(got.data[first], want.data[first]);
    return {false, mismatch_text(name, got, want, first, count,
                                 d == kNaNMismatch ? "(NaN against a number)"
                                                   : std::to_string(d) + " fp8 steps apart")};
  }
  return {true, worst == 0 ? "exact" : "worst fp8 step " + std::to_string(worst)};
}

Verdict compare_bf16(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                     const Tolerance& tol) {
  if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
  if (want.dtype != DType::BF16) return {false, "expected." + name + " is not BF16"};
  int worst = 0;
  int64_t first = -1, count = 0, inexact = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int d = bf16_ulps(load_u16(got.data + 2 * i), load_u16(want.data + 2 * i));
    if (d > tol.bf16_ulp) {
      if (first < 0) first = i;
      ++count;
    }
    worst = std::max(worst, d);
    inexact += d > 0;
  }
  if (count > 0) {
    const int d = bf16_ulps(load_u16(got.data + 2 * first), load_u16(want.data + 2 * first));
    return {false, mismatch_text(name, got, want, first, count,
                                 d == kNaNMismatch ? "(NaN against a number)"
                                                   : std::to_string(d) + " bf16 ulps apart")};
  }
  if (worst == 0) return {true, "exact"};
  return {true, "worst bf16 ulp " + std::to_string(worst) + " (" + std::to_string(inexact) +
                    " of " + std::to_string(want.numel()) + " elements not exact)"};
}

Verdict compare_f32_rel(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                        const Tolerance& tol) {
  if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
  if (want.dtype != DType::F32) return {false, "expected." + name + " is not F32"};
  double worst = 0;
  bool identical = true;
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = load_f32(got.data + 4 * i), b = load_f32(want.data + 4 * i);
    bool ok;
    if (std::isnan(a) || std::isnan(b)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (std::isinf(a) || std::isinf(b)) {
      ok = a == b;
    } else {
      const double diff = std::fabs(a - b);
      ok = diff <= tol.atol + tol.rtol * std::fabs(b);
      if (diff > 0) identical = false;
      if (b != 0)
        worst = std::max(worst, diff / std::fabs(b));
      else if (diff > 0)
        worst = std::numeric_limits<double>::infinity();
    }
    if (!ok) {
      if (first < 0) first = i;
      ++count;
    }
  }
  if (count > 0) return {false, mismatch_text(name, got, want, first, count, "beyond rtol/atol")};
  return {true, identical ? "exact" : "max rel " + fmt("%.2g", worst)};
}

bool quant_block_ok(const uint8_t* a, const uint8_t* b, int n, double sa, double sb,
                    const Tolerance& tol, int* steps, double* coarse, std::string* why) {
  const bool same = sa == sb || (std::isnan(sa) && std::isnan(sb));
  if (same) {  // rule 1
    for (int k = 0; k < n; ++k) {
      const int d = fp8_steps(a[k], b[k]);
      if (d > tol.fp8_step) {
        *why = "code " + std::to_string(k) + " is " +
               (d == kNaNMismatch ? std::string("NaN against a number")
                                  : std::to_string(d) + " fp8 steps from expected") +
               " (got " + hex(a[k], 2) + ", expected " + hex(b[k], 2) + ")";
        return false;
      }
      *steps = std::max(*steps, d);
    }
    return true;
  }
  const auto scales_text = [&] {
    return "scales " + fmt("%.9g", sa) + " (got) and " + fmt("%.9g", sb) + " (expected)";
  };
  if (!(sa > 0 && sb > 0 && std::isfinite(sa) && std::isfinite(sb))) {
    *why = scales_text() + " differ";
    return false;
  }
  int ea, eb;
  const double ma = std::frexp(sa, &ea), mb = std::frexp(sb, &eb);
  if (ma != 0.5 || mb != 0.5 || std::abs(ea - eb) > tol.scale_step) {
    *why = scales_text() + " are not within " + std::to_string(tol.scale_step) +
           " power-of-two step(s) of each other";
    return false;
  }
  // Rule 2: dequantise; one step of the coarser grid at the larger magnitude.
  const auto& dec = fp8_table();
  const double S = std::max(sa, sb);
  for (int k = 0; k < n; ++k) {
    if (fp8_is_nan(a[k]) || fp8_is_nan(b[k])) {  // §11.2: a NaN code matches only itself
      if (a[k] == b[k]) continue;
      *why = "code " + std::to_string(k) + ": " + hex(a[k], 2) + " against " + hex(b[k], 2) +
             " (a NaN code matches only the identical byte)";
      return false;
    }
    const double va = dec[a[k]] * sa, vb = dec[b[k]] * sb;
    const double vs = std::max(std::fabs(va), std::fabs(vb));
    double step = S * pow2(-9);
    if (vs > 0) {
      int e;
      std::frexp(vs / S, &e);  // vs / S in [2^(e-1), 2^e)
      step = S * pow2(std::max(e - 1, -6) - 3);
    }
    const double diff = std::fabs(va - vb);
    if (diff > step) {
      *why = "value " + std::to_string(k) + " = " + fmt("%.9g", va) + " vs expected " +
             fmt("%.9g", vb) + " with " + scales_text() + ": " + fmt("%.3g", diff / step) +
             " coarse steps apart";
      return false;
    }
    *coarse = std::max(*coarse, diff / step);
  }
  return true;
}

}  // namespace dsv4cpu::testing
