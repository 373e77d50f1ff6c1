// inverse_gptj_rope_o_proj (attention.md §4): by hand, position 0 (identity), a quarter turn back,
// hand-picked BF16 and F16 values (subnormal, largest finite), I32 and I64 positions, the fused
// form of the rotation, rope_dim 2 and the whole head; every check of §4.3 on every variant with
// out unchanged (bad-input.md §1), huge finite results accepted; zero-size calls; every variant
// equal to the reference bit for bit with 1 and 2 threads, each hand-over to the reference counted;
// with Options::fresh_outputs (checks while writing) the same bits and the same errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/fallback.hpp"
#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/numerics.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

constexpr const char* kOp = "inverse_gptj_rope_o_proj";
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint32_t kSentinel = 0xA5A5A5A5u;

// All inputs of one call, owned: o [T, H, D] as raw 16-bit patterns of `dtype`, a table [R,
// rope_dim] of identity rows (cos 1, sin 0), positions of `pos_dtype`; out prefilled with a
// sentinel before each run.
struct Case {
  int64_t T, H, D, R, rope_dim;
  DType dtype = DType::BF16, pos_dtype = DType::I64;
  std::vector<uint16_t> o;
  std::vector<int64_t> positions;
  std::vector<float> table;
  std::vector<uint32_t> out;  // fp32 bit patterns

  Case(int64_t T_, int64_t H_, int64_t D_, int64_t R_, int64_t rope_dim_)
      : T(T_), H(H_), D(D_), R(R_), rope_dim(rope_dim_) {
    o.assign(static_cast<size_t>(T * H * D), 0x3F80);
    positions.assign(static_cast<size_t>(T), 0);
    table.assign(static_cast<size_t>(R * rope_dim), 0.0f);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < rope_dim / 2; ++i) cos(r, i) = 1.0f;
  }
  float& cos(int64_t r, int64_t i) { return table[static_cast<size_t>(r * rope_dim + i)]; }
  float& sin(int64_t r, int64_t i) {
    return table[static_cast<size_t>(r * rope_dim + rope_dim / 2 + i)];
  }
  uint16_t& at(int64_t t, int64_t h, int64_t d) {
    return o[static_cast<size_t>((t * H + h) * D + d)];
  }
  float out_at(int64_t t, int64_t h, int64_t d) const {
    return f32_from_bits(out[static_cast<size_t>((t * H + h) * D + d)]);
  }
  // Random bf16 or f16 values of N(0, 1), never zero; random angles.
  void random(std::mt19937_64& rng) {
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> angle(-3.2f, 3.2f);
    for (uint16_t& v : o) {
      float x = normal(rng);
      if (x == 0.0f) x = 1.0f;
      v = dtype == DType::F16 ? to_f16(x) : to_bf16(x);
    }
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < rope_dim / 2; ++i) {
        const float a = angle(rng);
        cos(r, i) = std::cos(a);
        sin(r, i) = std::sin(a);
      }
    for (int64_t& p : positions) p = static_cast<int64_t>(rng() % static_cast<uint64_t>(R));
  }
  // x (|x| within the normal binary16 range, or 0) rounded to binary16 by truncation: the tests
  // need exact patterns, not a rounding rule.
  static uint16_t to_f16(float x) {
    const uint32_t b = f32_bits(x);
    const auto sign = static_cast<uint16_t>(b >> 16 & 0x8000u);
    if ((b & 0x7FFFFFFFu) == 0) return sign;
    if ((b >> 23 & 0xFFu) < 113) return static_cast<uint16_t>(sign | 0x0400);  // 2^-14
    const uint32_t e = (b >> 23 & 0xFFu) - 112, m = (b >> 13) & 0x3FFu;
    return static_cast<uint16_t>(sign | e << 10 | m);
  }
  // The positions as `pos_dtype`.
  std::vector<int32_t> pos32;
  TensorView positions_view() {
    if (pos_dtype == DType::I64) return TensorView(positions.data(), DType::I64, {T});
    pos32.assign(positions.begin(), positions.end());
    return TensorView(pos32.data(), DType::I32, {T});
  }
  struct Views {
    TensorView o, positions, table;
    MutableTensorView out;
  };
  Views views() {
    out.assign(static_cast<size_t>(T * H * D), kSentinel);
    return {TensorView(o.data(), dtype, {T, H, D}), positions_view(),
            TensorView(table.data(), DType::F32, {R, static_cast<int64_t>(table.size()) / R}),
            MutableTensorView(out.data(), DType::F32, {T, H, D})};
  }
  void run(const Views& v, const Options& opt = {}) {
    inverse_gptj_rope_o_proj(v.o, v.positions, v.table, rope_dim, v.out, opt);
  }
  void run(const Options& opt = {}) { run(views(), opt); }
  // bad-input.md §1: the error of every variant, out unchanged (sentinel).
  std::string expect(const char* kind, const std::function<void(Views&)>& edit = {}) {
    Views v = views();
    if (edit) edit(v);
    return testing::expect_error(
        kOp, kind, [&](const Options& opt) { run(v, opt); },
        [&] { return testing::bytes_of(out); });
  }
};

float widen(const Case& c, uint16_t h) {
  return c.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, PositionZeroIsTheIdentity, kOp) {
  // Row 0: cos 1, sin 0. e' = fma(e, 1, RN(o'·0)) = e, o' = fma(o', 1, RN(e·-0)) = o' for non-zero
  // values: out is o widened, for BF16 and F16 o and I32 and I64 positions.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (DType dtype : {DType::BF16, DType::F16})
      for (DType pos_dtype : {DType::I32, DType::I64}) {
        Case c(3, 2, 128, 4, 64);
        c.dtype = dtype;
        c.pos_dtype = pos_dtype;
        std::mt19937_64 rng(1);
        c.random(rng);
        for (int64_t i = 0; i < 32; ++i) {
          c.cos(0, i) = 1.0f;
          c.sin(0, i) = 0.0f;
        }
        c.positions = {0, 0, 0};
        c.run(run.options());
        for (int64_t t = 0; t < 3; ++t)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t d = 0; d < 128; ++d)
              ASSERT_EQ(f32_bits(c.out_at(t, h, d)), f32_bits(widen(c, c.at(t, h, d))))
                  << run.label() << " " << dtype_name(dtype) << " " << dtype_name(pos_dtype)
                  << " t=" << t << " h=" << h << " d=" << d;
      }
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, QuarterTurnBack, kOp) {
  // cos 0, sin 1 (a rotation by +90 degrees undone): e' = fma(e, 0, RN(o'·1)) = o',
  // o' = fma(o', 0, RN(e·-1)) = -e; the NoPE dims are copied. Token 1 at position 2 only.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (DType pos_dtype : {DType::I32, DType::I64}) {
      Case c(2, 3, 16, 3, 8);
      c.pos_dtype = pos_dtype;
      std::mt19937_64 rng(2);
      c.random(rng);
      for (int64_t i = 0; i < 4; ++i) {
        c.cos(2, i) = 0.0f;
        c.sin(2, i) = 1.0f;
      }
      c.positions = {1, 2};
      c.run(run.options());
      for (int64_t h = 0; h < 3; ++h) {
        for (int64_t d = 0; d < 8; ++d)
          ASSERT_EQ(c.out_at(1, h, d), bf16_to_f32(c.at(1, h, d))) << run.label();
        for (int64_t i = 0; i < 4; ++i) {
          const float e = bf16_to_f32(c.at(1, h, 8 + 2 * i));
          const float o = bf16_to_f32(c.at(1, h, 9 + 2 * i));
          ASSERT_EQ(c.out_at(1, h, 8 + 2 * i), o) << run.label() << " h=" << h << " i=" << i;
          ASSERT_EQ(c.out_at(1, h, 9 + 2 * i), -e) << run.label() << " h=" << h << " i=" << i;
        }
      }
    }
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, HandPickedValues, kOp) {
  // D = 6, rope_dim = 4 (one NoPE dim pair, two RoPE pairs); cos 0.5, sin 0.75 for pair 0 and cos
  // -1, sin 0 for pair 1 at position 1. Every product below is exact, so are the sums.
  //   F16:  o = [2^-24 (0x0001), -65504 (0xFBFF), e = 2 (0x4000), o' = -4 (0xC400),
  //          e = 0.5 (0x3800), o' = 3 (0x4200)]
  //   pair 0: e' = 2·0.5 + (-4)·0.75 = -2, o'' = -4·0.5 - 2·0.75 = -3.5
  //   pair 1: e' = 0.5·-1 + 3·0 = -0.5, o'' = 3·-1 - 0.5·0 = -3
  //   BF16: o = [2^-133 (0x0001), -3.3895e38 (0xFF7F), 2, -4, 0.5, 3], the same pairs.
  const float want_pairs[4] = {-2.0f, -3.5f, -0.5f, -3.0f};
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (DType dtype : {DType::F16, DType::BF16}) {
      Case c(1, 1, 6, 2, 4);
      c.dtype = dtype;
      c.positions = {1};
      c.cos(1, 0) = 0.5f;
      c.sin(1, 0) = 0.75f;
      c.cos(1, 1) = -1.0f;
      c.sin(1, 1) = 0.0f;
      if (dtype == DType::F16)
        c.o = {0x0001, 0xFBFF, 0x4000, 0xC400, 0x3800, 0x4200};
      else
        c.o = {0x0001, 0xFF7F, 0x4000, 0xC080, 0x3F00, 0x4040};
      c.run(run.options());
      const std::string where = run.label() + " " + dtype_name(dtype);
      if (dtype == DType::F16) {
        EXPECT_EQ(c.out_at(0, 0, 0), 0x1p-24f) << where;
        EXPECT_EQ(c.out_at(0, 0, 1), -65504.0f) << where;
      } else {
        EXPECT_EQ(f32_bits(c.out_at(0, 0, 0)), 0x00010000u) << where;
        EXPECT_EQ(f32_bits(c.out_at(0, 0, 1)), 0xFF7F0000u) << where;
      }
      for (int k = 0; k < 4; ++k) EXPECT_EQ(c.out_at(0, 0, 2 + k), want_pairs[k]) << where;
    }
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, RotationIsFused, kOp) {
  // Values where fma(e, c, RN(o'·s)) and RN(RN(e·c) + RN(o'·s)) differ, in the first and the last
  // pair of a 64-dim RoPE part (vector body and lanes): every variant gives the fused value, and
  // the odd element fma(o', c, RN(e·-s)).
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  float e = 0, o = 0, cs = 0, sn = 0;
  for (int i = 0; i < 10000000; ++i) {
    e = round_bf16(uni(rng) * 4.0f);
    o = round_bf16(uni(rng) * 4.0f);
    cs = uni(rng);
    sn = uni(rng);
    if (std::fma(e, cs, o * sn) != e * cs + o * sn &&
        std::fma(o, cs, e * -sn) != o * cs + e * -sn)
      break;
  }
  const float even = std::fma(e, cs, o * sn), odd = std::fma(o, cs, e * -sn);
  ASSERT_NE(even, e * cs + o * sn) << "no distinguishing input found";
  ASSERT_NE(odd, o * cs + e * -sn) << "no distinguishing input found";
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    Case c(1, 2, 512, 1, 64);
    for (int64_t pair : {0, 31}) {
      c.at(0, 1, 448 + 2 * pair) = to_bf16(e);
      c.at(0, 1, 449 + 2 * pair) = to_bf16(o);
      c.cos(0, pair) = cs;
      c.sin(0, pair) = sn;
    }
    c.run(run.options());
    for (int64_t pair : {0, 31}) {
      EXPECT_EQ(f32_bits(c.out_at(0, 1, 448 + 2 * pair)), f32_bits(even)) << run.label();
      EXPECT_EQ(f32_bits(c.out_at(0, 1, 449 + 2 * pair)), f32_bits(odd)) << run.label();
    }
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, WholeHeadAndOnePair, kOp) {
  // rope_dim = D (no NoPE dim) and rope_dim = 2 (one pair): cos 0, sin -1 sends (e, o') to
  // (-o', e).
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (int64_t rope_dim : {2, 10}) {
      Case c(2, 1, 10, 1, rope_dim);
      std::mt19937_64 rng(4);
      c.random(rng);
      c.positions = {0, 0};
      for (int64_t i = 0; i < rope_dim / 2; ++i) {
        c.cos(0, i) = 0.0f;
        c.sin(0, i) = -1.0f;
      }
      c.run(run.options());
      for (int64_t t = 0; t < 2; ++t) {
        for (int64_t d = 0; d < 10 - rope_dim; ++d)
          ASSERT_EQ(c.out_at(t, 0, d), bf16_to_f32(c.at(t, 0, d))) << run.label();
        for (int64_t d = 10 - rope_dim; d < 10; d += 2) {
          ASSERT_EQ(c.out_at(t, 0, d), -bf16_to_f32(c.at(t, 0, d + 1))) << run.label();
          ASSERT_EQ(c.out_at(t, 0, d + 1), bf16_to_f32(c.at(t, 0, d))) << run.label();
        }
      }
    }
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, ZeroSizeCallsAreNoOps, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    // T = 0; H = 0 (a NaN table row: no value is used, nothing checked).
    for (int64_t T : {0, 3}) {
      Case c(T, T == 0 ? 4 : 0, 64, 2, 64);
      c.positions.assign(static_cast<size_t>(T), 1);
      c.sin(1, 3) = kNaN;
      EXPECT_NO_THROW(c.run(run.options())) << run.label();
    }
    // Shapes are still checked.
    Case c(0, 4, 64, 2, 64);
    c.rope_dim = 66;
    EXPECT_THROW(c.run(run.options()), ValueError) << run.label();
  });
}

// A valid call for the bad-input tests: T = 3, H = 2, D = 16, rope_dim = 8, R = 5, random.
Case bad_case() {
  Case c(3, 2, 16, 5, 8);
  std::mt19937_64 rng(5);
  c.random(rng);
  c.positions = {4, 0, 2};
  return c;
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, ValidBaseCaseRuns, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    Case c = bad_case();
    EXPECT_NO_THROW(c.run(run.options())) << run.label();
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, RopeDim, "inverse_gptj_rope_o_proj") {
  Case c = bad_case();
  c.rope_dim = 7;
  EXPECT_EQ(c.expect("ValueError"),
            "dsv4cpu::inverse_gptj_rope_o_proj: rope_dim = 7: odd (expected an even rope_dim >= "
            "2)");
  for (int64_t r : {0, -2}) {
    c.rope_dim = r;
    c.expect("ValueError");
  }
  c.rope_dim = 18;  // above D = 16, whatever the table's width
  EXPECT_EQ(c.expect("ValueError"),
            "dsv4cpu::inverse_gptj_rope_o_proj: rope_dim = 18: more than the head's dims "
            "(expected rope_dim <= D = 16)");
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, Shapes, "inverse_gptj_rope_o_proj") {
  Case c = bad_case();
  std::vector<float> f32(3 * 2 * 16);
  EXPECT_EQ(c.expect("ShapeError",
                     [&](auto& v) { v.o = TensorView(f32.data(), DType::F32, {3, 2, 16}); }),
            "dsv4cpu::inverse_gptj_rope_o_proj: o: dtype F32, shape [3, 2, 16], strides [32, 16, "
            "1] (expected BF16 or F16 [*, *, *], contiguous)");
  c.expect("ShapeError", [&](auto& v) { v.o = TensorView(c.o.data(), DType::BF16, {6, 16}); });
  c.expect("ShapeError", [&](auto& v) {
    v.o = TensorView(c.o.data(), DType::BF16, {3, 2, 8}, {32, 16, 1});  // rows not contiguous
  });
  c.expect("ShapeError", [&](auto& v) { v.o = TensorView(); });
  c.expect("ShapeError",
           [&](auto& v) { v.positions = TensorView(c.positions.data(), DType::I64, {2}); });
  c.expect("ShapeError",
           [&](auto& v) { v.positions = TensorView(c.table.data(), DType::F32, {3}); });
  EXPECT_EQ(c.expect("ShapeError",
                     [&](auto& v) { v.table = TensorView(c.table.data(), DType::F32, {4, 10}); }),
            "dsv4cpu::inverse_gptj_rope_o_proj: cos_sin_cache: dtype F32, shape [4, 10], strides "
            "[10, 1] (expected F32 [*, 8], contiguous)");
  c.expect("ShapeError",
           [&](auto& v) { v.table = TensorView(c.o.data(), DType::BF16, {5, 8}); });
  c.expect("ShapeError", [&](auto& v) {
    v.table = TensorView(c.table.data(), DType::F32, {2, 8}, {16, 1});
  });
  std::vector<uint16_t> bf(3 * 2 * 16);
  EXPECT_EQ(c.expect("ShapeError",
                     [&](auto& v) {
                       v.out = MutableTensorView(bf.data(), DType::BF16, {3, 2, 16});
                     }),
            "dsv4cpu::inverse_gptj_rope_o_proj: out: dtype BF16, shape [3, 2, 16], strides [32, "
            "16, 1] (expected F32 [3, 2, 16], contiguous)");
  c.expect("ShapeError",
           [&](auto& v) { v.out = MutableTensorView(c.out.data(), DType::F32, {3, 2, 8}); });
  std::vector<float> wide(3 * 2 * 32);
  c.expect("ShapeError", [&](auto& v) {
    v.out = MutableTensorView(wide.data(), DType::F32, {3, 2, 16}, {64, 32, 1});  // padded rows
  });
  c.expect("ShapeError", [&](auto& v) { v.out = MutableTensorView(); });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, OutOverlapsAnInput, kOp) {
  // out placed over o, positions and the table in turn (the bytes of a larger buffer).
  Case c = bad_case();
  std::vector<uint32_t> big(3 * 2 * 16 + 64, kSentinel);
  const auto snapshot = [&] { return testing::bytes_of(big); };
  const auto overlap = [&](const std::function<void(Case::Views&)>& place) {
    Case::Views v = c.views();
    v.out = MutableTensorView(big.data(), DType::F32, {3, 2, 16});
    place(v);
    return testing::expect_error(
        kOp, "ShapeError", [&](const Options& opt) { c.run(v, opt); }, snapshot);
  };
  EXPECT_EQ(overlap([&](auto& v) {
                      v.o = TensorView(reinterpret_cast<uint16_t*>(big.data() + 8), DType::BF16,
                                       {3, 2, 16});
                    }),
            "dsv4cpu::inverse_gptj_rope_o_proj: out: memory overlaps input o (expected an output "
            "that does not overlap any input)");
  overlap([&](auto& v) {
    v.positions = TensorView(reinterpret_cast<int32_t*>(big.data() + 95), DType::I32, {3});
  });
  overlap([&](auto& v) {
    v.table = TensorView(reinterpret_cast<float*>(big.data() + 60), DType::F32, {5, 8});
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, Positions, "inverse_gptj_rope_o_proj") {
  Case c = bad_case();
  for (DType pos_dtype : {DType::I32, DType::I64}) {
    c.pos_dtype = pos_dtype;
    c.positions = {4, 5, 0};
    EXPECT_EQ(c.expect("IndexError"),
              "dsv4cpu::inverse_gptj_rope_o_proj: positions[1] = 5: position beyond the cos/sin "
              "table (expected position < 5 = rows of cos_sin_cache)");
    c.positions = {4, 0, -1};
    c.expect("IndexError");
  }
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, NonFiniteInputs, kOp) {
  // o: NaN and inf in BF16 and F16 (the first in row-major order); the used table rows; a row no
  // token reads is not checked.
  for (DType dtype : {DType::BF16, DType::F16}) {
    Case c = bad_case();
    c.dtype = dtype;
    std::mt19937_64 rng(6);
    c.random(rng);
    c.positions = {4, 0, 2};
    const uint16_t inf = dtype == DType::F16 ? 0xFC00 : 0xFF80;
    const uint16_t nan = dtype == DType::F16 ? 0x7E00 : 0x7FC0;
    c.at(2, 0, 3) = nan;
    c.at(1, 1, 12) = inf;
    EXPECT_EQ(c.expect("NonFiniteError"),
              "dsv4cpu::inverse_gptj_rope_o_proj: o[1, 1, 12] = -inf: not finite (expected a "
              "finite value)")
        << dtype_name(dtype);
  }
  Case c = bad_case();
  c.sin(2, 1) = kNaN;  // row of token 2
  c.cos(0, 3) = std::numeric_limits<float>::infinity();  // row of token 1
  EXPECT_EQ(c.expect("NonFiniteError"),
            "dsv4cpu::inverse_gptj_rope_o_proj: cos_sin_cache[0, 3] = inf: not finite (expected "
            "a finite value)");
  c = bad_case();
  c.sin(3, 0) = kNaN;  // a row no token reads
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    EXPECT_NO_THROW(c.run(run.options())) << run.label();
  });
  // check_finite = false: no error, out written.
  c = bad_case();
  c.at(0, 0, 0) = 0x7FC0;
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    Options opt = run.options();
    opt.check_finite = false;
    EXPECT_NO_THROW(c.run(opt)) << run.label();
    EXPECT_TRUE(std::isnan(c.out_at(0, 0, 0))) << run.label();
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, NonFiniteResult, kOp) {
  // Finite inputs whose rotated value overflows: 3e38·1 + 3e38·1 at token 1 (position 0), head 1,
  // pair 2; nothing written, and each optimized variant hands the call to the reference once.
  Case c = bad_case();
  c.at(1, 1, 12) = to_bf16(3e38f);
  c.at(1, 1, 13) = to_bf16(3e38f);
  c.cos(0, 2) = 1.0f;
  c.sin(0, 2) = 1.0f;
  EXPECT_EQ(c.expect("NonFiniteError"),
            "dsv4cpu::inverse_gptj_rope_o_proj: token 1 (position 0): head 1 rotated channel 12 "
            "= inf: intermediate overflow (expected finite; nothing was written)");
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    const uint64_t before = detail::fallback_count(detail::Fallback::inverse_gptj_rope_o_proj);
    EXPECT_THROW(c.run(run.options()), NonFiniteError) << run.label();
    EXPECT_EQ(detail::fallback_count(detail::Fallback::inverse_gptj_rope_o_proj) - before,
              run.variant.role == Role::optimized ? 1u : 0u)
        << run.label();
    Case finite = bad_case();
    const uint64_t any = detail::fallback_count();
    finite.run(run.options());
    EXPECT_EQ(detail::fallback_count(), any) << run.label();
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, LargeFiniteResultsPass, kOp) {
  // |x|·(|c| + |s|) above 2^127 with a finite result: e = 2^64, o' = 0, c = 1.5·2^63, s = 0 give
  // e' = 1.5·2^127 exactly (the optimized check's bound fails, its exact test passes); no error,
  // no hand-over to the reference.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    Case c = bad_case();
    c.at(2, 1, 8) = to_bf16(0x1p64f);
    c.at(2, 1, 9) = 0;
    c.cos(2, 0) = 1.5f * 0x1p63f;
    c.sin(2, 0) = 0.0f;
    const uint64_t before = detail::fallback_count();
    EXPECT_NO_THROW(c.run(run.options())) << run.label();
    EXPECT_EQ(detail::fallback_count(), before) << run.label();
    EXPECT_EQ(c.out_at(2, 1, 8), 1.5f * 0x1p127f) << run.label();
    EXPECT_EQ(c.out_at(2, 1, 9), 0.0f) << run.label();
  });
}

DSV4CPU_RUN_TEST(InverseGptjRopeOProjBadInput, FreshOutputsGiveTheSameErrors, kOp) {
  // Options::fresh_outputs: every run throws what it throws without (its out may be written). An
  // input's error comes from the inputs' check (no hand-over); a rotated value's from the
  // reference, handed over once by each optimized variant; no hand-over on finite results.
  struct Bad {
    const char* what;
    std::function<void(Case&)> edit;
    bool computed;
  };
  const std::vector<Bad> cases = {
      {"nan in o", [](Case& c) { c.at(2, 0, 3) = 0x7FC0; }, false},
      {"nan in o's RoPE dims", [](Case& c) { c.at(1, 0, 9) = 0x7FC0; }, false},
      {"inf in o, f16",
       [](Case& c) {
         c.dtype = DType::F16;
         std::mt19937_64 rng(5);
         c.random(rng);
         c.positions = {4, 0, 2};
         c.at(0, 1, 0) = 0x7C00;
       },
       false},
      {"inf in o's non-RoPE dims, after a nan in a table row",
       [](Case& c) {
         c.sin(2, 1) = kNaN;
         c.at(1, 1, 2) = 0xFF80;
       },
       false},
      {"nan in a used table row", [](Case& c) { c.cos(0, 3) = kNaN; }, false},
      {"rotated overflow",
       [](Case& c) {
         c.at(1, 1, 12) = to_bf16(3e38f);
         c.at(1, 1, 13) = to_bf16(3e38f);
         c.cos(0, 2) = 1.0f;
         c.sin(0, 2) = 1.0f;
       },
       true},
  };
  for (const Bad& bad : cases) {
    Case c = bad_case();
    bad.edit(c);
    const std::string want = c.expect("NonFiniteError");
    testing::for_each_run(kOp, [&](const testing::Run& run) {
      Options opt = run.options();
      opt.fresh_outputs = true;
      const uint64_t before = detail::fallback_count(detail::Fallback::inverse_gptj_rope_o_proj);
      try {
        c.run(opt);
        ADD_FAILURE() << run.label() << " " << bad.what << ": no error";
      } catch (const NonFiniteError& e) {
        EXPECT_EQ(e.what(), want) << run.label() << " " << bad.what;
      }
      EXPECT_EQ(detail::fallback_count(detail::Fallback::inverse_gptj_rope_o_proj) - before,
                bad.computed && run.variant.role == Role::optimized ? 1u : 0u)
          << run.label() << " " << bad.what;
    });
  }
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    Options opt = run.options();
    opt.fresh_outputs = true;
    Case finite = bad_case();
    const uint64_t any = detail::fallback_count();
    finite.run(opt);
    EXPECT_EQ(detail::fallback_count(), any) << run.label();
  });
}

const testing::Plan kOneAndTwoThreads{true, std::nullopt, true, {1, 2}};

DSV4CPU_RUN_TEST(InverseGptjRopeOProj, EveryRunMatchesTheReference, kOp, kOneAndTwoThreads) {
  // Every variant on every Highway target, with 1 and 2 threads: the reference's bits, for odd
  // head widths (vector tails) and both dtypes.
  for (DType dtype : {DType::BF16, DType::F16})
    for (int64_t D : {512, 37 * 2}) {
      const auto make = [&] {
        Case c(5, 7, D, 9, D == 512 ? 64 : 22);
        c.dtype = dtype;
        std::mt19937_64 rng(7);
        c.random(rng);
        return c;
      };
      Case ref = make();
      Options o;
      o.impl = Impl::reference;
      ref.run(o);
      testing::for_each_run(kOp, kOneAndTwoThreads, [&](const testing::Run& run) {
        for (bool fresh : {false, true}) {
          Case c = make();
          Options opt = run.options();
          opt.fresh_outputs = fresh;
          c.run(opt);
          EXPECT_EQ(c.out, ref.out) << run.label() << " " << dtype_name(dtype) << " D=" << D
                                    << " fresh_outputs=" << fresh;
        }
      });
    }
}

}  // namespace
}  // namespace dsv4cpu
