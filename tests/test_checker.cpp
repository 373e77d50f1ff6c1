// The checker's self-test: for every comparison contract of numerics.md §11 as testing/ implements
// it (contracts.hpp, cache_compare.hpp, oracle.hpp, attention.hpp), a table of (expected, got)
// pairs that must be rejected, one row per way of being wrong, and pairs that must pass exactly at
// the bound and just inside it. Every value is hand-computed from the spec; each row is its own
// named test case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_attention_util.hpp"
#include "testing/attention.hpp"
#include "testing/cache_compare.hpp"
#include "testing/contracts.hpp"
#include "testing/oracle.hpp"

namespace dsv4cpu::testing {
namespace {

// One row: a pair judged by a contract, and whether the contract must accept it.
struct Row {
  std::string name;
  bool accept;
  std::function<Verdict()> judge;
};
void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }
std::string row_name(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }

Row reject(std::string name, std::function<Verdict()> judge) {
  return {std::move(name), false, std::move(judge)};
}
// A check of testing/oracle.hpp ("" when it holds) as a verdict.
Verdict verdict(const std::string& violation) { return {violation.empty(), violation}; }

class Contract : public ::testing::TestWithParam<Row> {};
TEST_P(Contract, Judges) {
  const Row& r = GetParam();
  const Verdict v = r.judge();
  if (r.accept) {
    EXPECT_TRUE(v.pass) << r.name << " must pass: " << v.detail;
  } else {
    EXPECT_FALSE(v.pass) << r.name << " must be rejected, got: " << v.detail;
    EXPECT_FALSE(v.detail.empty()) << r.name << ": a rejection says why";
  }
}

// Arrays of kN elements, all equal but one, at the first or the last position.
constexpr int64_t kN = 5;
enum class At { first, last };
int64_t index_of(At at) { return at == At::first ? 0 : kN - 1; }
const char* suffix(At at) { return at == At::first ? "_first" : "_last"; }

template <class T>
ArrayRef ref(DType dtype, const std::vector<T>& v) {
  return {dtype, {static_cast<int64_t>(v.size())}, reinterpret_cast<const uint8_t*>(v.data())};
}
template <class T>
std::vector<T> array_with(T fill, T value, At at) {
  std::vector<T> v(kN, fill);
  v[static_cast<size_t>(index_of(at))] = value;
  return v;
}

// ---- §11.1 exact ----

template <class T>
void exact_rows(std::vector<Row>& rows, const std::string& name, bool ok, DType dtype, T fill,
                T want, T got) {
  for (At at : {At::first, At::last})
    rows.push_back({name + suffix(at), ok, [=] {
                      return compare_exact("x", ref(dtype, array_with(fill, got, at)),
                                           ref(dtype, array_with(fill, want, at)));
                    }});
}

std::vector<Row> exact_table() {
  std::vector<Row> rows;
  const auto f32 = [&](const std::string& n, bool ok, uint32_t want, uint32_t got) {
    exact_rows<uint32_t>(rows, "f32_" + n, ok, DType::F32, 0x3F800000, want, got);
  };
  // §11.1: equal bit patterns, except that any two NaNs match.
  f32("want_nan_got_one", false, 0x7FC00000, 0x3F800000);
  f32("want_one_got_nan", false, 0x3F800000, 0x7FC00000);
  f32("want_plus_inf_got_minus_inf", false, 0x7F800000, 0xFF800000);
  f32("want_minus_inf_got_plus_inf", false, 0xFF800000, 0x7F800000);
  f32("want_plus_zero_got_minus_zero", false, 0x00000000, 0x80000000);
  f32("want_minus_zero_got_plus_zero", false, 0x80000000, 0x00000000);
  f32("want_one_got_next_float", false, 0x3F800000, 0x3F800001);
  f32("want_one_got_previous_float", false, 0x3F800000, 0x3F7FFFFF);
  f32("want_inf_got_nan", false, 0x7F800000, 0x7FC00000);
  f32("want_nan_got_inf", false, 0x7FC00000, 0x7F800000);
  f32("want_max_got_inf", false, 0x7F7FFFFF, 0x7F800000);
  f32("want_smallest_subnormal_got_zero", false, 0x00000001, 0x00000000);
  f32("identical", true, 0x40490FDB, 0x40490FDB);
  f32("identical_minus_zero", true, 0x80000000, 0x80000000);
  f32("nan_of_other_sign_and_payload", true, 0x7FC00000, 0xFFC00001);
  f32("signalling_and_quiet_nan", true, 0x7FC00000, 0x7F800001);
  const auto bf16 = [&](const std::string& n, bool ok, uint16_t want, uint16_t got) {
    exact_rows<uint16_t>(rows, "bf16_" + n, ok, DType::BF16, 0x3F80, want, got);
  };
  bf16("want_nan_got_one", false, 0x7FC0, 0x3F80);
  bf16("want_one_got_nan", false, 0x3F80, 0x7FC0);
  bf16("want_plus_inf_got_minus_inf", false, 0x7F80, 0xFF80);
  bf16("want_plus_zero_got_minus_zero", false, 0x0000, 0x8000);
  bf16("want_inf_got_nan", false, 0x7F80, 0x7FC0);
  bf16("want_one_got_next", false, 0x3F80, 0x3F81);
  bf16("nan_of_other_sign", true, 0x7FC0, 0xFFC1);
  // Integers and fp8 codes: bytes, so the two NaN codes differ and so do ±0.
  exact_rows<int64_t>(rows, "i64_off_by_one", false, DType::I64, 7, 39, 40);
  exact_rows<int64_t>(rows, "i64_minus_one_for_zero", false, DType::I64, 7, 0, -1);
  exact_rows<int64_t>(rows, "i64_identical", true, DType::I64, 7, 39, 39);
  exact_rows<int32_t>(rows, "i32_off_by_one", false, DType::I32, 7, -1, 0);
  exact_rows<uint8_t>(rows, "fp8_nan_code_of_other_sign", false, DType::F8_E4M3, 0x38, 0x7F, 0xFF);
  exact_rows<uint8_t>(rows, "fp8_plus_zero_got_minus_zero", false, DType::F8_E4M3, 0x38, 0x00,
                      0x80);
  const std::vector<int32_t> two = {1, 2};
  const std::vector<int64_t> two64 = {1, 2};
  rows.push_back(reject("dtype_mismatch", [=] {
    return compare_exact("x", ref(DType::I64, two64), ref(DType::I32, two));
  }));
  rows.push_back(reject("shape_mismatch", [=] {
    return compare_exact("x", {DType::I32, {1, 2}, reinterpret_cast<const uint8_t*>(two.data())},
                         ref(DType::I32, two));
  }));
  return rows;
}
INSTANTIATE_TEST_SUITE_P(Exact, Contract, ::testing::ValuesIn(exact_table()), row_name);

// ---- §11.2 fp8 code steps ----

std::vector<Row> fp8_table() {
  std::vector<Row> rows;
  const auto row = [&](const std::string& n, bool ok, uint8_t want, uint8_t got, int steps = 1) {
    for (At at : {At::first, At::last})
      rows.push_back({n + suffix(at), ok, [=] {
                        Tolerance t;
                        t.fp8_step = steps;
                        return compare_fp8_codes(
                            "q", ref(DType::F8_E4M3, array_with<uint8_t>(0x38, got, at)),
                            ref(DType::F8_E4M3, array_with<uint8_t>(0x38, want, at)), t);
                      }});
  };
  // ord8(c) = c below 0x80, -(c & 0x7F) - 1 above; a NaN code matches only the identical byte.
  row("want_number_got_nan", false, 0x7E, 0x7F);
  row("want_nan_got_number", false, 0x7F, 0x7E);
  row("want_nan_got_nan_of_other_sign", false, 0x7F, 0xFF);
  row("want_negative_nan_got_nan", false, 0xFF, 0x7F);
  row("two_steps_up", false, 0x00, 0x02);
  row("two_steps_down", false, 0x02, 0x00);
  row("two_steps_across_zero", false, 0x00, 0x81);  // ord 0 and -2
  row("two_steps_across_zero_negative_want", false, 0x80, 0x01);
  row("plus_and_minus_smallest_subnormal", false, 0x01, 0x81);  // §11.2: 3 steps
  row("plus_and_minus_max", false, 0x7E, 0xFE);
  row("two_steps_normal", false, 0x38, 0x3A);
  row("plus_zero_and_minus_zero", true, 0x00, 0x80);  // §11.2: 1 step
  row("minus_zero_and_plus_zero", true, 0x80, 0x00);
  row("one_step_below_max", true, 0x7E, 0x7D);  // §11.2: 1 step
  row("one_step_to_max", true, 0x7D, 0x7E);
  row("one_step_negative", true, 0x80, 0x81);
  row("one_step_normal_down", true, 0x38, 0x37);
  row("identical_nan", true, 0x7F, 0x7F);
  row("identical_negative_nan", true, 0xFF, 0xFF);
  row("two_steps_allowed_across_zero", true, 0x00, 0x81, 2);
  row("three_steps_with_two_allowed", false, 0x01, 0x81, 2);
  row("nan_with_many_steps_allowed", false, 0x7E, 0x7F, 200);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(Fp8Steps, Contract, ::testing::ValuesIn(fp8_table()), row_name);

// ---- §11.3 bf16 ulps (compare_bf16: BF16 arrays under a fixture's `compare=bf16_ulp=N`) ----

std::vector<Row> bf16_table() {
  std::vector<Row> rows;
  const auto row = [&](const std::string& n, bool ok, uint16_t want, uint16_t got, int ulps = 1) {
    for (At at : {At::first, At::last})
      rows.push_back({n + suffix(at), ok, [=] {
                        Tolerance t;
                        t.bf16_ulp = ulps;
                        return compare_bf16(
                            "q", ref(DType::BF16, array_with<uint16_t>(0x3F80, got, at)),
                            ref(DType::BF16, array_with<uint16_t>(0x3F80, want, at)), t);
                      }});
  };
  // ord16(h) = h below 0x8000, -(h & 0x7FFF) - 1 above; two NaNs match, a NaN never a number.
  row("two_ulps_up", false, 0x3F80, 0x3F82);
  row("two_ulps_down", false, 0x3F80, 0x3F7E);
  row("want_nan_got_one", false, 0x7FC0, 0x3F80);
  row("want_one_got_nan", false, 0x3F80, 0x7FC0);
  row("want_inf_got_nan", false, 0x7F80, 0x7FC0);
  row("want_nan_got_inf", false, 0x7FC0, 0x7F80);
  row("want_inf_got_adjacent_nan", false, 0x7F80, 0x7F81);  // one pattern apart, still a NaN
  row("want_adjacent_nan_got_minus_inf", false, 0xFF81, 0xFF80);
  row("want_plus_zero_got_minus_smallest_subnormal", false, 0x0000, 0x8001);  // ord 0 and -2
  row("want_minus_smallest_subnormal_got_plus_zero", false, 0x8001, 0x0000);
  row("sign_flip", false, 0x3F80, 0xBF80);
  row("want_inf_got_minus_inf", false, 0x7F80, 0xFF80);
  row("want_inf_got_below_max", false, 0x7F80, 0x7F7E);  // 2 apart
  row("want_minus_inf_got_max", false, 0xFF80, 0x7F7F);
  row("one_ulp_up", true, 0x3F80, 0x3F81);
  row("one_ulp_down", true, 0x3F80, 0x3F7F);
  row("plus_zero_and_minus_zero", true, 0x0000, 0x8000);  // §11.3: 1 apart
  row("minus_zero_and_plus_zero", true, 0x8000, 0x0000);
  row("minus_zero_and_minus_smallest_subnormal", true, 0x8000, 0x8001);
  row("max_and_inf", true, 0x7F7F, 0x7F80);  // §11.3: the largest finite is 1 below inf
  row("inf_and_max", true, 0x7F80, 0x7F7F);
  row("nan_of_other_sign_and_payload", true, 0x7FC0, 0xFFC1);
  row("signalling_and_quiet_nan", true, 0x7FC0, 0x7F81);
  row("identical", true, 0x4049, 0x4049);
  // `compare=bf16_ulp=0`: exact, except that any two NaNs still match.
  row("zero_ulps_plus_zero_and_minus_zero", false, 0x0000, 0x8000, 0);
  row("zero_ulps_max_and_inf", false, 0x7F7F, 0x7F80, 0);
  row("zero_ulps_nan_of_other_sign", true, 0x7FC0, 0xFFC1, 0);
  row("two_ulps_allowed", true, 0x3F80, 0x3F82, 2);
  row("two_ulps_allowed_across_zero", true, 0x0000, 0x8001, 2);
  row("three_ulps_with_two_allowed", false, 0x3F80, 0x3F7D, 2);
  row("nan_with_many_ulps_allowed", false, 0x7F7F, 0x7FC0, 1000000);
  const std::vector<uint16_t> two = {0x3F80, 0x3F80};
  rows.push_back(reject("not_bf16", [=] {
    return compare_bf16("q", ref(DType::F16, two), ref(DType::F16, two), Tolerance{});
  }));
  rows.push_back(reject("shape_mismatch", [=] {
    return compare_bf16("q", {DType::BF16, {1, 2}, reinterpret_cast<const uint8_t*>(two.data())},
                        ref(DType::BF16, two), Tolerance{});
  }));
  return rows;
}
INSTANTIATE_TEST_SUITE_P(Bf16Ulps, Contract, ::testing::ValuesIn(bf16_table()), row_name);

// ---- f32 by tolerance (weights_out): |got - want| <= atol + rtol·|want| ----

Verdict f32_rel(float want, float got, At at, double rtol, double atol) {
  Tolerance t;
  t.rtol = rtol;
  t.atol = atol;
  return compare_f32_rel("w", ref(DType::F32, array_with(1.0f, got, at)),
                         ref(DType::F32, array_with(1.0f, want, at)), t);
}

std::vector<Row> f32_table() {
  std::vector<Row> rows;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float fmax = std::numeric_limits<float>::max();
  const auto row = [&](const std::string& n, bool ok, float want, float got, double rtol = 0x1p-10,
                       double atol = 0) {
    for (At at : {At::first, At::last})
      rows.push_back({n + suffix(at), ok, [=] { return f32_rel(want, got, at, rtol, atol); }});
  };
  // rtol = 2^-10: the bound at want = ±1 is 2^-10, exactly representable.
  row("at_rtol_above", true, 1.0f, 1.0f + 0x1p-10f);
  row("at_rtol_below", true, 1.0f, 1.0f - 0x1p-10f);
  row("at_rtol_negative", true, -1.0f, -1.0f - 0x1p-10f);
  row("inside_rtol", true, 1.0f, 1.0f + 0x1p-11f);
  row("past_rtol_above", false, 1.0f, 1.0f + 0x1p-10f + 0x1p-23f);
  row("past_rtol_below", false, 1.0f, 1.0f - 0x1p-10f - 0x1p-24f);
  row("past_rtol_negative", false, -1.0f, -1.0f - 0x1p-10f - 0x1p-23f);
  row("want_nan_got_number", false, nan, 1.0f);
  row("want_number_got_nan", false, 1.0f, nan);
  row("want_plus_inf_got_minus_inf", false, inf, -inf);
  row("want_inf_got_max", false, inf, fmax);
  row("want_max_got_inf", false, fmax, inf);
  row("want_inf_got_nan", false, inf, nan);
  row("nan_and_nan", true, nan, -nan);
  row("inf_and_inf", true, -inf, -inf);
  row("plus_zero_and_minus_zero", true, 0.0f, -0.0f);
  // atol = 2^-20 with rtol 0, at want = 0.
  row("at_atol", true, 0.0f, 0x1p-20f, 0, 0x1p-20);
  row("at_atol_negative", true, 0.0f, -0x1p-20f, 0, 0x1p-20);
  row("past_atol", false, 0.0f, 0x1p-20f + 0x1p-43f, 0, 0x1p-20);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(F32Tolerance, Contract, ::testing::ValuesIn(f32_table()), row_name);

// ---- §11.3–§11.5 on the paged fp8_ds_mla cache (compressor.md §6.3) ----

// Two pages of P = 2 entries and 8 bytes of page padding; the op writes slots 1 and 2 (entry 1 of
// page 0, entry 0 of page 1). Every NoPE code 0x78 (256) with scale byte 0x77 (2^-8): 1.0; RoPE
// bf16 1.0; pad 0. Slots 0 and 3 and the padding hold 0x11.
struct MlaCache {
  static constexpr int64_t P = 2, kStride = 2 * 584 + 8;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(2 * kStride, 0x11);
  MlaCache() {
    for (int64_t slot : {1, 2})
      for (int q = 0; q < 7; ++q) set_tile(slot, q, 0x78, 0x77);
    for (int64_t slot : {1, 2}) {
      for (int k = 0; k < 64; ++k) set_rope(slot, k, 0x3F80);
      bytes[static_cast<size_t>(scale_at(slot) + 7)] = 0;
    }
  }
  static int64_t entry_at(int64_t slot) { return (slot / P) * kStride + (slot % P) * 576; }
  static int64_t scale_at(int64_t slot) { return (slot / P) * kStride + P * 576 + (slot % P) * 8; }
  uint8_t& code(int64_t slot, int d) { return bytes[static_cast<size_t>(entry_at(slot) + d)]; }
  uint8_t& scale(int64_t slot, int q) { return bytes[static_cast<size_t>(scale_at(slot) + q)]; }
  void set_tile(int64_t slot, int q, uint8_t c, uint8_t s) {
    for (int d = 0; d < 64; ++d) code(slot, 64 * q + d) = c;
    scale(slot, q) = s;
  }
  void set_rope(int64_t slot, int k, uint16_t h) {
    code(slot, 448 + 2 * k) = static_cast<uint8_t>(h);
    code(slot, 449 + 2 * k) = static_cast<uint8_t>(h >> 8);
  }
  ArrayRef view() const { return {DType::U8, {2, kStride}, bytes.data()}; }
};

Verdict compare_mla(const MlaCache& got, const MlaCache& want, const Tolerance& tol) {
  return compare_compressed_cache("kv_cache", got.view(), want.view(), EntryLayout::fp8_ds_mla,
                                  MlaCache::P, {1, 2}, tol);
}

// The first written slot's first tile / RoPE value / code, or the last slot's last one.
int64_t slot_of(At at) { return at == At::first ? 1 : 2; }
int tile_of(At at) { return at == At::first ? 0 : 6; }
int rope_of(At at) { return at == At::first ? 0 : 63; }

std::vector<Row> mla_table() {
  std::vector<Row> rows;
  const auto both = [&](const std::string& n, bool ok,
                        std::function<void(MlaCache& want, MlaCache& got, At at)> edit,
                        Tolerance tol = {}) {
    for (At at : {At::first, At::last})
      rows.push_back({n + suffix(at), ok, [=] {
                        MlaCache want, got;
                        edit(want, got, at);
                        return compare_mla(got, want, tol);
                      }});
  };
  // §11.3 on the RoPE bf16 values: ord16, within 1 ulp; two NaNs match, NaN never a number.
  const auto rope = [&](const std::string& n, bool ok, uint16_t want, uint16_t got,
                        Tolerance tol = {}) {
    both(
        "rope_" + n, ok,
        [=](MlaCache& w, MlaCache& g, At at) {
          w.set_rope(slot_of(at), rope_of(at), want);
          g.set_rope(slot_of(at), rope_of(at), got);
        },
        tol);
  };
  rope("want_one_got_nan", false, 0x3F80, 0x7FC0);
  rope("want_nan_got_one", false, 0x7FC0, 0x3F80);
  rope("want_plus_inf_got_minus_inf", false, 0x7F80, 0xFF80);
  rope("want_inf_got_nan", false, 0x7F80, 0x7FC0);
  rope("two_ulps_across_zero", false, 0x0000, 0x8001);  // ord 0 and -2
  rope("two_ulps_across_zero_negative_want", false, 0x8000, 0x0001);
  rope("two_ulps", false, 0x3F80, 0x3F82);
  rope("two_ulps_down", false, 0x3F80, 0x3F7E);
  rope("plus_zero_and_minus_zero", true, 0x0000, 0x8000);  // §11.3: 1 apart
  rope("max_and_inf", true, 0x7F7F, 0x7F80);
  rope("one_ulp_up", true, 0x3F80, 0x3F81);
  rope("one_ulp_down", true, 0x3F80, 0x3F7F);
  rope("nan_of_other_sign", true, 0x7FC0, 0xFFC1);
  Tolerance two_ulps;  // fixture metadata `compare=bf16_ulp=2` (fixtures.md)
  two_ulps.bf16_ulp = 2;
  rope("two_ulps_allowed", true, 0x3F80, 0x3F82, two_ulps);
  rope("three_ulps_with_two_allowed", false, 0x3F80, 0x3F83, two_ulps);
  rope("nan_with_two_ulps_allowed", false, 0x3F80, 0x7FC0, two_ulps);
  // §11.5 rule 1 (equal scale bytes): codes within 1 step; a NaN code matches only itself.
  const auto code = [&](const std::string& n, bool ok, uint8_t want, uint8_t got,
                        Tolerance tol = {}) {
    both(
        "nope_" + n, ok,
        [=](MlaCache& w, MlaCache& g, At at) {
          const int d = at == At::first ? 0 : 447;
          w.code(slot_of(at), d) = want;
          g.code(slot_of(at), d) = got;
        },
        tol);
  };
  code("want_number_got_nan", false, 0x78, 0x7F);
  code("want_nan_got_number", false, 0x7F, 0x78);
  code("want_nan_got_nan_of_other_sign", false, 0x7F, 0xFF);
  code("two_steps", false, 0x78, 0x7A);
  code("two_steps_across_zero", false, 0x00, 0x81);
  code("one_step_up", true, 0x78, 0x79);
  code("one_step_down", true, 0x78, 0x77);
  code("one_step_across_zero", true, 0x80, 0x00);
  Tolerance two_steps;  // `compare=fp8_step=2`
  two_steps.fp8_step = 2;
  code("two_steps_allowed", true, 0x78, 0x7A, two_steps);
  code("three_steps_with_two_allowed", false, 0x78, 0x75, two_steps);
  // §11.4: UE8M0 bytes at most 1 apart; byte 255 is NaN (§1) and matches no number.
  const auto scale = [&](const std::string& n, bool ok, uint8_t want_byte, uint8_t got_byte,
                         uint8_t want_code, uint8_t got_code, Tolerance tol = {}) {
    both(
        "scale_" + n, ok,
        [=](MlaCache& w, MlaCache& g, At at) {
          w.set_tile(slot_of(at), tile_of(at), want_code, want_byte);
          g.set_tile(slot_of(at), tile_of(at), got_code, got_byte);
        },
        tol);
  };
  scale("two_bytes_apart_same_values", false, 0x77, 0x79, 0x78, 0x68);  // 1.0 as 64·2^-6
  scale("two_bytes_apart_zero_codes", false, 0x77, 0x75, 0x00, 0x00);
  scale("want_254_got_255_zero_codes", false, 254, 255, 0x00, 0x00);
  scale("want_255_got_254_zero_codes", false, 255, 254, 0x00, 0x00);
  scale("want_255_got_254_same_values", false, 255, 254, 0x70, 0x78);  // 2^135 if 255 were 2^128
  scale("want_number_got_255", false, 0x77, 255, 0x78, 0x78);
  scale("one_byte_apart_same_values", true, 0x78, 0x77, 0x70, 0x78);  // 1.0 = 128·2^-7 = 256·2^-8
  scale("one_byte_apart_zero_codes", true, 0x77, 0x78, 0x00, 0x00);
  scale("both_255_codes_one_step", true, 255, 255, 0x78, 0x79);
  Tolerance equal_scales, two_scale_steps;  // `compare=scale_step=0`, `compare=scale_step=2`
  equal_scales.scale_step = 0;
  two_scale_steps.scale_step = 2;
  scale("one_byte_apart_with_none_allowed", false, 0x78, 0x77, 0x70, 0x78, equal_scales);
  scale("two_bytes_apart_with_two_allowed", true, 0x77, 0x79, 0x78, 0x68, two_scale_steps);
  scale("three_bytes_apart_with_two_allowed", false, 0x77, 0x7A, 0x78, 0x60, two_scale_steps);
  // §11.5 rule 2: got scale 2^-8 (byte 0x77), want 2^-7 (byte 0x78). The tolerance is
  // S·2^(max(floor(log2(v*/S)), -6) - 3) with S = 2^-7: 0.125 for v* in [1, 2), 0.0625 in
  // [0.5, 1), S·2^-9 = 2^-16 in the subnormal range.
  const auto coarse = [&](const std::string& n, bool ok, uint8_t want_code, uint8_t got_code) {
    both("rescaled_" + n, ok, [=](MlaCache& w, MlaCache& g, At at) {
      w.set_tile(slot_of(at), tile_of(at), 0x70, 0x78);  // 128·2^-7 = 1.0
      const int d = 64 * tile_of(at) + (at == At::first ? 0 : 63);
      w.code(slot_of(at), d) = want_code;
      g.code(slot_of(at), d) = got_code;
    });
  };
  coarse("at_bound_above", true, 0x70, 0x79);          // 1.0 vs 288·2^-8 = 1.125: step 0.125
  coarse("past_bound_above", false, 0x70, 0x7A);       // 1.0 vs 1.25
  coarse("at_bound_below", true, 0x70, 0x76);          // 1.0 vs 224·2^-8 = 0.875: v* = 1
  coarse("inside_bound_below", true, 0x70, 0x77);      // 1.0 vs 0.9375
  coarse("past_bound_below", false, 0x70, 0x75);       // 1.0 vs 0.8125
  coarse("at_bound_negative", true, 0xF0, 0xF9);       // -1.0 vs -1.125
  coarse("past_bound_negative", false, 0xF0, 0xFA);    // -1.0 vs -1.25
  coarse("at_bound_half", true, 0x68, 0x71);           // 0.5 vs 144·2^-8 = 0.5625: step 0.0625
  coarse("past_bound_half", false, 0x68, 0x72);        // 0.5 vs 0.625
  coarse("at_bound_subnormal", true, 0x00, 0x02);      // 0 vs 2·2^-17 = 2^-16
  coarse("inside_bound_subnormal", true, 0x00, 0x01);  // 0 vs 2^-17
  coarse("past_bound_subnormal", false, 0x00, 0x03);   // 0 vs 3·2^-17
  coarse("past_bound_across_zero", false, 0x00, 0x83); // 0 vs -3·2^-17
  coarse("want_number_got_nan", false, 0x70, 0x7F);
  coarse("want_nan_got_number", false, 0x7F, 0x70);
  coarse("want_nan_got_nan_of_other_sign", false, 0x7F, 0xFF);
  coarse("identical_nan", true, 0x7F, 0x7F);
  // Pad bytes and every byte the op does not write: exact.
  both("pad_byte", false, [](MlaCache&, MlaCache& g, At at) {
    g.bytes[static_cast<size_t>(MlaCache::scale_at(slot_of(at)) + 7)] = 1;
  });
  both("unwritten_entry", false, [](MlaCache&, MlaCache& g, At at) {
    g.code(at == At::first ? 0 : 3, at == At::first ? 0 : 575) ^= 1;
  });
  both("unwritten_scale", false, [](MlaCache&, MlaCache& g, At at) {
    g.scale(at == At::first ? 0 : 3, at == At::first ? 0 : 7) ^= 1;
  });
  both("page_padding", false, [](MlaCache&, MlaCache& g, At at) {
    g.bytes[static_cast<size_t>((at == At::first ? 1 : 2) * MlaCache::kStride - 1)] ^= 1;
  });
  return rows;
}
INSTANTIATE_TEST_SUITE_P(MlaCache, Contract, ::testing::ValuesIn(mla_table()), row_name);

// ---- §11.4–§11.5 on the indexer K cache (compressor.md §7): raw fp32 scales ----

// One page of P = 2 entries (stride 2·132 + 4), both written: 128 codes 0x78 with scale 2^-8.
Verdict compare_indexer(const std::function<void(std::vector<uint8_t>& want,
                                                 std::vector<uint8_t>& got)>& edit) {
  std::vector<uint8_t> want(268, 0x22);
  for (int j = 0; j < 2; ++j) {
    std::fill_n(want.begin() + 128 * j, 128, 0x78);
    const float s = 0x1p-8f;
    std::memcpy(want.data() + 256 + 4 * j, &s, 4);
  }
  std::vector<uint8_t> got = want;
  edit(want, got);
  return compare_compressed_cache("kv_cache", {DType::U8, {1, 268}, got.data()},
                                  {DType::U8, {1, 268}, want.data()}, EntryLayout::indexer_k, 2,
                                  {0, 1}, Tolerance{});
}
void set_scale(std::vector<uint8_t>& page, int j, float s) {
  std::memcpy(page.data() + 256 + 4 * j, &s, 4);
}

std::vector<Row> indexer_table() {
  std::vector<Row> rows;
  const auto both = [&](const std::string& n, bool ok,
                        std::function<void(std::vector<uint8_t>&, std::vector<uint8_t>&, int)> e) {
    for (At at : {At::first, At::last})
      rows.push_back({n + suffix(at), ok, [=] {
                        const int j = at == At::first ? 0 : 1;
                        return compare_indexer([&](auto& w, auto& g) { e(w, g, j); });
                      }});
  };
  // §11.4: raw scales match when equal or one is exactly twice the other.
  const auto scale = [&](const std::string& n, bool ok, float got_scale, uint8_t got_code) {
    both("scale_" + n, ok, [=](auto&, auto& g, int j) {
      set_scale(g, j, got_scale);
      std::fill_n(g.begin() + 128 * j, 128, got_code);
    });
  };
  scale("twice_same_values", true, 0x1p-7f, 0x70);  // 1.0 = 128·2^-7
  // Half the scale: 1.0 is out of reach (448·2^-9 = 0.875); §11.5 rule 2 with S = 2^-8, v* = 1:
  // the step is 2^-8·2^(8-3) = 0.125.
  scale("half_at_bound", true, 0x1p-9f, 0x7E);
  scale("half_past_bound", false, 0x1p-9f, 0x7D);  // 416·2^-9 = 0.8125
  scale("four_times", false, 0x1p-6f, 0x68);         // 1.0 = 64·2^-6
  scale("one_and_a_half_times", false, 0x1.8p-8f, 0x78);
  scale("nan", false, std::nanf(""), 0x78);
  scale("negative", false, -0x1p-8f, 0x78);
  scale("zero", false, 0.0f, 0x78);
  scale("inf", false, std::numeric_limits<float>::infinity(), 0x78);
  const auto code = [&](const std::string& n, bool ok, uint8_t want, uint8_t got) {
    both("code_" + n, ok, [=](auto& w, auto& g, int j) {
      const int d = 128 * j + (j == 0 ? 0 : 127);
      w[static_cast<size_t>(d)] = want;
      g[static_cast<size_t>(d)] = got;
    });
  };
  code("one_step", true, 0x78, 0x77);
  code("two_steps", false, 0x78, 0x7A);
  code("want_number_got_nan", false, 0x78, 0x7F);
  code("want_nan_got_nan_of_other_sign", false, 0xFF, 0x7F);
  both("padding", false,
       [](auto&, auto& g, int j) { g[static_cast<size_t>(j == 0 ? 264 : 267)] ^= 1; });
  return rows;
}
INSTANTIATE_TEST_SUITE_P(IndexerCache, Contract, ::testing::ValuesIn(indexer_table()), row_name);

// ---- §11.6 logits bound: one computation against the exact X, within B ----

// Keys 0..3 of one row of S = 6 logits (L = 4): X = 1, 1, a NaN key, 0.5 with B = 2^-20, 2^-20,
// 0, 2^-22; columns 4 and 5 lie past L.
constexpr int64_t kS = 6;
ExactLogits hand_row() {
  ExactLogits ex;
  ex.X = {1.0, 1.0, 0.0, 0.5};
  ex.B = {0x1p-20, 0x1p-20, 0.0, 0x1p-22};
  ex.nan = {false, false, true, false};
  ex.heads = 1;
  return ex;
}
std::vector<float> hand_logits() {
  const float ninf = -std::numeric_limits<float>::infinity();
  return {1.0f, 1.0f, std::nanf(""), 0.5f, ninf, ninf};
}

// The logits of a single key against the oracle: H heads of 128 codes q, 128 key codes, w, ks.
ExactLogits one_key(const std::vector<uint8_t>& q, const std::vector<float>& w, uint8_t key_code,
                    float ks) {
  const std::vector<uint8_t> key(128, key_code);
  return exact_logits(q.data(), w.data(), static_cast<int64_t>(w.size()), {key.data()}, {ks});
}
// The float nearest x on the side of x toward `dir` (+1 or -1); x itself when representable.
float float_on_side(double x, double dir) {
  float f = static_cast<float>(x);
  if ((f - x) * dir < 0) f = std::nextafter(f, static_cast<float>(dir * HUGE_VAL));
  return f;
}
// Within the bound X ± B on the side `away` (+1 above, -1 below), or the next float past it.
float at_or_past(double X, double B, double away, bool past) {
  const float v = float_on_side(X + away * B, -away);
  return past ? std::nextafter(v, static_cast<float>(away * HUGE_VAL)) : v;
}
double gamma(int n) { return n * 0x1p-24 / (1 - n * 0x1p-24); }  // §11.6

std::vector<Row> logits_table() {
  std::vector<Row> rows;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const auto col = [&](const std::string& n, bool ok, int64_t j, float v) {
    rows.push_back({n, ok, [=] {
                      std::vector<float> got = hand_logits();
                      got[static_cast<size_t>(j)] = v;
                      return verdict(logits_violation(got.data(), kS, hand_row()));
                    }});
  };
  // First key (X = 1, B = 2^-20) and last key (X = 0.5, B = 2^-22): |v - X| <= B.
  col("as_expected", true, 0, 1.0f);
  col("at_bound_above_first", true, 0, 1.0f + 0x1p-20f);
  col("at_bound_above_last", true, 3, 0.5f + 0x1p-22f);
  col("at_bound_below_first", true, 0, 1.0f - 0x1p-20f);
  col("at_bound_below_last", true, 3, 0.5f - 0x1p-22f);
  col("inside_bound_first", true, 0, 1.0f + 0x1p-21f);
  col("inside_bound_last", true, 3, 0.5f - 0x1p-23f);
  col("past_bound_above_first", false, 0, 1.0f + 0x1p-20f + 0x1p-23f);
  col("past_bound_above_last", false, 3, 0.5f + 0x1p-22f + 0x1p-24f);
  col("past_bound_below_first", false, 0, 1.0f - 0x1p-20f - 0x1p-24f);
  col("past_bound_below_last", false, 3, 0.5f - 0x1p-22f - 0x1p-25f);
  col("nan_at_number_first", false, 0, nan);
  col("nan_at_number_last", false, 3, nan);
  col("plus_inf_at_number", false, 0, inf);
  col("minus_inf_at_number", false, 3, -inf);
  col("number_at_nan_key", false, 2, 0.0f);
  col("minus_inf_at_nan_key", false, 2, -inf);
  col("nan_of_other_sign_at_nan_key", true, 2, -nan);
  col("past_length_zero_first", false, 4, 0.0f);
  col("past_length_zero_last", false, 5, 0.0f);
  col("past_length_nan", false, 5, nan);
  col("past_length_plus_inf", false, 4, inf);
  // indexer.md §4.2: H = 0 gives +0 exactly, whatever B.
  const auto empty_heads = [&](const std::string& n, bool ok, float v) {
    rows.push_back({n, ok, [=] {
                      ExactLogits ex;
                      ex.X = {0.0, 0.0};
                      ex.B = {0x1p-149, 0x1p-149};
                      ex.nan = {false, false};
                      const std::vector<float> got = {0.0f, v, -inf};
                      return verdict(logits_violation(got.data(), 3, ex));
                    }});
  };
  empty_heads("no_heads_plus_zero", true, 0.0f);
  empty_heads("no_heads_minus_zero", false, -0.0f);
  empty_heads("no_heads_nan", false, nan);
  empty_heads("no_heads_smallest_subnormal", false, 0x1p-149f);
  // The oracle's X and B (§11.6) against values hand-computed from the formula.
  // One head, every code 1.0, w = 1, ks = 1: X = 128, B = 128·γ(129) + 2·2^-149.
  const auto single = [&](const std::string& n, bool ok, double away, bool past) {
    rows.push_back({n, ok, [=] {
                      const std::vector<uint8_t> q(128, 0x38);
                      const double B = 128 * gamma(129) + 2 * 0x1p-149;
                      const float row[2] = {at_or_past(128, B, away, past), -inf};
                      return verdict(logits_violation(row, 2, one_key(q, {1.0f}, 0x38, 1.0f)));
                    }});
  };
  single("oracle_one_head_at_bound_above", true, 1, false);
  single("oracle_one_head_past_bound_above", false, 1, true);
  single("oracle_one_head_at_bound_below", true, -1, false);
  single("oracle_one_head_past_bound_below", false, -1, true);
  // Two heads q = +1 and -1, w = 0.5 and -0.25, keys 1.0, ks = 2^-3: the second head's dot -128
  // is cut by the ReLU, so X = 2^-3·0.5·128 = 8; B = 2^-3·γ(130)·(0.5 + 0.25)·128 + 1.25·2^-149.
  const auto two = [&](const std::string& n, bool ok, double away, bool past) {
    rows.push_back({n, ok, [=] {
                      std::vector<uint8_t> q(256, 0x38);
                      std::fill(q.begin() + 128, q.end(), uint8_t{0xB8});
                      const double B = 0x1p-3 * gamma(130) * 96 + 1.25 * 0x1p-149;
                      const float row[2] = {at_or_past(8, B, away, past), -inf};
                      return verdict(
                          logits_violation(row, 2, one_key(q, {0.5f, -0.25f}, 0x38, 0x1p-3f)));
                    }});
  };
  two("oracle_relu_at_bound_above", true, 1, false);
  two("oracle_relu_past_bound_above", false, 1, true);
  two("oracle_relu_at_bound_below", true, -1, false);
  two("oracle_relu_past_bound_below", false, -1, true);
  // A key with a NaN code (0xFF) makes the logit NaN (indexer.md §4).
  const auto nan_key = [&](const std::string& n, bool ok, float v) {
    rows.push_back({n, ok, [=] {
                      const std::vector<uint8_t> q(128, 0x38);
                      const float row[1] = {v};
                      return verdict(logits_violation(row, 1, one_key(q, {1.0f}, 0xFF, 1.0f)));
                    }});
  };
  nan_key("oracle_nan_key_nan", true, nan);
  nan_key("oracle_nan_key_number", false, 0.0f);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(LogitsBound, Contract, ::testing::ValuesIn(logits_table()), row_name);

// ---- §11.6 two computations (fixture against library): |a - b| <= factor·B ----

std::vector<Row> logits_pair_table() {
  std::vector<Row> rows;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const auto pair = [&](const std::string& n, bool ok, int64_t j, float want, float got,
                        double factor = 2) {
    rows.push_back({n, ok, [=] {
                      std::vector<float> w = hand_logits(), g = hand_logits();
                      w[static_cast<size_t>(j)] = want;
                      g[static_cast<size_t>(j)] = got;
                      return compare_logits({hand_row()}, g.data(), w.data(), kS, factor);
                    }});
  };
  // 2B = 2^-19 at the first key, 2^-21 at the last.
  pair("at_2B_above_first", true, 0, 1.0f, 1.0f + 0x1p-19f);
  pair("at_2B_below_first", true, 0, 1.0f, 1.0f - 0x1p-19f);
  pair("at_2B_above_last", true, 3, 0.5f, 0.5f + 0x1p-21f);
  pair("at_2B_below_last", true, 3, 0.5f, 0.5f - 0x1p-21f);
  pair("inside_2B", true, 0, 1.0f + 0x1p-20f, 1.0f - 0x1p-21f);
  pair("past_2B_above_first", false, 0, 1.0f, 1.0f + 0x1p-19f + 0x1p-23f);
  pair("past_2B_below_first", false, 0, 1.0f, 1.0f - 0x1p-19f - 0x1p-24f);
  pair("past_2B_above_last", false, 3, 0.5f, 0.5f + 0x1p-21f + 0x1p-24f);
  pair("past_2B_below_last", false, 3, 0.5f, 0.5f - 0x1p-21f - 0x1p-25f);
  pair("bound_factor_1_at_bound", true, 0, 1.0f, 1.0f + 0x1p-20f, 1);
  pair("bound_factor_1_past_bound", false, 0, 1.0f, 1.0f + 0x1p-20f + 0x1p-23f, 1);
  pair("bound_factor_4_at_bound", true, 3, 0.5f, 0.5f - 0x1p-20f, 4);
  pair("want_number_got_nan", false, 0, 1.0f, nan);
  pair("want_nan_got_number", false, 3, nan, 0.5f);
  pair("nan_in_both_at_a_number", false, 0, nan, nan);
  pair("numbers_in_both_at_a_nan_key", false, 2, 0.0f, 0.0f);
  pair("want_nan_got_number_at_nan_key", false, 2, nan, 0.0f);
  pair("nan_of_other_sign_at_nan_key", true, 2, nan, -nan);
  pair("want_plus_inf_got_minus_inf", false, 0, inf, -inf);
  pair("want_number_got_inf", false, 3, 0.5f, inf);
  pair("got_past_length_zero_first", false, 4, -inf, 0.0f);
  pair("got_past_length_nan_last", false, 5, -inf, nan);
  pair("want_past_length_zero", false, 5, 0.0f, -inf);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(LogitsPair, Contract, ::testing::ValuesIn(logits_pair_table()), row_name);

// ---- §11.7 band rule: K = 512 indices of a row of L = 600 keys ----

constexpr int kL = 600, kK = 512;
// X_i = 600 - i (decreasing: keys 0..511 are the top) or X_i = i (increasing: keys 599..88), every
// bound B = b; keys [nan_from, nan_to) hold a NaN code.
struct Band {
  ExactLogits ex;
  std::vector<int32_t> sel = std::vector<int32_t>(kK);
  Band(bool increasing, double b, int nan_to = 0) {
    for (int i = 0; i < kL; ++i) {
      ex.X.push_back(increasing ? i : kL - i);
      ex.B.push_back(b);
      ex.nan.push_back(i < nan_to);
    }
    ex.heads = 1;
    for (int k = 0; k < kK; ++k) sel[size_t(k)] = increasing ? kL - 1 - k : k;  // canonical
  }
  Verdict judge(bool canonical, double factor = 1) const {
    return verdict(band_rule_violation(sel.data(), kK, ex, factor, canonical));
  }
};

std::vector<Row> band_table() {
  std::vector<Row> rows;
  // One row per mode; `canonical` / `vllm`: whether that mode must accept.
  const auto row = [&](const std::string& n, bool canonical, bool vllm, std::function<Band()> make,
                       double factor = 1) {
    rows.push_back({n + "_canonical", canonical, [=] { return make().judge(true, factor); }});
    rows.push_back({n + "_vllm", vllm, [=] { return make().judge(false, factor); }});
  };
  row("top_keys", true, true, [] { return Band(false, 0.1); });
  row("top_keys_of_increasing_row", true, true, [] { return Band(true, 0.1); });
  row("last_key_wrongly_taken_at_K_minus_1", false, false, [] {
    Band r(false, 0.1);
    r.sel[kK - 1] = kL - 1;  // key 599 (X = 1) instead of key 511 (X = 89)
    return r;
  });
  row("last_key_wrongly_left_out", false, false, [] {
    Band r(true, 0.1);  // the top is 599..88; 598..88 then 87 leaves out the last key
    for (int k = 0; k < kK; ++k) r.sel[size_t(k)] = kL - 2 - k;
    return r;
  });
  row("first_key_wrongly_left_out", false, false, [] {
    Band r(false, 0.1);
    r.sel[0] = kK;
    return r;
  });
  row("index_L_at_K_minus_1", false, false, [] {
    Band r(false, 0.1);
    r.sel[kK - 1] = kL;
    return r;
  });
  row("index_minus_one_at_K_minus_1", false, false, [] {
    Band r(false, 0.1);
    r.sel[kK - 1] = -1;
    return r;
  });
  row("index_minus_one_first", false, false, [] {
    Band r(false, 0.1);
    r.sel[0] = -1;
    return r;
  });
  row("duplicate_at_K_minus_1", false, false, [] {
    Band r(false, 0.1);
    r.sel[kK - 1] = r.sel[0];
    return r;
  });
  // Swapping keys 511 (X = 89) and 512 (X = 88): upper(512) = 88 + B, lower(511) = 89 - B.
  const auto swapped = [](double b) {
    return [b] {
      Band r(false, b);
      r.sel[kK - 1] = kK;
      return r;
    };
  };
  row("swap_at_bound", true, true, swapped(0.5));
  row("swap_inside_bound", true, true, swapped(0.75));
  row("swap_past_bound", false, false, swapped(0.5 - 0x1p-20));
  row("swap_at_2B", true, true, swapped(0.25), 2);
  row("swap_past_1_5B", false, false, swapped(0.25), 1.5);
  row("swap_of_equal_scores", true, true, [] {
    Band r(false, 0);
    r.ex.X[kK] = r.ex.X[kK - 1];
    r.sel[kK - 1] = kK;
    return r;
  });
  // Canonical order: each key's X + B >= the next one's X - B.
  const auto reordered = [](double b, int k) {
    return [b, k] {
      Band r(false, b);
      std::swap(r.sel[size_t(k)], r.sel[size_t(k + 1)]);
      return r;
    };
  };
  row("order_first_pair_swapped", false, true, reordered(0.1, 0));
  row("order_last_pair_swapped", false, true, reordered(0.1, kK - 2));
  row("order_swap_at_bound", true, true, reordered(0.5, 10));
  row("order_swap_past_bound", false, true, reordered(0.5 - 0x1p-20, 10));
  row("reversed", false, true, [] {
    Band r(false, 0.1);
    std::reverse(r.sel.begin(), r.sel.end());
    return r;
  });
  // NaN keys 0..99 count as -inf with bound 0, ties by index: canonical takes the 500 numbers, then
  // NaN keys 0..11. vllm checks a row holding a NaN for distinct in-range entries only.
  const auto nan_row = [] {
    Band r(false, 0.1, 100);
    for (int k = 0; k < kK; ++k) r.sel[size_t(k)] = k < 500 ? 100 + k : k - 500;
    return r;
  };
  row("nan_keys_last_by_index", true, true, nan_row);
  row("nan_keys_of_higher_index", false, true, [=] {
    Band r = nan_row();
    for (int k = 500; k < kK; ++k) r.sel[size_t(k)] = 88 + k - 500;
    return r;
  });
  row("nan_key_over_number", false, true, [=] {
    Band r = nan_row();
    r.sel[0] = 50;  // NaN key 50 instead of key 100 (X = 500)
    return r;
  });
  row("nan_keys_order_swapped", false, true, [=] {
    Band r = nan_row();
    std::swap(r.sel[500], r.sel[501]);
    return r;
  });
  row("nan_row_duplicate_at_K_minus_1", false, false, [=] {
    Band r = nan_row();
    r.sel[kK - 1] = r.sel[500];
    return r;
  });
  row("nan_row_index_L_at_K_minus_1", false, false, [=] {
    Band r = nan_row();
    r.sel[kK - 1] = kL;
    return r;
  });
  return rows;
}
INSTANTIATE_TEST_SUITE_P(BandRule, Contract, ::testing::ValuesIn(band_table()), row_name);

// ---- §11.8 attention tolerance against the reference ----

// Token 0 with a valid entry, token 1 without; one head; n = 0 columns, so 2γ(n + 1) = 2γ(1) is
// 2^-23·(1 + 2^-24 + ...), just above 2^-23. Accept |o - o_ref| <= 2^-7·|o_ref| +
// (2^-7 + 8δ + 2γ(1))·M, with M and δ of token 0 given per row.
AttentionBound bound_of(double M, double delta) {
  AttentionBound b;
  b.T = 2;
  b.H = 1;
  b.n = 0;
  b.M = {M, 0};
  b.delta = {delta, 0};
  b.empty = {false, true};
  return b;
}

std::vector<Row> attention_out_table() {
  std::vector<Row> rows;
  // Reference rows: token 0 all 1.0 but dim 1 = +0 and dim 511 = -1.0; token 1 all +0.
  const auto row = [&](const std::string& n, bool ok, int64_t t, int d, uint16_t ref, uint16_t got,
                       double M = 1, double delta = 0) {
    rows.push_back({n, ok, [=] {
                      std::vector<uint16_t> r(1024, 0x3F80);
                      r[1] = 0x0000;
                      r[511] = 0xBF80;
                      std::fill(r.begin() + 512, r.end(), uint16_t{0});
                      r[size_t(t * 512 + d)] = ref;
                      std::vector<uint16_t> g = r;
                      g[size_t(t * 512 + d)] = got;
                      const AttentionBound b = bound_of(M, delta);
                      return verdict(attention_out_violation(b, g.data(), r.data()));
                    }});
  };
  // M = 1, δ = 0: at o_ref = 1 the bound is 2^-6 + 2γ(1). bf16 steps: 2^-7 above 1, 2^-8 below.
  row("identical", true, 0, 0, 0x3F80, 0x3F80);
  row("at_bound_above_first", true, 0, 0, 0x3F80, 0x3F82);    // 1 + 2^-6
  row("past_bound_above_first", false, 0, 0, 0x3F80, 0x3F83);  // 1 + 3·2^-7
  row("at_bound_below_first", true, 0, 0, 0x3F80, 0x3F7C);    // 1 - 2^-6
  row("past_bound_below_first", false, 0, 0, 0x3F80, 0x3F7B);  // 1 - 5·2^-8
  row("at_bound_negative_last", true, 0, 511, 0xBF80, 0xBF82);
  row("past_bound_negative_last", false, 0, 511, 0xBF80, 0xBF83);
  // At o_ref = 0 only the M term is left: 2^-7 + 2γ(1).
  row("at_bound_zero_reference", true, 0, 1, 0x0000, 0x3C00);     // 2^-7
  row("past_bound_zero_reference", false, 0, 1, 0x0000, 0x3C01);  // 2^-7 + 2^-15
  // M = 2: 2^-7 + (2^-7 + 2γ(1))·2 = 3·2^-7 + 4γ(1).
  row("at_bound_M_2", true, 0, 0, 0x3F80, 0x3F83, 2);
  row("past_bound_M_2", false, 0, 0, 0x3F80, 0x3F84, 2);
  // δ = 2^-9: 8δ = 2^-6, the bound 2^-5 + 2γ(1).
  row("at_bound_delta", true, 0, 0, 0x3F80, 0x3F84, 1, 0x1p-9);
  row("past_bound_delta", false, 0, 0, 0x3F80, 0x3F85, 1, 0x1p-9);
  row("want_number_got_nan", false, 0, 0, 0x3F80, 0x7FC0);
  row("want_nan_got_number", false, 0, 511, 0x7FC0, 0xBF80);
  row("want_number_got_inf", false, 0, 511, 0xBF80, 0xFF80);
  row("nan_rows_identical", true, 0, 5, 0x7FC0, 0x7FC0);
  // A token without a valid entry: +0 rows exactly.
  row("empty_token_minus_zero_first", false, 1, 0, 0x0000, 0x8000);
  row("empty_token_minus_zero_last", false, 1, 511, 0x0000, 0x8000);
  row("empty_token_smallest_subnormal", false, 1, 511, 0x0000, 0x0001);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(AttentionOut, Contract, ::testing::ValuesIn(attention_out_table()),
                         row_name);

std::vector<Row> attention_lse_table() {
  std::vector<Row> rows;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // lse of token 0 (reference 1.0 unless given) and of token 1 (no valid entry: +inf).
  const auto row = [&](const std::string& n, bool ok, int64_t t, float ref, float got) {
    rows.push_back({n, ok, [=] {
                      float r[2] = {1.0f, inf};
                      r[t] = ref;
                      float g[2] = {r[0], r[1]};
                      g[t] = got;
                      return verdict(attention_lse_violation(bound_of(1, 0), g, r));
                    }});
  };
  // δ = 0: the bound at lse_ref = 1 is 2^-20 + 2γ(1), just above 2^-20 + 2^-23.
  row("identical", true, 0, 1.0f, 1.0f);
  row("at_bound_above", true, 0, 1.0f, 1.0f + 0x1p-20f + 0x1p-23f);
  row("past_bound_above", false, 0, 1.0f, 1.0f + 0x1p-20f + 0x1p-22f);
  row("at_bound_below", true, 0, 1.0f, 1.0f - 0x1p-20f - 0x1p-23f);
  row("past_bound_below", false, 0, 1.0f, 1.0f - 0x1p-20f - 0x1p-23f - 0x1p-24f);
  row("want_number_got_nan", false, 0, 1.0f, nan);
  row("want_nan_got_number", false, 0, nan, 1.0f);
  row("want_number_got_inf", false, 0, 1.0f, inf);
  row("nan_and_nan", true, 0, nan, -nan);
  row("empty_token_inf", true, 1, inf, inf);
  row("empty_token_number", false, 1, inf, 1.0f);
  row("empty_token_nan", false, 1, inf, nan);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(AttentionLse, Contract, ::testing::ValuesIn(attention_lse_table()),
                         row_name);

// The terms of §11.8 from the inputs, by hand. Token 0 sees window entry 0 (every value 1.0) and
// compressed entry 0 (NoPE 2.0·2^1 = 4.0, RoPE -3.0); token 1 sees nothing. q = 1.0 everywhere,
// scale 2^-4: Σ|q|·|K| is 512 and 448·4 + 64·3 = 1984, the scores 32 and 2^-4·(1792 - 192) = 100.
TEST(CheckerOracle, AttentionBoundTermsByHand) {
  test::MlaPages window(1, 2), compressed(1, 2);
  window.put_uniform(0, 0x38, 127, 0x3F80);
  compressed.put_uniform(0, 0x40, 128, 0xC040);
  test::AttentionCase c(2, 1, std::move(window), 1, std::move(compressed), 1);
  std::fill_n(c.q_row(0, 0), 512, uint16_t{0x3F80});
  c.scale = 0x1p-4f;
  c.wslot(0, 0) = 0;
  c.cslot(0, 0) = 0;
  const AttentionBound b = attention_bound(c.inputs());
  EXPECT_EQ(b.n, 2);  // Nw + Nc, the columns, valid or not
  EXPECT_EQ(b.M, (std::vector<double>{4, 0}));
  EXPECT_EQ(b.empty, (std::vector<bool>{false, true}));
  ASSERT_EQ(b.delta.size(), 2u);
  EXPECT_DOUBLE_EQ(b.delta[0], gamma(512) * 0x1p-4 * 1984 + 0x1p-22 * 100);
  // out: 2^-7·|o_ref| + (2^-7 + 8δ + 2γ(3))·M; lse: 2^-20·|lse_ref| + 2δ + 2γ(3).
  EXPECT_DOUBLE_EQ(b.out_bound(0, 0, -2.0), 0x1p-6 + (0x1p-7 + 8 * b.delta[0] + 2 * gamma(3)) * 4);
  EXPECT_DOUBLE_EQ(b.lse_bound(0, 0, -8.0), 0x1p-17 + 2 * b.delta[0] + 2 * gamma(3));
}

}  // namespace
}  // namespace dsv4cpu::testing
