// fused_qnorm_rope_kv_insert (attention.md §3): the §3.5 worked example by hand, a 90° rotation,
// both fp8_subnormals modes and both scale_clamp rules on hand-picked tiles, the fused rotation
// reaching the cache, T_ins < T and Hq = 0, T = 0, kv padding rows never read; every variant
// equal to the reference byte for byte on random inputs for every Highway target and 1 and 2
// threads, and on 64 x 64 query rows (the norm-then-rotate order); each hand-over to the reference
// counted.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/fallback.hpp"
#include "test_attention_util.hpp"

namespace dsv4cpu {
namespace {

using test::MlaPages;
constexpr const char* kOp = "fused_qnorm_rope_kv_insert";

// All inputs of one call, owned; q_out is prefilled with garbage before each run.
struct InsertCase {
  int64_t T, Hq, Hpad, T_ins, R;
  std::vector<uint16_t> q, kv, q_out;
  std::vector<int64_t> positions, slots;
  MlaPages cache;
  std::vector<float> table;  // [R, 64]
  double eps = 1e-6;
  ScaleClamp clamp = ScaleClamp::cpu;
  Fp8Subnormals subnormals = Fp8Subnormals::exact;

  InsertCase(int64_t T_, int64_t Hq_, int64_t Hpad_, int64_t T_ins_, int64_t R_, MlaPages cache_)
      : T(T_), Hq(Hq_), Hpad(Hpad_), T_ins(T_ins_), R(R_), cache(std::move(cache_)) {
    q.assign(static_cast<size_t>(T * Hq * 512), 0x3F80);
    kv.assign(static_cast<size_t>(T_ins * 512), 0x3F80);
    positions.assign(static_cast<size_t>(T), 0);
    slots.assign(static_cast<size_t>(T_ins), -1);
    table.assign(static_cast<size_t>(R * 64), 0.0f);
    for (int64_t r = 0; r < R; ++r)
      for (int i = 0; i < 32; ++i) table[static_cast<size_t>(r * 64 + i)] = 1.0f;  // identity
  }
  // kv rows: T_ins, or more when padding rows were appended (attention.md §3.1).
  int64_t T_kv() const { return static_cast<int64_t>(kv.size() / 512); }
  uint16_t* q_row(int64_t t, int64_t h) { return q.data() + (t * Hq + h) * 512; }
  uint16_t* kv_row(int64_t t) { return kv.data() + t * 512; }
  uint16_t q_out_at(int64_t t, int64_t h, int d) const {
    return q_out[static_cast<size_t>((t * Hpad + h) * 512 + d)];
  }
  void random(std::mt19937_64& rng) {
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> angle(-3.2f, 3.2f);
    for (uint16_t& v : q) v = to_bf16(normal(rng) * 2.0f);
    for (uint16_t& v : kv) v = to_bf16(normal(rng) * 0.5f);
    for (int64_t r = 0; r < R; ++r)
      for (int i = 0; i < 32; ++i) {
        const float a = angle(rng);
        table[static_cast<size_t>(r * 64 + i)] = std::cos(a);
        table[static_cast<size_t>(r * 64 + 32 + i)] = std::sin(a);
      }
  }
  void run(const Options& o = {}) {
    q_out.assign(static_cast<size_t>(T * Hpad * 512), 0xA5A5);
    fused_qnorm_rope_kv_insert(TensorView(q.data(), DType::BF16, {T, Hq, 512}),
                               TensorView(kv.data(), DType::BF16, {T_kv(), 512}),
                               TensorView(positions.data(), DType::I64, {T}),
                               TensorView(slots.data(), DType::I64, {T_ins}), cache.view(),
                               TensorView(table.data(), DType::F32, {R, 64}), Hpad, eps, cache.P,
                               clamp, subnormals,
                               MutableTensorView(q_out.data(), DType::BF16, {T, Hpad, 512}), o);
  }
  // Byte ranges of the entry at `slot`: its 576 data bytes and 8 scale bytes.
  std::vector<std::pair<int64_t, int64_t>> entry_ranges(int64_t slot) const {
    return {{cache.data_at(slot), cache.data_at(slot) + 576},
            {cache.scales_at(slot), cache.scales_at(slot) + 8}};
  }
  uint16_t rope_at(int64_t slot, int k) const {
    const uint8_t* p = cache.bytes.data() + cache.data_at(slot) + 448 + 2 * k;
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
  }
};

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, WorkedExample35, kOp) {
  // kv all 1.0 at position 0 into slot 6 (P = 4: page 1, entry 2): codes 0x78, bytes 0x77, RoPE
  // bytes 80 3F, pad 0. q head all 1.0: ss = 512, t = 0x3F800008, inv = 0x3F7FFFF8, q_out 0x3F80;
  // q_head_padded 3 > Hq = 2: head 2 is +0.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    InsertCase c(1, 2, 3, 1, 1, MlaPages(2, 4));
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal;
    for (int d = 0; d < 512; ++d) c.q_row(0, 1)[d] = to_bf16(normal(rng));
    c.slots[0] = 6;
    const auto before = c.cache.bytes;
    c.run(run.options());
    for (int d = 0; d < 512; ++d) {
      ASSERT_EQ(c.q_out_at(0, 0, d), 0x3F80) << run.label() << " d=" << d;
      ASSERT_EQ(c.q_out_at(0, 2, d), 0x0000) << run.label() << " d=" << d;
    }
    const uint8_t* data = c.cache.bytes.data() + c.cache.data_at(6);
    for (int d = 0; d < 448; ++d) ASSERT_EQ(data[d], 0x78) << run.label();
    for (int k = 0; k < 64; ++k) ASSERT_EQ(c.rope_at(6, k), 0x3F80) << run.label();
    const uint8_t* sc = c.cache.bytes.data() + c.cache.scales_at(6);
    for (int q = 0; q < 7; ++q) ASSERT_EQ(sc[q], 0x77) << run.label();
    EXPECT_EQ(sc[7], 0x00) << run.label();
    EXPECT_EQ(c.cache.data_at(6), c.cache.page_stride + 2 * 576);
    EXPECT_TRUE(test::changed_outside(before, c.cache.bytes, c.entry_ranges(6)).empty())
        << run.label();
  });
  // The intermediates of §3.5.
  const float eps_f = static_cast<float>(1e-6);
  float t = 0.0f;
  const float inv = rms_inv(512.0f, 512, eps_f, &t);
  EXPECT_EQ(f32_bits(t), 0x3F800008u);
  EXPECT_EQ(f32_bits(inv), 0x3F7FFFF8u);
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, QuarterTurnSwapsPairs, kOp) {
  // cos = 0, sin = 1: e' = fma(e, 0, RN(o·-1)) = -o, o' = fma(o, 0, RN(e·1)) = e, exactly.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    InsertCase c(1, 1, 1, 1, 4, MlaPages(1, 2));
    std::mt19937_64 rng(2);
    c.random(rng);
    for (int i = 0; i < 32; ++i) {
      c.table[static_cast<size_t>(3 * 64 + i)] = 0.0f;
      c.table[static_cast<size_t>(3 * 64 + 32 + i)] = 1.0f;
    }
    c.positions[0] = 3;
    c.slots[0] = 1;
    c.run(run.options());
    for (int i = 0; i < 32; ++i) {
      const uint16_t e = c.kv_row(0)[448 + 2 * i], o = c.kv_row(0)[449 + 2 * i];
      ASSERT_EQ(c.rope_at(1, 2 * i), static_cast<uint16_t>(o ^ 0x8000)) << run.label();
      ASSERT_EQ(c.rope_at(1, 2 * i + 1), e) << run.label();
    }
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, SubnormalModesAndClampRules, kOp) {
  // Tile 0: 1.0 (amax 1, e = -8, y = b·256), ±2^-16 (y = ±2^-8: code ±0x02, flushed ±0x00),
  // 2^-14 (y = 2^-6: code 0x08, never flushed). Tile 1: amax 0.010009765625 and 5.3125·2^-22:
  // cpu byte 0x72, codes 0x6A / 0x05; gpu byte 0x70, codes 0x7A / 0x13 (compressor.md §9.2).
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (ScaleClamp clamp : {ScaleClamp::cpu, ScaleClamp::gpu})
      for (Fp8Subnormals sub : {Fp8Subnormals::exact, Fp8Subnormals::flush}) {
        InsertCase c(1, 1, 1, 1, 1, MlaPages(1, 2));
        std::fill(c.kv.begin(), c.kv.end(), uint16_t{0});
        uint16_t* kv = c.kv_row(0);
        kv[0] = to_bf16(1.0f);
        kv[1] = to_bf16(0x1p-16f);
        kv[2] = to_bf16(-0x1p-16f);
        kv[3] = to_bf16(0x1p-14f);
        kv[64] = 0x3C24;
        kv[65] = to_bf16(5.3125f * 0x1p-22f);
        c.slots[0] = 0;
        c.clamp = clamp;
        c.subnormals = sub;
        c.run(run.options());
        const uint8_t* data = c.cache.bytes.data() + c.cache.data_at(0);
        const uint8_t* sc = c.cache.bytes.data() + c.cache.scales_at(0);
        const bool flush = sub == Fp8Subnormals::flush, cpu = clamp == ScaleClamp::cpu;
        const std::string where = run.label() + (cpu ? " cpu" : " gpu") + (flush ? " flush" : "");
        EXPECT_EQ(sc[0], 0x77) << where;
        EXPECT_EQ(data[0], 0x78) << where;
        EXPECT_EQ(data[1], flush ? 0x00 : 0x02) << where;
        EXPECT_EQ(data[2], flush ? 0x80 : 0x82) << where;
        EXPECT_EQ(data[3], 0x08) << where;
        EXPECT_EQ(sc[1], cpu ? 0x72 : 0x70) << where;
        EXPECT_EQ(data[64], cpu ? 0x6A : 0x7A) << where;
        // cpu: y = 5.3125·2^-9 is subnormal (code 0x05, flushed 0x00); gpu: y = 1.328125·2^-5.
        EXPECT_EQ(data[65], cpu ? (flush ? 0x00 : 0x05) : 0x13) << where;
        EXPECT_EQ(data[66], 0x00) << where;  // +0 stays +0
      }
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, FusedRotationReachesTheCache, kOp) {
  // A kv pair and table entry for which the fused e' = fma(e, c, RN(o·-s)) and the twice-rounded
  // RN(RN(e·c) + RN(o·-s)) differ after the bf16 rounding; every variant stores the fused one.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  float e = 0, o = 0, cs = 0, sn = 0;
  for (int i = 0; i < 10000000; ++i) {
    e = round_bf16(uni(rng) * 4.0f);
    o = round_bf16(uni(rng) * 4.0f);
    cs = uni(rng);
    sn = uni(rng);
    const float prod = o * (-sn);
    if (to_bf16(std::fma(e, cs, prod)) != to_bf16(e * cs + prod)) break;
  }
  const uint16_t fused = to_bf16(std::fma(e, cs, o * (-sn)));
  ASSERT_NE(fused, to_bf16(e * cs + o * (-sn))) << "no distinguishing input found";
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    InsertCase c(1, 1, 1, 1, 1, MlaPages(1, 2));
    c.kv_row(0)[448] = to_bf16(e);
    c.kv_row(0)[449] = to_bf16(o);
    c.table[0] = cs;
    c.table[32] = sn;
    c.slots[0] = 1;
    c.run(run.options());
    EXPECT_EQ(c.rope_at(1, 0), fused) << run.label();
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, FewerKvRowsThanTokensAndNoQueryHeads, kOp) {
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    // T = 3 query tokens, T_ins = 2 kv rows (slot -1 for the second): one entry written.
    InsertCase c(3, 2, 2, 2, 8, MlaPages(2, 2));
    std::mt19937_64 rng(4);
    c.random(rng);
    c.positions = {5, 6, 7};
    c.slots = {3, -1};
    const auto before = c.cache.bytes;
    c.run(run.options());
    EXPECT_TRUE(test::changed_outside(before, c.cache.bytes, c.entry_ranges(3)).empty());
    EXPECT_NE(c.cache.bytes, before) << run.label();
    // Hq = 0: q_out is all +0, the kv row is still written.
    InsertCase z(2, 0, 3, 1, 2, MlaPages(1, 2));
    z.slots = {0};
    z.run(run.options());
    for (uint16_t v : z.q_out) ASSERT_EQ(v, 0x0000) << run.label();
    EXPECT_EQ(z.rope_at(0, 0), 0x3F80) << run.label();
    // T = 0: nothing is read or written.
    InsertCase n(0, 4, 4, 0, 1, MlaPages(1, 2));
    const auto untouched = n.cache.bytes;
    n.run(run.options());
    EXPECT_EQ(n.cache.bytes, untouched) << run.label();
  });
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, PaddingRowsOfKvAreNeverRead, kOp) {
  // T = 11 tokens, T_ins = 9 inserted; kv padded to T_kv = 10 or 11 rows of NaN, inf or huge
  // values: no error, and every byte equals the unpadded call's (§3.3).
  const auto make = [] {
    std::mt19937_64 rng(6);
    InsertCase c(11, 3, 4, 9, 40, MlaPages(3, 4, 40));
    c.random(rng);
    for (int64_t t = 0; t < c.T; ++t) c.positions[static_cast<size_t>(t)] = (5 * t + 1) % c.R;
    c.slots = {4, -1, 0, 11, 7, 2, -1, 9, 5};
    return c;
  };
  InsertCase ref = make();
  Options o;
  o.impl = Impl::reference;
  ref.run(o);
  const uint16_t garbage[] = {0x7FC0, 0x7F80, 0xFF80, 0x7F7F};
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    for (int64_t T_kv : {10, 11})
      for (uint16_t g : garbage) {
        InsertCase c = make();
        c.kv.resize(static_cast<size_t>(T_kv * 512), g);
        c.run(run.options());
        EXPECT_EQ(c.q_out, ref.q_out) << run.label() << " T_kv=" << T_kv;
        EXPECT_EQ(c.cache.bytes, ref.cache.bytes) << run.label() << " T_kv=" << T_kv;
      }
  });
}

// A random call: T tokens, some slots -1, heads of very different magnitudes, tiny kv tiles.
InsertCase random_insert(uint64_t seed, ScaleClamp clamp, Fp8Subnormals sub) {
  std::mt19937_64 rng(seed);
  InsertCase c(11, 5, 7, 9, 40, MlaPages(3, 4, 40));
  c.random(rng);
  for (int64_t t = 0; t < c.T; ++t) c.positions[static_cast<size_t>(t)] = (7 * t + 3) % c.R;
  c.slots = {4, -1, 0, 11, 7, 2, -1, 9, 5};
  for (int d = 0; d < 512; ++d) {
    c.q_row(2, 1)[d] = to_bf16(bf16_to_f32(c.q_row(2, 1)[d]) * 1e-6f);
    c.q_row(4, 3)[d] = to_bf16(bf16_to_f32(c.q_row(4, 3)[d]) * 3e4f);
  }
  for (int d = 64; d < 192; ++d) c.kv_row(3)[d] = to_bf16(bf16_to_f32(c.kv_row(3)[d]) * 1e-4f);
  for (int d = 256; d < 320; ++d) c.kv_row(5)[d] = 0;
  c.clamp = clamp;
  c.subnormals = sub;
  return c;
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, HandOverToTheReferenceIsCounted, kOp) {
  // A RoPE value that overflows the rotated query: an optimized variant hands the call to the
  // reference, which throws (core/fallback.hpp); each such call counts once, a finite one never.
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    InsertCase finite = random_insert(5, ScaleClamp::cpu, Fp8Subnormals::exact);
    uint64_t before = detail::fallback_count();
    finite.run(run.options());
    EXPECT_EQ(detail::fallback_count(), before) << run.label();
    InsertCase c = random_insert(5, ScaleClamp::cpu, Fp8Subnormals::exact);
    for (int i = 0; i < 32; ++i) c.table[static_cast<size_t>(c.positions[2] * 64 + i)] = 3e38f;
    before = detail::fallback_count(detail::Fallback::fused_qnorm_rope_kv_insert);
    EXPECT_THROW(c.run(run.options()), NonFiniteError) << run.label();
    EXPECT_EQ(detail::fallback_count(detail::Fallback::fused_qnorm_rope_kv_insert) - before,
              run.variant.role == Role::optimized ? 1u : 0u)
        << run.label();
  });
}

const testing::Plan kOneAndTwoThreads{true, std::nullopt, true, {1, 2}};

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, EveryRunMatchesTheReference, kOp, kOneAndTwoThreads) {
  // Every variant on every Highway target, with 1 and 2 threads, against the reference bytes.
  for (ScaleClamp clamp : {ScaleClamp::cpu, ScaleClamp::gpu})
    for (Fp8Subnormals sub : {Fp8Subnormals::exact, Fp8Subnormals::flush}) {
      InsertCase ref = random_insert(5, clamp, sub);
      Options o;
      o.impl = Impl::reference;
      ref.run(o);
      testing::for_each_run(kOp, kOneAndTwoThreads, [&](const testing::Run& run) {
        InsertCase c = random_insert(5, clamp, sub);
        c.run(run.options());
        EXPECT_EQ(c.q_out, ref.q_out) << run.label();
        EXPECT_EQ(c.cache.bytes, ref.cache.bytes) << run.label();
      });
    }
}

DSV4CPU_RUN_TEST(FusedQnormRopeKvInsert, QueryIsNormalisedThenRotatedOnManyRows, kOp) {
  // §3.2: RMS-normalise, then rotate. The other order differs from it only where a rounding falls
  // differently, a few elements in 10^5, so 64 tokens x 64 heads of random rows are compared.
  const auto make = [] {
    std::mt19937_64 rng(17);
    InsertCase c(64, 64, 64, 1, 64, MlaPages(1, 4, 40));
    c.random(rng);
    for (int64_t t = 0; t < c.T; ++t) c.positions[static_cast<size_t>(t)] = t;
    return c;
  };
  InsertCase ref = make();
  Options o;
  o.impl = Impl::reference;
  ref.run(o);
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    InsertCase c = make();
    c.run(run.options());
    EXPECT_EQ(c.q_out, ref.q_out) << run.label();
  });
}

}  // namespace
}  // namespace dsv4cpu
