// CPU and OS checks of the indexer's ISA-specific variants (spec README, "Implementations": a
// variant runs only if the CPU reports its ISA and, for AMX, the OS grants the tile state).
// Built without ISA flags, so it runs on any x86-64.
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "optimized/indexer.hpp"

namespace dsv4cpu::detail::opt {
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

bool avx512bf16_cpu() { return avx512_usable() && bit(cpuid(7, 1).a, 5); }

// CPUID.(7,0):EDX bit 24 AMX-TILE, bit 22 AMX-BF16; XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA);
// then the per-process permission for the tile data state.
bool amx_cpu_and_os() {
  const CpuidRegs l7 = cpuid(7, 0);
  if (!avx512bf16_cpu() || !bit(l7.d, 24) || !bit(l7.d, 22)) return false;
  if ((xcr0() & (3ull << 17)) != (3ull << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

bool amx_available() {
  static const bool available = amx_cpu_and_os();  // once, thread-safe
  return available;
}

bool avx512bf16_available() {
  static const bool available = avx512bf16_cpu();
  return available;
}

std::string amx_target() { return "AMX_BF16"; }
std::string avx512bf16_target() { return "AVX512_BF16"; }

}  // namespace dsv4cpu::detail::opt
