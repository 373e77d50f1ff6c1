// indexer.md §4 and §8 (fp8_paged_mqa_logits) against the exact binary64 value and the bound of
// numerics.md §11.6.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// numerics.md §11.6 example: H = 64, every code 1.0, w = 0.01, ks = 2⁻⁸: X = 0.32, B ≈ 3.66e-6.
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, SpecBoundExample, "fp8_paged_mqa_logits") {
  constexpr int64_t H = 64, P = 16, S = 3;
  testing::KCache kv(P, 1, P * 132);
  const std::vector<uint8_t> ones(128, 0x38);
  kv.set(0, 0, ones.data(), 0x1p-8f);
  const std::vector<uint8_t> q(H * 128, 0x38);
  const std::vector<float> w(H, 0.01f);
  const std::vector<int32_t> seq_lens = {1}, page_table = {0};
  testing::for_each_run("fp8_paged_mqa_logits", [&](const testing::Run& run) {
    std::vector<float> logits(S, 123.0f);
    fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, H, 128}), kv.view(),
                         TensorView(w.data(), DType::F32, {1, H}),
                         TensorView(seq_lens.data(), DType::I32, {1}),
                         TensorView(page_table.data(), DType::I32, {1, 1}), P, S,
                         MutableTensorView(logits.data(), DType::F32, {1, S}), 1, run.options());
    const double B = 0x1p-8 * 1.14442e-5 * 64 * 128 * static_cast<double>(0.01f);
    EXPECT_NEAR(B, 3.66e-6, 0.01e-6);
    EXPECT_NEAR(logits[0], 0.32, B + 0.32 * 1e-7) << run.label();  // 0.01f is 0.01 within 1e-7
    EXPECT_EQ(logits[1], kNegInf);
    EXPECT_EQ(logits[2], kNegInf);
    const testing::ExactLogits ex =
        testing::exact_logits(q.data(), w.data(), H, {kv.codes(0, 0)}, {0x1p-8f});
    EXPECT_NEAR(ex.B[0], B, 1e-10);
    EXPECT_TRUE(testing::holds(testing::logits_violation(logits.data(), S, ex))) << run.label();
  });
}

// indexer.md §4.3: the reference's head sum is an fma chain. Two heads with dot = 3:
// acc = fma(−1, 3, 0) = −3, then fma(1 + 2⁻²³, 3, −3) = 3·2⁻²³ exactly, where an unfused
// product would give RN(3 + 2⁻²¹ − 3) = 2⁻²¹. Key scale 1.
TEST(Fp8PagedMqaLogits, ReferenceHeadSumIsAnFmaChain) {
  constexpr int64_t H = 2, P = 4;
  testing::KCache kv(P, 1, P * 132);
  std::vector<uint8_t> key(128, 0x00);
  key[0] = 0x40;  // 2.0
  kv.set(0, 0, key.data(), 1.0f);
  std::vector<uint8_t> q(H * 128, 0x00);
  q[0] = q[128] = 0x3C;  // 1.5
  const std::vector<float> w = {-1.0f, 1.0f + 0x1p-23f};
  const std::vector<int64_t> seq_lens = {1}, page_table = {0};
  std::vector<float> logits(1);
  Options reference;
  reference.impl = Impl::reference;
  fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, H, 128}), kv.view(),
                       TensorView(w.data(), DType::F32, {1, H}),
                       TensorView(seq_lens.data(), DType::I64, {1}),
                       TensorView(page_table.data(), DType::I64, {1, 1}), P, 1,
                       MutableTensorView(logits.data(), DType::F32, {1, 1}), 1, reference);
  EXPECT_EQ(logits[0], 3 * 0x1p-23f);
}

// ReLU: a negative dot contributes +0, and a NaN key code makes the logit NaN.
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, ReluAndNanKeys, "fp8_paged_mqa_logits") {
  constexpr int64_t H = 1, P = 2;
  testing::KCache kv(P, 2, P * 132);
  std::vector<uint8_t> neg(128, 0x00), nan_key(128, 0x38);
  neg[5] = 0xB8;       // −1
  nan_key[77] = 0xFF;  // NaN code
  kv.set(1, 0, neg.data(), 1.0f);
  kv.set(1, 1, nan_key.data(), 1.0f);
  std::vector<uint8_t> q(128, 0x38);
  const std::vector<float> w = {2.0f};
  const std::vector<int32_t> seq_lens = {2}, page_table = {1};
  testing::for_each_run("fp8_paged_mqa_logits", [&](const testing::Run& run) {
    std::vector<float> logits(3, 5.0f);
    fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, H, 128}), kv.view(),
                         TensorView(w.data(), DType::F32, {1, H}),
                         TensorView(seq_lens.data(), DType::I32, {1}),
                         TensorView(page_table.data(), DType::I32, {1, 1}), P, 3,
                         MutableTensorView(logits.data(), DType::F32, {1, 3}), 1, run.options());
    EXPECT_EQ(f32_bits(logits[0]), 0u) << run.label();  // +0
    EXPECT_TRUE(std::isnan(logits[1])) << run.label();
    EXPECT_EQ(logits[2], kNegInf) << run.label();
  });
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, NoHeadsGivePlusZeroForNanKeys, "fp8_paged_mqa_logits") {
  // indexer.md §4.2: H = 0 leaves the head sum empty, so every visible logit is +0 (NaN keys too).
  constexpr int64_t P = 6;  // an even page size that is not a power of two
  testing::KCache kv(P, 2, P * 132);
  std::vector<uint8_t> key(128, 0x38), nan_key(128, 0x38);
  nan_key[3] = 0x7F;
  for (int64_t e = 0; e < P; ++e) kv.set(0, e, e % 2 ? nan_key.data() : key.data(), 2.0f);
  kv.set(1, 0, nan_key.data(), 2.0f);
  const std::vector<int32_t> seq_lens = {7, 2}, page_table = {0, 1, 0, 1};
  testing::for_each_run("fp8_paged_mqa_logits", [&](const testing::Run& run) {
    std::vector<float> logits(2 * 8, 5.0f);
    fp8_paged_mqa_logits(TensorView(nullptr, DType::F8_E4M3, {2, 0, 128}), kv.view(),
                         TensorView(nullptr, DType::F32, {2, 0}),
                         TensorView(seq_lens.data(), DType::I32, {2}),
                         TensorView(page_table.data(), DType::I32, {2, 2}), P, 8,
                         MutableTensorView(logits.data(), DType::F32, {2, 8}), 1, run.options());
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_EQ(f32_bits(logits[j]), j < 7 ? 0u : f32_bits(kNegInf)) << run.label() << " " << j;
      EXPECT_EQ(f32_bits(logits[8 + j]), j < 2 ? 0u : f32_bits(kNegInf)) << run.label() << " " << j;
    }
  });
}

struct Case {
  int64_t P, stride_pad, B, next_n, H, S;
  bool q4d, seq2d, i64;
};

// Random rows against the exact value: subnormal codes, random power-of-two key scales, mixed
// weight signs, shuffled page tables with −1 tails, padded page strides, MTP forms.
void run_random_case(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t rows = c.B * c.next_n, MP = (c.S + c.P - 1) / c.P + 1;
  const int64_t pages = c.B * MP + 3;
  testing::KCache kv(c.P, pages, c.P * 132 + c.stride_pad);
  std::vector<uint8_t> codes(128);
  for (int64_t p = 0; p < pages; ++p)
    for (int64_t e = 0; e < c.P; ++e) {
      for (auto& x : codes) x = testing::random_code(rng);
      kv.set(p, e, codes.data(), std::ldexp(1.0f, static_cast<int>(rng() % 12) - 10));
    }
  std::vector<uint8_t> q(static_cast<size_t>(rows * c.H * 128));
  for (auto& x : q) x = testing::random_code(rng);
  std::vector<float> w(static_cast<size_t>(rows * c.H));
  std::uniform_real_distribution<float> wd(-1.0f, 1.0f);
  for (auto& x : w) x = wd(rng);
  // Lengths: 2-D form per row; 1-D form per batch entry (row j sees seq_len − next_n + j + 1).
  std::vector<int64_t> lens(static_cast<size_t>(c.seq2d ? rows : c.B));
  for (size_t i = 0; i < lens.size(); ++i)
    lens[i] = i == 0 ? c.S : i == 1 ? 0 : static_cast<int64_t>(rng() % (c.S + 1));
  // Each batch entry gets a random set of distinct pages; unused tail entries are −1.
  std::vector<int64_t> perm(static_cast<size_t>(pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> table(static_cast<size_t>(c.B * MP));
  for (int64_t b = 0; b < c.B; ++b) {
    int64_t max_len = 0;
    for (int64_t j = 0; j < (c.seq2d ? c.next_n : 1); ++j)
      max_len = std::max(max_len, lens[static_cast<size_t>(c.seq2d ? b * c.next_n + j : b)]);
    for (int64_t m = 0; m < MP; ++m)
      table[static_cast<size_t>(b * MP + m)] =
          m * c.P < max_len ? perm[static_cast<size_t>(b * MP + m)] : -1;
  }
  std::vector<int32_t> lens32(lens.begin(), lens.end()), table32(table.begin(), table.end());
  const DType idx = c.i64 ? DType::I64 : DType::I32;
  const void* lens_ptr = c.i64 ? static_cast<const void*>(lens.data()) : lens32.data();
  const void* table_ptr = c.i64 ? static_cast<const void*>(table.data()) : table32.data();
  const TensorView q_view = c.q4d ? TensorView(q.data(), DType::F8_E4M3, {c.B, c.next_n, c.H, 128})
                                  : TensorView(q.data(), DType::F8_E4M3, {rows, c.H, 128});
  const TensorView lens_view =
      c.seq2d ? TensorView(lens_ptr, idx, {c.B, c.next_n}) : TensorView(lens_ptr, idx, {c.B});
  testing::for_each_run("fp8_paged_mqa_logits", [&](const testing::Run& run) {
    std::vector<float> logits(static_cast<size_t>(rows * c.S), 7.0f);
    fp8_paged_mqa_logits(q_view, kv.view(), TensorView(w.data(), DType::F32, {rows, c.H}),
                         lens_view, TensorView(table_ptr, idx, {c.B, MP}), c.P, c.S,
                         MutableTensorView(logits.data(), DType::F32, {rows, c.S}), c.next_n,
                         run.options());
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t j = 0; j < c.next_n; ++j) {
        const int64_t r = b * c.next_n + j;
        const int64_t L =
            c.seq2d ? lens[static_cast<size_t>(r)]
                    : std::max<int64_t>(0, lens[static_cast<size_t>(b)] - c.next_n + j + 1);
        const std::vector<int64_t> row_pages(table.begin() + b * MP, table.begin() + (b + 1) * MP);
        const testing::ExactLogits ex = testing::exact_logits(
            q.data() + r * c.H * 128, w.data() + r * c.H, c.H, kv.view(), c.P, row_pages, L);
        EXPECT_TRUE(testing::holds(testing::logits_violation(logits.data() + r * c.S, c.S, ex)))
            << run.label() << " P=" << c.P << " row " << r << " L=" << L;
      }
    }
  });
}

DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, RandomAgainstExactBlockSize16, "fp8_paged_mqa_logits") {
  run_random_case({16, 0, 3, 1, 4, 70, false, false, false}, 1);
}
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, RandomAgainstExactBlockSize64PaddedStrideI64,
                 "fp8_paged_mqa_logits") {
  run_random_case({64, 192, 2, 1, 8, 150, false, false, true}, 2);
}
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, RandomAgainstExactBlockSize48, "fp8_paged_mqa_logits") {
  run_random_case({48, 36, 3, 1, 3, 144, false, false, false}, 3);
}
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, RandomAgainstExactModelHeads, "fp8_paged_mqa_logits") {
  run_random_case({64, 0, 2, 1, 64, 80, false, false, false}, 4);
}
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, MtpOneDimensionalLengths3dQuery, "fp8_paged_mqa_logits") {
  run_random_case({16, 4, 3, 3, 2, 40, false, false, false}, 5);
}
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, MtpOneDimensionalLengths4dQuery, "fp8_paged_mqa_logits") {
  run_random_case({16, 0, 2, 4, 2, 40, true, false, true}, 6);
}
DSV4CPU_RUN_TEST(Fp8PagedMqaLogits, MtpTwoDimensionalLengths, "fp8_paged_mqa_logits") {
  run_random_case({48, 0, 3, 2, 2, 100, true, true, false}, 7);
}

// indexer.md §8, 1-D form: row (b, j) sees keys p <= seq_len − next_n + j; a short seq_len
// leaves the first rows empty. Checked on the −inf pattern with next_n = 3, seq_len = 1.
TEST(Fp8PagedMqaLogits, MtpOneDimensionalVisibility) {
  constexpr int64_t H = 1, P = 4, S = 4, n = 3;
  testing::KCache kv(P, 1, P * 132);
  const std::vector<uint8_t> key(128, 0x38);
  for (int e = 0; e < P; ++e) kv.set(0, e, key.data(), 1.0f);
  const std::vector<uint8_t> q(n * H * 128, 0x38);
  const std::vector<float> w(n * H, 1.0f);
  const std::vector<int32_t> seq_lens = {1}, page_table = {0};
  std::vector<float> logits(n * S, 9.0f);
  fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, n, H, 128}), kv.view(),
                       TensorView(w.data(), DType::F32, {n, H}),
                       TensorView(seq_lens.data(), DType::I32, {1}),
                       TensorView(page_table.data(), DType::I32, {1, 1}), P, S,
                       MutableTensorView(logits.data(), DType::F32, {n, S}), n);
  const std::vector<float> want = {kNegInf, kNegInf, kNegInf, kNegInf,   // L = 0
                                   kNegInf, kNegInf, kNegInf, kNegInf,   // L = 0
                                   128.0f,  kNegInf, kNegInf, kNegInf};  // L = 1
  EXPECT_EQ(logits, want);
}

TEST(Fp8PagedMqaLogits, ZeroSizeIsNoOp) {
  testing::KCache kv(16, 1, 16 * 132);
  fp8_paged_mqa_logits(TensorView(nullptr, DType::F8_E4M3, {0, 64, 128}), kv.view(),
                       TensorView(nullptr, DType::F32, {0, 64}),
                       TensorView(nullptr, DType::I32, {0}),
                       TensorView(nullptr, DType::I32, {0, 4}), 16, 100,
                       MutableTensorView(nullptr, DType::F32, {0, 100}));
  // S = 0: rows exist but have no columns.
  const std::vector<uint8_t> q(128, 0x38);
  const std::vector<float> w = {1.0f};
  const std::vector<int32_t> seq_lens = {0}, page_table = {-1};
  fp8_paged_mqa_logits(TensorView(q.data(), DType::F8_E4M3, {1, 1, 128}), kv.view(),
                       TensorView(w.data(), DType::F32, {1, 1}),
                       TensorView(seq_lens.data(), DType::I32, {1}),
                       TensorView(page_table.data(), DType::I32, {1, 1}), 16, 0,
                       MutableTensorView(nullptr, DType::F32, {1, 0}));
  SUCCEED();
}

}  // namespace
}  // namespace dsv4cpu
