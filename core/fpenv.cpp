// numerics.md §9: round-to-nearest-even, FTZ and DAZ off, for the scope of an operation.
#include <xmmintrin.h>

#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu {

namespace {
constexpr unsigned kFtz = 0x8000u, kDaz = 0x0040u, kRoundingMask = 0x6000u;
}

// The control word is written only when it changes (a write costs a pipeline drain); the
// destructor restores the caller's word, status flags included.
FpEnvGuard::FpEnvGuard() noexcept : saved_(_mm_getcsr()) {
  const unsigned wanted = saved_ & ~(kFtz | kDaz | kRoundingMask);
  if (wanted != saved_) _mm_setcsr(wanted);
}

FpEnvGuard::~FpEnvGuard() {
  if (_mm_getcsr() != saved_) _mm_setcsr(saved_);
}

}  // namespace dsv4cpu
