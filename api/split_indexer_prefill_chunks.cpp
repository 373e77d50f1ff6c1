// split_indexer_prefill_chunks (metadata.md §9.3): the validation (bad-input.md §1.4 order, §4
// tables), run before any variant so that every variant throws the same error, and the public entry
// point: pack the arguments, detail::run (api/registry.hpp).
#include <climits>
#include <string>
#include <vector>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/checked.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu {
namespace detail {

void validate(SplitIndexerPrefillChunksArgs& a, const Options&) {
  constexpr const char* op = "split_indexer_prefill_chunks";
  if (a.workspace < 1)
    fail_value(op, "workspace", std::to_string(a.workspace), "not a positive size",
               "workspace >= 1");
  if (a.max_logits_bytes < 4)
    fail_value(op, "max_logits_bytes", std::to_string(a.max_logits_bytes), "below one fp32 logit",
               "max_logits_bytes >= 4");
  if (a.request_offset < 0)
    fail_value(op, "request_offset", std::to_string(a.request_offset), "negative offset", ">= 0");
  check_index_array(op, "compressed_lens", a.compressed_lens, {kAny});
  a.count = a.compressed_lens.size(0);
  check_index_array(op, "query_lens", a.query_lens, {a.count});
  if (a.request_offset > INT64_MAX - a.count)
    fail_value(op, "request_offset", std::to_string(a.request_offset),
               "request indices overflow int64",
               "request_offset + " + std::to_string(a.count) + " <= 2^63 - 1");
  const IndexReader n(a.compressed_lens), m(a.query_lens);
  for (int64_t i = 0; i < a.count; ++i)
    if (n(i) < 0)
      fail<IndexError>(op, "compressed_lens", {i}, std::to_string(n(i)), "negative length", ">= 0");
  int64_t total = 0;
  for (int64_t i = 0; i < a.count; ++i) {
    if (m(i) < 1)
      fail<IndexError>(op, "query_lens", {i}, std::to_string(m(i)), "empty prefill query", ">= 1");
    if (m(i) > INT64_MAX - total)
      fail<IndexError>(op, "query_lens", {i}, std::to_string(m(i)),
                       "total query length overflows int64", "sum of query_lens <= 2^63 - 1");
    total += m(i);
  }
  // The chunks returned, counted before any is built.
  const int64_t max_chunks = kMaxReturnedBytes / static_cast<int64_t>(sizeof(PrefillChunk));
  int64_t chunks = 0;
  for_each_prefill_group(n, m, a.count, a.workspace, a.max_logits_bytes / 4,
                         [&](int64_t start, int64_t, int64_t M, int64_t step) {
                           chunks += ceil_div(M, step);  // <= the query tokens so far
                           if (chunks > max_chunks)
                             fail<IndexError>(op, "query_lens", {start}, std::to_string(m(start)),
                                              "more than " + std::to_string(max_chunks) +
                                                  " prefill chunks in all up to this request's group",
                                              "at most " + std::to_string(max_chunks) +
                                                  " chunks, 256 MiB of PrefillChunk");
                         });
}

}  // namespace detail

std::vector<PrefillChunk> split_indexer_prefill_chunks(const TensorView& compressed_lens,
                                                       const TensorView& query_lens,
                                                       int64_t workspace,
                                                       int64_t max_logits_bytes,
                                                       int64_t request_offset,
                                                       const Options& options) {
  std::vector<PrefillChunk> result;
  detail::SplitIndexerPrefillChunksArgs a{compressed_lens,  query_lens,     workspace,
                                          max_logits_bytes, request_offset, &result};
  detail::run("split_indexer_prefill_chunks", a, options);
  return result;
}

}  // namespace dsv4cpu
