// The one oracle of the indexer's float results: the exact logits of numerics.md §11.6 in
// binary64, and the checks built on them: a computed row within the bound B (§11.6), a selection
// within the band rule (§11.7), and two rows of logits within 2B of each other (fixtures).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsv4cpu/tensor.hpp"
#include "testing/contracts.hpp"

namespace dsv4cpu::testing {

// The logits of one query row against its keys 0 .. L-1: the exact value X (NaN key codes count
// as 0), the bound B of §11.6, and whether the logit is NaN (a key with a NaN code, H >= 1; with
// H = 0 every logit is +0, indexer.md §4.2). Every q·k product and inner sum is exact in binary64
// (multiples of 2^-18 below 2^25).
struct ExactLogits {
  std::vector<double> X, B;
  std::vector<bool> nan;
  int64_t heads = 0;
  int64_t size() const { return static_cast<int64_t>(X.size()); }
};

// Keys given by their 128 fp8 codes and raw fp32 scales; q: H·128 codes, w: H weights.
ExactLogits exact_logits(const uint8_t* q, const float* w, int64_t H,
                         const std::vector<const uint8_t*>& keys, const std::vector<float>& scales);
// Keys 0 .. L-1 of a paged indexer K cache (U8 [num_pages, page_bytes], indexer.md §3): key j is
// entry j % P of page pages[j / P]. Throws std::out_of_range when a page it needs is missing from
// `pages` or outside the cache.
ExactLogits exact_logits(const uint8_t* q, const float* w, int64_t H, const TensorView& kv_cache,
                         int64_t P, const std::vector<int64_t>& pages, int64_t L);

// §11.6 for one computed row of S logits: |v - X| <= B for j < L (+0 exactly when H = 0), NaN
// exactly where the logit is NaN, -inf from L to S. "" when it holds, else the first offending column.
std::string logits_violation(const float* row, int64_t S, const ExactLogits& ex);

// §11.7 for K selected indices `sel` of a row of L = ex.size() > K keys, with the bound
// factor · B: every selected key's upper = X + factor·B is >= every unselected key's
// lower = X - factor·B (a NaN logit counts as -inf with bound 0, NaN keys tie by index: a selected
// one ranks below every unselected one of lower index), no index twice or out of range;
// `canonical` adds the order rule (each key's upper >= the next one's lower, NaN keys by index);
// without it (vllm) a row holding a NaN logit is checked for distinct in-range entries only.
// "" when accepted, else why.
std::string band_rule_violation(const int32_t* sel, int64_t K, const ExactLogits& ex, double factor,
                                bool canonical);

// Two computations of the same logits (F32 [rows, S], e.g. the library's and a fixture's) within
// factor · B of each other for j < L (the exact row says L), -inf in both from L on, NaN in both
// exactly at the NaN keys, infinities in the same places.
Verdict compare_logits(const std::vector<ExactLogits>& rows, const float* got, const float* want,
                       int64_t S, double factor);

}  // namespace dsv4cpu::testing
