#include "check.hpp"

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace dsv4cpu::detail {

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

std::string format_index(const std::vector<int64_t>& idx) {
  if (idx.empty()) return "";
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

void fail_value(const char* op, const char* name, const std::string& value,
                const std::string& problem, const std::string& expected) {
  fail<ValueError>(op, name, {}, value, problem, expected);
}

void fail_shape(const char* op, const char* name, const TensorView& v,
                const std::string& expected) {
  std::string desc = v.present() ? std::string("dtype ") + dtype_name(v.dtype()) + ", shape " +
                                       v.shape_string()
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

static std::string expectation(std::initializer_list<DType> dtypes,
                               std::initializer_list<int64_t> shape, Layout layout) {
  std::string s;
  size_t i = 0;
  for (DType d : dtypes) s += (i++ ? " or " : "") + std::string(dtype_name(d));
  s += " [";
  i = 0;
  for (int64_t e : shape) s += (i++ ? ", " : "") + (e == kAny ? std::string("*") : std::to_string(e));
  s += "]";
  switch (layout) {
    case Layout::contiguous: s += ", contiguous"; break;
    case Layout::unit_inner: s += ", unit inner stride"; break;
    case Layout::rows_contiguous: s += ", contiguous rows, dim-0 stride >= row size"; break;
  }
  return s;
}

void check_array(const char* op, const char* name, const TensorView& v,
                 std::initializer_list<DType> dtypes, std::initializer_list<int64_t> shape,
                 Layout layout) {
  auto bad = [&] { fail_shape(op, name, v, expectation(dtypes, shape, layout)); };
  if (!v.present()) bad();
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= (d == v.dtype());
  if (!dtype_ok) bad();
  if (v.rank() != static_cast<int>(shape.size())) bad();
  int dim = 0;
  for (int64_t e : shape) {
    if (e != kAny && v.size(dim) != e) bad();
    ++dim;
  }
  if (v.numel() == 0) return;  // no element is addressed: any strides will do
  const int r = v.rank();
  switch (layout) {
    case Layout::contiguous:
      if (!v.contiguous()) bad();
      break;
    case Layout::unit_inner: {
      if (r > 0 && v.size(r - 1) > 1 && v.stride(r - 1) != 1) bad();
      int64_t packed = 1;
      for (int d = r - 1; d >= 1; --d) {
        packed *= v.size(d);
        if (v.size(d - 1) > 1 && v.stride(d - 1) < packed) bad();
        packed = v.size(d - 1) > 1 ? v.stride(d - 1) : packed;
      }
      break;
    }
    case Layout::rows_contiguous: {
      if (r == 0) break;
      int64_t expect = 1;
      for (int d = r - 1; d >= 1; --d) {
        if (v.size(d) > 1 && v.stride(d) != expect) bad();
        expect *= v.size(d);
      }
      if (v.size(0) > 1 && v.stride(0) < expect) bad();
      break;
    }
  }
}

void check_no_overlap(const char* op, const char* out_name, const TensorView& out,
                      const char* in_name, const TensorView& in) {
  if (!out.present() || !in.present() || !out.overlaps(in)) return;
  throw ShapeError(op, out_name, {}, "overlaps " + std::string(in_name),
                   std::string(out_name) + ": memory overlaps input " + in_name +
                       " (expected an output that does not overlap any input)");
}

BlockTableRefs::BlockTableRefs(const char* op, const TensorView& block_table, int64_t block_size,
                               ColumnWording wording)
    : op_(op),
      bt_(block_table),
      MB_(block_table.size(1)),
      P_(block_size),
      max_entry_((INT64_MAX - (block_size - 1)) / block_size),
      shift_((block_size & (block_size - 1)) == 0
                 ? __builtin_ctzll(static_cast<unsigned long long>(block_size))
                 : -1),
      wording_(wording) {}

void BlockTableRefs::fail(int64_t r, int64_t col, const BlockTableReferrer& by) const {
  if (col >= MB_)
    detail::fail<IndexError>(op_, by.argument, by.index, std::to_string(by.value),
                             std::string(wording_.lead) + "block-table column " +
                                 std::to_string(col) + " beyond the table" + by.detail,
                             std::string(wording_.bound) + " < " + std::to_string(MB_));
  const int64_t entry = bt_(r, col);
  const std::string referrer = std::string(by.argument) + format_index(by.index) + " = " +
                               std::to_string(by.value) + by.detail;
  if (entry < 0)
    detail::fail<IndexError>(op_, "block_table", {r, col}, std::to_string(entry),
                             "negative block id referenced by " + referrer, ">= 0");
  detail::fail<IndexError>(op_, "block_table", {r, col}, std::to_string(entry),
                           "slot overflows int64, referenced by " + referrer,
                           "block id * block_size + block_size - 1 <= 2^63 - 1");
}

}  // namespace dsv4cpu::detail
