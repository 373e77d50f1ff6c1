// bad-input.md §1, §4 for compress_norm_rope_store and compress_norm_rope_store_indexer: one test
// per rule, each checking the exception class, (for several) the exact message, and that no byte
// of the kv cache changed.
#include <gtest/gtest.h>

#include <cfloat>
#include <limits>

#include "dsv4cpu/errors.hpp"
#include "test_compressor_util.hpp"

namespace dsv4cpu {
namespace {

using test::CompressCase;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* op_of(int hd) {
  return hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
}

// Runs the case (with `views`, default: the case's own) on every run, expecting an exception of
// class `kind`, the same message from all, and an unchanged kv cache. Returns the message.
std::string expect_error(CompressCase& c, const char* kind,
                         const CompressCase::Views* views = nullptr) {
  return testing::expect_error(
      op_of(c.hd), kind, [&](const Options& o) { c.run(views ? *views : c.views(), o); },
      [&] { return c.kv_cache; });
}

// ---- (a) scalars ----

DSV4CPU_RUN_TEST(CompressBadInput, ScalarDomains,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  for (int hd : {512, 128}) {
    for (double eps : {-1e-6, double(kNaN), double(kInf), 1e300}) {
      CompressCase c = test::worked_example(hd, 0);
      c.eps = eps;
      expect_error(c, "ValueError");
    }
    CompressCase c = test::worked_example(hd, 0);
    c.P = 0;
    expect_error(c, "ValueError");
    c = test::worked_example(hd, 0);
    c.r = 8;
    EXPECT_EQ(expect_error(c, "ValueError"),
              std::string("dsv4cpu::") + op_of(hd) +
                  ": compress_ratio = 8: unsupported compress ratio (expected 4 or 128)");
  }
}

TEST(CompressBadInput, ScaleClampParsing) {
  EXPECT_EQ(parse_scale_clamp("compress_norm_rope_store", "cpu"), ScaleClamp::cpu);
  EXPECT_EQ(parse_scale_clamp("compress_norm_rope_store", "gpu"), ScaleClamp::gpu);
  try {
    parse_scale_clamp("compress_norm_rope_store", "tpu");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "dsv4cpu::compress_norm_rope_store: scale_clamp = tpu: unknown mode (expected "
                 "cpu or gpu)");
    EXPECT_EQ(e.argument(), "scale_clamp");
  }
  EXPECT_THROW(parse_scale_clamp("compress_norm_rope_store", "CPU"), ValueError);
}

// ---- (b) shapes, (c) overlap ----

DSV4CPU_RUN_TEST(CompressBadInput, Shapes,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  for (int hd : {512, 128}) {
    CompressCase c = test::worked_example(hd, 0);
    {  // W = 6 is neither r nor 2r
      auto v = c.views();
      v.gather_slots = TensorView(c.gather.data(), DType::I64, {1, 6});
      expect_error(c, "ShapeError", &v);
    }
    {  // gather_slots of a float type
      auto v = c.views();
      v.gather_slots = TensorView(c.gather.data(), DType::F32, {1, 8});
      expect_error(c, "ShapeError", &v);
    }
    {  // gather_slots not contiguous
      auto v = c.views();
      std::vector<int64_t> strided(16, -1);
      v.gather_slots = TensorView(strided.data(), DType::I64, {1, 8}, {16, 2});
      expect_error(c, "ShapeError", &v);
    }
    {  // W = 4 = r needs SW = HD, but the state rows are 2·(2·HD) wide
      auto v = c.views();
      v.gather_slots = TensorView(c.gather.data(), DType::I64, {1, 4});
      const std::string what = expect_error(c, "ShapeError", &v);
      EXPECT_NE(what.find("state_cache"), std::string::npos) << what;
    }
    {  // state_cache row stride != 2·SW
      auto v = c.views();
      v.state_cache = TensorView(c.state.data(), DType::F32, {c.nb, 4, 4 * hd},
                                 {c.page_floats, 4 * hd + 1, 1});
      expect_error(c, "ShapeError", &v);
    }
    {  // state_cache page stride below the packed page
      auto v = c.views();
      v.state_cache = TensorView(c.state.data(), DType::F32, {c.nb, 4, 4 * hd},
                                 {16 * hd - 1, 4 * hd, 1});
      expect_error(c, "ShapeError", &v);
    }
    {  // positions of the wrong length, kv_slot_mapping missing
      auto v = c.views();
      v.positions = TensorView(c.positions.data(), DType::I64, {0});
      expect_error(c, "ShapeError", &v);
      v = c.views();
      v.kv_slot_mapping = TensorView();
      expect_error(c, "ShapeError", &v);
    }
    {  // the other head's weight width
      auto v = c.views();
      std::vector<float> w(static_cast<size_t>(640 - hd), 1.0f);
      v.rms_norm_weight = TensorView(w.data(), DType::F32, {640 - hd});
      expect_error(c, "ShapeError", &v);
    }
    {  // cos_sin_cache [R, 32], and a cos_sin_cache with padded rows
      auto v = c.views();
      v.cos_sin_cache = TensorView(c.cos_sin.data(), DType::F32, {2, 32});
      expect_error(c, "ShapeError", &v);
      std::vector<float> cs(2 * 80, 0.0f);
      v.cos_sin_cache = TensorView(cs.data(), DType::F32, {2, 64}, {80, 1});
      expect_error(c, "ShapeError", &v);
    }
    {  // page_bytes < P·entry bytes, page stride < page_bytes, kv_cache of the wrong dtype
      auto v = c.views();
      v.kv_cache = MutableTensorView(c.kv_cache.data(), DType::U8,
                                     {c.nblk, c.P * c.entry_bytes() - 1}, {c.page_stride, 1});
      expect_error(c, "ShapeError", &v);
      v.kv_cache = MutableTensorView(c.kv_cache.data(), DType::U8, {c.nblk, c.page_bytes},
                                     {c.page_bytes - 1, 1});
      expect_error(c, "ShapeError", &v);
      v.kv_cache = MutableTensorView(c.kv_cache.data(), DType::I32, {c.nblk, c.page_bytes / 4});
      expect_error(c, "ShapeError", &v);
    }
    {  // the cos/sin table inside the kv cache (overlap)
      auto v = c.views();
      float* inside = reinterpret_cast<float*>(c.kv_cache.data() + c.page_stride);
      for (int i = 0; i < 64; ++i) inside[i] = i < 32 ? 1.0f : 0.0f;
      v.cos_sin_cache = TensorView(inside, DType::F32, {1, 64});
      const std::string what = expect_error(c, "ShapeError", &v);
      EXPECT_NE(what.find("kv_cache"), std::string::npos) << what;
    }
  }
}

// ---- (d) index elements ----

// The case of bad-input.md §2's example: 4 tokens at positions 0-3, each with its own row, a state
// cache of 1024 pages x 4 rows.
CompressCase four_tokens_of_1024_pages() {
  CompressCase c(512, 4, 8, /*nb=*/1024, /*N=*/4, 1, 64, 8);
  for (int64_t t = 0; t < 4; ++t) {
    c.positions[static_cast<size_t>(t)] = t;
    c.gather[static_cast<size_t>(t * 8 + 7)] = t;
  }
  return c;
}

DSV4CPU_RUN_TEST(CompressBadInput, GatherSlotBeyondStateCacheSpecMessage,
                 "compress_norm_rope_store") {
  // bad-input.md §2's example: gather_slots[3, 7] = 4096.
  CompressCase c = four_tokens_of_1024_pages();
  c.gather[3 * 8 + 7] = 4096;
  EXPECT_EQ(expect_error(c, "IndexError"),
            "dsv4cpu::compress_norm_rope_store: gather_slots[3, 7] = 4096: slot beyond the state "
            "cache (expected -1 or 0 <= slot < 4096 = 1024 pages x 4 rows)");
}

// The scan of gather_slots splits over the run's threads: the first bad element in row-major order
// is reported wherever the split falls (one bad element in each half of 32).
DSV4CPU_RUN_TEST(CompressBadInput, FirstBadGatherSlotOnEveryThreadCount,
                 "compress_norm_rope_store") {
  CompressCase c = four_tokens_of_1024_pages();
  c.gather[1 * 8 + 2] = 4096;
  c.gather[3 * 8 + 0] = -2;
  EXPECT_EQ(expect_error(c, "IndexError"),
            "dsv4cpu::compress_norm_rope_store: gather_slots[1, 2] = 4096: slot beyond the state "
            "cache (expected -1 or 0 <= slot < 4096 = 1024 pages x 4 rows)");
}

DSV4CPU_RUN_TEST(CompressBadInput, IndexElements,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  for (int hd : {512, 128}) {
    CompressCase c = test::worked_example(hd, 0);
    c.gather[2] = -2;  // a negative slot other than -1
    expect_error(c, "IndexError");

    c = test::worked_example(hd, 0);
    c.positions[0] = -1;
    expect_error(c, "IndexError");

    c = test::worked_example(hd, 0);
    c.kv_slot[0] = -2;
    expect_error(c, "IndexError");

    // A non-boundary token's kv slot is still range-checked (compressor.md §6.4).
    c = test::worked_example(hd, 0);
    c.positions[0] = 2;
    c.kv_slot[0] = c.nblk * c.P;
    EXPECT_EQ(expect_error(c, "IndexError"),
              std::string("dsv4cpu::") + op_of(hd) +
                  ": kv_slot_mapping[0] = 128: slot beyond the compressed cache (expected -1 or "
                  "0 <= slot < 128 = 2 pages x 64 entries)");

    // The RoPE row (p / r)·r = 4 of the emitting token at p = 7 is beyond a 4-row table.
    c = test::worked_example(hd, 0);
    c.cos_sin.resize(4 * 64, 0.0f);
    c.R = 4;
    c.positions[0] = 7;
    expect_error(c, "IndexError");

    // An emitting token without its own row (column W-1).
    c = test::worked_example(hd, 0);
    c.gather[7] = -1;
    EXPECT_EQ(expect_error(c, "IndexError"),
              std::string("dsv4cpu::") + op_of(hd) +
                  ": gather_slots[0, 7] = -1: emitting token 0 (position 3) has no own state row "
                  "(expected a valid slot in column W - 1 of an emitting token)");
  }
}

DSV4CPU_RUN_TEST(CompressBadInput, DuplicateSlotsOfEmittingTokens,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  for (int hd : {512, 128}) {
    CompressCase c(hd, 4, 8, 8, 3, 1, 64, 8);
    c.positions = {3, 5, 7};
    c.kv_slot = {9, 9, 9};  // tokens 0 and 2 emit into slot 9; token 1 does not emit
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t w = 4; w < 8; ++w) {
        const int64_t g = c.positions[static_cast<size_t>(t)] - 7 + w;
        c.gather[static_cast<size_t>(t * 8 + w)] = g;
        for (int d = 0; d < hd; ++d) {
          c.row(g)[c.kv_off(w) + d] = 1.0f;
          c.row(g)[c.score_off(w) + d] = 0.0f;
        }
      }
    EXPECT_EQ(expect_error(c, "IndexError"),
              std::string("dsv4cpu::") + op_of(hd) +
                  ": kv_slot_mapping[2] = 9: slot already written by token 0 (expected distinct "
                  "slots among the tokens that write)");
    c.kv_slot[2] = 10;  // now only a non-emitting token shares slot 9: valid
    testing::for_each_run(op_of(hd), [&](const testing::Run& run) {
      EXPECT_NO_THROW(c.run(run.options())) << run.label();
    });
  }
}

// ---- (e) float inputs read ----

DSV4CPU_RUN_TEST(CompressBadInput, NonFiniteInputs,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  for (int hd : {512, 128}) {
    CompressCase c = test::worked_example(hd, 0);
    c.weight[7] = kNaN;
    EXPECT_EQ(expect_error(c, "NonFiniteError"),
              std::string("dsv4cpu::") + op_of(hd) +
                  ": rms_norm_weight[7] = nan: not finite (expected a finite value)");
    c.kv_slot[0] = -1;  // nothing emits, so the weight is not read: no error
    testing::for_each_run(op_of(hd), [&](const testing::Run& run) {
      EXPECT_NO_THROW(c.run(run.options())) << run.label();
    });

    c = test::worked_example(hd, 0);
    c.cos_sin[33] = -kInf;  // row 0 is read
    EXPECT_EQ(expect_error(c, "NonFiniteError"),
              std::string("dsv4cpu::") + op_of(hd) +
                  ": cos_sin_cache[0, 33] = -inf: not finite (expected a finite value)");

    c = test::worked_example(hd, 0);
    c.cos_sin.resize(2 * 64, kNaN);  // row 1 is never read
    c.R = 2;
    testing::for_each_run(op_of(hd), [&](const testing::Run& run) {
      EXPECT_NO_THROW(c.run(run.options())) << run.label();
    });
  }
}

// ---- (f) computed values ----

DSV4CPU_RUN_TEST(CompressBadInput, PooledOverflowSpecMessage, "compress_norm_rope_store") {
  // bad-input.md §2's example: token 9 at position 131; channel 12 pools two finite kv values
  // 3e38 with equal scores: acc overflows, so c[12] = inf. Tokens 0..8 do not emit.
  CompressCase c(512, 4, 8, /*nb=*/40, /*N=*/10, 1, 64, 129);
  for (int64_t t = 0; t < 9; ++t) c.positions[static_cast<size_t>(t)] = 122 + t;
  c.positions[9] = 131;
  c.kv_slot[9] = 0;
  for (int64_t w = 0; w < 8; ++w) {
    const int64_t g = 124 + w;
    c.gather[static_cast<size_t>(9 * 8 + w)] = g;
    for (int d = 0; d < 512; ++d) {
      c.row(g)[c.kv_off(w) + d] = d == 12 && w >= 6 ? 3e38f : 1.0f;
      c.row(g)[c.score_off(w) + d] = 0.0f;
    }
  }
  EXPECT_EQ(expect_error(c, "NonFiniteError"),
            "dsv4cpu::compress_norm_rope_store: token 9 (position 131): pooled channel 12 = inf: "
            "intermediate overflow (expected finite; nothing was written)");
}

// Each computed check, on §9.1's input (n[d] = a = 1 − 2^-24), with the value that trips it.
DSV4CPU_RUN_TEST(CompressBadInput, ComputedValues,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  const float fmax = FLT_MAX;
  for (int hd : {512, 128}) {
    const std::string prefix = std::string("dsv4cpu::") + op_of(hd) + ": token 0 (position 3): ";
    const std::string tail = " (expected finite; nothing was written)";
    // A non-finite state value (trusted cache contents) ends here, named as the state_cache
    // element [page, row, element] it is, with the window column and slot that read it. The
    // window is columns 4..7 = slots 28..31 = page 7, rows 0..3; columns >= r read at HD.
    const std::string read = " read by token 0 (position 3) as window column ";
    const std::string input_tail = " (expected a finite value; nothing was written)";
    const int64_t SW = 2 * hd;
    {  // a NaN kv value
      CompressCase c = test::worked_example(hd, 0);
      c.row(29)[c.kv_off(5) + 2] = kNaN;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                std::string("dsv4cpu::") + op_of(hd) + ": state_cache[7, 1, " +
                    std::to_string(hd + 2) + "] = nan: not finite," + read +
                    "5 (gather_slots[0, 5] = 29), its kv for channel 2" + input_tail);
    }
    {  // an inf score is reported as inf, not as the NaN it pools to
      CompressCase c = test::worked_example(hd, 0);
      c.row(30)[c.score_off(6) + 2] = kInf;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                std::string("dsv4cpu::") + op_of(hd) + ": state_cache[7, 2, " +
                    std::to_string(SW + hd + 2) + "] = inf: not finite," + read +
                    "6 (gather_slots[0, 6] = 30), its score for channel 2" + input_tail);
    }
    {  // a -inf score is harmless while another score is finite: the inf kv is the cause
      CompressCase c = test::worked_example(hd, 0);
      c.row(28)[c.score_off(4) + 2] = -kInf;
      c.row(31)[c.kv_off(7) + 2] = kInf;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                std::string("dsv4cpu::") + op_of(hd) + ": state_cache[7, 3, " +
                    std::to_string(hd + 2) + "] = inf: not finite," + read +
                    "7 (gather_slots[0, 7] = 31), its kv for channel 2" + input_tail);
    }
    {  // every score of the channel -inf: the first is named
      CompressCase c = test::worked_example(hd, 0);
      for (int64_t g = 28; g < 32; ++g) c.row(g)[c.score_off(g - 24) + 2] = -kInf;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                std::string("dsv4cpu::") + op_of(hd) + ": state_cache[7, 0, " +
                    std::to_string(SW + hd + 2) + "] = -inf: not finite," + read +
                    "4 (gather_slots[0, 4] = 28), its score for channel 2" + input_tail);
    }
    {  // c = 1e30 everywhere: the sum of squares overflows
      CompressCase c = test::worked_example(hd, 0);
      for (int64_t g = 28; g < 32; ++g)
        for (int d = 0; d < hd; ++d) c.row(g)[c.kv_off(g - 24) + d] = 1e30f;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                prefix + "sum of squares = inf: intermediate overflow" + tail);
    }
    {  // eps = 0 and an all-zero pooled vector: t = 0, inv = 1 / 0
      CompressCase c = test::worked_example(hd, 0);
      c.eps = 0;
      for (int64_t g = 28; g < 32; ++g)
        for (int d = 0; d < hd; ++d) c.row(g)[c.kv_off(g - 24) + d] = 0.0f;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                prefix + "inverse RMS = inf: intermediate overflow" + tail);
    }
    {  // one non-zero channel: c·inv = sqrt(HD) > 1, times a weight near FLT_MAX overflows
      CompressCase c = test::worked_example(hd, 0);
      for (int64_t g = 28; g < 32; ++g)
        for (int d = 1; d < hd; ++d) c.row(g)[c.kv_off(g - 24) + d] = 0.0f;
      c.weight[0] = 3e38f;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                prefix + "normalised channel 0 = inf: intermediate overflow" + tail);
    }
    {  // n[0] = RN(a·FLT_MAX) is finite but above the largest bf16 midpoint: bf16 gives inf
      CompressCase c = test::worked_example(hd, 0);
      c.weight[0] = fmax;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                prefix + "bf16 channel 0 = inf: intermediate overflow" + tail);
    }
    const std::string rope_dim = std::to_string(hd - 64);
    {  // cos_0 = 3e38 with n = 2·a: e' = fma(n, 3e38, ...) overflows
      CompressCase c = test::worked_example(hd, 0);
      c.weight[static_cast<size_t>(hd - 64)] = 2.0f;
      c.cos_sin[0] = 3e38f;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                prefix + "rotated channel " + rope_dim + " = inf: intermediate overflow" + tail);
    }
    {  // cos_0 = FLT_MAX with n = a: e' = RN(a·FLT_MAX) is finite, its bf16 rounding is inf
      CompressCase c = test::worked_example(hd, 0);
      c.cos_sin[0] = fmax;
      EXPECT_EQ(expect_error(c, "NonFiniteError"),
                prefix + "bf16 rotated channel " + rope_dim + " = inf: intermediate overflow" +
                    tail);
    }
  }
}

DSV4CPU_RUN_TEST(CompressBadInput, FirstOffendingTokenIsReported,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // Tokens 0 (p = 7) and 1 (p = 3) both overflow; token 0 is reported.
  for (int hd : {512, 128}) {
    CompressCase c(hd, 4, 8, 8, 2, 1, 64, 8);
    c.positions = {7, 3};
    c.kv_slot = {1, 0};
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t w = 4; w < 8; ++w) {
        const int64_t g = t * 8 + w;
        c.gather[static_cast<size_t>(t * 8 + w)] = g;
        for (int d = 0; d < hd; ++d) {
          c.row(g)[c.kv_off(w) + d] = 1e30f;
          c.row(g)[c.score_off(w) + d] = 0.0f;
        }
      }
    const std::string what = expect_error(c, "NonFiniteError");
    EXPECT_NE(what.find("token 0 (position 7): sum of squares"), std::string::npos) << what;
  }
}

DSV4CPU_RUN_TEST(CompressBadInput, CheckOrder,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // bad-input.md §1.4: shapes (b) before index elements (d) before finiteness (e).
  for (int hd : {512, 128}) {
    CompressCase c = test::worked_example(hd, 0);
    c.gather[7] = -1;      // (d)
    c.weight[0] = kNaN;    // (e)
    auto v = c.views();
    v.cos_sin_cache = TensorView(c.cos_sin.data(), DType::F32, {2, 32});  // (b)
    expect_error(c, "ShapeError", &v);
    expect_error(c, "IndexError");
    c.gather[7] = 31;
    expect_error(c, "NonFiniteError");
    c.eps = -1;  // (a) before all
    expect_error(c, "ValueError");
  }
}

}  // namespace
}  // namespace dsv4cpu
