// The comparison contracts of numerics.md §11 between a computed result and an expected one:
// exact bytes (§11.1), fp8 code steps (§11.2), bf16 ulps (§11.3), scale bytes and the block rule
// (§11.4, §11.5), and fp32 by tolerance. Every function returns a verdict with a short text: the
// worst difference found when it passes, the first offending element when it fails. The paged
// caches (testing/cache_compare.hpp) and the logits and selections (testing/oracle.hpp) build on
// these.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::testing {

struct Verdict {
  bool pass = true;
  std::string detail;
};

// What a contract allows; fixtures override it with their `compare` metadata (fixtures.md).
struct Tolerance {
  bool exact = false;
  int fp8_step = 1;    // §11.2 distance allowed between codes of blocks with equal scales
  int bf16_ulp = 1;    // §11.3 distance allowed between bf16 values (RoPE part, compare_bf16)
  // `compare` names bf16_ulp: every BF16 array otherwise compared exactly is compared within
  // bf16_ulp too (docs/fixture-ops.md).
  bool bf16_arrays = false;
  int scale_step = 1;  // §11.4: UE8M0 bytes this far apart (fp32 scales this many factors of 2)
  double rtol = 1e-5;  // F32 outputs compared by tolerance (weights_out)
  double atol = 0;
  std::optional<double> bound_factor;  // multiplies B of §11.6 (default 2 logits, 1 band rule)
};
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

// §11.1: equal bytes; F32, BF16 and F16 NaNs match any NaN. dtype and shape must agree.
Verdict compare_exact(const std::string& name, const ArrayRef& got, const ArrayRef& want);
// BF16 values within tol.bf16_ulp ulps (§11.3): two NaNs match, a NaN never matches a number.
// Passing, the worst distance and how many elements are not exact.
Verdict compare_bf16(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                     const Tolerance& tol);
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

// ---- building blocks of the contracts ----

std::string fmt(const char* format, double v);  // one value through printf
std::string float_text(float v);                // shortest text that reads back as v
std::string hex(uint64_t v, int digits);        // "0x7F"
uint16_t load_u16(const uint8_t* p);            // little-endian
float load_f32(const uint8_t* p);
bool fp8_is_nan(uint8_t c);
bool bf16_is_nan(uint16_t h);
const std::array<double, 256>& fp8_table();  // every e4m3fn code decoded, exact in binary64
double pow2(int e);                          // 2^e in binary64

}  // namespace dsv4cpu::testing
