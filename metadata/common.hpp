// Integer helpers shared by the metadata validation and both variants (metadata.md).
#pragma once
#include <cstdint>

#include "core/check.hpp"
#include "dsv4cpu/metadata.hpp"

namespace dsv4cpu::detail {

// Compressed entries completed up to and including position p: (p + 1) / ratio, without the
// overflow of p + 1 at INT64_MAX.
inline int64_t completed_entries(int64_t p, int64_t ratio) {
  return p / ratio + (p % ratio == ratio - 1 ? 1 : 0);
}

// ceil(a / b) for a >= 0, b >= 1, without overflow.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// The request r with qsl[r] <= t < qsl[r + 1] (§2), for a validated qsl and 0 <= t < qsl[R];
// `qsl(i)` reads element i.
template <class Qsl>
int64_t request_of_token(const Qsl& qsl, int64_t R, int64_t t) {
  int64_t lo = 0, hi = R;  // invariant: qsl[lo] <= t < qsl[hi]
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (qsl(mid) <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// §4 on a validated query_start_loc of R requests.
DecodePrefillSplit compute_split(const IndexReader& qsl, int64_t R, int64_t threshold);

}  // namespace dsv4cpu::detail
