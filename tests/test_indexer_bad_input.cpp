// bad-input.md §4 for the indexer ops: one test per rule, each checking the exception class, the
// message (§2 format), and that no buffer changed. Every variant of the op is called.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/fallback.hpp"
#include "dsv4cpu/indexer.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Expects `kind` with message `what` from every run of f's op (testing::expect_error), every
// buffer of the fixture unchanged.
template <class F>
void expect_error(F& f, const char* kind, const std::string& what) {
  EXPECT_EQ(testing::expect_error(
                F::kOp, kind,
                [&](const Options& o) {
                  f.o = o;
                  f.call();
                },
                [&] { return f.snapshot(); }),
            what);
}

template <class F>
void expect_ok(F& f) {
  testing::for_each_run(F::kOp, [&](const testing::Run& run) {
    f.o = run.options();
    EXPECT_NO_THROW(f.call()) << run.label();
  });
}

// ---------------------------------------------------------------- fused_indexer_q_rope_quant

struct QFix {
  static constexpr const char* kOp = "fused_indexer_q_rope_quant";
  std::vector<float> q = std::vector<float>(2 * 2 * 128, 1.0f), w = std::vector<float>(4, 1.0f);
  std::vector<int64_t> pos = {1, 3};
  std::vector<float> table = std::vector<float>(4 * 64, 0.5f);
  std::vector<uint8_t> codes = std::vector<uint8_t>(2 * 2 * 128, 0xEE);
  std::vector<float> w_out = std::vector<float>(4, -5.0f);
  float softmax_scale = kIndexerSoftmaxScale, head_scale = kIndexerHeadScale;
  TensorView vq{q.data(), DType::F32, {2, 2, 128}}, vw{w.data(), DType::F32, {2, 2}},
      vpos{pos.data(), DType::I64, {2}}, vtable{table.data(), DType::F32, {4, 64}};
  MutableTensorView vcodes{codes.data(), DType::F8_E4M3, {2, 2, 128}},
      vwout{w_out.data(), DType::F32, {2, 2}};
  Options o;
  void call() const {
    fused_indexer_q_rope_quant(vq, vw, vpos, vtable, softmax_scale, head_scale, vcodes, vwout, o);
  }
  std::vector<uint8_t> snapshot() const {
    return testing::bytes_of(q, w, pos, table, codes, w_out);
  }
};
const std::string kQ = "dsv4cpu::fused_indexer_q_rope_quant: ";

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, ValidFixtureRuns, "fused_indexer_q_rope_quant") {
  QFix f;
  expect_ok(f);
}

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, ScalesMustBeFinitePositive,
                 "fused_indexer_q_rope_quant") {
  QFix a;
  a.softmax_scale = 0.0f;
  expect_error(a, "ValueError",
               kQ + "softmax_scale = 0: not a finite positive scale (expected a finite value > 0)");
  QFix b;
  b.head_scale = kInf;
  expect_error(b, "ValueError",
               kQ + "head_scale = inf: not a finite positive scale (expected a finite value > 0)");
  QFix c;
  c.head_scale = -0.125f;
  expect_error(
      c, "ValueError",
      kQ + "head_scale = -0.125: not a finite positive scale (expected a finite value > 0)");
}

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, Shapes, "fused_indexer_q_rope_quant") {
  QFix a;
  a.vq = TensorView(a.q.data(), DType::F32, {2, 4, 64});
  expect_error(a, "ShapeError",
               kQ + "q: dtype F32, shape [2, 4, 64], strides [256, 64, 1] (expected F32 [*, *, "
                    "128], contiguous)");
  QFix b;
  b.vw = TensorView(b.w.data(), DType::F32, {2, 1});
  expect_error(b, "ShapeError",
               kQ + "weights: dtype F32, shape [2, 1], strides [1, 1] (expected F32 [2, 2], "
                    "contiguous)");
  QFix c;
  c.vpos = TensorView(c.table.data(), DType::F32, {2});
  expect_error(c, "ShapeError",
               kQ + "positions: dtype F32, shape [2], strides [1] (expected I32 or I64 [2], "
                    "contiguous)");
  QFix d;
  d.vtable = TensorView(d.table.data(), DType::F32, {2, 64}, {128, 1});
  expect_error(d, "ShapeError",
               kQ + "cos_sin_cache: dtype F32, shape [2, 64], strides [128, 1] (expected F32 [*, "
                    "64], contiguous)");
  QFix e;
  e.vcodes = MutableTensorView(e.codes.data(), DType::U8, {2, 2, 128});
  expect_error(e, "ShapeError",
               kQ + "q_fp8: dtype U8, shape [2, 2, 128], strides [256, 128, 1] (expected F8_E4M3 "
                    "[2, 2, 128], contiguous)");
  QFix g;
  g.vwout = MutableTensorView();
  expect_error(g, "ShapeError", kQ + "weights_out: missing (expected F32 [2, 2], contiguous)");
}

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, OutputOverlapsInput,
                 "fused_indexer_q_rope_quant") {
  QFix a;
  a.vwout = MutableTensorView(a.w.data(), DType::F32, {2, 2});
  expect_error(a, "ShapeError",
               kQ + "weights_out: memory overlaps input weights (expected an output that does not "
                    "overlap any input)");
}

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, PositionsIndexTheTable,
                 "fused_indexer_q_rope_quant") {
  QFix a;
  a.pos[1] = 4;
  expect_error(a, "IndexError",
               kQ + "positions[1] = 4: position beyond the cos/sin table (expected position < 4 = "
                    "rows of cos_sin_cache)");
  QFix b;
  b.pos[0] = -1;
  expect_error(b, "IndexError", kQ + "positions[0] = -1: negative position (expected >= 0)");
}

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, InputsFinite, "fused_indexer_q_rope_quant") {
  QFix a;
  a.q[1 * 256 + 0 * 128 + 5] = kNaN;
  a.w[3] = kInf;  // q is reported first (signature order)
  expect_error(a, "NonFiniteError", kQ + "q[1, 0, 5] = nan: not finite (expected a finite value)");
  QFix b;
  b.w[3] = -kInf;
  expect_error(b, "NonFiniteError",
               kQ + "weights[1, 1] = -inf: not finite (expected a finite value)");
  // Rows 1 and 3 are read; row 0 and 2 are not, and are not checked.
  QFix c;
  c.table[0 * 64 + 7] = kNaN;
  c.table[2 * 64 + 1] = kNaN;
  expect_ok(c);
  c.table[3 * 64 + 40] = kInf;
  c.table[1 * 64 + 63] = kNaN;
  expect_error(c, "NonFiniteError",
               kQ + "cos_sin_cache[1, 63] = nan: not finite (expected a finite value)");
  c.o.check_finite = false;
  c.o.variant = {};
  EXPECT_NO_THROW(c.call());
}

// A finite weight overflows when the head's scale is large: token 1 has amax 448·2¹⁰ (e = 10)
// and weight 3e38 in head 1. Nothing is written, token 0's codes included.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, ComputedWeightsOutFinite,
                 "fused_indexer_q_rope_quant") {
  QFix a;
  a.q[1 * 256 + 128 + 0] = 448.0f * 1024.0f;
  a.w[3] = 3e38f;
  expect_error(a, "NonFiniteError",
               kQ + "token 1 (position 3): weights_out head 1 = inf: intermediate overflow, from "
                    "weights[1, 1] = 3e+38 x the query scale x softmax_scale x head_scale "
                    "(expected finite; nothing was written)");
  try {
    a.call();
    ADD_FAILURE() << "no exception";
  } catch (const NonFiniteError& e) {  // computed values: argument "token t", index {t, head}
    EXPECT_EQ(e.argument(), "token 1");
    EXPECT_EQ(e.index(), (std::vector<int64_t>{1, 1}));
  }
  a.o.check_finite = false;
  a.o.variant = {};
  EXPECT_NO_THROW(a.call());
}

DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, HandOverToTheReferenceIsCounted,
                 "fused_indexer_q_rope_quant") {
  // An optimized variant meeting a non-finite weight hands the call to the reference, which
  // throws (core/fallback.hpp): such a call counts once; a finite call never counts.
  testing::for_each_run("fused_indexer_q_rope_quant", [&](const testing::Run& run) {
    QFix finite;
    finite.o = run.options();
    uint64_t before = detail::fallback_count();
    finite.call();
    EXPECT_EQ(detail::fallback_count(), before) << run.label();
    QFix a;
    a.q[1 * 256 + 128 + 0] = 448.0f * 1024.0f;
    a.w[3] = 3e38f;
    a.o = run.options();
    before = detail::fallback_count(detail::Fallback::fused_indexer_q_rope_quant);
    EXPECT_THROW(a.call(), NonFiniteError) << run.label();
    EXPECT_EQ(detail::fallback_count(detail::Fallback::fused_indexer_q_rope_quant) - before,
              run.variant.role == Role::optimized ? 1u : 0u)
        << run.label();
  });
}

// q_fp8 and weights_out may not overlap each other.
DSV4CPU_RUN_TEST(FusedIndexerQRopeQuantBadInput, OutputsDisjoint, "fused_indexer_q_rope_quant") {
  QFix a;
  a.vwout = MutableTensorView(a.codes.data() + 64, DType::F32, {2, 2});
  expect_error(a, "ShapeError",
               kQ + "weights_out: memory overlaps output q_fp8 (expected outputs that do not "
                    "overlap)");
}

// ---------------------------------------------------------------- fp8_paged_mqa_logits

struct LFix {
  static constexpr const char* kOp = "fp8_paged_mqa_logits";
  static constexpr int64_t B = 2, H = 2, P = 16, S = 40, MP = 3, pages = 4;
  testing::KCache kv{P, pages, P * 132};
  std::vector<uint8_t> q = std::vector<uint8_t>(B * H * 128, 0x38);
  std::vector<float> w = std::vector<float>(B * H, 1.0f);
  std::vector<int32_t> seq_lens = {17, 40};
  std::vector<int32_t> table = {3, 1, -1, 0, 2, 1};
  std::vector<float> logits = std::vector<float>(B * S, 9.0f);
  int64_t block_size = P, max_seq_len = S, next_n = 1;
  TensorView vq{q.data(), DType::F8_E4M3, {B, H, 128}},
      vkv = kv.view(), vw{w.data(), DType::F32, {B, H}}, vlens{seq_lens.data(), DType::I32, {B}},
      vtable{table.data(), DType::I32, {B, MP}};
  MutableTensorView vlogits{logits.data(), DType::F32, {B, S}};
  Options o;
  void call() const {
    fp8_paged_mqa_logits(vq, vkv, vw, vlens, vtable, block_size, max_seq_len, vlogits, next_n, o);
  }
  std::vector<uint8_t> snapshot() const {
    return testing::bytes_of(kv.bytes, q, w, seq_lens, table, logits);
  }
};
const std::string kL = "dsv4cpu::fp8_paged_mqa_logits: ";

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, ValidFixtureRuns, "fp8_paged_mqa_logits") {
  LFix f;
  expect_ok(f);
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, Scalars, "fp8_paged_mqa_logits") {
  LFix a;
  a.block_size = 0;
  expect_error(a, "ValueError",
               kL + "block_size = 0: not a positive block size (expected block_size >= 1)");
  LFix b;
  b.max_seq_len = -1;
  expect_error(b, "ValueError",
               kL + "max_seq_len = -1: negative row width (expected max_seq_len >= 0)");
  LFix c;
  c.next_n = 0;
  expect_error(c, "ValueError",
               kL + "next_n = 0: not a positive number of query rows (expected next_n >= 1)");
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, QueryWeightsLengthsTableShapes,
                 "fp8_paged_mqa_logits") {
  LFix a;
  a.vq = TensorView(a.q.data(), DType::U8, {2, 2, 128});
  expect_error(a, "ShapeError",
               kL + "q_fp8: dtype U8, shape [2, 2, 128], strides [256, 128, 1] (expected F8_E4M3 "
                    "[*, *, 128], contiguous)");
  LFix b;  // 3 rows do not split into batch entries of next_n = 2
  b.next_n = 2;
  b.vq = TensorView(b.q.data(), DType::F8_E4M3, {3, 1, 128});
  expect_error(b, "ShapeError",
               kL + "q_fp8: dtype F8_E4M3, shape [3, 1, 128], strides [128, 128, 1] (expected "
                    "F8_E4M3 [B, next_n, H, 128] or [B x next_n, H, 128] with next_n = 2, "
                    "contiguous)");
  LFix c;  // 4-D form whose next_n extent disagrees
  c.vq = TensorView(c.q.data(), DType::F8_E4M3, {1, 2, 2, 128});
  expect_error(c, "ShapeError",
               kL + "q_fp8: dtype F8_E4M3, shape [1, 2, 2, 128], strides [512, 256, 128, 1] "
                    "(expected F8_E4M3 [*, 1, *, 128], contiguous)");
  LFix d;  // the outside fixture bad_weights_shape: [B, H + 1]
  d.w.resize(6);
  d.vw = TensorView(d.w.data(), DType::F32, {2, 3});
  expect_error(d, "ShapeError",
               kL + "weights: dtype F32, shape [2, 3], strides [3, 1] (expected F32 [2, 2], "
                    "contiguous)");
  LFix e;
  e.vlens = TensorView(e.seq_lens.data(), DType::I32, {1});
  expect_error(e, "ShapeError",
               kL + "seq_lens: dtype I32, shape [1], strides [1] (expected I32 or I64 [2], "
                    "contiguous)");
  LFix f;  // 2-D lengths must be [B, next_n]
  f.vlens = TensorView(f.seq_lens.data(), DType::I32, {1, 2});
  expect_error(f, "ShapeError",
               kL + "seq_lens: dtype I32, shape [1, 2], strides [2, 1] (expected I32 or I64 [2, "
                    "1], contiguous)");
  LFix g;  // row stride below the row width
  g.vtable = TensorView(g.table.data(), DType::I32, {2, 3}, {2, 1});
  expect_error(g, "ShapeError",
               kL + "page_table: dtype I32, shape [2, 3], strides [2, 1] (expected I32 or I64 [2, "
                    "*], contiguous rows, dim-0 stride >= row size)");
  LFix h;
  h.vlogits = MutableTensorView(h.logits.data(), DType::F32, {2, 39});
  expect_error(h, "ShapeError",
               kL + "logits: dtype F32, shape [2, 39], strides [39, 1] (expected F32 [2, 40], "
                    "contiguous)");
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, KvCachePageBytesAndStride, "fp8_paged_mqa_logits") {
  LFix a;
  a.vkv = TensorView(a.kv.bytes.data(), DType::U8, {4, 2111}, {2112, 1});
  expect_error(a, "ShapeError",
               kL + "kv_cache: dtype U8, shape [4, 2111], strides [2112, 1] (expected U8 "
                    "[num_pages, page_bytes] with page_bytes >= block_size x 132 = 2112, unit "
                    "inner stride, page stride >= page_bytes)");
  LFix b;
  b.vkv = TensorView(b.kv.bytes.data(), DType::U8, {4, 2112}, {2000, 1});
  expect_error(b, "ShapeError",
               kL + "kv_cache: dtype U8, shape [4, 2112], strides [2000, 1] (expected U8 [*, *], "
                    "contiguous rows, dim-0 stride >= row size)");
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, OutputOverlapsInput, "fp8_paged_mqa_logits") {
  LFix a;
  a.vlogits = MutableTensorView(a.kv.bytes.data(), DType::F32, {2, 40});
  expect_error(a, "ShapeError",
               kL + "logits: memory overlaps input kv_cache (expected an output that does not "
                    "overlap any input)");
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, RowLengthInRange, "fp8_paged_mqa_logits") {
  LFix a;
  a.seq_lens[1] = 41;
  expect_error(a, "IndexError",
               kL + "seq_lens[1] = 41: longer than the row width (expected 0 <= seq_len <= "
                    "max_seq_len = 40)");
  LFix b;
  b.seq_lens[0] = -1;
  expect_error(b, "IndexError",
               kL + "seq_lens[0] = -1: negative length (expected 0 <= seq_len <= max_seq_len = "
                    "40)");
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, PageTableCoversRows, "fp8_paged_mqa_logits") {
  LFix a;  // 40 entries need 3 pages, the table has 2 columns
  a.vtable = TensorView(a.table.data(), DType::I32, {2, 2}, {3, 1});
  expect_error(a, "IndexError",
               kL + "seq_lens[1] = 40: needs 3 pages of 16 entries (expected ceil(seq_len / "
                    "block_size) <= 2 = page_table columns)");
  LFix b;  // the outside fixture bad_negative_covered_page: −1 inside the covered range
  b.table[3] = -1;
  expect_error(
      b, "IndexError",
      kL + "page_table[1, 0] = -1: negative block id in the covered range (expected >= 0)");
  LFix c;
  c.table[1] = 4;
  expect_error(c, "IndexError",
               kL + "page_table[0, 1] = 4: block id beyond the cache (expected block id < 4 = "
                    "num_pages)");
  LFix d;  // entries past ceil(L / P) are never read: any value
  d.table[2] = -123456;
  d.seq_lens[1] = 32;
  d.table[5] = 99;
  expect_ok(d);
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogitsBadInput, QueryCodesAndWeightsFinite, "fp8_paged_mqa_logits") {
  LFix a;
  a.q[1 * 256 + 0 * 128 + 3] = 0xFF;
  a.w[0] = kNaN;  // q_fp8 is reported first
  expect_error(a, "NonFiniteError",
               kL + "q_fp8[1, 0, 3] = 0xFF: NaN code (expected a finite fp8 e4m3 code)");
  LFix b;
  b.w[3] = kInf;
  expect_error(b, "NonFiniteError",
               kL + "weights[1, 1] = inf: not finite (expected a finite value)");
  b.o.check_finite = false;
  b.o.variant = {};
  EXPECT_NO_THROW(b.call());
}

// ---------------------------------------------------------------- topk_transform_512 / 1024

struct TFix {
  static constexpr const char* kOp = "topk_transform_512";
  static constexpr int64_t B = 2, S = 900, MP = 15;
  std::vector<float> scores = std::vector<float>(B * S, 1.0f);
  std::vector<int32_t> seq_lens = {900, 100};
  std::vector<int64_t> table = std::vector<int64_t>(B * MP, 7);
  std::vector<int32_t> raw = std::vector<int32_t>(B * 512, -9),
                       pages = std::vector<int32_t>(B * 512, -9);
  int64_t page_size = 64;
  TopkMode mode = TopkMode::vllm;
  TensorView vscores{scores.data(), DType::F32, {B, S}}, vlens{seq_lens.data(), DType::I32, {B}},
      vtable{table.data(), DType::I64, {B, MP}};
  MutableTensorView vraw{raw.data(), DType::I32, {B, 512}},
      vpages{pages.data(), DType::I32, {B, 512}};
  Options o;
  void call() const {
    topk_transform_512(vscores, vlens, vtable, page_size, mode, vraw, vpages, o);
  }
  std::vector<uint8_t> snapshot() const {
    return testing::bytes_of(scores, seq_lens, table, raw, pages);
  }
};
const std::string kT = "dsv4cpu::topk_transform_512: ";

DSV4CPU_RUN_TEST(TopkTransformBadInput, ValidFixtureRuns, "topk_transform_512") {
  TFix f;
  expect_ok(f);
}

// page_size is page_table's page size: a power of two whether or not page_indices is requested
// (without them it has no effect).
DSV4CPU_RUN_TEST(TopkTransformBadInput, PageSizeIsAPowerOfTwo, "topk_transform_512") {
  TFix a;  // the spec's example message
  a.page_size = 48;
  expect_error(a, "ValueError", kT + "page_size = 48: not a power of two (expected 1, 2, 4, ...)");
  TFix b;
  b.page_size = 0;
  expect_error(b, "ValueError", kT + "page_size = 0: not a power of two (expected 1, 2, 4, ...)");
  TFix c;  // without page_indices too
  c.page_size = 48;
  c.vtable = TensorView();
  c.vpages = MutableTensorView();
  expect_error(c, "ValueError", kT + "page_size = 48: not a power of two (expected 1, 2, 4, ...)");
  TFix d, e;  // a valid page size without page_indices: the same raw indices as page_size 1
  for (TFix* f : {&d, &e}) {
    f->vtable = TensorView();
    f->vpages = MutableTensorView();
  }
  d.page_size = 64;
  e.page_size = 1;
  expect_ok(d);
  expect_ok(e);
  EXPECT_EQ(d.raw, e.raw);
}

// raw_indices and page_indices may not overlap each other.
DSV4CPU_RUN_TEST(TopkTransformBadInput, OutputsDisjoint, "topk_transform_512") {
  TFix a;
  a.vpages = MutableTensorView(a.raw.data(), DType::I32, {2, 512});
  expect_error(a, "ShapeError",
               kT + "page_indices: memory overlaps output raw_indices (expected outputs that do "
                    "not overlap)");
}

DSV4CPU_RUN_TEST(TopkTransformBadInput, ModeValid, "topk_transform_512") {
  TFix a;
  a.mode = static_cast<TopkMode>(7);
  expect_error(a, "ValueError", kT + "mode = 7: unknown mode (expected canonical or vllm)");
}

DSV4CPU_RUN_TEST(TopkTransformBadInput, Shapes, "topk_transform_512") {
  TFix a;  // scores need unit inner stride
  a.vscores = TensorView(a.scores.data(), DType::F32, {2, 400}, {900, 2});
  expect_error(a, "ShapeError",
               kT + "scores: dtype F32, shape [2, 400], strides [900, 2] (expected F32 [*, *], "
                    "unit inner stride)");
  TFix b;
  b.vlens = TensorView(b.seq_lens.data(), DType::I32, {2, 1});
  expect_error(b, "ShapeError",
               kT + "seq_lens: dtype I32, shape [2, 1], strides [1, 1] (expected I32 or I64 [2], "
                    "contiguous)");
  TFix c;  // page_indices without page_table
  c.vtable = TensorView();
  expect_error(c, "ShapeError",
               kT + "page_table: missing (expected I32 or I64 [2, *], contiguous rows, dim-0 "
                    "stride >= row size)");
  TFix d;  // page_table without page_indices
  d.vpages = MutableTensorView();
  expect_error(d, "ShapeError",
               kT + "page_table: dtype I64, shape [2, 15], strides [15, 1] (expected absent when "
                    "page_indices is absent)");
  TFix e;
  e.vraw = MutableTensorView(e.raw.data(), DType::I32, {2, 511});
  expect_error(e, "ShapeError",
               kT + "raw_indices: dtype I32, shape [2, 511], strides [511, 1] (expected I32 [2, "
                    ">= 512], unit inner stride)");
  TFix f;
  f.vraw = MutableTensorView(f.raw.data(), DType::I64, {1, 512});
  expect_error(f, "ShapeError",
               kT + "raw_indices: dtype I64, shape [1, 512], strides [512, 1] (expected I32 [2, "
                    "*], unit inner stride)");
  TFix g;  // page_indices must have raw_indices' shape
  g.raw.resize(2 * 520);
  g.vraw = MutableTensorView(g.raw.data(), DType::I32, {2, 520});
  expect_error(g, "ShapeError",
               kT + "page_indices: dtype I32, shape [2, 512], strides [512, 1] (expected I32 [2, "
                    "520], unit inner stride)");
}

DSV4CPU_RUN_TEST(TopkTransformBadInput, OutputOverlapsInput, "topk_transform_512") {
  TFix a;
  a.vpages = MutableTensorView(a.scores.data(), DType::I32, {2, 512});
  expect_error(a, "ShapeError",
               kT + "page_indices: memory overlaps input scores (expected an output that does "
                    "not overlap any input)");
}

DSV4CPU_RUN_TEST(TopkTransformBadInput, LengthInRange, "topk_transform_512") {
  TFix a;  // vLLM clamps; this library raises
  a.seq_lens[1] = 901;
  expect_error(a, "IndexError",
               kT + "seq_lens[1] = 901: longer than the row width (expected 0 <= seq_len <= 900 = "
                    "scores columns)");
  TFix b;
  b.seq_lens[0] = -3;
  b.vtable = TensorView();
  b.vpages = MutableTensorView();
  expect_error(b, "IndexError",
               kT + "seq_lens[0] = -3: negative length (expected 0 <= seq_len <= 900 = scores "
                    "columns)");
}

DSV4CPU_RUN_TEST(TopkTransformBadInput, PageTableCoversRows, "topk_transform_512") {
  TFix a;
  a.vtable = TensorView(a.table.data(), DType::I64, {2, 14}, {15, 1});
  expect_error(a, "IndexError",
               kT + "seq_lens[0] = 900: needs 15 pages of 64 entries (expected ceil(seq_len / "
                    "page_size) <= 14 = page_table columns)");
  TFix b;  // covered entry of row 1 (L = 100: pages 0, 1)
  b.table[15 + 1] = -1;
  expect_error(
      b, "IndexError",
      kT + "page_table[1, 1] = -1: negative block id in the covered range (expected >= 0)");
  TFix c;  // uncovered entries are free
  c.table[15 + 2] = -1;
  c.table[15 + 14] = -77;
  expect_ok(c);
}

DSV4CPU_RUN_TEST(TopkTransformBadInput, SlotsFitInt32, "topk_transform_512") {
  TFix a;  // (2^25 << 6) + 63 = 2^31 + 63
  a.table[1] = int64_t{1} << 25;
  expect_error(a, "IndexError",
               kT + "page_table[0, 1] = 33554432: slot does not fit in int32 (expected (block id "
                    "<< log2(page_size)) + page_size - 1 <= 2^31 - 1)");
  TFix b;  // the largest page that fits: its last slot is 2^31 − 1
  b.table[1] = (int64_t{1} << 25) - 1;
  b.mode = TopkMode::canonical;
  b.scores[64 + 63] = 5.0f;  // raw 127 ranks first -> slot 2^31 − 1
  expect_ok(b);
  EXPECT_EQ(b.pages[0], std::numeric_limits<int32_t>::max());
}

TEST(TopkTransformBadInput, Transform1024OutputWidth) {
  std::vector<float> scores(1100, 0.0f);
  std::vector<int32_t> lens = {1100}, raw(1023, -9);
  const std::vector<int32_t> raw_before = raw;
  EXPECT_TRUE(testing::throws_exactly<ShapeError>(
      [&] {
        topk_transform_1024(TensorView(scores.data(), DType::F32, {1, 1100}),
                            TensorView(lens.data(), DType::I32, {1}), TensorView(), 1,
                            MutableTensorView(raw.data(), DType::I32, {1, 1023}),
                            MutableTensorView());
      },
      "dsv4cpu::topk_transform_1024: raw_indices: dtype I32, shape [1, 1023], strides [1023, 1] "
      "(expected I32 [1, >= 1024], unit inner stride)"));
  EXPECT_EQ(raw, raw_before);
}

// ---------------------------------------------------------------- short_context_topk

struct SFix {
  static constexpr const char* kOp = "short_context_topk";
  std::vector<int64_t> positions = {0, 2050, 17};
  std::vector<int32_t> out = std::vector<int32_t>(3 * 512, -9);
  TensorView vpos{positions.data(), DType::I64, {3}};
  MutableTensorView vout{out.data(), DType::I32, {3, 512}};
  Options o;
  void call() const { short_context_topk(vpos, vout, o); }
  std::vector<uint8_t> snapshot() const { return testing::bytes_of(positions, out); }
};
const std::string kS = "dsv4cpu::short_context_topk: ";

DSV4CPU_RUN_TEST(ShortContextTopkBadInput, ValidFixtureRuns, "short_context_topk") {
  SFix f;
  expect_ok(f);
}

DSV4CPU_RUN_TEST(ShortContextTopkBadInput, PositionsShortContext, "short_context_topk") {
  SFix a;
  a.positions[2] = 2051;
  expect_error(a, "IndexError",
               kS + "positions[2] = 2051: too many entries for the short-context fill (expected "
                    "(position + 1) / 4 <= 512)");
  SFix b;
  b.positions[0] = -1;
  expect_error(b, "IndexError", kS + "positions[0] = -1: negative position (expected >= 0)");
}

DSV4CPU_RUN_TEST(ShortContextTopkBadInput, Shapes, "short_context_topk") {
  SFix a;
  a.vout = MutableTensorView(a.out.data(), DType::I32, {3, 500});
  expect_error(a, "ShapeError",
               kS +
                   "topk_indices: dtype I32, shape [3, 500], strides [500, 1] (expected I32 [3, >= "
                   "512], unit inner stride)");
  SFix b;
  b.vpos = TensorView(b.out.data(), DType::I64, {1});
  b.vout = MutableTensorView(b.out.data(), DType::I32, {1, 512});
  expect_error(b, "ShapeError",
               kS + "topk_indices: memory overlaps input positions (expected an output that does "
                    "not overlap any input)");
}

// ---------------------------------------------------------------- indexer_topk

// Requests: a decode of seq_len 2400 (L = 600, 10 pages of 64) and a 3-token prefill of
// seq_len 40; a long step.
struct IFix {
  static constexpr const char* kOp = "indexer_topk";
  static constexpr int64_t T = 4, H = 2, P = 64, R = 2, MB = 11, pages = 12;
  testing::KCache kv{P, pages, P * 132};
  std::vector<uint8_t> q = std::vector<uint8_t>(T * H * 128, 0x38);
  std::vector<float> w = std::vector<float>(T * H, 1.0f);
  std::vector<int32_t> qsl = {0, 1, 4};
  std::vector<int64_t> seq_lens = {2400, 40};
  std::vector<int32_t> table = std::vector<int32_t>(R * MB, -1);
  std::vector<int32_t> out = std::vector<int32_t>(T * 512, -9);
  int64_t block_size = P;
  TopkMode mode = TopkMode::canonical;
  TensorView vq{q.data(), DType::F8_E4M3, {T, H, 128}}, vw{w.data(), DType::F32, {T, H}},
      vqsl{qsl.data(), DType::I32, {R + 1}}, vlens{seq_lens.data(), DType::I64, {R}},
      vtable{table.data(), DType::I32, {R, MB}}, vkv = kv.view();
  MutableTensorView vout{out.data(), DType::I32, {T, 512}};
  Options o;
  IFix() {
    const std::vector<uint8_t> key(128, 0x38);
    for (int64_t p = 0; p < pages; ++p)
      for (int64_t e = 0; e < P; ++e) kv.set(p, e, key.data(), 1.0f);
    for (int64_t m = 0; m < 10; ++m) table[static_cast<size_t>(m)] = static_cast<int32_t>(11 - m);
    table[MB] = 0;  // request 1: 10 entries, one page
  }
  IFix(const IFix&) = delete;
  void call() const { indexer_topk(vq, vw, vqsl, vlens, vtable, vkv, block_size, mode, vout, o); }
  std::vector<uint8_t> snapshot() const {
    return testing::bytes_of(kv.bytes, q, w, qsl, seq_lens, table, out);
  }
};
const std::string kI = "dsv4cpu::indexer_topk: ";

DSV4CPU_RUN_TEST(IndexerTopkBadInput, ValidFixtureRuns, "indexer_topk") {
  IFix f;
  expect_ok(f);
}

DSV4CPU_RUN_TEST(IndexerTopkBadInput, BlockSizeAndMode, "indexer_topk") {
  IFix a;
  a.block_size = 48;
  expect_error(a, "ValueError", kI + "block_size = 48: not a power of two (expected 1, 2, 4, ...)");
  IFix b;
  b.mode = static_cast<TopkMode>(2);
  expect_error(b, "ValueError", kI + "mode = 2: unknown mode (expected canonical or vllm)");
}

DSV4CPU_RUN_TEST(IndexerTopkBadInput, Shapes, "indexer_topk") {
  IFix a;
  a.vw = TensorView(a.w.data(), DType::F32, {3, 2});
  expect_error(a, "ShapeError",
               kI + "weights: dtype F32, shape [3, 2], strides [2, 1] (expected F32 [4, 2], "
                    "contiguous)");
  IFix b;
  b.vqsl = TensorView(b.qsl.data(), DType::I32, {0});
  expect_error(b, "ShapeError",
               kI + "query_start_loc: dtype I32, shape [0], strides [1] (expected I32 or I64 [R + "
                    "1] with R >= 0, contiguous)");
  IFix c;  // query_start_loc[R] must be T
  c.qsl[2] = 3;
  expect_error(c, "ShapeError",
               kI + "query_start_loc[2] = 3: total query tokens differ from q_fp8's (expected "
                    "query_start_loc[R] = T = 4)");
  IFix d;
  d.vlens = TensorView(d.seq_lens.data(), DType::I64, {1});
  expect_error(d, "ShapeError",
               kI + "seq_lens: dtype I64, shape [1], strides [1] (expected I32 or I64 [2], "
                    "contiguous)");
  IFix e;
  e.vtable = TensorView(e.table.data(), DType::I32, {1, 11});
  expect_error(e, "ShapeError",
               kI + "block_table: dtype I32, shape [1, 11], strides [11, 1] (expected I32 or I64 "
                    "[2, *], contiguous rows, dim-0 stride >= row size)");
  IFix f;
  f.vkv = TensorView(f.kv.bytes.data(), DType::U8, {12, 8447}, {8448, 1});
  expect_error(f, "ShapeError",
               kI + "kv_cache: dtype U8, shape [12, 8447], strides [8448, 1] (expected U8 "
                    "[num_pages, page_bytes] with page_bytes >= block_size x 132 = 8448, unit "
                    "inner stride, page stride >= page_bytes)");
  IFix g;
  g.vout = MutableTensorView(g.out.data(), DType::I32, {4, 256});
  expect_error(g, "ShapeError",
               kI + "topk_indices: dtype I32, shape [4, 256], strides [256, 1] (expected I32 [4, "
                    ">= 512], unit inner stride)");
  IFix h;
  h.vout = MutableTensorView(h.kv.bytes.data(), DType::I32, {4, 512});
  expect_error(h, "ShapeError",
               kI + "topk_indices: memory overlaps input kv_cache (expected an output that does "
                    "not overlap any input)");
}

DSV4CPU_RUN_TEST(IndexerTopkBadInput, QueryStartLocAndLengths, "indexer_topk") {
  IFix a;
  a.qsl[0] = 1;
  expect_error(
      a, "IndexError",
      kI + "query_start_loc[0] = 1: does not start at 0 (expected query_start_loc[0] = 0)");
  IFix b;
  b.qsl[1] = 5;
  expect_error(b, "IndexError",
               kI + "query_start_loc[2] = 4: decreasing (expected >= query_start_loc[1] = 5)");
  IFix c;
  c.seq_lens[1] = 2;
  expect_error(c, "IndexError",
               kI + "seq_lens[1] = 2: shorter than its request's query tokens (expected seq_len >= "
                    "3 = query_start_loc[2] - query_start_loc[1])");
}

DSV4CPU_RUN_TEST(IndexerTopkBadInput, BlockTableCoversLongStep, "indexer_topk") {
  IFix a;
  a.vtable = TensorView(a.table.data(), DType::I32, {2, 9}, {11, 1});
  expect_error(a, "IndexError",
               kI + "seq_lens[0] = 2400: needs 10 pages of 64 entries (expected "
                    "ceil((seq_len / 4) / block_size) <= 9 = block_table columns)");
  IFix b;
  b.table[11] = -1;  // request 1's only page
  expect_error(
      b, "IndexError",
      kI + "block_table[1, 0] = -1: negative block id in the covered range (expected >= 0)");
  IFix c;
  c.table[4] = 12;
  expect_error(c, "IndexError",
               kI + "block_table[0, 4] = 12: block id beyond the cache (expected block id < 12 = "
                    "num_pages)");
  // A short step reads no block table: the same bad entry is accepted.
  IFix d;
  d.table[4] = 12;
  d.seq_lens[0] = 2051;
  expect_ok(d);
}

DSV4CPU_RUN_TEST(IndexerTopkBadInput, QueryCodesAndWeightsFiniteInLongStep, "indexer_topk") {
  IFix a;
  a.q[3 * 256 + 1 * 128 + 127] = 0x7F;
  expect_error(a, "NonFiniteError",
               kI + "q_fp8[3, 1, 127] = 0x7F: NaN code (expected a finite fp8 e4m3 code)");
  IFix b;
  b.w[2] = kNaN;
  expect_error(b, "NonFiniteError",
               kI + "weights[1, 0] = nan: not finite (expected a finite value)");
  IFix c;  // short step: not read, not checked
  c.w[2] = kNaN;
  c.seq_lens[0] = 2000;
  expect_ok(c);
}

}  // namespace
}  // namespace dsv4cpu
