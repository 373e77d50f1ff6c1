// Reference KV compressor (compressor.md). Scalar fp32, the spec's evaluation orders verbatim.
#include "args/compressor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail::ref {
namespace {

// compressor.md §4.1: slot of local index l of request r; -1 for any negative l.
int64_t local_to_slot(const IndexReader& bt, int64_t r, int64_t l, int64_t P) {
  return l < 0 ? -1 : bt(r, l / P) * P + l % P;
}

// Little-endian stores into the cache bytes.
void store_u16(uint8_t* dst, uint16_t v) {
  dst[0] = static_cast<uint8_t>(v & 0xFFu);
  dst[1] = static_cast<uint8_t>(v >> 8);
}
void store_u32(uint8_t* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>((v >> (8 * i)) & 0xFFu);
}

// §6.2 step 6 for a non-finite pooled channel d of token t: the state value that made it
// non-finite, named as the state_cache element, window column and slot it came from: the first
// (window columns ascending, kv before score) non-finite kv value or NaN / +inf score, else the
// first -inf score (harmful only when the channel's every score is -inf). With every pooled value
// finite, the pooling itself overflowed.
[[noreturn]] void fail_pooled(const CompressNormRopeStoreArgs& a, int64_t t, int64_t p, int d,
                              float pooled) {
  const IndexReader gather(a.gather_slots);
  const float* state = a.state_cache.ptr<const float>();
  const int64_t HD = a.layout.hd;
  for (const bool minus_inf_scores : {false, true})
    for (int64_t w = 0; w < a.W; ++w) {
      const int64_t g = gather(t, w);
      if (g < 0) continue;
      const int64_t off = w >= a.compress_ratio ? HD : 0;
      for (const int64_t e : {off + d, a.SW + off + d}) {
        const float v = state[(g / a.sbs) * a.state_cache.stride(0) + (g % a.sbs) * 2 * a.SW + e];
        const bool kv = e < a.SW;
        if (std::isfinite(v) || (!kv && v == -INFINITY) != minus_inf_scores) continue;
        fail_computed_input(a.op, "state_cache", {g / a.sbs, g % a.sbs, e}, v, t, p,
                            " as window column " + std::to_string(w) + " (gather_slots[" +
                                std::to_string(t) + ", " + std::to_string(w) +
                                "] = " + std::to_string(g) + "), its " + (kv ? "kv" : "score") +
                                " for channel " + std::to_string(d));
      }
    }
  fail_computed(a.op, t, p, "pooled channel", d, pooled);
}

// compressor.md §6.2 (head 512) and §7 (head 128) for the emitting token t. `data` receives the
// entry's data-region bytes, `scale` its scale-region bytes. With `check`, the first non-finite
// intermediate throws NonFiniteError, looked at in pipeline order: pooled c (channels
// ascending), ss, t, inv, n, the bf16 NoPE values, the rotated values, their bf16 roundings.
void compute_entry(const CompressNormRopeStoreArgs& a, int64_t t, bool check, uint8_t* data,
                   uint8_t* scale) {
  const EntryLayout& L = a.layout;
  const int HD = L.hd, nope = L.nope;
  const int64_t r = a.compress_ratio;
  const int64_t p = IndexReader(a.positions)(t);
  auto verify = [&](const char* quantity, int64_t channel, float v) {
    if (check && !std::isfinite(v)) fail_computed(a.op, t, p, quantity, channel, v);
  };

  // §5: the valid window columns in ascending w; column w reads its state row at offset
  // off = (w >= r) ? HD : 0 (kv) and SW + off (score). Slot -1 columns are skipped.
  const IndexReader gather(a.gather_slots);
  const float* state = a.state_cache.ptr<const float>();
  std::vector<const float*> kv_col, score_col;
  for (int64_t w = 0; w < a.W; ++w) {
    const int64_t g = gather(t, w);
    if (g < 0) continue;
    const float* row = state + (g / a.sbs) * a.state_cache.stride(0) + (g % a.sbs) * 2 * a.SW;
    const int64_t off = w >= r ? HD : 0;
    kv_col.push_back(row + off);
    score_col.push_back(row + a.SW + off);
  }
  const size_t valid = kv_col.size();  // >= 1: column W-1 is valid (validated)

  // Step 1: pooling, numerics.md §8.4, per channel.
  float c[512];
  for (int d = 0; d < HD; ++d) {
    float m = score_col[0][d];
    for (size_t j = 1; j < valid; ++j) m = std::max(m, score_col[j][d]);
    float den = 0.0f, acc = 0.0f;
    for (size_t j = 0; j < valid; ++j) {
      const float e = exp_lib(score_col[j][d] - m);
      den = den + e;
      acc = std::fma(e, kv_col[j][d], acc);
    }
    c[d] = acc / den;
  }
  for (int d = 0; d < HD; ++d)
    if (check && !std::isfinite(c[d])) fail_pooled(a, t, p, d, c[d]);

  // Step 2: RMSNorm, numerics.md §8.2 and §8.3.
  const float ss = sum_squares16(c, HD);
  verify("sum of squares", -1, ss);
  float rms_t = 0.0f;
  const float inv = rms_inv(ss, HD, a.eps_f, &rms_t);
  verify("RMS value", -1, rms_t);
  verify("inverse RMS", -1, inv);
  const float* weight = a.rms_norm_weight.ptr<const float>();
  float n[512];
  for (int d = 0; d < HD; ++d) n[d] = (c[d] * inv) * weight[d];
  for (int d = 0; d < HD; ++d) verify("normalised channel", d, n[d]);

  // Step 3 (§6.2) / §7 step 3 for the NoPE dims: v = bf16(n), widened.
  float v[512];
  for (int d = 0; d < nope; ++d) v[d] = round_bf16(n[d]);
  for (int d = 0; d < nope; ++d) verify("bf16 channel", d, v[d]);

  // Step 4: RoPE on the fp32 n[nope..HD) with table row p0 = (p / r)·r (numerics.md §8.5), then
  // bf16 rounding in the original interleaved order.
  const float* cs = a.cos_sin_cache.ptr<const float>() + rope_row(p, r) * 64;
  float rot[64];
  for (int i = 0; i < 32; ++i)
    rope_pair(n[nope + 2 * i], n[nope + 2 * i + 1], cs[i], cs[32 + i], &rot[2 * i],
              &rot[2 * i + 1]);
  for (int k = 0; k < 64; ++k) verify("rotated channel", nope + k, rot[k]);
  uint16_t rope[64];
  for (int k = 0; k < 64; ++k) {
    rope[k] = to_bf16(rot[k]);
    v[nope + k] = bf16_to_f32(rope[k]);
  }
  for (int k = 0; k < 64; ++k) verify("bf16 rotated channel", nope + k, v[nope + k]);

  // Step 5 (§6.2) / §7 step 4: quantise each block of v[0..quant_dims) (numerics.md §4).
  for (int q = 0; q < L.quant_dims / L.block; ++q) {
    const float* x = v + q * L.block;
    float amax = 0.0f;
    for (int d = 0; d < L.block; ++d) amax = std::max(amax, std::fabs(x[d]));
    const int e = scale_exponent(amax, a.clamp);
    const float inv_scale = pow2f(-e);
    for (int d = 0; d < L.block; ++d) data[q * L.block + d] = e4m3_sat(x[d] * inv_scale);
    if (L.raw_scale)
      store_u32(scale, f32_bits(pow2f(e)));  // §7: the fp32 scale 2^e
    else
      scale[q] = static_cast<uint8_t>(e + 127);  // §6.3: UE8M0 byte
  }
  // §6.3: the main head stores the rotated values as bf16 after the codes, then the pad byte.
  if (!L.raw_scale) {
    for (int k = 0; k < 64; ++k) store_u16(data + L.quant_dims + 2 * k, rope[k]);
    scale[L.scale_bytes - 1] = 0x00;
  }
}

}  // namespace

// compressor.md §3.3
void save_partial_states(const SavePartialStatesArgs& a, const RunContext&) {
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  const float* ape = a.ape.ptr<const float>();
  float* state = a.state_cache.ptr<float>();
  for (int64_t t = 0; t < a.N; ++t) {
    const int64_t g = slot(t);
    if (g < 0) continue;  // slot -1: skipped
    const float* kv = a.kv.ptr<const float>() + t * a.kv.stride(0);
    const float* score = a.score.ptr<const float>() + t * a.score.stride(0);
    const float* ape_row = ape + (pos(t) % a.r) * a.SW;
    float* row = state + (g / a.sbs) * a.state_cache.stride(0) + (g % a.sbs) * 2 * a.SW;
    std::memcpy(row, kv, static_cast<size_t>(a.SW) * sizeof(float));  // bit copy
    for (int64_t i = 0; i < a.SW; ++i) row[a.SW + i] = score[i] + ape_row[i];
  }
}

// compressor.md §4.1
void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext&) {
  const IndexReader local(a.local_indices), req(a.req_idx), bt(a.block_table);
  int64_t* slots = a.slots.ptr<int64_t>();
  for (int64_t n = 0; n < a.N; ++n)
    for (int64_t k = 0; k < a.K; ++k)
      slots[n * a.K + k] = local_to_slot(bt, req(n), local(n, k), a.block_size);
}

// compressor.md §4.2: local l = p − W + 1 + w, oldest first.
void compressor_window_slots(const CompressorWindowSlotsArgs& a, const RunContext&) {
  const IndexReader pos(a.positions), req(a.token_to_req), bt(a.block_table);
  int64_t* out = a.gather_slots.ptr<int64_t>();
  for (int64_t t = 0; t < a.N; ++t)
    for (int64_t w = 0; w < a.W; ++w)
      out[t * a.W + w] = local_to_slot(bt, req(t), pos(t) - a.W + 1 + w, a.block_size);
}

// compressor.md §6.4 / §7: every emitting token's entry into scratch (checked), then the writes.
void compress_norm_rope_store(const CompressNormRopeStoreArgs& a, const RunContext& ctx) {
  const IndexReader pos(a.positions), kv_slot(a.kv_slot_mapping);
  const int64_t entry_bytes = a.layout.entry_bytes();
  std::vector<int64_t> slots;
  std::vector<uint8_t> scratch;
  for (int64_t t = 0; t < a.N; ++t) {
    if (!emits(pos(t), kv_slot(t), a.compress_ratio)) continue;
    slots.push_back(kv_slot(t));
    scratch.resize(slots.size() * static_cast<size_t>(entry_bytes));
    uint8_t* entry = scratch.data() + (slots.size() - 1) * static_cast<size_t>(entry_bytes);
    compute_entry(a, t, ctx.check_finite, entry, entry + a.layout.data_bytes);
  }
  // §6.3: entry j = slot % P of page slot / P; data region [0, P·data_bytes), then the scales.
  const int64_t P = a.kv_cache_block_size;
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint8_t* entry = scratch.data() + i * static_cast<size_t>(entry_bytes);
    uint8_t* page = a.kv_cache.ptr<uint8_t>() + (slots[i] / P) * a.kv_cache.stride(0);
    const int64_t j = slots[i] % P;
    std::memcpy(page + j * a.layout.data_bytes, entry, static_cast<size_t>(a.layout.data_bytes));
    std::memcpy(page + P * a.layout.data_bytes + j * a.layout.scale_bytes,
                entry + a.layout.data_bytes, static_cast<size_t>(a.layout.scale_bytes));
  }
}

// compressor.md §8.2, every step as written.
void make_cos_sin_cache(const MakeCosSinCacheArgs& a, const RunContext&) {
  constexpr int d = 64;
  constexpr double kPi = 3.141592653589793;  // binary64 π
  float f[32];
  for (int i = 0; i < 32; ++i) {
    const float pf = static_cast<float>(std::pow(a.theta, static_cast<double>(2 * i) / d));
    const float ex = 1.0f / pf;
    if (!a.yarn) {
      f[i] = ex;
      continue;
    }
    const YarnParams& y = *a.yarn;
    const float in = 1.0f / static_cast<float>(y.factor * static_cast<double>(pf));
    auto corr = [&](double n_rot) {
      return d * std::log(y.original_max / (2.0 * kPi * n_rot)) / (2.0 * std::log(a.theta));
    };
    const double low = std::max(std::floor(corr(y.beta_fast)), 0.0);
    double high = std::min(std::ceil(corr(y.beta_slow)), static_cast<double>(d - 1));
    if (low == high) high = high + 0.001;
    const float num = static_cast<float>(static_cast<double>(i) - low);
    const float span = static_cast<float>(high - low);
    const float ramp = std::min(std::max(num / span, 0.0f), 1.0f);
    const float mask = 1.0f - ramp;  // extrapolation factor 1
    const float interp = in * (1.0f - mask);
    const float extrap = ex * mask;
    f[i] = interp + extrap;
  }
  const double mscale = a.yarn ? a.yarn->mscale : 1.0;
  float* out = a.out.ptr<float>();
  for (int64_t pos = 0; pos < a.rows; ++pos) {
    for (int i = 0; i < 32; ++i) {
      const float angle = static_cast<float>(pos) * f[i];  // pos < 2^24 converts exactly
      const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
      out[pos * 64 + i] = static_cast<float>(static_cast<double>(c) * mscale);
      out[pos * 64 + 32 + i] = static_cast<float>(static_cast<double>(s) * mscale);
    }
  }
}

}  // namespace dsv4cpu::detail::ref
