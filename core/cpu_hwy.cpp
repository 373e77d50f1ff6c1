// The Highway targets of the library: compiled here with the same HWY_TARGETS as every Highway
// translation unit of optimized/, so dynamic dispatch picks the same target in all of them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/cpu_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/cpu.hpp"

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::HWY_NAMESPACE {

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace dsv4cpu::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dsv4cpu::detail {

HWY_EXPORT(TargetName);

std::vector<HighwayTarget> highway_targets() {
  std::vector<HighwayTarget> out;
  for (int64_t bits : hwy::SupportedAndGeneratedTargets())
    out.push_back({bits, hwy::TargetName(bits)});
  return out;
}

std::string highway_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace dsv4cpu::detail
#endif  // HWY_ONCE
