// The scalar fp32 reference kernels (the oracle). Each takes validated arguments.
#pragma once
#include "api/compressor_args.hpp"

namespace dsv4cpu::detail::ref {

void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext& ctx);

}  // namespace dsv4cpu::detail::ref
