// metadata.md worked examples, by hand: §4, §5, §6, §7.1, §7.2, §9.2, §9.3, §9.5, §10, §12.
// Every variant of every op, with 1 and 2 threads. Block-table entries no formula reads are
// -99 throughout, so the tests also show they are never checked.
#include <gtest/gtest.h>

#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/metadata.hpp"
#include "test_metadata_util.hpp"

namespace dsv4cpu {
namespace {

using namespace test;  // Idx, vec, table, out_view, V64, V32, kThreads, expect_error

constexpr int64_t kUnread = -99;

V64 iota64(int64_t first, int64_t n) {
  V64 v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}
V64 concat(std::initializer_list<V64> parts) {
  V64 v;
  for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

DSV4CPU_RUN_TEST(MetadataExamples, SplitRule, "split_decodes_and_prefills", test::kThreads) {  // §4
  const Idx qsl = vec({0, 1, 5, 6});     // q = 1, 4, 1: the trailing short request is a prefill
  const Idx all_decode = vec({0, 1, 2});  // q = 1, 1
  testing::for_each_run("split_decodes_and_prefills", test::kThreads, [&](const testing::Run& run) {
    const Options o = run.options();
    const DecodePrefillSplit s = split_decodes_and_prefills(qsl, 1, o);
    EXPECT_EQ(s.num_decodes, 1);
    EXPECT_EQ(s.num_prefills, 2);
    EXPECT_EQ(s.num_decode_tokens, 1);
    EXPECT_EQ(s.num_prefill_tokens, 5);
    const DecodePrefillSplit mtp = split_decodes_and_prefills(qsl, 4, o);  // max q <= τ
    EXPECT_EQ(mtp.num_decodes, 3);
    EXPECT_EQ(mtp.num_prefills, 0);
    EXPECT_EQ(mtp.num_decode_tokens, 6);
    EXPECT_EQ(mtp.num_prefill_tokens, 0);
    const DecodePrefillSplit d = split_decodes_and_prefills(all_decode, 1, o);
    EXPECT_EQ(d.num_decodes, 2);
    EXPECT_EQ(d.num_prefill_tokens, 0);
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, CompressedSlotMappingSection5,
                 "compressed_slot_mapping", test::kThreads) {
  // seq_len 260, 8 new tokens (positions 252..259), block table [5, 7], P_c = 64, ratio 4.
  const Idx qsl = vec({0, 8}), seq = vec({260}, DType::I64), bt = table({{5, 7}}, 2, kUnread);
  testing::for_each_run("compressed_slot_mapping", test::kThreads, [&](const testing::Run& run) {
    V64 out(10, 12345);  // num_tokens_padded = 10
    compressed_slot_mapping(qsl, seq, bt, 4, 64, TensorView(), out_view(out, {10}), run.options());
    EXPECT_EQ(out, (V64{-1, -1, -1, 383, -1, -1, -1, 448, -1, -1})) << run.label();
    // The replayed-token rule: an own slot of -1 suppresses the write.
    const Idx own = vec({10, 11, 12, -1, 14, 15, 16, 17}, DType::I64);
    compressed_slot_mapping(qsl, seq, bt, 4, 64, own, out_view(out, {10}), run.options());
    EXPECT_EQ(out, (V64{-1, -1, -1, -1, -1, -1, -1, 448, -1, -1})) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, SwaWindowSection6, "swa_window_indices", test::kThreads) {
  // W = 4, bt = [6], positions 1 and 8 -> [384, 385, -1, -1], [389, 390, 391, 392].
  const Idx pos = vec({1, 8}, DType::I64), req = vec({0, 0}), bt = table({{6}}, 1, kUnread);
  testing::for_each_run("swa_window_indices", test::kThreads, [&](const testing::Run& run) {
    V64 indices(8, 7);
    V32 lens(2, 7);
    swa_window_indices(pos, req, bt, 4, 64, out_view(indices, {2, 4}), out_view(lens, {2}),
                       run.options());
    EXPECT_EQ(indices, (V64{384, 385, -1, -1, 389, 390, 391, 392})) << run.label();
    EXPECT_EQ(lens, (V32{2, 4})) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, C128aTopkSection71,
                 {"c128a_topk_indices", "c128a_topk_indices_compact"}, test::kThreads) {
  // max_model_len 1000 (Wc = 8), position 639 (n = 5), bt = [11, 17, 20], P_c = 2.
  const Idx pos = vec({639}, DType::I64), req = vec({0}), bt = table({{11, 17, 20}}, 4, kUnread);
  EXPECT_EQ(c128a_topk_width(1000), 8);
  EXPECT_EQ(c128a_topk_width(1024), 8);
  EXPECT_EQ(c128a_topk_width(1025), 9);
  EXPECT_EQ(c128a_compact_width(pos), 5);
  testing::for_each_run("c128a_topk_indices", test::kThreads, [&](const testing::Run& run) {
    V64 indices(8, 7);
    c128a_topk_indices(pos, req, bt, 1000, 2, out_view(indices, {1, 8}), run.options());
    EXPECT_EQ(indices, (V64{22, 23, 34, 35, 40, -1, -1, -1})) << run.label();
  });
  testing::for_each_run("c128a_topk_indices_compact", test::kThreads, [&](const testing::Run& run) {
    V64 compact(5, 7), wider(6, 7);
    c128a_topk_indices_compact(pos, req, bt, 2, out_view(compact, {1, 5}), run.options());
    EXPECT_EQ(compact, (V64{22, 23, 34, 35, 40})) << run.label();
    c128a_topk_indices_compact(pos, req, bt, 2, out_view(wider, {1, 6}), run.options());
    EXPECT_EQ(wider, (V64{22, 23, 34, 35, 40, -1})) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, C128aDecodeMetadataSection72,
                 "c128a_decode_metadata", test::kThreads) {
  // max_model_len 1000: Wc = 8, Wmax = 128. Decode token at 639 (n = 5), decode token at 127
  // (n = 1) whose own slot is -1 (len 0), prefill tokens at 255 (n = 2) and 100 (n = 0).
  EXPECT_EQ(c128a_decode_max_width(1000), 128);
  EXPECT_EQ(c128a_decode_max_width(16385), 256);
  const Idx pos = vec({639, 127, 255, 100}, DType::I64), req = vec({0, 1, 2, 2});
  const Idx bt = table({{11, 17, 20}, {3}, {kUnread}}, 3, kUnread);
  const Idx own = vec({5, -1, 7, 8});
  testing::for_each_run("c128a_decode_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 global(2 * 128, 7);
    V32 lens(2, 7), local(2 * 128, 7);
    c128a_decode_metadata(pos, req, bt, 1000, 2, 2, own, out_view(global, {2, 128}),
                          out_view(lens, {2}), out_view(local, {2, 128}), run.options());
    V64 g(2 * 128, -1);
    for (int64_t o = 0; o < 5; ++o) g[static_cast<size_t>(o)] = V64{22, 23, 34, 35, 40}[o];
    g[128] = 6;  // bt[1][0] * 2 + 0
    EXPECT_EQ(global, g) << run.label();
    EXPECT_EQ(lens, (V32{5, 0})) << run.label();
    V32 l(2 * 128, -1);
    l[0] = 0;
    l[1] = 1;
    EXPECT_EQ(local, l) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, SplitIndexerPrefillChunksSection93,
                 "split_indexer_prefill_chunks", test::kThreads) {
  const Idx n = vec({100, 50, 400}, DType::I64), m = vec({10, 20, 30}, DType::I64);
  testing::for_each_run(
      "split_indexer_prefill_chunks", test::kThreads, [&](const testing::Run& run) {
        const auto chunks =
            split_indexer_prefill_chunks(n, m, 500, 16000, 2, run.options());  // E = 4000
        const std::vector<std::array<int64_t, 4>> expected = {
            {2, 3, 0, 10}, {3, 4, 0, 20}, {4, 5, 0, 10}, {4, 5, 10, 20}, {4, 5, 20, 30}};
        ASSERT_EQ(chunks.size(), expected.size()) << run.label();
        for (size_t i = 0; i < chunks.size(); ++i) {
          EXPECT_EQ(chunks[i].req_start, expected[i][0]) << i;
          EXPECT_EQ(chunks[i].req_end, expected[i][1]) << i;
          EXPECT_EQ(chunks[i].q_start, expected[i][2]) << i;
          EXPECT_EQ(chunks[i].q_end, expected[i][3]) << i;
        }
      });
}

TEST(MetadataExamples, SplitIndexerPrefillChunksKeepsEmptyAndGroups) {
  // n = [0, 0, 3], m = [5, 6, 2], workspace 10, E = 8: requests 0 and 1 have N = 0 and join
  // (products 0), request 2 would give 13 * 3 > 8 and goes to its own group. The first group's
  // step is M = 11 (N = 0): one chunk with total 0, which the base rule keeps. Request 2:
  // step = E / 3 = 2 -> [0, 2).
  const Idx n = vec({0, 0, 3}), m = vec({5, 6, 2});
  const auto chunks = split_indexer_prefill_chunks(n, m, 10, 32, 0);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].req_start, 0);
  EXPECT_EQ(chunks[0].req_end, 2);
  EXPECT_EQ(chunks[0].q_end, 11);
  EXPECT_EQ(chunks[1].req_start, 2);
  EXPECT_EQ(chunks[1].req_end, 3);
  EXPECT_EQ(chunks[1].q_start, 0);
  EXPECT_EQ(chunks[1].q_end, 2);
  // A request beyond the workspace goes alone: n = 600 > 500, then step = max(1, E / N).
  const auto alone = split_indexer_prefill_chunks(vec({600}), vec({3}), 500, 800, 0);  // E = 200
  ASSERT_EQ(alone.size(), 3u);
  EXPECT_EQ(alone[2].q_start, 2);
  EXPECT_EQ(alone[2].q_end, 3);
}

TEST(MetadataExamples, TileSchedulerIsNone) {  // §10
  for (const char* kind : {"swaonly", "c4a", "c128a"}) EXPECT_EQ(build_tile_scheduler(kind), "none");
  EXPECT_THROW(build_tile_scheduler("c8a"), ValueError);
}

// §12 worked batch: requests 0 decode (seq_len 10), 1 decode (300), 2 prefill (9, 6 new tokens).
struct Section12 {
  Idx qsl = vec({0, 1, 2, 8});
  Idx seq = vec({10, 300, 9});
  Idx swa_bt = table({{4}, {7, 2, 9, 5, 11}, {6}}, 5, kUnread);
  Idx c4a_bt = table({{3}, {8, 12}, {5}}, 2, kUnread);
  Idx c128a_bt = table({{13}, {21, 22, 23}, {30}}, 3, kUnread);
  V64 positions = {9, 299, 3, 4, 5, 6, 7, 8};
  V64 token_to_req = {0, 1, 2, 2, 2, 2, 2, 2};
};

DSV4CPU_RUN_TEST(MetadataExamples, Section12Positions, "token_positions", test::kThreads) {
  const Section12 b;
  testing::for_each_run("token_positions", test::kThreads, [&](const testing::Run& run) {
    V64 pos(8, 7);
    V32 req(8, 7);
    token_positions(b.qsl, b.seq, out_view(pos, {8}), out_view(req, {8}), run.options());
    EXPECT_EQ(pos, b.positions) << run.label();
    EXPECT_EQ(req, (V32{0, 1, 2, 2, 2, 2, 2, 2})) << run.label();
  });
  const DecodePrefillSplit s = split_decodes_and_prefills(b.qsl, 1);
  EXPECT_EQ(s.num_decodes, 2);
  EXPECT_EQ(s.num_prefills, 1);
  EXPECT_EQ(s.num_decode_tokens, 2);
  EXPECT_EQ(s.num_prefill_tokens, 6);
}

DSV4CPU_RUN_TEST(MetadataExamples, Section12SwaSlotsAndWindows,
                 {"slot_mapping", "swa_window_indices"}, test::kThreads) {
  const Section12 b;
  const Idx pos = vec(b.positions, DType::I64), req = vec(b.token_to_req);
  testing::for_each_run("slot_mapping", test::kThreads, [&](const testing::Run& run) {
    V64 slots(10, 7);  // padded to 10
    slot_mapping(pos, req, b.swa_bt, 64, out_view(slots, {10}), run.options());
    EXPECT_EQ(slots, (V64{265, 747, 387, 388, 389, 390, 391, 392, -1, -1})) << run.label();
  });
  testing::for_each_run("swa_window_indices", test::kThreads, [&](const testing::Run& run) {
    V64 win(8 * 128, 7);
    V32 lens(8, 7);
    swa_window_indices(pos, req, b.swa_bt, 128, 64, out_view(win, {8, 128}), out_view(lens, {8}),
                       run.options());
    const V64 row0(win.begin(), win.begin() + 128), row1(win.begin() + 128, win.begin() + 256);
    EXPECT_EQ(row0, concat({iota64(256, 10), V64(118, -1)})) << run.label();
    EXPECT_EQ(row1, concat({iota64(620, 20), iota64(320, 64), iota64(704, 44)})) << run.label();
    EXPECT_EQ(lens, (V32{10, 128, 4, 5, 6, 7, 8, 9})) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section12CompressedSlots,
                 "compressed_slot_mapping", test::kThreads) {
  const Section12 b;
  testing::for_each_run("compressed_slot_mapping", test::kThreads, [&](const testing::Run& run) {
    const Options o = run.options();
    V64 c4a(8, 7), c128a(8, 7);
    compressed_slot_mapping(b.qsl, b.seq, b.c4a_bt, 4, 64, TensorView(), out_view(c4a, {8}), o);
    EXPECT_EQ(c4a, (V64{-1, 778, 320, -1, -1, -1, 321, -1})) << run.label();
    compressed_slot_mapping(b.qsl, b.seq, b.c128a_bt, 128, 2, TensorView(), out_view(c128a, {8}),
                            o);
    EXPECT_EQ(c128a, V64(8, -1)) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section12C128a,
                 {"c128a_topk_indices", "c128a_topk_indices_compact", "c128a_decode_metadata"},
                 test::kThreads) {
  const Section12 b;
  const Idx pos = vec(b.positions, DType::I64), req = vec(b.token_to_req);
  V64 expected(8 * 8, -1);
  expected[8] = 42;
  expected[9] = 43;
  testing::for_each_run("c128a_topk_indices", test::kThreads, [&](const testing::Run& run) {
    V64 idx(8 * 8, 7);
    c128a_topk_indices(pos, req, b.c128a_bt, 1024, 2, out_view(idx, {8, 8}), run.options());
    EXPECT_EQ(idx, expected) << run.label();
  });
  ASSERT_EQ(c128a_compact_width(pos), 2);
  testing::for_each_run("c128a_topk_indices_compact", test::kThreads, [&](const testing::Run& run) {
    V64 idx(8 * 2, 7);
    c128a_topk_indices_compact(pos, req, b.c128a_bt, 2, out_view(idx, {8, 2}), run.options());
    V64 e(16, -1);
    e[2] = 42;
    e[3] = 43;
    EXPECT_EQ(idx, e) << run.label();
  });
  testing::for_each_run("c128a_decode_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 global(2 * 128, 7);
    V32 lens(2, 7), local(6 * 128, 7);
    c128a_decode_metadata(pos, req, b.c128a_bt, 1024, 2, 2, TensorView(),
                          out_view(global, {2, 128}), out_view(lens, {2}),
                          out_view(local, {6, 128}), run.options());
    V64 g(256, -1);
    g[128] = 42;
    g[129] = 43;
    EXPECT_EQ(global, g) << run.label();
    EXPECT_EQ(lens, (V32{0, 2})) << run.label();
    EXPECT_EQ(local, V32(6 * 128, -1)) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section12C4aGlobalTopk,
                 "c4a_global_topk_indices", test::kThreads) {
  // The short-context identity rows of indexer.md §7.3 mapped through the C4A table.
  const Section12 b;
  std::vector<int64_t> topk(8 * 512, -1);
  const int64_t L[8] = {2, 75, 1, 1, 1, 1, 2, 2};
  for (int64_t t = 0; t < 8; ++t)
    for (int64_t o = 0; o < L[t]; ++o) topk[static_cast<size_t>(t * 512 + o)] = o;
  const Idx topk_idx(topk, {8, 512}, DType::I32), req = vec(b.token_to_req);
  const Idx own = vec({0, 1, 2, -1, 4, 5, 6, 7}, DType::I64);
  testing::for_each_run("c4a_global_topk_indices", test::kThreads, [&](const testing::Run& run) {
    V64 idx(8 * 512, 7);
    V32 lens(8, 7);
    c4a_global_topk_indices(topk_idx, req, b.c4a_bt, 64, own, out_view(idx, {8, 512}),
                            out_view(lens, {8}), run.options());
    EXPECT_EQ(V64(idx.begin(), idx.begin() + 3), (V64{192, 193, -1})) << run.label();
    EXPECT_EQ(V64(idx.begin() + 512, idx.begin() + 512 + 76),
              concat({iota64(512, 64), iota64(768, 11), V64{-1}}))
        << run.label();
    EXPECT_EQ(V64(idx.begin() + 7 * 512, idx.begin() + 7 * 512 + 3), (V64{320, 321, -1}))
        << run.label();
    EXPECT_EQ(lens, (V32{2, 75, 1, 0, 1, 1, 2, 2})) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section12IndexerMetadata, "indexer_metadata", test::kThreads) {
  const Section12 b;  // the C4A table stands in for the indexer group's table
  testing::for_each_run("indexer_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 slots(9, 7);
    const IndexerMetadata m =
        indexer_metadata(b.qsl, b.seq, b.c4a_bt, 64, 1, out_view(slots, {9}), run.options());
    EXPECT_EQ(slots, (V64{-1, 778, 320, -1, -1, -1, 321, -1, -1})) << run.label();
    EXPECT_EQ(m.max_seq_len, 300);
    EXPECT_LE(m.max_seq_len / 4, 512);  // short context
    EXPECT_EQ(m.split.num_decodes, 2);
    EXPECT_EQ(m.split.num_prefills, 1);
    EXPECT_EQ(m.split.num_decode_tokens, 2);
    EXPECT_EQ(m.split.num_prefill_tokens, 6);
    EXPECT_EQ(m.compressed_seq_lens, (V32{2, 75, 2}));
    ASSERT_TRUE(m.decode.has_value());
    EXPECT_EQ(m.decode->decode_lens, (V32{1, 1}));
    EXPECT_FALSE(m.decode->requires_padding);
    EXPECT_EQ(m.decode->next_n, 1);
    EXPECT_EQ(m.decode->decode_seq_lens, (V32{2, 75}));
    ASSERT_TRUE(m.prefill.has_value());
    const IndexerPrefillChunk& c = *m.prefill;
    EXPECT_EQ(c.req_start, 2);
    EXPECT_EQ(c.req_end, 3);
    EXPECT_EQ(c.num_reqs, 1);
    EXPECT_EQ(c.token_start, 2);
    EXPECT_EQ(c.token_end, 8);
    EXPECT_EQ(c.total_seq_lens, 2);
    EXPECT_FALSE(c.skip_kv_gather);
    EXPECT_EQ(c.cu_seq_lens, (V32{0, 2}));
    EXPECT_EQ(c.cu_seqlen_ks, V32(6, 0));
    EXPECT_EQ(c.cu_seqlen_ke, (V32{1, 1, 1, 1, 2, 2}));
    EXPECT_EQ(c.token_req, V32(6, 0));
    EXPECT_EQ(c.token_to_seq, (V32{0, 0}));
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section12StateSlots, "slot_mapping", test::kThreads) {
  // Request 2's C4A-main state table (sbs = 4) [50, 51, 52]: positions 3..8.
  const Idx pos = vec({3, 4, 5, 6, 7, 8}), req = vec({0, 0, 0, 0, 0, 0});
  const Idx bt = table({{50, 51, 52}}, 3, kUnread);
  testing::for_each_run("slot_mapping", test::kThreads, [&](const testing::Run& run) {
    V64 slots(6, 7);
    slot_mapping(pos, req, bt, 4, out_view(slots, {6}), run.options());
    EXPECT_EQ(slots, (V64{203, 204, 205, 206, 207, 208})) << run.label();
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section95aTrailingShortPrefill,
                 "indexer_metadata", test::kThreads) {
  // Decode seq_len 3000; prefills (seq_len 9, 6 tokens) and (seq_len 3, 3 tokens).
  const Idx qsl = vec({0, 1, 7, 10}), seq = vec({3000, 9, 3});
  V64 row0;
  for (int64_t c = 0; c < 12; ++c) row0.push_back(100 + c);
  const Idx bt = table({row0, {7}, {kUnread}}, 12, kUnread);
  testing::for_each_run("indexer_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 slots(10, 7);
    const IndexerMetadata m =
        indexer_metadata(qsl, seq, bt, 64, 1, out_view(slots, {10}), run.options());
    // Decode token position 2999 emits entry 749 = page 11 (block 111), offset 45; request 1
    // (positions 3..8) emits entries 0 and 1 at positions 3 and 7; request 2 emits nothing.
    EXPECT_EQ(slots, (V64{111 * 64 + 45, 7 * 64, -1, -1, -1, 7 * 64 + 1, -1, -1, -1, -1}));
    ASSERT_TRUE(m.prefill.has_value());
    const IndexerPrefillChunk& c = *m.prefill;
    EXPECT_EQ(c.cu_seq_lens, (V32{0, 2, 2}));
    EXPECT_EQ(c.total_seq_lens, 2);
    EXPECT_EQ(c.token_start, 1);
    EXPECT_EQ(c.token_end, 10);
    EXPECT_EQ(c.token_req, (V32{0, 0, 0, 0, 0, 0, 1, 1, 1}));
    EXPECT_EQ(c.cu_seqlen_ks, (V32{0, 0, 0, 0, 0, 0, 2, 2, 2}));
    EXPECT_EQ(c.cu_seqlen_ke, (V32{1, 1, 1, 1, 2, 2, 2, 2, 2}));  // length 0 for request 2
    EXPECT_EQ(c.token_to_seq, (V32{0, 0}));
    EXPECT_EQ(m.decode->decode_seq_lens, (V32{750}));
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, Section95bAllPrefillsShorterThan4,
                 "indexer_metadata", test::kThreads) {
  // Decode seq_len 3000 (750 > 512 entries: not short context); prefills (3, 3) and (2, 2).
  const Idx qsl = vec({0, 1, 4, 6}), seq = vec({3000, 3, 2});
  V64 row0;
  for (int64_t c = 0; c < 12; ++c) row0.push_back(100 + c);
  const Idx bt = table({row0, {kUnread}, {kUnread}}, 12, kUnread);
  testing::for_each_run("indexer_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 slots(6, 7);
    const IndexerMetadata m =
        indexer_metadata(qsl, seq, bt, 64, 1, out_view(slots, {6}), run.options());
    EXPECT_EQ(slots, (V64{111 * 64 + 45, -1, -1, -1, -1, -1}));
    EXPECT_GT(m.max_seq_len / 4, 512);
    ASSERT_TRUE(m.decode.has_value());
    EXPECT_EQ(m.decode->decode_seq_lens, (V32{750}));
    ASSERT_TRUE(m.prefill.has_value());  // kept although its total is 0
    const IndexerPrefillChunk& c = *m.prefill;
    EXPECT_EQ(c.req_start, 1);
    EXPECT_EQ(c.req_end, 3);
    EXPECT_EQ(c.total_seq_lens, 0);
    EXPECT_EQ(c.cu_seq_lens, (V32{0, 0, 0}));
    EXPECT_EQ(c.token_req, (V32{0, 0, 0, 1, 1}));
    EXPECT_EQ(c.cu_seqlen_ks, V32(5, 0));
    EXPECT_EQ(c.cu_seqlen_ke, V32(5, 0));
    EXPECT_TRUE(c.token_to_seq.empty());
  });
}

DSV4CPU_RUN_TEST(MetadataExamples, NativeMtpDecodeSeqLens, "indexer_metadata", test::kThreads) {
  // next_n = 2: decode requests (seq_len 12, q 2) and (seq_len 1, q 1), then a prefill (q 3).
  // decode_seq_lens[r][j] = max(0, seq_len - 2 + 1 + j) / 4: [11/4, 12/4] = [2, 3], [0, 0].
  const Idx qsl = vec({0, 2, 3, 6}), seq = vec({12, 1, 40}), bt = table({{1}, {2}, {3}}, 1, kUnread);
  testing::for_each_run("indexer_metadata", test::kThreads, [&](const testing::Run& run) {
    V64 slots(6, 7);
    const IndexerMetadata m =
        indexer_metadata(qsl, seq, bt, 64, 2, out_view(slots, {6}), run.options());
    EXPECT_EQ(m.split.num_decodes, 2);
    EXPECT_EQ(m.split.num_decode_tokens, 3);
    ASSERT_TRUE(m.decode.has_value());
    EXPECT_EQ(m.decode->next_n, 2);
    EXPECT_EQ(m.decode->decode_lens, (V32{2, 1}));
    EXPECT_TRUE(m.decode->requires_padding);
    EXPECT_EQ(m.decode->decode_seq_lens, (V32{2, 3, 0, 0}));
    // Positions 10, 11 | 0 | 37, 38, 39: emitting 11 (entry 2) and 39 (entry 9).
    EXPECT_EQ(slots, (V64{-1, 64 + 2, -1, -1, -1, 3 * 64 + 9}));
  });
}

}  // namespace
}  // namespace dsv4cpu
