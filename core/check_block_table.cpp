#include "core/check_block_table.hpp"

#include <climits>

#include "core/check_index.hpp"
#include "core/parallel.hpp"

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
      table_(block_table),
      bt_(block_table),
      MB_(block_table.size(1)),
      P_(block_size),
      max_entry_((INT64_MAX - (block_size - 1)) / block_size),
      shift_((block_size & (block_size - 1)) == 0
                 ? __builtin_ctzll(static_cast<unsigned long long>(block_size))
                 : -1) {}

bool local_refs_pass(const BlockTableRefs& refs, const TensorView& local, const TensorView& req_v,
                     int num_threads, int64_t lowest) {
  const int64_t N = local.size(0), K = local.size(1), MB = refs.columns();
  const int shift = refs.shift();
  if (N * K == 0) return true;
  if (shift < 0 || MB < 1 || local.dtype() != refs.table().dtype()) return false;
  const IndexReader req(req_v);
  const int threads =
      threads_for(num_threads, N * K * static_cast<int64_t>(dtype_size(local.dtype())));
  // Entries must lie in [0, max_entry]: an exclusive bound, or none when every entry fits (P = 1).
  const int64_t entry_limit = refs.max_entry() == kNoLimit ? kNoLimit : refs.max_entry() + 1;
  const int64_t bad = parallel_first(N, threads, [&](int64_t n0, int64_t n1) {
    int64_t last = -1, valid = 0;  // columns [0, valid) of row `last` are valid
    for (int64_t n = n0; n < n1; ++n) {
      const auto [bottom, top] = row_min_max(local, n);
      if (bottom < lowest) return n;
      if (top < 0) continue;
      const int64_t r = req(n), c = top >> shift;
      if (r != last) {
        last = r;
        valid = 0;
      }
      if (c < valid) continue;
      if (c < MB && c + 1 - valid <= 4 * K &&
          entries_within(refs.table(), r, valid, c + 1, entry_limit)) {
        valid = c + 1;
        continue;
      }
      if (!local_refs_ok(local, n, refs.table(), r, shift, refs.max_entry())) return n;
    }
    return n1;
  });
  return bad == N;
}

void check_local_refs(const BlockTableRefs& refs, const char* local_name, const TensorView& local,
                      const TensorView& req_v, int num_threads) {
  if (local_refs_pass(refs, local, req_v, num_threads)) return;
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
