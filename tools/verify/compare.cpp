#include "tools/verify/compare.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::verify {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Shortest text that reads back as the same float.
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

// Decoded e4m3fn codes in binary64 (exact).
const std::array<double, 256>& fp8_table() {
  static const std::array<double, 256> table = [] {
    std::array<double, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = fp8_e4m3_decode(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

std::string mismatch_text(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                          int64_t first, int64_t count, const std::string& how) {
  return name + index_text(want.shape, first) + ": got " + element_text(got, first) +
         ", expected " + element_text(want, first) + (how.empty() ? "" : " " + how) + " (" +
         std::to_string(count) + " of " + std::to_string(want.numel()) + " elements differ)";
}

double pow2(int e) { return std::ldexp(1.0, e); }

}  // namespace

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

Tolerance parse_compare(const std::string& text) {
  Tolerance t;
  if (trim(text) == "exact") {
    t.exact = true;
    return t;
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) {
      if (comma == text.size()) break;
      throw std::invalid_argument("empty item");
    }
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("'" + item + "' is not key=value");
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
      throw std::invalid_argument(key + " = '" + value + "' is not a non-negative number");
    const bool integral = v == std::floor(v) && v <= 1e6;
    if (key == "fp8_step" || key == "bf16_ulp" || key == "scale_step") {
      if (!integral) throw std::invalid_argument(key + " = '" + value + "' is not an integer");
      (key == "fp8_step" ? t.fp8_step : key == "bf16_ulp" ? t.bf16_ulp : t.scale_step) =
          static_cast<int>(v);
    } else if (key == "rtol") {
      t.rtol = v;
    } else if (key == "atol") {
      t.atol = v;
    } else if (key == "bound_factor") {
      t.bound_factor = v;
    } else {
      throw std::invalid_argument("unknown key '" + key + "'");
    }
  }
  return t;
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
    case DType::F8_E4M3: return hex(*p, 2) + " (" + float_text(fp8_e4m3_decode(*p)) + ")";
    case DType::U8: return hex(*p, 2);
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
    if (want.dtype == DType::BF16 && bf16_is_nan(load_u16(a)) && bf16_is_nan(load_u16(b)))
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
      if (b != 0) worst = std::max(worst, diff / std::fabs(b));
      else if (diff > 0) worst = std::numeric_limits<double>::infinity();
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
    if (fp8_is_nan(a[k]) || fp8_is_nan(b[k])) {
      if (fp8_is_nan(a[k]) && fp8_is_nan(b[k])) continue;
      *why = "code " + std::to_string(k) + ": NaN against a number";
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

Verdict compare_compressed_cache(const std::string& name, const ArrayRef& got,
                                 const ArrayRef& want, EntryLayout layout, int64_t P,
                                 const std::vector<int64_t>& slots, const Tolerance& tol) {
  if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
  if (want.dtype != DType::U8 || want.shape.size() != 2)
    return {false, "expected." + name + " is not U8 [pages, page_bytes]"};
  const bool mla = layout == EntryLayout::fp8_ds_mla;
  const int64_t data_bytes = mla ? 576 : 128, scale_bytes = mla ? 8 : 4;
  const int64_t pages = want.shape[0], stride = want.shape[1];
  if (P < 1 || P > stride / (data_bytes + scale_bytes))
    return {false, name + ": pages of " + std::to_string(stride) + " bytes cannot hold " +
                       std::to_string(P) + " entries"};
  const int64_t total = pages * stride;
  std::vector<uint8_t> in_entry(static_cast<size_t>(total), 0);
  const std::set<int64_t> written(slots.begin(), slots.end());
  for (int64_t slot : written) {
    if (slot < 0 || slot >= pages * P)
      return {false, name + ": slot " + std::to_string(slot) + " beyond the cache"};
    const int64_t base = (slot / P) * stride, j = slot % P;
    std::fill_n(in_entry.begin() + base + j * data_bytes, data_bytes, 1);
    std::fill_n(in_entry.begin() + base + P * data_bytes + j * scale_bytes, scale_bytes, 1);
  }
  // Bytes the op must not write, and the bytes of the written entries that are exact.
  int64_t first = -1, count = 0;
  bool identical = true;
  for (int64_t i = 0; i < total; ++i) {
    if (got.data[i] == want.data[i]) continue;
    identical = false;
    if (in_entry[static_cast<size_t>(i)]) continue;
    if (first < 0) first = i;
    ++count;
  }
  if (count > 0)
    return {false, name + "[" + std::to_string(first / stride) + ", " +
                       std::to_string(first % stride) + "] outside the written entries: got " +
                       hex(got.data[first], 2) + ", expected " + hex(want.data[first], 2) + " (" +
                       std::to_string(count) + " such bytes differ)"};
  if (identical) return {true, "exact"};
  int steps = 0, ulps = 0, rescaled = 0;
  double coarse = 0;
  for (int64_t slot : written) {
    const int64_t base = (slot / P) * stride, j = slot % P;
    const std::string where = name + " slot " + std::to_string(slot) + " (page " +
                              std::to_string(slot / P) + ", entry " + std::to_string(j) + ")";
    const uint8_t* ga = got.data + base;
    const uint8_t* wa = want.data + base;
    std::string why;
    if (mla) {
      const int64_t sc = P * 576 + 8 * j;
      for (int q = 0; q < 7; ++q) {
        const uint8_t ba = ga[sc + q], bb = wa[sc + q];
        const double sa = ba == 255 ? std::nan("") : pow2(ba - 127);
        const double sb = bb == 255 ? std::nan("") : pow2(bb - 127);
        if (ba != bb) ++rescaled;
        if (!quant_block_ok(ga + j * 576 + 64 * q, wa + j * 576 + 64 * q, 64, sa, sb, tol, &steps,
                            &coarse, &why))
          return {false, where + " NoPE tile " + std::to_string(q) + ": " + why};
      }
      for (int k = 0; k < 64; ++k) {
        const int64_t off = j * 576 + 448 + 2 * k;
        const uint16_t ha = load_u16(ga + off), hb = load_u16(wa + off);
        const int d = bf16_ulps(ha, hb);
        if (d > tol.bf16_ulp)
          return {false, where + " RoPE value " + std::to_string(k) + ": got " + hex(ha, 4) +
                             ", expected " + hex(hb, 4) +
                             (d == kNaNMismatch ? std::string(" (NaN against a number)")
                                                : " (" + std::to_string(d) + " bf16 ulps)")};
        ulps = std::max(ulps, d);
      }
      if (ga[sc + 7] != wa[sc + 7])
        return {false, where + " pad byte: got " + hex(ga[sc + 7], 2) + ", expected " +
                           hex(wa[sc + 7], 2)};
    } else {
      const int64_t sc = P * 128 + 4 * j;
      const double sa = load_f32(ga + sc), sb = load_f32(wa + sc);
      if (std::memcmp(ga + sc, wa + sc, 4) != 0) ++rescaled;
      if (!quant_block_ok(ga + j * 128, wa + j * 128, 128, sa, sb, tol, &steps, &coarse, &why))
        return {false, where + ": " + why};
    }
  }
  std::string detail = "worst fp8 step " + std::to_string(steps);
  if (mla) detail += ", bf16 ulp " + std::to_string(ulps);
  if (rescaled > 0)
    detail += ", " + std::to_string(rescaled) + " block(s) one scale step apart (max " +
              fmt("%.2f", coarse) + " coarse step)";
  return {true, detail};
}

bool exact_logit(const KeyCache& kc, const LogitsRow& row, int64_t j, double* X, double* B) {
  const int64_t col = j / kc.P;
  if (col >= static_cast<int64_t>(row.pages.size())) return false;
  const int64_t page = row.pages[static_cast<size_t>(col)];
  if (page < 0 || page >= kc.num_pages) return false;
  const int64_t e = j % kc.P;
  const uint8_t* base = kc.base + page * kc.page_stride;
  const uint8_t* k = base + e * 128;
  const double ks = load_f32(base + kc.P * 128 + 4 * e);
  const auto& dec = fp8_table();
  double x = 0, b = 0;
  for (int64_t h = 0; h < kc.H; ++h) {
    const uint8_t* q = row.q + h * 128;
    double dot = 0, mag = 0;  // exact: 8-bit significands, at most 128 terms
    for (int d = 0; d < 128; ++d) {
      const double p = dec[q[d]] * dec[k[d]];
      dot += p;
      mag += std::fabs(p);
    }
    const double w = row.w[h];
    x += w * (dot > 0 ? dot : (std::isnan(dot) ? dot : 0.0));
    b += std::fabs(w) * mag;
  }
  const double u = pow2(-24), n = static_cast<double>(128 + kc.H);
  const double gamma = n * u / (1 - n * u);
  *X = ks * x;
  *B = ks * gamma * b + (ks * static_cast<double>(kc.H) + 1) * pow2(-149);
  return true;
}

Verdict compare_logits(const KeyCache& kc, const std::vector<LogitsRow>& rows, const float* got,
                       const float* want, int64_t S, double factor) {
  const std::string bound = (factor == 2 ? std::string("2") : fmt("%g", factor)) + "B";
  double worst = 0;
  bool identical = true;
  for (size_t r = 0; r < rows.size(); ++r) {
    const LogitsRow& row = rows[r];
    for (int64_t j = 0; j < S; ++j) {
      const float a = got[static_cast<int64_t>(r) * S + j];
      const float b = want[static_cast<int64_t>(r) * S + j];
      const std::string at = "logits[" + std::to_string(r) + ", " + std::to_string(j) + "]";
      const auto values = [&] {
        return ": got " + float_text(a) + ", expected " + float_text(b);
      };
      if (j >= row.L) {
        if (!(std::isinf(b) && b < 0))
          return {false, "expected." + at + " = " + float_text(b) + ": not -inf at or past the " +
                             "row length " + std::to_string(row.L)};
        if (!(std::isinf(a) && a < 0))
          return {false, at + values() + " (past the row length " + std::to_string(row.L) + ")"};
        continue;
      }
      if (std::isnan(a) || std::isnan(b)) {
        if (!(std::isnan(a) && std::isnan(b))) return {false, at + values()};
        continue;
      }
      if (std::isinf(a) || std::isinf(b)) {
        if (a != b) return {false, at + values()};
        continue;
      }
      double X, B;
      if (!exact_logit(kc, row, j, &X, &B))
        return {false, at + ": key outside the paged cache (page table)"};
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

std::string band_rule_violation(const int32_t* sel, int64_t L, const std::vector<double>& X,
                                const std::vector<double>& B, bool canonical) {
  constexpr int K = 512;
  const double ninf = -std::numeric_limits<double>::infinity();
  const auto lo = [&](int64_t i) { return std::isnan(X[i]) ? ninf : X[i] + B[i]; };
  const auto hi = [&](int64_t i) { return std::isnan(X[i]) ? ninf : X[i] - B[i]; };
  std::vector<char> chosen(static_cast<size_t>(L), 0);
  int64_t weakest = -1;
  for (int i = 0; i < K; ++i) {
    const int64_t v = sel[i];
    if (v < 0 || v >= L)
      return "entry " + std::to_string(i) + " = " + std::to_string(v) + " outside [0, " +
             std::to_string(L) + ")";
    if (chosen[static_cast<size_t>(v)])
      return "entry " + std::to_string(i) + " = " + std::to_string(v) + " selected twice";
    chosen[static_cast<size_t>(v)] = 1;
    if (weakest < 0 || lo(v) < lo(weakest)) weakest = v;
  }
  int64_t strongest = -1;
  for (int64_t j = 0; j < L; ++j)
    if (!chosen[static_cast<size_t>(j)] && (strongest < 0 || hi(j) > hi(strongest)))
      strongest = j;
  if (strongest >= 0 && lo(weakest) < hi(strongest))
    return "selected " + std::to_string(weakest) + " (X+B = " + fmt("%.9g", lo(weakest)) +
           ") ranks below unselected " + std::to_string(strongest) +
           " (X-B = " + fmt("%.9g", hi(strongest)) + ")";
  if (canonical) {
    for (int i = 0; i + 1 < K; ++i) {
      const int64_t a = sel[i], b = sel[i + 1];
      const bool ok = std::isnan(X[a]) && std::isnan(X[b]) ? a < b : lo(a) >= hi(b);
      if (!ok)
        return "canonical order: " + std::to_string(a) + " (entry " + std::to_string(i) +
               ") before " + std::to_string(b);
    }
  }
  return "";
}

}  // namespace dsv4cpu::verify
