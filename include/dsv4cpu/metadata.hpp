// Metadata builders (metadata.md): integer slot and index tables of one scheduled step. Every op
// follows the contract of options.hpp (errors before any write, aliasing, threads, zero-size
// calls); each comment below adds the op's Shapes, Writes, Allocates, Throws and Threads, and the
// following holds for all of them unless a comment says otherwise:
// - Shapes: index inputs are I32 or I64, 1-D inputs and outputs contiguous, block tables [R, MB]
//   with contiguous rows (row stride >= MB); qsl = query_start_loc [R + 1] starts at 0 and does
//   not decrease, T = qsl[R], q_r = qsl[r + 1] − qsl[r], seq_lens[r] >= q_r; an optional
//   argument not given is an absent view (TensorView() / MutableTensorView()).
// - Writes: every element of every output array (padding entries included); nothing else.
// - Allocates: all temporary, O(T + R) bytes or less unless stated.
// - Throws: ValueError for a scalar outside its domain (block sizes >= 1, ratios in {4, 128},
//   window >= 1, max_model_len >= 1, ...), ShapeError for shapes and overlap (also between two
//   outputs), IndexError for index elements (qsl, seq_lens, positions < 0, request indices
//   outside [0, R), a block-table column a formula reads >= MB or its entry < 0, an I32 output
//   value beyond int32).
// - Threads: "opt" splits tokens (or requests) across threads; the reference runs on the calling
//   thread.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4cpu/cache_sizes.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/export.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// token_positions (§2): pos_t = seq_lens[r] − q_r + (t − qsl[r]) and the request of every token.
// Shapes:    query_start_loc [R + 1], seq_lens [R]; positions I64 [T], token_to_req I32 [T].
// Allocates: ref: nothing; opt: I64 copies of I32 inputs.
DSV4CPU_API void token_positions(const TensorView& query_start_loc, const TensorView& seq_lens,
                                 const MutableTensorView& positions,
                                 const MutableTensorView& token_to_req,
                                 const Options& options = {});

// slot_mapping (§3): slot_mapping[t] = bt[token_to_req[t]][pos_t / P]·P + pos_t % P.
// Shapes:    positions [T], token_to_req [T], block_table [R, MB], block_size P; slot_mapping I64
//            [num_tokens_padded]: its extent is num_tokens_padded (>= T, ValueError otherwise),
//            entries [T, num_tokens_padded) are -1.
// Allocates: nothing.
DSV4CPU_API void slot_mapping(const TensorView& positions, const TensorView& token_to_req,
                              const TensorView& block_table, int64_t block_size,
                              const MutableTensorView& slot_mapping, const Options& options = {});

// split_decodes_and_prefills (§4): the decode requests and tokens at the head of the batch.
// Shapes:    query_start_loc [R + 1]; threshold >= 0 (the query length up to which a request is a
//            decode: 1 + speculative tokens).
// Writes:    nothing: the result is returned.
// Allocates: nothing.
struct DecodePrefillSplit {
  int64_t num_decodes = 0;
  int64_t num_prefills = 0;
  int64_t num_decode_tokens = 0;
  int64_t num_prefill_tokens = 0;
};
DSV4CPU_API DecodePrefillSplit split_decodes_and_prefills(const TensorView& query_start_loc,
                                                          int64_t threshold,
                                                          const Options& options = {});

// compressed_slot_mapping (§5): the compressed-cache slot of every boundary token, −1 elsewhere.
// Shapes:    query_start_loc [R + 1], seq_lens [R], block_table [R, MB] (the compressed group),
//            compress_ratio in {4, 128}, block_size P_c (compressed_block_size(ratio)); optional
//            token_slot_mapping [T] (the token's own slot: −1 there gives −1, the replayed-token
//            rule); slot_mapping I64 [num_tokens_padded] (>= T), entries [T, ...) −1.
// Allocates: ref: nothing; opt: I64 copies of I32 inputs.
DSV4CPU_API void compressed_slot_mapping(const TensorView& query_start_loc,
                                         const TensorView& seq_lens, const TensorView& block_table,
                                         int64_t compress_ratio, int64_t block_size,
                                         const TensorView& token_slot_mapping,
                                         const MutableTensorView& slot_mapping,
                                         const Options& options = {});

// swa_window_indices (§6): each token's SWA window slots, oldest first, −1 after its length.
// Shapes:    positions [T], token_to_req [T], block_table [R, MB] (the SWA group), window W >= 1
//            (kSlidingWindow), block_size P (kSwaBlockSize); indices I64 [T, W]; optional lens
//            I32 [T].
// Allocates: ref: nothing; opt: I64 copies of I32 inputs.
DSV4CPU_API void swa_window_indices(const TensorView& positions, const TensorView& token_to_req,
                                    const TensorView& block_table, int64_t window,
                                    int64_t block_size, const MutableTensorView& indices,
                                    const MutableTensorView& lens = MutableTensorView(),
                                    const Options& options = {});

// c128a_topk_indices (§7.1, CPU form): per token the slots of every C128A entry visible so far
// (n_t = (pos_t + 1) / 128 of them), then −1.
// Shapes:    positions [T] (each < max_model_len), token_to_req [T], block_table [R, MB] (the
//            C128A group), max_model_len >= 1, block_size P_c (compressed_block_size(128));
//            indices I64 [T, Wc], Wc = c128a_topk_width(max_model_len).
// Allocates: O(T + R·Wc) bytes (opt: each request's longest slot row).
DSV4CPU_API void c128a_topk_indices(const TensorView& positions, const TensorView& token_to_req,
                                    const TensorView& block_table, int64_t max_model_len,
                                    int64_t block_size, const MutableTensorView& indices,
                                    const Options& options = {});
// Wc = ceil(max_model_len / 128); ValueError for max_model_len < 1.
DSV4CPU_API int64_t c128a_topk_width(int64_t max_model_len);

// §7.1, compact form (docs/metadata.md): the same rows cut to any width W >= the step's longest
// compressed length max_t (positions[t] + 1) / 128, which c128a_compact_width returns (0 for an
// empty step; IndexError for a negative position). indices I64 [T, W]; columns beyond a token's
// n_t are -1. A token with n_t > W is an IndexError. Allocates as c128a_topk_indices.
DSV4CPU_API int64_t c128a_compact_width(const TensorView& positions);
DSV4CPU_API void c128a_topk_indices_compact(const TensorView& positions,
                                            const TensorView& token_to_req,
                                            const TensorView& block_table, int64_t block_size,
                                            const MutableTensorView& indices,
                                            const Options& options = {});

// c128a_decode_metadata (§7.2, GPU form, for parity). The outputs' common width is the active
// width Wa: a multiple of 128, <= Wmax = c128a_decode_max_width(max_model_len) (ShapeError
// otherwise), and >= every token's n_t (IndexError otherwise).
// Shapes:    positions [T], token_to_req [T], block_table [R, MB], max_model_len >= 1, block_size
//            P_c, num_decode_tokens nd in [0, T] (ValueError otherwise), optional
//            token_slot_mapping [T]; decode_global I64 [nd, Wa], decode_lens I32 [nd],
//            prefill_local I32 [T − nd, Wa].
// Allocates: O(T + R·Wa) bytes.
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

// c4a_global_topk_indices (§8): the indexer's local selections mapped to C4A cache slots, and
// each row's count of valid entries.
// Shapes:    topk_indices [T, K] (unit inner stride; K = kIndexerTopk in the model), entries >= −1;
//            token_to_req [T], block_table [R, MB] (the C4A group), block_size P_c; optional
//            token_slot_mapping [T]; indices I64 [T, K], lens I32 [T].
// Allocates: O(T + R·MB) bytes.
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

// indexer_metadata (§9.1-9.5): the indexer's metadata of one step.
// Shapes:    query_start_loc [R + 1], seq_lens [R] (seq_lens / 4 and the prefill total fit int32),
//            block_table [R, MB] (the indexer group), block_size P, next_n >= 1 (1 +
//            speculative tokens: the split threshold and the width of decode_seq_lens);
//            slot_mapping I64 [num_tokens_padded] (>= T) receives §5 with ratio 4.
// Writes:    slot_mapping; the other fields are returned.
// Allocates: the returned vectors (O(R + T + the prefill requests' total compressed length)) and
//            O(R) temporary bytes.
DSV4CPU_API IndexerMetadata indexer_metadata(const TensorView& query_start_loc,
                                             const TensorView& seq_lens,
                                             const TensorView& block_table, int64_t block_size,
                                             int64_t next_n, const MutableTensorView& slot_mapping,
                                             const Options& options = {});

// split_indexer_prefill_chunks (§9.3 base rule): chunk-relative query slices of requests
// [req_start, req_end) (absolute, i.e. offset by request_offset). Returns the base rule's list as
// is: chunks whose requests have total compressed length 0 are kept (vLLM drops them afterwards;
// see docs/metadata.md).
// Shapes:    compressed_lens [n] (>= 0), query_lens [n] (>= 1); workspace >= 1,
//            max_logits_bytes >= 4, request_offset >= 0.
// Writes:    nothing: the chunks are returned. Allocates: the returned vector.
// Threads:   the calling thread.
struct PrefillChunk {
  int64_t req_start = 0, req_end = 0;
  int64_t q_start = 0, q_end = 0;
};
DSV4CPU_API std::vector<PrefillChunk> split_indexer_prefill_chunks(
    const TensorView& compressed_lens, const TensorView& query_lens, int64_t workspace,
    int64_t max_logits_bytes, int64_t request_offset, const Options& options = {});

// build_tile_scheduler (§10): "none" for layer_kind "swaonly", "c4a" and "c128a"; ValueError for
// any other kind. Allocates the returned string; the calling thread.
DSV4CPU_API std::string build_tile_scheduler(std::string_view layer_kind,
                                             const Options& options = {});

}  // namespace dsv4cpu
