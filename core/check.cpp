#include "core/check.hpp"

#include <cstdint>

#include "core/checked.hpp"

namespace dsv4cpu::detail {

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
                 Layout layout, const char* form) {
  auto bad = [&] {
    fail_shape(op, name, v,
               expectation(dtypes, shape, layout) + (form ? std::string("; ") + form : ""));
  };
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
        // Saturated: a stride can never reach a row size beyond int64.
        if (!checked_mul(packed, v.size(d), &packed)) packed = INT64_MAX;
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

std::vector<int64_t> unflatten(const TensorView& v, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(v.rank()));
  for (int d = v.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % v.size(d);
    flat /= v.size(d);
  }
  return idx;
}

void check_outputs_disjoint(const char* op, const char* a_name, const TensorView& a,
                            const char* b_name, const TensorView& b) {
  if (!a.present() || !b.present() || !a.overlaps(b)) return;
  throw ShapeError(op, b_name, {}, std::string("overlaps ") + a_name,
                   std::string(b_name) + ": memory overlaps output " + a_name +
                       " (expected outputs that do not overlap)");
}

}  // namespace dsv4cpu::detail
