// Shared set-up of the compress op tests (compressor.md §6, §7): owned inputs with padded pages,
// a state cache of finite decoys, a garbage-filled kv cache, and the byte ranges an entry occupies.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/numerics.hpp"
#include "testing/caches.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu::test {

// All inputs of one compress call, owned. hd = 512 calls compress_norm_rope_store, hd = 128
// compress_norm_rope_store_indexer. Pages of both caches are padded to test the page strides.
struct CompressCase {
  int hd = 512;
  int64_t r = 4, W = 8;                 // ratio and window (W = r or 2r)
  int64_t nb = 0, sbs = 4, page_floats = 0;  // state cache: pages, rows per page, page stride
  int64_t N = 0;                        // tokens
  int64_t P = 64, nblk = 0, page_bytes = 0, page_stride = 0;  // kv cache
  int64_t R = 0;                        // cos/sin rows
  double eps = 1e-6;
  ScaleClamp clamp = ScaleClamp::cpu;
  std::vector<float> state, weight, cos_sin;
  std::vector<int64_t> gather, positions, kv_slot;
  std::vector<uint8_t> kv_cache;

  CompressCase(int hd_, int64_t r_, int64_t W_, int64_t nb_, int64_t N_, int64_t nblk_,
               int64_t P_, int64_t R_, int64_t sbs_ = 4)
      : hd(hd_), r(r_), W(W_), nb(nb_), sbs(sbs_), N(N_), P(P_), nblk(nblk_), R(R_) {
    page_floats = sbs * 2 * SW() + 16;
    page_bytes = P * entry_bytes() + 8;
    page_stride = page_bytes + 24;  // a view with a page stride beyond page_bytes
    state.assign(static_cast<size_t>(nb * page_floats), 0.0f);
    std::mt19937_64 rng(1);
    testing::fill_decoys(rng, state.data(), state.size());
    weight.assign(static_cast<size_t>(hd), 1.0f);
    cos_sin.assign(static_cast<size_t>(R * 64), 0.0f);
    for (int64_t row = 0; row < R; ++row)
      for (int i = 0; i < 32; ++i) cos_sin[static_cast<size_t>(row * 64 + i)] = 1.0f;
    gather.assign(static_cast<size_t>(N * W), -1);
    positions.assign(static_cast<size_t>(N), 0);
    kv_slot.assign(static_cast<size_t>(N), -1);
    kv_cache.assign(static_cast<size_t>(nblk * page_stride), 0);
    testing::fill_garbage(kv_cache.data(), kv_cache.size(), 2);
  }

  int64_t SW() const { return (W / r) * hd; }
  int nope() const { return hd - 64; }
  int64_t data_bytes() const { return hd == 512 ? 576 : 128; }
  int64_t scale_bytes() const { return hd == 512 ? 8 : 4; }
  int64_t entry_bytes() const { return data_bytes() + scale_bytes(); }
  const char* op() const {
    return hd == 512 ? "compress_norm_rope_store" : "compress_norm_rope_store_indexer";
  }

  // The state row of slot g (compressor.md §3.1).
  float* row(int64_t g) { return state.data() + (g / sbs) * page_floats + (g % sbs) * 2 * SW(); }
  const float* row(int64_t g) const {
    return state.data() + (g / sbs) * page_floats + (g % sbs) * 2 * SW();
  }
  // Offsets of the kv and score values that window column w reads (compressor.md §5).
  int64_t kv_off(int64_t w) const { return w >= r ? hd : 0; }
  int64_t score_off(int64_t w) const { return SW() + kv_off(w); }

  // Byte offsets of the data and scale regions of the entry at `slot` (§6.3, §7).
  int64_t data_at(int64_t slot) const {
    return (slot / P) * page_stride + (slot % P) * data_bytes();
  }
  int64_t scale_at(int64_t slot) const {
    return (slot / P) * page_stride + P * data_bytes() + (slot % P) * scale_bytes();
  }

  struct Views {
    TensorView state_cache, gather_slots, positions, kv_slot_mapping, rms_norm_weight,
        cos_sin_cache;
    MutableTensorView kv_cache;
  };
  Views views() {
    return {TensorView(state.data(), DType::F32, {nb, sbs, 2 * SW()}, {page_floats, 2 * SW(), 1}),
            TensorView(gather.data(), DType::I64, {N, W}),
            TensorView(positions.data(), DType::I64, {N}),
            TensorView(kv_slot.data(), DType::I64, {N}),
            TensorView(weight.data(), DType::F32, {hd}),
            TensorView(cos_sin.data(), DType::F32, {R, 64}),
            MutableTensorView(kv_cache.data(), DType::U8, {nblk, page_bytes}, {page_stride, 1})};
  }
  // Calls the op of this head with `v` and this case's scalars.
  void run(const Views& v, const Options& o = {}) const {
    if (hd == 512)
      compress_norm_rope_store(v.state_cache, v.gather_slots, v.positions, v.kv_slot_mapping,
                               v.rms_norm_weight, v.cos_sin_cache, v.kv_cache, eps, P, r, clamp,
                               o);
    else
      compress_norm_rope_store_indexer(v.state_cache, v.gather_slots, v.positions,
                                       v.kv_slot_mapping, v.rms_norm_weight, v.cos_sin_cache,
                                       v.kv_cache, eps, P, r, clamp, o);
  }
  void run(const Options& o = {}) { run(views(), o); }
};

// compressor.md §9.1 (hd 512) / §9.3 (hd 128) input: C4A token p = 3 emitting entry 0 into kv
// slot `slot`, window [-1, -1, -1, -1, 28, 29, 30, 31]; the current halves of rows 28..31 hold
// kv = 1, 2, 3, 6 and score 0 in every channel; weight 1, eps 1e-6, table row 0 = 32 x 1.0 then
// 32 x 0.0. The pooled value is 3 and n[d] = 1 - 2^-24 in every dim.
inline CompressCase worked_example(int hd, int64_t slot) {
  CompressCase c(hd, 4, 8, /*nb=*/8, /*N=*/1, /*nblk=*/2, /*P=*/64, /*R=*/1);
  c.positions[0] = 3;
  c.kv_slot[0] = slot;
  const float kv[4] = {1, 2, 3, 6};
  for (int64_t w = 4; w < 8; ++w) {
    c.gather[static_cast<size_t>(w)] = 24 + w;
    float* row = c.row(24 + w);
    for (int d = 0; d < hd; ++d) {
      row[c.kv_off(w) + d] = kv[w - 4];
      row[c.score_off(w) + d] = 0.0f;
    }
  }
  return c;
}

// Bytes of `after` that differ from `before` outside the listed [begin, end) ranges.
inline std::vector<size_t> changed_outside(const std::vector<uint8_t>& before,
                                           const std::vector<uint8_t>& after,
                                           const std::vector<std::pair<int64_t, int64_t>>& ok) {
  std::vector<uint8_t> allowed(before.size(), 0);
  for (const auto& [b, e] : ok)
    for (int64_t i = b; i < e; ++i) allowed[static_cast<size_t>(i)] = 1;
  std::vector<size_t> out;
  for (size_t i = 0; i < before.size(); ++i)
    if (!allowed[i] && before[i] != after[i]) out.push_back(i);
  return out;
}

}  // namespace dsv4cpu::test
