// Builders of test inputs: garbage fill for buffers whose untouched bytes are checked afterwards,
// finite decoys for unread inputs, random fp8 codes, and a paged indexer K cache.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dsv4cpu/tensor.hpp"
#include "testing/contracts.hpp"

namespace dsv4cpu::testing {

// Deterministic garbage: the bytes of rng() draws.
inline void fill_garbage(std::mt19937_64& rng, void* dst, size_t bytes) {
  auto* p = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t x = rng();
    std::memcpy(p + i, &x, std::min<size_t>(8, bytes - i));
  }
}
inline void fill_garbage(void* dst, size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  fill_garbage(rng, dst, bytes);
}

// Finite decoys for the parts of an input no formula reads: ±[1, 2)·2^e with e in [8, 24), large
// enough to change any result they enter, small enough that it stays finite, so a misread shows
// as a wrong value rather than as a non-finite one (which an optimized variant may hand to the
// reference).
inline void fill_decoys(std::mt19937_64& rng, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = rng();
    const uint32_t bits = static_cast<uint32_t>((x >> 63) << 31) |
                          static_cast<uint32_t>(127 + 8 + (x >> 32) % 16) << 23 |
                          static_cast<uint32_t>(x & 0x7FFFFF);
    std::memcpy(dst + i, &bits, 4);
  }
}

// A random finite e4m3 code; about one in four is subnormal or zero (E = 0).
inline uint8_t random_code(std::mt19937_64& rng) {
  for (;;) {
    uint8_t c = static_cast<uint8_t>(rng() & 0xFF);
    if (rng() % 4 == 0) c &= 0x87;  // E = 0: ±m·2⁻⁹
    if (!fp8_is_nan(c)) return c;
  }
}

// A paged indexer K cache (indexer.md §3) of `pages` pages of P entries, page stride `stride`
// bytes >= P·132. Every byte starts as 0x7F (a NaN code), so reading an entry that was never
// set shows up as NaN.
struct KCache {
  int64_t P, pages, stride;
  std::vector<uint8_t> bytes;
  KCache(int64_t P_, int64_t pages_, int64_t stride_)
      : P(P_),
        pages(pages_),
        stride(stride_),
        bytes(static_cast<size_t>(pages_ * stride_ + 1), 0x7F) {}
  void set(int64_t page, int64_t e, const uint8_t* codes, float scale) {
    std::memcpy(&bytes[static_cast<size_t>(page * stride + e * 128)], codes, 128);
    std::memcpy(&bytes[static_cast<size_t>(page * stride + P * 128 + 4 * e)], &scale, 4);
  }
  const uint8_t* codes(int64_t page, int64_t e) const {
    return &bytes[static_cast<size_t>(page * stride + e * 128)];
  }
  float scale(int64_t page, int64_t e) const {
    float s;
    std::memcpy(&s, &bytes[static_cast<size_t>(page * stride + P * 128 + 4 * e)], 4);
    return s;
  }
  TensorView view() const {
    return TensorView(bytes.data(), DType::U8, {pages, P * 132}, {stride, 1});
  }
};

}  // namespace dsv4cpu::testing
