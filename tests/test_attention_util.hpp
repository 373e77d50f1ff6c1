// Shared set-up of the attention op tests (attention.md): owned inputs with padded, garbage-filled
// fp8_ds_mla pages and hand-built entries.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/numerics.hpp"
#include "test_compressor_util.hpp"
#include "testing/attention.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu::test {

// A paged fp8_ds_mla cache (compressor.md §6.3) of `pages` pages with P entries, each page padded
// by `pad` garbage bytes and viewed with a page stride 8 bytes beyond page_bytes.
struct MlaPages {
  int64_t pages, P, page_bytes, page_stride;
  std::vector<uint8_t> bytes;

  MlaPages(int64_t pages_, int64_t P_, int64_t pad = 16, uint64_t seed = 3)
      : pages(pages_), P(P_), page_bytes(P_ * 584 + pad), page_stride(P_ * 584 + pad + 8) {
    bytes.assign(static_cast<size_t>(pages * page_stride), 0);
    testing::fill_garbage(bytes.data(), bytes.size(), seed);
  }
  int64_t data_at(int64_t slot) const { return (slot / P) * page_stride + (slot % P) * 576; }
  int64_t scales_at(int64_t slot) const {
    return (slot / P) * page_stride + P * 576 + (slot % P) * 8;
  }
  MutableTensorView view() {
    return MutableTensorView(bytes.data(), DType::U8, {pages, page_bytes}, {page_stride, 1});
  }
  // Entry `slot`: 448 NoPE codes, 7 UE8M0 bytes, 64 bf16 RoPE values; pad byte 0.
  void put(int64_t slot, const uint8_t* codes, const uint8_t* scale_bytes, const uint16_t* rope) {
    uint8_t* data = bytes.data() + data_at(slot);
    std::memcpy(data, codes, 448);
    std::memcpy(data + 448, rope, 128);  // little-endian host
    uint8_t* sc = bytes.data() + scales_at(slot);
    std::memcpy(sc, scale_bytes, 7);
    sc[7] = 0;
  }
  // Every NoPE code `code`, every scale byte `b`, every RoPE value `rope`.
  void put_uniform(int64_t slot, uint8_t code, uint8_t b, uint16_t rope) {
    const std::vector<uint8_t> codes(448, code), sc(7, b);
    const std::vector<uint16_t> r(64, rope);
    put(slot, codes.data(), sc.data(), r.data());
  }
  // Random finite codes (no NaN code), scale bytes 124..130, RoPE values bf16 of N(0, 1).
  void put_random(int64_t slot, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> code(0, 255), b(124, 130);
    std::normal_distribution<float> normal;
    uint8_t codes[448], sc[7];
    uint16_t rope[64];
    for (uint8_t& c : codes) {
      do c = static_cast<uint8_t>(code(rng));
      while ((c & 0x7F) == 0x7F);
    }
    for (uint8_t& s : sc) s = static_cast<uint8_t>(b(rng));
    for (uint16_t& r : rope) r = to_bf16(normal(rng));
    put(slot, codes, sc, rope);
  }
};

// All inputs of one sparse_mla_attention call, owned. q is head-padded to Hs >= H heads per token
// (stride(0) = Hs·512); out and lse hold garbage before each run.
struct AttentionCase {
  int64_t T, H, Hs;
  std::vector<uint16_t> q;
  MlaPages window, compressed;
  int64_t Nw, Nc;
  std::vector<int64_t> window_slots, compressed_slots;
  std::vector<float> sink;  // empty: no attn_sink
  float scale = kAttentionScale;
  NopeDecode mode = NopeDecode::exact;
  bool want_lse = true;
  std::vector<uint16_t> out;
  std::vector<float> lse;

  AttentionCase(int64_t T_, int64_t H_, MlaPages window_, int64_t Nw_, MlaPages compressed_,
                int64_t Nc_, int64_t Hs_ = 0)
      : T(T_),
        H(H_),
        Hs(Hs_ > 0 ? Hs_ : H_),
        window(std::move(window_)),
        compressed(std::move(compressed_)),
        Nw(Nw_),
        Nc(Nc_) {
    q.assign(static_cast<size_t>(T * Hs * 512), 0);
    testing::fill_garbage(q.data(), q.size() * 2,
                          7);  // the padding heads hold garbage (NaNs included)
    window_slots.assign(static_cast<size_t>(T * Nw), -1);
    compressed_slots.assign(static_cast<size_t>(T * Nc), -1);
    clear_outputs();
  }
  // out and lse refilled with garbage.
  void clear_outputs() {
    out.assign(static_cast<size_t>(T * H * 512), 0xA5A5);
    lse.assign(static_cast<size_t>(T * H), f32_from_bits(0xA5A5A5A5u));
  }
  uint16_t* q_row(int64_t t, int64_t h) { return q.data() + (t * Hs + h) * 512; }
  // Every q value of heads < H: bf16 of N(0, sigma).
  void random_q(std::mt19937_64& rng, float sigma) {
    std::normal_distribution<float> normal(0.0f, sigma);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int d = 0; d < 512; ++d) q_row(t, h)[d] = to_bf16(normal(rng));
  }
  int64_t& wslot(int64_t t, int64_t c) { return window_slots[static_cast<size_t>(t * Nw + c)]; }
  int64_t& cslot(int64_t t, int64_t c) { return compressed_slots[static_cast<size_t>(t * Nc + c)]; }

  struct Views {
    TensorView q, window_cache, window_slots, compressed_cache, compressed_slots, attn_sink;
    MutableTensorView out, lse;
  };
  Views views() {
    return {TensorView(q.data(), DType::BF16, {T, H, 512}, {Hs * 512, 512, 1}),
            window.view(),
            TensorView(window_slots.data(), DType::I64, {T, Nw}),
            compressed.view(),
            TensorView(compressed_slots.data(), DType::I64, {T, Nc}),
            sink.empty() ? TensorView() : TensorView(sink.data(), DType::F32, {H}),
            MutableTensorView(out.data(), DType::BF16, {T, H, 512}),
            want_lse ? MutableTensorView(lse.data(), DType::F32, {T, H}) : MutableTensorView()};
  }
  void run(const Views& v, const Options& o = {}) {
    sparse_mla_attention(v.q, v.window_cache, window.P, v.window_slots, v.compressed_cache,
                         compressed.P, v.compressed_slots, v.attn_sink, scale, mode, v.out, v.lse,
                         o);
  }
  void run(const Options& o = {}) {
    clear_outputs();
    run(views(), o);
  }

  testing::AttentionInputs inputs() {
    const Views v = views();
    return {v.q,          v.window_cache,     window.P,    v.window_slots, v.compressed_cache,
            compressed.P, v.compressed_slots, v.attn_sink, scale,          mode};
  }
};

}  // namespace dsv4cpu::test
