// The bf16 dequantisation of sparse_mla_attention (optimized/attention_decode_hwy-inl.h), compiled
// here for every Highway target: for blocks of bf16-exact rows (every scale byte in [10, 246], or 0
// with nope_decode = vllm; no bf16 subnormal among the RoPE values), DecodeBlockBf16 gives the bf16
// rows and row pairs of DecodeBlock bit for bit (with the zero padding the driver adds), and the
// same finiteness (NaN codes, non-finite RoPE values). So does the VBMI decode of the AMX kernel
// (optimized/attention_decode_vbmi.hpp, compiled here under a target pragma), where the CPU has
// VBMI. For blocks with a row that is not bf16-exact, both say so (Bf16Decode::not_exact). And
// DecodeBlock's fp32 rows are the reference's decode_row for every code at every scale byte. The
// op-level properties compare attention outputs within a bound, where one wrong operand may hide;
// this compares the operands themselves.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "prop_attention_decode_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "optimized/attention_decode_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

// Both decoders on one block; false where DecodeBlockBf16 is not built (the SCALAR target).
bool DecodeBoth(const uint8_t* const* data, const uint8_t* const* scales, int64_t n, bool vllm,
                uint16_t* krows, uint32_t* vpairs, bool* finite, uint16_t* krows_bf16,
                uint32_t* vpairs_bf16, Bf16Decode* bf16) {
#if HWY_TARGET == HWY_SCALAR
  (void)data, (void)scales, (void)n, (void)vllm, (void)krows, (void)vpairs, (void)finite;
  (void)krows_bf16, (void)vpairs_bf16, (void)bf16;
  return false;
#else
  *finite = DecodeBlock(data, scales, n, vllm ? NopeDecode::vllm : NopeDecode::exact, nullptr,
                        krows, vpairs);
  *bf16 = DecodeBlockBf16(data, scales, n, vllm, krows_bf16, vpairs_bf16);
  PadBf16Layouts(n, krows_bf16, vpairs_bf16);  // as the driver does
  return true;
#endif
}

// DecodeBlock's fp32 rows alone; returns its finiteness.
bool DecodeF32(const uint8_t* const* data, const uint8_t* const* scales, int64_t n, bool vllm,
               float* rows) {
  return DecodeBlock(data, scales, n, vllm ? NopeDecode::vllm : NopeDecode::exact, rows, nullptr,
                     nullptr);
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "args/fp8_ds_mla.hpp"

#include "generators.hpp"
#include "testing/caches.hpp"

// Everything up to pop_options is built for AVX-512 VBMI and has internal linkage.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")
#define DSV4CPU_VBMI_PIECES 1
#include "optimized/attention_decode_vbmi.hpp"
namespace vbmi {
namespace {
dsv4cpu::detail::opt::Bf16Decode decode(const uint8_t* const* data, const uint8_t* const* scales,
                                        int64_t n, bool vllm, uint16_t* krows, uint32_t* vpairs) {
  namespace opt = dsv4cpu::detail::opt;
  const opt::Bf16Decode r = opt::decode_block_bf16_vbmi(data, scales, n, vllm, krows, vpairs);
  opt::PadBf16Layouts(n, krows, vpairs);  // as the driver does
  return r;
}
}  // namespace
}  // namespace vbmi
#pragma GCC pop_options

namespace dsv4cpu::detail::opt {
HWY_EXPORT(DecodeBoth);
HWY_EXPORT(DecodeF32);
}  // namespace dsv4cpu::detail::opt

namespace dsv4cpu::prop {
namespace {

using detail::kAttentionBlock;
using detail::kMlaDataBytes;
using detail::kMlaNope;
using detail::kMlaRope;
using detail::kMlaTiles;
using detail::opt::Bf16Decode;
using detail::opt::kF32Row;
using detail::opt::kKRow;
using detail::opt::kVpBlock;

// One block of n rows of 576 data bytes and 8 scale bytes, bf16-exact by construction, with the
// codes and values that take each path: zero codes of both signs, E = 0 codes, NaN codes, RoPE
// infinities and NaN (rarely, so that most blocks are finite), boundary scale bytes. With
// `inexact`, one row has a scale byte outside [10, 246] (not 0 with vllm) or a subnormal RoPE
// value.
struct Block {
  std::vector<uint8_t> data, scales;
  std::vector<const uint8_t*> data_rows, scale_rows;
  bool exact = true;  // every row bf16-exact, by a scan of the bytes
};

Block make_block(std::mt19937_64& rng, int64_t n, bool vllm, bool specials, bool inexact = false) {
  Block b;
  b.data.resize(static_cast<size_t>(n * kMlaDataBytes));
  b.scales.resize(static_cast<size_t>(n * 8));
  const uint8_t edges[] = {10, 11, 126, 127, 128, 245, 246};
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* row = &b.data[static_cast<size_t>(j * kMlaDataBytes)];
    uint8_t* bytes = &b.scales[static_cast<size_t>(j * 8)];
    for (int k = 0; k < kMlaTiles; ++k) {
      const uint64_t r = rng() % 8;
      bytes[k] = r == 0   ? edges[rng() % std::size(edges)]
                 : r == 1 && vllm ? uint8_t{0}
                                  : static_cast<uint8_t>(10 + rng() % 237);
    }
    bytes[kMlaTiles] = 0;  // the pad byte
    for (int d = 0; d < kMlaNope; ++d) {
      const uint64_t r = rng() % 16;
      row[d] = r == 0 ? uint8_t{0} : r == 1 ? uint8_t{0x80} : r < 4 ? static_cast<uint8_t>(rng() & 0x87)
                                                                    : testing::random_code(rng);
    }
    if (specials && rng() % 4 == 0) row[rng() % kMlaNope] = (rng() & 1) ? 0x7F : 0xFF;
    for (int i = 0; i < kMlaRope; ++i) {
      // Normal bf16 values or zero (no subnormal: the rows are bf16-exact).
      uint16_t h = static_cast<uint16_t>(rng());
      if ((h & 0x7F80) == 0) h &= 0x8000;
      if ((h & 0x7F80) == 0x7F80 && !(specials && rng() % 8 == 0)) h &= 0xBFFF;  // mostly finite
      std::memcpy(row + kMlaNope + 2 * i, &h, 2);
    }
  }
  if (inexact) {
    const size_t j = static_cast<size_t>(rng() % static_cast<uint64_t>(n));
    if (rng() % 2 == 0) {
      const uint8_t outside[] = {0, 1, 9, 247, 254, 255};
      uint8_t byte = outside[rng() % std::size(outside)];
      if (vllm && byte == 0) byte = 9;
      b.scales[j * 8 + rng() % kMlaTiles] = byte;
    } else {
      const uint16_t h = static_cast<uint16_t>(((rng() & 1) << 15) | (1 + rng() % 0x7F));
      std::memcpy(&b.data[j * kMlaDataBytes + kMlaNope + 2 * (rng() % kMlaRope)], &h, 2);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* row = &b.data[static_cast<size_t>(j * kMlaDataBytes)];
    const uint8_t* bytes = &b.scales[static_cast<size_t>(j * 8)];
    b.data_rows.push_back(row);
    b.scale_rows.push_back(bytes);
    for (int k = 0; k < kMlaTiles; ++k)
      b.exact &= (bytes[k] >= 10 && bytes[k] <= 246) || (vllm && bytes[k] == 0);
    for (int i = 0; i < kMlaRope; ++i) {
      uint16_t h;
      std::memcpy(&h, row + kMlaNope + 2 * i, 2);
      b.exact &= !((h & 0x7F80) == 0 && (h & 0x7F) != 0);
    }
  }
  return b;
}

// "" when the verdict and bf16 layouts `got` are those wanted (the verdict from the block's scan
// and DecodeBlock's finiteness, the layouts DecodeBlock's), else what differs first.
std::string compare_layouts(const std::string& at, Bf16Decode want, Bf16Decode got,
                            const uint16_t* krows, const uint16_t* krows_got, const uint32_t* vpairs,
                            const uint32_t* vpairs_got) {
  const size_t krows_size = static_cast<size_t>(kAttentionBlock * kKRow);
  const size_t vpairs_size = static_cast<size_t>(8 * kVpBlock);
  if (got != want)
    return at + ": verdict " + std::to_string(static_cast<int>(got)) + ", want " +
           std::to_string(static_cast<int>(want));
  // Not finite: the token's rows are NaN; not exact: DecodeBlock runs again. The operands are not
  // used.
  if (want != Bf16Decode::ok) return "";
  for (size_t i = 0; i < krows_size; ++i)
    if (krows_got[i] != krows[i])
      return at + ": bf16 row " + std::to_string(i / kKRow) + " word " +
             std::to_string(i % kKRow) + ": " + std::to_string(krows_got[i]) + ", want " +
             std::to_string(krows[i]);
  for (size_t i = 0; i < vpairs_size; ++i)
    if (vpairs_got[i] != vpairs[i])
      return at + ": row pair word " + std::to_string(i) + ": " + std::to_string(vpairs_got[i]) +
             ", want " + std::to_string(vpairs[i]);
  return "";
}

// "" when DecodeBlockBf16 agrees with DecodeBlock on every target, and the VBMI decode with the
// DecodeBlock of the first target (where the CPU has VBMI), else what differs first.
std::string compare_decoders(const Block& b, int64_t n, bool vllm, const std::string& what) {
  const size_t krows_size = static_cast<size_t>(kAttentionBlock * kKRow);
  const size_t vpairs_size = static_cast<size_t>(8 * kVpBlock);
  // Aligned as the driver's buffers (DecodeBlock stores whole aligned vectors).
  auto krows = hwy::AllocateAligned<uint16_t>(krows_size);
  auto krows_bf16 = hwy::AllocateAligned<uint16_t>(krows_size);
  auto vpairs = hwy::AllocateAligned<uint32_t>(vpairs_size);
  auto vpairs_bf16 = hwy::AllocateAligned<uint32_t>(vpairs_size);
  bool finite = false, vbmi_done = false;
  Bf16Decode bf16 = Bf16Decode::ok;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    std::fill(krows.get(), krows.get() + krows_size, uint16_t{0xBEEF});
    std::fill(krows_bf16.get(), krows_bf16.get() + krows_size, uint16_t{0xBEEF});
    std::fill(vpairs.get(), vpairs.get() + vpairs_size, 0xDEADBEEFu);
    std::fill(vpairs_bf16.get(), vpairs_bf16.get() + vpairs_size, 0xDEADBEEFu);
    hwy::SetSupportedTargetsForTest(target);
    const bool ran = HWY_DYNAMIC_DISPATCH(detail::opt::DecodeBoth)(
        b.data_rows.data(), b.scale_rows.data(), n, vllm, krows.get(), vpairs.get(), &finite,
        krows_bf16.get(), vpairs_bf16.get(), &bf16);
    hwy::SetSupportedTargetsForTest(0);
    if (!ran) continue;
    const Bf16Decode want = !b.exact ? Bf16Decode::not_exact
                            : finite ? Bf16Decode::ok
                                     : Bf16Decode::not_finite;
    const std::string diff =
        compare_layouts(what + " on " + hwy::TargetName(target), want, bf16, krows.get(),
                        krows_bf16.get(), vpairs.get(), vpairs_bf16.get());
    if (!diff.empty()) return diff;
    if (vbmi_done || !__builtin_cpu_supports("avx512vbmi")) continue;
    vbmi_done = true;
    std::fill(krows_bf16.get(), krows_bf16.get() + krows_size, uint16_t{0xBEEF});
    std::fill(vpairs_bf16.get(), vpairs_bf16.get() + vpairs_size, 0xDEADBEEFu);
    const Bf16Decode vbmi = vbmi::decode(b.data_rows.data(), b.scale_rows.data(), n, vllm,
                                         krows_bf16.get(), vpairs_bf16.get());
    const std::string vbmi_diff =
        compare_layouts(what + " by VBMI", want, vbmi, krows.get(), krows_bf16.get(), vpairs.get(),
                        vpairs_bf16.get());
    if (!vbmi_diff.empty()) return vbmi_diff;
  }
  return "";
}

RC_GTEST_PROP(AttentionDecodeHwy, Bf16DecodeIsDecodeBlock, ()) {
  const Seed seed = *gen_seed();
  std::mt19937_64 rng(seed.value);
  const bool vllm = rng() % 2 == 0, specials = rng() % 3 == 0, inexact = rng() % 4 == 0;
  const int64_t n = 1 + static_cast<int64_t>(rng() % kAttentionBlock);
  const Block b = make_block(rng, n, vllm, specials, inexact);
  RC_CLASSIFY(!b.exact, "not exact");
  const std::string diff =
      compare_decoders(b, n, vllm, "n " + std::to_string(n) + (vllm ? " vllm" : " exact"));
  if (!diff.empty()) RC_FAIL(diff);
}

// Every code in every position class, at the extreme scale bytes, exact and vllm: 256 codes in
// the 448 NoPE dims of two rows (one odd block: the pad row too).
TEST(AttentionDecodeHwy, EveryCodeAtEveryEdgeScale) {
  for (const bool vllm : {false, true})
    for (const uint8_t s : {uint8_t{10}, uint8_t{127}, uint8_t{246}}) {
      std::mt19937_64 rng(s);
      Block b = make_block(rng, 3, vllm, false);
      for (int64_t j = 0; j < 3; ++j)
        for (int d = 0; d < kMlaNope; ++d) {
          uint8_t c = static_cast<uint8_t>((d + 200 * j) % 256);
          if ((c & 0x7F) == 0x7F) c = static_cast<uint8_t>(c ^ 1);
          b.data[static_cast<size_t>(j * kMlaDataBytes + d)] = c;
        }
      for (uint8_t& byte : b.scales) byte = s;
      EXPECT_EQ(compare_decoders(b, 3, vllm,
                                 std::string(vllm ? "vllm" : "exact") + " s " + std::to_string(s)),
                "");
    }
}

// DecodeBlock's fp32 rows on every target are the reference's decode_row (args/fp8_ds_mla.hpp)
// bit for bit, NaN for NaN: every code (E = 0 and the NaN codes included) at every scale byte,
// exact and vllm, beside RoPE values of every class; and the block is finite exactly when every
// value is. The fp32 products take these rows as the reference takes its own.
TEST(AttentionDecodeHwy, Fp32RowsAreTheReferenceDecodeForEveryCodeAndScaleByte) {
  constexpr int64_t n = 5;  // every code in each row (448 NoPE dims), rows of both parities
  const uint16_t rope_values[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x3F80, 0xC2F7, 0x7F7F,
                                  0x7F80, 0xFF80, 0x7FC1};
  auto rows = hwy::AllocateAligned<float>(static_cast<size_t>(n * kF32Row));
  for (const bool vllm : {false, true})
    for (int s = 0; s < 256; ++s) {
      const auto mode = vllm ? NopeDecode::vllm : NopeDecode::exact;
      std::mt19937_64 rng(static_cast<uint64_t>(s));
      Block b = make_block(rng, n, vllm, false);
      for (int64_t j = 0; j < n; ++j) {
        uint8_t* row = &b.data[static_cast<size_t>(j * kMlaDataBytes)];
        for (int d = 0; d < kMlaNope; ++d) row[d] = static_cast<uint8_t>((d + 77 * j + s) % 256);
        // Finite RoPE values but in the last row, so that both verdicts occur.
        for (int i = 0; i < kMlaRope; ++i) {
          const size_t k = static_cast<size_t>(i + j + s) % (j + 1 < n ? 7 : std::size(rope_values));
          std::memcpy(row + kMlaNope + 2 * i, &rope_values[k], 2);
        }
      }
      for (uint8_t& byte : b.scales) byte = static_cast<uint8_t>(s);
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        std::fill(rows.get(), rows.get() + n * kF32Row, -1.0f);
        hwy::SetSupportedTargetsForTest(target);
        const bool finite = HWY_DYNAMIC_DISPATCH(detail::opt::DecodeF32)(
            b.data_rows.data(), b.scale_rows.data(), n, vllm, rows.get());
        hwy::SetSupportedTargetsForTest(0);
        bool all_finite = true;
        for (int64_t j = 0; j < n; ++j) {
          float want[512];
          detail::decode_row(b.data_rows[static_cast<size_t>(j)],
                             b.scale_rows[static_cast<size_t>(j)], mode, want);
          for (int d = 0; d < 512; ++d) {
            const float got = rows[static_cast<size_t>(j * kF32Row + d)];
            all_finite &= std::isfinite(want[d]);
            const bool same = std::isnan(want[d]) ? std::isnan(got)
                                                  : std::memcmp(&got, &want[d], 4) == 0;
            if (!same)
              FAIL() << hwy::TargetName(target) << (vllm ? " vllm" : " exact") << " scale byte " << s
                     << " row " << j << " dim " << d << ": got " << got << ", want " << want[d];
          }
        }
        EXPECT_EQ(finite, all_finite) << hwy::TargetName(target) << " scale byte " << s;
      }
    }
}

}  // namespace
}  // namespace dsv4cpu::prop
#endif  // HWY_ONCE
