#include "verify/fixture.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "core/checked.hpp"
#include "core/errors.hpp"

namespace dsv4cpu::verify {

namespace {

const std::set<std::string> kRunnerKeys = {"format", "op", "description", "compare",
                                           "expected_error", "check_finite"};

ArrayRef ref_of(const Tensor& t) { return {t.dtype, t.shape, t.bytes.data()}; }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

Tolerance parse_compare(const std::string& text) {
  Tolerance t;
  if (text == "exact") {
    t.exact = true;
    return t;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) throw std::invalid_argument("empty item");
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "fp8_step" || key == "bf16_ulp" || key == "scale_step") {
      const std::optional<int64_t> v = parse_integer(value);
      if (!v || *v < 0 || *v > 1000000)
        throw std::invalid_argument(key + " = '" + value + "' is not an integer in [0, 1e6]");
      (key == "fp8_step"   ? t.fp8_step
       : key == "bf16_ulp" ? t.bf16_ulp
                           : t.scale_step) = static_cast<int>(*v);
      t.bf16_arrays |= key == "bf16_ulp";
      continue;
    }
    if (key != "rtol" && key != "atol" && key != "bound_factor")
      throw std::invalid_argument("unknown key '" + key + "'");
    const std::optional<double> v = parse_real(value);
    if (!v || !std::isfinite(*v) || *v < 0)
      throw std::invalid_argument(key + " = '" + value + "' is not a non-negative number");
    (key == "rtol" ? t.rtol : key == "atol" ? t.atol : t.bound_factor.emplace()) = *v;
  }
  if (!text.empty() && text.back() == ',') throw std::invalid_argument("empty item");
  return t;
}

MutableTensorView make_view(const std::string& name, void* data, DType dtype,
                            const std::vector<int64_t>& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    throw FixtureError("tensor '" + name + "' has rank " + std::to_string(shape.size()) +
                       " (at most " + std::to_string(kMaxRank) + " supported)");
  return MutableTensorView(data, dtype, static_cast<int>(shape.size()), shape.data());
}

Case::Case(const SafetensorsFile& file) : file_(file) {
  int64_t bytes = 0;
  for (const auto& entry : file.tensors) bytes += static_cast<int64_t>(entry.second.bytes.size());
  output_limit_ = 8 * bytes + (int64_t{1} << 28);  // the file's tensors are in memory: no overflow
}

const Tensor* Case::tensor(const std::string& name) const {
  if (name.rfind("expected.", 0) == 0) return nullptr;
  const auto it = file_.tensors.find(name);
  return it == file_.tensors.end() ? nullptr : &it->second;
}

const Tensor* Case::expected(const std::string& name) const {
  const auto it = file_.tensors.find("expected." + name);
  return it == file_.tensors.end() ? nullptr : &it->second;
}

TensorView Case::input(const std::string& name) {
  const Tensor* t = tensor(name);
  if (t == nullptr) return TensorView();
  auto it = inputs_.find(name);
  if (it == inputs_.end()) it = inputs_.emplace(name, t->bytes).first;
  return placed(Role::input, name, make_view(name, it->second.data(), t->dtype, t->shape));
}

MutableTensorView Case::placed(Role role, const std::string& name, const MutableTensorView& v) {
  return relocation_ ? relocation_(role, name, v) : v;
}

Case::Buffer& Case::add_buffer(const std::string& name, Kind kind, DType dtype,
                               const std::vector<int64_t>& shape, Comparator cmp) {
  for (const Buffer& b : buffers_)
    if (b.name == name) throw FixtureError("output '" + name + "' requested twice");
  buffers_.push_back(Buffer{name, kind, dtype, shape, Bytes(), Bytes(), std::move(cmp)});
  return buffers_.back();
}

MutableTensorView Case::inout(const std::string& name, Comparator cmp) {
  const Tensor* t = tensor(name);
  if (t == nullptr) return MutableTensorView();
  Buffer& b = add_buffer(name, Kind::inplace, t->dtype, t->shape, std::move(cmp));
  b.before = t->bytes;
  b.bytes = t->bytes;
  return placed(Role::inplace, name, make_view(name, b.bytes.data(), b.dtype, b.shape));
}

MutableTensorView Case::output(const std::string& name, DType dtype,
                               const std::vector<int64_t>& fallback, Comparator cmp) {
  const Tensor* want = expected(name);
  std::vector<int64_t> shape = want ? want->shape : fallback;
  for (int64_t& e : shape) e = std::max<int64_t>(e, 0);
  int64_t n = 0, bytes = 0;
  if (!detail::extent_product(shape.data(), static_cast<int>(shape.size()), &n) ||
      !detail::checked_mul(n, static_cast<int64_t>(dtype_size(dtype)), &bytes) ||
      bytes > output_limit_)
    throw FixtureError("output '" + name + "' " + dtype_name(dtype) + " " + shape_text(shape) +
                       " exceeds the verifier's limit of " + std::to_string(output_limit_) +
                       " bytes (8 x the file's tensor bytes + 256 MiB)");
  Buffer& b = add_buffer(name, Kind::output, dtype, shape, std::move(cmp));
  b.bytes = Bytes(static_cast<size_t>(bytes));
  std::fill_n(b.bytes.data(), b.bytes.size(), kGarbageByte);
  b.before = b.bytes;
  return placed(Role::output, name, make_view(name, b.bytes.data(), b.dtype, b.shape));
}

void Case::result(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                  const void* data, Comparator cmp) {
  Buffer& b = add_buffer(name, Kind::result, dtype, shape, std::move(cmp));
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  b.bytes = Bytes(data, static_cast<size_t>(n) * dtype_size(dtype));
}

const std::string* Case::scalar(const std::string& name) {
  used_.insert(name);
  const auto it = file_.metadata.find(name);
  return it == file_.metadata.end() ? nullptr : &it->second;
}

const std::string* Case::lookup(const std::string& name, bool has_default) {
  const std::string* s = scalar(name);
  if (s == nullptr && !has_default)
    throw FixtureError("missing scalar '" + name + "' in __metadata__");
  return s;
}

namespace {

bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

// The length of the run of digits of `s` from `i`.
size_t digits(const std::string& s, size_t i) {
  size_t n = 0;
  while (i + n < s.size() && is_digit(s[i + n])) ++n;
  return n;
}

// True when `s` is a real of the grammar (fixture.hpp); `finite` tells whether it is a decimal.
bool real_text(const std::string& s, bool* finite) {
  const size_t sign = !s.empty() && s[0] == '-' ? 1 : 0;
  const std::string body = s.substr(sign);
  *finite = false;
  if (body == "inf") return true;
  if (body == "nan") return sign == 0;
  size_t i = sign;
  const size_t whole = digits(s, i);
  i += whole;
  size_t fraction = 0;
  if (i < s.size() && s[i] == '.') {
    fraction = digits(s, i + 1);
    i += 1 + fraction;
  }
  if (whole == 0 && fraction == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t exponent = digits(s, i);
    if (exponent == 0) return false;
    i += exponent;
  }
  *finite = true;
  return i == s.size();
}

// strtod / strtof of a real of the grammar: a decimal beyond the range is outside it.
template <class T, T (*Parse)(const char*, char**)>
std::optional<T> parse_real_as(const std::string& text) {
  bool finite = false;
  if (!real_text(text, &finite)) return std::nullopt;
  const T v = Parse(text.c_str(), nullptr);
  if (finite && std::isinf(v)) return std::nullopt;
  return v;
}

[[noreturn]] void bad_scalar(const std::string& name, const std::string& text, const char* what) {
  throw FixtureError("scalar " + name + " = '" + detail::format_text(text) + "' is not " + what);
}

}  // namespace

std::optional<int64_t> parse_integer(const std::string& text) {
  const bool negative = !text.empty() && text[0] == '-';
  const size_t first = negative ? 1 : 0;
  if (text.size() == first || digits(text, first) != text.size() - first) return std::nullopt;
  // Accumulated negatively: -2^63 has no positive counterpart.
  int64_t v = 0;
  for (size_t i = first; i < text.size(); ++i) {
    const int d = text[i] - '0';
    if (v < (std::numeric_limits<int64_t>::min() + d) / 10) return std::nullopt;
    v = v * 10 - d;
  }
  if (!negative) {
    if (v == std::numeric_limits<int64_t>::min()) return std::nullopt;
    v = -v;
  }
  return v;
}

std::optional<double> parse_real(const std::string& text) {
  return parse_real_as<double, std::strtod>(text);
}

std::optional<float> parse_real32(const std::string& text) {
  return parse_real_as<float, std::strtof>(text);
}

std::optional<bool> parse_boolean(const std::string& text) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  return std::nullopt;
}

bool Case::has(const std::string& name) { return scalar(name) != nullptr; }

std::string Case::text(const std::string& name, std::optional<std::string> def) {
  const std::string* s = lookup(name, def.has_value());
  return s ? *s : *def;
}

int64_t Case::integer(const std::string& name, std::optional<int64_t> def) {
  const std::string* s = lookup(name, def.has_value());
  if (s == nullptr) return *def;
  const std::optional<int64_t> v = parse_integer(*s);
  if (!v) bad_scalar(name, *s, "a 64-bit integer");
  return *v;
}

double Case::real(const std::string& name, std::optional<double> def) {
  const std::string* s = lookup(name, def.has_value());
  if (s == nullptr) return *def;
  const std::optional<double> v = parse_real(*s);
  if (!v) bad_scalar(name, *s, "a number");
  return *v;
}

float Case::real32(const std::string& name, std::optional<float> def) {
  const std::string* s = lookup(name, def.has_value());
  if (s == nullptr) return *def;
  const std::optional<float> v = parse_real32(*s);
  if (!v) bad_scalar(name, *s, "a number within fp32");
  return *v;
}

bool Case::boolean(const std::string& name, std::optional<bool> def) {
  const std::string* s = lookup(name, def.has_value());
  if (s == nullptr) return *def;
  const std::optional<bool> v = parse_boolean(*s);
  if (!v) bad_scalar(name, *s, "a boolean (0, 1, true, false)");
  return *v;
}

Verdict Case::check(const Tolerance& tol) const {
  for (const auto& [name, bytes] : inputs_)
    if (!(bytes == file_.tensors.at(name).bytes))
      return {false, "input " + name + " was modified by the op"};
  std::vector<std::pair<std::string, Verdict>> verdicts;
  for (const Buffer& b : buffers_) {
    const Tensor* want = expected(b.name);
    if (want == nullptr) {
      if (b.kind == Kind::inplace)
        return {false, "missing tensor expected." + b.name + " (in-place buffer)"};
      continue;  // only the expected.* tensors present are compared
    }
    const ArrayRef got{b.dtype, b.shape, b.bytes.data()};
    Verdict v = tol.exact ? testing::compare_exact(b.name, got, ref_of(*want))
                : b.cmp       ? b.cmp(b.name, got, ref_of(*want), tol)
                : tol.bf16_arrays && b.dtype == DType::BF16
                    ? testing::compare_bf16(b.name, got, ref_of(*want), tol)
                    : testing::compare_exact(b.name, got, ref_of(*want));
    if (!v.pass) return v;
    verdicts.emplace_back(b.name, std::move(v));
  }
  for (const auto& [key, t] : file_.tensors) {
    if (key.rfind("expected.", 0) != 0) continue;
    const std::string name = key.substr(9);
    const bool produced = std::any_of(buffers_.begin(), buffers_.end(),
                                      [&](const Buffer& b) { return b.name == name; });
    if (!produced)
      return {false, "expected." + name + ": the op produces no '" + name + "' for this input"};
  }
  if (verdicts.empty()) return {false, "no expected.* tensor to compare"};
  const bool same = std::all_of(verdicts.begin(), verdicts.end(), [&](const auto& v) {
    return v.second.detail == verdicts.front().second.detail;
  });
  if (same)
    return {true, verdicts.front().second.detail +
                      (verdicts.size() > 1 ? " (" + std::to_string(verdicts.size()) + " outputs)"
                                           : "")};
  std::string detail;
  for (const auto& [name, v] : verdicts)
    if (v.detail != "exact") detail += (detail.empty() ? "" : "; ") + name + " " + v.detail;
  return {true, detail};
}

Verdict Case::check_untouched() const {
  for (const Buffer& b : buffers_) {
    if (b.kind == Kind::result || b.bytes == b.before) continue;
    size_t i = 0;
    while (b.bytes.data()[i] == b.before.data()[i]) ++i;
    return {false, b.name + " " + dtype_name(b.dtype) + " " + shape_text(b.shape) +
                       " was written before the error (first changed byte " + std::to_string(i) +
                       ")"};
  }
  return {true, ""};
}

std::vector<std::pair<std::string, Bytes>> Case::written() const {
  std::vector<std::pair<std::string, Bytes>> out;
  for (const Buffer& b : buffers_) out.emplace_back(b.name, b.bytes);
  return out;
}

std::map<std::string, Tensor> Case::results() const {
  std::map<std::string, Tensor> out;
  for (const Buffer& b : buffers_) out[b.name] = Tensor{b.dtype, b.shape, b.bytes};
  return out;
}

bool Case::replace(const std::string& name, const Tensor& t) {
  for (Buffer& b : buffers_) {
    if (b.name != name) continue;
    b.dtype = t.dtype;
    b.shape = t.shape;
    b.bytes = t.bytes;
    return true;
  }
  return false;
}

std::vector<std::string> Case::unused_metadata() const {
  std::vector<std::string> out;
  for (const auto& entry : file_.metadata)
    if (!kRunnerKeys.count(entry.first) && !used_.count(entry.first)) out.push_back(entry.first);
  return out;
}

}  // namespace dsv4cpu::verify
