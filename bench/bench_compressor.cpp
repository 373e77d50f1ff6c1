// Compressor ops at DeepSeek-V4-Flash shapes (compressor.md §2): the C4A main compressor (head 512,
// window 8, state page 4 rows, 64 entries per page), the C128A main compressor (head 512, window
// 128, state page 8 rows, 2 entries per page) and the C4A indexer compressor (head 128), each at
// `decode1`, `decode8`, `decode64` (one token per request, long contexts) and `prefill4096` (one
// request of 4096 tokens from position 0). In the decode shapes every token sits at a group
// boundary, so every token emits an entry: the work of the steps that do emit. Physical state and
// cache pages are shuffled, as an allocator hands them out.
#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "bench_util.hpp"
#include "dsv4cpu/compressor.hpp"

namespace dsv4cpu::bench {
namespace {

struct Head {
  const char* name;  // shape prefix
  int64_t r, coff, hd, sbs, P;
  bool indexer;
  int64_t W() const { return coff * r; }
  int64_t SW() const { return coff * hd; }
  int64_t entry_bytes() const { return indexer ? 132 : 584; }
};
constexpr Head kC4{"C4", 4, 2, 512, 4, 64, false};
constexpr Head kC128{"C128", 128, 1, 512, 8, 2, false};
constexpr Head kC4Indexer{"C4", 4, 2, 128, 4, 64, true};

// Decode request b sits at position 1024·(b + 1) − 1: a boundary for both ratios, contexts up
// to 64K tokens (so the RoPE table below covers every shape).
constexpr int64_t kDecodeSpacing = 1024;
constexpr int64_t kTableRows = 64 * kDecodeSpacing;

// The YaRN table of the compressed layers (compressor.md §8.2), built once.
const std::vector<float>& cos_sin_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(static_cast<size_t>(kTableRows * 64));
    make_cos_sin_cache(kTableRows, 160000.0, YarnParams{},
                       MutableTensorView(t.data(), DType::F32, {kTableRows, 64}));
    return t;
  }();
  return table;
}

// Tokens of a batch shape and the paged state cache that holds every row their windows read.
struct Step {
  std::vector<int64_t> positions, token_to_req;
  int64_t nb = 0;                                    // state pages
  std::map<std::pair<int64_t, int64_t>, int64_t> page;  // (request, column) -> physical page
  int64_t state_slot(int64_t req, int64_t l, int64_t sbs) const {
    return l < 0 ? -1 : page.at({req, l / sbs}) * sbs + l % sbs;
  }
};

Step make_step(const Head& h, const BatchShape& s) {
  Step st;
  for (int64_t b = 0; b < s.requests; ++b)
    for (int64_t i = 0; i < s.tokens_per_request; ++i) {
      st.positions.push_back(s.tokens_per_request > 1 ? i : kDecodeSpacing * (b + 1) - 1);
      st.token_to_req.push_back(b);
    }
  for (size_t t = 0; t < st.positions.size(); ++t)
    for (int64_t l = std::max<int64_t>(0, st.positions[t] - h.W() + 1); l <= st.positions[t]; ++l)
      st.page[{st.token_to_req[t], l / h.sbs}] = 0;
  st.nb = static_cast<int64_t>(st.page.size());
  const std::vector<int64_t> ids = shuffled_pages(st.nb, 1);
  size_t next = 0;
  for (auto& kv : st.page) kv.second = ids[next++];
  return st;
}

// ---- save_partial_states ----

Prepare save_partial_states_shape(const Head& h, const BatchShape& s) {
  return [h, s] {
    const Step st = make_step(h, s);
    const int64_t N = static_cast<int64_t>(st.positions.size()), SW = h.SW();
    auto kv_score = std::make_shared<Buffer<float>>(static_cast<size_t>(N * 2 * SW));
    auto ape = std::make_shared<Buffer<float>>(static_cast<size_t>(h.r * SW));
    auto state = std::make_shared<Buffer<float>>(static_cast<size_t>(st.nb * h.sbs * 2 * SW));
    auto pos = std::make_shared<std::vector<int64_t>>(st.positions);
    auto slots = std::make_shared<std::vector<int64_t>>();
    for (int64_t t = 0; t < N; ++t)
      slots->push_back(st.state_slot(st.token_to_req[t], st.positions[t], h.sbs));
    fill_normal(kv_score->data(), kv_score->size(), 1.0f, 2);
    fill_normal(ape->data(), ape->size(), 0.1f, 3);
    Prepared p;
    p.run = [=](const Options& o) {
      // kv and score are the two halves of the upstream kv_score [N, 2·SW] (compressor.md §1).
      save_partial_states(TensorView(kv_score->data(), DType::F32, {N, SW}, {2 * SW, 1}),
                          TensorView(kv_score->data() + SW, DType::F32, {N, SW}, {2 * SW, 1}),
                          TensorView(ape->data(), DType::F32, {h.r, SW}),
                          TensorView(pos->data(), DType::I64, {N}),
                          MutableTensorView(state->data(), DType::F32, {st.nb, h.sbs, 2 * SW}),
                          TensorView(slots->data(), DType::I64, {N}), o);
    };
    // kv and score rows read, state rows written, positions and slots read; each ape row that a
    // token uses once (it stays in cache).
    std::vector<char> ape_used(static_cast<size_t>(h.r), 0);
    for (int64_t t = 0; t < N; ++t) ape_used[static_cast<size_t>(st.positions[t] % h.r)] = 1;
    const int64_t ape_rows = std::count(ape_used.begin(), ape_used.end(), char{1});
    p.bytes = N * (2 * SW * 4 + 2 * SW * 4 + 16) + ape_rows * SW * 4;
    // The checks read every written token's kv and score rows and its ape row before the copy.
    p.check_bytes = N * 2 * SW * 4 + ape_rows * SW * 4;
    return p;
  };
}

// ---- compressor_window_slots ----

Prepare window_slots_shape(const Head& h, const BatchShape& s) {
  return [h, s] {
    const Step st = make_step(h, s);
    const int64_t N = static_cast<int64_t>(st.positions.size()), W = h.W();
    const int64_t R = s.requests, MB = (kDecodeSpacing * R + 4096) / h.sbs;
    // The state group's block table (I32, as engines keep it); columns no window reads hold
    // other valid page ids.
    auto bt = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(R * MB));
    for (size_t i = 0; i < bt->size(); ++i)
      (*bt)[i] = static_cast<int32_t>(i % static_cast<size_t>(std::max<int64_t>(st.nb, 1)));
    for (const auto& [key, page] : st.page)
      (*bt)[key.first * MB + key.second] = static_cast<int32_t>(page);
    auto pos = std::make_shared<std::vector<int64_t>>(st.positions);
    auto req =
        std::make_shared<std::vector<int32_t>>(st.token_to_req.begin(), st.token_to_req.end());
    auto out = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(N * W));
    Prepared p;
    p.run = [=](const Options& o) {
      compressor_window_slots(TensorView(pos->data(), DType::I64, {N}),
                              TensorView(req->data(), DType::I32, {N}),
                              TensorView(bt->data(), DType::I32, {R, MB}), h.sbs, h.r, h.coff == 2,
                              MutableTensorView(out->data(), DType::I64, {N, W}), o);
    };
    p.bytes = N * (8 + 4 + W * (4 + 8));  // positions, requests, table entries read, slots written
    return p;
  };
}

// ---- compress_norm_rope_store, compress_norm_rope_store_indexer ----

Prepare compress_shape(const Head& h, const BatchShape& s) {
  return [h, s] {
    const Step st = make_step(h, s);
    const int64_t N = static_cast<int64_t>(st.positions.size()), W = h.W(), SW = h.SW();
    auto state = std::make_shared<Buffer<float>>(static_cast<size_t>(st.nb * h.sbs * 2 * SW));
    fill_normal(state->data(), state->size(), 1.0f, 4);
    auto gather = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(N * W));
    for (int64_t t = 0; t < N; ++t)
      for (int64_t w = 0; w < W; ++w)
        (*gather)[t * W + w] =
            st.state_slot(st.token_to_req[t], st.positions[t] - W + 1 + w, h.sbs);
    // Compressed-cache slots: entry c = p / r of each emitting token, through a shuffled table
    // of the request's compressed pages; -1 for the other tokens.
    int64_t E = 0;
    for (int64_t p : st.positions) E += p % h.r == h.r - 1;
    const int64_t nblk = (E + h.P - 1) / h.P + s.requests;
    const std::vector<int64_t> blk = shuffled_pages(nblk, 5);
    auto kv_slot = std::make_shared<std::vector<int64_t>>();
    for (int64_t t = 0, e = 0; t < N; ++t) {
      const bool boundary = st.positions[t] % h.r == h.r - 1;
      kv_slot->push_back(boundary ? blk[e / h.P] * h.P + e % h.P : -1);
      e += boundary;
    }
    auto pos = std::make_shared<std::vector<int64_t>>(st.positions);
    auto weight = std::make_shared<std::vector<float>>(static_cast<size_t>(h.hd), 1.0f);
    const int64_t page_bytes = h.P * h.entry_bytes();
    auto cache = std::make_shared<Buffer<uint8_t>>(static_cast<size_t>(nblk * page_bytes));
    const std::vector<float>& table = cos_sin_table();
    Prepared p;
    p.run = [=, &table](const Options& o) {
      const TensorView sv(state->data(), DType::F32, {st.nb, h.sbs, 2 * SW});
      const TensorView gv(gather->data(), DType::I64, {N, W}), pv(pos->data(), DType::I64, {N});
      const TensorView kv(kv_slot->data(), DType::I64, {N}), wv(weight->data(), DType::F32, {h.hd});
      const TensorView tv(table.data(), DType::F32, {kTableRows, 64});
      const MutableTensorView cv(cache->data(), DType::U8, {nblk, page_bytes});
      if (h.indexer)
        compress_norm_rope_store_indexer(sv, gv, pv, kv, wv, tv, cv, 1e-6, h.P, h.r,
                                         ScaleClamp::gpu, o);
      else
        compress_norm_rope_store(sv, gv, pv, kv, wv, tv, cv, 1e-6, h.P, h.r, ScaleClamp::cpu, o);
    };
    // Per emitting token: its valid window rows (kv and score halves, HD floats each), a RoPE
    // row, the entry written; per token: positions, kv slot and the gather row; the weight once.
    int64_t rows = 0;
    for (int64_t t = 0; t < N; ++t)
      if ((*kv_slot)[t] >= 0)
        for (int64_t w = 0; w < W; ++w) rows += (*gather)[t * W + w] >= 0;
    p.bytes = rows * 2 * h.hd * 4 + E * (64 * 4 + h.entry_bytes()) + N * (16 + W * 8) + h.hd * 4;
    p.items = E;
    return p;
  };
}

// ---- map_local_to_global_slots ----

// The C4A top-k step: I32 local indices [N, 512] of compressed entries (−1 past a token's
// (p + 1) / 4 entries), an I32 block table of compressed pages (64 entries per page).
Prepare map_slots_shape(const BatchShape& s) {
  return [s] {
    const Step st = make_step(kC4, s);
    const int64_t N = static_cast<int64_t>(st.positions.size()), K = 512, P = 64;
    const int64_t R = s.requests, MB = (kDecodeSpacing * R + 4096) / 4 / P + 1;
    auto bt = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(R * MB));
    const std::vector<int64_t> ids = shuffled_pages(R * MB, 6);
    for (size_t i = 0; i < bt->size(); ++i) (*bt)[i] = static_cast<int32_t>(ids[i]);
    auto local = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(N * K), -1);
    std::mt19937_64 rng(7);
    for (int64_t t = 0; t < N; ++t) {
      const int64_t L = (st.positions[t] + 1) / 4;
      for (int64_t k = 0; k < K; ++k)
        if (L > K || k < L)
          (*local)[t * K + k] = static_cast<int32_t>(L > K ? rng() % L : k);
    }
    auto req =
        std::make_shared<std::vector<int32_t>>(st.token_to_req.begin(), st.token_to_req.end());
    auto out = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(N * K));
    Prepared p;
    p.run = [=](const Options& o) {
      map_local_to_global_slots(TensorView(local->data(), DType::I32, {N, K}),
                                TensorView(req->data(), DType::I32, {N}),
                                TensorView(bt->data(), DType::I32, {R, MB}), P,
                                MutableTensorView(out->data(), DType::I64, {N, K}), o);
    };
    p.bytes = N * (4 + K * (4 + 4 + 8));  // request, locals and their table entries, slots
    return p;
  };
}

}  // namespace

void compressor_cases(Cases& out) {
  const auto add = [&out](const std::string& op, const std::string& shape, const Prepare& p,
                          Traffic traffic, bool finite_checks = false) {
    out.push_back({op, shape, p, traffic, finite_checks});
  };
  for (const BatchShape& s : batch_shapes()) {
    for (const Head& h : {kC4, kC128}) {
      const std::string shape = std::string(h.name) + "/" + s.name;
      add("save_partial_states", shape, save_partial_states_shape(h, s), Traffic::copy, true);
      add("compressor_window_slots", shape, window_slots_shape(h, s), Traffic::write);
      add("compress_norm_rope_store", shape, compress_shape(h, s), Traffic::read, true);
    }
    const std::string shape = std::string(kC4Indexer.name) + "/" + s.name;
    add("save_partial_states", "indexer_" + shape, save_partial_states_shape(kC4Indexer, s),
        Traffic::copy, true);
    add("compress_norm_rope_store_indexer", shape, compress_shape(kC4Indexer, s), Traffic::read,
        true);
    add("map_local_to_global_slots", std::string("C4/") + s.name, map_slots_shape(s),
        Traffic::copy);
  }
  // make_cos_sin_cache takes no Options: benchmarked while it has a single variant.
  const testing::Plan one{true, std::nullopt, false, {0}};
  if (testing::runs("make_cos_sin_cache", one).runs.size() != 1) return;
  add("make_cos_sin_cache", "rows65536", [] {
    auto table = std::make_shared<std::vector<float>>(static_cast<size_t>(kTableRows * 64));
    Prepared p;
    p.run = [table](const Options&) {
      make_cos_sin_cache(kTableRows, 160000.0, YarnParams{},
                         MutableTensorView(table->data(), DType::F32, {kTableRows, 64}));
    };
    p.bytes = kTableRows * 64 * 4;
    return p;
  }, Traffic::write);
}

}  // namespace dsv4cpu::bench
