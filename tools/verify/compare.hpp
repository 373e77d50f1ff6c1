// Comparison contracts of numerics.md §11 between a library result and a fixture's expected data.
// Every function returns a verdict with a short text: the worst difference found when it passes,
// the first offending element when it fails.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::verify {

struct Verdict {
  bool pass = true;
  std::string detail;
};

// The `compare` metadata override (fixtures.md): "exact" or "key=value,...". Unset keys keep the
// op's default contract.
struct Tolerance {
  bool exact = false;
  int fp8_step = 1;     // §11.2 distance allowed between codes of blocks with equal scales
  int bf16_ulp = 1;     // §11.3 distance allowed between bf16 values (RoPE part)
  int scale_step = 1;   // §11.4: UE8M0 bytes this far apart (fp32 scales this many factors of 2)
  double rtol = 1e-5;   // F32 outputs compared by tolerance (weights_out)
  double atol = 0;
  std::optional<double> bound_factor;  // multiplies B of §11.6 (default 2 logits, 1 band rule)
};
// Throws std::invalid_argument naming the bad key or value.
Tolerance parse_compare(const std::string& text);

// §11.2, §11.3: sign-magnitude order of fp8 and bf16 patterns.
int ord8(uint8_t c) noexcept;
int ord16(uint16_t h) noexcept;
inline constexpr int kNaNMismatch = 1 << 30;
// Step distance; two NaN bf16 values match (0), a NaN fp8 code matches only itself; a NaN against
// a number is kNaNMismatch.
int fp8_steps(uint8_t a, uint8_t b) noexcept;
int bf16_ulps(uint16_t a, uint16_t b) noexcept;

// An array of the fixture (expected) or of the library (got), C-contiguous.
struct ArrayRef {
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data;
  int64_t numel() const noexcept;
};

// "" when dtype and shape agree, else the mismatch as text.
std::string layout_mismatch(const std::string& name, const ArrayRef& got, const ArrayRef& want);
// "[3, 5]" of flat element `i` of `shape`.
std::string index_text(const std::vector<int64_t>& shape, int64_t i);
// Element `i` as text: integers in decimal, floats shortest round-trip with their bits in hex.
std::string element_text(const ArrayRef& a, int64_t i);

// §11.1: equal bytes; F32 and BF16 NaNs match any NaN. dtype and shape must agree.
Verdict compare_exact(const std::string& name, const ArrayRef& got, const ArrayRef& want);
// fp8 codes within tol.fp8_step steps (§11.2).
Verdict compare_fp8_codes(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                          const Tolerance& tol);
// F32: |got - want| <= atol + rtol * |want|; NaN matches NaN, infinities must be equal.
Verdict compare_f32_rel(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                        const Tolerance& tol);

// §11.5 on one quantisation block of `n` codes with scales sa (got) and sb (want), both positive
// powers of two (or NaN). `steps` and `coarse` receive the worst code distance (equal scales) and
// the worst |va - vb| / coarse step (scales apart); `why` the first failure.
bool quant_block_ok(const uint8_t* a, const uint8_t* b, int n, double sa, double sb,
                    const Tolerance& tol, int* steps, double* coarse, std::string* why);

// Paged compressed caches written by the compress ops (compressor.md §6.3 and §7).
enum class EntryLayout : uint8_t { fp8_ds_mla, indexer_k };
// `kv_cache` U8 [pages, page_bytes] (got and want), `P` entries per page, `slots` the entries the
// op writes. Bytes outside those entries must be equal; entries follow §11.5 (NoPE tiles or the
// indexer block), RoPE bf16 within tol.bf16_ulp, pad byte exact.
Verdict compare_compressed_cache(const std::string& name, const ArrayRef& got,
                                 const ArrayRef& want, EntryLayout layout, int64_t P,
                                 const std::vector<int64_t>& slots, const Tolerance& tol);

// The exact logits of numerics.md §11.6 computed in binary64 from the inputs of
// fp8_paged_mqa_logits (or of indexer_topk): one query row sees keys 0 .. L-1 of a paged indexer
// K cache through its page list.
struct LogitsRow {
  const uint8_t* q;   // [H, 128] fp8 codes
  const float* w;     // [H] head weights
  int64_t L;          // visible keys
  std::vector<int64_t> pages;  // page of key j is pages[j / P]
};
struct KeyCache {
  const uint8_t* base;  // page p starts at base + p * page_stride
  int64_t page_stride, P, num_pages;
  int64_t H;
};
// X (NaN when a key code is NaN) and the bound B of §11.6 for key j of `row`; false when the key
// lies outside the cache (its page-table entry is missing or out of range).
bool exact_logit(const KeyCache& kc, const LogitsRow& row, int64_t j, double* X, double* B);

// §11.6: for each row, |got - want| <= factor * B for j < L; -inf for j >= L in both; NaN and
// infinities exactly where expected. `got`, `want` are F32 [rows, S].
Verdict compare_logits(const KeyCache& kc, const std::vector<LogitsRow>& rows, const float* got,
                       const float* want, int64_t S, double factor);

// §11.7 for one selection row (width >= 512, columns 0..511 checked) of length L > 512 with
// exact scores X and bounds B (B already multiplied by the factor). Returns "" when accepted.
std::string band_rule_violation(const int32_t* sel, int64_t L, const std::vector<double>& X,
                                const std::vector<double>& B, bool canonical);

}  // namespace dsv4cpu::verify
