// bad-input.md §1, §4 for sparse_mla_attention and fused_qnorm_rope_kv_insert: one test per rule,
// each checking the exception class on every variant, (for several) the exact message, and that
// no output byte and no cache byte changed.
#include <gtest/gtest.h>

#include <cfloat>
#include <functional>
#include <limits>
#include <random>

#include "dsv4cpu/errors.hpp"
#include "test_attention_util.hpp"

namespace dsv4cpu {
namespace {

using test::AttentionCase;
using test::MlaPages;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- sparse_mla_attention ----

// A valid call: T = 2, H = 2, window P = 2 (2 pages), compressed P = 4 (1 page), sink.
struct SparseBad {
  AttentionCase c;
  std::vector<uint8_t> out_bytes, lse_bytes;
  SparseBad() : c(2, 2, MlaPages(2, 2), 3, MlaPages(1, 4), 2) {
    std::mt19937_64 rng(1);
    for (int64_t s = 0; s < 4; ++s) c.window.put_random(s, rng);
    for (int64_t s = 0; s < 4; ++s) c.compressed.put_random(s, rng);
    c.window_slots = {0, 1, -1, 3, 2, 2};
    c.compressed_slots = {1, -1, 0, 3};
    c.random_q(rng, 0.1f);
    c.sink = {0.5f, -kInf};
  }
  // Runs with views `v` (default: the case's own), expecting `kind`; out, lse and the caches must
  // not change.
  std::string expect(const char* kind, std::function<void(AttentionCase::Views&)> edit = {}) {
    c.clear_outputs();
    AttentionCase::Views v = c.views();
    if (edit) edit(v);
    return testing::expect_error(
        "sparse_mla_attention", kind, [&](const Options& o) { c.run(v, o); },
        [&] { return testing::bytes_of(c.out, c.lse, c.window.bytes, c.compressed.bytes); });
  }
};

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, ValidBaseCaseRuns, "sparse_mla_attention") {
  SparseBad b;
  testing::for_each_run("sparse_mla_attention", [&](const testing::Run& run) {
    EXPECT_NO_THROW(b.c.run(run.options())) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, Scalars, "sparse_mla_attention") {
  SparseBad b;
  b.c.window.P = 0;
  EXPECT_EQ(b.expect("ValueError"),
            "dsv4cpu::sparse_mla_attention: window_block_size = 0: not a positive block size "
            "(expected window_block_size >= 1)");
  b = SparseBad();
  b.c.compressed.P = -4;
  b.expect("ValueError");
  for (float scale : {0.0f, -0.5f, kInf, kNaN}) {
    b = SparseBad();
    b.c.scale = scale;
    b.expect("ValueError");
  }
  b = SparseBad();
  b.c.mode = static_cast<NopeDecode>(7);
  b.expect("ValueError");
  EXPECT_THROW(parse_nope_decode("sparse_mla_attention", "bf16"), ValueError);
  EXPECT_EQ(parse_nope_decode("x", "vllm"), NopeDecode::vllm);
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, QShapeAndStrides, "sparse_mla_attention") {
  SparseBad b;
  // dtype, head dim, stride(1) != 512, stride(0) < H·512, inner stride != 1.
  b.expect("ShapeError", [&](auto& v) { v.q = TensorView(v.q.data(), DType::F32, {2, 2, 512}); });
  b.expect("ShapeError", [&](auto& v) { v.q = TensorView(v.q.data(), DType::BF16, {2, 2, 256}); });
  b.expect("ShapeError", [&](auto& v) {
    v.q = TensorView(v.q.data(), DType::BF16, {2, 2, 512}, {1024, 256, 1});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.q = TensorView(v.q.data(), DType::BF16, {2, 2, 512}, {512, 512, 1});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.q = TensorView(v.q.data(), DType::BF16, {2, 1, 512}, {1024, 512, 2});
  });
  EXPECT_NE(b.expect("ShapeError", [&](auto& v) { v.q = TensorView(); }).find("q: missing"),
            std::string::npos);
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, CachesSlotsSinkOutLseShapes, "sparse_mla_attention") {
  SparseBad b;
  // page_bytes < P·584 (window: P = 2 needs 1168 bytes).
  b.expect("ShapeError", [&](auto& v) {
    v.window_cache =
        TensorView(v.window_cache.data(), DType::U8, {2, 1167}, {b.c.window.page_stride, 1});
  });
  // page stride < page_bytes.
  b.expect("ShapeError", [&](auto& v) {
    v.compressed_cache = TensorView(v.compressed_cache.data(), DType::U8, {2, 4 * 584}, {1, 1});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.window_cache = TensorView(v.window_cache.data(), DType::I32, {2, 300});
  });
  // slot arrays: T rows, index dtype, contiguous.
  b.expect("ShapeError", [&](auto& v) {
    v.window_slots = TensorView(v.window_slots.data(), DType::I64, {1, 3});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.compressed_slots = TensorView(v.compressed_slots.data(), DType::F32, {2, 2});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.compressed_slots = TensorView(v.compressed_slots.data(), DType::I64, {2, 1}, {2, 1});
  });
  b.expect("ShapeError",
           [&](auto& v) { v.attn_sink = TensorView(v.attn_sink.data(), DType::F32, {1}); });
  b.expect("ShapeError", [&](auto& v) {
    v.out = MutableTensorView(v.out.data(), DType::F32, {2, 2, 512});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.out = MutableTensorView(v.out.data(), DType::BF16, {2, 2, 512}, {1024, 256, 1});
  });
  b.expect("ShapeError", [&](auto& v) { v.out = MutableTensorView(); });
  b.expect("ShapeError", [&](auto& v) { v.lse = MutableTensorView(v.lse.data(), DType::F32, {2, 3}); });
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, Overlaps, "sparse_mla_attention") {
  SparseBad b;
  // out over q (q's storage is large enough for out's view).
  EXPECT_EQ(b.expect("ShapeError",
                     [&](auto& v) {
                       v.out = MutableTensorView(b.c.q.data(), DType::BF16, {2, 2, 512});
                     }),
            "dsv4cpu::sparse_mla_attention: out: memory overlaps input q (expected an output "
            "that does not overlap any input)");
  // lse over the window cache; lse over out.
  b.expect("ShapeError", [&](auto& v) {
    v.lse = MutableTensorView(b.c.window.bytes.data(), DType::F32, {2, 2});
  });
  EXPECT_EQ(b.expect("ShapeError",
                     [&](auto& v) {
                       v.lse = MutableTensorView(b.c.out.data() + 8, DType::F32, {2, 2});
                     }),
            "dsv4cpu::sparse_mla_attention: lse: memory overlaps output out (expected outputs "
            "that do not overlap)");
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, Slots, "sparse_mla_attention") {
  SparseBad b;
  b.c.window_slots[4] = 4;  // 2 pages x 2 entries
  EXPECT_EQ(b.expect("IndexError"),
            "dsv4cpu::sparse_mla_attention: window_slots[1, 1] = 4: slot beyond the window cache "
            "(expected -1 or 0 <= slot < 4 = 2 pages x 2 entries)");
  b = SparseBad();
  b.c.compressed_slots[1] = -2;
  b.c.compressed_slots[3] = 9;
  EXPECT_EQ(b.expect("IndexError"),
            "dsv4cpu::sparse_mla_attention: compressed_slots[0, 1] = -2: negative slot other than "
            "-1 (expected -1 or 0 <= slot < 4 = 1 pages x 4 entries)");
  // An empty compressed cache accepts only -1.
  b = SparseBad();
  b.c.compressed = MlaPages(0, 4);
  b.expect("IndexError");
  b.c.compressed_slots = {-1, -1, -1, -1};
  EXPECT_NO_THROW(b.c.run());
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, NonFiniteQAndSink, "sparse_mla_attention") {
  SparseBad b;
  b.c.q_row(1, 1)[300] = 0x7F80;  // +inf
  b.c.q_row(1, 0)[7] = 0xFFC1;    // NaN, first in row-major order
  EXPECT_EQ(
      b.expect("NonFiniteError"),
      "dsv4cpu::sparse_mla_attention: q[1, 0, 7] = nan: not finite (expected a finite value)");
  b = SparseBad();
  b.c.sink = {kInf, 0.0f};
  EXPECT_EQ(b.expect("NonFiniteError"),
            "dsv4cpu::sparse_mla_attention: attn_sink[0] = inf: not finite (expected a finite "
            "value or -inf)");
  b = SparseBad();
  b.c.sink = {0.0f, kNaN};
  b.expect("NonFiniteError");
  // check_finite = false: no error, no out-of-bounds access.
  b = SparseBad();
  b.c.q_row(0, 0)[0] = 0x7FC0;
  testing::for_each_run("sparse_mla_attention", [&](const testing::Run& run) {
    Options o = run.options();
    o.check_finite = false;
    EXPECT_NO_THROW(b.c.run(o)) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttentionBadInput, ZeroTokensIsANoOp, "sparse_mla_attention") {
  AttentionCase c(0, 4, MlaPages(1, 2), 8, MlaPages(0, 2), 3);
  c.sink.assign(4, 0.0f);
  testing::for_each_run("sparse_mla_attention", [&](const testing::Run& run) {
    EXPECT_NO_THROW(c.run(run.options())) << run.label();
  });
}

// ---- fused_qnorm_rope_kv_insert ----

// A valid call: T = 3, Hq = 2, Hpad = 3, T_ins = 3, P = 2 (2 pages), R = 8.
struct InsertBad {
  int64_t T = 3, Hq = 2, Hpad = 3, T_ins = 3, R = 8;
  std::vector<uint16_t> q, kv, q_out;
  std::vector<int64_t> positions{1, 5, 7}, slots{2, -1, 0};
  MlaPages cache{2, 2};
  std::vector<float> table;
  double eps = 1e-6;
  int64_t P = 2;
  ScaleClamp clamp = ScaleClamp::cpu;
  Fp8Subnormals sub = Fp8Subnormals::exact;
  InsertBad() {
    std::mt19937_64 rng(2);
    std::normal_distribution<float> normal;
    q.resize(static_cast<size_t>(T * Hq * 512));
    kv.resize(static_cast<size_t>(T_ins * 512));
    for (uint16_t& v : q) v = to_bf16(normal(rng));
    for (uint16_t& v : kv) v = to_bf16(normal(rng));
    table.resize(static_cast<size_t>(R * 64));
    for (float& v : table) v = normal(rng) * 0.5f;
    q_out.assign(static_cast<size_t>(T * Hpad * 512), 0xA5A5);
  }
  struct Views {
    TensorView q, kv, positions, slots;
    MutableTensorView cache;
    TensorView table;
    MutableTensorView q_out;
  };
  Views views() {
    return {TensorView(q.data(), DType::BF16, {T, Hq, 512}),
            TensorView(kv.data(), DType::BF16, {T_ins, 512}),
            TensorView(positions.data(), DType::I64, {T}),
            TensorView(slots.data(), DType::I64, {T_ins}),
            cache.view(),
            TensorView(table.data(), DType::F32, {R, 64}),
            MutableTensorView(q_out.data(), DType::BF16, {T, Hpad, 512})};
  }
  void run(const Views& v, const Options& o) {
    fused_qnorm_rope_kv_insert(v.q, v.kv, v.positions, v.slots, v.cache, v.table, Hpad, eps, P,
                               clamp, sub, v.q_out, o);
  }
  std::string expect(const char* kind, std::function<void(Views&)> edit = {}) {
    Views v = views();
    if (edit) edit(v);
    return testing::expect_error(
        "fused_qnorm_rope_kv_insert", kind, [&](const Options& o) { run(v, o); },
        [&] { return testing::bytes_of(q_out, cache.bytes); });
  }
};

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, ValidBaseCaseRuns, "fused_qnorm_rope_kv_insert") {
  testing::for_each_run("fused_qnorm_rope_kv_insert", [&](const testing::Run& run) {
    InsertBad b;
    EXPECT_NO_THROW(b.run(b.views(), run.options())) << run.label();
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, Scalars, "fused_qnorm_rope_kv_insert") {
  for (double eps : {-1e-6, double(kNaN), double(kInf), 1e300}) {
    InsertBad b;
    b.eps = eps;
    b.expect("ValueError");
  }
  InsertBad b;
  b.P = 0;
  b.expect("ValueError");
  b = InsertBad();
  b.Hpad = 1;
  EXPECT_EQ(b.expect("ValueError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: q_head_padded = 1: fewer than the query heads "
            "(expected q_head_padded >= Hq = 2)");
  b = InsertBad();
  b.clamp = static_cast<ScaleClamp>(9);
  b.expect("ValueError");
  b = InsertBad();
  b.sub = static_cast<Fp8Subnormals>(9);
  b.expect("ValueError");
  EXPECT_THROW(parse_fp8_subnormals("fused_qnorm_rope_kv_insert", "ftz"), ValueError);
  EXPECT_EQ(parse_fp8_subnormals("x", "flush"), Fp8Subnormals::flush);
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, Shapes, "fused_qnorm_rope_kv_insert") {
  InsertBad b;
  b.expect("ShapeError", [&](auto& v) { v.q = TensorView(v.q.data(), DType::F32, {3, 2, 512}); });
  b.expect("ShapeError", [&](auto& v) {
    v.q = TensorView(v.q.data(), DType::BF16, {3, 2, 512}, {2048, 512, 1});
  });
  // kv: more rows than tokens (T_kv > T); wrong width.
  EXPECT_EQ(
      b.expect("ShapeError",
               [&](auto& v) { v.kv = TensorView(b.q.data(), DType::BF16, {4, 512}); }),
      "dsv4cpu::fused_qnorm_rope_kv_insert: kv: dtype BF16, shape [4, 512], strides [512, 1] "
      "(expected BF16 [T_kv, 512] with T_kv <= T = 3, contiguous)");
  b.expect("ShapeError", [&](auto& v) { v.kv = TensorView(v.kv.data(), DType::BF16, {3, 448}); });
  b.expect("ShapeError",
           [&](auto& v) { v.positions = TensorView(v.positions.data(), DType::I64, {2}); });
  b.expect("ShapeError", [&](auto& v) { v.slots = TensorView(v.slots.data(), DType::F32, {3}); });
  // slot_mapping longer than kv (T_ins > T_kv): the padding runs the other way.
  EXPECT_EQ(b.expect("ShapeError",
                     [&](auto& v) { v.kv = TensorView(v.kv.data(), DType::BF16, {2, 512}); }),
            "dsv4cpu::fused_qnorm_rope_kv_insert: slot_mapping: dtype I64, shape [3], strides [1] "
            "(expected I32 or I64 [T_ins] with T_ins <= T_kv = 2 = rows of kv, contiguous)");
  b.expect("ShapeError",
           [&](auto& v) { v.slots = TensorView(v.slots.data(), DType::I64, {3, 1}); });
  b.expect("ShapeError", [&](auto& v) {
    v.cache = MutableTensorView(v.cache.data(), DType::U8, {2, 2 * 584 - 1}, {b.cache.page_stride, 1});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.table = TensorView(v.table.data(), DType::F32, {16, 32});
  });
  b.expect("ShapeError", [&](auto& v) {
    v.q_out = MutableTensorView(v.q_out.data(), DType::BF16, {3, 2, 512});
  });
  b.expect("ShapeError", [&](auto& v) { v.q_out = MutableTensorView(); });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, Overlaps, "fused_qnorm_rope_kv_insert") {
  InsertBad b;
  EXPECT_EQ(b.expect("ShapeError",
                     [&](auto& v) {
                       v.cache = MutableTensorView(b.q_out.data(), DType::U8, {2, 2 * 584}, {2 * 584, 1});
                     }),
            "dsv4cpu::fused_qnorm_rope_kv_insert: q_out: memory overlaps output swa_cache "
            "(expected outputs that do not overlap)");
  b.expect("ShapeError", [&](auto& v) {
    v.cache = MutableTensorView(b.kv.data(), DType::U8, {1, 2 * 584});
  });
  EXPECT_EQ(b.expect("ShapeError",
                     [&](auto& v) {
                       v.q_out = MutableTensorView(b.table.data(), DType::BF16, {1, 1, 512});
                       v.q = TensorView(b.q.data(), DType::BF16, {1, 1, 512});
                       v.kv = TensorView(b.kv.data(), DType::BF16, {1, 512});
                       v.positions = TensorView(b.positions.data(), DType::I64, {1});
                       v.slots = TensorView(b.slots.data(), DType::I64, {1});
                       b.Hpad = 1;
                     }),
            "dsv4cpu::fused_qnorm_rope_kv_insert: q_out: memory overlaps input cos_sin_cache "
            "(expected an output that does not overlap any input)");
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, PositionsAndSlots, "fused_qnorm_rope_kv_insert") {
  InsertBad b;
  b.positions[1] = 8;  // R = 8
  EXPECT_EQ(b.expect("IndexError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: positions[1] = 8: position beyond the cos/sin "
            "table (expected position < 8 = rows of cos_sin_cache)");
  b = InsertBad();
  b.positions[2] = -1;
  b.expect("IndexError");
  b = InsertBad();
  b.slots[1] = 4;  // 2 pages x 2 entries
  b.expect("IndexError");
  b = InsertBad();
  b.slots[1] = -3;
  b.expect("IndexError");
  b = InsertBad();
  b.slots = {2, 0, 2};
  EXPECT_EQ(b.expect("IndexError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: slot_mapping[2] = 2: slot already written by "
            "token 0 (expected distinct slots among the tokens that write)");
  // A slot -1 token's kv row is never read: NaN there is no error.
  b = InsertBad();
  b.kv[512 + 3] = 0x7FC0;
  testing::for_each_run("fused_qnorm_rope_kv_insert", [&](const testing::Run& run) {
    EXPECT_NO_THROW(b.run(b.views(), run.options())) << run.label();
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, NonFiniteInputs, "fused_qnorm_rope_kv_insert") {
  InsertBad b;
  b.q[2 * 512 + 9] = 0xFF80;
  EXPECT_EQ(b.expect("NonFiniteError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: q[1, 0, 9] = -inf: not finite (expected a "
            "finite value)");
  b = InsertBad();
  b.kv[2 * 512 + 500] = 0x7F80;
  EXPECT_EQ(b.expect("NonFiniteError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: kv[2, 500] = inf: not finite (expected a finite "
            "value)");
  b = InsertBad();
  b.table[5 * 64 + 40] = kNaN;  // row of token 1 (position 5, slot -1: its q path reads it)
  b.expect("NonFiniteError");
  b = InsertBad();
  b.table[3 * 64 + 40] = kNaN;  // a row no token reads
  testing::for_each_run("fused_qnorm_rope_kv_insert", [&](const testing::Run& run) {
    EXPECT_NO_THROW(b.run(b.views(), run.options())) << run.label();
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsertBadInput, ComputedValuesFirstOffendingToken,
                 "fused_qnorm_rope_kv_insert") {
  // Token 1: a q head of 1e30 overflows ss; token 2: its kv pair rotated by cos 1e30 overflows.
  InsertBad b;
  for (int d = 0; d < 512; ++d) b.q[static_cast<size_t>((1 * 2 + 1) * 512 + d)] = to_bf16(1e30f);
  for (int i = 0; i < 32; ++i) b.table[7 * 64 + i] = 1e30f;
  for (int d = 448; d < 512; ++d) b.kv[2 * 512 + d] = to_bf16(1e10f);
  EXPECT_EQ(b.expect("NonFiniteError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: token 1 (position 5): q head 1 sum of squares = "
            "inf: intermediate overflow (expected finite; nothing was written)");
  // Token 2 alone: the rotated kv value.
  b = InsertBad();
  for (int i = 0; i < 32; ++i) b.table[7 * 64 + i] = 1e30f;
  for (int d = 448; d < 512; ++d) b.kv[2 * 512 + d] = to_bf16(1e10f);
  EXPECT_NE(b.expect("NonFiniteError").find("token 2 (position 7): rotated kv channel 448 = "),
            std::string::npos);
  // eps = 0 and an all-zero head: inv = 1/0 = inf.
  b = InsertBad();
  b.eps = 0;
  std::fill(b.q.begin(), b.q.begin() + 512, uint16_t{0});
  EXPECT_EQ(b.expect("NonFiniteError"),
            "dsv4cpu::fused_qnorm_rope_kv_insert: token 0 (position 1): q head 0 inverse RMS = "
            "inf: intermediate overflow (expected finite; nothing was written)");
  // check_finite = false: no error.
  testing::for_each_run("fused_qnorm_rope_kv_insert", [&](const testing::Run& run) {
    Options o = run.options();
    o.check_finite = false;
    EXPECT_NO_THROW(b.run(b.views(), o)) << run.label();
  });
}

}  // namespace
}  // namespace dsv4cpu
