#include "core/registry.hpp"

namespace dsv4cpu::detail {

namespace {

// The order of preference per vendor, as ranks of the fixed ISAs and of code without one (Highway
// or portable), measured with the benchmark suite at every shape of the three ops with more than
// one optimized variant (fp8_paged_mqa_logits, indexer_topk, sparse_mla_attention; 1 thread;
// docs/cpp-api.md, "Which variant runs"):
// - Intel Xeon with AMX: amx 2.3-3.9x faster than hwy (AVX3), hwy 1.2-1.5x faster than
//   avx512bf16; a Xeon whose hypervisor withholds the tile state: hwy 1.4-1.6x faster than
//   avx512bf16 (VDPBF16PS there has half the FLOP rate of fp32 FMAs: avx512bf16_roof, avx3_roof).
//   Assumed for a Cooper Lake (never measured).
// - AMD EPYC with AVX-512-BF16 (Zen 4, no AMX): avx512bf16 1.5-2.1x faster than hwy (AVX3;
//   bench/baselines/epyc-avx512bf16-20261202c.json). Assumed for later AMD families; amx first
//   should an AMD CPU offer it (a matrix unit beat every vector variant wherever measured).
// Any other vendor keeps the lists' order (api/registry.cpp).
struct VendorOrder {
  CpuVendor vendor;
  int amx, avx512bf16, no_fixed_isa;
};
constexpr VendorOrder kVendorOrders[] = {
    {CpuVendor::intel, 0, 2, 1},
    {CpuVendor::amd, 0, 1, 2},
};

}  // namespace

int variant_rank(CpuVendor vendor, const Dispatch& d) noexcept {
  for (const VendorOrder& o : kVendorOrders) {
    if (o.vendor != vendor) continue;
    switch (d.isa) {
      case Isa::amx:
        return o.amx;
      case Isa::avx512bf16:
        return o.avx512bf16;
      case Isa::none:
        return o.no_fixed_isa;
    }
  }
  return 0;
}

VariantInfo describe(const char* name, Role role, const Dispatch& d) {
  VariantInfo v;
  v.name = name;
  v.role = role;
  v.available = available(d);
  v.highway = d.highway;
  v.isa = isa_name(d.isa);
  if (v.available) v.target = d.highway ? highway_target() : isa_target(d.isa);
  return v;
}

}  // namespace dsv4cpu::detail
