#include "core/check_block_table.hpp"

#include <climits>

#include "core/check_index.hpp"

namespace dsv4cpu::detail {

std::pair<int64_t, int64_t> check_mapping_arrays(const char* op, const char* local_name,
                                                 const TensorView& local, const char* req_name,
                                                 const TensorView& req,
                                                 const TensorView& block_table,
                                                 int64_t block_size) {
  check_block_size(op, "block_size", block_size);
  check_array(op, local_name, local, {DType::I32, DType::I64}, {kAny, kAny}, Layout::unit_inner);
  check_index_array(op, req_name, req, {local.size(0)});
  check_index_array(op, "block_table", block_table, {kAny, kAny}, Layout::rows_contiguous);
  return {local.size(0), local.size(1)};
}

BlockTableRefs::BlockTableRefs(const char* op, const TensorView& block_table, int64_t block_size)
    : op_(op),
      bt_(block_table),
      MB_(block_table.size(1)),
      P_(block_size),
      max_entry_((INT64_MAX - (block_size - 1)) / block_size),
      shift_((block_size & (block_size - 1)) == 0
                 ? __builtin_ctzll(static_cast<unsigned long long>(block_size))
                 : -1) {}

void check_local_refs(const BlockTableRefs& refs, const char* local_name, const TensorView& local,
                      const TensorView& req_v) {
  const IndexReader req(req_v);
  const int64_t N = local.size(0), K = local.size(1), row_stride = N > 1 ? local.stride(0) : 0;
  with_data(local, [&](const auto* p) {
    for (int64_t n = 0; n < N; ++n) {
      const auto* row = p + n * row_stride;
      const int64_t r = req(n);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t l = row[k];
        if (l >= 0 && !refs.ok(r, refs.column(l)))
          refs.fail(r, refs.column(l), {local_name, {n, k}, l, ""});
      }
    }
  });
}

void BlockTableRefs::fail(int64_t r, int64_t col, const BlockTableReferrer& by) const {
  if (col >= MB_)
    detail::fail<IndexError>(
        op_, by.argument, by.index, std::to_string(by.value),
        "references block-table column " + std::to_string(col) + " beyond the table" + by.detail,
        "column < " + std::to_string(MB_));
  const int64_t entry = bt_(r, col);
  const std::string referrer = std::string(by.argument) + format_index(by.index) + " = " +
                               std::to_string(by.value) + by.detail;
  if (entry < 0)
    detail::fail<IndexError>(op_, "block_table", {r, col}, std::to_string(entry),
                             "negative block id referenced by " + referrer, ">= 0");
  detail::fail<IndexError>(op_, "block_table", {r, col}, std::to_string(entry),
                           "slot overflows int64, referenced by " + referrer,
                           "block id * block_size + block_size - 1 <= 2^63 - 1");
}

}  // namespace dsv4cpu::detail
