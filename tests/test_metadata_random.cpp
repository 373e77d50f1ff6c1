// Every metadata builder against a brute-force oracle written here, per request and per token,
// over random decode + prefill batches (I32 and I64 index inputs, padded outputs, block-table
// entries no formula reads set to -99), for every variant with 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "dsv4cpu/metadata.hpp"
#include "test_metadata_util.hpp"

namespace dsv4cpu {
namespace {

using namespace test;  // Idx, vec, table, out_view, V64, V32, kThreads, expect_error

constexpr int64_t kUnread = -99;

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(gen); }
  DType index_dtype() { return chance(0.5) ? DType::I32 : DType::I64; }
  Idx vec(const V64& v) { return test::vec(v, index_dtype()); }
};

// A step: decodes (q <= tau, possibly empty) first, then prefills.
struct Batch {
  int64_t R = 0, T = 0, tau = 1;
  V64 qsl, seq, positions, token_to_req;
};

Batch random_batch(Rng& rng, int64_t max_requests, int64_t max_q, int64_t max_context) {
  Batch b;
  b.tau = rng.uniform(1, 3);
  b.R = rng.uniform(0, max_requests);
  const int64_t decodes = rng.uniform(0, b.R);
  b.qsl = {0};
  for (int64_t r = 0; r < b.R; ++r) {
    const int64_t q = r < decodes ? rng.uniform(0, b.tau) : rng.uniform(1, max_q);
    const int64_t context = rng.chance(0.2) ? rng.uniform(0, 5) : rng.uniform(0, max_context);
    b.seq.push_back(q + context);
    b.qsl.push_back(b.qsl.back() + q);
  }
  b.T = b.qsl.back();
  for (int64_t r = 0; r < b.R; ++r)  // oracle of §2, per request
    for (int64_t i = 0; i < b.qsl[r + 1] - b.qsl[r]; ++i) {
      b.positions.push_back(b.seq[r] - (b.qsl[r + 1] - b.qsl[r]) + i);
      b.token_to_req.push_back(r);
    }
  return b;
}

// A block table whose row r holds random pages for its first `used[r]` columns, -99 after.
struct Table {
  V64 values;
  int64_t MB = 0;
  int64_t at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * MB + c)]; }
};
Table random_table(Rng& rng, const V64& used) {
  Table t;
  t.MB = used.empty() ? 1 : std::max<int64_t>(1, *std::max_element(used.begin(), used.end()));
  t.MB += rng.uniform(0, 2);
  for (size_t r = 0; r < used.size(); ++r)
    for (int64_t c = 0; c < t.MB; ++c)
      t.values.push_back(c < used[r] ? rng.uniform(0, 5000) : kUnread);
  return t;
}
Idx table_view(Rng& rng, const Table& t) {
  return Idx(t.values, {static_cast<int64_t>(t.values.size()) / t.MB, t.MB}, rng.index_dtype());
}
// Columns of each request's row that hold locals [0, count_r).
V64 columns_for(const Batch& b, int64_t unit, int64_t P) {
  V64 used;
  for (int64_t r = 0; r < b.R; ++r) used.push_back((b.seq[r] / unit + P - 1) / P);
  return used;
}

int64_t slot_of(const Table& t, int64_t r, int64_t local, int64_t P) {
  return t.at(r, local / P) * P + local % P;
}

constexpr int kBatches = 30;

DSV4CPU_RUN_TEST(MetadataRandom, TokenPositionsAndSplit,
                 {"token_positions", "split_decodes_and_prefills"}, test::kThreads) {
  Rng rng(1);
  for (int it = 0; it < kBatches; ++it) {
    const Batch b = random_batch(rng, 12, 40, 3000);
    const Idx qsl = rng.vec(b.qsl), seq = rng.vec(b.seq);
    V32 req32(b.token_to_req.begin(), b.token_to_req.end());
    // Oracle of §4: the first request with q > tau.
    int64_t f = b.R;
    for (int64_t r = b.R - 1; r >= 0; --r)
      if (b.qsl[r + 1] - b.qsl[r] > b.tau) f = r;
    testing::for_each_run("token_positions", test::kThreads, [&](const testing::Run& run) {
      V64 pos(b.T, 7);
      V32 req(b.T, 7);
      token_positions(qsl, seq, out_view(pos, {b.T}), out_view(req, {b.T}), run.options());
      ASSERT_EQ(pos, b.positions) << run.label() << " batch " << it;
      ASSERT_EQ(req, req32) << run.label() << " batch " << it;
    });
    testing::for_each_run(
        "split_decodes_and_prefills", test::kThreads, [&](const testing::Run& run) {
          const DecodePrefillSplit s = split_decodes_and_prefills(qsl, b.tau, run.options());
          EXPECT_EQ(s.num_decodes, f);
          EXPECT_EQ(s.num_prefills, b.R - f);
          EXPECT_EQ(s.num_decode_tokens, b.qsl[f]);
          EXPECT_EQ(s.num_prefill_tokens, b.T - b.qsl[f]);
        });
  }
}

DSV4CPU_RUN_TEST(MetadataRandom, SlotMapping, "slot_mapping", test::kThreads) {
  Rng rng(2);
  for (int it = 0; it < kBatches; ++it) {
    const Batch b = random_batch(rng, 12, 40, 3000);
    const int64_t P = rng.chance(0.5) ? int64_t{1} << rng.uniform(0, 6) : rng.uniform(1, 70);
    const Table bt = random_table(rng, columns_for(b, 1, P));
    const Idx bt_v = table_view(rng, bt), pos = rng.vec(b.positions), req = rng.vec(b.token_to_req);
    const int64_t padded = b.T + rng.uniform(0, 3);
    V64 expected(padded, -1);
    for (int64_t t = 0; t < b.T; ++t) expected[t] = slot_of(bt, b.token_to_req[t], b.positions[t], P);
    testing::for_each_run("slot_mapping", test::kThreads, [&](const testing::Run& run) {
      V64 out(padded, 7);
      slot_mapping(pos, req, bt_v, P, out_view(out, {padded}), run.options());
      ASSERT_EQ(out, expected) << run.label() << " batch " << it << " P " << P;
    });
  }
}

DSV4CPU_RUN_TEST(MetadataRandom, CompressedSlotMapping, "compressed_slot_mapping", test::kThreads) {
  Rng rng(3);
  for (int it = 0; it < kBatches; ++it) {
    const Batch b = random_batch(rng, 12, 300, 3000);
    const int64_t ratio = rng.chance(0.5) ? 4 : 128;
    const int64_t P = rng.uniform(1, 70);
    const Table bt = random_table(rng, columns_for(b, ratio, P));
    const Idx qsl = rng.vec(b.qsl), seq = rng.vec(b.seq), bt_v = table_view(rng, bt);
    V64 own;
    for (int64_t t = 0; t < b.T; ++t) own.push_back(rng.chance(0.3) ? -1 : rng.uniform(0, 99));
    const bool with_own = rng.chance(0.5);
    const Idx own_v = rng.vec(own);
    const int64_t padded = b.T + rng.uniform(0, 3);
    V64 expected(padded, -1);
    for (int64_t t = 0; t < b.T; ++t) {
      const int64_t p = b.positions[t];
      if ((p + 1) % ratio == 0 && !(with_own && own[t] == -1))
        expected[t] = slot_of(bt, b.token_to_req[t], p / ratio, P);
    }
    testing::for_each_run("compressed_slot_mapping", test::kThreads, [&](const testing::Run& run) {
      V64 out(padded, 7);
      compressed_slot_mapping(qsl, seq, bt_v, ratio, P, with_own ? own_v.view() : TensorView(),
                              out_view(out, {padded}), run.options());
      ASSERT_EQ(out, expected) << run.label() << " batch " << it;
    });
  }
}

DSV4CPU_RUN_TEST(MetadataRandom, SwaWindowIndices, "swa_window_indices", test::kThreads) {
  Rng rng(4);
  for (int it = 0; it < kBatches; ++it) {
    const Batch b = random_batch(rng, 12, 40, 3000);
    const int64_t W = rng.chance(0.5) ? 128 : rng.uniform(1, 130);
    const int64_t P = rng.chance(0.5) ? 64 : rng.uniform(1, 70);
    const Table bt = random_table(rng, columns_for(b, 1, P));
    const Idx bt_v = table_view(rng, bt), pos = rng.vec(b.positions), req = rng.vec(b.token_to_req);
    V64 expected(b.T * W, -1);
    V32 expected_lens(b.T);
    for (int64_t t = 0; t < b.T; ++t) {  // oldest first: positions max(0, p - W + 1) .. p
      const int64_t p = b.positions[t];
      int64_t o = 0;
      for (int64_t q = std::max<int64_t>(0, p - W + 1); q <= p; ++q, ++o)
        expected[t * W + o] = slot_of(bt, b.token_to_req[t], q, P);
      expected_lens[t] = static_cast<int32_t>(o);
    }
    testing::for_each_run("swa_window_indices", test::kThreads, [&](const testing::Run& run) {
      V64 out(b.T * W, 7);
      V32 lens(b.T, 7);
      const bool with_lens = rng.chance(0.7);
      swa_window_indices(pos, req, bt_v, W, P, out_view(out, {b.T, W}),
                         with_lens ? out_view(lens, {b.T}) : MutableTensorView(), run.options());
      ASSERT_EQ(out, expected) << run.label() << " batch " << it;
      if (with_lens) {
        ASSERT_EQ(lens, expected_lens) << run.label();
      }
    });
  }
}

DSV4CPU_RUN_TEST(MetadataRandom, C128aBothForms,
                 {"c128a_topk_indices", "c128a_topk_indices_compact", "c128a_decode_metadata"},
                 test::kThreads) {
  Rng rng(5);
  for (int it = 0; it < kBatches; ++it) {
    Batch b = random_batch(rng, 10, 40, 4000);
    const int64_t P = rng.uniform(1, 3);
    const Table bt = random_table(rng, columns_for(b, 128, P));
    const Idx bt_v = table_view(rng, bt), pos = rng.vec(b.positions), req = rng.vec(b.token_to_req);
    int64_t max_pos = -1;
    for (int64_t p : b.positions) max_pos = std::max(max_pos, p);
    const int64_t mml = max_pos + 1 + rng.uniform(0, 600);
    const int64_t Wc = (mml + 127) / 128;
    V64 n(b.T);
    int64_t longest = 0;
    for (int64_t t = 0; t < b.T; ++t) {
      n[t] = (b.positions[t] + 1) / 128;
      longest = std::max(longest, n[t]);
    }
    ASSERT_EQ(c128a_compact_width(pos), longest);
    auto expected_rows = [&](int64_t W) {
      V64 e(b.T * W, -1);
      for (int64_t t = 0; t < b.T; ++t)
        for (int64_t o = 0; o < n[t]; ++o) e[t * W + o] = slot_of(bt, b.token_to_req[t], o, P);
      return e;
    };
    const V64 full = expected_rows(Wc);
    const int64_t Wcompact = longest + rng.uniform(0, 2);
    const V64 compact = expected_rows(Wcompact);
    testing::for_each_run("c128a_topk_indices", test::kThreads, [&](const testing::Run& run) {
      V64 out(b.T * Wc, 7);
      c128a_topk_indices(pos, req, bt_v, mml, P, out_view(out, {b.T, Wc}), run.options());
      ASSERT_EQ(out, full) << run.label() << " batch " << it;
    });
    testing::for_each_run("c128a_topk_indices_compact", test::kThreads,
                          [&](const testing::Run& run) {
                            V64 out(b.T * Wcompact, 7);
                            c128a_topk_indices_compact(
                                pos, req, bt_v, P, out_view(out, {b.T, Wcompact}), run.options());
                            ASSERT_EQ(out, compact) << run.label() << " batch " << it;
                          });
    // GPU form: decode tokens [0, nd) global rows and lens, prefill local rows.
    const int64_t nd = rng.uniform(0, b.T);
    const int64_t Wmax = (Wc + 127) / 128 * 128;
    const int64_t Wa = rng.chance(0.5) ? Wmax : (longest + 127) / 128 * 128;
    V64 own;
    for (int64_t t = 0; t < b.T; ++t) own.push_back(rng.chance(0.3) ? -1 : rng.uniform(0, 99));
    const bool with_own = rng.chance(0.5);
    const Idx own_v = rng.vec(own);
    const V64 rows = expected_rows(Wa);
    const V64 global(rows.begin(), rows.begin() + nd * Wa);
    V32 lens(nd), local((b.T - nd) * Wa, -1);
    for (int64_t t = 0; t < nd; ++t)
      lens[t] = static_cast<int32_t>(with_own && own[t] < 0 ? 0 : n[t]);
    for (int64_t t = nd; t < b.T; ++t)
      for (int64_t o = 0; o < n[t]; ++o) local[(t - nd) * Wa + o] = static_cast<int32_t>(o);
    testing::for_each_run("c128a_decode_metadata", test::kThreads, [&](const testing::Run& run) {
      V64 g(nd * Wa, 7);
      V32 l(nd, 7), pl((b.T - nd) * Wa, 7);
      c128a_decode_metadata(pos, req, bt_v, mml, P, nd, with_own ? own_v.view() : TensorView(),
                            out_view(g, {nd, Wa}), out_view(l, {nd}), out_view(pl, {b.T - nd, Wa}),
                            run.options());
      ASSERT_EQ(g, global) << run.label() << " batch " << it;
      ASSERT_EQ(l, lens) << run.label();
      ASSERT_EQ(pl, local) << run.label();
    });
  }
}

DSV4CPU_RUN_TEST(MetadataRandom, C4aGlobalTopkIndices, "c4a_global_topk_indices", test::kThreads) {
  Rng rng(6);
  for (int it = 0; it < kBatches; ++it) {
    const Batch b = random_batch(rng, 10, 40, 3000);
    const int64_t K = rng.uniform(1, 24), P = rng.chance(0.5) ? 64 : rng.uniform(1, 70);
    const Table bt = random_table(rng, columns_for(b, 4, P));
    // Valid entries satisfy 0 <= idx < (pos + 1) / 4 (§8), in any order, -1 anywhere.
    V64 topk(b.T * K);
    for (int64_t t = 0; t < b.T; ++t) {
      const int64_t L = (b.positions[t] + 1) / 4;
      for (int64_t k = 0; k < K; ++k)
        topk[t * K + k] = L == 0 || rng.chance(0.3) ? -1 : rng.uniform(0, L - 1);
    }
    V64 own;
    for (int64_t t = 0; t < b.T; ++t) own.push_back(rng.chance(0.3) ? -1 : rng.uniform(0, 99));
    const bool with_own = rng.chance(0.5);
    const Idx topk_v(topk, {b.T, K}, rng.index_dtype()), own_v = rng.vec(own);
    const Idx bt_v = table_view(rng, bt), req = rng.vec(b.token_to_req);
    V64 expected(b.T * K);
    V32 expected_lens(b.T, 0);
    for (int64_t t = 0; t < b.T; ++t) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t l = topk[t * K + k];
        expected[t * K + k] = l < 0 ? -1 : slot_of(bt, b.token_to_req[t], l, P);
        if (l >= 0 && !(with_own && own[t] == -1)) ++expected_lens[t];
      }
    }
    testing::for_each_run("c4a_global_topk_indices", test::kThreads, [&](const testing::Run& run) {
      V64 out(b.T * K, 7);
      V32 lens(b.T, 7);
      c4a_global_topk_indices(topk_v, req, bt_v, P, with_own ? own_v.view() : TensorView(),
                              out_view(out, {b.T, K}), out_view(lens, {b.T}), run.options());
      ASSERT_EQ(out, expected) << run.label() << " batch " << it;
      ASSERT_EQ(lens, expected_lens) << run.label();
    });
  }
}

// Oracle of §9 for one batch, compared field by field with every run.
void check_indexer_metadata(Rng& rng, const Batch& b, int64_t next_n, const std::string& what) {
  const int64_t P = rng.chance(0.5) ? 64 : rng.uniform(1, 70);
  const Table bt = random_table(rng, columns_for(b, 4, P));
  const Idx qsl = rng.vec(b.qsl), seq = rng.vec(b.seq), bt_v = table_view(rng, bt);
  const int64_t padded = b.T + rng.uniform(0, 3);
  V64 slots(padded, -1);
  for (int64_t t = 0; t < b.T; ++t)
    if ((b.positions[t] + 1) % 4 == 0)
      slots[t] = slot_of(bt, b.token_to_req[t], b.positions[t] / 4, P);
  int64_t nd = b.R;  // requests before the first with q > next_n
  for (int64_t r = b.R - 1; r >= 0; --r)
    if (b.qsl[r + 1] - b.qsl[r] > next_n) nd = r;
  V32 csl;
  int64_t max_seq = 0;
  for (int64_t r = 0; r < b.R; ++r) {
    csl.push_back(static_cast<int32_t>(b.seq[r] / 4));
    max_seq = std::max(max_seq, b.seq[r]);
  }
  testing::for_each_run("indexer_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 out(padded, 7);
    const IndexerMetadata m =
        indexer_metadata(qsl, seq, bt_v, P, next_n, out_view(out, {padded}), run.options());
    const std::string at = what + " " + run.label();
    ASSERT_EQ(out, slots) << at;
    EXPECT_EQ(m.max_seq_len, max_seq) << at;
    EXPECT_EQ(m.compressed_seq_lens, csl) << at;
    EXPECT_EQ(m.split.num_decodes, nd) << at;
    EXPECT_EQ(m.split.num_prefills, b.R - nd) << at;
    EXPECT_EQ(m.split.num_decode_tokens, b.qsl[nd]) << at;
    EXPECT_EQ(m.split.num_prefill_tokens, b.T - b.qsl[nd]) << at;
    ASSERT_EQ(m.decode.has_value(), nd > 0) << at;
    if (nd > 0) {
      V32 lens, dsl;
      for (int64_t r = 0; r < nd; ++r) {
        lens.push_back(static_cast<int32_t>(b.qsl[r + 1] - b.qsl[r]));
        for (int64_t j = 0; j < next_n; ++j) {
          const int64_t visible = b.seq[r] - next_n + 1 + j;
          dsl.push_back(static_cast<int32_t>(visible < 0 ? 0 : visible / 4));
        }
      }
      EXPECT_EQ(m.decode->decode_lens, lens) << at;
      EXPECT_EQ(m.decode->requires_padding,
                *std::min_element(lens.begin(), lens.end()) !=
                    *std::max_element(lens.begin(), lens.end()))
          << at;
      EXPECT_EQ(m.decode->next_n, next_n) << at;
      EXPECT_EQ(m.decode->decode_seq_lens, dsl) << at;
    }
    ASSERT_EQ(m.prefill.has_value(), nd < b.R) << at;
    if (nd == b.R) return;
    const IndexerPrefillChunk& c = *m.prefill;
    V32 cu = {0}, ks, ke, token_req, token_to_seq;
    for (int64_t r = nd; r < b.R; ++r) cu.push_back(cu.back() + csl[r]);
    for (int64_t t = b.qsl[nd]; t < b.T; ++t) {
      const int64_t k = b.token_to_req[t] - nd;
      ks.push_back(cu[k]);
      ke.push_back(static_cast<int32_t>(cu[k] + (b.positions[t] + 1) / 4));
      token_req.push_back(static_cast<int32_t>(k));
    }
    for (int64_t r = nd; r < b.R; ++r)
      for (int64_t e = 0; e < csl[r]; ++e) token_to_seq.push_back(static_cast<int32_t>(r - nd));
    EXPECT_EQ(c.req_start, nd) << at;
    EXPECT_EQ(c.req_end, b.R) << at;
    EXPECT_EQ(c.num_reqs, b.R - nd) << at;
    EXPECT_EQ(c.token_start, b.qsl[nd]) << at;
    EXPECT_EQ(c.token_end, b.T) << at;
    EXPECT_EQ(c.total_seq_lens, cu.back()) << at;
    EXPECT_FALSE(c.skip_kv_gather) << at;
    EXPECT_EQ(c.cu_seq_lens, cu) << at;
    EXPECT_EQ(c.cu_seqlen_ks, ks) << at;
    EXPECT_EQ(c.cu_seqlen_ke, ke) << at;
    EXPECT_EQ(c.token_req, token_req) << at;
    EXPECT_EQ(c.token_to_seq, token_to_seq) << at;
  });
}

DSV4CPU_RUN_TEST(MetadataRandom, IndexerMetadata, "indexer_metadata", test::kThreads) {
  Rng rng(7);
  for (int it = 0; it < kBatches; ++it) {
    const Batch b = random_batch(rng, 12, 60, 3000);
    check_indexer_metadata(rng, b, b.tau, "batch " + std::to_string(it));
  }
}

// A step large enough for the threaded paths of the token-level ops (>= 2^15 tokens).
DSV4CPU_RUN_TEST(MetadataRandom, LargeStepThreaded,
                 {"token_positions", "slot_mapping", "indexer_metadata"}, test::kThreads) {
  Rng rng(8);
  Batch b = random_batch(rng, 0, 1, 1);  // empty, filled by hand: 6 decodes, 3 long prefills
  b.tau = 1;
  for (int64_t q : {1, 1, 0, 1, 1, 1, 15000, 9, 20000}) {
    const int64_t r = b.R++;
    b.seq.push_back(q + rng.uniform(0, 5000));
    b.qsl.push_back(b.qsl.back() + q);
    for (int64_t i = 0; i < q; ++i) {
      b.positions.push_back(b.seq[r] - q + i);
      b.token_to_req.push_back(r);
    }
  }
  b.T = b.qsl.back();
  check_indexer_metadata(rng, b, 1, "large step");
  const Idx qsl = rng.vec(b.qsl), seq = rng.vec(b.seq);
  testing::for_each_run("token_positions", test::kThreads, [&](const testing::Run& run) {
    V64 pos(b.T, 7);
    V32 req(b.T, 7);
    token_positions(qsl, seq, out_view(pos, {b.T}), out_view(req, {b.T}), run.options());
    ASSERT_EQ(pos, b.positions) << run.label();
    ASSERT_EQ(req, V32(b.token_to_req.begin(), b.token_to_req.end())) << run.label();
  });
  const Table bt = random_table(rng, columns_for(b, 1, 16));
  const Idx bt_v = table_view(rng, bt), pos = rng.vec(b.positions), req = rng.vec(b.token_to_req);
  V64 expected(b.T);
  for (int64_t t = 0; t < b.T; ++t) expected[t] = slot_of(bt, b.token_to_req[t], b.positions[t], 16);
  testing::for_each_run("slot_mapping", test::kThreads, [&](const testing::Run& run) {
    V64 out(b.T, 7);
    slot_mapping(pos, req, bt_v, 16, out_view(out, {b.T}), run.options());
    ASSERT_EQ(out, expected) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataRandom, SplitIndexerPrefillChunks,
                 "split_indexer_prefill_chunks", test::kThreads) {
  Rng rng(9);
  for (int it = 0; it < 200; ++it) {
    const int64_t count = rng.uniform(0, 8);
    V64 n, m;
    for (int64_t i = 0; i < count; ++i) {
      n.push_back(rng.chance(0.2) ? 0 : rng.uniform(0, 600));
      m.push_back(rng.uniform(1, 50));
    }
    const int64_t workspace = rng.uniform(1, 1200), bytes = rng.uniform(4, 40000);
    const int64_t offset = rng.uniform(0, 5);
    // The base rule literally (small values: the products fit).
    std::vector<std::array<int64_t, 4>> expected;
    const int64_t E = bytes / 4;
    for (int64_t i = 0; i < count;) {
      const int64_t start = i;
      int64_t M = 0, N = 0;
      while (i < count && N + n[i] <= workspace && (M + m[i]) * (N + n[i]) <= E) {
        M += m[i];
        N += n[i];
        ++i;
      }
      if (i == start) {
        M = m[i];
        N = n[i];
        ++i;
      }
      const int64_t step = N > 0 ? std::max<int64_t>(1, E / N) : M;
      for (int64_t qa = 0; qa < M; qa += step)
        expected.push_back({start + offset, i + offset, qa, std::min(qa + step, M)});
    }
    const Idx n_v = rng.vec(n), m_v = rng.vec(m);
    testing::for_each_run(
        "split_indexer_prefill_chunks", test::kThreads, [&](const testing::Run& run) {
          const auto chunks =
              split_indexer_prefill_chunks(n_v, m_v, workspace, bytes, offset, run.options());
          ASSERT_EQ(chunks.size(), expected.size()) << "case " << it;
          for (size_t c = 0; c < chunks.size(); ++c) {
            EXPECT_EQ(chunks[c].req_start, expected[c][0]);
            EXPECT_EQ(chunks[c].req_end, expected[c][1]);
            EXPECT_EQ(chunks[c].q_start, expected[c][2]);
            EXPECT_EQ(chunks[c].q_end, expected[c][3]);
          }
        });
  }
}

}  // namespace
}  // namespace dsv4cpu
