// Number formats, rounding and the library exponential (numerics.md §1-§9).
// Everything here is scalar, exact to the bit as the spec writes it, and shared by every variant.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "dsv4cpu/export.hpp"

namespace dsv4cpu {

inline uint32_t f32_bits(float x) noexcept {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline float f32_from_bits(uint32_t b) noexcept {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// §2: fp32 -> bf16, round to nearest even, no flush-to-zero; NaN -> 0x7FC0.
inline uint16_t to_bf16(float x) noexcept {
  if (std::isnan(x)) return 0x7FC0;
  const uint32_t b = f32_bits(x);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
inline float bf16_to_f32(uint16_t h) noexcept { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
// IEEE binary16 -> fp32, exact (subnormals become normal fp32 numbers; NaN payloads kept).
inline float f16_to_f32(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, E = (h >> 10) & 0x1Fu,
                 m = h & 0x3FFu;
  if (E == 0) return f32_from_bits(sign | f32_bits(static_cast<float>(m) * 0x1p-24f));
  return f32_from_bits(sign | (E == 31 ? 0x7F800000u : (E + 112) << 23) | m << 13);
}
// to_bf16 then widened back to fp32.
inline float round_bf16(float x) noexcept { return bf16_to_f32(to_bf16(x)); }

// §3.1: exact e4m3fn decode; 0x7F and 0xFF are NaN.
inline float fp8_e4m3_decode(uint8_t c) noexcept {
  const uint32_t s = c >> 7, E = (c >> 3) & 0xFu, m = c & 7u;
  float v;
  if (E == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  if (E == 0) {
    v = static_cast<float>(m) * 0x1p-9f;
  } else {
    v = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, static_cast<int>(E) - 7);
  }
  return s ? -v : v;
}

// §3.2: exact RNE encode with subnormals and saturation at 448 (e4m3_sat).
inline uint8_t e4m3_sat(float y) noexcept {
  const uint8_t s = static_cast<uint8_t>((f32_bits(y) >> 24) & 0x80u);
  if (std::isnan(y)) return static_cast<uint8_t>(s | 0x7F);
  float a = std::fabs(y);
  if (a > 448.0f) a = 448.0f;
  if (a < 0x1p-6f) {
    const float q = std::nearbyint(a * 0x1p9f);  // exact product; ties to even (FE_TONEAREST)
    return static_cast<uint8_t>(s | static_cast<uint8_t>(q));
  }
  const uint32_t b = f32_bits(a);
  int k = static_cast<int>(b >> 23) - 127;
  const uint32_t frac = b & 0x7FFFFFu;  // f = frac / 2^23
  // M = round_half_even(f * 8): keep the top 3 bits of the 23-bit fraction, round on the rest.
  uint32_t M = frac >> 20;
  const uint32_t rest = frac & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (M & 1u))) ++M;
  if (M == 8) {
    M = 0;
    ++k;
  }
  return static_cast<uint8_t>(s | static_cast<uint8_t>((k + 7) << 3) | static_cast<uint8_t>(M));
}

// §4: least integer e with 2^e >= x, for a positive normal fp32 x.
inline int ceil_log2(float x) noexcept {
  const uint32_t b = f32_bits(x);
  return static_cast<int>((b >> 23) & 0xFFu) - 127 + ((b & 0x7FFFFFu) != 0 ? 1 : 0);
}
// 2^e as fp32 built from bits, for e in the normal range [-126, 127].
inline float pow2f(int e) noexcept { return f32_from_bits(static_cast<uint32_t>(e + 127) << 23); }

inline constexpr uint32_t kScaleEpsBits = 0x38D1B717u;  // RN(1e-4)

enum class ScaleClamp : uint8_t { cpu, gpu };

// §4: the scale exponent e of a quantisation block with amax = max |x_i|.
// cpu = clamp-scale: sc = max(RN(amax / 448), eps); gpu = clamp-amax: sc = RN(max(amax, eps) / 448).
inline int scale_exponent(float amax, ScaleClamp rule) noexcept {
  const float eps = f32_from_bits(kScaleEpsBits);
  float sc;
  if (rule == ScaleClamp::cpu) {
    sc = amax / 448.0f;
    if (sc < eps) sc = eps;
  } else {
    sc = (amax < eps ? eps : amax) / 448.0f;
  }
  return ceil_log2(sc);
}

// §4: UE8M0 byte -> 2^(b - 127); 255 is NaN; byte 0 is the subnormal 2^-127.
inline float ue8m0_decode(uint8_t b) noexcept {
  if (b == 255) return std::numeric_limits<float>::quiet_NaN();
  if (b == 0) return 0x1p-127f;
  return f32_from_bits(static_cast<uint32_t>(b) << 23);
}

// §5: constants of exp_lib.
namespace exp_consts {
inline constexpr uint32_t kL2E = 0x3FB8AA3Bu, kCHi = 0x3F317200u, kCLo = 0x35BFBE8Eu,
                          kP6 = 0x39502BDAu, kP5 = 0x3AB696C9u, kP4 = 0x3C0888A6u,
                          kP3 = 0x3D2AAA7Au, kP2 = 0x3E2AAAABu;
inline constexpr uint32_t kOverflowBits = 0x42B17218u;  // 0x1.62e430p+6 = 88.72283935546875
}  // namespace exp_consts

// §5: the library's single exponential (scalar form; the 16-lane form does the same operations).
inline float exp_lib(float x) noexcept {
  using namespace exp_consts;
  if (std::isnan(x)) return f32_from_bits(0x7FC00000u);
  if (x >= f32_from_bits(kOverflowBits)) return f32_from_bits(0x7F800000u);
  if (x < -104.0f) return 0.0f;
  const float k = std::nearbyint(x * f32_from_bits(kL2E));
  float r = std::fma(k, -f32_from_bits(kCHi), x);
  r = std::fma(k, -f32_from_bits(kCLo), r);
  float u = f32_from_bits(kP6);
  u = std::fma(u, r, f32_from_bits(kP5));
  u = std::fma(u, r, f32_from_bits(kP4));
  u = std::fma(u, r, f32_from_bits(kP3));
  u = std::fma(u, r, f32_from_bits(kP2));
  u = std::fma(u, r, 0.5f);
  u = std::fma(r * r, u, r);
  u = 1.0f + u;
  const int ki = static_cast<int>(k);
  const int k1 = (ki >= 0) ? ki / 2 : -((-ki + 1) / 2);  // floor(k / 2)
  const int k2 = ki - k1;
  return (u * pow2f(k1)) * pow2f(k2);
}

// §8.1: the fixed 16-lane reduction tree.
inline float reduce16(const float* L) noexcept {
  float a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = L[i] + L[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  for (int i = 0; i < 2; ++i) c[i] = b[i] + b[i + 2];
  return c[0] + c[1];
}

// §8.2: sum of squares with 16 fma lanes; n a multiple of 16.
inline float sum_squares16(const float* x, int n) noexcept {
  float L[16] = {};
  for (int k = 0; k < n / 16; ++k)
    for (int j = 0; j < 16; ++j) L[j] = std::fma(x[16 * k + j], x[16 * k + j], L[j]);
  return reduce16(L);
}

// §8.3: inv = RN(1 / RN(sqrt(RN(RN(ss / n) + eps_f)))); `t` receives the RMS value before sqrt.
inline float rms_inv(float ss, int n, float eps_f, float* t_out = nullptr) noexcept {
  float t = ss / static_cast<float>(n);
  t = t + eps_f;
  if (t_out) *t_out = t;
  return 1.0f / std::sqrt(t);
}

// §8.5: the library's only rotation formula, one (even, odd) pair.
inline void rope_pair(float e, float o, float c, float s, float* e_out, float* o_out) noexcept {
  *e_out = std::fma(e, c, o * (-s));
  *o_out = std::fma(o, c, e * s);
}

// §9: sets the SSE/AVX control word to round-to-nearest-even with FTZ and DAZ off for the scope
// of an operation, and restores the caller's word on exit (exceptions included).
class DSV4CPU_API FpEnvGuard {
 public:
  FpEnvGuard() noexcept;
  ~FpEnvGuard();
  FpEnvGuard(const FpEnvGuard&) = delete;
  FpEnvGuard& operator=(const FpEnvGuard&) = delete;

 private:
  unsigned saved_ = 0;
};

}  // namespace dsv4cpu
