// CPUID, XCR0 and the AMX permission request. Built without ISA flags, so it runs on any x86-64.
#include "core/cpu.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace dsv4cpu::detail {
namespace {

struct CpuidRegs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) return CpuidRegs{};
  return r;
}

bool bit(unsigned reg, int i) { return ((reg >> i) & 1u) != 0; }

// XCR0, when the OS has enabled XSAVE (CPUID.1:ECX.OSXSAVE).
unsigned long long xcr0() {
  if (!bit(cpuid(1, 0).c, 27)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

// AVX-512 F, BW, VL, DQ and FMA, with the OS saving the SSE, AVX and AVX-512 state (XCR0 bits
// 1, 2, 5, 6, 7).
bool avx512_usable() {
  const CpuidRegs l1 = cpuid(1, 0), l7 = cpuid(7, 0);
  return bit(l1.c, 12) && bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31) &&
         (xcr0() & 0xE6u) == 0xE6u;
}

// CPUID.(7,1):EAX bit 5 AVX512_BF16.
bool avx512bf16_cpu() { return avx512_usable() && bit(cpuid(7, 1).a, 5); }

// CPUID.(7,0):EDX bit 24 AMX-TILE, bit 22 AMX-BF16, ECX bit 1 AVX512_VBMI (every AMX CPU has it;
// the AMX units use it); XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA); then the per-process
// permission for the tile data state.
bool amx_cpu_and_os() {
  const CpuidRegs l7 = cpuid(7, 0);
  if (!avx512bf16_cpu() || !bit(l7.d, 24) || !bit(l7.d, 22) || !bit(l7.c, 1)) return false;
  if ((xcr0() & (3ull << 17)) != (3ull << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::none:
      return "";
    case Isa::avx512bf16:
      return "avx512bf16";
    case Isa::amx:
      return "amx";
  }
  return "";
}

Isa isa_from_name(std::string_view name) noexcept {
  for (Isa isa : {Isa::avx512bf16, Isa::amx})
    if (name == isa_name(isa)) return isa;
  return Isa::none;
}

const char* isa_target(Isa isa) noexcept {
  switch (isa) {
    case Isa::none:
      return "";
    case Isa::avx512bf16:
      return "AVX512_BF16";
    case Isa::amx:
      return "AMX_BF16";
  }
  return "";
}

std::vector<std::string> isa_cpuinfo_flags(Isa isa) {
  switch (isa) {
    case Isa::none:
      return {};
    case Isa::avx512bf16:
      return {"avx512_bf16"};
    case Isa::amx:
      return {"amx_tile", "amx_bf16", "avx512vbmi"};
  }
  return {};
}

bool isa_available(Isa isa) noexcept { return isa_on(this_cpu(), isa); }

CpuVendor cpu_vendor(std::string_view vendor_id) noexcept {
  if (vendor_id == "GenuineIntel") return CpuVendor::intel;
  if (vendor_id == "AuthenticAMD") return CpuVendor::amd;
  return CpuVendor::other;
}

const CpuDescription& this_cpu() noexcept {
  static const CpuDescription cpu = [] {  // once, thread-safe
    // CPUID leaf 0: the vendor string in EBX, EDX, ECX.
    const CpuidRegs l0 = cpuid(0, 0);
    char id[12];
    std::memcpy(id, &l0.b, 4);
    std::memcpy(id + 4, &l0.d, 4);
    std::memcpy(id + 8, &l0.c, 4);
    return CpuDescription{cpu_vendor(std::string_view(id, sizeof id)), avx512bf16_cpu(),
                          amx_cpu_and_os()};
  }();
  return cpu;
}

bool isa_on(const CpuDescription& cpu, Isa isa) noexcept {
  switch (isa) {
    case Isa::none:
      return true;
    case Isa::avx512bf16:
      return cpu.avx512bf16;
    case Isa::amx:
      return cpu.amx;
  }
  return false;
}

}  // namespace dsv4cpu::detail
