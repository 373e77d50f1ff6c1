// Properties of fused_indexer_q_rope_quant (indexer.md §2): every registered variant, on every
// Highway target and with 1, 2 and 8 threads (whatever the processors), writes exactly the
// reference's bytes, and throws the same error when weights_out overflows or an input is not
// finite (at random or at a boundary index, generators.hpp).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/fallback.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "generators.hpp"
#include "prop_util.hpp"

namespace dsv4cpu::prop {
namespace {

const testing::Plan kEveryVariant{true, std::nullopt, true, {1, 2, 8}};

// ---- fused_indexer_q_rope_quant ----

struct QuantCase {
  int64_t T = 1, H = 64, R = 8;
  std::vector<int64_t> positions;
  DType pos_dtype = DType::I64;
  bool default_scales = true;
  int magnitude = 0;      // q ~ N(0, 1)·2^magnitude per head, plus a few extreme heads
  bool overflow = false;  // a huge weight: weights_out overflows (NonFiniteError)
  bool non_finite = false;  // a NaN or ±inf in q or in the weights (NonFiniteError)
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const QuantCase& c) {
  os << "QuantCase{T=" << c.T << ", H=" << c.H << ", R=" << c.R << ", positions=";
  return print_list(os, c.positions)
         << " " << dtype_name(c.pos_dtype) << ", default_scales=" << c.default_scales
         << ", magnitude=" << c.magnitude << ", overflow=" << c.overflow
         << ", non_finite=" << c.non_finite << ", " << c.seed << "}";
}

rc::Gen<QuantCase> gen_quant_case() {
  return rc::gen::exec([] {
    QuantCase c;
    c.T = *rc::gen::inRange<int64_t>(0, 7);
    c.H = *rc::gen::weightedElement<int64_t>({{3, 64}, {1, 1}, {1, 3}, {1, 16}});
    c.R = *rc::gen::inRange<int64_t>(1, 40);
    for (int64_t t = 0; t < c.T; ++t) c.positions.push_back(*rc::gen::inRange<int64_t>(0, c.R));
    c.pos_dtype = *gen_index_dtype();
    c.default_scales = *rc::gen::arbitrary<bool>();
    c.magnitude = *rc::gen::weightedElement<int>({{4, 0}, {1, -30}, {1, -140}, {1, 20}});
    c.overflow = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.non_finite = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.seed = *gen_seed();
    return c;
  });
}

void q_rope_quant_property(const testing::Plan& plan) {
  const QuantCase c = *gen_quant_case();
  std::mt19937_64 rng(c.seed.value);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t heads = c.T * c.H;
  std::vector<float> q(static_cast<size_t>(std::max<int64_t>(heads * 128, 1)));
  std::vector<float> w(static_cast<size_t>(std::max<int64_t>(heads, 1)));
  // With `overflow`, one head gets a large amax (scale 2^e > 1) and a huge weight.
  const int64_t huge = c.overflow && heads > 0 ? static_cast<int64_t>(rng() % heads) : -1;
  for (int64_t th = 0; th < heads; ++th) {
    const int e = th == huge       ? 30
                  : rng() % 8 == 0 ? static_cast<int>(rng() % 200) - 120
                                   : c.magnitude;
    for (int d = 0; d < 128; ++d) {
      // Some values on bf16 and fp8 rounding ties, the rest random.
      const float x = rng() % 5 == 0 ? std::ldexp(1.0f + static_cast<float>(rng() % 64) / 128.0f,
                                                  static_cast<int>(rng() % 20) - 10)
                                     : normal(rng);
      q[static_cast<size_t>(th * 128 + d)] = std::ldexp(x, e);
    }
    // Weights from huge to subnormal products: w·2^e·softmax_scale·head_scale rounds in order.
    w[static_cast<size_t>(th)] =
        th == huge ? 3e38f : std::ldexp(normal(rng), rng() % 4 == 0 ? -100 - int(rng() % 40) : 0);
  }
  if (c.non_finite && heads > 0) {  // at a boundary of q (the heads' edges among them) or of w
    const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
    if (rng() % 2)
      q[size_t(special_index(rng, boundary_indices(heads * 128), heads * 128))] = bad[rng() % 3];
    else
      w[size_t(special_index(rng, boundary_indices(heads), heads))] = bad[rng() % 3];
  }
  std::vector<float> table(static_cast<size_t>(c.R * 64));
  for (int64_t r = 0; r < c.R; ++r)
    for (int i = 0; i < 32; ++i) {
      const double angle = static_cast<double>(r) * std::pow(10000.0, -i / 32.0);
      table[static_cast<size_t>(r * 64 + i)] = static_cast<float>(std::cos(angle));
      table[static_cast<size_t>(r * 64 + 32 + i)] = static_cast<float>(std::sin(angle));
    }
  const IndexArray pos(c.positions, c.pos_dtype, c.T, kVector, 0, rng());
  const float softmax_scale = c.default_scales ? kIndexerSoftmaxScale : 0.37f;
  const float head_scale = c.default_scales ? kIndexerHeadScale : 1.5f;
  auto call = [&](const Options& o, std::vector<uint8_t>& codes, std::vector<float>& w_out) {
    codes.assign(static_cast<size_t>(std::max<int64_t>(heads * 128, 1)), 0xA5);
    w_out.assign(static_cast<size_t>(std::max<int64_t>(heads, 1)), -3.0f);
    return capture([&] {
      fused_indexer_q_rope_quant(TensorView(q.data(), DType::F32, {c.T, c.H, 128}),
                                 TensorView(w.data(), DType::F32, {c.T, c.H}), pos.view(),
                                 TensorView(table.data(), DType::F32, {c.R, 64}), softmax_scale,
                                 head_scale,
                                 MutableTensorView(codes.data(), DType::F8_E4M3, {c.T, c.H, 128}),
                                 MutableTensorView(w_out.data(), DType::F32, {c.T, c.H}), o);
    });
  };
  std::vector<uint8_t> want_codes;
  std::vector<float> want_w;
  const Outcome want = call(reference(), want_codes, want_w);
  RC_TAG(want.kind.empty() ? "computed" : "error");
  testing::for_each(
      testing::runs("fused_indexer_q_rope_quant", plan), [&](const testing::Run& run) {
        const std::string label = run.label();
        std::vector<uint8_t> codes;
        std::vector<float> w_out;
        const uint64_t handed = detail::fallback_count();
        const Outcome got = call(run.options(), codes, w_out);
        // No hand-over to the reference (core/fallback.hpp) where the reference succeeds.
        if (want.kind.empty() && detail::fallback_count() != handed)
          RC_FAIL(label + ": handed the call to the reference, which succeeds on it");
        if (!(got == want))
          RC_FAIL(label + ": outcome '" + got.message + "', reference '" + want.message + "'");
        assert_same_bytes(codes, want_codes, label + " q_fp8");
        assert_same_bytes(w_out, want_w, label + " weights_out");
      });
}
const bool kQRopeQuant =
    register_property("FusedIndexerQRopeQuant", "BitExact", "fused_indexer_q_rope_quant",
                      kEveryVariant, q_rope_quant_property);

}  // namespace
}  // namespace dsv4cpu::prop
