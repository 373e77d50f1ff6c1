// Integer helpers shared by the metadata validation and both variants (metadata.md).
#pragma once
#include <algorithm>
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

// §9.3 split_indexer_prefill_chunks, the grouping: calls f(start, end, M, step) for each group of
// requests [start, end) in order, M their query tokens and `step` the query tokens per chunk
// (the group's chunks are [qa, min(qa + step, M)) for qa = 0, step, 2·step, ... < M). `n(i)`,
// `m(i)` read the compressed and query lengths (validated: n >= 0, m >= 1, sum of m fits int64);
// E = max_logits_bytes / 4.
template <class Lengths, class F>
void for_each_prefill_group(const Lengths& n, const Lengths& m, int64_t count, int64_t workspace,
                            int64_t E, F&& f) {
  int64_t i = 0;
  while (i < count) {
    const int64_t start = i;
    int64_t M = 0, N = 0;
    // N + n[i] <= workspace and (M + m[i]) * (N + n[i]) <= E, written without overflow:
    // N <= workspace throughout, and a * b <= E iff a <= E / b for b >= 1.
    while (i < count && n(i) <= workspace - N && (N + n(i) == 0 || M + m(i) <= E / (N + n(i)))) {
      M += m(i);
      N += n(i);
      i += 1;
    }
    if (i == start) {  // a request that fits nowhere goes alone
      M = m(i);
      N = n(i);
      i += 1;
    }
    f(start, i, M, N > 0 ? std::max<int64_t>(1, E / N) : M);
  }
}

// §4 on a validated query_start_loc of R requests.
DecodePrefillSplit compute_split(const IndexReader& qsl, int64_t R, int64_t threshold);

}  // namespace dsv4cpu::detail
