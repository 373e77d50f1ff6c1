#include "core/thresholds.hpp"

namespace dsv4cpu::detail {

Thresholds g_thresholds;  // constant-initialised: the defaults of core/thresholds.hpp

}  // namespace dsv4cpu::detail
