// The oracle of sparse_mla_attention's float results (attention.md §2): the entries dequantised in
// binary64 from the op's inputs (§2.4, without the library's decoders), the tolerance of
// numerics.md §11.8 and the checks built on it, and the exact attention in binary64.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/tensor.hpp"
#include "testing/contracts.hpp"

namespace dsv4cpu::testing {

// The inputs of one sparse_mla_attention call (already validated by the library or the fixture);
// attn_sink may be absent.
struct AttentionInputs {
  TensorView q, window_cache;
  int64_t window_block_size;
  TensorView window_slots, compressed_cache;
  int64_t compressed_block_size;
  TensorView compressed_slots, attn_sink;
  float scale;
  NopeDecode nope_decode;
};

// attention.md §2.4 in binary64 for entry `slot` of a fp8_ds_mla cache with P entries per page
// (compressor.md §6.3): the 512 values of K = V. An fp32 overflow (scale bytes near 255) gives ±inf
// as in fp32.
void decode_entry_f64(const TensorView& cache, int64_t P, int64_t slot, NopeDecode mode,
                      double* out);

// The valid rows of token t: the window columns then the compressed columns (attention.md §2.2),
// each row 512 doubles.
struct TokenRows {
  std::vector<double> rows;
  size_t size() const { return rows.size() / 512; }
  const double* row(size_t i) const { return rows.data() + i * 512; }
};
TokenRows token_rows(const AttentionInputs& in, int64_t t);

// The terms of numerics.md §11.8: M per token, δ per token and head, n = Nw + Nc, and whether the
// token has no valid entry (its rows must be exactly +0 with lse = +inf).
struct AttentionBound {
  int64_t T = 0, H = 0, n = 0;
  std::vector<double> M, delta;  // [T], [T·H]
  std::vector<bool> empty;       // [T]
  double out_bound(int64_t t, int64_t h, double ref) const;
  double lse_bound(int64_t t, int64_t h, double ref) const;
};
AttentionBound attention_bound(const AttentionInputs& in);

// §11.8 for out (bf16 [T, H, 512]) against the reference's: rows of a token without a valid entry
// and rows holding a NaN on either side bit for bit, the others within the bound. "" when accepted,
// else the first violation; `worst` receives the largest |o − o_ref| / bound.
std::string attention_out_violation(const AttentionBound& b, const uint16_t* got,
                                    const uint16_t* ref, double* worst = nullptr);
// §11.8 for lse (F32 [T, H]) against the reference's: +inf and NaN exactly.
std::string attention_lse_violation(const AttentionBound& b, const float* got, const float* ref,
                                    double* worst = nullptr);
// The two checks as verdicts for a BF16 `out` or an F32 `lse` (by dtype): "exact" for identical
// bytes, else the worst |Δ| / bound.
Verdict compare_attention(const AttentionBound& b, const std::string& name, const ArrayRef& got,
                          const ArrayRef& want);

// attention.md §2 in binary64 with the exact softmax: per token and head, over every valid entry
// (no blocks, unrounded probabilities), the sink as one more logit with a zero value vector. out
// rounded to bf16 once, lse to fp32; NaN rows where a score is not finite in fp32 terms, +0 rows
// and lse = +inf without a valid entry.
struct ExactAttention {
  std::vector<uint16_t> out;  // [T, H, 512]
  std::vector<float> lse;     // [T, H]
};
ExactAttention exact_attention(const AttentionInputs& in);

}  // namespace dsv4cpu::testing
