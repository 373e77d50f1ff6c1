// make_cos_sin_cache (compressor.md §8.2): the validation (bad-input.md §1.4 order, §4 tables), run
// before any variant so that every variant throws the same error, and the public entry point: pack
// the arguments, detail::run (api/registry.hpp).
#include <cmath>
#include <string>

#include "api/registry.hpp"
#include "args/compressor.hpp"
#include "core/check.hpp"

namespace dsv4cpu {
namespace detail {

void validate(MakeCosSinCacheArgs& a, const Options&) {
  constexpr const char* op = "make_cos_sin_cache";
  if (a.rows < 0 || a.rows > (int64_t{1} << 24))
    fail_value(op, "rows", std::to_string(a.rows), "outside the table range",
               "0 <= rows <= 2^24 = 16777216");
  if (!std::isfinite(a.theta) || !(a.theta > 1))
    fail_value(op, "theta", format_float(a.theta), "outside its domain", "finite and > 1");
  if (a.yarn) {
    const YarnParams& y = *a.yarn;
    auto need = [&](const char* name, double v, bool ok, const char* expected) {
      if (!std::isfinite(v) || !ok)
        fail_value(op, name, format_float(v), "outside its domain", expected);
    };
    need("factor", y.factor, y.factor >= 1, "finite and >= 1");
    need("original_max", y.original_max, y.original_max >= 1, "finite and >= 1");
    need("beta_fast", y.beta_fast, y.beta_fast > y.beta_slow, "finite and > beta_slow");
    need("beta_slow", y.beta_slow, y.beta_slow > 0, "finite and > 0");
    need("mscale", y.mscale, y.mscale > 0, "finite and > 0");
  }
  check_array(op, "out", a.out, {DType::F32}, {a.rows, 64}, Layout::contiguous);
}

}  // namespace detail

void make_cos_sin_cache(int64_t rows, double theta, const std::optional<YarnParams>& yarn,
                        const MutableTensorView& out) {
  detail::MakeCosSinCacheArgs a{rows, theta, yarn, out};
  detail::run("make_cos_sin_cache", a, Options{});
}

}  // namespace dsv4cpu
