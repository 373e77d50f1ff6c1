// bad-input.md §1 and the metadata table of §4: one test per rule (class, outputs unchanged,
// the same message from every variant, the text for a few), check order, zero-size no-ops.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/metadata.hpp"
#include "test_metadata_util.hpp"

namespace dsv4cpu {
namespace {

using namespace test;  // Idx, vec, table, out_view, V64, V32, kThreads, expect_error

// A small valid step: decode (seq_len 10), prefill (seq_len 9, 6 tokens); T = 7.
struct Step {
  Idx qsl = vec({0, 1, 7});
  Idx seq = vec({10, 9});
  Idx pos = vec({9, 3, 4, 5, 6, 7, 8}, DType::I64);
  Idx req = vec({0, 1, 1, 1, 1, 1, 1});
  Idx bt = table({{4}, {6}}, 1, -99);
};

// ---- rules of the "all" row ----

DSV4CPU_RUN_TEST(MetadataBadInput, QslMustStartAtZero, "token_positions", test::kThreads) {
  const Idx qsl = vec({1, 2, 7}), seq = vec({10, 9});
  V64 pos(6, 7);
  V32 req(6, 7);
  const std::string msg =
      test::expect_error("token_positions", "IndexError", [&](const Options& o) {
        token_positions(qsl, seq, out_view(pos, {6}), out_view(req, {6}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::token_positions: query_start_loc[0] = 1: does not start at 0 (expected "
            "query_start_loc[0] = 0)");
  EXPECT_EQ(pos, V64(6, 7));
  EXPECT_EQ(req, V32(6, 7));
  EXPECT_THROW(split_decodes_and_prefills(qsl, 1), IndexError);
}

DSV4CPU_RUN_TEST(MetadataBadInput, QslMustNotDecrease,
                 {"compressed_slot_mapping", "indexer_metadata"}, test::kThreads) {
  const Idx qsl = vec({0, 3, 2}), seq = vec({10, 9}), bt = table({{4}, {6}}, 1, -99);
  V64 slots(4, 7);
  const std::string msg =
      test::expect_error("compressed_slot_mapping", "IndexError", [&](const Options& o) {
        compressed_slot_mapping(qsl, seq, bt, 4, 64, TensorView(), out_view(slots, {4}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::compressed_slot_mapping: query_start_loc[2] = 2: decreasing (expected >= "
            "query_start_loc[1] = 3)");
  EXPECT_EQ(slots, V64(4, 7));
  test::expect_error("indexer_metadata", "IndexError", [&](const Options& o) {
    indexer_metadata(qsl, seq, bt, 64, 1, out_view(slots, {4}), o);
  });
  EXPECT_EQ(slots, V64(4, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, QslLengthIsRPlusOne, "token_positions", test::kThreads) {
  const Idx empty = vec({}), seq = vec({10, 9}), qsl = vec({0, 1, 7});
  EXPECT_THROW(split_decodes_and_prefills(empty, 1), ShapeError);
  V64 pos(7, 7);
  V32 req(7, 7);
  const Idx seq3 = vec({10, 9, 4});  // R = 2 from query_start_loc
  test::expect_error("token_positions", "ShapeError", [&](const Options& o) {
    token_positions(qsl, seq3, out_view(pos, {7}), out_view(req, {7}), o);
  });
  EXPECT_EQ(pos, V64(7, 7));
  // Outputs of token_positions are [T] with T = query_start_loc[R].
  V64 short_pos(6, 7);
  V32 short_req(6, 7);
  test::expect_error("token_positions", "ShapeError", [&](const Options& o) {
    token_positions(qsl, seq, out_view(short_pos, {6}), out_view(short_req, {6}), o);
  });
}

DSV4CPU_RUN_TEST(MetadataBadInput, SeqLenShorterThanQuery, "token_positions", test::kThreads) {
  const Idx qsl = vec({0, 1, 7}), seq = vec({10, 5});
  V64 pos(7, 7);
  V32 req(7, 7);
  const std::string msg =
      test::expect_error("token_positions", "IndexError", [&](const Options& o) {
        token_positions(qsl, seq, out_view(pos, {7}), out_view(req, {7}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::token_positions: seq_lens[1] = 5: shorter than its request's query tokens "
            "(expected seq_len >= 6 = query_start_loc[2] - query_start_loc[1])");
  EXPECT_EQ(pos, V64(7, 7));
  EXPECT_EQ(req, V32(7, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, TokenToReqOutOfRange,
                 {"slot_mapping", "swa_window_indices", "c128a_topk_indices"}, test::kThreads) {
  Step s;
  const Idx req = vec({0, 1, 1, 2, 1, 1, 1});
  V64 slots(7, 7), win(7 * 8, 7), c128(7 * 8, 7);
  const std::string msg = test::expect_error("slot_mapping", "IndexError", [&](const Options& o) {
    slot_mapping(s.pos, req, s.bt, 64, out_view(slots, {7}), o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: token_to_req[3] = 2: request index out of range (expected 0 "
            "<= token_to_req < 2)");
  test::expect_error("swa_window_indices", "IndexError", [&](const Options& o) {
    swa_window_indices(s.pos, req, s.bt, 8, 64, out_view(win, {7, 8}), MutableTensorView(), o);
  });
  test::expect_error("c128a_topk_indices", "IndexError", [&](const Options& o) {
    c128a_topk_indices(s.pos, req, s.bt, 1024, 2, out_view(c128, {7, 8}), o);
  });
  const Idx negative = vec({0, -1, 1, 1, 1, 1, 1});
  test::expect_error("slot_mapping", "IndexError", [&](const Options& o) {
    slot_mapping(s.pos, negative, s.bt, 64, out_view(slots, {7}), o);
  });
  EXPECT_EQ(slots, V64(7, 7));
  EXPECT_EQ(win, V64(7 * 8, 7));
  EXPECT_EQ(c128, V64(7 * 8, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, NegativePosition,
                 {"slot_mapping", "swa_window_indices"}, test::kThreads) {
  Step s;
  const Idx pos = vec({9, 3, 4, -5, 6, 7, 8}, DType::I64);
  V64 slots(7, 7), win(7 * 4, 7);
  const std::string msg = test::expect_error("slot_mapping", "IndexError", [&](const Options& o) {
    slot_mapping(pos, s.req, s.bt, 64, out_view(slots, {7}), o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: positions[3] = -5: negative position (expected >= 0)");
  test::expect_error("swa_window_indices", "IndexError", [&](const Options& o) {
    swa_window_indices(pos, s.req, s.bt, 4, 64, out_view(win, {7, 4}), MutableTensorView(), o);
  });
  EXPECT_THROW(c128a_compact_width(pos), IndexError);
  EXPECT_EQ(slots, V64(7, 7));
  EXPECT_EQ(win, V64(7 * 4, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, NumTokensPaddedBelowT,
                 {"slot_mapping", "compressed_slot_mapping", "indexer_metadata"}, test::kThreads) {
  Step s;
  V64 slots(6, 7);
  const std::string msg = test::expect_error("slot_mapping", "ValueError", [&](const Options& o) {
    slot_mapping(s.pos, s.req, s.bt, 64, out_view(slots, {6}), o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: num_tokens_padded = 6: fewer entries than tokens (expected "
            "num_tokens_padded >= T = 7)");
  test::expect_error("compressed_slot_mapping", "ValueError", [&](const Options& o) {
    compressed_slot_mapping(s.qsl, s.seq, s.bt, 4, 64, TensorView(), out_view(slots, {6}), o);
  });
  test::expect_error("indexer_metadata", "ValueError", [&](const Options& o) {
    indexer_metadata(s.qsl, s.seq, s.bt, 64, 1, out_view(slots, {6}), o);
  });
  EXPECT_EQ(slots, V64(6, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, SizesAtLeastOne,
                 {"slot_mapping", "compressed_slot_mapping", "swa_window_indices",
                  "c128a_topk_indices", "c128a_topk_indices_compact", "c128a_decode_metadata",
                  "c4a_global_topk_indices", "indexer_metadata"},
                 test::kThreads) {
  Step s;
  V64 slots(7, 7), win(7 * 4, 7), c128(7 * 8, 7), global(0, 7), c4(7, 7);
  V32 lens(7, 7), local(7 * 128, 7);
  const Idx topk(V64(7, -1), {7, 1}, DType::I32);
  const std::string msg = test::expect_error("slot_mapping", "ValueError", [&](const Options& o) {
    slot_mapping(s.pos, s.req, s.bt, 0, out_view(slots, {7}), o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: block_size = 0: not a positive block size (expected "
            "block_size >= 1)");
  test::expect_error("compressed_slot_mapping", "ValueError", [&](const Options& o) {
    compressed_slot_mapping(s.qsl, s.seq, s.bt, 4, 0, TensorView(), out_view(slots, {7}), o);
  });
  test::expect_error("swa_window_indices", "ValueError", [&](const Options& o) {
    swa_window_indices(s.pos, s.req, s.bt, 4, -1, out_view(win, {7, 4}), MutableTensorView(), o);
  });
  test::expect_error("c128a_topk_indices", "ValueError", [&](const Options& o) {
    c128a_topk_indices(s.pos, s.req, s.bt, 1024, 0, out_view(c128, {7, 8}), o);
  });
  test::expect_error("c128a_topk_indices_compact", "ValueError", [&](const Options& o) {
    c128a_topk_indices_compact(s.pos, s.req, s.bt, 0, out_view(c128, {7, 8}), o);
  });
  test::expect_error("c128a_decode_metadata", "ValueError", [&](const Options& o) {
    c128a_decode_metadata(s.pos, s.req, s.bt, 1024, 0, 0, TensorView(), out_view(global, {0, 128}),
                          out_view(lens, {0}), out_view(local, {7, 128}), o);
  });
  test::expect_error("c4a_global_topk_indices", "ValueError", [&](const Options& o) {
    c4a_global_topk_indices(topk, s.req, s.bt, 0, TensorView(), out_view(c4, {7, 1}),
                            out_view(lens, {7}), o);
  });
  test::expect_error("indexer_metadata", "ValueError", [&](const Options& o) {
    indexer_metadata(s.qsl, s.seq, s.bt, 0, 1, out_view(slots, {7}), o);
  });
  EXPECT_EQ(slots, V64(7, 7));
  EXPECT_EQ(win, V64(7 * 4, 7));
  EXPECT_EQ(c128, V64(7 * 8, 7));
  EXPECT_EQ(c4, V64(7, 7));
  EXPECT_EQ(lens, V32(7, 7));
  EXPECT_EQ(local, V32(7 * 128, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, NegativeReferencedBlockTableEntry,
                 {"slot_mapping", "swa_window_indices", "compressed_slot_mapping"},
                 test::kThreads) {
  Step s;
  const Idx bt = table({{4}, {-3}}, 1, -99);
  V64 slots(7, 7), win(7 * 4, 7), csm(7, 7);
  const std::string msg = test::expect_error("slot_mapping", "IndexError", [&](const Options& o) {
    slot_mapping(s.pos, s.req, bt, 64, out_view(slots, {7}), o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: block_table[1, 0] = -3: negative block id referenced by "
            "positions[1] = 3 (expected >= 0)");
  test::expect_error("swa_window_indices", "IndexError", [&](const Options& o) {
    swa_window_indices(s.pos, s.req, bt, 4, 64, out_view(win, {7, 4}), MutableTensorView(), o);
  });
  const std::string cmsg =
      test::expect_error("compressed_slot_mapping", "IndexError", [&](const Options& o) {
        compressed_slot_mapping(s.qsl, s.seq, bt, 4, 64, TensorView(), out_view(csm, {7}), o);
      });
  EXPECT_EQ(cmsg,
            "dsv4cpu::compressed_slot_mapping: block_table[1, 0] = -3: negative block id "
            "referenced by seq_lens[1] = 9 at token 1 (position 3) (expected >= 0)");
  // With the emitting tokens' own slots -1 the entry is not read: no error.
  const Idx own = vec({0, -1, 0, 0, 0, -1, 0});
  compressed_slot_mapping(s.qsl, s.seq, bt, 4, 64, own, out_view(csm, {7}));
  EXPECT_EQ(csm, V64(7, -1));
  EXPECT_EQ(slots, V64(7, 7));
  EXPECT_EQ(win, V64(7 * 4, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, BlockTableColumnBeyondTable, "slot_mapping", test::kThreads) {
  Step s;
  const Idx pos = vec({9, 3, 4, 5, 6, 70, 8}, DType::I64);
  V64 slots(7, 7);
  const std::string msg = test::expect_error("slot_mapping", "IndexError", [&](const Options& o) {
    slot_mapping(pos, s.req, s.bt, 64, out_view(slots, {7}), o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: positions[5] = 70: references block-table column 1 beyond "
            "the table (expected column < 1)");
  EXPECT_EQ(slots, V64(7, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, C128aPrefixReportsFirstTokenAndColumn,
                 "c128a_topk_indices", test::kThreads) {
  // Row 0 = [5, -1, 7]: a token with n = 2 reads columns 0, 1 (P = 1) and fails at column 1;
  // a token with n = 1 does not. Token order decides which is reported.
  const Idx pos = vec({200, 300, 1000}, DType::I64), req = vec({0, 0, 0});
  const Idx bt = table({{5, -1, 7}}, 3, -99);
  V64 idx(3 * 8, 7);
  const std::string msg =
      test::expect_error("c128a_topk_indices", "IndexError", [&](const Options& o) {
        c128a_topk_indices(pos, req, bt, 1024, 1, out_view(idx, {3, 8}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::c128a_topk_indices: block_table[0, 1] = -1: negative block id referenced "
            "by positions[1] = 300 (expected >= 0)");
  // With a sound row of 3 columns, token 2 (n = 7) is the first token needing column 3.
  const Idx short_bt = table({{5, 6, 7}}, 3, -99);
  const std::string beyond =
      test::expect_error("c128a_topk_indices", "IndexError", [&](const Options& o) {
        c128a_topk_indices(pos, req, short_bt, 1024, 1, out_view(idx, {3, 8}), o);
      });
  EXPECT_EQ(beyond,
            "dsv4cpu::c128a_topk_indices: positions[2] = 1000: references block-table column 3 "
            "beyond the table (expected column < 3)");
  EXPECT_EQ(idx, V64(3 * 8, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, UnreferencedEntriesAreNeverChecked, "c4a_global_topk_indices",
                 test::kThreads) {
  // Row 0 = [5, -1, 7] with P = 2: locals 0, 1 (column 0) and 4, 5 (column 2) never read
  // column 1, so there is no error and the slots come from columns 0 and 2.
  const Idx topk({4, 0, -1, 5, 1, -1}, {2, 3}, DType::I32), req = vec({0, 0});
  const Idx bt = table({{5, -1, 7}}, 3, -99);
  testing::for_each_run("c4a_global_topk_indices", test::kThreads, [&](const testing::Run& run) {
    V64 idx(6, 7);
    V32 lens(2, 7);
    c4a_global_topk_indices(topk, req, bt, 2, TensorView(), out_view(idx, {2, 3}),
                            out_view(lens, {2}), run.options());
    EXPECT_EQ(idx, (V64{14, 10, -1, 15, 11, -1})) << run.label();
    EXPECT_EQ(lens, (V32{2, 2})) << run.label();
  });
  // The same row read at local 2 (column 1) fails there.
  const Idx topk_bad({4, 2}, {1, 2}, DType::I64), req1 = vec({0});
  V64 idx(2, 7);
  V32 lens(1, 7);
  const std::string msg =
      test::expect_error("c4a_global_topk_indices", "IndexError", [&](const Options& o) {
        c4a_global_topk_indices(topk_bad, req1, bt, 2, TensorView(), out_view(idx, {1, 2}),
                                out_view(lens, {1}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::c4a_global_topk_indices: block_table[0, 1] = -1: negative block id "
            "referenced by topk_indices[0, 1] = 2 (expected >= 0)");
  EXPECT_EQ(idx, V64(2, 7));
}

// ---- per-op rules ----

DSV4CPU_RUN_TEST(MetadataBadInput, SplitThresholdNonNegative,
                 "split_decodes_and_prefills", test::kThreads) {
  const Idx qsl = vec({0, 1});
  const std::string msg =
      test::expect_error("split_decodes_and_prefills", "ValueError",
                         [&](const Options& o) { split_decodes_and_prefills(qsl, -1, o); });
  EXPECT_EQ(msg,
            "dsv4cpu::split_decodes_and_prefills: threshold = -1: negative threshold (expected "
            "threshold >= 0)");
}

DSV4CPU_RUN_TEST(MetadataBadInput, CompressedSlotMappingRatioAndOwnSlots,
                 "compressed_slot_mapping", test::kThreads) {
  Step s;
  V64 slots(7, 7);
  const std::string msg =
      test::expect_error("compressed_slot_mapping", "ValueError", [&](const Options& o) {
        compressed_slot_mapping(s.qsl, s.seq, s.bt, 8, 64, TensorView(), out_view(slots, {7}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::compressed_slot_mapping: compress_ratio = 8: unsupported compress ratio "
            "(expected 4 or 128)");
  const Idx own_short = vec({0, 0, 0, 0, 0, 0});
  test::expect_error("compressed_slot_mapping", "ShapeError", [&](const Options& o) {
    compressed_slot_mapping(s.qsl, s.seq, s.bt, 4, 64, own_short, out_view(slots, {7}), o);
  });
  const Idx own_bad = vec({0, 0, -2, 0, 0, 0, 0});
  test::expect_error("compressed_slot_mapping", "IndexError", [&](const Options& o) {
    compressed_slot_mapping(s.qsl, s.seq, s.bt, 4, 64, own_bad, out_view(slots, {7}), o);
  });
  EXPECT_EQ(slots, V64(7, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, SwaWindowAtLeastOne, "swa_window_indices", test::kThreads) {
  Step s;
  V64 win(0, 7);
  const std::string msg =
      test::expect_error("swa_window_indices", "ValueError", [&](const Options& o) {
        swa_window_indices(s.pos, s.req, s.bt, 0, 64, out_view(win, {7, 0}), MutableTensorView(),
                           o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::swa_window_indices: window = 0: not a positive window (expected window >= "
            "1)");
}

DSV4CPU_RUN_TEST(MetadataBadInput, C128aMaxModelLen,
                 {"c128a_topk_indices", "c128a_decode_metadata"}, test::kThreads) {
  Step s;
  V64 idx(7 * 8, 7), global(128, 7);
  V32 lens(1, 7), local(6 * 128, 7);
  test::expect_error("c128a_topk_indices", "ValueError", [&](const Options& o) {
    c128a_topk_indices(s.pos, s.req, s.bt, 0, 2, out_view(idx, {7, 0}), o);
  });
  EXPECT_THROW(c128a_topk_width(0), ValueError);
  EXPECT_THROW(c128a_decode_max_width(-3), ValueError);
  // positions[t] < max_model_len: position 9 with max_model_len 9.
  const std::string msg =
      test::expect_error("c128a_topk_indices", "IndexError", [&](const Options& o) {
        c128a_topk_indices(s.pos, s.req, s.bt, 9, 2, out_view(idx, {7, 1}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::c128a_topk_indices: positions[0] = 9: not below max_model_len (expected "
            "position < max_model_len = 9)");
  test::expect_error("c128a_decode_metadata", "IndexError", [&](const Options& o) {
    c128a_decode_metadata(s.pos, s.req, s.bt, 9, 2, 1, TensorView(), out_view(global, {1, 128}),
                          out_view(lens, {1}), out_view(local, {6, 128}), o);
  });
  EXPECT_EQ(idx, V64(7 * 8, 7));
  EXPECT_EQ(global, V64(128, 7));
  EXPECT_EQ(lens, V32(1, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, C128aWidths,
                 {"c128a_topk_indices_compact", "c128a_decode_metadata"}, test::kThreads) {
  // Compact: a token with more entries than the width; decode metadata: width rules and nd.
  const Idx pos = vec({300, 10}, DType::I64), req = vec({0, 0}), bt = table({{1, 2}}, 2, -99);
  V64 idx(2, 7), global(256, 7);
  V32 lens(2, 7), local(256, 7);
  const std::string msg =
      test::expect_error("c128a_topk_indices_compact", "IndexError", [&](const Options& o) {
        c128a_topk_indices_compact(pos, req, bt, 2, out_view(idx, {2, 1}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::c128a_topk_indices_compact: positions[0] = 300: more completed C128A "
            "entries than the row width (expected (position + 1) / 128 <= 1)");
  test::expect_error("c128a_decode_metadata", "ShapeError", [&](const Options& o) {  // not a
                                                                                     // multiple of
                                                                                     // 128
    c128a_decode_metadata(pos, req, bt, 1024, 2, 1, TensorView(), out_view(global, {1, 100}),
                          out_view(lens, {1}), out_view(local, {1, 100}), o);
  });
  test::expect_error("c128a_decode_metadata", "ShapeError", [&](const Options& o) {  // beyond Wmax
                                                                                     // = 128
    c128a_decode_metadata(pos, req, bt, 1024, 2, 1, TensorView(), out_view(global, {1, 256}),
                          out_view(lens, {1}), out_view(local, {1, 256}), o);
  });
  test::expect_error("c128a_decode_metadata", "IndexError", [&](const Options& o) {  // n = 2 > W =
                                                                                     // 0
    c128a_decode_metadata(pos, req, bt, 1024, 2, 1, TensorView(), out_view(global, {1, 0}),
                          out_view(lens, {1}), out_view(local, {1, 0}), o);
  });
  test::expect_error("c128a_decode_metadata", "ValueError", [&](const Options& o) {  // nd > T
    c128a_decode_metadata(pos, req, bt, 1024, 2, 3, TensorView(), out_view(global, {3, 128}),
                          out_view(lens, {3}), out_view(local, {0, 128}), o);
  });
  EXPECT_EQ(idx, V64(2, 7));
  EXPECT_EQ(global, V64(256, 7));
  EXPECT_EQ(lens, V32(2, 7));
  EXPECT_EQ(local, V32(256, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, C4aTopkEntriesAtLeastMinusOne,
                 "c4a_global_topk_indices", test::kThreads) {
  const Idx topk({0, -1, -2, 1}, {2, 2}, DType::I64), req = vec({0, 0});
  const Idx bt = table({{3}}, 1, -99);
  V64 idx(4, 7);
  V32 lens(2, 7);
  const std::string msg =
      test::expect_error("c4a_global_topk_indices", "IndexError", [&](const Options& o) {
        c4a_global_topk_indices(topk, req, bt, 64, TensorView(), out_view(idx, {2, 2}),
                                out_view(lens, {2}), o);
      });
  EXPECT_EQ(msg,
            "dsv4cpu::c4a_global_topk_indices: topk_indices[1, 0] = -2: negative index other "
            "than -1 (expected -1 or >= 0)");
  const Idx bt_neg = table({{-4}}, 1, -99), topk_ok({0, -1, -1, 1}, {2, 2}, DType::I32);
  const std::string bmsg =
      test::expect_error("c4a_global_topk_indices", "IndexError", [&](const Options& o) {
        c4a_global_topk_indices(topk_ok, req, bt_neg, 64, TensorView(), out_view(idx, {2, 2}),
                                out_view(lens, {2}), o);
      });
  EXPECT_EQ(bmsg,
            "dsv4cpu::c4a_global_topk_indices: block_table[0, 0] = -4: negative block id "
            "referenced by topk_indices[0, 0] = 0 (expected >= 0)");
  EXPECT_EQ(idx, V64(4, 7));
  EXPECT_EQ(lens, V32(2, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, SplitIndexerPrefillChunksRules, "split_indexer_prefill_chunks",
                 test::kThreads) {
  const Idx n = vec({10, 20}), m = vec({3, 4});
  const std::string op = "split_indexer_prefill_chunks";
  const std::string msg = test::expect_error(op, "ValueError", [&](const Options& o) {
    split_indexer_prefill_chunks(n, m, 0, 1024, 0, o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::split_indexer_prefill_chunks: workspace = 0: not a positive size "
            "(expected workspace >= 1)");
  test::expect_error(op, "ValueError",
                     [&](const Options& o) { split_indexer_prefill_chunks(n, m, 10, 3, 0, o); });
  test::expect_error(op, "ValueError",
                     [&](const Options& o) { split_indexer_prefill_chunks(n, m, 10, 8, -1, o); });
  const Idx n_bad = vec({10, -1}), m_bad = vec({3, 0});
  test::expect_error(op, "IndexError", [&](const Options& o) {
    split_indexer_prefill_chunks(n_bad, m, 10, 8, 0, o);
  });
  const std::string qmsg = test::expect_error(op, "IndexError", [&](const Options& o) {
    split_indexer_prefill_chunks(n, m_bad, 10, 8, 0, o);
  });
  EXPECT_EQ(qmsg,
            "dsv4cpu::split_indexer_prefill_chunks: query_lens[1] = 0: empty prefill query "
            "(expected >= 1)");
  test::expect_error(op, "ShapeError", [&](const Options& o) {
    split_indexer_prefill_chunks(n, vec({3}), 10, 8, 0, o);
  });
}

DSV4CPU_RUN_TEST(MetadataBadInput, IndexerMetadataNextNAndInt32,
                 "indexer_metadata", test::kThreads) {
  Step s;
  V64 slots(7, 7);
  test::expect_error("indexer_metadata", "ValueError", [&](const Options& o) {
    indexer_metadata(s.qsl, s.seq, s.bt, 64, 0, out_view(slots, {7}), o);
  });
  // compressed_seq_lens are I32: seq_len / 4 must fit.
  const Idx seq = vec({10, int64_t{1} << 34}, DType::I64);
  test::expect_error("indexer_metadata", "IndexError", [&](const Options& o) {
    indexer_metadata(s.qsl, seq, s.bt, 64, 1, out_view(slots, {7}), o);
  });
  EXPECT_EQ(slots, V64(7, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, ShapesDtypesAndOverlap,
                 {"slot_mapping", "swa_window_indices"}, test::kThreads) {
  Step s;
  V32 slots32(7, 7);
  test::expect_error("slot_mapping", "ShapeError",
                     [&](const Options& o) {  // slot_mapping must be I64
                       slot_mapping(s.pos, s.req, s.bt, 64, out_view(slots32, {7}), o);
                     });
  V64 win(7 * 4, 7);
  test::expect_error("swa_window_indices", "ShapeError", [&](const Options& o) {  // width != window
    swa_window_indices(s.pos, s.req, s.bt, 5, 64, out_view(win, {7, 4}), MutableTensorView(), o);
  });
  // An output aliasing an input.
  V64 pos = {9, 3, 4, 5, 6, 7, 8};
  const MutableTensorView pos_v(pos.data(), DType::I64, {7});
  const std::string msg = test::expect_error("slot_mapping", "ShapeError", [&](const Options& o) {
    slot_mapping(pos_v, s.req, s.bt, 64, pos_v, o);
  });
  EXPECT_EQ(msg,
            "dsv4cpu::slot_mapping: slot_mapping: memory overlaps input positions (expected an "
            "output that does not overlap any input)");
  EXPECT_EQ(pos, (V64{9, 3, 4, 5, 6, 7, 8}));
  V64 idx(7 * 4, 7);
  V32 lens(7, 7);
  test::expect_error("swa_window_indices", "ShapeError", [&](const Options& o) {  // lens inside
                                                                                  // indices
    swa_window_indices(s.pos, s.req, s.bt, 4, 64, out_view(idx, {7, 4}),
                       MutableTensorView(idx.data(), DType::I32, {7}), o);
  });
  EXPECT_EQ(idx, V64(7 * 4, 7));
}

DSV4CPU_RUN_TEST(MetadataBadInput, CheckOrderScalarsThenShapesThenElements,
                 "slot_mapping", test::kThreads) {
  const Idx pos = vec({-1, 3}, DType::I64), req = vec({0, 5}), bt = table({{-1}}, 1, -99);
  V64 slots(1, 7);
  // (a) block_size before (b) the too-short output before (d) positions and token_to_req.
  test::expect_error("slot_mapping", "ValueError", [&](const Options& o) {
    slot_mapping(pos, req, bt, 0, out_view(slots, {1}), o);
  });
  const std::string b = test::expect_error("slot_mapping", "ValueError", [&](const Options& o) {
    slot_mapping(pos, req, bt, 64, out_view(slots, {1}), o);
  });
  EXPECT_NE(b.find("num_tokens_padded"), std::string::npos) << b;
  V64 ok(2, 7);
  const std::string d = test::expect_error("slot_mapping", "IndexError", [&](const Options& o) {
    slot_mapping(pos, req, bt, 64, out_view(ok, {2}), o);
  });
  EXPECT_NE(d.find("positions[0] = -1"), std::string::npos) << d;
  EXPECT_EQ(ok, V64(2, 7));
}

// ---- bad-input.md §1.5: zero-size inputs are valid no-ops ----

DSV4CPU_RUN_TEST(MetadataBadInput, ZeroSizeNoOps,
                 {"token_positions", "slot_mapping", "compressed_slot_mapping",
                  "swa_window_indices", "c128a_topk_indices", "c4a_global_topk_indices",
                  "indexer_metadata"},
                 test::kThreads) {
  const Idx qsl0 = vec({0}), seq0 = vec({}), empty_pos = vec({}, DType::I64), empty_req = vec({});
  const Idx bt0(V64{}, {0, 4}), bt1 = table({{-1}}, 1, -1);
  const Idx qsl_empty_reqs = vec({0, 0, 0}), seq_empty_reqs = vec({5, 0});
  const Idx bt2 = table({{-1}, {-1}}, 1, -1);
  testing::for_each_run("token_positions", test::kThreads, [&](const testing::Run& run) {
    const Options o = run.options();
    token_positions(qsl0, seq0, MutableTensorView(nullptr, DType::I64, {0}),
                    MutableTensorView(nullptr, DType::I32, {0}), o);
    token_positions(qsl_empty_reqs, seq_empty_reqs, MutableTensorView(nullptr, DType::I64, {0}),
                    MutableTensorView(nullptr, DType::I32, {0}), o);
  });
  testing::for_each_run("slot_mapping", test::kThreads, [&](const testing::Run& run) {
    V64 pad(2, 7);
    slot_mapping(empty_pos, empty_req, bt1, 64, out_view(pad, {2}), run.options());
    EXPECT_EQ(pad, V64(2, -1));  // only padding
  });
  const DecodePrefillSplit s = split_decodes_and_prefills(qsl0, 1);
  EXPECT_EQ(s.num_decodes + s.num_prefills + s.num_decode_tokens + s.num_prefill_tokens, 0);
  testing::for_each_run("compressed_slot_mapping", test::kThreads, [&](const testing::Run& run) {
    compressed_slot_mapping(qsl_empty_reqs, seq_empty_reqs, bt2, 4, 64, TensorView(),
                            MutableTensorView(nullptr, DType::I64, {0}), run.options());
  });
  testing::for_each_run("swa_window_indices", test::kThreads, [&](const testing::Run& run) {
    swa_window_indices(empty_pos, empty_req, bt0, 128, 64,
                       MutableTensorView(nullptr, DType::I64, {0, 128}),
                       MutableTensorView(nullptr, DType::I32, {0}), run.options());
  });
  EXPECT_EQ(c128a_compact_width(empty_pos), 0);
  testing::for_each_run("c128a_topk_indices", test::kThreads, [&](const testing::Run& run) {
    const Options o = run.options();
    c128a_topk_indices(empty_pos, empty_req, bt0, 1024, 2,
                       MutableTensorView(nullptr, DType::I64, {0, 8}), o);
    c128a_topk_indices_compact(empty_pos, empty_req, bt0, 2,
                               MutableTensorView(nullptr, DType::I64, {0, 0}), o);
    c128a_decode_metadata(empty_pos, empty_req, bt0, 1024, 2, 0, TensorView(),
                          MutableTensorView(nullptr, DType::I64, {0, 128}),
                          MutableTensorView(nullptr, DType::I32, {0}),
                          MutableTensorView(nullptr, DType::I32, {0, 128}), o);
  });
  testing::for_each_run("c4a_global_topk_indices", test::kThreads, [&](const testing::Run& run) {
    c4a_global_topk_indices(Idx(V64{}, {0, 512}), empty_req, bt0, 64, TensorView(),
                            MutableTensorView(nullptr, DType::I64, {0, 512}),
                            MutableTensorView(nullptr, DType::I32, {0}), run.options());
  });
  testing::for_each_run("indexer_metadata", test::kThreads, [&](const testing::Run& run) {
    const IndexerMetadata m = indexer_metadata(
        qsl0, seq0, bt0, 64, 1, MutableTensorView(nullptr, DType::I64, {0}), run.options());
    EXPECT_FALSE(m.decode.has_value());
    EXPECT_FALSE(m.prefill.has_value());
    EXPECT_TRUE(m.compressed_seq_lens.empty());
  });
  EXPECT_TRUE(split_indexer_prefill_chunks(vec({}), vec({}), 1, 4, 0).empty());
}

}  // namespace
}  // namespace dsv4cpu
