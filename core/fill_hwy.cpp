// core/fill.hpp, written once with Highway for every target of the library.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/fill_hwy.cpp"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/fill.hpp"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = value(i) for i in [0, n): vectors of value_v(first index) where they fit, streamed
// where `stream` and aligned (the head up to alignment one by one).
template <class T, class Scalar, class Vector>
HWY_INLINE void Fill(T* HWY_RESTRICT out, int64_t n, bool stream, const Scalar& value,
                     const Vector& value_v) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (stream) {
    for (; i < n && reinterpret_cast<uintptr_t>(out + i) % (N * sizeof(T)) != 0; ++i)
      out[i] = value(i);
    for (; i + N <= n; i += N) hn::Stream(value_v(d, i), d, out + i);
  }
  for (; i + N <= n; i += N) hn::StoreU(value_v(d, i), d, out + i);
  for (; i < n; ++i) out[i] = value(i);
}

// (hn::Iota builds its vector in memory: it is made once, then offset.)
void Iota64(int64_t* out, int64_t n, int64_t base) {
  const auto iota = hn::Iota(hn::ScalableTag<int64_t>(), base);
  Fill(
      out, n, false, [&](int64_t i) { return base + i; },
      [&](auto d, int64_t i) { return hn::Add(iota, hn::Set(d, i)); });
}

void CopyThenMinusOne(int64_t* out, const int64_t* src, int64_t n, int64_t W, bool stream) {
  Fill(
      out, n, stream, [&](int64_t i) { return src[i]; },
      [&](auto d, int64_t i) { return hn::LoadU(d, src + i); });
  Fill(
      out + n, W - n, stream, [](int64_t) { return int64_t{-1}; },
      [](auto d, int64_t) { return hn::Set(d, int64_t{-1}); });
  if (stream) hwy::FlushStream();
}

void IotaThenMinusOne(int32_t* out, int64_t n, int64_t W, bool stream) {
  const auto iota = hn::Iota(hn::ScalableTag<int32_t>(), 0);
  Fill(
      out, n, stream, [](int64_t i) { return static_cast<int32_t>(i); },
      [&](auto d, int64_t i) { return hn::Add(iota, hn::Set(d, static_cast<int32_t>(i))); });
  Fill(
      out + n, W - n, stream, [](int64_t) { return int32_t{-1}; },
      [](auto d, int64_t) { return hn::Set(d, int32_t{-1}); });
  if (stream) hwy::FlushStream();
}

}  // namespace dsv4cpu::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dsv4cpu::detail {

HWY_EXPORT(Iota64);
HWY_EXPORT(CopyThenMinusOne);
HWY_EXPORT(IotaThenMinusOne);

void iota64(int64_t* out, int64_t n, int64_t base) { HWY_DYNAMIC_DISPATCH(Iota64)(out, n, base); }

void copy_then_minus_one(int64_t* out, const int64_t* src, int64_t n, int64_t W, bool stream) {
  HWY_DYNAMIC_DISPATCH(CopyThenMinusOne)(out, src, n, W, stream);
}

void iota_then_minus_one(int32_t* out, int64_t n, int64_t W, bool stream) {
  HWY_DYNAMIC_DISPATCH(IotaThenMinusOne)(out, n, W, stream);
}

}  // namespace dsv4cpu::detail
#endif  // HWY_ONCE
