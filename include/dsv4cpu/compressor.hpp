// KV compressor ops (compressor.md). Every op follows the contract of options.hpp (errors before
// any write, aliasing, threads, zero-size calls); each comment below adds the op's Shapes (with
// the cache_sizes.hpp helper that gives each size), Writes, Allocates, Throws and Threads. All
// allocations are temporary (released before the call returns) unless said otherwise.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "dsv4cpu/cache_sizes.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/export.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// save_partial_states (compressor.md §3): each token's kv row and RN(score + ape) row into its
// state row.
// Shapes:    ape F32 [r, SW] contiguous, r in {4, 128}, SW in {128, 256, 512, 1024}
//            (compressor_state_width(r, HD)); kv, score F32 [N, SW], unit column stride, row
//            stride >= SW; positions I32/I64 [N]; slot_mapping I32/I64 [N], a state slot
//            g = page·sbs + row, or -1; state_cache F32 [nb, sbs, 2·SW] (in place) with strides
//            [>= sbs·2·SW, 2·SW, 1]: a padded page array [nb, page_floats] is passed as that 3-D
//            view with stride(0) = page_floats (compressor_state_page_floats gives the packed
//            minimum, compressor_state_row_floats the row).
// Writes:    for each token with g >= 0 the 2·SW floats of state row g (kv, then score + ape);
//            nothing else, page padding included.
// Allocates: O(r) bytes; the distinct-slot check keeps a bitmap of one bit per state slot (at most
//            max(128 KiB, 8·N bytes)) per calling thread for its next call.
// Throws:    ShapeError (shapes, state_cache overlapping an input); ValueError (r or SW);
//            IndexError (negative position, slot outside [-1, nb·sbs), a slot written twice);
//            NonFiniteError (kv, score or the ape row of a written token not finite; score + ape
//            overflowing).
// Threads:   hwy: tokens split across threads.
DSV4CPU_API void save_partial_states(const TensorView& kv, const TensorView& score,
                                     const TensorView& ape, const TensorView& positions,
                                     const MutableTensorView& state_cache,
                                     const TensorView& slot_mapping, const Options& options = {});

// map_local_to_global_slots (compressor.md §4.1): local indices to slots through a block table,
// slots[n, k] = block_table[req_idx[n]][l / P]·P + l % P, -1 for any negative local l.
// Shapes:    local_indices I32/I64 [N, K], unit inner stride; req_idx I32/I64 [N]; block_table
//            I32/I64 [R, MB], contiguous rows, row stride >= MB; block_size P >= 1; slots I64
//            [N, K], contiguous.
// Writes:    every element of slots.
// Allocates: nothing.
// Throws:    ValueError (P < 1); ShapeError; IndexError (req_idx outside [0, R), a referenced
//            block-table column >= MB or entry < 0, a slot overflowing int64).
// Threads:   hwy: rows split across threads.
DSV4CPU_API void map_local_to_global_slots(const TensorView& local_indices,
                                           const TensorView& req_idx, const TensorView& block_table,
                                           int64_t block_size, const MutableTensorView& slots,
                                           const Options& options = {});

// compressor_window_slots (compressor.md §4.2): the W state slots each token pools, oldest first:
// gather_slots[t, w] maps local index positions[t] − W + 1 + w (w = W − 1 is the token itself).
// Shapes:    positions I32/I64 [N]; token_to_req I32/I64 [N]; block_table I32/I64 [R, MB] (the
//            state group), contiguous rows; block_size sbs >= 1; compress_ratio r in {4, 128};
//            gather_slots I64 [N, W], contiguous, W = (1 + overlap)·r (compressor_window).
// Writes:    every element of gather_slots.
// Allocates: nothing.
// Throws:    ValueError (sbs < 1, r); ShapeError; IndexError (negative position, request index
//            outside [0, R), a referenced block-table column >= MB or entry < 0).
// Threads:   reference only: the calling thread.
DSV4CPU_API void compressor_window_slots(const TensorView& positions,
                                         const TensorView& token_to_req,
                                         const TensorView& block_table, int64_t block_size,
                                         int64_t compress_ratio, bool overlap,
                                         const MutableTensorView& gather_slots,
                                         const Options& options = {});

// compress_norm_rope_store (compressor.md §6, head HD = 512): each emitting token (position p with
// (p + 1) % r == 0 and kv_slot_mapping[t] >= 0) pools its window, RMSNorm, RoPE (table row
// (p / r)·r), fp8 + UE8M0, into one fp8_ds_mla entry of the compressed cache.
// Shapes:    state_cache F32 [nb, sbs, 2·SW] as for save_partial_states, read only, with
//            SW = (W / r)·HD; gather_slots I32/I64 [N, W], contiguous, W in {r, 2r}; positions,
//            kv_slot_mapping I32/I64 [N]; rms_norm_weight F32 [HD]; cos_sin_cache F32 [R, 64]
//            contiguous; kv_cache U8 [nblk, page_bytes] (in place), unit inner stride, page
//            stride >= page_bytes >= P·584 (fp8_ds_mla_page_bytes(P)); rms_norm_eps finite,
//            >= 0; kv_cache_block_size P >= 1 (entries per page, compressed_block_size(r));
//            compress_ratio r in {4, 128}; scale_clamp (numerics.md §4).
// Writes:    per emitting token the 584 bytes of entry j = slot % P of page slot / P: data bytes
//            [j·576, j·576 + 576) and scale bytes [P·576 + 8j, P·576 + 8j + 8) (the last a 0x00
//            pad); nothing else, page padding included.
// Allocates: O(N) bytes, scratch for the emitting tokens' entries (ref: 584 bytes, hwy: 584 bytes
//            plus 2 KiB of pooled values per emitting token), and the distinct-slot bitmap of
//            save_partial_states (one bit per cache slot, kept per calling thread).
// Throws:    ValueError (rms_norm_eps, P < 1, r); ShapeError (shapes, kv_cache overlapping an
//            input); IndexError (negative position, a slot outside [-1, nb·sbs) or [-1, nblk·P),
//            an emitting token's RoPE row >= R or own window row W − 1 = -1, two emitting tokens
//            on one slot); NonFiniteError (rms_norm_weight or a used cos/sin row not finite; a
//            non-finite intermediate of an emitting token: the error names the state_cache
//            element, window column and slot it came from when a non-finite state value caused
//            it, else the overflowing intermediate).
// Threads:   hwy: emitting tokens and channel blocks split across threads.
DSV4CPU_API void compress_norm_rope_store(
    const TensorView& state_cache, const TensorView& gather_slots, const TensorView& positions,
    const TensorView& kv_slot_mapping, const TensorView& rms_norm_weight,
    const TensorView& cos_sin_cache, const MutableTensorView& kv_cache, double rms_norm_eps,
    int64_t kv_cache_block_size, int64_t compress_ratio, ScaleClamp scale_clamp = ScaleClamp::cpu,
    const Options& options = {});

// compress_norm_rope_store_indexer (compressor.md §7, head HD = 128): the same pipeline into the
// indexer K cache, always clamp-amax (scale_clamp is accepted and ignored).
// Shapes:    as compress_norm_rope_store with HD = 128, rms_norm_weight F32 [128] and kv_cache
//            page_bytes >= P·132 (indexer_k_page_bytes(P)).
// Writes:    per emitting token the 132 bytes of entry j: codes [j·128, j·128 + 128) and the fp32
//            scale [P·128 + 4j, P·128 + 4j + 4); nothing else.
// Allocates: as compress_norm_rope_store, with 132-byte entries and 512 bytes of pooled values.
// Throws:    as compress_norm_rope_store.
// Threads:   as compress_norm_rope_store.
DSV4CPU_API void compress_norm_rope_store_indexer(
    const TensorView& state_cache, const TensorView& gather_slots, const TensorView& positions,
    const TensorView& kv_slot_mapping, const TensorView& rms_norm_weight,
    const TensorView& cos_sin_cache, const MutableTensorView& kv_cache, double rms_norm_eps,
    int64_t kv_cache_block_size, int64_t compress_ratio, ScaleClamp scale_clamp = ScaleClamp::gpu,
    const Options& options = {});

// compressor.md §8.2: YaRN parameters; DeepSeek-V4: {16, 65536, 32, 1, 1.0}.
struct YarnParams {
  double factor = 16;
  double original_max = 65536;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1.0;
};

// make_cos_sin_cache (compressor.md §8.2): the [rows, 64] RoPE table, cos(pos·f_i) in columns
// 0..31 and sin in 32..63, plain (no yarn) or YaRN.
// Shapes:    rows in [0, 2^24]; theta finite, > 1; out F32 [rows, 64], contiguous.
// Writes:    every element of out.
// Allocates: nothing.
// Throws:    ValueError (rows, theta, a YaRN parameter outside its domain: factor >= 1,
//            original_max >= 1, beta_fast > beta_slow > 0, mscale finite and > 0); ShapeError.
// Threads:   the calling thread (reference only; no Options).
DSV4CPU_API void make_cos_sin_cache(int64_t rows, double theta,
                                    const std::optional<YarnParams>& yarn,
                                    const MutableTensorView& out);

// "cpu" / "gpu" -> ScaleClamp; anything else throws ValueError naming `op` and "scale_clamp".
// Allocates nothing unless it throws; thread-safe.
DSV4CPU_API ScaleClamp parse_scale_clamp(const char* op, std::string_view text);

}  // namespace dsv4cpu
