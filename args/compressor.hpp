// The kernel-facing argument packs of the compressor ops (validated by api/ before any variant
// runs, read by every variant) and the kernels of every variant (reference/, optimized/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/registry.hpp"
#include "dsv4cpu/compressor.hpp"

namespace dsv4cpu::detail {

struct SavePartialStatesArgs {
  TensorView kv, score, ape, positions;
  MutableTensorView state_cache;
  TensorView slot_mapping;
  // Derived by validation (compressor.md §3.2): r = ape.shape[0], SW = ape.shape[1],
  // state_cache [nb, sbs, 2·SW].
  int64_t N = 0, SW = 0, r = 0, nb = 0, sbs = 0;
};

struct MapLocalToGlobalSlotsArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView local_indices, req_idx, block_table;
  int64_t block_size;
  MutableTensorView slots;
  // Derived by validation.
  int64_t N = 0, K = 0;
};

struct CompressorWindowSlotsArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView positions, token_to_req, block_table;
  int64_t block_size, compress_ratio;
  bool overlap;
  MutableTensorView gather_slots;
  // Derived by validation: W = (1 + overlap)·r.
  int64_t N = 0, W = 0;
};

// compressor.md §6.3 and §7: what one entry of each head holds.
struct EntryLayout {
  int hd;           // head dim HD: 512 (main) or 128 (indexer)
  int nope;         // NoPE dims, HD − 64; the last 64 dims are rotated
  int quant_dims;   // dims stored as fp8 codes: the NoPE dims (main) or all HD dims (indexer)
  int block;        // quantisation block: a 64-value NoPE tile (main) or the 128-vector (indexer)
  int data_bytes;   // per-entry bytes of the page's data region: 576 or 128
  int scale_bytes;  // per-entry bytes of the scale region: 7 UE8M0 + pad byte, or a raw fp32
  bool raw_scale;   // the scale is a raw little-endian fp32 (indexer), not UE8M0 bytes (main)
  constexpr int entry_bytes() const { return data_bytes + scale_bytes; }  // 584 or 132
};
inline constexpr EntryLayout kMainEntry{512, 448, 448, 64, 576, 8, false};
inline constexpr EntryLayout kIndexerEntry{128, 64, 128, 128, 128, 4, true};
static_assert(kMainEntry.hd == kMainHeadDim && kMainEntry.entry_bytes() == kFp8DsMlaEntryBytes);
static_assert(kIndexerEntry.hd == kIndexerHeadDim &&
              kIndexerEntry.entry_bytes() == kIndexerKEntryBytes);

// compress_norm_rope_store (head 512) and compress_norm_rope_store_indexer (head 128).
struct CompressNormRopeStoreArgs {
  const char* op;  // the op's name, for messages
  EntryLayout layout;
  TensorView state_cache, gather_slots, positions, kv_slot_mapping, rms_norm_weight, cos_sin_cache;
  MutableTensorView kv_cache;
  double rms_norm_eps;
  int64_t kv_cache_block_size, compress_ratio;
  ScaleClamp scale_clamp;
  // Derived by validation. W = gather_slots.shape[1], SW = (W / r)·HD, state_cache
  // [nb, sbs, 2·SW], cos_sin_cache [R, 64], kv_cache [nblk, ≥ P·entry bytes] with P =
  // kv_cache_block_size. clamp is the rule in force (always gpu = clamp-amax for the indexer).
  int64_t N = 0, W = 0, SW = 0, nb = 0, sbs = 0, R = 0, nblk = 0;
  float eps_f = 0.0f;
  ScaleClamp clamp = ScaleClamp::cpu;
};

struct MakeCosSinCacheArgs {
  int64_t rows;
  double theta;
  std::optional<YarnParams> yarn;
  MutableTensorView out;
};

// compressor.md §5: the token at position p >= 0 emits iff (p + 1) % r == 0 and its kv slot is
// valid (written p % r == r - 1, which cannot overflow).
inline bool emits(int64_t position, int64_t kv_slot, int64_t r) {
  return position % r == r - 1 && kv_slot >= 0;
}

// compressor.md §6.2 step 4 (numerics.md §8.5): the cos/sin table row of the entry a token at
// position p >= 0 emits, the position of the entry's first token: (p / r)·r.
inline int64_t rope_row(int64_t position, int64_t r) { return position / r * r; }

// ---- the kernels, registered in api/registry.cpp: void(const Args&, const RunContext&) on
// validated arguments ----

// The scalar fp32 reference kernels (the oracle; reference/compressor.cpp).
namespace ref {

void save_partial_states(const SavePartialStatesArgs& a, const RunContext& ctx);
void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext& ctx);
void compressor_window_slots(const CompressorWindowSlotsArgs& a, const RunContext& ctx);
// Both heads (a.layout): computes every emitting token's entry into scratch, checks it when
// ctx.check_finite (bad-input.md §1.4 (f)), then writes.
void compress_norm_rope_store(const CompressNormRopeStoreArgs& a, const RunContext& ctx);
void make_cos_sin_cache(const MakeCosSinCacheArgs& a, const RunContext& ctx);

}  // namespace ref

// The optimized kernels ("hwy", optimized/compressor_hwy.cpp): Highway, dispatched at run time to
// the best compiled target, OpenMP across tokens. They write the reference's bytes (compressor.md
// §10) on every target and for any thread count. The variants of the compress ops come from the
// table of their kernel family (DSV4CPU_COMPRESSOR_KERNELS, optimized/compressor_kernel.hpp).
namespace opt {

void save_partial_states(const SavePartialStatesArgs& a, const RunContext& ctx);
void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext& ctx);
// Its rows [n0, n1) on the calling thread; `stream`: non-temporal stores of the slots (outputs far
// larger than the caches); `valid` (when not null): row n's count of locals >= 0 at valid[n].
void map_slot_rows(const MapLocalToGlobalSlotsArgs& a, int64_t n0, int64_t n1, bool stream,
                   int32_t* valid);

}  // namespace opt

}  // namespace dsv4cpu::detail
