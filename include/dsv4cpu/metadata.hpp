// Metadata builders (metadata.md): integer slot and index tables of one scheduled step.
// Argument names and order follow the spec's tables; outputs are caller-allocated views
// (written completely) except where a result is not an array. Index inputs accept I32 or I64.
// Optional inputs and outputs are passed as an absent view, TensorView().
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4cpu/export.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// §2: positions I64 [T], token_to_req I32 [T] with T = query_start_loc[R].
DSV4CPU_API void token_positions(const TensorView& query_start_loc, const TensorView& seq_lens,
                                 const MutableTensorView& positions,
                                 const MutableTensorView& token_to_req,
                                 const Options& options = {});

// §3: slot_mapping I64 [num_tokens_padded]; its extent is num_tokens_padded (>= T, ValueError
// otherwise), entries [T, num_tokens_padded) are -1.
DSV4CPU_API void slot_mapping(const TensorView& positions, const TensorView& token_to_req,
                              const TensorView& block_table, int64_t block_size,
                              const MutableTensorView& slot_mapping, const Options& options = {});

// §4
struct DecodePrefillSplit {
  int64_t num_decodes = 0;
  int64_t num_prefills = 0;
  int64_t num_decode_tokens = 0;
  int64_t num_prefill_tokens = 0;
};
DSV4CPU_API DecodePrefillSplit split_decodes_and_prefills(const TensorView& query_start_loc,
                                                          int64_t threshold,
                                                          const Options& options = {});

// §5: slot_mapping I64 [num_tokens_padded] (extent >= T = query_start_loc[R]); the optional
// token_slot_mapping (I32 or I64 [T], or TensorView()) enables the replayed-token rule.
DSV4CPU_API void compressed_slot_mapping(const TensorView& query_start_loc,
                                         const TensorView& seq_lens, const TensorView& block_table,
                                         int64_t compress_ratio, int64_t block_size,
                                         const TensorView& token_slot_mapping,
                                         const MutableTensorView& slot_mapping,
                                         const Options& options = {});

// §6: indices I64 [T, window]; optional lens I32 [T].
DSV4CPU_API void swa_window_indices(const TensorView& positions, const TensorView& token_to_req,
                                    const TensorView& block_table, int64_t window,
                                    int64_t block_size, const MutableTensorView& indices,
                                    const MutableTensorView& lens = MutableTensorView(),
                                    const Options& options = {});

// §7.1 (CPU form): indices I64 [T, Wc] with Wc = c128a_topk_width(max_model_len).
DSV4CPU_API void c128a_topk_indices(const TensorView& positions, const TensorView& token_to_req,
                                    const TensorView& block_table, int64_t max_model_len,
                                    int64_t block_size, const MutableTensorView& indices,
                                    const Options& options = {});
// Wc = ceil(max_model_len / 128); ValueError for max_model_len < 1.
DSV4CPU_API int64_t c128a_topk_width(int64_t max_model_len);

// §7.1, compact form (docs/metadata.md): the same rows cut to any width W >= the step's longest
// compressed length max_t (positions[t] + 1) / 128, which c128a_compact_width returns (0 for an
// empty step). indices I64 [T, W]; columns beyond a token's n_t are -1. A token with n_t > W is
// an IndexError.
DSV4CPU_API int64_t c128a_compact_width(const TensorView& positions);
DSV4CPU_API void c128a_topk_indices_compact(const TensorView& positions,
                                            const TensorView& token_to_req,
                                            const TensorView& block_table, int64_t block_size,
                                            const MutableTensorView& indices,
                                            const Options& options = {});

// §7.2 (GPU form, for parity). The outputs' common width is the active width Wa: a multiple of
// 128, <= Wmax = c128a_decode_max_width(max_model_len) (ShapeError otherwise), and >= every
// token's n_t (IndexError otherwise). decode_global I64 [nd, Wa], decode_lens I32 [nd],
// prefill_local I32 [T - nd, Wa] with nd = num_decode_tokens in [0, T] (ValueError otherwise).
// token_slot_mapping is optional (I32 or I64 [T], or TensorView()).
DSV4CPU_API void c128a_decode_metadata(const TensorView& positions, const TensorView& token_to_req,
                                       const TensorView& block_table, int64_t max_model_len,
                                       int64_t block_size, int64_t num_decode_tokens,
                                       const TensorView& token_slot_mapping,
                                       const MutableTensorView& decode_global,
                                       const MutableTensorView& decode_lens,
                                       const MutableTensorView& prefill_local,
                                       const Options& options = {});
// Wmax = roundup(ceil(max_model_len / 128), 128); ValueError for max_model_len < 1.
DSV4CPU_API int64_t c128a_decode_max_width(int64_t max_model_len);

// §8: topk_indices I32 or I64 [T, K] (unit inner stride; K = 512 in the model), entries >= -1.
// indices I64 [T, K], lens I32 [T]. token_slot_mapping is optional (I32 or I64 [T], or
// TensorView()).
DSV4CPU_API void c4a_global_topk_indices(
    const TensorView& topk_indices, const TensorView& token_to_req, const TensorView& block_table,
    int64_t block_size, const TensorView& token_slot_mapping, const MutableTensorView& indices,
    const MutableTensorView& lens, const Options& options = {});

// §9.2. The decode block table is rows [0, num_decodes) of the indexer group's table.
struct IndexerDecodeMetadata {
  std::vector<int32_t> decode_lens;      // [num_decodes], q_r
  bool requires_padding = false;         // min(decode_lens) != max(decode_lens)
  int64_t next_n = 1;                    // columns of decode_seq_lens
  std::vector<int32_t> decode_seq_lens;  // [num_decodes, next_n] row-major
};

// §9.3 build_prefill_chunk_metadata. The chunk's block table is rows [req_start, req_end).
struct IndexerPrefillChunk {
  int64_t req_start = 0, req_end = 0;      // absolute request range [rs, re)
  int64_t token_start = 0, token_end = 0;  // absolute token range qsl[rs] + [qa, qb)
  int64_t num_reqs = 0;
  int64_t total_seq_lens = 0;
  bool skip_kv_gather = false;
  std::vector<int32_t> cu_seq_lens;   // [num_reqs + 1]
  std::vector<int32_t> cu_seqlen_ks;  // [token_end - token_start]
  std::vector<int32_t> cu_seqlen_ke;  // [token_end - token_start]
  std::vector<int32_t> token_req;     // [token_end - token_start], chunk-relative request
  std::vector<int32_t> token_to_seq;  // [total_seq_lens]
};

// §9.1: the fields that are not the slot mapping.
struct IndexerMetadata {
  int64_t max_seq_len = 0;
  DecodePrefillSplit split;                     // §4 with threshold next_n
  std::vector<int32_t> compressed_seq_lens;     // [R], seq_lens[r] / 4
  std::optional<IndexerDecodeMetadata> decode;  // present iff num_decodes > 0
  std::optional<IndexerPrefillChunk> prefill;   // §9.4: the CPU plan's single chunk, present
                                                // iff num_prefills > 0 (kept when its total is 0)
};

// §9.1-9.5. block_table is the indexer group's [R, MB]; next_n >= 1 (1 + speculative tokens)
// is the split threshold and the native-MTP width of decode_seq_lens. slot_mapping I64
// [num_tokens_padded] (extent >= T) receives §5 with ratio 4 and block_size.
DSV4CPU_API IndexerMetadata indexer_metadata(const TensorView& query_start_loc,
                                             const TensorView& seq_lens,
                                             const TensorView& block_table, int64_t block_size,
                                             int64_t next_n, const MutableTensorView& slot_mapping,
                                             const Options& options = {});

// §9.3 base rule. Chunk-relative query slices of requests [req_start, req_end) (absolute, i.e.
// offset by request_offset). Returns the base rule's list as is: chunks whose requests have
// total compressed length 0 are kept (vLLM drops them afterwards; see docs/metadata.md).
struct PrefillChunk {
  int64_t req_start = 0, req_end = 0;
  int64_t q_start = 0, q_end = 0;
};
DSV4CPU_API std::vector<PrefillChunk> split_indexer_prefill_chunks(
    const TensorView& compressed_lens, const TensorView& query_lens, int64_t workspace,
    int64_t max_logits_bytes, int64_t request_offset, const Options& options = {});

// §10: "none" for layer_kind "swaonly", "c4a" and "c128a"; ValueError for any other kind.
DSV4CPU_API std::string build_tile_scheduler(std::string_view layer_kind,
                                             const Options& options = {});

}  // namespace dsv4cpu
