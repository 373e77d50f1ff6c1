// The driver of the optimized compress variants (compressor.md §5-§7): the emitting tokens and
// their window rows, work items over OpenMP threads, the hand-over of a call with a non-finite
// intermediate (core/fallback.hpp), and the paged store. Each entry comes from one pool call per
// channel range and one finish call whatever the thread, so the output never depends on the
// thread count; the pooled channels of a token are independent, so a split of them changes no bit.
#include <algorithm>
#include <cstring>
#include <vector>

#include "args/compressor.hpp"
#include "core/check.hpp"
#include "core/fallback.hpp"
#include "core/parallel.hpp"
#include "optimized/compressor_kernel.hpp"

namespace dsv4cpu::detail::opt {

// The thread split weighs each byte of the window rows pooled this many times: pooling (an exp
// per element) read them at 23 GB/s on an AMD EPYC Zen 4 (C128 decode 8), a copy of cached rows
// at 75-90 GB/s. Counted once, C4 decode 8 (256 KiB) stayed on one thread: 12.9 µs, 8.4 µs on
// two.
constexpr int64_t kPoolCost = 4;

void run_compress_norm_rope_store(const CompressNormRopeStoreArgs& a, const RunContext& ctx,
                                  const CompressorKernel& kernel) {
  const IndexReader pos(a.positions), kv_slot(a.kv_slot_mapping), gather(a.gather_slots);
  // The call's scratch, kept by the calling thread between calls (each grows to the largest call
  // it made): the emitting tokens, then each one's entry and whether it is finite. A decode call
  // allocates nothing (it made six heap allocations, 3% of the indexer head's decode 8).
  // The work items below reach them through pointers: a worker's thread_local is its own.
  thread_local std::vector<int64_t> emitting_tokens;
  thread_local std::vector<uint8_t> scratch;
  emitting_tokens.clear();
  for (int64_t t = 0; t < a.N; ++t)
    if (emits(pos(t), kv_slot(t), a.compress_ratio)) emitting_tokens.push_back(t);
  const int64_t* const emitting = emitting_tokens.data();
  const int64_t E = static_cast<int64_t>(emitting_tokens.size());
  if (E == 0) return;
  const EntryLayout& L = a.layout;
  const int64_t HD = L.hd, entry_bytes = L.entry_bytes();
  if (scratch.size() < static_cast<size_t>(E * (entry_bytes + 1)))
    scratch.resize(static_cast<size_t>(E * (entry_bytes + 1)));
  uint8_t* const entries = scratch.data();            // E entries of entry_bytes
  uint8_t* const finite = entries + E * entry_bytes;  // E flags

  // Pooling work items: (emitting token, channel chunk). With fewer tokens than threads a token's
  // channels are split into chunks of whole 64-channel blocks (channels are independent).
  const int threads = threads_for(ctx.num_threads, E * a.W * HD * 8 * kPoolCost);
  const int64_t blocks = HD / 64;
  const int64_t chunks = E >= threads ? 1 : std::min<int64_t>(blocks, (threads + E - 1) / E);
  // compressor.md §5: the valid columns of token t ascending; kv at offset (w >= r ? HD : 0) of
  // the state row, score at SW + that offset.
  auto window_rows = [&](int64_t t, const float** kv, const float** score) {
    size_t valid = 0;
    for (int64_t w = 0; w < a.W; ++w) {
      const int64_t g = gather(t, w);
      if (g < 0) continue;
      const float* row = a.state_cache.ptr<const float>() + (g / a.sbs) * a.state_cache.stride(0) +
                         (g % a.sbs) * 2 * a.SW + (w >= a.compress_ratio ? HD : 0);
      kv[valid] = row;
      score[valid] = row + a.SW;
      ++valid;
    }
    return valid;
  };
  const auto finish_entry = [&](int64_t i, const float* c) {
    uint8_t* entry = entries + i * entry_bytes;
    finite[i] = kernel.finish(a, pos(emitting[i]), c, entry, entry + L.data_bytes);
  };
  if (chunks == 1) {  // each token pooled and finished by one thread, its vector in L1
    parallel_ranges(E, threads, [&](int64_t i0, int64_t i1) {
      alignas(64) float c[512];
      const float* kv[2][256];
      const float* score[2][256];
      size_t valid[2], cur = 0;
      valid[cur] = window_rows(emitting[i0], kv[cur], score[cur]);
      for (int64_t i = i0; i < i1; ++i) {
        // Short windows fetch the next token's rows while they pool (long ones row by row).
        const size_t nxt = cur ^ 1;
        valid[nxt] = i + 1 < i1 ? window_rows(emitting[i + 1], kv[nxt], score[nxt]) : 0;
        kernel.pool(kv[cur], score[cur], valid[cur], 0, static_cast<size_t>(HD), c, kv[nxt],
                    score[nxt], a.W <= 16 ? valid[nxt] : 0);
        finish_entry(i, c);
        cur = nxt;
      }
    });
  } else {  // fewer tokens than threads: a token's channel chunks over the threads
    std::vector<float> pooled(static_cast<size_t>(E * HD));
    parallel_for(E * chunks, threads, [&](int64_t item) {
      const int64_t i = item / chunks, k = item % chunks;
      const float* kv[256];
      const float* score[256];
      const size_t valid = window_rows(emitting[i], kv, score);
      kernel.pool(kv, score, valid, static_cast<size_t>(blocks * k / chunks * 64),
                  static_cast<size_t>(blocks * (k + 1) / chunks * 64), pooled.data() + i * HD,
                  nullptr, nullptr, 0);
    });
    parallel_for(E, std::min<int>(threads, static_cast<int>(E)),
                 [&](int64_t i) { finish_entry(i, pooled.data() + i * HD); });
  }
  if (ctx.check_finite && std::find(finite, finite + E, 0) != finite + E)
    return hand_over(Fallback::compress_norm_rope_store, ref::compress_norm_rope_store, a, ctx);

  // §6.3 / §7: entry j = slot % P of page slot / P; data region, then the scale region.
  const int64_t P = a.kv_cache_block_size;
  for (int64_t i = 0; i < E; ++i) {
    const int64_t slot = kv_slot(emitting[i]);
    uint8_t* page = a.kv_cache.ptr<uint8_t>() + (slot / P) * a.kv_cache.stride(0);
    const uint8_t* entry = entries + i * entry_bytes;
    std::memcpy(page + (slot % P) * L.data_bytes, entry, static_cast<size_t>(L.data_bytes));
    std::memcpy(page + P * L.data_bytes + (slot % P) * L.scale_bytes, entry + L.data_bytes,
                static_cast<size_t>(L.scale_bytes));
  }
}

}  // namespace dsv4cpu::detail::opt
