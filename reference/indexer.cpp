// Reference lightning indexer (indexer.md §2, §4, §7). Scalar fp32, the spec's orders verbatim.
#include "args/indexer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check_finite.hpp"
#include "core/errors.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::detail::ref {

namespace {

constexpr int64_t D = kIndexerHeadDim;

// indexer.md §2 steps 2-3 for one head x[0..127] with table row cs: fills z (the rotated last 64
// dims, each rounded to bf16) and returns the clamp-amax exponent e (numerics.md §4).
int rope_round_exponent(const float* x, const float* cs, float* z) {
  for (int i = 0; i < 32; ++i) {
    float e, o;
    rope_pair(x[64 + 2 * i], x[65 + 2 * i], cs[i], cs[32 + i], &e, &o);  // numerics.md §8.5
    z[2 * i] = round_bf16(e);
    z[2 * i + 1] = round_bf16(o);
  }
  float amax = 0.0f;
  for (int d = 0; d < 64; ++d) amax = std::max(amax, std::fabs(x[d]));
  for (int k = 0; k < 64; ++k) amax = std::max(amax, std::fabs(z[k]));
  return scale_exponent(amax, ScaleClamp::gpu);
}

// bad-input.md §1.4 (f): NonFiniteError for the first non-finite computed weight (token-major)
// of the [T, H] scratch weights_out.
void check_weights_out(const FusedIndexerQRopeQuantArgs& a, const float* weights_out) {
  const int64_t n = a.T * a.H, i = first_non_finite(weights_out, n);
  if (i < n)
    fail_computed("fused_indexer_q_rope_quant", i / a.H, IndexReader(a.positions)(i / a.H),
                  "weights_out head", i % a.H, weights_out[i],
                  ", from weights" + format_index({i / a.H, i % a.H}) + " = " +
                      format_f32(a.weights.ptr<const float>()[i]) +
                      " x the query scale x softmax_scale x head_scale");
}

// indexer.md §4.2: relu(x) = x if x > 0, +0 if x <= 0 (−0 included), NaN if x is NaN.
float relu(float x) { return (x > 0.0f || std::isnan(x)) ? x : 0.0f; }

}  // namespace

// indexer.md §2
void fused_indexer_q_rope_quant(const FusedIndexerQRopeQuantArgs& a, const RunContext& ctx) {
  const IndexReader positions(a.positions);
  const float* q = a.q.ptr<const float>();
  const float* w = a.weights.ptr<const float>();
  const float* table = a.cos_sin_cache.ptr<const float>();
  const int64_t heads = a.T * a.H;
  float z[64];
  // Step 5 into scratch, then the computed-value check, before any output byte is written.
  std::vector<float> w_out(static_cast<size_t>(heads));
  for (int64_t th = 0; th < heads; ++th) {
    const int e = rope_round_exponent(q + th * D, table + positions(th / a.H) * 64, z);
    w_out[static_cast<size_t>(th)] = ((w[th] * pow2f(e)) * a.softmax_scale) * a.head_scale;
  }
  if (ctx.check_finite) check_weights_out(a, w_out.data());
  uint8_t* codes = a.q_fp8.ptr<uint8_t>();
  for (int64_t th = 0; th < heads; ++th) {
    const float* x = q + th * D;
    const float inv = pow2f(-rope_round_exponent(x, table + positions(th / a.H) * 64, z));
    uint8_t* c = codes + th * D;
    for (int d = 0; d < 64; ++d) c[d] = e4m3_sat(x[d] * inv);       // step 4, NoPE as given
    for (int k = 0; k < 64; ++k) c[64 + k] = e4m3_sat(z[k] * inv);  // step 4, rotated dims
  }
  std::copy(w_out.begin(), w_out.end(), a.weights_out.ptr<float>());
}

// indexer.md §4.3
void mqa_logits_row(const uint8_t* q, const float* w, int64_t H, const IndexerKCache& kv,
                    const IndexReader& page_table, int64_t row, int64_t L, float* out) {
  std::vector<float> qd(static_cast<size_t>(H * D));
  for (int64_t i = 0; i < H * D; ++i) qd[static_cast<size_t>(i)] = fp8_e4m3_decode(q[i]);
  const int64_t P = kv.block_size();
  float k[D];
  for (int64_t j = 0; j < L; ++j) {
    const int64_t page = page_table(row, j / P), e = j % P;
    const uint8_t* codes = kv.codes(page, e);
    for (int64_t d = 0; d < D; ++d) k[d] = fp8_e4m3_decode(codes[d]);
    float acc = 0.0f;
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = qd.data() + h * D;
      float dot = 0.0f;
      for (int64_t d = 0; d < D; ++d) dot = std::fma(qh[d], k[d], dot);
      acc = std::fma(w[h], relu(dot), acc);
    }
    out[j] = acc * kv.scale(page, e);
  }
}

// indexer.md §4, §8: row ρ = b·next_n + j; −inf from L_{b,j} to max_seq_len.
void fp8_paged_mqa_logits(const Fp8PagedMqaLogitsArgs& a, const RunContext&) {
  const IndexReader seq_lens(a.seq_lens), page_table(a.page_table);
  const IndexerKCache kv(a.kv_cache, a.block_size);
  const uint8_t* q = a.q_fp8.ptr<const uint8_t>();
  const float* w = a.weights.ptr<const float>();
  float* logits = a.logits.ptr<float>();
  const int64_t S = a.max_seq_len;
  if (a.logits.empty()) return;  // bad-input.md §1.5: no work, whatever the other extents
  for (int64_t b = 0; b < a.B; ++b) {
    for (int64_t j = 0; j < a.next_n; ++j) {
      const int64_t rho = b * a.next_n + j, L = mqa_row_length(a, seq_lens, b, j);
      float* out = logits + rho * S;
      mqa_logits_row(q + rho * a.H * D, w + rho * a.H, a.H, kv, page_table, b, L, out);
      std::fill(out + L, out + S, -std::numeric_limits<float>::infinity());
    }
  }
}

// indexer.md §7.2: one row per token with its causal length; rows with L_t <= 512 (every row of
// a short-context step) are identity rows, the others the top-512 of that token's logits row.
void indexer_topk(const IndexerTopkArgs& a, const RunContext&) {
  const IndexReader qsl(a.query_start_loc), seq_lens(a.seq_lens), block_table(a.block_table);
  const IndexerKCache kv(a.kv_cache, a.block_size);
  const uint8_t* q = a.q_fp8.ptr<const uint8_t>();
  const float* w = a.weights.ptr<const float>();
  std::vector<float> scores;
  for (int64_t r = 0; r < a.R; ++r) {
    const int64_t q0 = qsl(r), q1 = qsl(r + 1);
    for (int64_t t = q0; t < q1; ++t) {
      const int64_t pos = seq_lens(r) - (q1 - q0) + (t - q0);
      const int64_t L = (pos + 1) / 4;
      int32_t* row = a.topk_indices.ptr<int32_t>() + t * a.topk_indices.stride(0);
      if (L <= kIndexerTopk) {
        identity_row(L, kIndexerTopk, row);
        continue;
      }
      scores.resize(static_cast<size_t>(L));
      mqa_logits_row(q + t * a.H * D, w + t * a.H, a.H, kv, block_table, r, L, scores.data());
      if (a.mode == TopkMode::canonical)
        topk_canonical_row(scores.data(), L, kIndexerTopk, row);
      else
        topk_vllm_row(scores.data(), L, kIndexerTopk, row);
    }
  }
}

}  // namespace dsv4cpu::detail::ref
