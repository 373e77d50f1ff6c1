// Properties of the attention ops (attention.md) for every registered variant, on every Highway
// target and fixed ISA of the registry:
//   sparse_mla_attention        within numerics.md §11.8 of the reference (testing/attention.hpp),
//                               zero rows and NaN rows exact, lse likewise; the same bytes with 1,
//                               2 and 8 threads. Layers: SWA-only, C4A with 512 selected entries
//                               in random and in identity order, C128A (Pc = 2) with sets over
//                               several 128-column blocks; -1 and repeated slots, padded pages,
//                               head-padded q, sinks with -inf heads, NaN codes, scale bytes 0,
//                               255 and outside [10, 246] (at random, and at a boundary column of
//                               a set or a page edge, in the first or last tile at a boundary
//                               dim), subnormal q and RoPE values (the bf16 variants then take
//                               their fp32 path), both decode modes. Runs of consecutive tokens
//                               of requests in prefill (sliding windows, C128A prefixes, C4A
//                               sets): every token's bytes those of the token in a call alone.
//   fused_qnorm_rope_kv_insert  the reference's bytes in q_out and in every cache byte (or the
//                               same error), both clamp rules and both fp8_subnormals modes, with
//                               1, 2 and 8 threads; kv padded with garbage rows (T_ins < T_kv),
//                               the reference's bytes without them.
//   inverse_gptj_rope_o_proj    the reference's bits in out (or the same error), BF16 and F16 o
//                               (normal values or any finite pattern), any even rope_dim up to D,
//                               odd head widths, overflowing rows and non-finite o values, with 1,
//                               2 and 8 threads.
// Each fixed ISA is its own test (<Suite>.Amx..., <Suite>.Avx512bf16...), skipped where this
// machine lacks it and failing where it is required (testing::isa_required).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/fallback.hpp"
#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/numerics.hpp"
#include "generators.hpp"
#include "prop_util.hpp"
#include "testing/attention.hpp"

namespace dsv4cpu::prop {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- sparse_mla_attention ----

// A paged fp8_ds_mla cache: `pages` pages of P entries and `pad` garbage bytes, page stride
// 8 bytes more. Every byte starts as garbage; entries are written by put().
struct Pages {
  int64_t pages = 0, P = 1, page_bytes = 0, stride = 0;
  std::vector<uint8_t> bytes;
  Pages(int64_t pages_, int64_t P_, int64_t pad, std::mt19937_64& rng)
      : pages(pages_), P(P_), page_bytes(P_ * 584 + pad), stride(P_ * 584 + pad + 8),
        bytes(static_cast<size_t>(std::max<int64_t>(pages_ * stride, 1))) {
    fill_garbage(rng, bytes.data(), bytes.size());
  }
  int64_t entries() const { return pages * P; }
  uint8_t* data(int64_t slot) { return &bytes[size_t((slot / P) * stride + (slot % P) * 576)]; }
  uint8_t* scales(int64_t slot) {
    return &bytes[size_t((slot / P) * stride + P * 576 + (slot % P) * 8)];
  }
  TensorView view() const {
    return TensorView(bytes.data(), DType::U8, {pages, page_bytes}, {stride, 1});
  }
};

// How entry and query values are drawn.
struct Values {
  int q_exp = 0;            // q ~ N(0, 1)·2^q_exp
  bool edge_bytes = false;  // some tiles with scale bytes 0, 3 or 9 (finite, not bf16-exact)
  int nonfinite_one_in = 0; // entries with a NaN code, a scale byte 255 or a tile of byte 247
                            // whose codes all overflow: about one in this many (0: none)
  bool subnormals = false;  // some bf16 subnormal RoPE values and q values
  bool edge_nonfinite = false;  // one entry non-finite at a boundary (attention_property)
};
std::ostream& operator<<(std::ostream& os, const Values& v) {
  return os << "Values{q_exp=" << v.q_exp << ", edge_bytes=" << v.edge_bytes
            << ", nonfinite_one_in=" << v.nonfinite_one_in << ", subnormals=" << v.subnormals
            << ", edge_nonfinite=" << v.edge_nonfinite << "}";
}

// Makes entry `slot` non-finite in NoPE tile q: a NaN code at dim d of the tile, its scale byte
// 255, or scale byte 247 with codes of magnitude >= 256 (2^120 times them: ±inf in both modes).
void make_non_finite(Pages& c, int64_t slot, int q, int d, std::mt19937_64& rng) {
  uint8_t* data = c.data(slot);
  uint8_t* scales = c.scales(slot);
  switch (rng() % 3) {
    case 0:  // a NaN code (a +0 tile in vllm mode when its byte is 0)
      data[q * 64 + d] = (rng() & 1) ? 0x7F : 0xFF;
      break;
    case 1:
      scales[q] = 255;
      break;
    default:
      scales[q] = 247;
      for (int k = 0; k < 64; ++k) data[q * 64 + k] = static_cast<uint8_t>(0x78 | (rng() & 0x87));
  }
}

// Writes a random entry: finite codes, scale bytes around 2^0, RoPE values ~ N(0, 1); the edge
// cases of `v`.
void put_entry(Pages& c, int64_t slot, const Values& v, std::mt19937_64& rng) {
  uint8_t* data = c.data(slot);
  uint8_t* scales = c.scales(slot);
  for (int q = 0; q < 7; ++q) {
    scales[q] = static_cast<uint8_t>(118 + rng() % 12);
    if (v.edge_bytes && rng() % 32 == 0) scales[q] = std::array<uint8_t, 3>{0, 3, 9}[rng() % 3];
    for (int d = 0; d < 64; ++d) data[q * 64 + d] = testing::random_code(rng);
  }
  scales[7] = 0;
  std::normal_distribution<float> normal;
  for (int k = 0; k < 64; ++k) {
    uint16_t h = to_bf16(normal(rng));
    if (v.subnormals && rng() % 16 == 0) h = static_cast<uint16_t>((rng() & 0x807F) | 1);
    std::memcpy(data + 448 + 2 * k, &h, 2);
  }
  if (v.nonfinite_one_in == 0 || rng() % static_cast<uint64_t>(v.nonfinite_one_in) != 0) return;
  const int q = static_cast<int>(rng() % 7), d = static_cast<int>(rng() % 64);
  make_non_finite(c, slot, q, d, rng);
}

enum class Layer { swa, c4a_random, c4a_identity, c128a };
std::ostream& operator<<(std::ostream& os, Layer k) {
  static const char* const kNames[] = {"swa", "c4a_random", "c4a_identity", "c128a"};
  return os << kNames[static_cast<int>(k)];
}

struct AttentionCase {
  Layer layer = Layer::swa;
  int64_t T = 1, H = 16, Hs = 16;  // Hs >= H heads per token in q's storage
  int64_t Nw = 128, Pw = 64, Nc = 0, Pc = 64, Pc_pages = 0, pad = 0;
  int invalid_one_in = 0;  // slots -1 with probability about 1 / invalid_one_in
  bool repeats = false;    // window slots drawn with repetition
  bool sink = false, want_lse = true;
  NopeDecode mode = NopeDecode::exact;
  DType slot_dtype = DType::I64;
  Values values;
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const AttentionCase& c) {
  return os << "AttentionCase{" << c.layer << ", T=" << c.T << ", H=" << c.H << ", Hs=" << c.Hs
            << ", Nw=" << c.Nw << ", Pw=" << c.Pw << ", Nc=" << c.Nc << ", Pc=" << c.Pc
            << ", Pc_pages=" << c.Pc_pages << ", pad=" << c.pad
            << ", invalid_one_in=" << c.invalid_one_in << ", repeats=" << c.repeats
            << ", sink=" << c.sink << ", lse=" << c.want_lse
            << ", mode=" << (c.mode == NopeDecode::exact ? "exact" : "vllm") << ", "
            << dtype_name(c.slot_dtype) << ", " << c.values << ", " << c.seed << "}";
}

rc::Gen<AttentionCase> gen_attention_case() {
  return rc::gen::exec([] {
    AttentionCase c;
    c.layer = *rc::gen::element(Layer::swa, Layer::c4a_random, Layer::c4a_identity, Layer::c128a);
    c.T = *rc::gen::weightedElement<int64_t>({{4, 1}, {3, 2}, {1, 3}, {1, 0}});
    c.H = *rc::gen::weightedElement<int64_t>({{3, 16}, {2, 64}, {1, 1}, {1, 5}, {1, 33}});
    c.Hs = c.H + *rc::gen::weightedElement<int64_t>({{3, 0}, {1, 1}, {1, 3}});
    c.Nw = *rc::gen::weightedElement<int64_t>({{4, 128}, {1, 1}, {1, 40}, {1, 130}});
    c.Pw = *rc::gen::element<int64_t>(64, 16, 5, 12, 48);
    switch (c.layer) {
      case Layer::swa:
        c.Nc = *rc::gen::weightedElement<int64_t>({{3, 0}, {1, 3}});
        c.Pc = 64;
        c.Pc_pages = *rc::gen::inRange<int64_t>(0, 2);  // Nc > 0 with no page: every slot -1
        break;
      case Layer::c4a_random:
      case Layer::c4a_identity:
        c.Nc = 512;
        c.Pc = 64;
        c.Pc_pages = *rc::gen::inRange<int64_t>(8, 12);
        break;
      case Layer::c128a:
        c.Nc = *rc::gen::inRange<int64_t>(129, 400);  // several 128-column blocks
        c.Pc = 2;
        c.Pc_pages = *rc::gen::inRange<int64_t>(60, 220);
        break;
    }
    c.pad = *gen_pad(70);
    c.invalid_one_in = *rc::gen::weightedElement<int>({{3, 0}, {2, 5}, {1, 1}});
    c.repeats = *rc::gen::arbitrary<bool>();
    c.sink = *rc::gen::arbitrary<bool>();
    c.want_lse = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
    c.mode = *rc::gen::element(NopeDecode::exact, NopeDecode::vllm);
    c.slot_dtype = *gen_index_dtype();
    c.values.q_exp = *rc::gen::weightedElement<int>({{4, -4}, {2, 0}, {1, -12}, {1, 2}});
    c.values.edge_bytes = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    c.values.nonfinite_one_in = *rc::gen::weightedElement<int>({{4, 0}, {1, 2000}, {1, 100}});
    c.values.subnormals = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    c.values.edge_nonfinite = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    c.seed = *gen_seed();
    return c;
  });
}

// The slots of one set for T tokens: `cols` columns into `entries` entries.
std::vector<int64_t> draw_set(std::mt19937_64& rng, const AttentionCase& c, int64_t cols,
                              int64_t entries, bool compressed) {
  std::vector<int64_t> out;
  std::vector<int64_t> pool(static_cast<size_t>(entries));
  for (int64_t t = 0; t < c.T; ++t) {
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int64_t k = 0; k < cols; ++k) {
      int64_t s = -1;
      if (entries > 0) {
        if (compressed && c.layer == Layer::c4a_identity)
          s = k < entries ? k : -1;  // the indexer's identity rows: entries 0, 1, 2, ...
        else if (!compressed && c.repeats)
          s = static_cast<int64_t>(rng() % static_cast<uint64_t>(entries));
        else
          s = pool[static_cast<size_t>(k) % pool.size()];
      }
      if (c.invalid_one_in > 0 && rng() % static_cast<uint64_t>(c.invalid_one_in) == 0) s = -1;
      out.push_back(s);
    }
  }
  return out;
}

void attention_property(const testing::Plan& plan) {
  const AttentionCase c = *gen_attention_case();
  std::mt19937_64 rng(c.seed.value);
  const int64_t T = c.T, H = c.H;
  Pages window((c.Nw + c.Pw - 1) / c.Pw + 1, c.Pw, c.pad, rng);
  Pages compressed(c.Pc_pages, c.Pc, c.pad, rng);
  for (int64_t s = 0; s < window.entries(); ++s) put_entry(window, s, c.values, rng);
  for (int64_t s = 0; s < compressed.entries(); ++s) put_entry(compressed, s, c.values, rng);
  const std::vector<int64_t> wset = draw_set(rng, c, c.Nw, window.entries(), false);
  const std::vector<int64_t> cset = draw_set(rng, c, c.Nc, compressed.entries(), true);
  if (c.values.edge_nonfinite && T > 0) {
    // One entry non-finite in its first or last tile at a boundary dim: the entry a token's set
    // names at a boundary column (0, the vector widths ±1, 128-column block edges, the last), or
    // the first or last slot of a page.
    const bool in_window = c.Nc == 0 || rng() % 2;
    Pages& pages = in_window ? window : compressed;
    const int64_t cols = in_window ? c.Nw : c.Nc;
    const std::vector<int64_t>& set = in_window ? wset : cset;
    int64_t slot = -1;
    if (rng() % 2) {
      if (cols > 0) {
        const std::vector<int64_t> at = boundary_indices(cols, {128});
        const auto t = static_cast<int64_t>(rng() % static_cast<uint64_t>(T));
        slot = set[size_t(t * cols + at[rng() % at.size()])];
      }
    } else if (pages.entries() > 0) {
      const std::vector<int64_t> at = page_boundary_indices(pages.entries(), pages.P);
      slot = at[rng() % at.size()];
    }
    const std::vector<int64_t> dims = boundary_indices(64);
    if (slot >= 0)
      make_non_finite(pages, slot, rng() % 2 ? 0 : 6, static_cast<int>(dims[rng() % dims.size()]),
                      rng);
  }
  const IndexArray wslots(wset, c.slot_dtype, T, c.Nw, 0, rng());
  const IndexArray cslots(cset, c.slot_dtype, T, c.Nc, 0, rng());
  // q: heads >= H hold garbage (NaNs included), outside the view.
  std::vector<uint16_t> q(static_cast<size_t>(std::max<int64_t>(T * c.Hs * 512, 1)));
  fill_garbage(rng, q.data(), q.size() * 2);
  std::normal_distribution<float> normal;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      uint16_t* row = &q[static_cast<size_t>((t * c.Hs + h) * 512)];
      for (int d = 0; d < 512; ++d) row[d] = to_bf16(std::ldexp(normal(rng), c.values.q_exp));
      if (c.values.subnormals && rng() % 4 == 0) row[rng() % 512] = 0x8003;
    }
  std::vector<float> sink(static_cast<size_t>(std::max<int64_t>(H, 1)));
  for (float& x : sink) x = rng() % 3 == 0 ? -kInf : normal(rng);
  const TensorView qv(q.data(), DType::BF16, {T, H, 512}, {c.Hs * 512, 512, 1});
  const TensorView sink_v = c.sink ? TensorView(sink.data(), DType::F32, {H}) : TensorView();

  const size_t n_out = static_cast<size_t>(std::max<int64_t>(T * H * 512, 1));
  const size_t n_lse = static_cast<size_t>(std::max<int64_t>(T * H, 1));
  auto call = [&](const Options& o, std::vector<uint16_t>& out, std::vector<float>& lse) {
    out.assign(n_out, 0xA5A5);  // sentinels: every value must be written
    lse.assign(n_lse, f32_from_bits(0xA5A5A5A5u));
    sparse_mla_attention(qv, window.view(), c.Pw, wslots.view(), compressed.view(), c.Pc,
                         cslots.view(), sink_v, kAttentionScale, c.mode,
                         MutableTensorView(out.data(), DType::BF16, {T, H, 512}),
                         c.want_lse ? MutableTensorView(lse.data(), DType::F32, {T, H})
                                    : MutableTensorView(),
                         o);
  };
  std::vector<uint16_t> ref_out;
  std::vector<float> ref_lse;
  call(reference(), ref_out, ref_lse);
  const testing::AttentionInputs in{qv,     window.view(),     c.Pw, wslots.view(),
                                    compressed.view(), c.Pc, cslots.view(), sink_v,
                                    kAttentionScale, c.mode};
  const testing::AttentionBound bound = testing::attention_bound(in);
  int nan_rows = 0, zero_rows = 0;
  for (int64_t t = 0; t < T; ++t) {
    nan_rows += ref_out[size_t(t * H * 512)] == 0x7FC0;
    zero_rows += bound.empty[size_t(t)];
  }
  RC_TAG(nan_rows > 0 ? "NaN rows" : zero_rows > 0 ? "zero rows" : "finite rows");

  std::map<std::string, std::pair<std::vector<uint16_t>, std::vector<float>>> first;
  testing::for_each(testing::runs("sparse_mla_attention", plan), [&](const testing::Run& run) {
    const std::string label = run.label();
    std::vector<uint16_t> out;
    std::vector<float> lse;
    call(run.options(), out, lse);
    if (T * H > 0) {
      std::string v = testing::attention_out_violation(bound, out.data(), ref_out.data());
      if (v.empty() && c.want_lse)
        v = testing::attention_lse_violation(bound, lse.data(), ref_lse.data());
      if (!v.empty()) RC_FAIL(label + ": " + v);
    }
    // The same bytes for every thread count (the 1-thread run comes first).
    const std::string key = run.variant.name + ":" + run.target;
    if (run.threads == 1) {
      first[key] = {out, lse};
      return;
    }
    assert_same_bytes(out, first[key].first, label + " out vs 1 thread");
    if (c.want_lse) assert_same_bytes(lse, first[key].second, label + " lse vs 1 thread");
  });
}

// Every optimized variant on every target, with 1, 2 and 8 threads.
const testing::Plan kAttentionRuns{false, std::nullopt, true, {1, 2, 8}};
const bool kAttention = register_property("SparseMlaAttention", "WithinToleranceOfReference",
                                          "sparse_mla_attention", kAttentionRuns,
                                          attention_property);

// ---- sparse_mla_attention over consecutive tokens of requests ----

// Requests in prefill: each token reads the window of its position (metadata.md §6: oldest first,
// −1 at the end while the position is below Nw − 1) and a compressed set: C128A's entries
// 0 .. (pos + 1) / 128 − 1 in order (§7), C4A's 512 drawn at random, or C4A's identity rows
// (indexer.md §5.2: entries 0 .. (pos + 1) / 4 − 1 in order, up to 512). Positions mostly advance
// by one, sometimes stay or jump; some entries are non-finite or not bf16-exact. The tokens'
// windows overlap, which the optimized driver may serve from rows decoded once for several
// tokens (attention_hwy.cpp, RowStrip); every token's bytes must be those of the token alone.
struct RunOfTokensCase {
  int64_t requests = 1, H = 16, Nw = 128, first = 0;
  std::vector<int64_t> steps;  // per token: its position minus the previous token's (request's)
  Layer layer = Layer::c128a;
  NopeDecode mode = NopeDecode::exact;
  Values values;
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const RunOfTokensCase& c) {
  os << "RunOfTokensCase{requests=" << c.requests << ", H=" << c.H << ", Nw=" << c.Nw
     << ", first=" << c.first << ", " << c.layer
     << ", mode=" << (c.mode == NopeDecode::exact ? "exact" : "vllm") << ", " << c.values << ", "
     << c.seed << ", steps=";
  for (int64_t x : c.steps) os << x << " ";
  return os << "}";
}

rc::Gen<RunOfTokensCase> gen_run_of_tokens_case() {
  return rc::gen::exec([] {
    RunOfTokensCase c;
    // Tokens per request; 520 (one request of 16 heads, no random C4A set): past a strip's 512
    // rows, and C4A's identity rows past a block of 128.
    const int64_t n = *rc::gen::weightedElement<int64_t>({{8, 40}, {2, 120}, {1, 520}});
    const bool long_run = n > 120;
    c.requests = long_run ? 1 : *rc::gen::weightedElement<int64_t>({{3, 1}, {1, 2}});
    c.H = n > 40 ? 16 : *rc::gen::weightedElement<int64_t>({{3, 16}, {1, 64}, {1, 5}});
    c.Nw = *rc::gen::weightedElement<int64_t>({{4, 128}, {1, 32}, {1, 96}, {1, 130}});
    c.first = *rc::gen::weightedElement<int64_t>({{2, 0}, {2, 200}, {1, 90}});
    for (int64_t i = 0; i < c.requests * n; ++i)
      c.steps.push_back(*rc::gen::weightedElement<int64_t>({{60, 1}, {1, 0}, {1, 2}, {1, 5}}));
    c.layer = long_run ? *rc::gen::element(Layer::swa, Layer::c4a_identity, Layer::c128a)
                       : *rc::gen::element(Layer::swa, Layer::c4a_random, Layer::c4a_identity,
                                           Layer::c128a);
    c.mode = *rc::gen::element(NopeDecode::exact, NopeDecode::vllm);
    c.values.q_exp = -4;
    c.values.edge_bytes = *rc::gen::weightedElement<bool>({{6, false}, {1, true}});
    c.values.nonfinite_one_in = *rc::gen::weightedElement<int>({{3, 0}, {1, 300}});
    c.values.subnormals = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.seed = *gen_seed();
    return c;
  });
}

void run_of_tokens_property(const testing::Plan& plan) {
  const RunOfTokensCase c = *gen_run_of_tokens_case();
  std::mt19937_64 rng(c.seed.value);
  const int64_t T = static_cast<int64_t>(c.steps.size()), H = c.H, per = T / c.requests;
  // Positions, and each request's entries: window entries by position, compressed by index.
  std::vector<int64_t> pos(static_cast<size_t>(T));
  int64_t max_pos = 0;
  for (int64_t t = 0; t < T; ++t) {
    pos[size_t(t)] = (t % per == 0 ? c.first : pos[size_t(t - 1)]) + c.steps[size_t(t)];
    max_pos = std::max(max_pos, pos[size_t(t)]);
  }
  const int64_t Pw = 64, Pc = c.layer == Layer::c128a ? 2 : 64;
  const int64_t wpages = (max_pos + Pw) / Pw;
  const int64_t cmax = c.layer == Layer::c128a ? (max_pos + 1) / 128 + 1 : 600;
  const int64_t cpages = (cmax + Pc - 1) / Pc;
  Pages window(c.requests * wpages, Pw, 0, rng), compressed(c.requests * cpages, Pc, 0, rng);
  for (int64_t e = 0; e < window.entries(); ++e) put_entry(window, e, c.values, rng);
  for (int64_t e = 0; e < compressed.entries(); ++e) put_entry(compressed, e, c.values, rng);
  // Block tables: each request's pages in a shuffled order.
  std::vector<int64_t> wtable(static_cast<size_t>(window.pages)), ctable(size_t(compressed.pages));
  std::iota(wtable.begin(), wtable.end(), 0);
  std::iota(ctable.begin(), ctable.end(), 0);
  std::shuffle(wtable.begin(), wtable.end(), rng);
  std::shuffle(ctable.begin(), ctable.end(), rng);
  const int64_t Nc = c.layer == Layer::swa ? 0 : c.layer == Layer::c128a ? cmax : 512;
  std::vector<int64_t> wset, cset;
  std::vector<int64_t> pool(static_cast<size_t>(cmax));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = t / per, p = pos[size_t(t)], start = std::max<int64_t>(p - c.Nw + 1, 0);
    for (int64_t o = 0; o < c.Nw; ++o) {
      const int64_t e = start + o;
      wset.push_back(e <= p ? wtable[size_t(r * wpages + e / Pw)] * Pw + e % Pw : -1);
    }
    if (c.layer == Layer::c4a_random) {
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), rng);
    }
    for (int64_t o = 0; o < Nc; ++o) {
      const int64_t e = c.layer == Layer::c4a_random ? pool[size_t(o)] : o;
      const bool valid = c.layer == Layer::c4a_random ||
                         o < (p + 1) / (c.layer == Layer::c4a_identity ? 4 : 128);
      cset.push_back(valid ? ctable[size_t(r * cpages + e / Pc)] * Pc + e % Pc : -1);
    }
  }
  // q ~ N(0, 1)·2^q_exp: draws from a table of 4096, indexed by random bits.
  std::normal_distribution<float> normal;
  std::vector<uint16_t> draws(4096);
  for (auto& x : draws) x = to_bf16(std::ldexp(normal(rng), c.values.q_exp));
  std::vector<uint16_t> q(static_cast<size_t>(std::max<int64_t>(T * H * 512, 1)));
  for (auto& x : q) x = draws[rng() % 4096];
  std::vector<float> sink(static_cast<size_t>(H));
  for (float& x : sink) x = normal(rng);
  RC_TAG(c.layer);

  // Tokens t0 .. t0 + n − 1 in one call.
  auto call = [&](const Options& o, int64_t t0, int64_t n, uint16_t* out, float* lse) {
    sparse_mla_attention(
        TensorView(q.data() + t0 * H * 512, DType::BF16, {n, H, 512}), window.view(), Pw,
        TensorView(wset.data() + t0 * c.Nw, DType::I64, {n, c.Nw}), compressed.view(), Pc,
        TensorView(Nc > 0 ? cset.data() + t0 * Nc : nullptr, DType::I64, {n, Nc}),
        TensorView(sink.data(), DType::F32, {H}), kAttentionScale, c.mode,
        MutableTensorView(out + t0 * H * 512, DType::BF16, {n, H, 512}),
        MutableTensorView(lse + t0 * H, DType::F32, {n, H}), o);
  };
  // Each variant's tokens alone, from its first run (the thread count changes no byte).
  std::map<std::string, std::pair<std::vector<uint16_t>, std::vector<float>>> alone;
  testing::for_each(testing::runs("sparse_mla_attention", plan), [&](const testing::Run& run) {
    const std::string label = run.label();
    std::vector<uint16_t> out(q.size(), 0xA5A5);
    std::vector<float> lse(static_cast<size_t>(T * H));
    call(run.options(), 0, T, out.data(), lse.data());
    auto& [one, lse_one] = alone[run.variant.name + ":" + run.target];
    if (one.empty()) {
      one.assign(q.size(), 0x5A5A);
      lse_one.resize(lse.size());
      for (int64_t t = 0; t < T; ++t) call(run.options(), t, 1, one.data(), lse_one.data());
    }
    assert_same_bytes(out, one, label + " out vs tokens alone");
    assert_same_bytes(lse, lse_one, label + " lse vs tokens alone");
  });
}

// Every optimized variant (Highway's on the dispatched target), 1 and 2 threads.
const bool kRunOfTokens = register_property(
    "SparseMlaAttention", "RunsOfTokensGiveTheBytesOfTokensAlone", "sparse_mla_attention",
    testing::Plan{false, std::nullopt, false, {1, 2}}, run_of_tokens_property);

// ---- fused_qnorm_rope_kv_insert ----

struct InsertCase {
  int64_t T = 1, Hq = 4, Hpad = 4, T_ins = 1, T_kv = 1, R = 8, P = 64, pages = 1, pad = 0;
  int invalid_one_in = 4;
  int q_exp = 0, kv_exp = 0;  // q, kv ~ N(0, 1)·2^exp, kv tiles with a few outliers
  double eps = 1e-6;
  bool overflow = false;      // a table row of huge values: a rotated value overflows
  int64_t overflow_pair = -1; // -1: every cos of the row huge, else the cos and sin of this pair
  bool non_finite = false;    // one q or kv value NaN or ±inf
  ScaleClamp clamp = ScaleClamp::cpu;
  Fp8Subnormals subnormals = Fp8Subnormals::exact;
  DType dtype = DType::I64;
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const InsertCase& c) {
  return os << "InsertCase{T=" << c.T << ", Hq=" << c.Hq << ", Hpad=" << c.Hpad
            << ", T_ins=" << c.T_ins << ", T_kv=" << c.T_kv << ", R=" << c.R << ", P=" << c.P
            << ", pages=" << c.pages
            << ", pad=" << c.pad << ", invalid_one_in=" << c.invalid_one_in
            << ", q_exp=" << c.q_exp << ", kv_exp=" << c.kv_exp << ", eps=" << c.eps
            << ", overflow=" << c.overflow << ", overflow_pair=" << c.overflow_pair
            << ", non_finite=" << c.non_finite
            << ", clamp=" << (c.clamp == ScaleClamp::cpu ? "cpu" : "gpu")
            << ", subnormals=" << (c.subnormals == Fp8Subnormals::exact ? "exact" : "flush")
            << ", " << dtype_name(c.dtype) << ", " << c.seed << "}";
}

rc::Gen<InsertCase> gen_insert_case() {
  return rc::gen::exec([] {
    InsertCase c;
    c.T = *rc::gen::inRange<int64_t>(0, 9);
    c.T_ins = *rc::gen::inRange<int64_t>(0, c.T + 1);
    c.T_kv = *rc::gen::weightedElement<int64_t>(
        {{1, c.T_ins}, {2, *rc::gen::inRange<int64_t>(c.T_ins, c.T + 1)}});
    c.Hq = *rc::gen::weightedElement<int64_t>({{3, 4}, {1, 0}, {1, 1}, {1, 16}});
    c.Hpad = c.Hq + *rc::gen::inRange<int64_t>(0, 3);
    c.R = *rc::gen::inRange<int64_t>(1, 30);
    c.P = *rc::gen::element<int64_t>(64, 4, 3, 6, 12);
    c.pages = (c.T_ins + c.P - 1) / c.P + *rc::gen::inRange<int64_t>(0, 3);
    c.pad = *gen_pad(40);
    c.invalid_one_in = *rc::gen::element(0, 3);
    c.q_exp = *rc::gen::weightedElement<int>({{4, 0}, {1, -60}, {1, 40}});
    c.kv_exp = *rc::gen::weightedElement<int>({{4, 0}, {1, -100}, {1, -130}, {1, 60}});
    c.eps = *rc::gen::element(1e-6, 0.0, 1e-30);
    c.overflow = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    // One pair at a boundary of the 32 (the last vector of the row among them) or anywhere.
    c.overflow_pair = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::just<int64_t>(-1)},
         {1, rc::gen::elementOf(boundary_indices(32))},
         {1, rc::gen::inRange<int64_t>(0, 32)}});
    c.non_finite = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.clamp = *rc::gen::element(ScaleClamp::cpu, ScaleClamp::gpu);
    c.subnormals = *rc::gen::element(Fp8Subnormals::exact, Fp8Subnormals::flush);
    c.dtype = *gen_index_dtype();
    c.seed = *gen_seed();
    return c;
  });
}

void check_insert(const testing::Plan& plan, const InsertCase& c) {
  std::mt19937_64 rng(c.seed.value);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> q(static_cast<size_t>(std::max<int64_t>(c.T * c.Hq * 512, 1)));
  std::vector<uint16_t> kv(static_cast<size_t>(std::max<int64_t>(c.T_kv * 512, 1)));
  for (auto& x : q) x = to_bf16(std::ldexp(normal(rng), c.q_exp));
  for (auto& x : kv) {
    // Mostly small values with a few outliers per tile: codes from subnormal to 448.
    const float scale = rng() % 16 == 0 ? 64.0f : 1.0f;
    x = to_bf16(std::ldexp(normal(rng) * scale, c.kv_exp));
  }
  // Padding rows t >= T_ins (attention.md §3.1): garbage bits, NaN and inf among them.
  fill_garbage(rng, reinterpret_cast<uint8_t*>(kv.data() + c.T_ins * 512),
               static_cast<size_t>((c.T_kv - c.T_ins) * 512 * 2));
  for (int64_t i = c.T_ins * 512; i < c.T_kv * 512; i += 7)
    kv[size_t(i)] = static_cast<uint16_t>(i % 2 ? 0x7FC0 : 0x7F80);  // NaN, +inf
  std::vector<float> table(static_cast<size_t>(c.R * 64));
  for (int64_t r = 0; r < c.R; ++r)
    for (int i = 0; i < 32; ++i) {
      const float angle = std::uniform_real_distribution<float>(-3.2f, 3.2f)(rng);
      table[size_t(r * 64 + i)] = std::cos(angle);
      table[size_t(r * 64 + 32 + i)] = std::sin(angle);
    }
  std::vector<int64_t> positions;
  for (int64_t t = 0; t < c.T; ++t)
    positions.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(c.R)));
  if (c.overflow && c.T > 0) {
    float* row = &table[size_t(positions[rng() % size_t(c.T)] * 64)];
    if (c.overflow_pair < 0)
      for (int i = 0; i < 32; ++i) row[i] = 3e38f;
    else
      row[c.overflow_pair] = row[32 + c.overflow_pair] = 3e38f;
  }
  if (c.non_finite && c.T_ins > 0) {  // in a row of q or kv, at a boundary dim half the time
    const std::vector<int64_t> dims = boundary_indices(512, {448});  // 448: the RoPE dims
    const uint16_t bad = static_cast<uint16_t>(rng() % 2 ? 0x7FC0 : rng() % 2 ? 0x7F80 : 0xFF80);
    if (rng() % 2 && c.Hq > 0)
      q[size_t((rng() % static_cast<uint64_t>(c.T * c.Hq)) * 512 + special_index(rng, dims, 512))] =
          bad;
    else
      kv[size_t((rng() % static_cast<uint64_t>(c.T_ins)) * 512 + special_index(rng, dims, 512))] =
          bad;
  }
  const std::vector<int64_t> slots = draw_slots(rng, c.T_ins, c.pages * c.P, c.invalid_one_in);
  const IndexArray pos_a(positions, c.dtype, c.T, kVector, 0, rng());
  const IndexArray slot_a(slots, c.dtype, c.T_ins, kVector, 0, rng());
  const int64_t stride = c.P * 584 + c.pad;
  std::vector<uint8_t> cache0(static_cast<size_t>(std::max<int64_t>(c.pages * stride, 1)));
  fill_garbage(rng, cache0.data(), cache0.size());

  struct Result {
    Outcome outcome;
    std::vector<uint16_t> q_out;
    std::vector<uint8_t> cache;
  };
  auto call = [&](const Options& o, int64_t kv_rows) {
    Result r;
    r.q_out.assign(static_cast<size_t>(std::max<int64_t>(c.T * c.Hpad * 512, 1)), 0xA5A5);
    r.cache = cache0;
    r.outcome = capture([&] {
      fused_qnorm_rope_kv_insert(
          TensorView(q.data(), DType::BF16, {c.T, c.Hq, 512}),
          TensorView(kv.data(), DType::BF16, {kv_rows, 512}), pos_a.view(), slot_a.view(),
          MutableTensorView(r.cache.data(), DType::U8, {c.pages, stride}),
          TensorView(table.data(), DType::F32, {c.R, 64}), c.Hpad, c.eps, c.P, c.clamp,
          c.subnormals, MutableTensorView(r.q_out.data(), DType::BF16, {c.T, c.Hpad, 512}), o);
    });
    return r;
  };
  // The reference without the padding rows: every run with them must equal it.
  const Result ref = call(reference(), c.T_ins);
  RC_TAG(ref.outcome.kind.empty() ? "written" : ref.outcome.kind);
  if (c.T_kv > c.T_ins) {
    RC_TAG("padded");
    const Result padded = call(reference(), c.T_kv);
    RC_ASSERT(padded.outcome == ref.outcome);
    assert_same_bytes(padded.q_out, ref.q_out, "ref (padded) q_out");
    assert_same_bytes(padded.cache, ref.cache, "ref (padded) swa_cache");
  }
  testing::for_each(testing::runs("fused_qnorm_rope_kv_insert", plan),
                    [&](const testing::Run& run) {
                      const std::string label = run.label();
                      const uint64_t handed = detail::fallback_count();
                      const Result r = call(run.options(), c.T_kv);
                      // No hand-over to the reference (core/fallback.hpp) where it succeeds.
                      if (ref.outcome.kind.empty() && detail::fallback_count() != handed)
                        RC_FAIL(label + ": handed the call to the reference, which succeeds");
                      RC_ASSERT(r.outcome == ref.outcome);
                      assert_same_bytes(r.q_out, ref.q_out, label + " q_out");
                      assert_same_bytes(r.cache, ref.cache, label + " swa_cache");
                    });
}

void insert_property(const testing::Plan& plan) { check_insert(plan, *gen_insert_case()); }

// The RoPE pair that overflows at each boundary of the 32 pairs in turn (generators.hpp), the
// other pairs finite: the last pair is the last vector of the checked row.
void insert_overflow_boundary_property(const testing::Plan& plan) {
  InsertCase c = *gen_insert_case();
  c.overflow = c.T > 0;
  c.non_finite = false;
  for (const int64_t pair : boundary_indices(32)) {
    c.overflow_pair = pair;
    check_insert(plan, c);
  }
}

const testing::Plan kInsertRuns{false, std::nullopt, true, {1, 2, 8}};
const bool kInsert = register_property("FusedQnormRopeKvInsert", "EqualsReference",
                                       "fused_qnorm_rope_kv_insert", kInsertRuns,
                                       insert_property);
// The split of num_threads = 0 from one token, and the sorted repeated-slot search.
const testing::Plan kInsertGatedRuns{false, std::nullopt, true, {0, 1, 2, 8}};
const bool kInsertBoundary = register_property(
    "FusedQnormRopeKvInsert", "OverflowAtEveryBoundaryPairEqualsReference",
    "fused_qnorm_rope_kv_insert", kInsertRuns, insert_overflow_boundary_property);
const bool kInsertGated = register_gated_property("FusedQnormRopeKvInsert", "EqualsReference",
                                                  "fused_qnorm_rope_kv_insert", kInsertGatedRuns,
                                                  insert_property);

// ---- inverse_gptj_rope_o_proj ----

struct InverseCase {
  int64_t T = 1, H = 1, D = 512, rope_dim = 64, R = 8;
  DType o_dtype = DType::BF16, pos_dtype = DType::I64;
  bool any_bits = false;  // o: any finite bit pattern (subnormals, the largest values)
  bool overflow = false;  // a used table row of huge values: a rotated value overflows
  bool non_finite = false;  // one o value NaN or inf
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const InverseCase& c) {
  return os << "InverseCase{T=" << c.T << ", H=" << c.H << ", D=" << c.D
            << ", rope_dim=" << c.rope_dim << ", R=" << c.R << ", " << dtype_name(c.o_dtype)
            << ", " << dtype_name(c.pos_dtype) << ", any_bits=" << c.any_bits
            << ", overflow=" << c.overflow << ", non_finite=" << c.non_finite << ", " << c.seed
            << "}";
}

rc::Gen<InverseCase> gen_inverse_case() {
  return rc::gen::exec([] {
    InverseCase c;
    c.T = *rc::gen::inRange<int64_t>(0, 9);
    c.H = *rc::gen::weightedElement<int64_t>({{3, 3}, {1, 0}, {1, 1}, {1, 64}});
    c.D = *rc::gen::element<int64_t>(512, 512, 128, 74, 16, 2, 1024);  // 1024: lanes on the heap
    // The model's 64, the whole head, one pair, or any even width up to D.
    const int64_t any_even = 2 * *rc::gen::inRange<int64_t>(1, c.D / 2 + 1);
    c.rope_dim = std::min(c.D, *rc::gen::element<int64_t>(64, 2, c.D, any_even));
    c.R = *rc::gen::inRange<int64_t>(1, 30);
    c.o_dtype = *rc::gen::element(DType::BF16, DType::F16);
    c.pos_dtype = *gen_index_dtype();
    c.any_bits = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    c.overflow = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.non_finite = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.seed = *gen_seed();
    return c;
  });
}

// o: BF16 of N(0, 1) or F16 of magnitude 2^-5 .. 2^6, or any finite pattern; a table of random
// angles. Each variant runs with and without Options::fresh_outputs.
void inverse_property(const testing::Plan& plan) {
  const InverseCase c = *gen_inverse_case();
  std::mt19937_64 rng(c.seed.value);
  std::normal_distribution<float> normal;
  const bool f16 = c.o_dtype == DType::F16;
  const uint16_t exp_mask = f16 ? 0x7C00 : 0x7F80;
  std::vector<uint16_t> o(static_cast<size_t>(std::max<int64_t>(c.T * c.H * c.D, 1)));
  for (auto& x : o) {
    if (c.any_bits) {
      do x = static_cast<uint16_t>(rng()); while ((x & exp_mask) == exp_mask);
    } else if (f16) {  // sign, exponent 2^-5 .. 2^5, any mantissa
      x = static_cast<uint16_t>((rng() % 2) << 15 | (10 + rng() % 11) << 10 | (rng() & 0x3FF));
    } else {
      x = to_bf16(normal(rng));
    }
  }
  if (c.non_finite && c.T * c.H > 0) {  // in a row, at a boundary half the time (RoPE start)
    const int64_t i = special_index(rng, boundary_indices(c.D, {c.D - c.rope_dim}), c.D);
    o[size_t((rng() % static_cast<uint64_t>(c.T * c.H)) * c.D + i)] = static_cast<uint16_t>(
        exp_mask | (rng() % 2 ? 0x8000 : 0) | (rng() % 2 ? 1 : 0));  // ±inf or NaN
  }
  const int64_t half = c.rope_dim / 2;
  std::vector<float> table(static_cast<size_t>(c.R * c.rope_dim));
  for (int64_t r = 0; r < c.R; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = std::uniform_real_distribution<float>(-3.2f, 3.2f)(rng);
      table[size_t(r * c.rope_dim + i)] = std::cos(angle);
      table[size_t(r * c.rope_dim + half + i)] = std::sin(angle);
    }
  std::vector<int64_t> positions;
  for (int64_t t = 0; t < c.T; ++t)
    positions.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(c.R)));
  if (c.overflow && c.T > 0)
    for (int64_t i = 0; i < c.rope_dim; ++i)
      table[size_t(positions[rng() % size_t(c.T)] * c.rope_dim + i)] = 3e38f;
  const IndexArray pos_a(positions, c.pos_dtype, c.T, kVector, 0, rng());

  struct Result {
    Outcome outcome;
    std::vector<float> out;
  };
  auto call = [&](const Options& opt) {
    Result r;
    r.out.assign(o.size(), f32_from_bits(0xA5A5A5A5u));
    r.outcome = capture([&] {
      inverse_gptj_rope_o_proj(TensorView(o.data(), c.o_dtype, {c.T, c.H, c.D}), pos_a.view(),
                               TensorView(table.data(), DType::F32, {c.R, c.rope_dim}),
                               c.rope_dim,
                               MutableTensorView(r.out.data(), DType::F32, {c.T, c.H, c.D}), opt);
    });
    return r;
  };
  const Result ref = call(reference());
  RC_TAG(ref.outcome.kind.empty() ? "written" : ref.outcome.kind);
  testing::for_each(testing::runs("inverse_gptj_rope_o_proj", plan),
                    [&](const testing::Run& run) {
                      // Options::fresh_outputs: checked while written, so out is compared only
                      // when the call succeeds.
                      for (const bool fresh : {false, true}) {
                        const std::string label = run.label() + (fresh ? " fresh_outputs" : "");
                        Options opt = run.options();
                        opt.fresh_outputs = fresh;
                        const uint64_t handed = detail::fallback_count();
                        const Result r = call(opt);
                        if (ref.outcome.kind.empty() && detail::fallback_count() != handed)
                          RC_FAIL(label + ": handed the call to the reference, which succeeds");
                        RC_ASSERT(r.outcome == ref.outcome);
                        if (!fresh || ref.outcome.kind.empty())
                          assert_same_bytes(r.out, ref.out, label + " out");
                      }
                    });
}

const testing::Plan kInverseRuns{false, std::nullopt, true, {1, 2, 8}};
const bool kInverse = register_property("InverseGptjRopeOProj", "EqualsReference",
                                        "inverse_gptj_rope_o_proj", kInverseRuns,
                                        inverse_property);

}  // namespace
}  // namespace dsv4cpu::prop
