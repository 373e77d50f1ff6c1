// The vector forms of the bf16 logits pieces (optimized/indexer_avx512.hpp) against their scalar
// forms (optimized/indexer_bf16.hpp), bit for bit: key conversion on every code, the epilogue with
// NaN, ±inf, −0 and ties placed at every key and head, the summation tree for every key count.
// Only this file's vector section is compiled for AVX-512 (a target pragma); its tests run where
// the CPU offers the ISA (AVX-512-BF16 machines: the AVX-512 BW forms; VBMI where the CPU has it),
// skip elsewhere, and fail where the machine must offer it (testing::isa_required).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "optimized/indexer_bf16.hpp"
#include "testing/gtest.hpp"
#include "testing/runs.hpp"

// Everything up to pop_options is built for AVX-512 and has internal linkage.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,fma")
#define DSV4CPU_VBMI_PIECES 1
#include "optimized/indexer_avx512.hpp"
namespace vector_pieces {
namespace {
namespace opt = dsv4cpu::detail::opt;
void convert_avx512(const uint8_t* const* codes, int64_t n, int64_t rows, uint16_t* out,
                    bool* nan) {
  opt::convert_keys_avx512(codes, n, rows, out, nan);
}
void convert_vbmi(const uint8_t* const* codes, int64_t n, int64_t rows, uint16_t* out, bool* nan) {
  opt::convert_keys_vbmi(codes, n, rows, out, nan);
}
void accumulate(const float* dots, int64_t ld, int64_t n, int64_t h0, int64_t nh, const float* w,
                float (*lanes)[16]) {
  opt::epilogue_accumulate_avx512(dots, ld, n, h0, nh, w, lanes);
}
void finish(float (*lanes)[16], int64_t n, const opt::KeyBlock& keys, const bool* nan, int64_t H,
            float* out) {
  opt::epilogue_finish_avx512(lanes, n, keys, nan, H, out);
}
}  // namespace
}  // namespace vector_pieces
#pragma GCC pop_options

namespace dsv4cpu {
namespace {

namespace opt = detail::opt;

// Runs the test only where the logits variant of the ISA runs (the pieces' ISA); a failure where
// the machine must offer it.
#define DSV4CPU_REQUIRE(isa)                                       \
  DSV4CPU_SKIP_IF_ABSENT("fp8_paged_mqa_logits",                    \
                         testing::runs("fp8_paged_mqa_logits", testing::isa_plan(isa)))

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

void check_convert(void (*convert)(const uint8_t* const*, int64_t, int64_t, uint16_t*, bool*)) {
  // 48 keys: key k holds codes 0..255 rotated by k (every code at every dim parity), then NaN
  // codes planted at boundary dims of some keys.
  std::vector<uint8_t> codes(opt::kKeyBlock * 128);
  for (int k = 0; k < opt::kKeyBlock; ++k)
    for (int d = 0; d < 128; ++d)
      codes[static_cast<size_t>(k * 128 + d)] = static_cast<uint8_t>(2 * d + k + (k / 2) * 128);
  for (int k = 0; k < opt::kKeyBlock; ++k)  // make every key NaN-free, then plant
    for (int d = 0; d < 128; ++d) {
      uint8_t& c = codes[static_cast<size_t>(k * 128 + d)];
      if ((c & 0x7F) == 0x7F) c = static_cast<uint8_t>(c ^ 1);
    }
  const int planted[][2] = {{1, 0}, {2, 63}, {3, 64}, {4, 127}, {17, 31}, {47, 32}};
  for (const auto& p : planted)
    codes[static_cast<size_t>(p[0] * 128 + p[1])] = (p[0] % 2) ? 0x7F : 0xFF;
  const uint8_t* ptr[opt::kKeyBlock];
  for (int k = 0; k < opt::kKeyBlock; ++k) ptr[k] = &codes[static_cast<size_t>(k * 128)];
  for (int64_t n : {1, 5, 16, 17, 47, 48}) {
    const int64_t rows = (n + 15) / 16 * 16;
    std::vector<uint16_t> want(static_cast<size_t>(rows * 128), 0xBEEF), got(want);
    bool nan_want[opt::kKeyBlock], nan_got[opt::kKeyBlock];
    opt::convert_keys(ptr, n, rows, want.data(), nan_want);
    convert(ptr, n, rows, got.data(), nan_got);
    ASSERT_EQ(got, want) << "n " << n;
    for (int64_t k = 0; k < n; ++k) EXPECT_EQ(nan_got[k], nan_want[k]) << "n " << n << " key " << k;
  }
  // The codes above reach all 256 values: the bf16 patterns come from bf16_of_code, the oracle
  // checked against fp8_e4m3_decode in test_amx_indexer.
  std::vector<bool> seen(256, false);
  for (uint8_t c : codes) seen[c] = true;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_TRUE(seen[static_cast<size_t>(c)]) << "code " << c;
  }
}

TEST(Avx512Pieces, ConvertKeysAvx512IsConvertKeys) {
  DSV4CPU_REQUIRE("avx512bf16");
  check_convert(vector_pieces::convert_avx512);
}

// The amx variant's key conversion needs only VBMI: it runs wherever the CPU has it (an AMD EPYC
// Zen 4 has VBMI and no AMX).
TEST(Avx512Pieces, ConvertKeysVbmiIsConvertKeys) {
  DSV4CPU_REQUIRE("avx512bf16");
  if (!__builtin_cpu_supports("avx512vbmi")) GTEST_SKIP() << "this CPU has no AVX-512 VBMI";
  check_convert(vector_pieces::convert_vbmi);
}

// Special values at boundary keys (0, 15, 16, n − 1) and heads (0, 15, 16, 63), the rest random
// with ties and values whose sums round differently in another order.
TEST(Avx512Pieces, EpilogueIsTheScalarEpilogue) {
  DSV4CPU_REQUIRE("avx512bf16");
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::nanf(""), inf, -inf, -0.0f, 0.0f, 0x1p-140f, 1e30f, -1e30f};
  for (int64_t Hp : {16, 48, 64, 128}) {
    for (int64_t n : {1, 2, 15, 16, 17, 31, 33, 48}) {
      const int64_t ld = 64, chunks = (Hp + 63) / 64;
      std::vector<float> w(static_cast<size_t>(Hp));
      for (auto& x : w) x = std::ldexp(u(rng), static_cast<int>(rng() % 40) - 20);
      w[0] = 1.0f;
      float lw[opt::kKeyBlock][16] = {}, lg[opt::kKeyBlock][16] = {};
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t h0 = 64 * c, nh = Hp - h0 < 64 ? Hp - h0 : 64;
        std::vector<float> dots(static_cast<size_t>(opt::kKeyBlock * ld));
        for (auto& x : dots) x = std::ldexp(u(rng), static_cast<int>(rng() % 60) - 30);
        for (int64_t k : {int64_t{0}, int64_t{15}, int64_t{16}, n - 1})
          for (int64_t h : {int64_t{0}, int64_t{15}, int64_t{16}, int64_t{63}})
            if (k < n && h < nh)
              dots[static_cast<size_t>(k * ld + h)] = specials[rng() % std::size(specials)];
        opt::epilogue_accumulate(dots.data(), ld, n, h0, nh, w.data(), lw);
        vector_pieces::accumulate(dots.data(), ld, n, h0, nh, w.data(), lg);
        for (int64_t k = 0; k < n; ++k)
          for (int i = 0; i < 16; ++i)
            ASSERT_EQ(bits(lg[k][i]), bits(lw[k][i]))
                << "Hp " << Hp << " n " << n << " key " << k << " lane " << i;
      }
      opt::KeyBlock keys{};
      bool nan[opt::kKeyBlock];
      for (int64_t k = 0; k < opt::kKeyBlock; ++k) {
        keys.scale[k] = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
        nan[k] = rng() % 5 == 0;
      }
      for (int64_t H : {int64_t{0}, Hp}) {
        std::vector<float> want(static_cast<size_t>(n) + 16, 7.0f), got(want);
        float lw2[opt::kKeyBlock][16], lg2[opt::kKeyBlock][16];
        std::memcpy(lw2, lw, sizeof lw);
        std::memcpy(lg2, lg, sizeof lg);
        opt::epilogue_finish(lw2, n, keys, nan, H, want.data());
        vector_pieces::finish(lg2, n, keys, nan, H, got.data());
        for (size_t k = 0; k < want.size(); ++k)  // past n: untouched
          ASSERT_EQ(bits(got[k]), bits(want[k]))
              << "Hp " << Hp << " n " << n << " H " << H << " key " << k;
      }
    }
  }
}

// The summation tree by hand (numerics.md §8.1): lanes 0, 4, 8, 12 = 1, 2⁻²⁴, 2⁻²⁴, 2⁻²⁴. Width 8
// gives RN(1 + 2⁻²⁴) = 1 (a tie, to even) and 2⁻²⁴ + 2⁻²⁴ = 2⁻²³; width 4 gives 1 + 2⁻²³, exact.
// (Left to right the sum stays 1.) Key k has scale 2^k, so each result must land at its key.
TEST(Avx512Pieces, SummationTreeByHand) {
  DSV4CPU_REQUIRE("avx512bf16");
  float lanes[opt::kKeyBlock][16] = {};
  opt::KeyBlock keys{};
  for (int k = 0; k < 16; ++k) {
    lanes[k][0] = 1.0f;
    lanes[k][4] = lanes[k][8] = lanes[k][12] = 0x1p-24f;
    keys.scale[k] = std::ldexp(1.0f, k);
  }
  bool nan[opt::kKeyBlock] = {};
  nan[5] = true;
  float out[16];
  vector_pieces::finish(lanes, 16, keys, nan, 64, out);
  for (int k = 0; k < 16; ++k) {
    if (k == 5) {
      EXPECT_TRUE(std::isnan(out[k]));
      continue;
    }
    EXPECT_EQ(out[k], std::ldexp(1.0f + 0x1p-23f, k)) << "key " << k;
  }
}

}  // namespace
}  // namespace dsv4cpu
