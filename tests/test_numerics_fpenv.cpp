// numerics.md §9: FpEnvGuard sets round-to-nearest-even with FTZ and DAZ off for its scope and
// restores the caller's SSE control word on exit, also when an exception propagates.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cstdint>
#include <stdexcept>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu {
namespace {

// MXCSR fields (Intel SDM vol. 1, §10.2.3).
constexpr unsigned kFtz = 0x8000u, kDaz = 0x0040u, kRoundingMask = 0x6000u,
                   kRoundTowardZero = 0x6000u, kStatusFlags = 0x003Fu;

// The arithmetic goes through volatile memory so that the compiler neither folds it (it would
// assume round-to-nearest) nor moves it across the control-word changes.
float mul(float a, float b) {
  volatile float va = a, vb = b;
  volatile float r = va * vb;
  return r;
}
float add(float a, float b) {
  volatile float va = a, vb = b;
  volatile float r = va + vb;
  return r;
}

struct EnvProbe {
  float subnormal_product;  // 2^-100 · 2^-30 = 2^-130: 0 under FTZ
  float subnormal_input;    // 2^-140 · 2: 0 under DAZ
  float rounded_up;         // 1 + 0.75 ulp: 1 + 2^-23 under RNE, 1 under round-toward-zero
  float rounded_down;       // −1 − 0.75 ulp
};
EnvProbe probe() {
  return {mul(0x1p-100f, 0x1p-30f), mul(0x1p-140f, 2.0f), add(1.0f, 0x1.8p-24f),
          add(-1.0f, -0x1.8p-24f)};
}
void expect_ieee_rne(const EnvProbe& p) {
  EXPECT_EQ(p.subnormal_product, 0x1p-130f);
  EXPECT_EQ(p.subnormal_input, 0x1p-139f);
  EXPECT_EQ(p.rounded_up, 1.0f + 0x1p-23f);
  EXPECT_EQ(p.rounded_down, -1.0f - 0x1p-23f);
}
void expect_spec_control_bits() {
  EXPECT_EQ(_mm_getcsr() & (kFtz | kDaz | kRoundingMask), 0u) << std::hex << _mm_getcsr();
}

class FpEnvGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = _mm_getcsr();
    hostile_ = (original_ & ~(kRoundingMask | kStatusFlags)) | kFtz | kDaz | kRoundTowardZero;
  }
  void TearDown() override { _mm_setcsr(original_); }
  // The caller's control bits (status flags excluded: operations may raise them).
  static unsigned control() { return _mm_getcsr() & ~kStatusFlags; }

  unsigned original_ = 0, hostile_ = 0;
};

TEST_F(FpEnvGuardTest, HostileCallerWordIsEffective) {
  // Checks the probe itself: under FTZ, DAZ and round-toward-zero every probe value changes.
  _mm_setcsr(hostile_);
  const EnvProbe p = probe();
  _mm_setcsr(original_);
  EXPECT_EQ(p.subnormal_product, 0.0f);
  EXPECT_EQ(p.subnormal_input, 0.0f);
  EXPECT_EQ(p.rounded_up, 1.0f);
  EXPECT_EQ(p.rounded_down, -1.0f);
}

TEST_F(FpEnvGuardTest, SetsRoundToNearestWithoutFlushAndRestores) {
  _mm_setcsr(hostile_);
  EnvProbe inside{};
  {
    FpEnvGuard guard;
    expect_spec_control_bits();
    inside = probe();
  }
  const unsigned after = control();
  const EnvProbe outside = probe();
  _mm_setcsr(original_);
  expect_ieee_rne(inside);
  EXPECT_EQ(after, hostile_ & ~kStatusFlags) << std::hex << after;
  EXPECT_EQ(outside.subnormal_product, 0.0f);  // the caller's FTZ is back
  EXPECT_EQ(outside.rounded_up, 1.0f);         // and its rounding mode
}

TEST_F(FpEnvGuardTest, NumericsHelpersInsideGuardIgnoreCallerMode) {
  // e4m3_sat rounds with nearbyint and rms_inv with sqrt and /, which follow MXCSR: under the
  // guard the spec's values hold whatever the caller set. Volatile inputs and outputs keep the
  // calls inside the scope.
  volatile float in[5] = {0x1p-10f, 0x1.8p-10f, 0x1.8p-9f, 0.3f, 512.0f};
  volatile uint8_t code[4] = {};
  volatile float inv = 0.0f;
  _mm_setcsr(hostile_);
  {
    FpEnvGuard guard;
    for (int i = 0; i < 4; ++i) code[i] = e4m3_sat(in[i]);
    inv = rms_inv(in[4], 512, 1e-6f);
  }
  _mm_setcsr(original_);
  EXPECT_EQ(code[0], 0x00);  // 2^-10, tie to even
  EXPECT_EQ(code[1], 0x01);  // 1.5 · 2^-10 (round toward zero would give 0x00)
  EXPECT_EQ(code[2], 0x02);  // 1.5 · 2^-9, tie to even (toward zero: 0x01)
  EXPECT_EQ(code[3], 0x2A);  // 0.3 -> 0.3125
  // attention.md §3.5: inv = 0x3F7FFFF8 (toward zero: sqrt 0x3F800003, inv 0x3F7FFFFA).
  EXPECT_EQ(f32_bits(inv), 0x3F7FFFF8u);
}

TEST_F(FpEnvGuardTest, RestoresWhenAnExceptionPropagates) {
  _mm_setcsr(hostile_);
  unsigned inside = 0;
  bool caught = false;
  try {
    FpEnvGuard guard;
    inside = _mm_getcsr();
    throw std::runtime_error("operation failed");
  } catch (const std::runtime_error&) {
    caught = true;
  }
  const unsigned after = control();
  _mm_setcsr(original_);
  EXPECT_TRUE(caught);
  EXPECT_EQ(inside & (kFtz | kDaz | kRoundingMask), 0u) << std::hex << inside;
  EXPECT_EQ(after, hostile_ & ~kStatusFlags) << std::hex << after;
}

TEST_F(FpEnvGuardTest, NestedGuardsRestoreInOrder) {
  _mm_setcsr(hostile_);
  unsigned between = 0;
  {
    FpEnvGuard outer;
    { FpEnvGuard inner; }
    between = _mm_getcsr();
  }
  const unsigned after = control();
  _mm_setcsr(original_);
  EXPECT_EQ(between & (kFtz | kDaz | kRoundingMask), 0u) << std::hex << between;
  EXPECT_EQ(after, hostile_ & ~kStatusFlags) << std::hex << after;
}

TEST_F(FpEnvGuardTest, EachRoundingModeAndFlagIsRestored) {
  // Every combination of rounding mode, FTZ and DAZ comes back unchanged.
  for (unsigned rc = 0; rc < 4; ++rc)
    for (unsigned flush : {0u, kFtz, kDaz, kFtz | kDaz}) {
      const unsigned word =
          (original_ & ~(kRoundingMask | kFtz | kDaz | kStatusFlags)) | rc << 13 | flush;
      _mm_setcsr(word);
      unsigned inside = 0;
      {
        FpEnvGuard guard;
        inside = _mm_getcsr();
      }
      const unsigned after = control();
      _mm_setcsr(original_);
      EXPECT_EQ(inside & (kFtz | kDaz | kRoundingMask), 0u) << std::hex << word;
      EXPECT_EQ(after, word) << std::hex << word;
    }
}

TEST_F(FpEnvGuardTest, DefaultEnvironmentIsUnchanged) {
  // The default word already is the spec's: the guard changes nothing visible.
  expect_spec_control_bits();
  {
    FpEnvGuard guard;
    expect_spec_control_bits();
    expect_ieee_rne(probe());
  }
  EXPECT_EQ(control(), original_ & ~kStatusFlags);
}

}  // namespace
}  // namespace dsv4cpu
