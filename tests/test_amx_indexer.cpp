// The AMX-BF16 logits kernel without AMX: every piece around the tile instructions (fp8 -> bf16,
// the VNNI query packing, the A-tile key layout, the tile configuration, the tile schedule and the
// epilogue) runs here with a scalar model of TDPBF16PS and must give logits within the bound of
// numerics.md §11.6. The real kernel runs only where the CPU and OS offer AMX: skipped elsewhere,
// a failure where the machine must offer AMX (testing::isa_required).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "optimized/indexer_amx.hpp"
#include "test_amx_model.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

using detail::opt::KeyBlock;
using detail::opt::PreparedRow;
using detail::opt::TileConfig;
using test::EmulatedTiles;
using test::daz_bf16;
using test::ftz;
namespace opt = detail::opt;

uint16_t bf16(float x) { return to_bf16(x); }

TEST(AmxModel, Tdpbf16psHandExample) {
  // One C tile: C[m][n] = Σ_k a[m][2k]·b[k][2n] + a[m][2k+1]·b[k][2n+1].
  std::vector<uint16_t> a(16 * 32, 0), b(16 * 32, 0);
  a[0] = bf16(1.5f);   // A row 0, pair 0
  a[1] = bf16(-2.0f);
  a[2] = bf16(0.25f);  // A row 0, pair 1
  b[0] = bf16(4.0f);   // B row (pair) 0, column 0
  b[1] = bf16(3.0f);
  b[2] = bf16(8.0f);   // B row 0, column 1
  b[32] = bf16(16.0f);  // B row 1, column 0 (even element)
  a[32] = 0x0001;       // A row 1: a bf16 subnormal, read as zero
  b[3] = bf16(1.0f);
  EmulatedTiles t;
  t.zero(0);
  std::vector<uint16_t> zeros(16 * 32, 0);
  t.load_a(0, zeros.data(), 64);  // the other A and B tiles: a product of them would add zero
  t.load_b(0, zeros.data(), 64);
  t.load_a(1, a.data(), 64);
  t.load_b(1, b.data(), 64);
  t.dot(0, 1, 1);
  t.dot(0, 0, 1);
  std::vector<float> c(16 * 16);
  t.store(0, c.data(), 64);
  EXPECT_EQ(c[0], 1.5f * 4.0f - 2.0f * 3.0f + 0.25f * 16.0f);  // 4
  EXPECT_EQ(c[1], 1.5f * 8.0f - 2.0f * 1.0f);                   // 10
  EXPECT_EQ(c[16], 0.0f);                                       // subnormal input flushed
  EXPECT_EQ(ftz(0x1p-130f), 0.0f);
}

// ---- the ordinary pieces ----

TEST(AmxPieces, Fp8ToBf16IsExactForEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    if (testing::fp8_is_nan(code)) continue;
    EXPECT_EQ(opt::bf16_of_code(code), to_bf16(fp8_e4m3_decode(code))) << "code " << c;
  }
  // Spot values by hand: 0x38 = 1.0, 0x01 = 2⁻⁹ (bf16 0x3B00), 0x83 = −3·2⁻⁹, 0x7E = 448.
  EXPECT_EQ(opt::bf16_of_code(0x38), 0x3F80);
  EXPECT_EQ(opt::bf16_of_code(0x01), 0x3B00);
  EXPECT_EQ(opt::bf16_of_code(0x83), 0xBBC0);
  EXPECT_EQ(opt::bf16_of_code(0x7E), 0x43E0);
  EXPECT_EQ(opt::bf16_of_code(0x80), 0x8000);
}

TEST(AmxPieces, TileConfiguration) {
  const TileConfig cfg = opt::amx_tile_config();
  const auto* bytes = reinterpret_cast<const uint8_t*>(&cfg);
  EXPECT_EQ(bytes[0], 1);  // palette 1
  for (int i = 1; i < 16; ++i) EXPECT_EQ(bytes[i], 0) << "byte " << i;
  for (int t = 0; t < 4; ++t) {  // C: 16 keys × 16 fp32 heads
    EXPECT_EQ(cfg.rows[t], 16);
    EXPECT_EQ(cfg.colsb[t], 64);
  }
  // A: 16 keys × 32 bf16 dims; B: 16 dim pairs × 16 heads × 2 bf16.
  for (int i = 0; i < 2; ++i) {  // two A tiles and two B tiles
    EXPECT_EQ(cfg.rows[opt::kTileA + i], 16);
    EXPECT_EQ(cfg.colsb[opt::kTileA + i], 64);
    EXPECT_EQ(cfg.rows[opt::kTileB + i], 16);
    EXPECT_EQ(cfg.colsb[opt::kTileB + i], 64);
  }
  // TDPBF16PS shape rules: A.colsb / 4 = B.rows, C.rows = A.rows, C.colsb = B.colsb.
  EXPECT_EQ(cfg.colsb[opt::kTileA] / 4, cfg.rows[opt::kTileB]);
  EXPECT_EQ(cfg.rows[0], cfg.rows[opt::kTileA]);
  EXPECT_EQ(cfg.colsb[0], cfg.colsb[opt::kTileB]);
  for (int t = opt::kTiles; t < 16; ++t) EXPECT_EQ(cfg.rows[t] | cfg.colsb[t], 0);
  // Four k-steps of 32 dims cover the 128 dims.
  EXPECT_EQ(opt::kKSteps * cfg.colsb[opt::kTileA] / 2, 128);
}

TEST(AmxPieces, QueryVnniLayout) {
  const int64_t H = 3, Hp = 16;
  std::vector<uint8_t> q(H * 128);
  std::mt19937_64 rng(1);
  for (auto& c : q) c = testing::random_code(rng);
  std::vector<uint16_t> packed(64 * Hp * 2, 0xDEAD);
  opt::pack_q_vnni(q.data(), H, Hp, packed.data());
  for (int p = 0; p < 64; ++p)
    for (int h = 0; h < Hp; ++h) {
      // The 32-bit word p·Hp + h holds dims 2p (low half) and 2p + 1 of head h.
      uint32_t word;
      std::memcpy(&word, &packed[(p * Hp + h) * 2], 4);
      const uint32_t want = h < H ? (uint32_t{to_bf16(fp8_e4m3_decode(q[h * 128 + 2 * p + 1]))}
                                     << 16) |
                                        to_bf16(fp8_e4m3_decode(q[h * 128 + 2 * p]))
                                  : 0u;
      ASSERT_EQ(word, want) << "pair " << p << " head " << h;
    }
}

TEST(AmxPieces, KeyBlockLayout) {
  std::vector<uint8_t> codes(3 * 128);
  std::mt19937_64 rng(2);
  for (auto& c : codes) c = testing::random_code(rng);
  codes[128 + 77] = 0xFF;  // key 1 has a NaN code
  KeyBlock keys{};
  for (int k = 0; k < 3; ++k) keys.codes[k] = &codes[static_cast<size_t>(k * 128)];
  std::vector<uint16_t> rows(16 * 128, 0xBEEF);
  bool nan[16];
  opt::convert_keys(keys.codes, 3, 16, rows.data(), nan);
  for (int k = 0; k < 16; ++k)
    for (int d = 0; d < 128; ++d) {
      const uint16_t want = k < 3 ? opt::bf16_of_code(codes[k * 128 + d]) : 0;
      ASSERT_EQ(rows[k * 128 + d], want) << "key " << k << " dim " << d;
    }
  EXPECT_FALSE(nan[0]);
  EXPECT_TRUE(nan[1]);
  EXPECT_FALSE(nan[2]);
}

TEST(AmxPieces, EpilogueReluHeadWeightsKeyScale) {
  // 16 heads, 2 keys; key 1 has a NaN code.
  std::vector<float> dots(2 * 64, 0.0f), w(16, 0.0f);
  dots[0] = 2.0f;    // head 0
  dots[1] = -3.0f;   // head 1: ReLU -> 0
  dots[2] = -0.0f;   // head 2
  dots[15] = 0.5f;   // head 15
  w[0] = 0.25f;
  w[1] = 100.0f;
  w[2] = 7.0f;
  w[15] = -4.0f;
  float lanes[2][16] = {};
  opt::epilogue_accumulate(dots.data(), 64, 2, 0, 16, w.data(), lanes);
  KeyBlock keys{};
  keys.scale[0] = 0x1p-3f;
  keys.scale[1] = 1.0f;
  const bool nan[2] = {false, true};
  float out[2];
  opt::epilogue_finish(lanes, 2, keys, nan, 16, out);
  EXPECT_EQ(out[0], (0.25f * 2.0f - 4.0f * 0.5f) * 0x1p-3f);  // −0.1875
  EXPECT_TRUE(std::isnan(out[1]));
  // With no heads a NaN key contributes nothing (the reference's empty head sum).
  float empty[1][16] = {};
  opt::epilogue_finish(empty, 1, keys, nan + 1, 0, out);
  EXPECT_EQ(out[0], 0.0f);
}

// ---- the whole kernel on the tile model against the exact logits ----

struct AmxCase {
  int64_t H, P, L;
  bool tiny;  // fp8 subnormal codes and weights near the underflow threshold
};

void check_against_exact(const AmxCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t pages = (c.L + c.P - 1) / c.P + 2, stride = c.P * 132 + 40;
  testing::KCache kv(c.P, pages, stride);
  std::vector<int64_t> table(static_cast<size_t>(pages));
  for (int64_t i = 0; i < pages; ++i) table[static_cast<size_t>(i)] = (i * 7 + 3) % pages;
  auto code = [&] {
    const uint8_t r = testing::random_code(rng);
    return c.tiny ? static_cast<uint8_t>(r & 0x87) : r;  // E = 0: ±m·2⁻⁹
  };
  std::vector<uint8_t> q(static_cast<size_t>(c.H * 128)), key(128);
  for (auto& x : q) x = code();
  std::vector<float> w(static_cast<size_t>(c.H));
  for (auto& x : w)
    x = std::ldexp(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng), c.tiny ? -120 : -4);
  for (int64_t j = 0; j < c.L; ++j) {
    for (auto& x : key) x = code();
    if (rng() % 17 == 0) key[rng() % 128] = (rng() & 1) ? 0x7F : 0xFF;
    const int e = static_cast<int>(rng() % 40) - 30;
    kv.set(table[static_cast<size_t>(j / c.P)], j % c.P, key.data(), std::ldexp(1.0f, e));
  }
  const int64_t Hp = opt::padded_heads(c.H);
  std::vector<uint16_t> packed(64 * Hp * 2 + 32);
  std::vector<float> wp(static_cast<size_t>(Hp));
  opt::bf16_prepare(q.data(), w.data(), c.H, Hp, packed.data(), wp.data());
  const PreparedRow row{packed.data(), wp.data(), c.H, Hp};
  std::vector<float> out(static_cast<size_t>(c.L));
  EmulatedTiles tiles;
  for (int64_t j0 = 0; j0 < c.L;) {
    const int64_t n = std::min<int64_t>(1 + static_cast<int64_t>(rng() % opt::kKeyBlock), c.L - j0);
    KeyBlock keys{};
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = j0 + k, page = table[static_cast<size_t>(j / c.P)];
      keys.codes[k] = kv.codes(page, j % c.P);
      keys.scale[k] = kv.scale(page, j % c.P);
    }
    opt::amx_block<opt::BasicPieces>(tiles, row, keys, n, &out[static_cast<size_t>(j0)]);
    j0 += n;
  }
  // Every 16 keys × 64 heads take 4 k-steps × 4 C tiles (fewer heads, fewer tiles; none for H = 0).
  EXPECT_EQ(tiles.dots > 0, c.H > 0);
  const testing::ExactLogits ex =
      testing::exact_logits(q.data(), w.data(), c.H, kv.view(), c.P, table, c.L);
  EXPECT_TRUE(testing::holds(testing::logits_violation(out.data(), c.L, ex)))
      << "H=" << c.H << " P=" << c.P << " L=" << c.L << " tiny=" << c.tiny;
}

TEST(AmxKernelOnTileModel, WithinBoundOfExactLogits) {
  const AmxCase cases[] = {{64, 64, 200, false}, {64, 16, 97, false}, {1, 3, 40, false},
                           {17, 256, 300, false}, {80, 64, 70, false}, {64, 64, 130, true},
                           {16, 1, 33, true},    {0, 6, 40, false}};  // H = 0: +0, NaN keys too
  uint64_t seed = 10;
  for (const AmxCase& c : cases) check_against_exact(c, seed++);
}

TEST(AmxKernelOnTileModel, ScheduleCountsTiles) {
  // H = 64, one block of 16 keys: 4 k-steps × 4 head groups = 16 TDPBF16PS.
  std::vector<uint8_t> q(64 * 128, 0x38), key(128, 0x38);
  std::vector<float> w(64, 0.01f);
  std::vector<uint16_t> packed(64 * 64 * 2);
  std::vector<float> wp(64);
  opt::bf16_prepare(q.data(), w.data(), 64, 64, packed.data(), wp.data());
  KeyBlock keys{};
  for (int k = 0; k < 16; ++k) {
    keys.codes[k] = key.data();
    keys.scale[k] = 0x1p-8f;
  }
  EmulatedTiles tiles;
  float out[16];
  opt::amx_block<opt::BasicPieces>(tiles, PreparedRow{packed.data(), wp.data(), 64, 64}, keys,
                 16, out);
  EXPECT_EQ(tiles.dots, 16);
  // numerics.md §11.6 example: all codes 1.0, w = 0.01, ks = 2⁻⁸: X = 0.32, B ≈ 3.66·10⁻⁶.
  for (float v : out) EXPECT_NEAR(v, 0.32, 3.66e-6);
}

// ---- the real kernel, where AMX exists ----

// The AMX variants of the logits ops: registered once each, selected first wherever they are
// available, and available wherever the machine must offer AMX (isa_required: /proc/cpuinfo lists
// amx_tile, amx_bf16 and avx512vbmi, or DSV4CPU_REQUIRE_ISA names amx); elsewhere naming one is a ValueError.
TEST(AmxVariant, RegisteredGatedAndSelected) {
  for (const char* op : {"fp8_paged_mqa_logits", "indexer_topk"}) {
    const testing::RunList amx = testing::runs(op, testing::isa_plan("amx"));
    ASSERT_EQ(amx.runs.size() + amx.absent.size(), 1u) << op;
    if (amx.runs.empty()) {
      EXPECT_FALSE(testing::isa_required("amx")) << testing::absence(op, amx).message;
      Options o;
      o.variant = amx.absent[0].name;
      EXPECT_THROW(selected_variant(op, o), ValueError) << op;
      EXPECT_NE(selected_variant(op), amx.absent[0].name) << op;
    } else {
      EXPECT_EQ(selected_variant(op), amx.runs[0].variant.name) << op;
    }
  }
}

DSV4CPU_RUN_TEST(AmxVariant, LogitsWithinBoundOfExact,
                 "fp8_paged_mqa_logits", testing::isa_plan("amx", {1, 2})) {
  const testing::RunList amx =
      testing::runs("fp8_paged_mqa_logits", testing::isa_plan("amx", {1, 2}));
  DSV4CPU_SKIP_IF_ABSENT("fp8_paged_mqa_logits", amx);
  std::mt19937_64 rng(5);
  const int64_t P = 64, H = 64, L = 1000, S = 1030, pages = L / P + 1;
  testing::KCache kv(P, pages, P * 132);
  std::vector<uint8_t> q(H * 128), key(128);
  for (auto& x : q) x = testing::random_code(rng);
  std::vector<float> w(H);
  for (auto& x : w) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  for (int64_t j = 0; j < L; ++j) {
    for (auto& x : key) x = testing::random_code(rng);
    kv.set(j / P, j % P, key.data(), std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10));
  }
  std::vector<int32_t> table(static_cast<size_t>(pages)), lens = {static_cast<int32_t>(L)};
  std::vector<int64_t> pages_of_row(static_cast<size_t>(pages));
  for (int64_t i = 0; i < pages; ++i) {
    table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    pages_of_row[static_cast<size_t>(i)] = i;
  }
  const testing::ExactLogits ex =
      testing::exact_logits(q.data(), w.data(), H, kv.view(), P, pages_of_row, L);
  testing::for_each(amx, [&](const testing::Run& run) {
    std::vector<float> out(S, 12345.0f);
    fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, H, 128}), kv.view(),
                         TensorView(w.data(), DType::F32, {1, H}),
                         TensorView(lens.data(), DType::I32, {1}),
                         TensorView(table.data(), DType::I32, {1, pages}), P, S,
                         MutableTensorView(out.data(), DType::F32, {1, S}), 1, run.options());
    EXPECT_TRUE(testing::holds(testing::logits_violation(out.data(), S, ex))) << run.label();
  });
}

}  // namespace
}  // namespace dsv4cpu
