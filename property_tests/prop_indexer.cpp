// Properties of the indexer ops (indexer.md §2, §4, §5, §7, §8) for every registered variant, on
// every compiled Highway target ("hwy") and with 1 and 2 threads (which must give identical bytes):
//   fused_indexer_q_rope_quant  bit-exact with the reference (the same error when weights_out
//                               overflows);
//   fp8_paged_mqa_logits        every value within the bound B of the exact binary64 logits
//                               (numerics.md §11.6), −inf past each row, NaN exactly at NaN keys;
//   topk_transform_512 / 1024   exactly the reference's indices (both modes, page transform);
//   indexer_topk                the band rule of numerics.md §11.7 against the exact logits, and
//                               identity rows exact.
// The AMX variant runs in its own tests, skipped where the CPU or OS has no AMX.
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
#include "tests/test_indexer_oracle.hpp"

namespace dsv4cpu::prop {
namespace {

constexpr int kThreadCounts[] = {1, 2};
constexpr float kInf = std::numeric_limits<float>::infinity();

bool is_available(const std::string& op, const std::string& name) {
  for (const OpInfo& info : registered_ops())
    if (info.name == op)
      for (const VariantInfo& v : info.variants)
        if (v.name == name) return v.available;
  return false;
}

// The available variants of `op`, without "amx" (tested separately) unless `amx_only`.
std::vector<std::string> variants_to_test(const std::string& op, bool amx_only) {
  std::vector<std::string> out;
  for (const OpInfo& info : registered_ops())
    if (info.name == op)
      for (const VariantInfo& v : info.variants)
        if (v.available && (v.name == "amx") == amx_only) out.push_back(v.name);
  return out;
}

// Calls body(variant, threads, label) for each variant with 1 and then 2 threads; "hwy" runs on
// every Highway target, with 2 threads on the first (the best; the threading is the same driver
// code for every target).
template <class Body>
void for_each_run(const std::string& op, const std::vector<std::string>& variants,
                  const Body& body) {
  for (const std::string& v : variants) {
    auto threads_loop = [&](const std::string& label, bool both) {
      for (int threads : kThreadCounts)
        if (threads == 1 || both) body(v, threads, label + " " + std::to_string(threads) + "t");
    };
    if (v == "hwy") {
      bool first = true;
      for_each_target(op, [&](const std::string& target) {
        threads_loop(v + "/" + target, first);
        first = false;
      });
    } else {
      threads_loop(v, true);
    }
  }
}

// ---- shared data ----

// A random finite fp8 code: all codes, or only E = 0 (±m·2⁻⁹, subnormal and zero) when tiny.
uint8_t draw_code(std::mt19937_64& rng, bool tiny) {
  const uint8_t c = test::random_code(rng);
  return tiny ? static_cast<uint8_t>(c & 0x87) : c;
}

// How a row's values are drawn.
struct ValueMode {
  bool tiny_codes = false;  // fp8 subnormal codes only
  int weight_exp = 0;       // head weights ~ N(0, 1)·2^weight_exp (down to the subnormal range)
  int nan_one_in = 0;       // keys with a NaN code: about one in nan_one_in (0: none)
};
std::ostream& operator<<(std::ostream& os, const ValueMode& m) {
  return os << "ValueMode{tiny=" << m.tiny_codes << ", weight_exp=" << m.weight_exp
            << ", nan_one_in=" << m.nan_one_in << "}";
}
rc::Gen<ValueMode> gen_value_mode() {
  return rc::gen::exec([] {
    ValueMode m;
    m.tiny_codes = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    m.weight_exp = *rc::gen::weightedElement<int>({{4, 0}, {1, -20}, {1, -130}, {1, 6}});
    m.nan_one_in = *rc::gen::weightedElement<int>({{3, 0}, {2, 7}, {1, 2}});
    return m;
  });
}

// A paged indexer K cache with garbage everywhere, then a key at every visible position of
// every request of `table` (request r reads pages table.entries[r][c] for c < ceil(len_r / P)).
test::KCache make_cache(std::mt19937_64& rng, const BlockTable& table,
                        const std::vector<int64_t>& lens, int64_t stride_pad,
                        const ValueMode& m) {
  const int64_t P = table.block_size;
  test::KCache kv(P, std::max<int64_t>(table.num_pages, 1), P * 132 + stride_pad);
  fill_garbage(rng, kv.bytes.data(), kv.bytes.size());
  std::vector<uint8_t> key(128);
  for (size_t r = 0; r < lens.size(); ++r)
    for (int64_t j = 0; j < lens[r]; ++j) {
      for (auto& c : key) c = draw_code(rng, m.tiny_codes);
      if (m.nan_one_in > 0 && rng() % static_cast<uint64_t>(m.nan_one_in) == 0)
        key[rng() % 128] = (rng() & 1) ? 0x7F : 0xFF;
      const int e = static_cast<int>(rng() % 51) - 40;  // key scales 2^-40 .. 2^10
      kv.set(table.entries[r * table.cols + j / P], j % P, key.data(), std::ldexp(1.0f, e));
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
    c.H = *rc::gen::weightedElement<int64_t>({{6, 64}, {1, 1}, {1, 8}, {1, 16}, {1, 24}, {1, 72}});
    c.P = *rc::gen::weightedElement<int64_t>({{3, 16}, {3, 64}, {2, 256}, {1, 1}, {1, 5}, {1, 48}});
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

void logits_property(const LogitsCase& c, const std::vector<std::string>& variants) {
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
  const test::KCache kv = make_cache(rng, c.table, keys_of, c.stride_pad, c.values);
  std::vector<uint8_t> q(static_cast<size_t>(std::max<int64_t>(rows * H * 128, 1)));
  std::vector<float> w(static_cast<size_t>(std::max<int64_t>(rows * H, 1)));
  fill_queries(rng, c.values, q, w);
  const IndexArray lens(c.seq_lens, c.lens_dtype, c.B, c.lens_2d ? c.next_n : kVector, 0, rng());
  std::vector<test::ExactRow> exact;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.next_n; ++j) {
      const int64_t r = b * c.next_n + j;
      exact.push_back(test::exact_row_from_cache(
          &q[static_cast<size_t>(r * H * 128)], &w[static_cast<size_t>(r * H)], H, kv,
          [&](int64_t col) { return c.table.entries[static_cast<size_t>(b * c.table.cols + col)]; },
          c.row_length(b, j)));
    }
  const TensorView qv = c.next_n > 1 && c.B > 0 && rng() % 2
                            ? TensorView(q.data(), DType::F8_E4M3, {c.B, c.next_n, H, 128})
                            : TensorView(q.data(), DType::F8_E4M3, {rows, H, 128});
  std::vector<float> first;
  for_each_run("fp8_paged_mqa_logits", variants,
               [&](const std::string& v, int threads, const std::string& label) {
    std::vector<float> out(static_cast<size_t>(std::max<int64_t>(rows * S, 1)), 12345.0f);
    fp8_paged_mqa_logits(qv, kv.view(), TensorView(w.data(), DType::F32, {rows, H}), lens.view(),
                         c.table.array.view(), c.P, S,
                         TensorView(out.data(), DType::F32, {rows, S}), c.next_n,
                         variant(v.c_str(), threads));
    for (int64_t r = 0; r < rows; ++r) {
      const auto ok = test::logits_within_bound(&out[static_cast<size_t>(r * S)], S,
                                                exact[static_cast<size_t>(r)]);
      if (!ok) RC_FAIL(label + ", row " + std::to_string(r) + ": " + ok.message());
    }
    if (threads == 1) first = out;
    else assert_same_bytes(out, first, label + " vs 1 thread");
  });
}

RC_GTEST_PROP(Fp8PagedMqaLogits, EveryVariantWithinBoundOfExact, ()) {
  logits_property(*gen_logits_case(), variants_to_test("fp8_paged_mqa_logits", false));
}

TEST(Fp8PagedMqaLogits, AmxWithinBoundOfExact) {
  if (!is_available("fp8_paged_mqa_logits", "amx")) GTEST_SKIP() << "no AMX on this CPU/OS";
  EXPECT_TRUE(rc::check("amx logits", [] {
    logits_property(*gen_logits_case(), variants_to_test("fp8_paged_mqa_logits", true));
  }));
}

// ---- topk_transform_512 / topk_transform_1024 ----

// Row contents. The sawtooth rows repeat every `period` elements; with period = L / 256 they
// defeat a sample taken at evenly spaced places (rising teeth: the sample sees only low values,
// falling teeth: only high ones), the canonical selection's worst case.
enum class RowPattern {
  random, ties, constant, ascending, descending, inf_nan, mostly_nan, signed_zero_tiny,
  rising_teeth, falling_teeth
};
const char* name(RowPattern p) {
  static const char* names[] = {"random",     "ties",     "constant",         "ascending",
                                "descending", "inf_nan",  "mostly_nan",       "signed_zero_tiny",
                                "rising_teeth", "falling_teeth"};
  return names[static_cast<int>(p)];
}

void fill_row(std::mt19937_64& rng, RowPattern p, float* s, int64_t L, int64_t period) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int distinct = 1 + static_cast<int>(rng() % 6);
  const float c = normal(rng);
  for (int64_t i = 0; i < L; ++i) {
    float x = normal(rng);
    switch (p) {
      case RowPattern::random: break;
      case RowPattern::ties: x = static_cast<float>(rng() % static_cast<uint64_t>(distinct)); break;
      case RowPattern::constant: x = c; break;
      case RowPattern::ascending: x = static_cast<float>(i / (1 + distinct % 3)); break;
      case RowPattern::descending: x = -static_cast<float>(i / (1 + distinct % 3)); break;
      case RowPattern::inf_nan: {
        const uint64_t r = rng() % 10;
        x = r == 0 ? nan : r == 1 ? -kInf : r == 2 ? kInf : static_cast<float>(rng() % 3);
        break;
      }
      case RowPattern::mostly_nan: x = rng() % 8 ? nan : (rng() % 2 ? -kInf : x); break;
      case RowPattern::signed_zero_tiny: {
        const uint64_t r = rng() % 4;
        x = r == 0 ? 0.0f : r == 1 ? -0.0f : std::ldexp(x, -140);  // subnormals
        break;
      }
      case RowPattern::rising_teeth: x = static_cast<float>(i % period) + 0.25f * x; break;
      case RowPattern::falling_teeth: x = -static_cast<float>(i % period) + 0.25f * x; break;
    }
    s[i] = x;
  }
}

struct TopkCase {
  int64_t K = 512;
  TopkMode mode = TopkMode::canonical;
  std::vector<int64_t> lens;
  std::vector<RowPattern> patterns;
  std::vector<int64_t> periods;
  int64_t S_pad = 0;
  DType lens_dtype = DType::I32;
  bool paged = false;
  BlockTable table;
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const TopkCase& c) {
  os << "TopkCase{K=" << c.K << ", mode=" << (c.mode == TopkMode::canonical ? "canonical" : "vllm")
     << ", lens=";
  print_list(os, c.lens) << ", patterns=[";
  for (size_t i = 0; i < c.patterns.size(); ++i)
    os << (i ? ", " : "") << name(c.patterns[i]) << "/" << c.periods[i];
  os << "], S_pad=" << c.S_pad << ", " << dtype_name(c.lens_dtype) << ", paged=" << c.paged;
  if (c.paged) os << ", " << c.table;
  return os << ", " << c.seed << "}";
}

rc::Gen<TopkCase> gen_topk_case() {
  return rc::gen::exec([] {
    TopkCase c;
    c.K = *rc::gen::weightedElement<int64_t>({{3, 512}, {1, 1024}});
    c.mode = c.K == 512 ? *rc::gen::element(TopkMode::canonical, TopkMode::vllm)
                        : TopkMode::canonical;
    const int64_t B = *rc::gen::inRange<int64_t>(0, 4);
    for (int64_t b = 0; b < B; ++b) {
      const auto p = static_cast<RowPattern>(*rc::gen::weightedElement<int>(
          {{2, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}, {2, 8}, {2, 9}}));
      const bool teeth = p == RowPattern::rising_teeth || p == RowPattern::falling_teeth;
      int64_t L = *rc::gen::weightedOneOf<int64_t>(
          {{1, rc::gen::inRange<int64_t>(0, c.K + 1)},
           {6, rc::gen::inRange<int64_t>(c.K + 1, c.K + 3000)},
           {2, rc::gen::inRange<int64_t>(4096, 30000)}});
      if (teeth) L = *rc::gen::inRange<int64_t>(c.K + 1, 40000);
      const int64_t period = teeth && *rc::gen::arbitrary<bool>()
                                 ? std::max<int64_t>(2, L / 256)
                                 : *rc::gen::inRange<int64_t>(2, 300);
      c.lens.push_back(L);
      c.patterns.push_back(p);
      c.periods.push_back(period);
    }
    c.S_pad = *gen_pad(20);
    c.lens_dtype = *gen_index_dtype();
    c.paged = *rc::gen::arbitrary<bool>();
    if (c.paged) c.table = *gen_block_table(c.lens, *rc::gen::element<int64_t>(1, 16, 64));
    c.seed = *gen_seed();
    return c;
  });
}

RC_GTEST_PROP(TopkTransform, EveryVariantEqualsReference, ()) {
  const TopkCase c = *gen_topk_case();
  std::mt19937_64 rng(c.seed.value);
  const auto B = static_cast<int64_t>(c.lens.size());
  const int64_t S = (B ? *std::max_element(c.lens.begin(), c.lens.end()) : 0) + c.S_pad;
  std::vector<float> scores(static_cast<size_t>(std::max<int64_t>(B * S, 1)));
  fill_garbage(rng, scores.data(), scores.size() * 4);
  for (int64_t b = 0; b < B; ++b)
    fill_row(rng, c.patterns[size_t(b)], &scores[size_t(b * S)], c.lens[size_t(b)],
             c.periods[size_t(b)]);
  const IndexArray lens(c.lens, c.lens_dtype, B, kVector, 0, rng());
  const int64_t width = c.K + static_cast<int64_t>(rng() % 3);
  const char* op = c.K == 512 ? "topk_transform_512" : "topk_transform_1024";
  auto run = [&](const std::string& v, int threads, std::vector<int32_t>& raw,
                 std::vector<int32_t>& pages) {
    raw.assign(static_cast<size_t>(std::max<int64_t>(B * width, 1)), -7);
    pages = raw;
    const TensorView scores_v(scores.data(), DType::F32, {B, S});
    const TensorView raw_v(raw.data(), DType::I32, {B, width});
    const TensorView pages_v =
        c.paged ? TensorView(pages.data(), DType::I32, {B, width}) : TensorView();
    const TensorView table_v = c.paged ? c.table.array.view() : TensorView();
    const int64_t ps = c.paged ? c.table.block_size : 1;
    if (c.K == 512)
      topk_transform_512(scores_v, lens.view(), table_v, ps, c.mode, raw_v, pages_v,
                         variant(v.c_str(), threads));
    else
      topk_transform_1024(scores_v, lens.view(), table_v, ps, raw_v, pages_v,
                          variant(v.c_str(), threads));
  };
  std::vector<int32_t> want_raw, want_pages;
  run("ref", 1, want_raw, want_pages);
  for_each_run(op, variants_to_test(op, false),
               [&](const std::string& v, int threads, const std::string& label) {
    std::vector<int32_t> raw, pages;
    run(v, threads, raw, pages);
    assert_same_bytes(raw, want_raw, label + " raw_indices");
    assert_same_bytes(pages, want_pages, label + " page_indices");
  });
}

// ---- fused_indexer_q_rope_quant ----

struct QuantCase {
  int64_t T = 1, H = 64, R = 8;
  std::vector<int64_t> positions;
  DType pos_dtype = DType::I64;
  bool default_scales = true;
  int magnitude = 0;  // q ~ N(0, 1)·2^magnitude per head, plus a few extreme heads
  bool overflow = false;  // a huge weight: weights_out overflows (NonFiniteError)
  Seed seed;
};
std::ostream& operator<<(std::ostream& os, const QuantCase& c) {
  os << "QuantCase{T=" << c.T << ", H=" << c.H << ", R=" << c.R << ", positions=";
  return print_list(os, c.positions) << " " << dtype_name(c.pos_dtype)
                                     << ", default_scales=" << c.default_scales
                                     << ", magnitude=" << c.magnitude
                                     << ", overflow=" << c.overflow << ", " << c.seed << "}";
}

rc::Gen<QuantCase> gen_quant_case() {
  return rc::gen::exec([] {
    QuantCase c;
    c.T = *rc::gen::inRange<int64_t>(0, 7);
    c.H = *rc::gen::weightedElement<int64_t>({{3, 64}, {1, 1}, {1, 3}, {1, 16}});
    c.R = *rc::gen::inRange<int64_t>(1, 40);
    for (int64_t t = 0; t < c.T; ++t) c.positions.push_back(*rc::gen::inRange<int64_t>(0, c.R));
    c.pos_dtype = *gen_index_dtype();
    c.default_scales = *rc::gen::arbitrary<bool>();
    c.magnitude = *rc::gen::weightedElement<int>({{4, 0}, {1, -30}, {1, -140}, {1, 20}});
    c.overflow = *rc::gen::weightedElement<bool>({{8, false}, {1, true}});
    c.seed = *gen_seed();
    return c;
  });
}

RC_GTEST_PROP(FusedIndexerQRopeQuant, EveryVariantBitExact, ()) {
  const QuantCase c = *gen_quant_case();
  std::mt19937_64 rng(c.seed.value);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t heads = c.T * c.H;
  std::vector<float> q(static_cast<size_t>(std::max<int64_t>(heads * 128, 1)));
  std::vector<float> w(static_cast<size_t>(std::max<int64_t>(heads, 1)));
  // With `overflow`, one head gets a large amax (scale 2^e > 1) and a huge weight.
  const int64_t huge = c.overflow && heads > 0 ? static_cast<int64_t>(rng() % heads) : -1;
  for (int64_t th = 0; th < heads; ++th) {
    const int e = th == huge           ? 30
                  : rng() % 8 == 0 ? static_cast<int>(rng() % 200) - 120
                                   : c.magnitude;
    for (int d = 0; d < 128; ++d) {
      // Some values on bf16 and fp8 rounding ties, the rest random.
      const float x = rng() % 5 == 0 ? std::ldexp(1.0f + static_cast<float>(rng() % 64) / 128.0f,
                                                  static_cast<int>(rng() % 20) - 10)
                                     : normal(rng);
      q[static_cast<size_t>(th * 128 + d)] = std::ldexp(x, e);
    }
    // Weights from huge to subnormal products: w·2^e·softmax_scale·head_scale rounds in order.
    w[static_cast<size_t>(th)] =
        th == huge ? 3e38f : std::ldexp(normal(rng), rng() % 4 == 0 ? -100 - int(rng() % 40) : 0);
  }
  std::vector<float> table(static_cast<size_t>(c.R * 64));
  for (int64_t r = 0; r < c.R; ++r)
    for (int i = 0; i < 32; ++i) {
      const double angle = static_cast<double>(r) * std::pow(10000.0, -i / 32.0);
      table[static_cast<size_t>(r * 64 + i)] = static_cast<float>(std::cos(angle));
      table[static_cast<size_t>(r * 64 + 32 + i)] = static_cast<float>(std::sin(angle));
    }
  const IndexArray pos(c.positions, c.pos_dtype, c.T, kVector, 0, rng());
  const float softmax_scale = c.default_scales ? kIndexerSoftmaxScale : 0.37f;
  const float head_scale = c.default_scales ? kIndexerHeadScale : 1.5f;
  auto run = [&](const std::string& v, int threads, std::vector<uint8_t>& codes,
                 std::vector<float>& w_out) {
    codes.assign(static_cast<size_t>(std::max<int64_t>(heads * 128, 1)), 0xA5);
    w_out.assign(static_cast<size_t>(std::max<int64_t>(heads, 1)), -3.0f);
    return capture([&] {
      fused_indexer_q_rope_quant(TensorView(q.data(), DType::F32, {c.T, c.H, 128}),
                                 TensorView(w.data(), DType::F32, {c.T, c.H}), pos.view(),
                                 TensorView(table.data(), DType::F32, {c.R, 64}), softmax_scale,
                                 head_scale,
                                 TensorView(codes.data(), DType::F8_E4M3, {c.T, c.H, 128}),
                                 TensorView(w_out.data(), DType::F32, {c.T, c.H}),
                                 variant(v.c_str(), threads));
    });
  };
  std::vector<uint8_t> want_codes;
  std::vector<float> want_w;
  const Outcome want = run("ref", 1, want_codes, want_w);
  RC_TAG(want.kind.empty() ? "computed" : "error");
  for_each_run("fused_indexer_q_rope_quant", variants_to_test("fused_indexer_q_rope_quant", false),
               [&](const std::string& v, int threads, const std::string& label) {
    std::vector<uint8_t> codes;
    std::vector<float> w_out;
    const Outcome got = run(v, threads, codes, w_out);
    if (!(got == want)) RC_FAIL(label + ": outcome '" + got.message + "', reference '" +
                                want.message + "'");
    assert_same_bytes(codes, want_codes, label + " q_fp8");
    assert_same_bytes(w_out, want_w, label + " weights_out");
  });
}

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
  return print_list(os, c.seq_lens) << ", " << dtype_name(c.dtype) << ", " << c.table
                                    << ", stride_pad=" << c.stride_pad << ", " << c.values
                                    << ", " << c.seed << "}";
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
      const int64_t len = *rc::gen::weightedOneOf<int64_t>(
          {{2, rc::gen::inRange<int64_t>(q, 2060)},
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
    if (c.mode == TopkMode::vllm) c.values.nan_one_in = 0;
    c.seed = *gen_seed();
    return c;
  });
}

void indexer_topk_property(const StepCase& c, const std::vector<std::string>& variants) {
  std::mt19937_64 rng(c.seed.value);
  const auto R = static_cast<int64_t>(c.seq_lens.size());
  std::vector<int64_t> entries, qsl{0};
  for (int64_t r = 0; r < R; ++r) {
    entries.push_back(c.seq_lens[size_t(r)] / 4);
    qsl.push_back(qsl.back() + c.query_lens[size_t(r)]);
  }
  const int64_t T = qsl.back(), H = c.H;
  const test::KCache kv = make_cache(rng, c.table, entries, c.stride_pad, c.values);
  std::vector<uint8_t> q(static_cast<size_t>(std::max<int64_t>(T * H * 128, 1)));
  std::vector<float> w(static_cast<size_t>(std::max<int64_t>(T * H, 1)));
  fill_queries(rng, c.values, q, w);
  const IndexArray qsl_a(qsl, c.dtype, R + 1, kVector, 0, rng());
  const IndexArray lens(c.seq_lens, c.dtype, R, kVector, 0, rng());
  const bool short_step =
      std::all_of(entries.begin(), entries.end(), [](int64_t e) { return e <= 512; });
  // Per token: its length L_t and, for long rows of a long step, the exact logits.
  std::vector<int64_t> L(static_cast<size_t>(T));
  std::vector<test::ExactRow> exact(static_cast<size_t>(T));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t t = qsl[size_t(r)]; t < qsl[size_t(r + 1)]; ++t) {
      const int64_t pos = c.seq_lens[size_t(r)] - c.query_lens[size_t(r)] + (t - qsl[size_t(r)]);
      L[size_t(t)] = (pos + 1) / 4;
      if (short_step || L[size_t(t)] <= 512) continue;
      exact[size_t(t)] = test::exact_row_from_cache(
          &q[size_t(t * H * 128)], &w[size_t(t * H)], H, kv,
          [&](int64_t col) { return c.table.entries[size_t(r * c.table.cols + col)]; },
          L[size_t(t)]);
    }
  RC_TAG(short_step ? "short step" : "long step");
  const int64_t width = 512 + static_cast<int64_t>(rng() % 3);
  std::vector<int32_t> first;
  for_each_run("indexer_topk", variants,
               [&](const std::string& v, int threads, const std::string& label) {
    std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(T * width, 1)), -9);
    indexer_topk(TensorView(q.data(), DType::F8_E4M3, {T, H, 128}),
                 TensorView(w.data(), DType::F32, {T, H}), qsl_a.view(), lens.view(),
                 c.table.array.view(), kv.view(), c.P, c.mode,
                 TensorView(out.data(), DType::I32, {T, width}), variant(v.c_str(), threads));
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* row = &out[size_t(t * width)];
      if (short_step || L[size_t(t)] <= 512) {
        for (int64_t i = 0; i < 512; ++i)
          if (row[i] != (i < L[size_t(t)] ? i : -1))
            RC_FAIL(label + ": identity row " + std::to_string(t) + " differs at " +
                    std::to_string(i));
      } else {
        const auto ok = test::band_rule(row, 512, exact[size_t(t)], c.mode == TopkMode::canonical);
        if (!ok) RC_FAIL(label + ": row " + std::to_string(t) + ": " + ok.message());
      }
      for (int64_t i = 512; i < width; ++i)
        if (row[i] != -9) RC_FAIL(label + ": column " + std::to_string(i) + " written");
    }
    if (threads == 1) first = out;
    else assert_same_bytes(out, first, label + " vs 1 thread");
  });
}

RC_GTEST_PROP(IndexerTopk, EveryVariantWithinBandRule, ()) {
  indexer_topk_property(*gen_step_case(), variants_to_test("indexer_topk", false));
}

TEST(IndexerTopk, AmxWithinBandRule) {
  if (!is_available("indexer_topk", "amx")) GTEST_SKIP() << "no AMX on this CPU/OS";
  EXPECT_TRUE(rc::check("amx indexer_topk", [] {
    indexer_topk_property(*gen_step_case(), variants_to_test("indexer_topk", true));
  }));
}

}  // namespace
}  // namespace dsv4cpu::prop
