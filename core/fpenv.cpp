// numerics.md §9: round-to-nearest-even, FTZ and DAZ off, for the scope of an operation.
#include <xmmintrin.h>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu {

namespace {
constexpr unsigned kFtz = 0x8000u, kDaz = 0x0040u, kRoundingMask = 0x6000u;
}

FpEnvGuard::FpEnvGuard() noexcept : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ & ~(kFtz | kDaz | kRoundingMask));
}

FpEnvGuard::~FpEnvGuard() { _mm_setcsr(saved_); }

}  // namespace dsv4cpu
