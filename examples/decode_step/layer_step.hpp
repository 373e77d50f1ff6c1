// One step of one C4A attention layer of DeepSeek-V4 for a batch of decode requests, as an engine
// runs it through dsv4cpu: every buffer the step reads and writes, owned here, and the library
// calls in the order an engine makes them (layer_step.cpp). The benchmark (bench/) and the test
// (tests/) of the library reuse this file.
//
// Synthetic but valid data: deterministic weights, this step's projections, and caches filled as
// if each request's context had already been processed (fp8_ds_mla entries, indexer K entries,
// compressor state rows). Request b has seq_len = context - b % 4 after the step, so one request in
// four completes a compressed entry in this step.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/metadata.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace decode_step {

// The fixed sizes of a C4A layer (spec README, "Per-kind derived sizes").
inline constexpr int64_t kHeadDim = 512;        // latent K = V row: 448 NoPE + 64 RoPE dims
inline constexpr int64_t kMlaEntryBytes = 584;  // fp8_ds_mla entry (SWA and C4A caches)
inline constexpr int64_t kWindow = 128;         // sliding window, raw tokens
inline constexpr int64_t kSwaBlock = 64;        // SWA cache: tokens per page
inline constexpr int64_t kRatio = 4;            // compress ratio
inline constexpr int64_t kCompressedBlock = 64;  // C4A and indexer K caches: entries per page
inline constexpr int64_t kStateBlock = 4;       // compressor state cache: rows per page (sbs)
inline constexpr int64_t kPoolWindow = 8;       // state rows pooled per entry: W = coff · ratio
inline constexpr int64_t kMainSW = 1024;        // main compressor: SW = coff · 512
inline constexpr int64_t kIndexSW = 256;        // indexer compressor: SW = coff · 128
inline constexpr int64_t kIndexHeads = 64;      // index_n_heads
inline constexpr int64_t kIndexDim = 128;       // index_head_dim
inline constexpr int64_t kIndexEntryBytes = 132;
inline constexpr int64_t kTopk = 512;  // index_topk of V4-Flash (used for both head counts here)
inline constexpr double kRmsNormEps = 1e-6;

struct Shape {
  int64_t batch = 8;        // decode requests, one query token each
  int64_t context = 32768;  // seq_len of the longest request after the step (>= 4)
  int64_t heads = 64;       // attention heads: 64 (V4-Flash) or 128 (V4-Pro)
  uint64_t seed = 1;
};

// Which variant of each op runs: a role for all ops, or a registry variant name per op.
struct StepOptions {
  dsv4cpu::Impl impl = dsv4cpu::Impl::optimized;
  int threads = 1;
  std::map<std::string, std::string, std::less<>> variants;  // op name -> variant name
  dsv4cpu::Options for_op(std::string_view op) const;
};

// Seconds spent in each call, in call order, summed over the steps timed. A call is named by its
// op, with the cache or compressor it serves where an op is called more than once
// ("slot_mapping:swa").
struct Timing {
  struct Entry {
    std::string call;
    double seconds = 0;
  };
  std::vector<Entry> calls;
  int64_t steps = 0;
  void add(std::string_view call, double seconds);
  double total() const;
};
// The op of a call name: "slot_mapping:swa" -> "slot_mapping".
std::string_view op_of(std::string_view call);

// A paged cache and its block table. Pages have a byte stride rounded up to a multiple of 576, as
// an engine may allocate them; every op takes the stride from the view. The block table holds
// I32 [batch, columns] page ids, -1 where the request holds no page (pages behind the sliding
// window, compressor state rows no longer pooled): the library reads only the entries its
// formulas need.
struct PagedCache {
  int64_t block_size = 0;  // local indices per page
  int64_t page_bytes = 0;  // packed bytes of a page
  int64_t page_stride = 0;
  int64_t pages = 0;
  int64_t requests = 0, columns = 0;
  std::vector<int32_t> block_table;
  std::vector<uint8_t> bytes;

  // Request b holds pages for the local indices [first[b], end[b]) (whole pages around them).
  PagedCache(int64_t block_size, int64_t page_bytes, const std::vector<int64_t>& first,
             const std::vector<int64_t>& end, uint64_t seed);
  PagedCache() = default;
  dsv4cpu::TensorView table() const;
  // U8 [pages, page_bytes] with the page stride.
  dsv4cpu::TensorView cache() const;
  dsv4cpu::MutableTensorView cache_out();
  // The compressor state cache: F32 [pages, block_size, row] with the page stride.
  dsv4cpu::TensorView state(int64_t row) const;
  dsv4cpu::MutableTensorView state_out(int64_t row);
};

struct LayerStep {
  explicit LayerStep(const Shape& shape);

  // The whole step: the five phases below, in order.
  void run(const StepOptions& o, Timing* timing = nullptr);
  // The metadata builders (metadata.md): once per step, shared by every layer of the kind.
  void build_metadata(const StepOptions& o, Timing* timing = nullptr);
  // The SWA insert: q RMSNorm + RoPE, this step's kv rows into the SWA cache (attention.md §3).
  void insert(const StepOptions& o, Timing* timing = nullptr);
  // The main and indexer compressors (compressor.md §1).
  void compress(const StepOptions& o, Timing* timing = nullptr);
  // The indexer: Q quantisation, then the top-512 local compressed indices per token (indexer.md).
  void select(const StepOptions& o, Timing* timing = nullptr);
  // The selection as C4A cache slots, and the attention (attention.md §2).
  void attend(const StepOptions& o, Timing* timing = nullptr);

  Shape shape;
  int64_t T = 0;  // query tokens = batch

  // ---- the scheduler's batch ----
  std::vector<int32_t> query_start_loc;  // [B + 1]
  std::vector<int32_t> seq_lens;         // [B]

  // ---- caches ----
  PagedCache swa;          // fp8_ds_mla, one entry per token
  PagedCache c4a;          // fp8_ds_mla, one entry per compressed entry
  PagedCache index_k;      // indexer K, 132-byte entries
  PagedCache main_state;   // fp32 rows of 2·kMainSW
  PagedCache index_state;  // fp32 rows of 2·kIndexSW

  // ---- layer weights ----
  std::vector<float> main_ape, index_ape;    // F32 [4, SW]
  std::vector<float> main_norm, index_norm;  // F32 [512], [128] (bf16 values, widened)
  std::vector<float> attn_sink;              // F32 [H]
  int64_t cos_sin_rows = 0;
  std::vector<float> cos_sin;  // F32 [rows, 64]: theta 160000 with YaRN (compressor.md §8)

  // ---- this step's projections (computed upstream of the library) ----
  std::vector<uint16_t> q;               // BF16 [T, H, 512]
  std::vector<uint16_t> swa_kv;          // BF16 [T, 512]
  std::vector<float> main_kv_score;      // F32 [T, 2·kMainSW]: kv | score
  std::vector<float> index_kv_score;     // F32 [T, 2·kIndexSW]: kv | score
  std::vector<float> index_q;            // F32 [T, 64, 128]
  std::vector<float> index_weights;      // F32 [T, 64]

  // ---- metadata ----
  std::vector<int64_t> positions;          // [T]
  std::vector<int32_t> token_to_req;       // [T]
  std::vector<int64_t> swa_slots;          // [T] SWA cache slot of each token
  std::vector<int64_t> main_state_slots;   // [T]
  std::vector<int64_t> index_state_slots;  // [T]
  std::vector<int64_t> main_pool_slots;    // [T, 8] state rows each token pools
  std::vector<int64_t> index_pool_slots;   // [T, 8]
  std::vector<int64_t> c4a_slots;          // [T] C4A entry a token writes, or -1
  std::vector<int64_t> index_k_slots;      // [T] indexer K entry a token writes, or -1
  dsv4cpu::IndexerMetadata indexer;        // compressed lengths, decode fields
  std::vector<int64_t> window_slots;       // [T, 128] SWA window, oldest first
  bool short_context = false;              // every compressed length <= 512: identity rows

  // ---- results ----
  std::vector<uint16_t> q_out;             // BF16 [T, H, 512]
  std::vector<uint8_t> index_q_fp8;        // F8_E4M3 [T, 64, 128]
  std::vector<float> index_weights_out;    // F32 [T, 64]
  int64_t logits_width = 0;                // S: the longest compressed length (0: short context)
  std::vector<float> logits;               // F32 [T, S]
  std::vector<int32_t> topk;               // I32 [T, 512] local compressed indices, -1 padded
  std::vector<int64_t> compressed_slots;   // I64 [T, 512] C4A cache slots, -1 padded
  std::vector<int32_t> compressed_lens;    // I32 [T]
  std::vector<uint16_t> out;               // BF16 [T, H, 512] attention output
};

}  // namespace decode_step
