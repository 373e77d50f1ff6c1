#include "dsv4cpu/version.hpp"

namespace dsv4cpu {

const char* version() noexcept { return DSV4CPU_VERSION_STRING; }

}  // namespace dsv4cpu
