// Reference attention ops (attention.md). Scalar fp32, the spec's evaluation orders verbatim.
#include "args/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "args/fp8_ds_mla.hpp"
#include "core/check.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail::ref {
namespace {

// ---- sparse_mla_attention (attention.md §2) ----

// One set of token t (§2.2): its width and, in column order, the columns of its valid entries and
// their dequantised rows (§2.4).
struct ColumnSet {
  int64_t width = 0;
  std::vector<int64_t> column;
  std::vector<float> rows;  // [column.size(), 512]
};

void gather_set(const TensorView& slots, int64_t t, const MlaCache& cache, NopeDecode mode,
                ColumnSet& set) {
  const IndexReader slot(slots);
  set.width = slots.size(1);
  set.column.clear();
  set.rows.clear();
  for (int64_t c = 0; c < set.width; ++c) {
    const int64_t s = slot(t, c);
    if (s < 0) continue;  // -1: no entry
    set.column.push_back(c);
    set.rows.resize(set.column.size() * kMlaDim);
    decode_row(cache.data(s), cache.scales(s), mode, set.rows.data() + set.rows.size() - kMlaDim);
  }
}

// §2.5-§2.6 for one head: q[512] widened, the window set then the compressed set. Writes the 512
// bf16 outputs and returns lse.
float attend(const SparseMlaAttentionArgs& a, const float* q, const ColumnSet* sets, float sink,
             bool has_sink, uint16_t* out) {
  // s_j = RN(dot(q, K_j)·scale): d ascending, fma chain from +0.
  std::vector<float> s[2];
  bool finite = true;
  size_t valid = 0;
  for (int k = 0; k < 2; ++k) {
    for (size_t j = 0; j < sets[k].column.size(); ++j) {
      const float* K = sets[k].rows.data() + j * kMlaDim;
      float dot = 0.0f;
      for (int d = 0; d < kMlaDim; ++d) dot = std::fma(q[d], K[d], dot);
      const float score = dot * a.scale;
      finite = finite && std::isfinite(score);
      s[k].push_back(score);
    }
    valid += sets[k].column.size();
  }
  // §2.6: a non-finite valid score gives the NaN row (checked first); no valid entry the +0 row.
  if (!finite) {
    std::fill(out, out + kMlaDim, uint16_t{0x7FC0});
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (valid == 0) {
    std::fill(out, out + kMlaDim, uint16_t{0});
    return std::numeric_limits<float>::infinity();
  }

  // §2.5: online softmax over blocks of 128 columns per set.
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  float acc[kMlaDim] = {};
  for (int k = 0; k < 2; ++k) {
    const ColumnSet& set = sets[k];
    size_t j0 = 0;  // first valid entry of the block (columns ascend)
    for (int64_t n0 = 0; n0 < set.width; n0 += kAttentionBlock) {
      size_t j1 = j0;
      while (j1 < set.column.size() && set.column[j1] < n0 + kAttentionBlock) ++j1;
      if (j1 == j0) continue;  // J empty: the block changes nothing
      float m_new = m;
      for (size_t j = j0; j < j1; ++j) m_new = std::max(m_new, s[k][j]);
      const float alpha = exp_lib(m - m_new);  // 0 for the first block
      float p[kAttentionBlock];
      float sum = 0.0f;  // Σ p_j, j ascending from +0
      for (size_t j = j0; j < j1; ++j) {
        p[j - j0] = exp_lib(s[k][j] - m_new);
        sum = sum + p[j - j0];
      }
      l = l * alpha + sum;
      for (int d = 0; d < kMlaDim; ++d) {
        acc[d] = acc[d] * alpha;
        for (size_t j = j0; j < j1; ++j)
          acc[d] = std::fma(round_bf16(p[j - j0]), set.rows[j * kMlaDim + d], acc[d]);
      }
      m = m_new;
      j0 = j1;
    }
  }

  // §2.6: lse = RN(m + RN(log(l))) with log in double; the sink factor; out = bf16(acc·f).
  const float lse = m + static_cast<float>(std::log(static_cast<double>(l)));
  float f = 1.0f / l;
  if (has_sink) f = f * (1.0f / (1.0f + exp_lib(sink - lse)));
  for (int d = 0; d < kMlaDim; ++d) out[d] = to_bf16(acc[d] * f);
  return lse;
}

// ---- fused_qnorm_rope_kv_insert (attention.md §3) ----

constexpr const char* kInsertOp = "fused_qnorm_rope_kv_insert";
constexpr const char* kInverseRopeOp = "inverse_gptj_rope_o_proj";

void widen_bf16(const uint16_t* x, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = bf16_to_f32(x[i]);
}

// §3.2 for head h of token t at `position`, table row `cs`: the 512 bf16 values of q_out. With
// `check`, the first non-finite intermediate throws NonFiniteError (ss, the RMS value t, inv, the
// normalised values, the rotated values, channels ascending).
void query_head(const FusedQnormRopeKvInsertArgs& a, int64_t t, int64_t h, int64_t position,
                const float* cs, bool check, uint16_t* out) {
  const std::string head = "q head " + std::to_string(h) + " ";
  auto verify = [&](const std::string& quantity, int64_t channel, float v) {
    if (check && !std::isfinite(v))
      fail_computed(kInsertOp, t, position, quantity.c_str(), channel, v);
  };
  float y[kMlaDim];
  widen_bf16(a.q.ptr<const uint16_t>() + (t * a.Hq + h) * kMlaDim, kMlaDim, y);
  const float ss = sum_squares16(y, kMlaDim);  // numerics.md §8.2
  verify(head + "sum of squares", -1, ss);
  float rms_t = 0.0f;
  const float inv = rms_inv(ss, kMlaDim, a.eps_f, &rms_t);  // numerics.md §8.3
  verify(head + "RMS value", -1, rms_t);
  verify(head + "inverse RMS", -1, inv);
  for (int d = 0; d < kMlaDim; ++d) y[d] = y[d] * inv;  // weight-free
  for (int d = 0; d < kMlaDim; ++d) verify(head + "normalised channel", d, y[d]);
  // numerics.md §8.5 on (y[448 + 2i], y[449 + 2i]) at table row positions[t].
  for (int i = 0; i < 32; ++i) {
    float* pair = y + kMlaNope + 2 * i;
    rope_pair(pair[0], pair[1], cs[i], cs[32 + i], &pair[0], &pair[1]);
  }
  for (int k = 0; k < kMlaRope; ++k) verify(head + "rotated channel", kMlaNope + k, y[kMlaNope + k]);
  for (int d = 0; d < kMlaDim; ++d) out[d] = to_bf16(y[d]);
}

// compressor.md §6.2 step 5 on one tile of 64 bf16-valued b, with attention.md §3.4's `flush`
// (|y| < 2^-6 stored as its signed zero). Returns the UE8M0 byte.
uint8_t quantise_tile(const float* b, ScaleClamp clamp, Fp8Subnormals subnormals, uint8_t* codes) {
  float amax = 0.0f;
  for (int d = 0; d < kMlaTile; ++d) amax = std::max(amax, std::fabs(b[d]));
  const int e = scale_exponent(amax, clamp);  // numerics.md §4
  const float inv_scale = pow2f(-e);
  for (int d = 0; d < kMlaTile; ++d) {
    const float y = b[d] * inv_scale;
    codes[d] = e4m3_sat(y);
    if (subnormals == Fp8Subnormals::flush && std::fabs(y) < 0x1p-6f)
      codes[d] = static_cast<uint8_t>(codes[d] & 0x80u);
  }
  return static_cast<uint8_t>(e + 127);
}

// §3.3 for kv row t at `position`, table row `cs`: the entry's 576 data bytes and 8 scale bytes.
// With `check`, a non-finite rotated value or bf16 rounding throws NonFiniteError.
void kv_entry(const FusedQnormRopeKvInsertArgs& a, int64_t t, int64_t position, const float* cs,
              bool check, uint8_t* data, uint8_t* scales) {
  auto verify = [&](const char* quantity, int64_t channel, float v) {
    if (check && !std::isfinite(v)) fail_computed(kInsertOp, t, position, quantity, channel, v);
  };
  float b[kMlaDim];
  widen_bf16(a.kv.ptr<const uint16_t>() + t * kMlaDim, kMlaDim, b);  // no normalisation
  for (int i = 0; i < 32; ++i) {
    float* pair = b + kMlaNope + 2 * i;
    rope_pair(pair[0], pair[1], cs[i], cs[32 + i], &pair[0], &pair[1]);
  }
  for (int k = 0; k < kMlaRope; ++k) verify("rotated kv channel", kMlaNope + k, b[kMlaNope + k]);
  // b = to_bf16(x), widened: the NoPE dims are bf16 already; the RoPE dims are stored as bf16.
  for (int k = 0; k < kMlaRope; ++k) {
    const uint16_t h = to_bf16(b[kMlaNope + k]);
    std::memcpy(data + kMlaNope + 2 * k, &h, 2);  // little-endian host
    b[kMlaNope + k] = bf16_to_f32(h);
  }
  for (int k = 0; k < kMlaRope; ++k)
    verify("bf16 rotated kv channel", kMlaNope + k, b[kMlaNope + k]);
  for (int q = 0; q < kMlaTiles; ++q)
    scales[q] = quantise_tile(b + q * kMlaTile, a.scale_clamp, a.fp8_subnormals,
                              data + q * kMlaTile);
  scales[kMlaTiles] = 0x00;  // pad byte
}

}  // namespace

void sparse_mla_attention(const SparseMlaAttentionArgs& a, const RunContext&) {
  if (a.out.empty()) return;  // bad-input.md §1.5: no work, whatever the other extents
  const MlaCache window(a.window_cache, a.window_block_size);
  const MlaCache compressed(a.compressed_cache, a.compressed_block_size);
  const uint16_t* q = a.q.ptr<const uint16_t>();
  const float* sink = a.attn_sink.present() ? a.attn_sink.ptr<const float>() : nullptr;
  uint16_t* out = a.out.ptr<uint16_t>();
  float* lse = a.lse.present() ? a.lse.ptr<float>() : nullptr;
  ColumnSet sets[2];
  for (int64_t t = 0; t < a.T; ++t) {
    // §2.2: the window columns, then the compressed columns.
    gather_set(a.window_slots, t, window, a.nope_decode, sets[0]);
    gather_set(a.compressed_slots, t, compressed, a.nope_decode, sets[1]);
    for (int64_t h = 0; h < a.H; ++h) {
      float qf[kMlaDim];  // §2.3: q widened to fp32
      widen_bf16(q + t * a.q.stride(0) + h * kMlaDim, kMlaDim, qf);
      const float l = attend(a, qf, sets, sink ? sink[h] : 0.0f, sink != nullptr,
                             out + (t * a.H + h) * kMlaDim);
      if (lse) lse[t * a.H + h] = l;
    }
  }
}

void fused_qnorm_rope_kv_insert(const FusedQnormRopeKvInsertArgs& a, const RunContext& ctx) {
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  const float* table = a.cos_sin_cache.ptr<const float>();
  const int64_t Hpad = a.q_head_padded;
  // Scratch: q_out (heads >= Hq are +0) and the entries of the tokens with a valid slot.
  std::vector<uint16_t> q_out(static_cast<size_t>(a.T * Hpad * kMlaDim), 0);
  std::vector<uint8_t> entries(static_cast<size_t>(a.T_ins * kMlaEntryBytes));
  for (int64_t t = 0; t < a.T; ++t) {
    const float* cs = table + pos(t) * 64;  // table row positions[t]
    for (int64_t h = 0; h < a.Hq; ++h)
      query_head(a, t, h, pos(t), cs, ctx.check_finite, q_out.data() + (t * Hpad + h) * kMlaDim);
    if (t < a.T_ins && slot(t) >= 0) {
      uint8_t* entry = entries.data() + t * kMlaEntryBytes;
      kv_entry(a, t, pos(t), cs, ctx.check_finite, entry, entry + kMlaDataBytes);
    }
  }
  if (!q_out.empty())
    std::memcpy(a.q_out.ptr<uint16_t>(), q_out.data(), q_out.size() * sizeof(uint16_t));
  const MlaCacheOut cache(a.swa_cache, a.cache_block_size);
  for (int64_t t = 0; t < a.T_ins; ++t) {
    if (slot(t) < 0) continue;  // -1: skipped
    const uint8_t* entry = entries.data() + t * kMlaEntryBytes;
    std::memcpy(cache.data(slot(t)), entry, kMlaDataBytes);
    std::memcpy(cache.scales(slot(t)), entry + kMlaDataBytes, kMlaScaleBytes);
  }
}

// ---- inverse_gptj_rope_o_proj (attention.md §4) ----

void inverse_gptj_rope_o_proj(const InverseGptjRopeOProjArgs& a, const RunContext& ctx) {
  if (a.out.empty()) return;  // bad-input.md §1.5
  if (ctx.check_finite && a.check_in_write) check_inverse_rope_inputs(a, ctx.num_threads);  // (e)
  const IndexReader pos(a.positions);
  const uint16_t* o = a.o.ptr<const uint16_t>();
  const bool f16 = a.o.dtype() == DType::F16;
  const float* table = a.cos_sin_cache.ptr<const float>();
  const int64_t half = a.rope_dim / 2, n = a.D - a.rope_dim;
  std::vector<float> out(static_cast<size_t>(a.T * a.H * a.D));  // scratch: nothing written yet
  for (int64_t t = 0; t < a.T; ++t) {
    const float* cs = table + pos(t) * a.rope_dim;  // cos_i in column i, sin_i in half + i
    for (int64_t h = 0; h < a.H; ++h) {
      const uint16_t* x = o + (t * a.H + h) * a.D;
      float* y = out.data() + (t * a.H + h) * a.D;
      for (int64_t d = 0; d < a.D; ++d) y[d] = f16 ? f16_to_f32(x[d]) : bf16_to_f32(x[d]);  // exact
      // §4.2: each pair (e, o') = (x[n+2i], x[n+2i+1]) rotated by numerics.md §8.5 with s negated:
      // fma(e, c, RN(o'·s)), fma(o', c, RN(e·(−s))).
      for (int64_t i = 0; i < half; ++i) {
        float* pair = y + n + 2 * i;
        rope_pair(pair[0], pair[1], cs[i], -cs[half + i], &pair[0], &pair[1]);
      }
      if (!ctx.check_finite) continue;
      const std::string head = "head " + std::to_string(h) + " rotated channel";
      for (int64_t k = n; k < a.D; ++k)
        if (!std::isfinite(y[k])) fail_computed(kInverseRopeOp, t, pos(t), head.c_str(), k, y[k]);
    }
  }
  std::memcpy(a.out.ptr<float>(), out.data(), out.size() * sizeof(float));
}

}  // namespace dsv4cpu::detail::ref
