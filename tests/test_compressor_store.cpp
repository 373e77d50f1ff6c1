// compress_norm_rope_store (head 512) and compress_norm_rope_store_indexer (head 128):
// compressor.md §9 worked examples by hand, FMA placement, invariants against a binary64 model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "core/fallback.hpp"
#include "dsv4cpu/errors.hpp"
#include "test_compressor_util.hpp"

namespace dsv4cpu {
namespace {

using test::CompressCase;

// The bytes of a main-head entry given per-tile codes, the RoPE bf16 values and tile bytes.
void expect_main_entry(const CompressCase& c, int64_t slot, const std::vector<uint8_t>& codes,
                       const std::vector<uint16_t>& rope, const std::vector<uint8_t>& scales,
                       const std::string& where) {
  const uint8_t* data = c.kv_cache.data() + c.data_at(slot);
  for (int d = 0; d < 448; ++d) ASSERT_EQ(data[d], codes[static_cast<size_t>(d)]) << where << " d=" << d;
  for (int k = 0; k < 64; ++k) {
    const uint16_t h = static_cast<uint16_t>(data[448 + 2 * k] | (data[449 + 2 * k] << 8));
    ASSERT_EQ(h, rope[static_cast<size_t>(k)]) << where << " rope k=" << k;
  }
  const uint8_t* sc = c.kv_cache.data() + c.scale_at(slot);
  for (int q = 0; q < 7; ++q) ASSERT_EQ(sc[q], scales[static_cast<size_t>(q)]) << where << " tile " << q;
  ASSERT_EQ(sc[7], 0x00) << where << " pad byte";
}

std::vector<std::pair<int64_t, int64_t>> entry_ranges(const CompressCase& c, int64_t slot) {
  return {{c.data_at(slot), c.data_at(slot) + c.data_bytes()},
          {c.scale_at(slot), c.scale_at(slot) + c.scale_bytes()}};
}

DSV4CPU_RUN_TEST(CompressNormRopeStore, WorkedExample91BothClampModes, "compress_norm_rope_store") {
  testing::for_each_run("compress_norm_rope_store", [&](const testing::Run& run) {
    for (ScaleClamp clamp : {ScaleClamp::cpu, ScaleClamp::gpu}) {
      CompressCase c = test::worked_example(512, 0);
      c.clamp = clamp;
      const auto before = c.kv_cache;
      c.run(run.options());
      // [0, 448) = 0x78; [448, 576) = 64 x (0x80, 0x3F); [36864, 36871) = 0x77; 36871 = 0x00.
      const uint8_t* page0 = c.kv_cache.data();
      for (int i = 0; i < 448; ++i) ASSERT_EQ(page0[i], 0x78) << run.label() << " " << i;
      for (int k = 0; k < 64; ++k) {
        ASSERT_EQ(page0[448 + 2 * k], 0x80) << run.label();
        ASSERT_EQ(page0[449 + 2 * k], 0x3F) << run.label();
      }
      for (int i = 36864; i < 36871; ++i) ASSERT_EQ(page0[i], 0x77) << run.label();
      ASSERT_EQ(page0[36871], 0x00) << run.label();
      EXPECT_TRUE(test::changed_outside(before, c.kv_cache, {{0, 576}, {36864, 36872}}).empty())
          << run.label();
    }
  });
}

DSV4CPU_RUN_TEST(CompressNormRopeStore, WorkedExample91AtAnotherSlot, "compress_norm_rope_store") {
  // Slot 64 + 5 with P = 64: page 1, entry 5. Data at 5·576, scales at 64·576 + 8·5 of page 1.
  testing::for_each_run("compress_norm_rope_store", [&](const testing::Run& run) {
    CompressCase c = test::worked_example(512, 69);
    const auto before = c.kv_cache;
    c.run(run.options());
    const int64_t page = c.page_stride;
    EXPECT_EQ(c.data_at(69), page + 2880);
    EXPECT_EQ(c.scale_at(69), page + 36864 + 40);
    expect_main_entry(c, 69, std::vector<uint8_t>(448, 0x78), std::vector<uint16_t>(64, 0x3F80),
                      std::vector<uint8_t>(7, 0x77), run.label());
    EXPECT_TRUE(test::changed_outside(before, c.kv_cache, entry_ranges(c, 69)).empty())
        << run.label();
  });
}

DSV4CPU_RUN_TEST(CompressNormRopeStoreIndexer, WorkedExample93,
                 "compress_norm_rope_store_indexer") {
  // 128 codes 0x78 at [j·128, j·128 + 128) and the fp32 scale 2^-8 (00 00 80 3B) at P·128 + 4j,
  // for j = 0 (page 0) and for slot 64 + 5 (page 1, j = 5).
  testing::for_each_run("compress_norm_rope_store_indexer", [&](const testing::Run& run) {
    for (int64_t slot : {0, 69})
      for (ScaleClamp clamp : {ScaleClamp::cpu, ScaleClamp::gpu}) {
        CompressCase c = test::worked_example(128, slot);
        c.clamp = clamp;  // accepted and ignored
        const auto before = c.kv_cache;
        c.run(run.options());
        const int64_t base = (slot / 64) * c.page_stride, j = slot % 64;
        for (int64_t d = 0; d < 128; ++d)
          ASSERT_EQ(c.kv_cache[static_cast<size_t>(base + j * 128 + d)], 0x78) << run.label();
        const uint8_t expect[4] = {0x00, 0x00, 0x80, 0x3B};
        for (int b = 0; b < 4; ++b)
          ASSERT_EQ(c.kv_cache[static_cast<size_t>(base + 8192 + 4 * j + b)], expect[b])
              << run.label();
        EXPECT_TRUE(test::changed_outside(before, c.kv_cache, entry_ranges(c, slot)).empty())
            << run.label();
      }
  });
}

DSV4CPU_RUN_TEST(CompressNormRopeStore, WorkedExample92ScaleClampModes,
                 "compress_norm_rope_store") {
  // §9.1's pooled input (n[d] = RN((1 − 2^-24)·w[d])). Tile 0 gets the bf16 values
  // 0.010009765625 (channel 5) and 5.3125·2^-22 (channel 9) through the weights; every other
  // weight is 0, so every other value is +0. The expected bytes are §9.2's table.
  const float big = 0.010009765625f, small = 5.3125f * 0x1p-22f;
  testing::for_each_run("compress_norm_rope_store", [&](const testing::Run& run) {
    for (ScaleClamp clamp : {ScaleClamp::cpu, ScaleClamp::gpu}) {
      CompressCase c = test::worked_example(512, 0);
      c.clamp = clamp;
      std::fill(c.weight.begin(), c.weight.end(), 0.0f);
      c.weight[5] = big;
      c.weight[9] = small;
      c.run(run.options());
      const bool cpu = clamp == ScaleClamp::cpu;
      std::vector<uint8_t> codes(448, 0x00);
      codes[5] = cpu ? 0x6A : 0x7A;
      codes[9] = cpu ? 0x05 : 0x13;
      // Zero tiles: cpu pins e at -13 (byte 114); gpu: sc = RN(eps / 448), e = -22 (byte 105).
      std::vector<uint8_t> scales(7, cpu ? 0x72 : 0x69);
      scales[0] = cpu ? 0x72 : 0x70;
      expect_main_entry(c, 0, codes, std::vector<uint16_t>(64, 0x0000), scales,
                        run.label() + (cpu ? " cpu" : " gpu"));
      // Decoded values of the table: both modes give amax 0.009765625; the small value decodes
      // to 5·2^-22 (cpu) and 1.375·2^-20 (gpu).
      const float scale = std::ldexp(1.0f, c.kv_cache[36864] - 127);
      EXPECT_EQ(fp8_e4m3_decode(c.kv_cache[5]) * scale, 0.009765625f);
      EXPECT_EQ(fp8_e4m3_decode(c.kv_cache[9]) * scale, cpu ? 5 * 0x1p-22f : 1.375f * 0x1p-20f);
    }
  });
}

DSV4CPU_RUN_TEST(CompressNormRopeStoreIndexer, AlwaysClampsTheAmax,
                 "compress_norm_rope_store_indexer") {
  // §9.2's tile values in the indexer's single block, with scale_clamp = cpu requested: the
  // indexer ignores it (§7) and uses clamp-amax: e = -15, scale 2^-15 = 0x38000000, codes
  // 0x7A and 0x13 (§9.2's gpu column); every other value is +0.
  testing::for_each_run("compress_norm_rope_store_indexer", [&](const testing::Run& run) {
    CompressCase c = test::worked_example(128, 0);
    c.clamp = ScaleClamp::cpu;
    std::fill(c.weight.begin(), c.weight.end(), 0.0f);
    c.weight[5] = 0.010009765625f;
    c.weight[9] = 5.3125f * 0x1p-22f;
    c.run(run.options());
    for (int d = 0; d < 128; ++d)
      ASSERT_EQ(c.kv_cache[static_cast<size_t>(d)], d == 5   ? 0x7A
                                                    : d == 9 ? 0x13
                                                             : 0x00)
          << run.label() << " d=" << d;
    const uint8_t scale[4] = {0x00, 0x00, 0x00, 0x38};
    for (int b = 0; b < 4; ++b) EXPECT_EQ(c.kv_cache[static_cast<size_t>(8192 + b)], scale[b]);
  });
}

DSV4CPU_RUN_TEST(CompressRounding, ValuesAreRoundedToBf16BeforeQuantisation,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // §9.1's input with weight[d] = 1.1875 − 2^-20 + 2^-23 gives n[d] = RN((1 − 2^-24)·w) =
  // 1.1875 − 2^-20 (one fp32 ulp below w). Its bf16 rounding is 1.1875, so y = 1.1875·2^8 = 304,
  // the tie between 288 and 320 that rounds to even: 320, code 0x7A. Quantising the fp32 value
  // instead would give 288 (0x79). Checked for a NoPE dim (d = 0) and, in the indexer, for a
  // rotated dim (d = 64, table row cos 1, sin 0), whose value the main head stores as bf16 0x3F98.
  const float w = 1.1875f - 0x1p-20f + 0x1p-23f;
  for (int hd : {512, 128}) {
    const std::string op = hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      CompressCase c = test::worked_example(hd, 0);
      c.weight[0] = w;
      c.weight[static_cast<size_t>(hd - 64)] = w;
      c.run(run.options());
      if (hd == 512) {
        std::vector<uint8_t> codes(448, 0x78);
        codes[0] = 0x7A;
        std::vector<uint16_t> rope(64, 0x3F80);
        rope[0] = 0x3F98;
        expect_main_entry(c, 0, codes, rope, std::vector<uint8_t>(7, 0x77), run.label());
      } else {
        for (int d = 0; d < 128; ++d)
          ASSERT_EQ(c.kv_cache[static_cast<size_t>(d)], d == 0 || d == 64 ? 0x7A : 0x78)
              << run.label() << " d=" << d;
      }
    });
  }
}

DSV4CPU_RUN_TEST(CompressRounding, WeightMultipliesTheRoundedNormalisedValue,
                 "compress_norm_rope_store") {
  // numerics.md §8.3: n = RN(RN(c·inv)·w). With §9.1's c·inv = a = 1 − 2^-24 and w = 1.01171875
  // (0x3F818000, a bf16 tie), n = RN(a·w) = w − 2^-23 lies just below the tie: bf16 0x3F81 in
  // the first RoPE dim (table row cos 1, sin 0). The other order, RN(c·RN(inv·w)), lands on the
  // tie itself and rounds to 0x3F82.
  testing::for_each_run("compress_norm_rope_store", [&](const testing::Run& run) {
    CompressCase c = test::worked_example(512, 0);
    c.weight[448] = 1.01171875f;
    c.run(run.options());
    std::vector<uint16_t> rope(64, 0x3F80);
    rope[0] = 0x3F81;
    expect_main_entry(c, 0, std::vector<uint8_t>(448, 0x78), rope, std::vector<uint8_t>(7, 0x77),
                      run.label());
  });
}

// ---- FMA placement (numerics.md §7): inputs where fma(a, b, c) != RN(RN(a·b) + c) ----

DSV4CPU_RUN_TEST(CompressFma, PoolingAccumulatorIsFused,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // Two valid columns per channel: A (score 0, kv kA) then B (score -1, kv kB = 3·2^60, own row).
  // With kA = -RN(eB·kB), the fused acc = fma(eB, kB, kA) is the exact rounding error ε of the
  // product (≈ 2^36), the unfused one is 0. Every channel pools to γ = RN(ε / RN(1 + eB)), so the
  // normalised vector is ±(1 ± 2^-19): every NoPE code is ±1·2^8 = 0x78/0xF8 with tile byte 0x77
  // (or, for the indexer, fp32 scale 2^-8), and the RoPE bf16 (table row cos 1, sin 0) is ±1.0.
  // An unfused build pools 0 and writes +0 codes instead.
  const float eB = exp_lib(-1.0f);
  const float kB = 3.0f * 0x1p60f;
  const double prod = static_cast<double>(eB) * static_cast<double>(kB);  // exact (48 bits)
  const float kA = -static_cast<float>(prod);
  const double eps_prod = prod + static_cast<double>(kA);  // exact
  ASSERT_NE(eps_prod, 0.0) << "the product must be inexact in fp32";
  const bool neg = eps_prod < 0;
  for (int hd : {512, 128}) {
    const std::string op = hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      CompressCase c(hd, 4, 8, 8, 1, 1, 64, 1);
      c.positions[0] = 3;
      c.kv_slot[0] = 0;
      c.gather[6] = 30;
      c.gather[7] = 31;
      for (int d = 0; d < hd; ++d) {
        c.row(30)[c.kv_off(6) + d] = kA;
        c.row(30)[c.score_off(6) + d] = 0.0f;
        c.row(31)[c.kv_off(7) + d] = kB;
        c.row(31)[c.score_off(7) + d] = -1.0f;
      }
      c.run(run.options());
      const uint8_t code = neg ? 0xF8 : 0x78;
      if (hd == 512) {
        expect_main_entry(c, 0, std::vector<uint8_t>(448, code),
                          std::vector<uint16_t>(64, neg ? 0xBF80 : 0x3F80),
                          std::vector<uint8_t>(7, 0x77), run.label());
      } else {
        for (int d = 0; d < 128; ++d)
          ASSERT_EQ(c.kv_cache[static_cast<size_t>(d)], code) << run.label();
        uint32_t scale;
        std::memcpy(&scale, c.kv_cache.data() + 8192, 4);
        EXPECT_EQ(scale, 0x3B800000u) << run.label();
      }
    });
  }
}

DSV4CPU_RUN_TEST(CompressFma, RopeRotationIsFused, "compress_norm_rope_store") {
  // §9.1's input gives n[d] = a = 1 − 2^-24 in every dim. Table row 0 holds cos_i = sin_i = v_i,
  // so e' = fma(a, v, RN(a·(−v))) = a·v − RN(a·v), the (exact, non-zero) rounding error of the
  // product, and o' = RN(a·v + RN(a·v)); both are derived here in binary64. An unfused rotation
  // gives e' = 0.
  testing::for_each_run("compress_norm_rope_store", [&](const testing::Run& run) {
    CompressCase c = test::worked_example(512, 0);
    const float a = 1.0f - 0x1p-24f;
    std::vector<uint16_t> rope(64);
    for (int i = 0; i < 32; ++i) {
      const float v = 0.6f + 0.011f * static_cast<float>(i);
      c.cos_sin[static_cast<size_t>(i)] = v;
      c.cos_sin[static_cast<size_t>(32 + i)] = v;
      const double p = static_cast<double>(a) * static_cast<double>(v);  // exact
      const double rp = static_cast<double>(static_cast<float>(p));
      ASSERT_NE(p - rp, 0.0) << "pair " << i << " needs an inexact product";
      rope[static_cast<size_t>(2 * i)] = to_bf16(static_cast<float>(p - rp));      // exact
      rope[static_cast<size_t>(2 * i + 1)] = to_bf16(static_cast<float>(p + rp));  // one rounding
    }
    c.run(run.options());
    expect_main_entry(c, 0, std::vector<uint8_t>(448, 0x78), rope, std::vector<uint8_t>(7, 0x77),
                      run.label());
  });
}

// ---- invariants against an unquantised binary64 model ----

// compressor.md §6.2 / §7 in binary64 without any rounding: pool (exact exp), RMSNorm, RoPE.
std::vector<double> model_entry(const CompressCase& c, int64_t t) {
  const int64_t p = c.positions[static_cast<size_t>(t)], p0 = (p / c.r) * c.r;
  const int hd = c.hd, nope = c.nope();
  std::vector<const float*> kv_col, score_col;  // valid columns in ascending w
  for (int64_t w = 0; w < c.W; ++w) {
    const int64_t g = c.gather[static_cast<size_t>(t * c.W + w)];
    if (g < 0) continue;
    kv_col.push_back(c.row(g) + c.kv_off(w));
    score_col.push_back(c.row(g) + c.score_off(w));
  }
  std::vector<double> x(static_cast<size_t>(hd));
  for (int d = 0; d < hd; ++d) {
    double m = -INFINITY;
    for (const float* s : score_col) m = std::max(m, double(s[d]));
    double den = 0, acc = 0;
    for (size_t j = 0; j < kv_col.size(); ++j) {
      den += std::exp(score_col[j][d] - m);
      acc += std::exp(score_col[j][d] - m) * kv_col[j][d];
    }
    x[static_cast<size_t>(d)] = acc / den;
  }
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / hd + static_cast<double>(static_cast<float>(c.eps)));
  for (int d = 0; d < hd; ++d) x[static_cast<size_t>(d)] *= inv * c.weight[static_cast<size_t>(d)];
  const float* cs = c.cos_sin.data() + p0 * 64;
  for (int i = 0; i < 32; ++i) {
    const double e = x[static_cast<size_t>(nope + 2 * i)], o = x[static_cast<size_t>(nope + 2 * i + 1)];
    x[static_cast<size_t>(nope + 2 * i)] = e * cs[i] - o * cs[32 + i];
    x[static_cast<size_t>(nope + 2 * i + 1)] = o * cs[i] + e * cs[32 + i];
  }
  return x;
}

// Checks one written entry against the model: each dequantised code within half an fp8 step
// (2^-4 relative, or 2^-10 of the scale in the subnormal range) plus the bf16 rounding before it
// (2^-8 relative) and the fp32 pipeline (1e-4 of the block's largest value); RoPE bf16 within
// 2^-8 relative; scale exponents within 1 of the model's and of the requested rule.
void expect_close_to_model(const CompressCase& c, int64_t t, const std::string& where) {
  const std::vector<double> x = model_entry(c, t);
  const int64_t slot = c.kv_slot[static_cast<size_t>(t)];
  const uint8_t* data = c.kv_cache.data() + c.data_at(slot);
  const uint8_t* scale = c.kv_cache.data() + c.scale_at(slot);
  const bool main = c.hd == 512;
  const int quant_dims = main ? 448 : 128, block = main ? 64 : 128;
  const ScaleClamp rule = main ? c.clamp : ScaleClamp::gpu;
  for (int q = 0; q < quant_dims / block; ++q) {
    double amax = 0;
    for (int d = q * block; d < (q + 1) * block; ++d) amax = std::max(amax, std::fabs(x[static_cast<size_t>(d)]));
    double S;
    if (main) {
      S = std::ldexp(1.0, scale[q] - 127);
    } else {
      float f;
      std::memcpy(&f, scale, 4);
      S = f;
    }
    const double eps_s = 1e-4;
    const double sc = rule == ScaleClamp::cpu ? std::max(amax / 448, eps_s) : std::max(amax, eps_s) / 448;
    EXPECT_LE(std::fabs(std::log2(S) - std::ceil(std::log2(sc))), 1.0) << where << " block " << q;
    for (int d = q * block; d < (q + 1) * block; ++d) {
      const double xd = x[static_cast<size_t>(d)];
      const double deq = fp8_e4m3_decode(data[d]) * S;
      const double bound = (0x1p-4 + 0x1p-8) * std::fabs(xd) + 0x1p-10 * S + 1e-4 * amax;
      ASSERT_LE(std::fabs(deq - xd), bound) << where << " d=" << d << " x=" << xd;
    }
  }
  if (main) {
    for (int k = 0; k < 64; ++k) {
      const double xd = x[static_cast<size_t>(448 + k)];
      const double e = x[static_cast<size_t>(448 + (k & ~1))], o = x[static_cast<size_t>(449 + (k & ~1))];
      const uint16_t h = static_cast<uint16_t>(data[448 + 2 * k] | (data[449 + 2 * k] << 8));
      ASSERT_LE(std::fabs(bf16_to_f32(h) - xd), 0x1p-8 * std::fabs(xd) + 1e-4 * (std::fabs(e) + std::fabs(o)))
          << where << " rope k=" << k;
    }
    EXPECT_EQ(scale[7], 0x00) << where;
  }
}

struct Shape {
  int hd;
  int64_t r, W;
  ScaleClamp clamp;
};

// A batch of two requests with random state rows, weights and rotation table. Request q's token
// at position p has state slot base_q + p. Random non-own window columns are dropped (-1).
// Boundary tokens get distinct kv slots except one left at -1; other tokens get arbitrary,
// colliding slots or -1. Checks: each emitting entry against the model; every other byte of the
// cache unchanged (other entries, page padding, scale padding of other entries).
DSV4CPU_RUN_TEST(CompressInvariants, OnlyEmittingTokensWriteAndEntriesMatchTheModel,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  const Shape shapes[] = {{512, 4, 8, ScaleClamp::cpu},    {512, 4, 8, ScaleClamp::gpu},
                          {128, 4, 8, ScaleClamp::cpu},    {512, 4, 4, ScaleClamp::cpu},
                          {512, 128, 128, ScaleClamp::cpu}, {128, 128, 128, ScaleClamp::gpu},
                          {128, 128, 256, ScaleClamp::cpu}};
  for (const Shape& sh : shapes) {
    const std::string op =
        sh.hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      const std::string where = run.label() + " hd=" + std::to_string(sh.hd) +
                                " r=" + std::to_string(sh.r) + " W=" + std::to_string(sh.W);
      std::mt19937 gen(static_cast<uint32_t>(sh.hd + sh.r + sh.W));
      auto uniform = [&gen](float lo, float hi) {
        return lo + (hi - lo) * static_cast<float>(gen() >> 8) * 0x1p-24f;
      };
      // Request 0: the first tokens, two boundaries (r − 1, 2r − 1) and their neighbours;
      // request 1: a chunk ending at its boundaries 4r − 1 and 5r − 1.
      std::set<int64_t> req0 = {0, 1, 2, 3, sh.r - 2, sh.r - 1, sh.r, 2 * sh.r - 1, 2 * sh.r,
                                2 * sh.r + 1};
      std::vector<std::pair<int, int64_t>> tokens;  // (request, position)
      for (int64_t p : req0) tokens.push_back({0, p});
      for (int64_t p : {4 * sh.r - 2, 4 * sh.r - 1, 4 * sh.r + 1, 5 * sh.r - 1})
        tokens.push_back({1, p});
      const int64_t rows_per_req = 5 * sh.r, base[2] = {0, rows_per_req};
      const int64_t N = static_cast<int64_t>(tokens.size());
      const int64_t sbs = sh.r == 4 ? 4 : 8;
      const int64_t nb = (2 * rows_per_req + sbs - 1) / sbs;
      CompressCase c(sh.hd, sh.r, sh.W, nb, N, /*nblk=*/3, /*P=*/sh.r == 4 ? 16 : 2,
                     /*R=*/5 * sh.r + 1, sbs);
      c.clamp = sh.clamp;
      for (float& w : c.weight) w = uniform(0.25f, 1.5f) * (gen() % 2 ? 1.0f : -1.0f);
      for (int64_t row = 0; row < c.R; ++row)
        for (int i = 0; i < 32; ++i) {
          const double ang = uniform(-3.2f, 3.2f);
          c.cos_sin[static_cast<size_t>(row * 64 + i)] = static_cast<float>(std::cos(ang));
          c.cos_sin[static_cast<size_t>(row * 64 + 32 + i)] = static_cast<float>(std::sin(ang));
        }
      std::vector<int64_t> free_slots(static_cast<size_t>(c.nblk * c.P));
      for (size_t i = 0; i < free_slots.size(); ++i) free_slots[i] = static_cast<int64_t>(i);
      std::shuffle(free_slots.begin(), free_slots.end(), gen);
      bool left_one_boundary_out = false;
      for (int64_t t = 0; t < N; ++t) {
        const auto [q, p] = tokens[static_cast<size_t>(t)];
        c.positions[static_cast<size_t>(t)] = p;
        for (int64_t w = 0; w < sh.W; ++w) {
          const int64_t l = p - sh.W + 1 + w;
          const bool drop = w < sh.W - 1 && gen() % 5 == 0;
          c.gather[static_cast<size_t>(t * sh.W + w)] = l < 0 || drop ? -1 : base[q] + l;
        }
        int64_t& ks = c.kv_slot[static_cast<size_t>(t)];
        if ((p + 1) % sh.r == 0) {
          if (!left_one_boundary_out && q == 0) {
            ks = -1;  // a boundary token without a kv slot does not emit
            left_one_boundary_out = true;
          } else {
            ks = free_slots.back();
            free_slots.pop_back();
          }
        } else {
          ks = gen() % 3 == 0 ? -1 : static_cast<int64_t>(gen() % 4);  // collisions allowed
        }
      }
      // Random rows wherever a window reads (other rows keep their garbage).
      const int64_t SW = c.SW();
      for (int64_t g : std::set<int64_t>(c.gather.begin(), c.gather.end())) {
        if (g < 0) continue;
        float* row = c.row(g);
        for (int64_t i = 0; i < SW; ++i) row[i] = uniform(-2.0f, 2.0f);
        for (int64_t i = SW; i < 2 * SW; ++i) row[i] = uniform(-3.0f, 3.0f);
      }
      const auto before = c.kv_cache;
      c.run(run.options());
      std::vector<std::pair<int64_t, int64_t>> written;
      int emitted = 0;
      for (int64_t t = 0; t < N; ++t) {
        const int64_t p = c.positions[static_cast<size_t>(t)], ks = c.kv_slot[static_cast<size_t>(t)];
        if ((p + 1) % sh.r != 0 || ks < 0) continue;
        ++emitted;
        for (const auto& range : entry_ranges(c, ks)) written.push_back(range);
        expect_close_to_model(c, t, where + " t=" + std::to_string(t));
      }
      EXPECT_GE(emitted, 3) << where;
      const auto changed = test::changed_outside(before, c.kv_cache, written);
      EXPECT_TRUE(changed.empty()) << where << ": byte " << (changed.empty() ? 0 : changed[0])
                                   << " changed outside the emitting entries";
    });
  }
}

DSV4CPU_RUN_TEST(CompressInvariants, NonEmittingTokensNeedNoOwnRowAndWriteNothing,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // A non-boundary token with a valid kv slot and an all -1 window, and a boundary token with
  // slot -1 and an all -1 window: neither emits, nothing is written, no error.
  for (int hd : {512, 128}) {
    const std::string op = hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      CompressCase c(hd, 4, 8, 2, 2, 1, 64, 1);
      c.positions = {5, 7};
      c.kv_slot = {3, -1};
      const auto before = c.kv_cache;
      c.run(run.options());
      EXPECT_EQ(c.kv_cache, before) << run.label();
    });
  }
}

DSV4CPU_RUN_TEST(CompressInvariants, ZeroSizeIsNoOp,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  for (int hd : {512, 128}) {
    const std::string op = hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      // N = 0 with an empty state cache, an empty kv cache and an empty table.
      CompressCase c(hd, 4, 8, 0, 0, 0, 64, 0);
      c.run(run.options());
      CompressCase d(hd, 128, 128, 1, 0, 1, 2, 0, 8);
      const auto before = d.kv_cache;
      d.run(run.options());
      EXPECT_EQ(d.kv_cache, before) << run.label();
    });
  }
}

DSV4CPU_RUN_TEST(CompressInvariants, CheckFiniteOffStaysInBounds,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // A NaN state row with check_finite = false: no exception, unspecified values, and only the
  // emitting entry's bytes may change (ASan builds also catch any access out of bounds).
  for (int hd : {512, 128}) {
    const std::string op = hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      CompressCase c = test::worked_example(hd, 69);
      c.row(31)[c.kv_off(7) + 3] = std::numeric_limits<float>::quiet_NaN();
      c.row(30)[c.score_off(6) + 4] = std::numeric_limits<float>::infinity();
      c.cos_sin[40] = std::numeric_limits<float>::infinity();
      const auto before = c.kv_cache;
      Options o = run.options();
      o.check_finite = false;
      EXPECT_NO_THROW(c.run(o)) << run.label();
      EXPECT_TRUE(test::changed_outside(before, c.kv_cache, entry_ranges(c, 69)).empty())
          << run.label();
      EXPECT_THROW(c.run(run.options()), NonFiniteError) << run.label();
    });
  }
}

DSV4CPU_RUN_TEST(CompressInvariants, HandOverToTheReferenceIsCounted,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // An optimized variant meeting a non-finite intermediate hands the call to the reference, which
  // throws (core/fallback.hpp): each such call counts once; a finite call never counts.
  for (int hd : {512, 128}) {
    const std::string op = hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
    testing::for_each_run(op, [&](const testing::Run& run) {
      CompressCase finite = test::worked_example(hd, 69);
      uint64_t before = detail::fallback_count();
      finite.run(run.options());
      EXPECT_EQ(detail::fallback_count(), before) << run.label();
      CompressCase c = test::worked_example(hd, 69);
      c.row(31)[c.kv_off(7) + 3] = std::numeric_limits<float>::quiet_NaN();
      before = detail::fallback_count(detail::Fallback::compress_norm_rope_store);
      EXPECT_THROW(c.run(run.options()), NonFiniteError) << run.label();
      EXPECT_EQ(detail::fallback_count(detail::Fallback::compress_norm_rope_store) - before,
                run.variant.role == Role::optimized ? 1u : 0u)
          << run.label();
    });
  }
}

DSV4CPU_RUN_TEST(CompressInvariants, IndexArraysMayBeI32,
                 {"compress_norm_rope_store", "compress_norm_rope_store_indexer"}) {
  // §9.1 / §9.3 with I32 gather_slots, positions and kv_slot_mapping: the same bytes.
  for (int hd : {512, 128})
    testing::for_each_run(
        hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer",
        [&](const testing::Run& run) {
          CompressCase c = test::worked_example(hd, 0);
          std::vector<int32_t> gs(c.gather.begin(), c.gather.end()), pos(1, 3), ks(1, 0);
          auto v = c.views();
          v.gather_slots = TensorView(gs.data(), DType::I32, {1, 8});
          v.positions = TensorView(pos.data(), DType::I32, {1});
          v.kv_slot_mapping = TensorView(ks.data(), DType::I32, {1});
          c.run(v, run.options());
          if (hd == 512) {
            expect_main_entry(c, 0, std::vector<uint8_t>(448, 0x78),
                              std::vector<uint16_t>(64, 0x3F80), std::vector<uint8_t>(7, 0x77),
                              run.label());
          } else {
            for (int d = 0; d < 128; ++d) ASSERT_EQ(c.kv_cache[static_cast<size_t>(d)], 0x78);
          }
        });
}

}  // namespace
}  // namespace dsv4cpu
