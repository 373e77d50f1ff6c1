// The sizes that choose a code path: the thread split of every parallel region, the streamed
// fills, the repeated-slot search, the top-k sample, the block of the validation scans, the
// thread rule of the query insert. Production reads one constant-initialised struct (a load, no
// cost per call); tests lower the values with ScopedThresholds, so that small generated cases
// take the paths of large calls (docs/testing.md, "Thresholds and boundaries").
#pragma once
#include <cstdint>

namespace dsv4cpu::detail {

struct Thresholds {
  // core/parallel.hpp: bytes each thread must touch (read plus written) for a split to pay: a
  // team's start and join cost about as much as streaming this many bytes on one thread.
  int64_t min_bytes_per_thread = int64_t{256} << 10;
  // The same for a plain copy (save_partial_states): a 512 KiB copy ran at 0.87x its one-thread
  // time on two threads of the reference machine, a 1 MiB one at 1.7x.
  int64_t min_copy_bytes_per_thread = int64_t{512} << 10;
  // core/fill.hpp: outputs from this many bytes bypass the caches (non-temporal stores).
  int64_t stream_bytes = int64_t{16} << 20;
  // optimized/compressor_hwy.cpp: save_partial_states copies its tokens in order from this many
  // bytes of kv and score rows, last token first below (the rows the finiteness pass read last
  // are still in L1: decode 8 ran 7-9% faster; reversed, a prefill of 8 MiB ran 15% slower).
  int64_t in_order_copy_bytes = int64_t{256} << 10;
  // core/check_index.cpp: the repeated-slot search marks a bitmap of the slot range when the
  // range is at most max(bitmap_floor, bitmap_slots_per_token · tokens), else sorts the slots.
  int64_t bitmap_floor = int64_t{1} << 20;
  int64_t bitmap_slots_per_token = 64;
  // optimized/topk_hwy.cpp: a canonical row longer than 2 · 16 · topk_sample_runs elements takes
  // its threshold from topk_sample_runs runs of 16 scores (shorter rows: from the whole row); the
  // candidate buffer holds max(8 K, topk_min_candidates) indices.
  int64_t topk_sample_runs = 256;
  int64_t topk_min_candidates = 4096;
  // core/check_hwy.cpp: bytes per block of the validation scans (one decision per block).
  int64_t check_block_bytes = 1024;
  // optimized/attention_insert_hwy.cpp: with num_threads = 0, a call splits over OpenMP's
  // default team from T · (Hq + 1) >= 2 · insert_min_heads_per_thread rows.
  int64_t insert_min_heads_per_thread = 32;
};

extern Thresholds g_thresholds;

inline const Thresholds& thresholds() { return g_thresholds; }

// Test hook: every threshold at its lowest, so that every gated path runs on the smallest call
// that can take it (the blocks of the scans one step of vectors, the top-k sample 4 runs).
constexpr Thresholds lowest_thresholds() {
  Thresholds t;
  t.min_bytes_per_thread = t.min_copy_bytes_per_thread = 0;
  t.stream_bytes = 0;
  t.in_order_copy_bytes = 0;
  t.bitmap_floor = t.bitmap_slots_per_token = 0;
  t.topk_sample_runs = 4;
  t.topk_min_candidates = 0;
  t.check_block_bytes = 1;
  t.insert_min_heads_per_thread = 0;
  return t;
}

// Test hook: `t` while in scope, then the thresholds it replaced. Not thread-safe: construct it
// while no call runs.
class ScopedThresholds {
 public:
  explicit ScopedThresholds(const Thresholds& t) : saved_(g_thresholds) { g_thresholds = t; }
  ~ScopedThresholds() { g_thresholds = saved_; }
  ScopedThresholds(const ScopedThresholds&) = delete;
  ScopedThresholds& operator=(const ScopedThresholds&) = delete;

 private:
  Thresholds saved_;
};

}  // namespace dsv4cpu::detail
