// The AMX attention products without AMX: the tile programs of optimized/attention_amx.hpp (the
// A and B layouts, the tile configuration, the probability transposition, the row steps) run
// here on the scalar model of TDPBF16PS inside the optimized driver, and must stay within
// numerics.md §11.8 of the reference, with zero and NaN rows exact. The real kernel runs through
// the registry (the Amx property tests) only where the CPU and OS offer AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "args/attention.hpp"
#include "core/cpu.hpp"
#include "core/parallel.hpp"
#include "dsv4cpu/attention.hpp"
#include "optimized/attention_amx.hpp"
#include "optimized/attention_kernel.hpp"
#include "test_amx_model.hpp"
#include "test_attention_util.hpp"
#include "testing/attention.hpp"
#include "testing/runs.hpp"

namespace dsv4cpu {
namespace {

namespace opt = detail::opt;
using test::AttentionCase;
using test::EmulatedTiles;
using test::MlaPages;

// The emulated kernel: one tile unit per thread.
EmulatedTiles& tiles() {
  thread_local EmulatedTiles t;
  return t;
}
void scores_model(const uint16_t* K, int64_t rows, const uint32_t* Qp, int head_tiles, float* S,
                  void (*step)(void*), void* step_arg) {
  opt::amx_scores(tiles(), K, rows, Qp, head_tiles, S, step, step_arg);
}
void values_model(const uint32_t* Pp, const uint32_t* Vp, int64_t vp_block, int64_t pairs,
                  const float* alpha, float* acc, int64_t groups, int head_tiles) {
  opt::amx_values(tiles(), Pp, Vp, vp_block, pairs, alpha, acc, groups, head_tiles);
}
const opt::AttentionKernel kModel = {&scores_model, &values_model, nullptr, &opt::pack_q, nullptr,
                                     nullptr};
// The same kernel but for the driver's softmax steps, which it leaves to the driver.
void scores_model_no_steps(const uint16_t* K, int64_t rows, const uint32_t* Qp, int head_tiles,
                           float* S, void (*)(void*), void*) {
  opt::amx_scores(tiles(), K, rows, Qp, head_tiles, S);
}
const opt::AttentionKernel kModelNoSteps = {&scores_model_no_steps, &values_model, nullptr,
                                            &opt::pack_q, nullptr, nullptr};

// Runs the driver with the emulated kernel on the case's views (validated by a reference call
// of the public op first).
void run_model(AttentionCase& c, int threads, const opt::AttentionKernel& kernel = kModel) {
  c.clear_outputs();
  const AttentionCase::Views v = c.views();
  detail::SparseMlaAttentionArgs a{v.q, v.window_cache, c.window.P, v.window_slots,
                                   v.compressed_cache, c.compressed.P, v.compressed_slots,
                                   v.attn_sink, c.scale, c.mode, v.out, v.lse};
  a.T = c.T;
  a.H = c.H;
  a.Nw = c.Nw;
  a.Nc = c.Nc;
  opt::run_attention(a, detail::RunContext{true, threads}, &kernel);
}

TEST(AmxAttentionModel, TileShapesMatchTheConfiguration) {
  const opt::TileConfig cfg = opt::amx_tile_config();
  // scores: A = 16 rows × 32 dims, B = 16 dim pairs × 16 heads, C = 16 rows × 16 heads;
  // values: A = 16 heads × 32 rows, B = 16 row pairs × 16 dims, C = 16 heads × 16 dims.
  EXPECT_EQ(cfg.colsb[opt::kTileA] / 2, 32);
  EXPECT_EQ(cfg.rows[opt::kTileB], 16);
  EXPECT_EQ(cfg.colsb[opt::kTileB] / 4, 16);
  EXPECT_EQ(opt::kDimSteps * 32, 512);
  EXPECT_EQ(opt::kHeadBlock, 2 * 16);  // two C tiles of heads per scores step
}

TEST(AmxAttentionModel, ScoresAndValuesByHand) {
  // Rows j: K[j][d] = 1 for d = j, else 0 (16 rows); q[h][d] = h + 1 for d = 2h, 2h + 1.
  std::vector<uint16_t> K(16 * opt::kKRow, 0xFFFF);  // padding: NaN, never read
  for (int j = 0; j < 16; ++j) {
    std::fill(K.begin() + j * opt::kKRow, K.begin() + j * opt::kKRow + 512, uint16_t{0});
    K[static_cast<size_t>(j * opt::kKRow + j)] = 0x3F80;
  }
  std::vector<uint32_t> Qp(opt::kDimPairs * opt::kHeadBlock, 0);
  for (int h = 0; h < 32; ++h) {
    const uint32_t v = to_bf16(static_cast<float>(h + 1));
    Qp[h * opt::kHeadBlock + h] = v | (v << 16);  // pair h = dims 2h, 2h + 1
  }
  std::vector<float> S(16 * opt::kHeadBlock, -1.0f);
  EmulatedTiles t;
  opt::amx_scores(t, K.data(), 16, Qp.data(), 2, S.data());
  for (int j = 0; j < 16; ++j)
    for (int h = 0; h < 32; ++h)
      ASSERT_EQ(S[j * 32 + h], j / 2 == h ? static_cast<float>(h + 1) : 0.0f) << j << " " << h;
  EXPECT_EQ(t.dots, 16 * 2);
  // Values: P[h][j] = 1 for j = h (one pair per head), V[j][d] = j + d / 64 for 40 rows; acc
  // starts at 2 and α = 0.5: acc = 1 + V[h][d] for heads h < 32... rows beyond 40 are zero.
  std::vector<uint32_t> Pp(32 * opt::kHeadBlock, 0);
  for (int h = 0; h < 32; ++h) Pp[(h / 2) * opt::kHeadBlock + h] = h % 2 ? 0x3F800000u : 0x3F80u;
  std::vector<uint32_t> Vp(8 * opt::kVpBlock, 0);
  for (int j = 0; j < 40; ++j)
    for (int d = 0; d < 512; ++d) {
      const uint32_t v = to_bf16(static_cast<float>(j + d / 64));
      Vp[d / 64 * opt::kVpBlock + (j / 2) * 64 + d % 64] |= j % 2 ? v << 16 : v;
    }
  std::vector<float> acc(32 * opt::kAccRow, 2.0f), alpha(32, 0.5f);
  opt::amx_values(t, Pp.data(), Vp.data(), opt::kVpBlock, 20, alpha.data(), acc.data(), 1, 2);
  for (int h = 0; h < 32; ++h)
    for (int d = 0; d < opt::kAccRow; ++d)  // the row's padding untouched
      ASSERT_EQ(acc[h * opt::kAccRow + d], d < 512 ? 1.0f + static_cast<float>(h + d / 64) : 2.0f)
          << h << " " << d;
  // 20 pairs: two row steps of 16 pairs, 2 × 2 tiles of each of 16 chunks of 32 dims.
  EXPECT_EQ(t.dots, 16 * 2 + 16 * 2 * 4);
}

TEST(AmxAttentionModel, ValuesOfThreeGroupsByHand) {
  // Groups 0, 1 (the four head tiles) and group 2 (two head tiles × two dim tiles). Head h of
  // group g weighs row r(h, g) = (h + 7g) % 40 by g + 1: acc = (g + 1)·V[r][d], from zero (no
  // alpha), then again with α = 0.5 for group 1 only: 1.5·(g + 1)·V for it, 2·(g + 1)·V else.
  std::vector<uint32_t> Pp(3 * opt::kPpGroup, 0);
  for (int g = 0; g < 3; ++g)
    for (int h = 0; h < 32; ++h) {
      const int r = (h + 7 * g) % 40;
      const uint32_t w = to_bf16(static_cast<float>(g + 1));
      Pp[g * opt::kPpGroup + (r / 2) * opt::kHeadBlock + h] = r % 2 ? w << 16 : w;
    }
  std::vector<uint32_t> Vp(8 * opt::kVpBlock, 0);
  for (int j = 0; j < 40; ++j)
    for (int d = 0; d < 512; ++d) {
      const uint32_t v = to_bf16(static_cast<float>(j + d % 13));
      Vp[d / 64 * opt::kVpBlock + (j / 2) * 64 + d % 64] |= j % 2 ? v << 16 : v;
    }
  std::vector<float> acc(3 * 32 * opt::kAccRow, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> alpha(3 * 32, 1.0f);
  std::fill(alpha.begin() + 32, alpha.begin() + 64, 0.5f);
  EmulatedTiles t;
  opt::amx_values(t, Pp.data(), Vp.data(), opt::kVpBlock, 20, nullptr, acc.data(), 3, 2);
  // Two steps: 32 chunks of 16 dims × 4 tiles for the pair, 16 chunks of 32 dims × 4 for the last.
  EXPECT_EQ(t.dots, 2 * (32 * 4 + 16 * 4));
  opt::amx_values(t, Pp.data(), Vp.data(), opt::kVpBlock, 20, alpha.data(), acc.data(), 3, 2);
  for (int g = 0; g < 3; ++g)
    for (int h = 0; h < 32; ++h)
      for (int d = 0; d < opt::kAccRow; ++d) {
        const float v = static_cast<float>((h + 7 * g) % 40 + d % 13) * static_cast<float>(g + 1);
        const float got = acc[static_cast<size_t>((g * 32 + h) * opt::kAccRow + d)];
        if (d >= 512) {  // the row's padding untouched
          ASSERT_TRUE(std::isnan(got)) << g << " " << h << " " << d;
          continue;
        }
        ASSERT_EQ(got, (g == 1 ? 1.5f : 2.0f) * v) << g << " " << h << " " << d;
      }
}

TEST(AmxAttentionModel, OneHeadTileGivesItsHalfOfTheGroup) {
  // A group's second head tile alone (tiles = 1, pointers at head 16) gives the bits of the two
  // tiles' products for heads 16..31 and leaves heads 0..15 untouched.
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  auto bf16 = [&] { return to_bf16(normal(rng)); };
  std::vector<uint16_t> K(32 * opt::kKRow, 0);
  for (int j = 0; j < 32; ++j)
    for (int d = 0; d < 512; ++d) K[static_cast<size_t>(j * opt::kKRow + d)] = bf16();
  std::vector<uint32_t> Qp(opt::kDimPairs * opt::kHeadBlock), Pp(opt::kPpGroup, 0);
  for (uint32_t& w : Qp) w = bf16() | static_cast<uint32_t>(bf16()) << 16;
  auto p = [&] { return to_bf16(std::abs(normal(rng))); };
  for (int i = 0; i < 20; ++i)  // 40 rows: pairs 0..19, zero after
    for (int h = 0; h < 32; ++h)
      Pp[static_cast<size_t>(i * opt::kHeadBlock + h)] = p() | static_cast<uint32_t>(p()) << 16;
  std::vector<uint32_t> Vp(8 * opt::kVpBlock, 0);
  for (int d = 0; d < 512; ++d)
    for (int i = 0; i < 20; ++i)
      Vp[static_cast<size_t>(d / 64 * opt::kVpBlock + i * 64 + d % 64)] =
          bf16() | static_cast<uint32_t>(bf16()) << 16;
  std::vector<float> alpha(32);
  for (float& a : alpha) a = std::abs(normal(rng));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> acc0(32 * opt::kAccRow);
  for (float& x : acc0) x = normal(rng);

  EmulatedTiles t;
  std::vector<float> S2(32 * opt::kHeadBlock, nan), S1 = S2;
  opt::amx_scores(t, K.data(), 32, Qp.data(), 2, S2.data());
  opt::amx_scores(t, K.data(), 32, Qp.data() + 16, 1, S1.data() + 16);
  for (int j = 0; j < 32; ++j)
    for (int h = 0; h < 32; ++h) {
      const float want = h < 16 ? nan : S2[static_cast<size_t>(j * 32 + h)];
      const float got = S1[static_cast<size_t>(j * 32 + h)];
      ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << j << " " << h;
    }
  const float* none = nullptr;
  for (const float* al : {none, static_cast<const float*>(alpha.data())}) {
    std::vector<float> acc2 = acc0, acc1 = acc0;
    opt::amx_values(t, Pp.data(), Vp.data(), opt::kVpBlock, 20, al, acc2.data(), 1, 2);
    opt::amx_values(t, Pp.data() + 16, Vp.data(), opt::kVpBlock, 20, al ? al + 16 : nullptr,
                    acc1.data() + 16 * opt::kAccRow, 1, 1);
    for (int h = 0; h < 32; ++h)
      for (int d = 0; d < opt::kAccRow; ++d) {
        const size_t k = static_cast<size_t>(h * opt::kAccRow + d);
        ASSERT_EQ(acc1[k], h < 16 ? acc0[k] : acc2[k]) << (al ? "alpha " : "") << h << " " << d;
      }
  }
}

TEST(AmxAttentionModel, PackQByHand) {
  // q[h][d] = h·512 + d (as 16-bit patterns) for 21 heads, then a head of 0xFFFF that must not
  // be read into the group of 21.
  std::vector<uint16_t> q(22 * 512, 0xFFFF);
  for (int h = 0; h < 21; ++h)
    for (int d = 0; d < 512; ++d) q[h * 512 + d] = static_cast<uint16_t>(h * 512 + d);
  std::vector<uint32_t> Qp(opt::kDimPairs * opt::kHeadBlock, 0xDEADBEEFu);
  // Patterns 1 .. 127 (head 0) are bf16 subnormals.
  EXPECT_FALSE(opt::pack_q(q.data(), 21, Qp.data()));
  for (int p = 0; p < opt::kDimPairs; ++p)
    for (int h = 0; h < 32; ++h) {
      const uint32_t lo = static_cast<uint32_t>(h * 512 + 2 * p);
      ASSERT_EQ(Qp[p * opt::kHeadBlock + h], h < 21 ? lo | (lo + 1) << 16 : 0u) << p << " " << h;
    }
}

// pack_q's test of q for subnormals: the plain loops here, and the AVX-512 code of each kernel
// whose ISA the CPU has.
TEST(AmxAttentionModel, PackQFindsSubnormals) {
  // 21 heads of normal values and zeros of both signs, then a head of subnormals that is not read.
  std::vector<uint16_t> q(22 * 512, 0x0001);
  for (int i = 0; i < 21 * 512; ++i)
    q[i] = static_cast<uint16_t>(i % 3 == 0 ? 0x8000 : i % 3 == 1 ? 0x0000 : 0x0080 + i % 0x7F00);
  std::vector<std::pair<const char*, bool (*)(const uint16_t*, int64_t, uint32_t*)>> packs = {
      {"plain", &opt::pack_q}};
  if (detail::isa_available(detail::Isa::avx512bf16))
    packs.emplace_back("avx512bf16", opt::avx512bf16_attention_kernel().pack_q);
  if (detail::isa_available(detail::Isa::amx))
    packs.emplace_back("amx", opt::amx_attention_kernel().pack_q);
  std::vector<uint32_t> Qp(opt::kDimPairs * opt::kHeadBlock);
  for (const auto& [name, pack] : packs) {
    EXPECT_TRUE(pack(q.data(), 21, Qp.data())) << name;
    // One subnormal of either sign, in a low or high half of a word, anywhere in the 21 heads.
    for (const int i : {0, 1, 511, 512 * 20 + 510, 512 * 20 + 511})
      for (const uint16_t sub : {uint16_t{0x0001}, uint16_t{0x807F}, uint16_t{0x0040}}) {
        std::vector<uint16_t> one = q;
        one[i] = sub;
        EXPECT_FALSE(pack(one.data(), 21, Qp.data())) << name << " " << i << " " << sub;
      }
  }
}

// A random case: T tokens over a window and a compressed set spanning several blocks, with -1
// and repeated slots, a sink, a NaN entry for token 1 and a row with a scale byte outside
// [10, 246] (the fp32 products for its block).
AttentionCase random_case(uint64_t seed, NopeDecode mode) {
  std::mt19937_64 rng(seed);
  AttentionCase c(3, 40, MlaPages(3, 64), 150, MlaPages(140, 2, 24), 200, 42);
  for (int64_t s = 0; s < 3 * 64; ++s) c.window.put_random(s, rng);
  for (int64_t s = 0; s < 280; ++s) c.compressed.put_random(s, rng);
  c.window.bytes[static_cast<size_t>(c.window.scales_at(7) + 2)] = 5;
  c.window.bytes[static_cast<size_t>(c.window.data_at(9) + 3)] = 0x7F;
  std::uniform_int_distribution<int64_t> w(0, 3 * 64 - 1), k(0, 279);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t i = 0; i < c.Nw; ++i) c.wslot(t, i) = i % 7 == 3 ? -1 : w(rng);
    for (int64_t i = 0; i < c.Nc; ++i) c.cslot(t, i) = i % 5 == 1 ? -1 : k(rng);
    c.wslot(t, 0) = t == 1 ? 9 : 7;  // token 1: the NaN code; tokens 0, 2: the byte 5
  }
  c.random_q(rng, 0.05f);
  c.sink.assign(40, 0.25f);
  c.sink[3] = -std::numeric_limits<float>::infinity();
  c.mode = mode;
  return c;
}

// Tokens t0 .. t0 + n − 1 of a run of 32 in prefill (one request, 16 heads): each token reads the
// window of its position (oldest first; position 310 twice, 319 and 320 skipped) and C128A's
// entries 0 .. (pos + 1) / 128 − 1; the entry at position 325 has a scale byte outside [10, 246].
AttentionCase run_of_tokens(int64_t t0, int64_t n) {
  constexpr int64_t kPages[6] = {4, 1, 5, 0, 3, 2};
  std::mt19937_64 rng(11);
  AttentionCase c(n, 16, MlaPages(6, 64), 128, MlaPages(4, 2, 24), 4);
  for (int64_t s = 0; s < 6 * 64; ++s) c.window.put_random(s, rng);
  for (int64_t s = 0; s < 8; ++s) c.compressed.put_random(s, rng);
  auto slot = [&](int64_t e) { return kPages[e / 64] * 64 + e % 64; };
  c.window.bytes[static_cast<size_t>(c.window.scales_at(slot(325)) + 3)] = 5;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = t0 + i, pos = 300 + t - (t > 10) + 2 * (t > 18);
    for (int64_t o = 0; o < 128; ++o) c.wslot(i, o) = slot(pos - 127 + o);
    for (int64_t o = 0; o < (pos + 1) / 128; ++o) c.cslot(i, o) = o;
    std::mt19937_64 qrng(100 + static_cast<uint64_t>(t));
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (int64_t h = 0; h < 16; ++h)
      for (int d = 0; d < 512; ++d) c.q_row(i, h)[d] = to_bf16(normal(qrng));
  }
  c.sink.assign(16, 0.25f);
  return c;
}

// The driver may read a token's window from rows decoded for the tokens before it (RowStrip in
// optimized/attention_hwy.cpp): every token's bytes are those of the token in a call of its own,
// with the driver of every Highway target.
TEST(AmxAttentionModel, RunOfTokensGivesTheBytesOfTokensAlone) {
  const testing::RunList targets =
      testing::runs("sparse_mla_attention", testing::Plan{false, "", true, {1}});
  ASSERT_FALSE(targets.runs.empty());
  testing::for_each(targets, [](const testing::Run& run) {
    AttentionCase all = run_of_tokens(0, 32);
    run_model(all, 1);
    for (int64_t t = 0; t < 32; ++t) {
      AttentionCase one = run_of_tokens(t, 1);
      run_model(one, 1);
      ASSERT_EQ(std::memcmp(one.out.data(), all.out.data() + t * 16 * 512, 16 * 512 * 2), 0)
          << run.target << " token " << t;
      ASSERT_EQ(std::memcmp(one.lse.data(), all.lse.data() + t * 16, 16 * 4), 0)
          << run.target << " token " << t;
    }
  });
}

TEST(AmxAttentionModel, DriverWithinToleranceOfReference) {
  for (NopeDecode mode : {NopeDecode::exact, NopeDecode::vllm}) {
    AttentionCase ref = random_case(5, mode);
    Options o;
    o.impl = Impl::reference;
    ref.run(o);
    std::vector<uint16_t> one;
    // 3 tokens of 2 head groups: 6 items, or 9 items of one head tile on 8 threads.
    struct Processors {
      Processors() { detail::set_processors_for_test(8); }
      ~Processors() { detail::set_processors_for_test(0); }
    } eight;
    for (int threads : {1, 2, 8}) {
      AttentionCase c = random_case(5, mode);
      tiles().dots = 0;
      run_model(c, threads);
      if (threads == 1) {
        EXPECT_GT(tiles().dots, 0);
        one = c.out;
      }
      EXPECT_EQ(c.out, one) << threads << " threads: the bytes of 1 thread";
      const testing::AttentionBound bound = testing::attention_bound(c.inputs());
      EXPECT_EQ(testing::attention_out_violation(bound, c.out.data(), ref.out.data()), "")
          << threads << " threads";
      EXPECT_EQ(testing::attention_lse_violation(bound, c.lse.data(), ref.lse.data()), "");
      for (int d = 0; d < 512; ++d) ASSERT_EQ(c.out[static_cast<size_t>(40 * 512 + d)], 0x7FC0);
    }
  }
}

TEST(AmxAttentionModel, SoftmaxStepsBetweenTheProductsChangeNoBit) {
  // The pipeline (a group's softmax stepped inside the next group's score products, a block's
  // values after the next block's first scores) against the same kernel without steps, where
  // each softmax runs whole after the products: the same bytes. Cases: the random one (an fp32
  // window block for tokens 0 and 2, a NaN token), and the same with ordinary rows only (every
  // block on the kernel), with 24 and 40 heads (one group, two), on 1 and 2 threads.
  for (bool ordinary : {false, true})
    for (int64_t H : {24, 40})
      for (int threads : {1, 2}) {
        auto make = [&] {
          AttentionCase c = random_case(11, NopeDecode::exact);
          if (ordinary)  // slots 7 (a scale byte of 5) and 9 (a NaN code) replaced
            for (int64_t& slot : c.window_slots)
              if (slot == 7 || slot == 9) slot = 20;
          c.H = H;
          return c;
        };
        AttentionCase piped = make(), whole = make();
        tiles().dots = 0;
        run_model(piped, threads);
        if (threads == 1) {  // the tile units are per thread
          EXPECT_GT(tiles().dots, 0);
        }
        run_model(whole, threads, kModelNoSteps);
        EXPECT_EQ(piped.out, whole.out) << ordinary << " " << H << " " << threads;
        ASSERT_EQ(std::memcmp(piped.lse.data(), whole.lse.data(), piped.lse.size() * 4), 0)
            << ordinary << " " << H << " " << threads;
      }
}

}  // namespace
}  // namespace dsv4cpu
