// One C4A layer step for a batch of decode requests (attention.md §1): the library calls in the
// order an engine makes them, each with the buffers it reads and writes.
#include "layer_step.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"

namespace decode_step {

using dsv4cpu::DType;
using dsv4cpu::MutableTensorView;
using dsv4cpu::TensorView;

dsv4cpu::Options StepOptions::for_op(std::string_view op) const {
  dsv4cpu::Options o;
  o.impl = impl;
  o.num_threads = threads;
  if (const auto it = variants.find(op); it != variants.end()) o.variant = it->second;
  return o;
}

void Timing::add(std::string_view call, double seconds) {
  for (Entry& e : calls)
    if (e.call == call) {
      e.seconds += seconds;
      return;
    }
  calls.push_back({std::string(call), seconds});
}

double Timing::total() const {
  double s = 0;
  for (const Entry& e : calls) s += e.seconds;
  return s;
}

std::string_view op_of(std::string_view call) { return call.substr(0, call.find(':')); }

namespace {

// Runs f, adding its wall-clock time to `timing` under `call`.
template <class F>
void timed(Timing* timing, std::string_view call, F&& f) {
  if (timing == nullptr) return f();
  const auto start = std::chrono::steady_clock::now();
  f();
  const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
  timing->add(call, s.count());
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

size_t sz(int64_t n) { return static_cast<size_t>(n); }

std::vector<float> normal(int64_t n, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(sz(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Values as a bf16 GEMM produces them (vLLM's projections), widened or as raw bf16.
std::vector<float> normal_bf16_values(int64_t n, float mean, float sigma, std::mt19937_64& rng) {
  std::vector<float> v = normal(n, sigma, rng);
  for (float& x : v) x = dsv4cpu::round_bf16(mean + x);
  return v;
}
std::vector<uint16_t> normal_bf16(int64_t n, std::mt19937_64& rng) {
  std::vector<uint16_t> v(sz(n));
  for (uint16_t& x : v) x = dsv4cpu::to_bf16(std::normal_distribution<float>()(rng));
  return v;
}

// A random finite e4m3 code: 0x7F and 0xFF (the NaN codes) become 0x7E and 0xFE.
uint8_t finite_code(uint64_t r) {
  const auto c = static_cast<uint8_t>(r);
  return (c & 0x7F) == 0x7F ? static_cast<uint8_t>(c - 1) : c;
}

// Every entry of every page as compressor.md §6.3 lays it out: random finite NoPE codes, UE8M0
// scale bytes 119..121 (tiles of |values| up to 3.5, as the writers give for RMS-normalised rows),
// RoPE values bf16 of N(0, 1), pad byte 0.
void fill_mla_entries(PagedCache& c, std::mt19937_64& rng) {
  std::normal_distribution<float> rope(0.0f, 1.0f);
  const int64_t P = c.block_size;
  for (int64_t page = 0; page < c.pages; ++page) {
    uint8_t* base = c.bytes.data() + page * c.page_stride;
    for (int64_t j = 0; j < P; ++j) {
      uint8_t* data = base + j * 576;
      for (int d = 0; d < 448; ++d) data[d] = finite_code(rng());
      for (int k = 0; k < 64; ++k) {
        const uint16_t r = dsv4cpu::to_bf16(rope(rng));
        std::memcpy(data + 448 + 2 * k, &r, 2);  // little-endian host
      }
      uint8_t* scales = base + P * 576 + 8 * j;
      for (int q = 0; q < 7; ++q) scales[q] = static_cast<uint8_t>(119 + rng() % 3);
      scales[7] = 0;
    }
  }
}

// Every indexer K entry (compressor.md §7): random finite codes, key scale 2^-8 or 2^-7.
void fill_index_entries(PagedCache& c, std::mt19937_64& rng) {
  const int64_t P = c.block_size;
  for (int64_t page = 0; page < c.pages; ++page) {
    uint8_t* base = c.bytes.data() + page * c.page_stride;
    for (int64_t i = 0; i < P * kIndexDim; ++i) base[i] = finite_code(rng());
    for (int64_t j = 0; j < P; ++j) {
      const float scale = dsv4cpu::pow2f(-8 + static_cast<int>(rng() % 2));
      std::memcpy(base + P * kIndexDim + 4 * j, &scale, 4);
    }
  }
}

// Every state row: kv and score + ape values of N(0, 1).
void fill_state_rows(PagedCache& c, int64_t row, std::mt19937_64& rng) {
  std::normal_distribution<float> dist;
  for (int64_t page = 0; page < c.pages; ++page) {
    float* base = reinterpret_cast<float*>(c.bytes.data() + page * c.page_stride);
    for (int64_t i = 0; i < c.block_size * row; ++i) base[i] = dist(rng);
  }
}

}  // namespace

PagedCache::PagedCache(int64_t block_size_, int64_t page_bytes_, const std::vector<int64_t>& first,
                       const std::vector<int64_t>& end, uint64_t seed)
    : block_size(block_size_),
      page_bytes(page_bytes_),
      page_stride(ceil_div(page_bytes_, 576) * 576) {
  requests = static_cast<int64_t>(first.size());
  const int64_t B = requests;
  for (int64_t b = 0; b < B; ++b) {
    columns = std::max(columns, ceil_div(end[sz(b)], block_size));
    pages += ceil_div(end[sz(b)], block_size) - first[sz(b)] / block_size;
  }
  // Physical pages in the order an allocator hands them out: shuffled.
  std::vector<int32_t> ids(sz(pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  block_table.assign(sz(B * columns), -1);
  size_t next = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t col = first[sz(b)] / block_size; col < ceil_div(end[sz(b)], block_size); ++col)
      block_table[sz(b * columns + col)] = ids[next++];
  bytes.assign(sz(pages * page_stride), 0);
}

TensorView PagedCache::table() const {
  return TensorView(block_table.data(), DType::I32, {requests, columns});
}
TensorView PagedCache::cache() const {
  return TensorView(bytes.data(), DType::U8, {pages, page_bytes}, {page_stride, 1});
}
MutableTensorView PagedCache::cache_out() {
  return MutableTensorView(bytes.data(), DType::U8, {pages, page_bytes}, {page_stride, 1});
}
TensorView PagedCache::state(int64_t row) const {
  return TensorView(bytes.data(), DType::F32, {pages, block_size, row},
                    {page_stride / 4, row, 1});
}
MutableTensorView PagedCache::state_out(int64_t row) {
  return MutableTensorView(bytes.data(), DType::F32, {pages, block_size, row},
                           {page_stride / 4, row, 1});
}

LayerStep::LayerStep(const Shape& s) : shape(s), T(s.batch) {
  if (s.batch < 1 || s.context < 4 || (s.heads != 64 && s.heads != 128))
    throw std::invalid_argument("decode_step: batch >= 1, context >= 4 and heads 64 or 128");
  const int64_t B = s.batch, H = s.heads;
  std::mt19937_64 rng(s.seed);

  // The batch: B decode requests of one token, request b at seq_len context - b % 4.
  for (int64_t b = 0; b <= B; ++b) query_start_loc.push_back(static_cast<int32_t>(b));
  for (int64_t b = 0; b < B; ++b) seq_lens.push_back(static_cast<int32_t>(s.context - b % 4));

  // Caches, holding pages for what this step reads and writes: the last kWindow tokens (SWA), the
  // last kPoolWindow state rows, and every compressed entry of the request.
  std::vector<int64_t> zero(sz(B), 0), swa_first, state_first, tokens, entries;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = seq_lens[sz(b)];
    swa_first.push_back(std::max<int64_t>(0, len - kWindow));
    state_first.push_back(std::max<int64_t>(0, len - kPoolWindow));
    tokens.push_back(len);
    entries.push_back(len / kRatio);
  }
  swa = PagedCache(kSwaBlock, kSwaBlock * kMlaEntryBytes, swa_first, tokens, rng());
  c4a = PagedCache(kCompressedBlock, kCompressedBlock * kMlaEntryBytes, zero, entries, rng());
  index_k = PagedCache(kCompressedBlock, kCompressedBlock * kIndexEntryBytes, zero, entries, rng());
  main_state = PagedCache(kStateBlock, kStateBlock * 2 * kMainSW * 4, state_first, tokens, rng());
  index_state = PagedCache(kStateBlock, kStateBlock * 2 * kIndexSW * 4, state_first, tokens, rng());
  fill_mla_entries(swa, rng);
  fill_mla_entries(c4a, rng);
  fill_index_entries(index_k, rng);
  fill_state_rows(main_state, 2 * kMainSW, rng);
  fill_state_rows(index_state, 2 * kIndexSW, rng);

  // Layer weights.
  main_ape = normal(kRatio * kMainSW, 0.1f, rng);
  index_ape = normal(kRatio * kIndexSW, 0.1f, rng);
  main_norm = normal_bf16_values(kHeadDim, 1.0f, 0.1f, rng);
  index_norm = normal_bf16_values(kIndexDim, 1.0f, 0.1f, rng);
  attn_sink = normal(H, 1.0f, rng);
  cos_sin_rows = s.context;
  cos_sin.resize(sz(cos_sin_rows * 64));
  dsv4cpu::make_cos_sin_cache(cos_sin_rows, 160000.0, dsv4cpu::YarnParams{},
                              MutableTensorView(cos_sin.data(), DType::F32, {cos_sin_rows, 64}));

  // This step's projections.
  q = normal_bf16(T * H * kHeadDim, rng);
  swa_kv = normal_bf16(T * kHeadDim, rng);
  main_kv_score = normal_bf16_values(T * 2 * kMainSW, 0.0f, 1.0f, rng);
  index_kv_score = normal_bf16_values(T * 2 * kIndexSW, 0.0f, 1.0f, rng);
  index_q = normal_bf16_values(T * kIndexHeads * kIndexDim, 0.0f, 1.0f, rng);
  index_weights = normal_bf16_values(T * kIndexHeads, 0.0f, 1.0f, rng);

  // Metadata and results, written by the step.
  positions.resize(sz(T));
  token_to_req.resize(sz(T));
  swa_slots.resize(sz(T));
  main_state_slots.resize(sz(T));
  index_state_slots.resize(sz(T));
  main_pool_slots.resize(sz(T * kPoolWindow));
  index_pool_slots.resize(sz(T * kPoolWindow));
  c4a_slots.resize(sz(T));
  index_k_slots.resize(sz(T));
  window_slots.resize(sz(T * kWindow));
  q_out.resize(sz(T * H * kHeadDim));
  index_q_fp8.resize(sz(T * kIndexHeads * kIndexDim));
  index_weights_out.resize(sz(T * kIndexHeads));
  topk.resize(sz(T * kTopk));
  compressed_slots.resize(sz(T * kTopk));
  compressed_lens.resize(sz(T));
  out.resize(sz(T * H * kHeadDim));
}

void LayerStep::run(const StepOptions& o, Timing* timing) {
  build_metadata(o, timing);
  insert(o, timing);
  compress(o, timing);
  select(o, timing);
  attend(o, timing);
  if (timing != nullptr) ++timing->steps;
}

void LayerStep::build_metadata(const StepOptions& o, Timing* timing) {
  const int64_t B = shape.batch;
  const TensorView qsl(query_start_loc.data(), DType::I32, {B + 1});
  const TensorView lens(seq_lens.data(), DType::I32, {B});
  const TensorView pos(positions.data(), DType::I64, {T});
  const TensorView req(token_to_req.data(), DType::I32, {T});
  // metadata.md §2: positions I64 [T] and token_to_req I32 [T] from qsl and seq_lens.
  timed(timing, "token_positions", [&] {
    dsv4cpu::token_positions(qsl, lens, MutableTensorView(positions.data(), DType::I64, {T}),
                             MutableTensorView(token_to_req.data(), DType::I32, {T}),
                             o.for_op("token_positions"));
  });
  // §3: each token's slot in the SWA cache and in both compressor state caches.
  const auto map_tokens = [&](const char* call, const PagedCache& cache,
                              std::vector<int64_t>& slots) {
    timed(timing, call, [&] {
      dsv4cpu::slot_mapping(pos, req, cache.table(), cache.block_size,
                            MutableTensorView(slots.data(), DType::I64, {T}),
                            o.for_op("slot_mapping"));
    });
  };
  map_tokens("slot_mapping:swa", swa, swa_slots);
  map_tokens("slot_mapping:main_state", main_state, main_state_slots);
  map_tokens("slot_mapping:index_state", index_state, index_state_slots);
  // compressor.md §4.2: the 8 state rows each token pools, oldest first (ratio 4 with overlap).
  const auto pool_window = [&](const char* call, const PagedCache& cache,
                               std::vector<int64_t>& slots) {
    timed(timing, call, [&] {
      dsv4cpu::compressor_window_slots(
          pos, req, cache.table(), kStateBlock, kRatio, true,
          MutableTensorView(slots.data(), DType::I64, {T, kPoolWindow}),
          o.for_op("compressor_window_slots"));
    });
  };
  pool_window("compressor_window_slots:main", main_state, main_pool_slots);
  pool_window("compressor_window_slots:index", index_state, index_pool_slots);
  // §5: the C4A entry each boundary token writes (-1 for the others).
  timed(timing, "compressed_slot_mapping:c4a", [&] {
    dsv4cpu::compressed_slot_mapping(qsl, lens, c4a.table(), kRatio, kCompressedBlock,
                                     TensorView(),
                                     MutableTensorView(c4a_slots.data(), DType::I64, {T}),
                                     o.for_op("compressed_slot_mapping"));
  });
  // §9: the indexer K entry each boundary token writes, compressed lengths, decode fields.
  timed(timing, "indexer_metadata", [&] {
    indexer = dsv4cpu::indexer_metadata(qsl, lens, index_k.table(), kCompressedBlock, 1,
                                        MutableTensorView(index_k_slots.data(), DType::I64, {T}),
                                        o.for_op("indexer_metadata"));
  });
  // §6: the SWA window of each token, oldest first, -1 padded.
  timed(timing, "swa_window_indices", [&] {
    dsv4cpu::swa_window_indices(
        pos, req, swa.table(), kWindow, kSwaBlock,
        MutableTensorView(window_slots.data(), DType::I64, {T, kWindow}), MutableTensorView(),
        o.for_op("swa_window_indices"));
  });
  // indexer.md §7.2: a short-context step selects the identity rows without logits.
  short_context = *std::max_element(indexer.compressed_seq_lens.begin(),
                                    indexer.compressed_seq_lens.end()) <= kTopk;
}

void LayerStep::insert(const StepOptions& o, Timing* timing) {
  const int64_t H = shape.heads;
  // attention.md §3: reads q, swa_kv, positions, swa_slots, cos_sin; writes q_out and this
  // step's entries of the SWA cache.
  timed(timing, "fused_qnorm_rope_kv_insert", [&] {
    dsv4cpu::fused_qnorm_rope_kv_insert(
        TensorView(q.data(), DType::BF16, {T, H, kHeadDim}),
        TensorView(swa_kv.data(), DType::BF16, {T, kHeadDim}),
        TensorView(positions.data(), DType::I64, {T}),
        TensorView(swa_slots.data(), DType::I64, {T}), swa.cache_out(),
        TensorView(cos_sin.data(), DType::F32, {cos_sin_rows, 64}), H, kRmsNormEps, kSwaBlock,
        dsv4cpu::ScaleClamp::cpu, dsv4cpu::Fp8Subnormals::exact,
        MutableTensorView(q_out.data(), DType::BF16, {T, H, kHeadDim}),
        o.for_op("fused_qnorm_rope_kv_insert"));
  });
}

void LayerStep::compress(const StepOptions& o, Timing* timing) {
  const TensorView pos(positions.data(), DType::I64, {T});
  const TensorView table(cos_sin.data(), DType::F32, {cos_sin_rows, 64});
  // compressor.md §3: each token's kv and score + ape rows into its state row (kv and score are
  // the two halves of the kv_score projection, row stride 2·SW).
  timed(timing, "save_partial_states:main", [&] {
    dsv4cpu::save_partial_states(
        TensorView(main_kv_score.data(), DType::F32, {T, kMainSW}, {2 * kMainSW, 1}),
        TensorView(main_kv_score.data() + kMainSW, DType::F32, {T, kMainSW}, {2 * kMainSW, 1}),
        TensorView(main_ape.data(), DType::F32, {kRatio, kMainSW}), pos,
        main_state.state_out(2 * kMainSW),
        TensorView(main_state_slots.data(), DType::I64, {T}), o.for_op("save_partial_states"));
  });
  // §6: each boundary token pools its 8 state rows into one fp8_ds_mla entry of the C4A cache.
  timed(timing, "compress_norm_rope_store", [&] {
    dsv4cpu::compress_norm_rope_store(
        main_state.state(2 * kMainSW),
        TensorView(main_pool_slots.data(), DType::I64, {T, kPoolWindow}), pos,
        TensorView(c4a_slots.data(), DType::I64, {T}),
        TensorView(main_norm.data(), DType::F32, {kHeadDim}), table, c4a.cache_out(),
        kRmsNormEps, kCompressedBlock, kRatio, dsv4cpu::ScaleClamp::cpu,
        o.for_op("compress_norm_rope_store"));
  });
  // The same two calls for the indexer compressor (head 128, §7) into the indexer K cache.
  timed(timing, "save_partial_states:index", [&] {
    dsv4cpu::save_partial_states(
        TensorView(index_kv_score.data(), DType::F32, {T, kIndexSW}, {2 * kIndexSW, 1}),
        TensorView(index_kv_score.data() + kIndexSW, DType::F32, {T, kIndexSW},
                   {2 * kIndexSW, 1}),
        TensorView(index_ape.data(), DType::F32, {kRatio, kIndexSW}), pos,
        index_state.state_out(2 * kIndexSW),
        TensorView(index_state_slots.data(), DType::I64, {T}), o.for_op("save_partial_states"));
  });
  timed(timing, "compress_norm_rope_store_indexer", [&] {
    dsv4cpu::compress_norm_rope_store_indexer(
        index_state.state(2 * kIndexSW),
        TensorView(index_pool_slots.data(), DType::I64, {T, kPoolWindow}), pos,
        TensorView(index_k_slots.data(), DType::I64, {T}),
        TensorView(index_norm.data(), DType::F32, {kIndexDim}), table, index_k.cache_out(),
        kRmsNormEps, kCompressedBlock, kRatio, dsv4cpu::ScaleClamp::gpu,
        o.for_op("compress_norm_rope_store_indexer"));
  });
}

void LayerStep::select(const StepOptions& o, Timing* timing) {
  const TensorView pos(positions.data(), DType::I64, {T});
  const MutableTensorView rows(topk.data(), DType::I32, {T, kTopk});
  // indexer.md §2: reads index_q, index_weights, positions, cos_sin; writes index_q_fp8 and the
  // head weights with the query scale folded in.
  timed(timing, "fused_indexer_q_rope_quant", [&] {
    dsv4cpu::fused_indexer_q_rope_quant(
        TensorView(index_q.data(), DType::F32, {T, kIndexHeads, kIndexDim}),
        TensorView(index_weights.data(), DType::F32, {T, kIndexHeads}), pos,
        TensorView(cos_sin.data(), DType::F32, {cos_sin_rows, 64}),
        MutableTensorView(index_q_fp8.data(), DType::F8_E4M3, {T, kIndexHeads, kIndexDim}),
        MutableTensorView(index_weights_out.data(), DType::F32, {T, kIndexHeads}),
        o.for_op("fused_indexer_q_rope_quant"));
  });
  if (short_context) {
    // §6: rows [0 .. L_t - 1, -1 ...], no logits.
    logits_width = 0;
    logits.clear();
    timed(timing, "short_context_topk",
          [&] { dsv4cpu::short_context_topk(pos, rows, o.for_op("short_context_topk")); });
    return;
  }
  // §4: one row of logits per decode token over its L = seq_len / 4 compressed entries
  // (indexer_metadata's decode_seq_lens), read through the indexer K cache's block table.
  const std::vector<int32_t>& lens = indexer.decode->decode_seq_lens;
  logits_width = *std::max_element(lens.begin(), lens.end());
  logits.resize(sz(T * logits_width));
  const TensorView L(lens.data(), DType::I32, {T});
  timed(timing, "fp8_paged_mqa_logits", [&] {
    dsv4cpu::fp8_paged_mqa_logits(
        TensorView(index_q_fp8.data(), DType::F8_E4M3, {T, kIndexHeads, kIndexDim}),
        index_k.cache(), TensorView(index_weights_out.data(), DType::F32, {T, kIndexHeads}), L,
        index_k.table(), kCompressedBlock, logits_width,
        MutableTensorView(logits.data(), DType::F32, {T, logits_width}), 1,
        o.for_op("fp8_paged_mqa_logits"));
  });
  // §5: the 512 best local indices of each row, best first (canonical order).
  timed(timing, "topk_transform_512", [&] {
    dsv4cpu::topk_transform_512(TensorView(logits.data(), DType::F32, {T, logits_width}), L,
                                TensorView(), kCompressedBlock, dsv4cpu::TopkMode::canonical,
                                rows, MutableTensorView(), o.for_op("topk_transform_512"));
  });
}

void LayerStep::attend(const StepOptions& o, Timing* timing) {
  const int64_t H = shape.heads;
  // metadata.md §8: the local indices as C4A cache slots (the C4A group's block table).
  timed(timing, "c4a_global_topk_indices", [&] {
    dsv4cpu::c4a_global_topk_indices(
        TensorView(topk.data(), DType::I32, {T, kTopk}),
        TensorView(token_to_req.data(), DType::I32, {T}), c4a.table(), kCompressedBlock,
        TensorView(), MutableTensorView(compressed_slots.data(), DType::I64, {T, kTopk}),
        MutableTensorView(compressed_lens.data(), DType::I32, {T}),
        o.for_op("c4a_global_topk_indices"));
  });
  // attention.md §2: every head over its token's SWA window then its 512 C4A entries, with the
  // sink; reads q_out, both caches and both slot sets; writes out.
  timed(timing, "sparse_mla_attention", [&] {
    dsv4cpu::sparse_mla_attention(
        TensorView(q_out.data(), DType::BF16, {T, H, kHeadDim}), swa.cache(), kSwaBlock,
        TensorView(window_slots.data(), DType::I64, {T, kWindow}), c4a.cache(),
        kCompressedBlock, TensorView(compressed_slots.data(), DType::I64, {T, kTopk}),
        TensorView(attn_sink.data(), DType::F32, {H}), dsv4cpu::kAttentionScale,
        dsv4cpu::NopeDecode::exact, MutableTensorView(out.data(), DType::BF16, {T, H, kHeadDim}),
        MutableTensorView(), o.for_op("sparse_mla_attention"));
  });
}

}  // namespace decode_step
