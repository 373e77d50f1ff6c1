#include "core/errors.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dsv4cpu {

Error::Error(std::string op, std::string argument, std::vector<int64_t> index, std::string value,
             const std::string& message)
    : std::invalid_argument("dsv4cpu::" + op + ": " + message),
      op_(std::move(op)),
      argument_(std::move(argument)),
      index_(std::move(index)),
      value_(std::move(value)) {}

namespace detail {

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string format_f32(float v) {
  if (!std::isfinite(v)) return format_float(v);
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

std::string format_index(const std::vector<int64_t>& idx) {
  if (idx.empty()) return "";
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

std::string format_text(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte != 0x7F) {
      out += ch;
      continue;
    }
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", byte);
    out += buf;
  }
  return out;
}

void fail_value(const char* op, const char* name, const std::string& value,
                const std::string& problem, const std::string& expected) {
  fail<ValueError>(op, name, {}, value, problem, expected);
}

void fail_shape(const char* op, const char* name, const TensorView& v,
                const std::string& expected) {
  std::string desc =
      v.present() ? std::string("dtype ") + dtype_name(v.dtype()) + ", shape " + v.shape_string()
                  : std::string("missing");
  std::string strides;
  if (v.present() && v.rank() > 0) {
    strides = ", strides [";
    for (int i = 0; i < v.rank(); ++i) strides += (i ? ", " : "") + std::to_string(v.stride(i));
    strides += "]";
  }
  throw ShapeError(op, name, {}, desc + strides,
                   std::string(name) + ": " + desc + strides + " (expected " + expected + ")");
}

void fail_computed(const char* op, int64_t t, int64_t position, const char* quantity,
                   int64_t channel, float value, const std::string& operands) {
  const std::string token = "token " + std::to_string(t);
  const std::string what =
      std::string(quantity) + (channel >= 0 ? " " + std::to_string(channel) : std::string());
  const std::string text = format_float(value);
  const std::string problem = std::isnan(value) ? "not finite" : "intermediate overflow";
  throw NonFiniteError(
      op, token, channel >= 0 ? std::vector<int64_t>{t, channel} : std::vector<int64_t>{t}, text,
      token + " (position " + std::to_string(position) + "): " + what + " = " + text + ": " +
          problem + operands + " (expected finite; nothing was written)");
}

void fail_computed_input(const char* op, const char* argument, std::vector<int64_t> index,
                         float value, int64_t t, int64_t position, const std::string& how) {
  fail<NonFiniteError>(op, argument, std::move(index), format_float(value),
                       "not finite, read by token " + std::to_string(t) + " (position " +
                           std::to_string(position) + ")" + how,
                       "a finite value; nothing was written");
}

}  // namespace detail
}  // namespace dsv4cpu
