// save_partial_states (compressor.md §3, bad-input.md §4): the §3.4 example by hand, bit copies,
// special values, every bad-input rule with an unchanged state cache.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "test_compressor_util.hpp"

namespace dsv4cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// Owned inputs: N tokens, ratio r (ape rows), width SW, a state cache of nb pages x sbs rows whose
// pages are padded by 16 floats and prefilled with garbage.
struct SaveCase {
  int64_t N, SW, r, nb, sbs, page_floats;
  std::vector<float> kv, score, ape, state;
  std::vector<int64_t> positions, slots;

  SaveCase(int64_t N_, int64_t SW_, int64_t r_, int64_t nb_, int64_t sbs_)
      : N(N_), SW(SW_), r(r_), nb(nb_), sbs(sbs_), page_floats(sbs_ * 2 * SW_ + 16) {
    kv.resize(static_cast<size_t>(N * SW));
    score.resize(static_cast<size_t>(N * SW));
    ape.resize(static_cast<size_t>(r * SW));
    // Exactly representable values whose sums are exact too.
    for (int64_t t = 0; t < N; ++t)
      for (int64_t i = 0; i < SW; ++i) {
        kv[static_cast<size_t>(t * SW + i)] = static_cast<float>(t * 10000 + i) + 0.5f;
        score[static_cast<size_t>(t * SW + i)] = -static_cast<float>(i) * 0.25f;
      }
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < SW; ++i)
        ape[static_cast<size_t>(k * SW + i)] = static_cast<float>(k) + 0.125f;
    state.resize(static_cast<size_t>(nb * page_floats));
    testing::fill_garbage(state.data(), state.size() * sizeof(float), 7);
    positions.assign(static_cast<size_t>(N), 0);
    slots.assign(static_cast<size_t>(N), -1);
  }
  float* row(int64_t g) { return state.data() + (g / sbs) * page_floats + (g % sbs) * 2 * SW; }
  MutableTensorView state_view() {
    return MutableTensorView(state.data(), DType::F32, {nb, sbs, 2 * SW}, {page_floats, 2 * SW, 1});
  }
  void run(const Options& o = {}) {
    save_partial_states(TensorView(kv.data(), DType::F32, {N, SW}),
                        TensorView(score.data(), DType::F32, {N, SW}),
                        TensorView(ape.data(), DType::F32, {r, SW}),
                        TensorView(positions.data(), DType::I64, {N}), state_view(),
                        TensorView(slots.data(), DType::I64, {N}), o);
  }
};

// Runs on every run expecting exception class `kind`, one message and an unchanged state cache;
// returns the message.
std::string expect_error(SaveCase& c, const char* kind) {
  return testing::expect_error(
      "save_partial_states", kind, [&](const Options& o) { c.run(o); },
      [&] { return testing::bytes_of(c.state); });
}

// Expected state after the call, built element by element from §3.3.
std::vector<float> expected_state(SaveCase& c) {
  SaveCase e = c;
  for (int64_t t = 0; t < c.N; ++t) {
    const int64_t g = c.slots[static_cast<size_t>(t)];
    if (g < 0) continue;
    float* row = e.row(g);
    const int64_t k = c.positions[static_cast<size_t>(t)] % c.r;
    for (int64_t i = 0; i < c.SW; ++i) {
      row[i] = c.kv[static_cast<size_t>(t * c.SW + i)];
      row[c.SW + i] =
          c.score[static_cast<size_t>(t * c.SW + i)] + c.ape[static_cast<size_t>(k * c.SW + i)];
    }
  }
  return e.state;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b,
                      const std::string& where) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(bits(a[i]), bits(b[i])) << where << " element " << i;
}

DSV4CPU_RUN_TEST(SavePartialStates, SpecExample34, "save_partial_states") {
  // Ratio 4, sbs = 4, block table [7, 3], positions 4 and 5: local 4, 5 are row 0, 1 of page 3,
  // slots 12 and 13. Position 5 adds ape[1]. Values are chosen so that every sum is exact.
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(2, 1024, 4, 8, 4);
    c.positions = {4, 5};
    c.slots = {12, 13};
    const auto before = c.state;
    c.run(run.options());
    for (int64_t t = 0; t < 2; ++t) {
      const float* row = c.row(12 + t);
      for (int64_t i = 0; i < 1024; ++i) {
        ASSERT_EQ(row[i], static_cast<float>(t * 10000 + i) + 0.5f) << run.label();
        // score −i/4 plus ape[p % 4] = (4 + t) % 4 + 1/8
        ASSERT_EQ(row[1024 + i], -static_cast<float>(i) * 0.25f + static_cast<float>(t) + 0.125f)
            << run.label();
      }
    }
    // Everything else, padding included, keeps its old bits.
    SaveCase e = c;
    e.state = before;
    for (int64_t t = 0; t < 2; ++t) std::memcpy(e.row(12 + t), c.row(12 + t), 2048 * sizeof(float));
    expect_same_bits(c.state, e.state, run.label());
  });
}

DSV4CPU_RUN_TEST(SavePartialStates, SkipsMinusOneAndUsesPositionModR, "save_partial_states") {
  // C128A widths: ratio 128, SW 512, sbs 8; positions beyond r pick ape[p % 128]; strided kv and
  // score rows (row stride 2·SW, as views of kv_score).
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(5, 512, 128, 3, 8);
    c.positions = {0, 130, 255, 1000, 7};
    c.slots = {-1, 23, 0, 9, -1};
    std::vector<float> kv_score(static_cast<size_t>(5 * 1024));
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t i = 0; i < 512; ++i) {
        kv_score[static_cast<size_t>(t * 1024 + i)] = c.kv[static_cast<size_t>(t * 512 + i)];
        kv_score[static_cast<size_t>(t * 1024 + 512 + i)] = c.score[static_cast<size_t>(t * 512 + i)];
      }
    const auto expect = expected_state(c);
    save_partial_states(TensorView(kv_score.data(), DType::F32, {5, 512}, {1024, 1}),
                        TensorView(kv_score.data() + 512, DType::F32, {5, 512}, {1024, 1}),
                        TensorView(c.ape.data(), DType::F32, {128, 512}),
                        TensorView(c.positions.data(), DType::I64, {5}), c.state_view(),
                        TensorView(c.slots.data(), DType::I64, {5}), run.options());
    expect_same_bits(c.state, expect, run.label());
  });
}

// Positions have no upper limit: the largest int64 one picks ape[(2^63 - 1) % 4] = ape[3].
DSV4CPU_RUN_TEST(SavePartialStates, LargestPositionIsValid, "save_partial_states") {
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(2, 128, 4, 1, 4);
    c.positions = {INT64_MAX, 2};
    c.slots = {1, -1};
    const auto expect = expected_state(c);
    c.run(run.options());
    expect_same_bits(c.state, expect, run.label());
  });
}

DSV4CPU_RUN_TEST(SavePartialStates, BitCopyAndIeeeSumsWhateverTheCallersMxcsr,
                 "save_partial_states") {
  // −0, subnormals, FLT_MAX are copied bit for bit; −0 + −0 = −0, −0 + 0 = +0, subnormal sums are
  // not flushed even when the caller runs with FTZ and DAZ on (numerics.md §9). I32 indices.
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(1, 256, 4, 1, 4);
    c.kv[0] = -0.0f;
    c.kv[1] = 1e-40f;
    c.kv[2] = -0x1p-149f;
    c.kv[3] = FLT_MAX;
    const float score[5] = {-0.0f, -0.0f, 1e-40f, -1e-40f, 3e38f};
    const float ape[5] = {-0.0f, 0.0f, 2e-40f, 1e-40f, -3e38f};
    std::copy(score, score + 5, c.score.begin());
    std::copy(ape, ape + 5, c.ape.begin());
    std::vector<int32_t> pos = {0}, slot = {2};
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
    save_partial_states(TensorView(c.kv.data(), DType::F32, {1, 256}),
                        TensorView(c.score.data(), DType::F32, {1, 256}),
                        TensorView(c.ape.data(), DType::F32, {4, 256}),
                        TensorView(pos.data(), DType::I32, {1}), c.state_view(),
                        TensorView(slot.data(), DType::I32, {1}), run.options());
    EXPECT_EQ(_mm_getcsr() & ~0x3Fu, (csr | 0x8040u) & ~0x3Fu) << "the caller's mode is restored";
    _mm_setcsr(csr);
    const float* row = c.row(2);
    EXPECT_EQ(bits(row[0]), 0x80000000u) << run.label();
    EXPECT_EQ(bits(row[1]), bits(1e-40f)) << run.label();
    EXPECT_EQ(bits(row[2]), 0x80000001u) << run.label();
    EXPECT_EQ(bits(row[3]), 0x7F7FFFFFu) << run.label();
    EXPECT_EQ(bits(row[256]), 0x80000000u) << run.label();
    EXPECT_EQ(bits(row[257]), 0x00000000u) << run.label();
    EXPECT_EQ(row[258], 3e-40f) << run.label();  // 1e-40 + 2e-40, exact subnormal arithmetic
    EXPECT_NE(row[258], 0.0f) << run.label();
    EXPECT_EQ(bits(row[259]), 0x00000000u) << run.label();
    EXPECT_EQ(row[260], 0.0f) << run.label();
  });
}

// The finiteness pass reads only kv and score for a token whose ape row and score row are below
// 2^127 in magnitude (api/save_partial_states.cpp): their sums are at most 2·(2^127 - 2^103) =
// FLT_MAX. The sums past that bound are decided exactly: FLT_MAX + 2^102 rounds to FLT_MAX, and
// FLT_MAX + 2^103, a tie, to the even neighbour, infinity.
DSV4CPU_RUN_TEST(SavePartialStates, SumsPastTheReadOnlyBoundAreDecidedExactly,
                 "save_partial_states") {
  const float below127 = std::nextafter(0x1p127f, 0.0f);
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(2, 256, 4, 1, 4);
    c.positions = {1, 2};
    c.slots = {0, 1};
    c.score[0] = below127;  // token 0, ape row 1: within the bound, the largest sum
    c.ape[256 + 0] = below127;
    c.score[1] = -FLT_MAX;  // token 0: past the bound, the sum finite
    c.ape[256 + 1] = -0x1p102f;
    c.score[256 + 2] = FLT_MAX;  // token 1, ape row 2 past the bound
    c.ape[512 + 2] = -0x1p127f;
    c.run(run.options());
    EXPECT_EQ(c.row(0)[256], FLT_MAX) << run.label();
    EXPECT_EQ(c.row(0)[257], -FLT_MAX) << run.label();
    EXPECT_EQ(c.row(1)[258], FLT_MAX - 0x1p127f) << run.label();
  });
  const auto overflow = [](int64_t i, float score, float ape) {
    SaveCase c(2, 256, 4, 1, 4);
    c.positions = {1, 2};
    c.slots = {0, 1};
    c.score[static_cast<size_t>(256 + i)] = score;
    c.ape[static_cast<size_t>(512 + i)] = ape;
    return expect_error(c, "NonFiniteError");
  };
  EXPECT_EQ(overflow(5, FLT_MAX, 0x1p103f),  // a score past the bound, the ape row within it
            "dsv4cpu::save_partial_states: token 1 (position 2): score + ape channel 5 = inf: "
            "intermediate overflow, from score[1, 5] = 3.4028235e+38 and ape[2, 5] = "
            "1.0141205e+31 (expected finite; nothing was written)");
  EXPECT_EQ(overflow(6, below127, 0x1.8p127f),  // the score row within the bound, ape past it
            "dsv4cpu::save_partial_states: token 1 (position 2): score + ape channel 6 = inf: "
            "intermediate overflow, from score[1, 6] = 1.7014117e+38 and ape[2, 6] = "
            "2.5521178e+38 (expected finite; nothing was written)");
}

DSV4CPU_RUN_TEST(SavePartialStates, ZeroSizeIsNoOp, "save_partial_states") {
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(0, 1024, 4, 2, 4);
    const auto before = c.state;
    c.run(run.options());
    expect_same_bits(c.state, before, run.label());
    // An empty state cache with N = 0 is fine too.
    SaveCase d(0, 256, 4, 0, 4);
    d.run(run.options());
  });
}

DSV4CPU_RUN_TEST(SavePartialStates, CheckFiniteOffCopiesNonFiniteValues, "save_partial_states") {
  testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
    SaveCase c(2, 256, 4, 2, 4);
    c.positions = {0, 1};
    c.slots = {1, 6};
    c.kv[3] = kNaN;
    c.score[256 + 5] = 3e38f;
    c.ape[256 + 5] = 3e38f;
    Options o = run.options();
    o.check_finite = false;
    const auto expect = expected_state(c);
    c.run(o);
    expect_same_bits(c.state, expect, run.label());
    EXPECT_TRUE(std::isinf(c.row(6)[256 + 5]));
  });
}

// ---- bad input, bad-input.md §4 in the §1.4 order ----

DSV4CPU_RUN_TEST(SavePartialStatesBadInput, ShapesAndRatio, "save_partial_states") {
  {
    SaveCase c(2, 1024, 4, 4, 4);
    c.ape.resize(5 * 1024);
    c.r = 5;
    EXPECT_EQ(expect_error(c, "ValueError"),
              "dsv4cpu::save_partial_states: ape.shape[0] = 5: unsupported compress ratio r "
              "(expected r = 4 or 128)");
  }
  {
    SaveCase c(2, 300, 4, 4, 4);
    expect_error(c, "ValueError");  // SW not in {128, 256, 512, 1024}
  }
  auto try_views = [](SaveCase& c, const TensorView& kv, const TensorView& score,
                      const TensorView& ape, const TensorView& pos, const MutableTensorView& state,
                      const TensorView& slots) {
    testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
      const auto before = c.state;
      EXPECT_THROW(save_partial_states(kv, score, ape, pos, state, slots, run.options()),
                   ShapeError)
          << run.label();
      EXPECT_EQ(std::memcmp(before.data(), c.state.data(), before.size() * 4), 0);
    });
  };
  SaveCase c(2, 256, 4, 4, 4);
  c.slots = {0, 1};
  const TensorView kv(c.kv.data(), DType::F32, {2, 256}),
      score(c.score.data(), DType::F32, {2, 256}), ape(c.ape.data(), DType::F32, {4, 256}),
      pos(c.positions.data(), DType::I64, {2}), slots(c.slots.data(), DType::I64, {2});
  const MutableTensorView state = c.state_view();
  // kv: wrong width, row stride below SW, non-unit column stride, wrong dtype.
  try_views(c, TensorView(c.kv.data(), DType::F32, {2, 128}), score, ape, pos, state, slots);
  try_views(c, TensorView(c.kv.data(), DType::F32, {2, 256}, {255, 1}), score, ape, pos, state,
            slots);
  try_views(c, TensorView(c.kv.data(), DType::F32, {1, 256}, {512, 2}), score,
            ape, pos, state, slots);
  try_views(c, TensorView(c.kv.data(), DType::BF16, {2, 256}), score, ape, pos, state, slots);
  // score with another N; positions and slot_mapping of the wrong length or type; missing ape.
  try_views(c, kv, TensorView(c.score.data(), DType::F32, {1, 256}), ape, pos, state, slots);
  try_views(c, kv, score, ape, TensorView(c.positions.data(), DType::I64, {1}), state, slots);
  try_views(c, kv, score, ape, TensorView(c.positions.data(), DType::F32, {2}), state, slots);
  try_views(c, kv, score, ape, pos, state, TensorView(c.slots.data(), DType::I64, {3}));
  try_views(c, kv, score, TensorView(), pos, state, slots);
  // ape not contiguous.
  std::vector<float> ape_padded(4 * 300);
  try_views(c, kv, score, TensorView(ape_padded.data(), DType::F32, {4, 256}, {300, 1}), pos,
            state, slots);
  // state_cache: wrong row width, row stride != 2·SW, page stride below the packed page, 2-D.
  try_views(c, kv, score, ape, pos,
            MutableTensorView(c.state.data(), DType::F32, {4, 4, 256}, {c.page_floats, 256, 1}),
            slots);
  try_views(c, kv, score, ape, pos,
            MutableTensorView(c.state.data(), DType::F32, {4, 4, 512}, {c.page_floats, 513, 1}),
            slots);
  try_views(c, kv, score, ape, pos,
            MutableTensorView(c.state.data(), DType::F32, {4, 4, 512}, {2047, 512, 1}), slots);
  try_views(c, kv, score, ape, pos,
            MutableTensorView(c.state.data(), DType::F32, {4, c.page_floats}), slots);
  // The 2-D form of a padded page array: the message says how it is passed.
  try {
    save_partial_states(kv, score, ape, pos,
                        MutableTensorView(c.state.data(), DType::F32, {4, c.page_floats}), slots);
    ADD_FAILURE() << "no exception";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "dsv4cpu::save_partial_states: state_cache: dtype F32, shape [4, 2064], strides "
                 "[2064, 1] (expected F32 [*, *, 512], contiguous rows, dim-0 stride >= row size; "
                 "state_cache is [nb, sbs, 2·SW] with strides [page_floats, 2·SW, 1]: a padded 2-D "
                 "[nb, page_floats] page array is passed as that 3-D view)");
  }
  // kv inside the state cache (overlap with the in-place buffer).
  try_views(c, TensorView(c.state.data() + 100, DType::F32, {2, 256}), score, ape, pos, state,
            slots);
}

DSV4CPU_RUN_TEST(SavePartialStatesBadInput, IndexElements, "save_partial_states") {
  {
    SaveCase c(3, 256, 4, 2, 4);
    c.slots = {0, 1, 2};
    c.positions = {0, -3, 1};
    EXPECT_EQ(expect_error(c, "IndexError"),
              "dsv4cpu::save_partial_states: positions[1] = -3: negative position (expected >= 0)");
  }
  {  // a position < 0 is an error even for a token that is skipped
    SaveCase c(2, 256, 4, 2, 4);
    c.positions = {0, -1};
    c.slots = {0, -1};
    expect_error(c, "IndexError");
  }
  {
    SaveCase c(3, 256, 4, 2, 4);
    c.slots = {0, -2, 1};
    expect_error(c, "IndexError");
  }
  {
    SaveCase c(3, 256, 4, 2, 4);
    c.slots = {0, 8, 1};  // 2 pages x 4 rows
    EXPECT_EQ(expect_error(c, "IndexError"),
              "dsv4cpu::save_partial_states: slot_mapping[1] = 8: slot beyond the state cache "
              "(expected -1 or 0 <= slot < 8 = 2 pages x 4 rows)");
  }
  {
    SaveCase c(4, 256, 4, 2, 4);
    c.slots = {5, -1, -1, 5};  // -1 may repeat, valid slots may not
    EXPECT_EQ(expect_error(c, "IndexError"),
              "dsv4cpu::save_partial_states: slot_mapping[3] = 5: slot already written by token 0 "
              "(expected distinct slots among the tokens that write)");
  }
}

DSV4CPU_RUN_TEST(SavePartialStatesBadInput, NonFiniteInputsAndSums, "save_partial_states") {
  {
    SaveCase c(6, 256, 4, 2, 4);
    for (int64_t t = 0; t < 6; ++t) c.slots[static_cast<size_t>(t)] = t;
    c.score[5 * 256 + 17] = kNaN;
    EXPECT_EQ(expect_error(c, "NonFiniteError"),
              "dsv4cpu::save_partial_states: score[5, 17] = nan: not finite (expected a finite "
              "value)");
  }
  {  // kv before score (signature order), first element in row-major order
    SaveCase c(3, 256, 4, 2, 4);
    c.slots = {0, 1, 2};
    c.score[0] = kInf;
    c.kv[2 * 256 + 1] = -kInf;
    c.kv[1 * 256 + 9] = kNaN;
    EXPECT_EQ(expect_error(c, "NonFiniteError"),
              "dsv4cpu::save_partial_states: kv[1, 9] = nan: not finite (expected a finite value)");
  }
  {  // an ape row that a written token uses
    SaveCase c(2, 256, 4, 2, 4);
    c.positions = {4, 6};
    c.slots = {-1, 3};
    c.ape[2 * 256 + 4] = kInf;
    EXPECT_EQ(expect_error(c, "NonFiniteError"),
              "dsv4cpu::save_partial_states: ape[2, 4] = inf: not finite (expected a finite "
              "value)");
  }
  {  // values no written token reads are not checked
    testing::for_each_run("save_partial_states", [&](const testing::Run& run) {
      SaveCase c(2, 256, 4, 2, 4);
      c.positions = {4, 6};
      c.slots = {-1, 3};
      c.kv[5] = kNaN;             // token 0 is skipped
      c.ape[1 * 256 + 4] = kInf;  // ape row 1 is not used
      EXPECT_NO_THROW(c.run(run.options())) << run.label();
    });
  }
  {  // finite inputs whose sum overflows
    SaveCase c(2, 256, 4, 2, 4);
    c.positions = {4, 5};
    c.slots = {0, 1};
    c.score[256 + 3] = 3e38f;
    c.ape[1 * 256 + 3] = 1e38f;
    EXPECT_EQ(expect_error(c, "NonFiniteError"),
              "dsv4cpu::save_partial_states: token 1 (position 5): score + ape channel 3 = inf: "
              "intermediate overflow, from score[1, 3] = 3e+38 and ape[1, 3] = 1e+38 (expected "
              "finite; nothing was written)");
  }
  {  // order: an index error beats a non-finite input
    SaveCase c(2, 256, 4, 2, 4);
    c.slots = {0, 0};
    c.kv[0] = kNaN;
    expect_error(c, "IndexError");
  }
}

}  // namespace
}  // namespace dsv4cpu
