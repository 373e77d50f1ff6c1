// Metadata builders (metadata.md) on one 8192-token mixed step of DeepSeek-V4-Flash with
// max_model_len 1M (2^20), shape `step8192`:
//   32 decode requests (one token each) with contexts seq_len = 16384·(b + 1) − 7·b (16K..512K),
//   then 3 prefill requests: 4096 tokens continuing a 200 000-token context, 2048 tokens from
//   position 0, 2016 tokens continuing a 60 000-token context (8160 prefill tokens, T = 8192).
// Block sizes of metadata.md §1: SWA 64, C4A 64, C128A 2, indexer 64. Block tables are I32
// [R, MB] with shuffled physical pages; columns past a request's pages hold −1 (never read).
// `c4a_global_topk_indices` maps indexer rows of K = 512: identity rows [0, L) for L ≤ 512, else
// 512 distinct random locals of [0, L) in random (score) order. C128A: `c128a_topk_indices` is
// the dense CPU form [T, 8192] (512 MiB), `c128a_topk_indices_compact` the compact width
// c128a_compact_width(positions), `c128a_decode_metadata` the full width Wmax.
// Bytes: every index input read, the distinct block-table entries the outputs reference (4 B
// each), every output byte written (returned structs counted by their array fields).
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "bench_util.hpp"
#include "dsv4cpu/metadata.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kMaxModelLen = int64_t{1} << 20;
constexpr int64_t kDecodes = 32, kK = 512, kWindow = 128;
constexpr int64_t kP = 64, kPc128 = 2;

struct Prefill {
  int64_t context, tokens;
};
constexpr Prefill kPrefills[] = {{200000, 4096}, {0, 2048}, {60000, 2016}};

// A step's requests and tokens (metadata.md §2 computed directly).
struct Step {
  std::vector<int64_t> qsl, seq_lens, positions;
  std::vector<int32_t> token_to_req;
  int64_t R = 0, T = 0;
  Step() {
    qsl.push_back(0);
    for (int64_t b = 0; b < kDecodes; ++b) add(16384 * (b + 1) - 7 * b, 1);
    for (const Prefill& p : kPrefills) add(p.context + p.tokens, p.tokens);
  }
  void add(int64_t seq_len, int64_t q) {
    for (int64_t i = 0; i < q; ++i) {
      positions.push_back(seq_len - q + i);
      token_to_req.push_back(static_cast<int32_t>(R));
    }
    seq_lens.push_back(seq_len);
    qsl.push_back(qsl.back() + q);
    ++R;
    T += q;
  }
};

const Step& step() {
  static const Step s;
  return s;
}

// A cache group's block table: request r owns ceil(ceil(seq_len / ratio) / P) shuffled pages;
// the rest of its row is −1. `marked` collects the distinct (r, column) entries a benchmark's
// outputs reference, for the byte count.
struct Table {
  int64_t R, MB, P;
  std::vector<int32_t> entries;
  std::vector<std::vector<char>> marked;
  Table(const Step& s, int64_t ratio, int64_t P_, uint64_t seed) : R(s.R), MB(0), P(P_) {
    std::vector<int64_t> cols;
    int64_t pages = 0;
    for (int64_t len : s.seq_lens) {
      cols.push_back(((len + ratio - 1) / ratio + P - 1) / P);
      MB = std::max(MB, cols.back());
      pages += cols.back();
    }
    entries.assign(static_cast<size_t>(R * MB), -1);
    const std::vector<int64_t> ids = shuffled_pages(pages, seed);
    size_t next = 0;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < cols[static_cast<size_t>(r)]; ++c)
        entries[static_cast<size_t>(r * MB + c)] = static_cast<int32_t>(ids[next++]);
    marked.assign(static_cast<size_t>(R), std::vector<char>(static_cast<size_t>(MB), 0));
  }
  TensorView view() const { return TensorView(entries.data(), DType::I32, {R, MB}); }
  // Marks the columns holding locals [first, first + n) of request r.
  void mark(int64_t r, int64_t first, int64_t n) {
    if (n <= 0) return;
    for (int64_t c = first / P; c <= (first + n - 1) / P; ++c)
      marked[static_cast<size_t>(r)][static_cast<size_t>(c)] = 1;
  }
  int64_t referenced_bytes() const {
    int64_t n = 0;
    for (const auto& row : marked) n += std::count(row.begin(), row.end(), char{1});
    return n * 4;
  }
};

// Step arrays shared by the prepared runs (I64 qsl / seq_lens / positions, I32 token_to_req).
struct Inputs {
  const Step& s = step();
  TensorView qsl() const { return TensorView(s.qsl.data(), DType::I64, {s.R + 1}); }
  TensorView seq() const { return TensorView(s.seq_lens.data(), DType::I64, {s.R}); }
  TensorView pos() const { return TensorView(s.positions.data(), DType::I64, {s.T}); }
  TensorView req() const { return TensorView(s.token_to_req.data(), DType::I32, {s.T}); }
  int64_t token_bytes() const { return s.T * (8 + 4); }  // positions + token_to_req
  int64_t request_bytes() const { return (2 * s.R + 1) * 8; }  // query_start_loc + seq_lens
};

// Each token's own SWA slot (§3 with the SWA table), all >= 0: the token_slot_mapping input.
std::shared_ptr<std::vector<int64_t>> own_slots(const Step& s, const Table& swa) {
  auto own = std::make_shared<std::vector<int64_t>>();
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t p = s.positions[t], r = s.token_to_req[t];
    own->push_back(int64_t{swa.entries[r * swa.MB + p / kP]} * kP + p % kP);
  }
  return own;
}

template <class T>
std::shared_ptr<Buffer<T>> output(int64_t n) {
  return std::make_shared<Buffer<T>>(static_cast<size_t>(n));
}

// ---- §2, §3, §4 ----

Prepared token_positions_run() {
  const Inputs in;
  auto positions = output<int64_t>(in.s.T);
  auto req = output<int32_t>(in.s.T);
  Prepared p;
  p.run = [=](const Options& o) {
    token_positions(in.qsl(), in.seq(), MutableTensorView(positions->data(), DType::I64, {in.s.T}),
                    MutableTensorView(req->data(), DType::I32, {in.s.T}), o);
  };
  p.bytes = in.request_bytes() + in.token_bytes();
  return p;
}

Prepared slot_mapping_run() {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 1, kP, 1);
  for (int64_t t = 0; t < in.s.T; ++t) bt->mark(in.s.token_to_req[t], in.s.positions[t], 1);
  auto out = output<int64_t>(in.s.T);
  Prepared p;
  p.run = [=](const Options& o) {
    slot_mapping(in.pos(), in.req(), bt->view(), kP,
                 MutableTensorView(out->data(), DType::I64, {in.s.T}), o);
  };
  p.bytes = in.token_bytes() + bt->referenced_bytes() + in.s.T * 8;
  return p;
}

Prepared split_run() {
  const Inputs in;
  Prepared p;
  p.run = [=](const Options& o) {
    benchmark::DoNotOptimize(split_decodes_and_prefills(in.qsl(), 1, o));
  };
  p.bytes = (in.s.R + 1) * 8;
  return p;
}

// ---- §5: the C4A group (ratio 4, 64 entries per page) with the tokens' own SWA slots ----

Prepared compressed_slot_mapping_run() {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 4, kP, 2);
  auto own = own_slots(in.s, Table(in.s, 1, kP, 1));
  for (int64_t t = 0; t < in.s.T; ++t)
    if ((in.s.positions[t] + 1) % 4 == 0) bt->mark(in.s.token_to_req[t], in.s.positions[t] / 4, 1);
  auto out = output<int64_t>(in.s.T);
  Prepared p;
  p.run = [=](const Options& o) {
    compressed_slot_mapping(in.qsl(), in.seq(), bt->view(), 4, kP,
                            TensorView(own->data(), DType::I64, {in.s.T}),
                            MutableTensorView(out->data(), DType::I64, {in.s.T}), o);
  };
  p.bytes = in.request_bytes() + in.s.T * 8 + bt->referenced_bytes() + in.s.T * 8;
  return p;
}

// ---- §6: window 128 over the SWA group ----

Prepared swa_window_indices_run() {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 1, kP, 1);
  for (int64_t t = 0; t < in.s.T; ++t) {
    const int64_t p = in.s.positions[t], start = std::max<int64_t>(0, p - kWindow + 1);
    bt->mark(in.s.token_to_req[t], start, p - start + 1);
  }
  auto indices = output<int64_t>(in.s.T * kWindow);
  auto lens = output<int32_t>(in.s.T);
  Prepared p;
  p.run = [=](const Options& o) {
    swa_window_indices(in.pos(), in.req(), bt->view(), kWindow, kP,
                       MutableTensorView(indices->data(), DType::I64, {in.s.T, kWindow}),
                       MutableTensorView(lens->data(), DType::I32, {in.s.T}), o);
  };
  p.bytes = in.token_bytes() + bt->referenced_bytes() + in.s.T * (kWindow * 8 + 4);
  return p;
}

// ---- §7: the C128A group (2 entries per page) ----

// Marks the prefixes [0, (p + 1) / 128) of the first `readers` tokens.
void mark_c128a(const Step& s, Table& bt, int64_t readers) {
  for (int64_t t = 0; t < readers; ++t)
    bt.mark(s.token_to_req[t], 0, (s.positions[t] + 1) / 128);
}

Prepared c128a_topk_run(bool compact) {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 128, kPc128, 3);
  mark_c128a(in.s, *bt, in.s.T);
  const int64_t W = compact ? c128a_compact_width(in.pos()) : c128a_topk_width(kMaxModelLen);
  auto indices = output<int64_t>(in.s.T * W);
  Prepared p;
  p.run = [=](const Options& o) {
    const MutableTensorView out(indices->data(), DType::I64, {in.s.T, W});
    if (compact)
      c128a_topk_indices_compact(in.pos(), in.req(), bt->view(), kPc128, out, o);
    else
      c128a_topk_indices(in.pos(), in.req(), bt->view(), kMaxModelLen, kPc128, out, o);
  };
  p.bytes = in.token_bytes() + bt->referenced_bytes() + in.s.T * W * 8;
  return p;
}

Prepared c128a_decode_metadata_run() {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 128, kPc128, 3);
  mark_c128a(in.s, *bt, kDecodes);
  auto own = own_slots(in.s, Table(in.s, 1, kP, 1));
  const int64_t W = c128a_decode_max_width(kMaxModelLen), nd = kDecodes, np = in.s.T - nd;
  auto global = output<int64_t>(nd * W);
  auto lens = output<int32_t>(nd);
  auto local = output<int32_t>(np * W);
  Prepared p;
  p.run = [=](const Options& o) {
    c128a_decode_metadata(in.pos(), in.req(), bt->view(), kMaxModelLen, kPc128, nd,
                          TensorView(own->data(), DType::I64, {in.s.T}),
                          MutableTensorView(global->data(), DType::I64, {nd, W}),
                          MutableTensorView(lens->data(), DType::I32, {nd}),
                          MutableTensorView(local->data(), DType::I32, {np, W}), o);
  };
  p.bytes = in.token_bytes() + in.s.T * 8 + bt->referenced_bytes() + nd * (W * 8 + 4) +
            np * W * 4;
  return p;
}

// ---- §8: indexer rows of 512 over the C4A group ----

Prepared c4a_global_topk_indices_run() {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 4, kP, 2);
  auto own = own_slots(in.s, Table(in.s, 1, kP, 1));
  auto topk = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(in.s.T * kK), -1);
  std::mt19937_64 rng(4);
  std::unordered_set<int64_t> chosen;
  for (int64_t t = 0; t < in.s.T; ++t) {
    const int64_t L = (in.s.positions[t] + 1) / 4, r = in.s.token_to_req[t];
    int32_t* row = topk->data() + t * kK;
    chosen.clear();
    for (int64_t k = 0; k < std::min(L, kK); ++k) {
      int64_t l = k;
      if (L > kK)
        do l = static_cast<int64_t>(rng() % static_cast<uint64_t>(L));
        while (!chosen.insert(l).second);
      row[k] = static_cast<int32_t>(l);
      bt->mark(r, l, 1);
    }
  }
  auto indices = output<int64_t>(in.s.T * kK);
  auto lens = output<int32_t>(in.s.T);
  Prepared p;
  p.run = [=](const Options& o) {
    c4a_global_topk_indices(TensorView(topk->data(), DType::I32, {in.s.T, kK}), in.req(),
                            bt->view(), kP, TensorView(own->data(), DType::I64, {in.s.T}),
                            MutableTensorView(indices->data(), DType::I64, {in.s.T, kK}),
                            MutableTensorView(lens->data(), DType::I32, {in.s.T}), o);
  };
  p.bytes = in.s.T * (kK * 4 + 4 + 8) + bt->referenced_bytes() + in.s.T * (kK * 8 + 4);
  return p;
}

// ---- §9: the indexer group (ratio 4, 64 entries per page), next_n = 1 ----

Prepared indexer_metadata_run() {
  const Inputs in;
  auto bt = std::make_shared<Table>(in.s, 4, kP, 5);
  int64_t prefill_entries = 0;
  for (int64_t t = 0; t < in.s.T; ++t)
    if ((in.s.positions[t] + 1) % 4 == 0) bt->mark(in.s.token_to_req[t], in.s.positions[t] / 4, 1);
  for (int64_t r = kDecodes; r < in.s.R; ++r) prefill_entries += in.s.seq_lens[r] / 4;
  auto slots = output<int64_t>(in.s.T);
  Prepared p;
  p.run = [=](const Options& o) {
    benchmark::DoNotOptimize(
        indexer_metadata(in.qsl(), in.seq(), bt->view(), kP, 1,
                         MutableTensorView(slots->data(), DType::I64, {in.s.T}), o));
  };
  const int64_t np_tokens = in.s.T - kDecodes, np_reqs = in.s.R - kDecodes;
  // slot_mapping; compressed_seq_lens; decode_lens and decode_seq_lens; the chunk's
  // cu_seq_lens, ks, ke, token_req and token_to_seq.
  p.bytes = in.request_bytes() + bt->referenced_bytes() + in.s.T * 8 + in.s.R * 4 +
            kDecodes * 8 + (np_reqs + 1) * 4 + np_tokens * 12 + prefill_entries * 4;
  return p;
}

Prepared split_indexer_prefill_chunks_run() {
  const Inputs in;
  auto n = std::make_shared<std::vector<int64_t>>();
  auto m = std::make_shared<std::vector<int64_t>>();
  for (int64_t r = kDecodes; r < in.s.R; ++r) {
    n->push_back(in.s.seq_lens[r] / 4);
    m->push_back(in.s.qsl[r + 1] - in.s.qsl[r]);
  }
  const int64_t count = static_cast<int64_t>(n->size());
  Prepared p;
  p.run = [=](const Options& o) {
    // vLLM's budgets: workspace 40·max_model_len, 512 MiB of logits.
    benchmark::DoNotOptimize(split_indexer_prefill_chunks(
        TensorView(n->data(), DType::I64, {count}), TensorView(m->data(), DType::I64, {count}),
        40 * kMaxModelLen, int64_t{512} << 20, kDecodes, o));
  };
  p.bytes = count * 16;
  return p;
}

Prepared build_tile_scheduler_run() {
  Prepared p;
  p.run = [](const Options& o) { benchmark::DoNotOptimize(build_tile_scheduler("c4a", o)); };
  return p;
}

}  // namespace

void metadata_cases(Cases& out) {
  const auto add = [&out](const std::string& op, const Prepare& p, Traffic traffic) {
    out.push_back({op, "step8192", p, traffic});
  };
  // Traffic: the builders whose output dwarfs what they read write; those that read an index
  // per index written copy; the splitters and the scheduler read (and barely do that).
  add("token_positions", token_positions_run, Traffic::write);
  add("slot_mapping", slot_mapping_run, Traffic::copy);
  add("split_decodes_and_prefills", split_run, Traffic::read);
  add("compressed_slot_mapping", compressed_slot_mapping_run, Traffic::copy);
  add("swa_window_indices", swa_window_indices_run, Traffic::write);
  add("c128a_topk_indices", [] { return c128a_topk_run(false); }, Traffic::write);
  add("c128a_topk_indices_compact", [] { return c128a_topk_run(true); }, Traffic::write);
  add("c128a_decode_metadata", c128a_decode_metadata_run, Traffic::write);
  add("c4a_global_topk_indices", c4a_global_topk_indices_run, Traffic::copy);
  add("indexer_metadata", indexer_metadata_run, Traffic::copy);
  add("split_indexer_prefill_chunks", split_indexer_prefill_chunks_run, Traffic::read);
  add("build_tile_scheduler", build_tile_scheduler_run, Traffic::read);
}

}  // namespace dsv4cpu::bench
