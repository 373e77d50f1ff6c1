// Properties of the logits ops (indexer.md §4, §7, §8) for every registered variant: every Highway
// target and fixed ISA of the registry, with 1, 2 and 8 threads (which must give identical bytes):
//   fp8_paged_mqa_logits  every value within the bound B of the exact binary64 logits
//                         (numerics.md §11.6), −inf past each row, NaN exactly at NaN keys;
//   indexer_topk          the band rule of numerics.md §11.7 against the exact logits, and
//                         identity rows exact.
// Each fixed ISA is its own test (<Suite>.Amx..., <Suite>.Avx512bf16...), skipped where this
// machine lacks it and failing where it is required (testing::isa_required).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/numerics.hpp"
#include "generators.hpp"
#include "prop_util.hpp"

namespace dsv4cpu::prop {
namespace {

// Every variant (the reference included: it is held to the same bound), with 1, 2 and 8 threads.
const testing::Plan kEveryVariant{true, std::nullopt, true, {1, 2, 8}};

// ---- shared data ----

// A random finite fp8 code: all codes, or only E = 0 (±m·2⁻⁹, subnormal and zero) when tiny.
uint8_t draw_code(std::mt19937_64& rng, bool tiny) {
  const uint8_t c = testing::random_code(rng);
  return tiny ? static_cast<uint8_t>(c & 0x87) : c;
}

// How a row's values are drawn.
struct ValueMode {
  bool tiny_codes = false;  // fp8 subnormal codes only
  int weight_exp = 0;       // head weights ~ N(0, 1)·2^weight_exp (down to the subnormal range)
  int nan_one_in = 0;       // keys with a NaN code: about one in nan_one_in (0: none)
  bool edge_nans = false;   // also half the keys at boundaries (page edges, vector widths ±1),
                            // each with a NaN code at a boundary dim
};
std::ostream& operator<<(std::ostream& os, const ValueMode& m) {
  return os << "ValueMode{tiny=" << m.tiny_codes << ", weight_exp=" << m.weight_exp
            << ", nan_one_in=" << m.nan_one_in << ", edge_nans=" << m.edge_nans << "}";
}
rc::Gen<ValueMode> gen_value_mode() {
  return rc::gen::exec([] {
    ValueMode m;
    m.tiny_codes = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    m.weight_exp = *rc::gen::weightedElement<int>({{4, 0}, {1, -20}, {1, -130}, {1, 6}});
    m.nan_one_in = *rc::gen::weightedElement<int>({{3, 0}, {2, 7}, {1, 2}});
    m.edge_nans = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    return m;
  });
}

// A paged indexer K cache with garbage in the page padding, a finite decoy key (scale 2^20) in
// every entry, then a key at every visible position of every request of `table` (request r reads
// pages table.entries[r][c] for c < ceil(len_r / P)): a misread key gives a wrong finite logit.
// NaN codes at random keys and dims, and with edge_nans at the boundary keys of each request
// (page_boundary_indices: the first and last slot of every page) and boundary dims.
testing::KCache make_cache(std::mt19937_64& rng, const BlockTable& table,
                           const std::vector<int64_t>& lens, int64_t stride_pad,
                           const ValueMode& m) {
  const int64_t P = table.block_size;
  testing::KCache kv(P, std::max<int64_t>(table.num_pages, 1), P * 132 + stride_pad);
  fill_garbage(rng, kv.bytes.data(), kv.bytes.size());
  std::vector<uint8_t> key(128);
  for (int64_t page = 0; page < kv.pages; ++page)
    for (int64_t e = 0; e < P; ++e) {
      fill_garbage(rng, key.data(), key.size());
      for (auto& c : key) c = testing::fp8_is_nan(c) ? 0x7E : c;
      kv.set(page, e, key.data(), 0x1p20f);
    }
  const std::vector<int64_t> dims = boundary_indices(128);
  for (size_t r = 0; r < lens.size(); ++r) {
    const std::vector<int64_t> edges = page_boundary_indices(lens[r], P);
    for (int64_t j = 0; j < lens[r]; ++j) {
      for (auto& c : key) c = draw_code(rng, m.tiny_codes);
      if (m.nan_one_in > 0 && rng() % static_cast<uint64_t>(m.nan_one_in) == 0)
        key[rng() % 128] = (rng() & 1) ? 0x7F : 0xFF;
      if (m.edge_nans && std::binary_search(edges.begin(), edges.end(), j) && rng() % 2)
        key[size_t(dims[rng() % dims.size()])] = (rng() & 1) ? 0x7F : 0xFF;
      const int e = static_cast<int>(rng() % 51) - 40;  // key scales 2^-40 .. 2^10
      kv.set(table.entries[r * table.cols + j / P], j % P, key.data(), std::ldexp(1.0f, e));
    }
  }
  return kv;
}

void fill_queries(std::mt19937_64& rng, const ValueMode& m, std::vector<uint8_t>& q,
                  std::vector<float>& w) {
  for (auto& c : q) c = draw_code(rng, m.tiny_codes);
  for (auto& x : w) x = std::ldexp(std::normal_distribution<float>(0.0f, 1.0f)(rng), m.weight_exp);
}

// ---- fp8_paged_mqa_logits ----

struct LogitsCase {
  int64_t H = 64, P = 64, B = 1, next_n = 1, S_pad = 0, stride_pad = 0;
  bool lens_2d = false;
  std::vector<int64_t> seq_lens;  // [B] or [B, next_n]
  DType lens_dtype = DType::I32;
  BlockTable table;
  ValueMode values;
  Seed seed;
  // Visible length of row b·next_n + j (indexer.md §8).
  int64_t row_length(int64_t b, int64_t j) const {
    if (lens_2d) return seq_lens[static_cast<size_t>(b * next_n + j)];
    return std::max<int64_t>(0, seq_lens[static_cast<size_t>(b)] - next_n + j + 1);
  }
};
std::ostream& operator<<(std::ostream& os, const LogitsCase& c) {
  os << "LogitsCase{H=" << c.H << ", P=" << c.P << ", B=" << c.B << ", next_n=" << c.next_n
     << ", lens_2d=" << c.lens_2d << ", seq_lens=";
  print_list(os, c.seq_lens) << " " << dtype_name(c.lens_dtype) << ", S_pad=" << c.S_pad
                             << ", stride_pad=" << c.stride_pad << ", " << c.table << ", "
                             << c.values << ", " << c.seed << "}";
  return os;
}

rc::Gen<LogitsCase> gen_logits_case() {
  return rc::gen::exec([] {
    LogitsCase c;
    c.H = *rc::gen::weightedElement<int64_t>({{6, 64}, {1, 0}, {1, 1}, {1, 8}, {1, 16}, {1, 24}, {1, 72}});
    c.P = *rc::gen::weightedElement<int64_t>({{3, 16}, {3, 64}, {2, 256}, {1, 1}, {1, 5}, {1, 6}, {1, 12}, {1, 48}, {1, 96}});
    c.B = *rc::gen::inRange<int64_t>(0, 4);
    c.next_n = *rc::gen::weightedElement<int64_t>({{3, 1}, {1, 2}, {1, 3}});
    c.lens_2d = c.next_n > 1 && *rc::gen::arbitrary<bool>();
    const int64_t max_len = std::min<int64_t>(3 * c.P + 3, 800);
    const auto len = rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::inRange<int64_t>(0, std::min<int64_t>(max_len, 40) + 1)},
         {2, rc::gen::inRange<int64_t>(0, max_len + 1)}});
    std::vector<int64_t> pages_len;  // keys each batch entry reads
    for (int64_t b = 0; b < c.B; ++b) {
      int64_t longest = 0;
      for (int64_t j = 0; j < (c.lens_2d ? c.next_n : 1); ++j) {
        c.seq_lens.push_back(*len);
        longest = std::max(longest, c.seq_lens.back());
      }
      pages_len.push_back(longest);
    }
    c.lens_dtype = *gen_index_dtype();
    c.table = *gen_block_table(pages_len, c.P);
    c.S_pad = *gen_pad(9);
    c.stride_pad = *gen_pad(70);
    c.values = *gen_value_mode();
    c.seed = *gen_seed();
    return c;
  });
}

void logits_property(const testing::Plan& plan) {
  const LogitsCase c = *gen_logits_case();
  std::mt19937_64 rng(c.seed.value);
  const int64_t rows = c.B * c.next_n, H = c.H;
  std::vector<int64_t> keys_of(static_cast<size_t>(c.B));
  int64_t S = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.next_n; ++j) {
      keys_of[size_t(b)] = std::max(keys_of[size_t(b)], c.row_length(b, j));
      S = std::max(S, c.row_length(b, j));
    }
  S += c.S_pad;
  const testing::KCache kv = make_cache(rng, c.table, keys_of, c.stride_pad, c.values);
  std::vector<uint8_t> q(static_cast<size_t>(std::max<int64_t>(rows * H * 128, 1)));
  std::vector<float> w(static_cast<size_t>(std::max<int64_t>(rows * H, 1)));
  fill_queries(rng, c.values, q, w);
  const IndexArray lens(c.seq_lens, c.lens_dtype, c.B, c.lens_2d ? c.next_n : kVector, 0, rng());
  std::vector<testing::ExactLogits> exact;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.next_n; ++j) {
      const int64_t r = b * c.next_n + j;
      exact.push_back(testing::exact_logits(&q[static_cast<size_t>(r * H * 128)],
                                            &w[static_cast<size_t>(r * H)], H, kv.view(), c.P,
                                            c.table.row(b), c.row_length(b, j)));
    }
  const TensorView qv = c.next_n > 1 && c.B > 0 && rng() % 2
                            ? TensorView(q.data(), DType::F8_E4M3, {c.B, c.next_n, H, 128})
                            : TensorView(q.data(), DType::F8_E4M3, {rows, H, 128});
  std::vector<float> first;
  testing::for_each(testing::runs("fp8_paged_mqa_logits", plan), [&](const testing::Run& run) {
    const std::string label = run.label();
    std::vector<float> out(static_cast<size_t>(std::max<int64_t>(rows * S, 1)), 12345.0f);
    fp8_paged_mqa_logits(qv, kv.view(), TensorView(w.data(), DType::F32, {rows, H}), lens.view(),
                         c.table.array.view(), c.P, S,
                         MutableTensorView(out.data(), DType::F32, {rows, S}), c.next_n,
                         run.options());
    for (int64_t r = 0; r < rows; ++r) {
      const std::string v = testing::logits_violation(&out[static_cast<size_t>(r * S)], S,
                                                      exact[static_cast<size_t>(r)]);
      if (!v.empty()) RC_FAIL(label + ", row " + std::to_string(r) + ": " + v);
    }
    if (run.threads == 1)
      first = out;
    else
      assert_same_bytes(out, first, label + " vs 1 thread");
  });
}

const bool kLogits = register_property("Fp8PagedMqaLogits", "WithinBoundOfExact",
                                       "fp8_paged_mqa_logits", kEveryVariant, logits_property);

// ---- indexer_topk ----

struct StepCase {
  int64_t H = 4, P = 64;
  TopkMode mode = TopkMode::canonical;
  std::vector<int64_t> query_lens, seq_lens;
  DType dtype = DType::I32;
  BlockTable table;  // over compressed lengths seq_len / 4
  int64_t stride_pad = 0;
  ValueMode values;
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const StepCase& c) {
  os << "StepCase{H=" << c.H << ", P=" << c.P
     << ", mode=" << (c.mode == TopkMode::canonical ? "canonical" : "vllm") << ", query_lens=";
  print_list(os, c.query_lens) << ", seq_lens=";
  return print_list(os, c.seq_lens)
         << ", " << dtype_name(c.dtype) << ", " << c.table << ", stride_pad=" << c.stride_pad
         << ", " << c.values << ", " << c.seed << "}";
}

rc::Gen<StepCase> gen_step_case() {
  return rc::gen::exec([] {
    StepCase c;
    // Few heads: the pipeline (rows, lengths, selection) is the subject here; the logits kernels
    // at H = 64 are covered by the fp8_paged_mqa_logits property.
    c.H = *rc::gen::weightedElement<int64_t>({{4, 4}, {2, 1}, {2, 2}, {1, 16}});
    c.P = *rc::gen::element<int64_t>(16, 64, 256);
    c.mode = *rc::gen::element(TopkMode::canonical, TopkMode::vllm);
    const int R = *rc::gen::inRange(0, 4);
    const int decodes = *rc::gen::inRange(0, R + 1);
    std::vector<int64_t> entries;
    for (int r = 0; r < R; ++r) {
      const int64_t q = r < decodes ? 1 : *rc::gen::inRange<int64_t>(2, 4);
      // 2044 .. 2055: the last tokens of a request see 511, 512 (= K, an identity row) or 513
      // compressed entries.
      const int64_t len =
          *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::inRange<int64_t>(q, 2060)},
                                            {1, rc::gen::inRange<int64_t>(2044, 2056)},
                                            {3, rc::gen::inRange<int64_t>(2040, 2800)},
                                            {1, rc::gen::inRange<int64_t>(2800, 4200)}});
      c.query_lens.push_back(q);
      c.seq_lens.push_back(std::max(len, q));
      entries.push_back(c.seq_lens.back() / 4);
    }
    c.dtype = *gen_index_dtype();
    c.table = *gen_block_table(entries, c.P);
    c.stride_pad = *gen_pad(40);
    c.values = *gen_value_mode();
    // The band rule counts NaN as −inf, but the vllm heap never evicts a NaN among the first 512
    // entries (indexer.md §5.4), so the rule cannot hold there: vllm steps get no NaN keys.
    if (c.mode == TopkMode::vllm) {
      c.values.nan_one_in = 0;
      c.values.edge_nans = false;
    }
    c.seed = *gen_seed();
    return c;
  });
}

void indexer_topk_property(const testing::Plan& plan) {
  const StepCase c = *gen_step_case();
  std::mt19937_64 rng(c.seed.value);
  const auto R = static_cast<int64_t>(c.seq_lens.size());
  std::vector<int64_t> entries, qsl{0};
  for (int64_t r = 0; r < R; ++r) {
    entries.push_back(c.seq_lens[size_t(r)] / 4);
    qsl.push_back(qsl.back() + c.query_lens[size_t(r)]);
  }
  const int64_t T = qsl.back(), H = c.H;
  const testing::KCache kv = make_cache(rng, c.table, entries, c.stride_pad, c.values);
  std::vector<uint8_t> q(static_cast<size_t>(std::max<int64_t>(T * H * 128, 1)));
  std::vector<float> w(static_cast<size_t>(std::max<int64_t>(T * H, 1)));
  fill_queries(rng, c.values, q, w);
  const IndexArray qsl_a(qsl, c.dtype, R + 1, kVector, 0, rng());
  const IndexArray lens(c.seq_lens, c.dtype, R, kVector, 0, rng());
  const bool short_step =
      std::all_of(entries.begin(), entries.end(), [](int64_t e) { return e <= 512; });
  // Per token: its length L_t and, for long rows of a long step, the exact logits.
  std::vector<int64_t> L(static_cast<size_t>(T));
  std::vector<testing::ExactLogits> exact(static_cast<size_t>(T));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t t = qsl[size_t(r)]; t < qsl[size_t(r + 1)]; ++t) {
      const int64_t pos = c.seq_lens[size_t(r)] - c.query_lens[size_t(r)] + (t - qsl[size_t(r)]);
      L[size_t(t)] = (pos + 1) / 4;
      if (short_step || L[size_t(t)] <= 512) continue;
      exact[size_t(t)] = testing::exact_logits(&q[size_t(t * H * 128)], &w[size_t(t * H)], H,
                                               kv.view(), c.P, c.table.row(r), L[size_t(t)]);
    }
  RC_TAG(short_step ? "short step" : "long step");
  const int64_t width = 512 + static_cast<int64_t>(rng() % 3);
  std::vector<int32_t> first;
  testing::for_each(testing::runs("indexer_topk", plan), [&](const testing::Run& run) {
    const std::string label = run.label();
    std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(T * width, 1)), -9);
    indexer_topk(TensorView(q.data(), DType::F8_E4M3, {T, H, 128}),
                 TensorView(w.data(), DType::F32, {T, H}), qsl_a.view(), lens.view(),
                 c.table.array.view(), kv.view(), c.P, c.mode,
                 MutableTensorView(out.data(), DType::I32, {T, width}), run.options());
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* row = &out[size_t(t * width)];
      if (short_step || L[size_t(t)] <= 512) {
        for (int64_t i = 0; i < 512; ++i)
          if (row[i] != (i < L[size_t(t)] ? i : -1))
            RC_FAIL(label + ": identity row " + std::to_string(t) + " differs at " +
                    std::to_string(i));
      } else {
        const std::string v = testing::band_rule_violation(row, 512, exact[size_t(t)], 1,
                                                           c.mode == TopkMode::canonical);
        if (!v.empty()) RC_FAIL(label + ": row " + std::to_string(t) + ": " + v);
      }
      for (int64_t i = 512; i < width; ++i)
        if (row[i] != -9) RC_FAIL(label + ": column " + std::to_string(i) + " written");
    }
    if (run.threads == 1)
      first = out;
    else
      assert_same_bytes(out, first, label + " vs 1 thread");
  });
}

const bool kIndexerTopk = register_property("IndexerTopk", "WithinBandRule", "indexer_topk",
                                            kEveryVariant, indexer_topk_property);
// Every long row's selection sampled (4 runs), candidate buffers of 8 K that fill.
const bool kIndexerTopkGated = register_gated_property(
    "IndexerTopk", "WithinBandRule", "indexer_topk", kEveryVariant, indexer_topk_property);

}  // namespace
}  // namespace dsv4cpu::prop
