// Compressor ops: validation (bad-input.md §4, shared by all variants), the ordered variant lists
// (reference last), and the public entry points.
#include "api/compressor_args.hpp"
#include "core/check.hpp"
#include "reference/compressor.hpp"

namespace dsv4cpu {
namespace detail {
namespace {

// ---- map_local_to_global_slots (compressor.md §4.1) ----

const VariantList<MapLocalToGlobalSlotsArgs> kMapLocalToGlobalSlots = {
    {"ref", nullptr, nullptr, ref::map_local_to_global_slots},
};

void validate(MapLocalToGlobalSlotsArgs& a, const Options&) {
  constexpr const char* op = "map_local_to_global_slots";
  if (a.block_size < 1)
    fail_value(op, "block_size", std::to_string(a.block_size), "not a positive block size",
               "block_size >= 1");
  check_array(op, "local_indices", a.local_indices, {DType::I32, DType::I64}, {kAny, kAny},
              Layout::unit_inner);
  a.N = a.local_indices.size(0);
  a.K = a.local_indices.size(1);
  check_index_array(op, "req_idx", a.req_idx, {a.N});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "slots", a.slots, {DType::I64}, {a.N, a.K}, Layout::contiguous);
  check_no_overlap(op, "slots", a.slots, "local_indices", a.local_indices);
  check_no_overlap(op, "slots", a.slots, "req_idx", a.req_idx);
  check_no_overlap(op, "slots", a.slots, "block_table", a.block_table);
  const int64_t R = a.block_table.size(0), MB = a.block_table.size(1), P = a.block_size;
  const IndexReader local(a.local_indices), req(a.req_idx), bt(a.block_table);
  for (int64_t n = 0; n < a.N; ++n) {
    const int64_t r = req(n);
    if (r < 0 || r >= R)
      fail<IndexError>(op, "req_idx", {n}, std::to_string(r), "request index out of range",
                       "0 <= req_idx < " + std::to_string(R));
  }
  for (int64_t n = 0; n < a.N; ++n) {
    const int64_t r = req(n);
    for (int64_t k = 0; k < a.K; ++k) {
      const int64_t l = local(n, k);
      if (l < 0) continue;
      const int64_t col = l / P;
      const std::string ref_by =
          "local_indices[" + std::to_string(n) + ", " + std::to_string(k) + "] = " +
          std::to_string(l);
      if (col >= MB)
        fail<IndexError>(op, "local_indices", {n, k}, std::to_string(l),
                         "block-table column " + std::to_string(col) + " beyond the table",
                         "local index / block_size < " + std::to_string(MB));
      const int64_t page = bt(r, col);
      if (page < 0)
        fail<IndexError>(op, "block_table", {r, col}, std::to_string(page),
                         "negative block id referenced by " + ref_by, ">= 0");
      if (page > (INT64_MAX - (P - 1)) / P)
        fail<IndexError>(op, "block_table", {r, col}, std::to_string(page),
                         "slot overflows int64, referenced by " + ref_by,
                         "block id * block_size + block_size - 1 <= 2^63 - 1");
    }
  }
}

}  // namespace

void list_compressor_ops(std::vector<OpInfo>& out) {
  out.push_back(make_op_info("map_local_to_global_slots", kMapLocalToGlobalSlots));
}

}  // namespace detail

void map_local_to_global_slots(const TensorView& local_indices, const TensorView& req_idx,
                               const TensorView& block_table, int64_t block_size,
                               const TensorView& slots, const Options& options) {
  detail::MapLocalToGlobalSlotsArgs a{local_indices, req_idx, block_table, block_size, slots};
  detail::run_op("map_local_to_global_slots", detail::kMapLocalToGlobalSlots, a, options,
                 [](auto& args, const Options& o) { detail::validate(args, o); });
}

}  // namespace dsv4cpu
