// The sizes of the caches and per-token arrays the ops read and write (spec README "Per-kind
// derived sizes", compressor.md §2, §3.1, §6.3, §7, indexer.md §1, §3), so that no caller
// hand-computes a byte count. Every function is constexpr and checks nothing: arguments outside
// the stated domain give meaningless sizes (the ops themselves validate their arguments).
#pragma once
#include <cstdint>

namespace dsv4cpu {

// ---- entries and pages of the fp8 caches (byte counts of the packed layout) ----

// compressor.md §6.3: one fp8_ds_mla entry: 448 fp8 NoPE codes, 64 bf16 RoPE values, 7 UE8M0 scale
// bytes and a pad byte. The main compressed caches (C4A, C128A) and the SWA cache use it.
inline constexpr int64_t kFp8DsMlaEntryBytes = 584;
// compressor.md §7, indexer.md §3: one indexer K entry: 128 fp8 codes and a raw fp32 scale.
inline constexpr int64_t kIndexerKEntryBytes = 132;

// Packed bytes of an fp8_ds_mla page of P entries: P·576 data bytes, then P·8 scale bytes. A
// page's stride (kv_cache.stride(0)) may be larger; page_bytes (kv_cache.shape[1]) must be at
// least this.
constexpr int64_t fp8_ds_mla_page_bytes(int64_t block_size) {
  return block_size * kFp8DsMlaEntryBytes;
}
// Packed bytes of an indexer K page of P entries: P·128 code bytes, then P fp32 scales.
constexpr int64_t indexer_k_page_bytes(int64_t block_size) {
  return block_size * kIndexerKEntryBytes;
}

// ---- the model's page sizes (entries per page; spec README, metadata.md §1) ----

// The KV-cache block of every compressed group covers 256 tokens.
inline constexpr int64_t kTokensPerCompressedBlock = 256;
// Compressed entries per page of a compressed group (the "storage block size"), 256 / r: 64 for
// C4A and the indexer K cache (r = 4), 2 for C128A (r = 128).
constexpr int64_t compressed_block_size(int64_t compress_ratio) {
  return kTokensPerCompressedBlock / compress_ratio;
}
// Tokens per page of the SWA cache.
inline constexpr int64_t kSwaBlockSize = 64;
// The SWA window (sliding_window): the last 128 tokens.
inline constexpr int64_t kSlidingWindow = 128;

// ---- the compressor (compressor.md §2, §3.1) ----

// Head dims HD: 512 for the main compressor, 128 for the indexer compressor.
inline constexpr int64_t kMainHeadDim = 512;
inline constexpr int64_t kIndexerHeadDim = 128;
// Columns of a cos_sin_cache row: 32 cos then 32 sin (compressor.md §8.1).
inline constexpr int64_t kCosSinColumns = 64;

// Whether the model's compressor of ratio r overlaps (coff = 2): ratio 4 does, ratio 128 does not.
constexpr bool compressor_overlap(int64_t compress_ratio) { return compress_ratio == 4; }
// The window W = coff·r: state rows pooled per compressed entry (gather_slots.shape[1]).
constexpr int64_t compressor_window(int64_t compress_ratio, bool overlap) {
  return (overlap ? 2 : 1) * compress_ratio;
}
// The model's window: 8 for ratio 4, 128 for ratio 128.
constexpr int64_t compressor_window(int64_t compress_ratio) {
  return compressor_window(compress_ratio, compressor_overlap(compress_ratio));
}
// SW = coff·HD, the width of kv, score and ape (ape is [r, SW]).
constexpr int64_t compressor_state_width(int64_t head_dim, bool overlap) {
  return (overlap ? 2 : 1) * head_dim;
}
// The model's SW for (ratio, head dim): 1024 (C4A main), 512 (C128A main), 256 (C4A indexer).
constexpr int64_t compressor_state_width(int64_t compress_ratio, int64_t head_dim) {
  return compressor_state_width(head_dim, compressor_overlap(compress_ratio));
}
// Floats of one state row, 2·SW: the kv half then the score (+ ape) half; state_cache.shape[2].
constexpr int64_t compressor_state_row_floats(int64_t compress_ratio, int64_t head_dim) {
  return 2 * compressor_state_width(compress_ratio, head_dim);
}
// The model's state page rows sbs (state_cache.shape[1], the state group's block size): 4 for
// ratio 4, 8 for ratio 128.
constexpr int64_t compressor_state_block_size(int64_t compress_ratio) {
  return compress_ratio == 4 ? 4 : 8;
}
// Floats of a packed state page of `state_block_size` rows, sbs·2·SW: the minimum page stride
// (state_cache.stride(0)) of the 3-D view [nb, sbs, 2·SW].
constexpr int64_t compressor_state_page_floats(int64_t state_block_size, int64_t compress_ratio,
                                               int64_t head_dim) {
  return state_block_size * compressor_state_row_floats(compress_ratio, head_dim);
}

// ---- the indexer (indexer.md §1, §5) ----

// Heads of the indexer query (index_n_heads) in both checkpoints.
inline constexpr int64_t kIndexerHeads = 64;
// Selected entries per query token (index_topk of V4-Flash): the columns topk_transform_512,
// short_context_topk and indexer_topk write.
inline constexpr int64_t kIndexerTopk = 512;

}  // namespace dsv4cpu
