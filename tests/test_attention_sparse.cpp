// sparse_mla_attention (attention.md §2): hand-computed cases (one entry, two entries in one and
// in two 128-column blocks, the sink factor, repeated slots, decode rules of §2.4, zero and NaN
// rows), an exact binary64 oracle with the tolerance of numerics.md §11.8, head-padded q,
// Pc_pages = 0, and thread-count independence; every variant.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "test_attention_util.hpp"

namespace dsv4cpu {
namespace {

using test::AttentionCase;
using test::MlaPages;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr const char* kOp = "sparse_mla_attention";

uint16_t out_at(const AttentionCase& c, int64_t t, int64_t h, int d) {
  return c.out[static_cast<size_t>((t * c.H + h) * 512 + d)];
}
float lse_at(const AttentionCase& c, int64_t t, int64_t h) {
  return c.lse[static_cast<size_t>(t * c.H + h)];
}

// A window-only case: T tokens, H heads, `entries` window entries (P = 4), Nw columns.
AttentionCase window_case(int64_t T, int64_t H, int64_t entries, int64_t Nw) {
  return AttentionCase(T, H, MlaPages((entries + 3) / 4, 4), Nw, MlaPages(0, 2), 0);
}

// q[t, h] = v·e_0 (only dim 0 is non-zero).
void q_unit(AttentionCase& c, int64_t t, int64_t h, float v) {
  std::fill(c.q_row(t, h), c.q_row(t, h) + 512, uint16_t{0});
  c.q_row(t, h)[0] = to_bf16(v);
}

DSV4CPU_RUN_TEST(SparseMlaAttention, OneEntryGivesItsRowAndTheSinkScalesIt, kOp) {
  // Entry 2: tile 0 codes 0x38 (1.0) with byte 127, tile 1 codes 0xC4 (-3.0) with byte 125
  // (S = 1/4), other tiles 0x30 (0.5) with byte 130 (S = 8), RoPE values -1.5 (0xBFC0).
  // q = 2·e_0, scale 0.5: s = 1 = lse. Head 0 has sink 1: f = 1 / (1 + exp_lib(0)) = 0.5;
  // head 1 has sink -inf: f = 1.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase c = window_case(1, 2, 4, 1);
    uint8_t codes[448], sc[7] = {127, 125, 130, 130, 130, 130, 130};
    std::fill(codes, codes + 448, 0x30);
    std::fill(codes, codes + 64, 0x38);
    std::fill(codes + 64, codes + 128, 0xC4);
    const std::vector<uint16_t> rope(64, 0xBFC0);
    c.window.put(2, codes, sc, rope.data());
    c.wslot(0, 0) = 2;
    q_unit(c, 0, 0, 2.0f);
    q_unit(c, 0, 1, 2.0f);
    c.scale = 0.5f;
    c.sink = {1.0f, -kInf};
    c.run(run.options());
    for (int64_t h = 0; h < 2; ++h) {
      const float f = h == 0 ? 0.5f : 1.0f;
      EXPECT_EQ(lse_at(c, 0, h), 1.0f) << run.label();
      for (int d = 0; d < 512; ++d) {
        const float v = d < 64 ? 1.0f : d < 128 ? -0.75f : d < 448 ? 4.0f : -1.5f;
        ASSERT_EQ(out_at(c, 0, h, d), to_bf16(v * f)) << run.label() << " h=" << h << " d=" << d;
      }
    }
  });
}

// Entries A (every value 16: codes 0x58, byte 127, RoPE 0x4180) and B (every value +0), q =
// -e_0 / 16 and scale 1: s_A = -1, s_B = 0.
AttentionCase two_entries(int64_t column_b) {
  AttentionCase c = window_case(1, 1, 4, column_b + 1);
  c.window.put_uniform(0, 0x58, 127, 0x4180);
  c.window.put_uniform(1, 0x00, 127, 0x0000);
  c.wslot(0, 0) = 0;
  c.wslot(0, column_b) = 1;
  q_unit(c, 0, 0, -0.0625f);
  c.scale = 1.0f;
  return c;
}

DSV4CPU_RUN_TEST(SparseMlaAttention, TwoEntriesInOneBlockUseBf16Probabilities, kOp) {
  // One block: m = 0, p_A = exp_lib(-1), p_B = 1, l = RN(RN(0 + p_A) + 1);
  // acc = fma(bf16(p_A), 16, 0) = 16·bf16(p_A) = 5.875; out = bf16(RN(acc · RN(1 / l))).
  const float pA = exp_lib(-1.0f);
  const float l = 0.0f * 0.0f + (pA + 1.0f);
  const float acc = round_bf16(pA) * 16.0f;
  const uint16_t want = to_bf16(acc * (1.0f / l));
  EXPECT_EQ(want, to_bf16(4.28125f));  // 5.875 / 1.3679 = 4.295 -> bf16 4.28125
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase c = two_entries(1);
    c.run(run.options());
    for (int d = 0; d < 512; ++d) ASSERT_EQ(out_at(c, 0, 0, d), want) << run.label() << " d=" << d;
    EXPECT_EQ(lse_at(c, 0, 0), static_cast<float>(std::log(static_cast<double>(l)))) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, ColumnsInTwoBlocksRescaleUnroundedByAlpha, kOp) {
  // B in column 128: block 0 holds A alone (m = -1, p = 1, acc = 16), block 1 holds B: m = 0,
  // α = exp_lib(-1), l = RN(1·α) + 1, acc = RN(16·α) + fma(1, 0, ·): α is not rounded to bf16,
  // so the output differs from the one-block case (4.3125 against 4.28125).
  const float alpha = exp_lib(-1.0f);
  const float l = 1.0f * alpha + 1.0f;
  const float acc = 16.0f * alpha;
  const uint16_t want = to_bf16(acc * (1.0f / l));
  EXPECT_EQ(want, to_bf16(4.3125f));
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase c = two_entries(128);
    c.run(run.options());
    for (int d = 0; d < 512; ++d) ASSERT_EQ(out_at(c, 0, 0, d), want) << run.label() << " d=" << d;
    EXPECT_EQ(lse_at(c, 0, 0), static_cast<float>(std::log(static_cast<double>(l)))) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, RepeatedSlotIsTwoKeys, kOp) {
  // The same slot in two columns: p = 1 twice, l = 2, acc = 2·V, out = V, lse = s + RN(log 2).
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase c = window_case(1, 1, 4, 3);
    c.window.put_uniform(1, 0x40, 127, 0x3F80);  // NoPE 2.0, RoPE 1.0
    c.wslot(0, 0) = 1;
    c.wslot(0, 2) = 1;
    q_unit(c, 0, 0, 1.0f);
    c.scale = 0.25f;
    c.run(run.options());
    for (int d = 0; d < 512; ++d) ASSERT_EQ(out_at(c, 0, 0, d), d < 448 ? 0x4000 : 0x3F80);
    EXPECT_EQ(lse_at(c, 0, 0), 0.5f + static_cast<float>(std::log(2.0))) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, ZeroAndSubnormalCodesInBothDecodeModes, kOp) {
  // One entry, S = 2 (byte 128): codes 0x00, 0x80, 0x01..0x07, 0x81 and 1.0 (0x38) in tile 0.
  // exact: the stored values; vllm: E = 0 codes read ±2^-7·(1 + m/8)·S.
  const uint8_t tile0[11] = {0x00, 0x80, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x81, 0x38};
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (NopeDecode mode : {NopeDecode::exact, NopeDecode::vllm}) {
      AttentionCase c = window_case(1, 1, 4, 1);
      uint8_t codes[448], sc[7] = {128, 127, 127, 127, 127, 127, 127};
      std::fill(codes, codes + 448, 0x38);
      std::copy(tile0, tile0 + 11, codes);
      const std::vector<uint16_t> rope(64, 0);
      c.window.put(0, codes, sc, rope.data());
      c.wslot(0, 0) = 0;
      q_unit(c, 0, 0, 0.0f);  // all scores 0
      c.mode = mode;
      c.run(run.options());
      const bool vllm = mode == NopeDecode::vllm;
      for (int i = 0; i < 11; ++i) {
        const uint8_t code = tile0[i];
        const int m = code & 7;
        float want = static_cast<float>(m) * 0x1p-9f * 2.0f;
        if (vllm && code != 0x38) want = (1.0f + static_cast<float>(m) / 8.0f) * 0x1p-7f * 2.0f;
        if (code == 0x38) want = 2.0f;
        if (code & 0x80) want = -want;
        // acc starts at +0: fma(1, -0, +0) = +0, so a stored -0 gives +0.
        EXPECT_EQ(out_at(c, 0, 0, i), want == 0.0f ? 0x0000 : to_bf16(want))
            << run.label() << " vllm=" << vllm << " i=" << i;
      }
    }
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, ScaleByteZeroIsTwoToMinus127OrZero, kOp) {
  // Tile 2 of the only entry has byte 0 and codes 1.0: exact reads 2^-127 (bf16 0x0040), vllm +0.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (NopeDecode mode : {NopeDecode::exact, NopeDecode::vllm}) {
      AttentionCase c = window_case(1, 1, 4, 1);
      uint8_t codes[448], sc[7] = {127, 127, 0, 127, 127, 127, 127};
      std::fill(codes, codes + 448, 0x38);
      codes[128] = 0x7F;  // a NaN code in the byte-0 tile: vllm reads the tile as +0
      const std::vector<uint16_t> rope(64, 0x3F80);
      c.window.put(3, codes, sc, rope.data());
      c.wslot(0, 0) = 3;
      q_unit(c, 0, 0, 1.0f);
      c.mode = mode;
      c.run(run.options());
      if (mode == NopeDecode::exact) {
        EXPECT_EQ(out_at(c, 0, 0, 0), 0x7FC0) << run.label() << ": the NaN code makes a NaN row";
        continue;
      }
      for (int d = 128; d < 192; ++d) ASSERT_EQ(out_at(c, 0, 0, d), 0x0000) << run.label();
      EXPECT_EQ(out_at(c, 0, 0, 0), 0x3F80) << run.label();
    }
  });
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase c = window_case(1, 1, 4, 1);
    c.window.put_uniform(0, 0x38, 0, 0x3F80);
    c.wslot(0, 0) = 0;
    q_unit(c, 0, 0, 1.0f);
    c.run(run.options());
    EXPECT_EQ(out_at(c, 0, 0, 5), 0x0040) << run.label();  // bf16(2^-127)
    EXPECT_EQ(out_at(c, 0, 0, 500), 0x3F80) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, RowsWithoutValidEntriesAreZeroWithInfiniteLse, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    // Token 1 has -1 in every column of both sets; token 0 has one compressed entry.
    AttentionCase c(2, 3, MlaPages(1, 4), 130, MlaPages(1, 2), 2);
    c.compressed.put_uniform(1, 0x38, 127, 0x3F80);
    c.cslot(0, 1) = 1;
    std::mt19937_64 rng(11);
    c.random_q(rng, 1.0f);
    c.sink = {0.0f, -kInf, 3.0f};
    c.run(run.options());
    for (int64_t h = 0; h < 3; ++h) {
      EXPECT_EQ(lse_at(c, 1, h), kInf) << run.label();
      EXPECT_TRUE(std::isfinite(lse_at(c, 0, h))) << run.label();
      for (int d = 0; d < 512; ++d) ASSERT_EQ(out_at(c, 1, h, d), 0x0000) << run.label();
    }
    // No columns at all (bad-input.md §1.5), with empty caches.
    AttentionCase e(2, 2, MlaPages(0, 1), 0, MlaPages(0, 64), 0);
    e.random_q(rng, 1.0f);
    e.run(run.options());
    for (uint16_t v : e.out) ASSERT_EQ(v, 0x0000) << run.label();
    for (float l : e.lse) ASSERT_EQ(l, kInf) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, NonFiniteScoresGiveNaNRows, kOp) {
  // Token 0 reads an entry with a NaN code, token 1 one with scale byte 255, token 2 one whose
  // code 448 (0x7E) with byte 254 overflows to inf; token 3 reads only finite entries.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (NopeDecode mode : {NopeDecode::exact, NopeDecode::vllm}) {
      AttentionCase c = window_case(4, 2, 8, 3);
      std::mt19937_64 rng(12);
      for (int64_t s = 0; s < 8; ++s) c.window.put_random(s, rng);
      c.window.bytes[static_cast<size_t>(c.window.data_at(1) + 77)] = 0xFF;
      c.window.bytes[static_cast<size_t>(c.window.scales_at(3) + 4)] = 255;
      c.window.put_uniform(5, 0x7E, 254, 0x3F80);
      const int64_t slots[4][3] = {{0, 1, 2}, {3, 4, -1}, {-1, 6, 5}, {0, 2, 7}};
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t k = 0; k < 3; ++k) c.wslot(t, k) = slots[t][k];
      c.random_q(rng, 0.1f);
      c.mode = mode;
      c.run(run.options());
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t h = 0; h < 2; ++h) {
          const bool nan_row = t < 3;
          EXPECT_EQ(std::isnan(lse_at(c, t, h)), nan_row) << run.label() << " t=" << t;
          for (int d = 0; d < 512; ++d) {
            if (nan_row) {
              ASSERT_EQ(out_at(c, t, h, d), 0x7FC0) << run.label() << " t=" << t;
            } else {
              ASSERT_NE(out_at(c, t, h, d) & 0x7F80, 0x7F80) << run.label() << " t=" << t;
            }
          }
        }
    }
  });
}

// Random layers: SWA-only (128 window entries), C4A (window + 512 compressed entries in random
// order, P = 64, padded pages), C128A (P = 2, 300 columns with 260 valid); finite codes with
// magnitudes up to 7.5·2.
AttentionCase random_layer(int kind, uint64_t seed, NopeDecode mode) {
  std::mt19937_64 rng(seed);
  const int64_t T = 3, H = 8;
  const int64_t Nc = kind == 0 ? 0 : kind == 1 ? 512 : 300;
  const int64_t Pc = kind == 2 ? 2 : 64, Pc_pages = kind == 0 ? 0 : kind == 1 ? 9 : 130;
  AttentionCase c(T, H, MlaPages(3, 64), 128, MlaPages(Pc_pages, Pc, 40), Nc, H + 2);
  auto put = [&](MlaPages& pages, int64_t slot) {
    std::uniform_int_distribution<int> code(0, 0x4F), b(124, 128), sign(0, 1);
    uint8_t codes[448], sc[7];
    uint16_t rope[64];
    for (uint8_t& x : codes) x = static_cast<uint8_t>(code(rng) | (sign(rng) << 7));
    for (uint8_t& x : sc) x = static_cast<uint8_t>(b(rng));
    std::normal_distribution<float> normal;
    for (uint16_t& r : rope) r = to_bf16(normal(rng));
    pages.put(slot, codes, sc, rope);
  };
  for (int64_t s = 0; s < 3 * 64; ++s) put(c.window, s);
  for (int64_t s = 0; s < Pc_pages * Pc; ++s) put(c.compressed, s);
  std::uniform_int_distribution<int64_t> wpick(0, 3 * 64 - 1), cpick(0, Pc_pages * Pc - 1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < 128; ++k) c.wslot(t, k) = wpick(rng);
    if (t == 1) c.wslot(t, 5) = c.wslot(t, 77) = -1;
    for (int64_t k = 0; k < Nc; ++k) c.cslot(t, k) = kind == 2 && k >= 260 ? -1 : cpick(rng);
  }
  c.random_q(rng, 0.2f);
  c.sink = {0.5f, -kInf, -1.0f, 2.0f, -kInf, 0.0f, 1.0f, -3.0f};
  c.mode = mode;
  return c;
}

DSV4CPU_RUN_TEST(SparseMlaAttention, WithinToleranceOfExactBinary64Attention, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (int kind = 0; kind < 3; ++kind)
      for (NopeDecode mode : {NopeDecode::exact, NopeDecode::vllm}) {
        AttentionCase c = random_layer(kind, 100 + static_cast<uint64_t>(kind), mode);
        c.run(run.options());
        const testing::ExactAttention exact = testing::exact_attention(c.inputs());
        const testing::AttentionBound bound = testing::attention_bound(c.inputs());
        double worst_out = 0, worst_lse = 0;
        EXPECT_EQ(
            testing::attention_out_violation(bound, c.out.data(), exact.out.data(), &worst_out), "")
            << run.label() << " kind " << kind;
        EXPECT_EQ(
            testing::attention_lse_violation(bound, c.lse.data(), exact.lse.data(), &worst_lse), "")
            << run.label() << " kind " << kind;
        // The comparison is not vacuous: the outputs differ from the exact values somewhere.
        EXPECT_GT(worst_out, 0.0) << run.label() << " kind " << kind;
        EXPECT_GT(worst_lse, 0.0) << run.label() << " kind " << kind;
      }
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, HeadPaddedQMatchesContiguousQ, kOp) {
  // q with stride(0) = (H + 2)·512 (garbage, NaNs included, in the padding heads) against a
  // contiguous copy of the first H heads.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase padded = random_layer(1, 7, NopeDecode::exact);
    AttentionCase plain = random_layer(1, 7, NopeDecode::exact);
    plain.Hs = plain.H;
    plain.q.assign(static_cast<size_t>(plain.T * plain.H * 512), 0);
    for (int64_t t = 0; t < plain.T; ++t)
      for (int64_t h = 0; h < plain.H; ++h)
        std::copy(padded.q_row(t, h), padded.q_row(t, h) + 512, plain.q_row(t, h));
    padded.run(run.options());
    plain.run(run.options());
    EXPECT_EQ(padded.out, plain.out) << run.label();
    EXPECT_EQ(std::memcmp(padded.lse.data(), plain.lse.data(), padded.lse.size() * 4), 0);
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, NoCompressedPagesWhenEverySlotIsMinusOne, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase none = random_layer(0, 9, NopeDecode::exact);
    AttentionCase empty(none.T, none.H, none.window, none.Nw, MlaPages(0, 64), 4, none.Hs);
    empty.q = none.q;
    empty.window_slots = none.window_slots;
    empty.sink = none.sink;
    none.run(run.options());
    empty.run(run.options());
    EXPECT_EQ(none.out, empty.out) << run.label();
    EXPECT_EQ(std::memcmp(none.lse.data(), empty.lse.data(), none.lse.size() * 4), 0)
        << run.label();
  });
}

const testing::Plan kTwoAndThreeThreads{true, std::nullopt, true, {2, 3}};

DSV4CPU_RUN_TEST(SparseMlaAttention, ResultsDoNotDependOnThreadCount, kOp, kTwoAndThreeThreads) {
  // Every run with 2 and 3 threads gives the bytes of its variant and target on 1 thread.
  testing::for_each_run(kOp, kTwoAndThreeThreads, [&](const testing::Run& run) {
    AttentionCase one = random_layer(2, 21, NopeDecode::exact);
    Options o = run.options();
    o.num_threads = 1;
    one.run(o);
    AttentionCase c = random_layer(2, 21, NopeDecode::exact);
    c.run(run.options());
    EXPECT_EQ(c.out, one.out) << run.label();
    EXPECT_EQ(std::memcmp(c.lse.data(), one.lse.data(), c.lse.size() * 4), 0) << run.label();
  });
}

DSV4CPU_RUN_TEST(SparseMlaAttention, LseIsOptional, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    AttentionCase with = random_layer(1, 5, NopeDecode::exact);
    AttentionCase without = random_layer(1, 5, NopeDecode::exact);
    without.want_lse = false;
    with.run(run.options());
    without.run(run.options());
    EXPECT_EQ(with.out, without.out) << run.label();
  });
}

}  // namespace
}  // namespace dsv4cpu
