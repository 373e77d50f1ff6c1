// The ISAs a machine must offer: where /proc/cpuinfo announces an ISA, or DSV4CPU_REQUIRE_ISA
// names it, a test of that ISA's variants fails instead of skipping.
#pragma once
#include <string>

#include "testing/runs.hpp"

namespace dsv4cpu::testing {

// Whether `isa` (a VariantInfo::isa) must be available here: DSV4CPU_REQUIRE_ISA lists it (a
// comma-separated list, e.g. "amx,avx512bf16"), or /proc/cpuinfo announces it (amx_tile and
// amx_bf16 for amx, avx512_bf16 for avx512bf16).
bool isa_required(const std::string& isa);

// The vendor_id of the first processor in /proc/cpuinfo ("GenuineIntel", "AuthenticAMD", ...;
// empty when it lists none): the variant order's vendor, read apart from CPUID.
std::string cpuinfo_vendor();

// What a test of the absent variants of a list reports: nothing when none is absent; a skip
// reason; or, when the ISA of one of them is required, a failure message saying so, e.g.
// "AMX is required (DSV4CPU_REQUIRE_ISA=amx) but variant amx of fp8_paged_mqa_logits is not
// available on this CPU or OS".
struct Absence {
  bool absent = false;
  bool required = false;
  std::string message;
};
Absence absence(const std::string& op, const RunList& list);

}  // namespace dsv4cpu::testing
