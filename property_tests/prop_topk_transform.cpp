// Properties of topk_transform_512 and topk_transform_1024 (indexer.md §5): every registered
// variant, on every Highway target and with 1, 2 and 8 threads (whatever the processors), gives
// exactly the reference's indices (both modes, the page transform) on rows built to defeat
// sampling selections.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "generators.hpp"
#include "prop_util.hpp"

namespace dsv4cpu::prop {
namespace {

const testing::Plan kEveryVariant{true, std::nullopt, true, {1, 2, 8}};
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- topk_transform_512 / topk_transform_1024 ----

// Row contents. The sawtooth rows repeat every `period` elements; with period = L / 256 they
// defeat a sample taken at evenly spaced places (rising teeth: the sample sees only low values,
// falling teeth: only high ones), the canonical selection's worst case.
enum class RowPattern {
  random,
  ties,
  constant,
  ascending,
  descending,
  inf_nan,
  mostly_nan,
  signed_zero_tiny,
  rising_teeth,
  falling_teeth
};
const char* name(RowPattern p) {
  static const char* names[] = {"random",       "ties",         "constant",   "ascending",
                                "descending",   "inf_nan",      "mostly_nan", "signed_zero_tiny",
                                "rising_teeth", "falling_teeth"};
  return names[static_cast<int>(p)];
}

void fill_row(std::mt19937_64& rng, RowPattern p, float* s, int64_t L, int64_t period) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int distinct = 1 + static_cast<int>(rng() % 6);
  const float c = normal(rng);
  for (int64_t i = 0; i < L; ++i) {
    float x = normal(rng);
    switch (p) {
      case RowPattern::random:
        break;
      case RowPattern::ties:
        x = static_cast<float>(rng() % static_cast<uint64_t>(distinct));
        break;
      case RowPattern::constant:
        x = c;
        break;
      case RowPattern::ascending:
        x = static_cast<float>(i / (1 + distinct % 3));
        break;
      case RowPattern::descending:
        x = -static_cast<float>(i / (1 + distinct % 3));
        break;
      case RowPattern::inf_nan: {
        const uint64_t r = rng() % 10;
        x = r == 0 ? nan : r == 1 ? -kInf : r == 2 ? kInf : static_cast<float>(rng() % 3);
        break;
      }
      case RowPattern::mostly_nan:
        x = rng() % 8 ? nan : (rng() % 2 ? -kInf : x);
        break;
      case RowPattern::signed_zero_tiny: {
        const uint64_t r = rng() % 4;
        x = r == 0 ? 0.0f : r == 1 ? -0.0f : std::ldexp(x, -140);  // subnormals
        break;
      }
      case RowPattern::rising_teeth:
        x = static_cast<float>(i % period) + 0.25f * x;
        break;
      case RowPattern::falling_teeth:
        x = -static_cast<float>(i % period) + 0.25f * x;
        break;
    }
    s[i] = x;
  }
}

struct TopkCase {
  int64_t K = 512;
  TopkMode mode = TopkMode::canonical;
  std::vector<int64_t> lens;
  std::vector<RowPattern> patterns;
  std::vector<int64_t> periods;
  int64_t S_pad = 0;
  DType lens_dtype = DType::I32;
  bool paged = false;
  BlockTable table;
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const TopkCase& c) {
  os << "TopkCase{K=" << c.K << ", mode=" << (c.mode == TopkMode::canonical ? "canonical" : "vllm")
     << ", lens=";
  print_list(os, c.lens) << ", patterns=[";
  for (size_t i = 0; i < c.patterns.size(); ++i)
    os << (i ? ", " : "") << name(c.patterns[i]) << "/" << c.periods[i];
  os << "], S_pad=" << c.S_pad << ", " << dtype_name(c.lens_dtype) << ", paged=" << c.paged;
  if (c.paged) os << ", " << c.table;
  return os << ", " << c.seed << "}";
}

rc::Gen<TopkCase> gen_topk_case() {
  return rc::gen::exec([] {
    TopkCase c;
    c.K = *rc::gen::weightedElement<int64_t>({{3, 512}, {1, 1024}});
    c.mode =
        c.K == 512 ? *rc::gen::element(TopkMode::canonical, TopkMode::vllm) : TopkMode::canonical;
    const int64_t B = *rc::gen::inRange<int64_t>(0, 4);
    for (int64_t b = 0; b < B; ++b) {
      const auto p = static_cast<RowPattern>(*rc::gen::weightedElement<int>(
          {{2, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}, {2, 8}, {2, 9}}));
      const bool teeth = p == RowPattern::rising_teeth || p == RowPattern::falling_teeth;
      // L = K - 1, K, K + 1: the boundary between the identity rows and a selection.
      int64_t L =
          *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::inRange<int64_t>(0, c.K + 1)},
                                            {2, rc::gen::inRange<int64_t>(c.K - 1, c.K + 2)},
                                            {6, rc::gen::inRange<int64_t>(c.K + 1, c.K + 3000)},
                                            {2, rc::gen::inRange<int64_t>(4096, 30000)}});
      if (teeth) L = *rc::gen::inRange<int64_t>(c.K + 1, 40000);
      const int64_t period = teeth && *rc::gen::arbitrary<bool>()
                                 ? std::max<int64_t>(2, L / 256)
                                 : *rc::gen::inRange<int64_t>(2, 300);
      c.lens.push_back(L);
      c.patterns.push_back(p);
      c.periods.push_back(period);
    }
    c.S_pad = *gen_pad(20);
    c.lens_dtype = *gen_index_dtype();
    c.paged = *rc::gen::arbitrary<bool>();
    if (c.paged) c.table = *gen_block_table(c.lens, *rc::gen::element<int64_t>(1, 16, 64));
    c.seed = *gen_seed();
    return c;
  });
}

void topk_transform_property(const testing::Plan& plan) {
  const TopkCase c = *gen_topk_case();
  std::mt19937_64 rng(c.seed.value);
  const auto B = static_cast<int64_t>(c.lens.size());
  const int64_t S = (B ? *std::max_element(c.lens.begin(), c.lens.end()) : 0) + c.S_pad;
  std::vector<float> scores(static_cast<size_t>(std::max<int64_t>(B * S, 1)));
  fill_garbage(rng, scores.data(), scores.size() * 4);
  for (int64_t b = 0; b < B; ++b)
    fill_row(rng, c.patterns[size_t(b)], &scores[size_t(b * S)], c.lens[size_t(b)],
             c.periods[size_t(b)]);
  const IndexArray lens(c.lens, c.lens_dtype, B, kVector, 0, rng());
  const int64_t width = c.K + static_cast<int64_t>(rng() % 3);
  const char* op = c.K == 512 ? "topk_transform_512" : "topk_transform_1024";
  auto call = [&](const Options& o, std::vector<int32_t>& raw, std::vector<int32_t>& pages) {
    raw.assign(static_cast<size_t>(std::max<int64_t>(B * width, 1)), -7);
    pages = raw;
    const TensorView scores_v(scores.data(), DType::F32, {B, S});
    const MutableTensorView raw_v(raw.data(), DType::I32, {B, width});
    const MutableTensorView pages_v =
        c.paged ? MutableTensorView(pages.data(), DType::I32, {B, width}) : MutableTensorView();
    const TensorView table_v = c.paged ? c.table.array.view() : TensorView();
    const int64_t ps = c.paged ? c.table.block_size : 1;
    if (c.K == 512)
      topk_transform_512(scores_v, lens.view(), table_v, ps, c.mode, raw_v, pages_v, o);
    else
      topk_transform_1024(scores_v, lens.view(), table_v, ps, raw_v, pages_v, o);
  };
  std::vector<int32_t> want_raw, want_pages;
  call(reference(), want_raw, want_pages);
  testing::for_each(testing::runs(op, plan), [&](const testing::Run& run) {
    const std::string label = run.label();
    std::vector<int32_t> raw, pages;
    call(run.options(), raw, pages);
    assert_same_bytes(raw, want_raw, label + " raw_indices");
    assert_same_bytes(pages, want_pages, label + " page_indices");
  });
}
// Both widths share one variant list: the property draws K, so it registers once for both.
const bool kTopkTransform =
    register_property("TopkTransform", "EqualsReference",
                      {"topk_transform_512", "topk_transform_1024"}, kEveryVariant,
                      topk_transform_property);
// Every selecting row sampled (4 runs), candidate buffers of 8 K that fill.
const bool kTopkTransformGated =
    register_gated_property("TopkTransform", "EqualsReference",
                            {"topk_transform_512", "topk_transform_1024"}, kEveryVariant,
                            topk_transform_property);

// ---- a special value at every boundary ----

// What a boundary index receives: NaN, ±inf, −0, or a decoy (a tie with the row's largest value,
// the float just below it).
enum class Special { nan, plus_inf, minus_inf, minus_zero, tie_with_max, below_max };
const char* name(Special s) {
  static const char* names[] = {"nan",        "plus_inf",     "minus_inf",
                                "minus_zero", "tie_with_max", "below_max"};
  return names[static_cast<int>(s)];
}

struct BoundaryCase {
  int64_t K = 512, L = 513;
  TopkMode mode = TopkMode::canonical;
  Special special = Special::nan;
  bool ties = false;  // rows of -1, 0 and 1 (−0 then ties with the zeros), else N(0, 1)
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const BoundaryCase& c) {
  return os << "BoundaryCase{K=" << c.K << ", L=" << c.L
            << ", mode=" << (c.mode == TopkMode::canonical ? "canonical" : "vllm")
            << ", special=" << name(c.special) << ", ties=" << c.ties << ", " << c.seed << "}";
}

rc::Gen<BoundaryCase> gen_boundary_case() {
  return rc::gen::exec([] {
    BoundaryCase c;
    c.K = *rc::gen::weightedElement<int64_t>({{3, 512}, {1, 1024}});
    c.mode =
        c.K == 512 ? *rc::gen::element(TopkMode::canonical, TopkMode::vllm) : TopkMode::canonical;
    c.L = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::inRange<int64_t>(c.K + 1, c.K + 300)},
                                            {1, rc::gen::inRange<int64_t>(c.K + 300, 6000)}});
    // NaN most often: the scans for it (the vllm heap's prefix of K) have the most boundaries.
    c.special = static_cast<Special>(
        *rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}}));
    c.ties = *rc::gen::arbitrary<bool>();
    c.seed = *gen_seed();
    return c;
  });
}

// One row per boundary index of the row (generators.hpp, with K: K − 1 is the last element of
// the prefix the vllm heap starts from), the special value there and nowhere else.
void topk_boundary_property(const testing::Plan& plan) {
  const BoundaryCase c = *gen_boundary_case();
  std::mt19937_64 rng(c.seed.value);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<int64_t> at = boundary_indices(c.L, {c.K});
  const auto B = static_cast<int64_t>(at.size());
  std::vector<float> scores(static_cast<size_t>(B * c.L));
  for (int64_t b = 0; b < B; ++b) {
    float* s = &scores[size_t(b * c.L)];
    for (int64_t i = 0; i < c.L; ++i)
      s[i] = c.ties ? static_cast<float>(static_cast<int>(rng() % 3) - 1) : normal(rng);
    const float top = *std::max_element(s, s + c.L);
    const float special[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, -0.0f, top,
                             std::nextafter(top, -kInf)};
    s[at[size_t(b)]] = special[static_cast<int>(c.special)];
  }
  const IndexArray lens(std::vector<int64_t>(size_t(B), c.L), DType::I32, B, kVector, 0, rng());
  const char* op = c.K == 512 ? "topk_transform_512" : "topk_transform_1024";
  auto call = [&](const Options& o) {
    std::vector<int32_t> raw(static_cast<size_t>(B * c.K), -7);
    const TensorView scores_v(scores.data(), DType::F32, {B, c.L});
    const MutableTensorView raw_v(raw.data(), DType::I32, {B, c.K});
    if (c.K == 512)
      topk_transform_512(scores_v, lens.view(), TensorView(), 1, c.mode, raw_v,
                         MutableTensorView(), o);
    else
      topk_transform_1024(scores_v, lens.view(), TensorView(), 1, raw_v, MutableTensorView(), o);
    return raw;
  };
  const std::vector<int32_t> want = call(reference());
  testing::for_each(testing::runs(op, plan), [&](const testing::Run& run) {
    const std::vector<int32_t> raw = call(run.options());
    for (int64_t b = 0; b < B; ++b)
      if (!std::equal(&raw[size_t(b * c.K)], &raw[size_t((b + 1) * c.K)], &want[size_t(b * c.K)]))
        RC_FAIL(run.label() + ": " + name(c.special) + " at index " +
                std::to_string(at[size_t(b)]) + ": the indices differ from the reference's");
  });
}
const bool kTopkBoundary =
    register_property("TopkTransform", "SpecialAtEveryBoundaryEqualsReference",
                      {"topk_transform_512", "topk_transform_1024"}, kEveryVariant,
                      topk_boundary_property);
const bool kTopkBoundaryGated =
    register_gated_property("TopkTransform", "SpecialAtEveryBoundaryEqualsReference",
                            {"topk_transform_512", "topk_transform_1024"}, kEveryVariant,
                            topk_boundary_property);

}  // namespace
}  // namespace dsv4cpu::prop
