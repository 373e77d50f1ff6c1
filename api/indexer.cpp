// Indexer ops: validation, ordered variant lists (reference last), public entry points.
#include "core/registry.hpp"

namespace dsv4cpu::detail {

void list_indexer_ops(std::vector<OpInfo>&) {}

}  // namespace dsv4cpu::detail
