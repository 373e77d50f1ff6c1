// Reference KV compressor (compressor.md). Scalar fp32, the spec's evaluation orders verbatim.
#include "core/check.hpp"
#include "reference/compressor.hpp"

namespace dsv4cpu::detail::ref {

// compressor.md §4.1
void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext&) {
  const IndexReader local(a.local_indices), req(a.req_idx), bt(a.block_table);
  int64_t* slots = a.slots.ptr<int64_t>();
  const int64_t P = a.block_size;
  for (int64_t n = 0; n < a.N; ++n) {
    for (int64_t k = 0; k < a.K; ++k) {
      const int64_t l = local(n, k);
      slots[n * a.K + k] = l < 0 ? -1 : bt(req(n), l / P) * P + l % P;
    }
  }
}

}  // namespace dsv4cpu::detail::ref
