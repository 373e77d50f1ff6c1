// What this CPU and OS offer (spec README, "Implementations"): every feature probe of the library.
// A fixed-ISA variant runs only when the CPU reports its ISA and the OS saves its register state
// (for AMX: grants the tile data state to the process); a Highway variant runs on the target that
// dynamic dispatch picks among those compiled into the library.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4cpu::detail {

// The instruction sets a fixed-ISA translation unit is built for.
enum class Isa : uint8_t { none, avx512bf16, amx };

// "" (none), "avx512bf16", "amx": the name VariantInfo::isa publishes.
const char* isa_name(Isa isa) noexcept;
// Isa::none for a name that is none of the above.
Isa isa_from_name(std::string_view name) noexcept;
// What runs inside a variant of that ISA: "", "AVX512_BF16", "AMX_BF16" (VariantInfo::target).
const char* isa_target(Isa isa) noexcept;
// The /proc/cpuinfo flags that announce the ISA: avx512_bf16; amx_tile, amx_bf16 and avx512vbmi.
std::vector<std::string> isa_cpuinfo_flags(Isa isa);
// CPUID and XCR0 (AVX-512 F/BW/VL/DQ, FMA, the ISA's own bits, the OS saving the state); for AMX
// also arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). Probed once per process; none: true.
bool isa_available(Isa isa) noexcept;

// The CPU as the variant order reads it (core/registry.hpp, order_for): the vendor of CPUID leaf 0
// and the fixed ISAs this CPU and OS run (as isa_available says).
enum class CpuVendor : uint8_t { other, intel, amd };
struct CpuDescription {
  CpuVendor vendor = CpuVendor::other;
  bool avx512bf16 = false;
  bool amx = false;
};
// "GenuineIntel": intel, "AuthenticAMD": amd, any other vendor string: other.
CpuVendor cpu_vendor(std::string_view vendor_id) noexcept;
// This CPU and OS, probed once per process.
const CpuDescription& this_cpu() noexcept;
// Whether code built for `isa` runs on `cpu` (Isa::none: always).
bool isa_on(const CpuDescription& cpu, Isa isa) noexcept;

// Highway targets (hwy::TargetName) compiled into the library and supported by this CPU, best
// first; `bits` is the target's bit as hwy::SetSupportedTargetsForTest takes it.
struct HighwayTarget {
  int64_t bits;
  std::string name;
};
std::vector<HighwayTarget> highway_targets();
// The target Highway's dynamic dispatch runs now, e.g. "AVX3".
std::string highway_target();

}  // namespace dsv4cpu::detail
