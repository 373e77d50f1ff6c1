// Hostile input through the public API (bad-input.md §1): extents whose products overflow,
// zero-size calls with huge other extents over null data, outputs of one call aliasing each
// other, returned vectors sized by argument values, thread counts beyond the hardware, top-k
// indices beyond int32. Each error case checks the class, the message and that every output byte
// is untouched; every variant of the op is called.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel.hpp"
#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/metadata.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

constexpr int64_t kTwo40 = int64_t{1} << 40;
constexpr int64_t kTwo62 = int64_t{1} << 62;
constexpr uint8_t kSentinel = 0xA5;

template <class T>
std::vector<T> sentinel(size_t n) {
  std::vector<T> v(n);
  std::memset(v.data(), kSentinel, n * sizeof(T));
  return v;
}

// Runs f; a call still running after `seconds` ends the test binary with a failure at once (a
// zero-size call must not loop over the other extents).
void finishes_within(int seconds, const std::string& what, const std::function<void()>& f) {
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < seconds * 20 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) {
      std::fprintf(stderr, "FAILED: %s still running after %d s\n", what.c_str(), seconds);
      std::_Exit(1);
    }
  });
  try {
    f();
  } catch (...) {
    done = true;
    watchdog.join();
    throw;
  }
  done = true;
  watchdog.join();
}

// Calls `call` (which builds views and calls an op) on every run of `op`; each must throw
// ShapeError naming TensorView with `what`, leaving `snapshot()` unchanged.
void expect_view_rejected(const std::string& op, const std::string& what,
                          const std::function<void(const Options&)>& call,
                          const std::function<std::vector<uint8_t>()>& snapshot) {
  testing::for_each_run(op, [&](const testing::Run& run) {
    const std::vector<uint8_t> before = snapshot();
    try {
      call(run.options());
      ADD_FAILURE() << run.label() << ": no exception";
    } catch (const ShapeError& e) {
      EXPECT_EQ(e.op(), "TensorView") << run.label();
      EXPECT_EQ(e.what(), "dsv4cpu::TensorView: view: " + what) << run.label();
    }
    EXPECT_EQ(snapshot(), before) << run.label();
  });
}

// ---- 1. extent products that overflow ----

const std::string kWrapped = "shape [4, 4611686018427387904]: element count overflows int64 "
                             "(expected a product of the non-zero extents below 2^63)";

TEST(HostileTensorView, ElementCountOverflowIsRejected) {
  EXPECT_TRUE(testing::throws_exactly<ShapeError>(
      [] { TensorView(nullptr, DType::I64, {4, kTwo62}); },
      "dsv4cpu::TensorView: view: " + kWrapped));
  // An empty extent does not hide the overflowing product of the others.
  EXPECT_TRUE(testing::throws_exactly<ShapeError>(
      [] { TensorView(nullptr, DType::U8, {kTwo40, kTwo40, 0}); },
      "dsv4cpu::TensorView: view: shape [1099511627776, 1099511627776, 0]: element count "
      "overflows int64 (expected a product of the non-zero extents below 2^63)"));
  // Huge extents beside an empty one are a valid empty view when the product fits.
  const TensorView empty(nullptr, DType::F32, {kTwo40, 0, 1 << 20});
  EXPECT_EQ(empty.numel(), 0);
}

TEST(HostileTensorView, ByteSpanOverflowIsRejected) {
  float x[4] = {};
  EXPECT_TRUE(testing::throws_exactly<ShapeError>(
      [&] { TensorView(x, DType::F32, {2, 2}, {int64_t{1} << 61, 1}); },
      "dsv4cpu::TensorView: view: F32 shape [2, 2], strides [2305843009213693952, 1]: byte span "
      "overflows the address space (expected a layout that fits)"));
  // Elements whose bytes would wrap around the end of the address space.
  const void* top = reinterpret_cast<const void*>(UINTPTR_MAX - 15);
  EXPECT_THROW(TensorView(top, DType::F32, {8}), ShapeError);
  EXPECT_THROW(TensorView(top, DType::F32, {4}), ShapeError);  // one past the end wraps to 0
  EXPECT_NO_THROW(TensorView(top, DType::F32, {3}));
}

DSV4CPU_RUN_TEST(HostileOverflow, MapLocalToGlobalSlotsWrappingShape, "map_local_to_global_slots") {
  const std::vector<int32_t> req = {0, 0, 0, 0}, table = {0};
  std::vector<int64_t> slots = sentinel<int64_t>(8);
  expect_view_rejected(
      "map_local_to_global_slots", kWrapped,
      [&](const Options& o) {
        map_local_to_global_slots(TensorView(nullptr, DType::I64, {4, kTwo62}),
                                  TensorView(req.data(), DType::I32, {4}),
                                  TensorView(table.data(), DType::I32, {1, 1}), 4,
                                  MutableTensorView(slots.data(), DType::I64, {4, 2}), o);
      },
      [&] { return testing::bytes_of(slots); });
}

DSV4CPU_RUN_TEST(HostileOverflow, TopkTransformWrappingShape, "topk_transform_512") {
  const std::vector<int32_t> lens = {0, 0, 0, 0};
  std::vector<int32_t> raw = sentinel<int32_t>(4 * 512);
  expect_view_rejected(
      "topk_transform_512", kWrapped,
      [&](const Options& o) {
        topk_transform_512(TensorView(nullptr, DType::F32, {4, kTwo62}),
                           TensorView(lens.data(), DType::I32, {4}), TensorView(), 1,
                           TopkMode::canonical, MutableTensorView(raw.data(), DType::I32, {4, 512}),
                           MutableTensorView(), o);
      },
      [&] { return testing::bytes_of(raw); });
}

DSV4CPU_RUN_TEST(HostileOverflow, SavePartialStatesWrappingStateCache, "save_partial_states") {
  const std::vector<float> kv(256, 1.0f), ape(4 * 256, 0.0f);
  const std::vector<int64_t> pos = {0}, slot = {0};
  std::vector<float> state = sentinel<float>(512);
  expect_view_rejected(
      "save_partial_states",
      "shape [4294967296, 16777216, 512]: element count overflows int64 (expected a product of "
      "the non-zero extents below 2^63)",
      [&](const Options& o) {
        save_partial_states(TensorView(kv.data(), DType::F32, {1, 256}),
                            TensorView(kv.data(), DType::F32, {1, 256}),
                            TensorView(ape.data(), DType::F32, {4, 256}),
                            TensorView(pos.data(), DType::I64, {1}),
                            MutableTensorView(state.data(), DType::F32,
                                              {int64_t{1} << 32, int64_t{1} << 24, 512}),
                            TensorView(slot.data(), DType::I64, {1}), o);
      },
      [&] { return testing::bytes_of(state); });
}

DSV4CPU_RUN_TEST(HostileOverflow, LogitsNextNBeyondTheQueryShape, "fp8_paged_mqa_logits") {
  const std::vector<int32_t> lens = {0, 0, 0, 0}, table = {0, 0, 0, 0};
  const std::vector<uint8_t> cache(132, 0);
  expect_view_rejected(
      "fp8_paged_mqa_logits",
      "shape [4, 4611686018427387904, 0, 128]: element count overflows int64 (expected a product "
      "of the non-zero extents below 2^63)",
      [&](const Options& o) {
        fp8_paged_mqa_logits(TensorView(nullptr, DType::F8_E4M3, {4, kTwo62, 0, 128}),
                             TensorView(cache.data(), DType::U8, {1, 132}),
                             TensorView(nullptr, DType::F32, {0, 0}),
                             TensorView(lens.data(), DType::I32, {4}),
                             TensorView(table.data(), DType::I32, {4, 1}), 1, 1 << 20,
                             MutableTensorView(nullptr, DType::F32, {0, 1 << 20}), kTwo62, o);
      },
      [&] { return testing::bytes_of(lens, table, cache); });
}

// ---- 3. zero-size calls with huge other extents over null data ----

// Each op with a zero work dimension and its other extents as large as a view allows: a valid
// no-op on every run, finished at once.
struct ZeroSizeCall {
  std::string op;
  std::function<void(const Options&)> call;
};

std::vector<ZeroSizeCall> zero_size_calls() {
  static const std::vector<int32_t> zeros4 = {0, 0, 0, 0}, table4 = {0, 0, 0, 0}, qsl0 = {0};
  static const std::vector<uint8_t> page(132, 0), mla_page(584, 0);
  static const std::vector<float> ape(4 * 128, 0.0f), weight(512, 1.0f);
  const MutableTensorView none_i64(nullptr, DType::I64, {0}), none_i32(nullptr, DType::I32, {0});
  return {
      // B·next_n = 2^42 logits rows of width 0, H = 0 heads.
      {"fp8_paged_mqa_logits",
       [=](const Options& o) {
         fp8_paged_mqa_logits(TensorView(nullptr, DType::F8_E4M3, {4, kTwo40, 0, 128}),
                              TensorView(page.data(), DType::U8, {1, 132}),
                              TensorView(nullptr, DType::F32, {4 * kTwo40, 0}),
                              TensorView(zeros4.data(), DType::I32, {4}),
                              TensorView(table4.data(), DType::I32, {4, 1}), 1, 0,
                              MutableTensorView(nullptr, DType::F32, {4 * kTwo40, 0}), kTwo40, o);
       }},
      {"topk_transform_512",
       [=](const Options& o) {
         topk_transform_512(TensorView(nullptr, DType::F32, {0, kTwo40 * 1024}), none_i32,
                            TensorView(nullptr, DType::I32, {0, kTwo40}), 1 << 20,
                            TopkMode::vllm, MutableTensorView(nullptr, DType::I32, {0, kTwo40}),
                            MutableTensorView(nullptr, DType::I32, {0, kTwo40}), o);
       }},
      {"fused_indexer_q_rope_quant",
       [=](const Options& o) {
         fused_indexer_q_rope_quant(TensorView(nullptr, DType::F32, {0, kTwo40, 128}),
                                    TensorView(nullptr, DType::F32, {0, kTwo40}), none_i64,
                                    TensorView(nullptr, DType::F32, {0, 64}),
                                    MutableTensorView(nullptr, DType::F8_E4M3, {0, kTwo40, 128}),
                                    MutableTensorView(nullptr, DType::F32, {0, kTwo40}), o);
       }},
      {"indexer_topk",
       [=](const Options& o) {
         indexer_topk(TensorView(nullptr, DType::F8_E4M3, {0, kTwo40, 128}),
                      TensorView(nullptr, DType::F32, {0, kTwo40}),
                      TensorView(qsl0.data(), DType::I32, {1}), none_i32,
                      TensorView(nullptr, DType::I32, {0, kTwo40}),
                      TensorView(nullptr, DType::U8, {0, kTwo40}), 1 << 30, TopkMode::canonical,
                      MutableTensorView(nullptr, DType::I32, {0, 512}), o);
       }},
      {"save_partial_states",
       [=](const Options& o) {
         save_partial_states(TensorView(nullptr, DType::F32, {0, 128}),
                             TensorView(nullptr, DType::F32, {0, 128}),
                             TensorView(ape.data(), DType::F32, {4, 128}), none_i64,
                             MutableTensorView(nullptr, DType::F32, {kTwo40, 0, 256}), none_i64, o);
       }},
      {"map_local_to_global_slots",
       [=](const Options& o) {
         map_local_to_global_slots(TensorView(nullptr, DType::I64, {0, kTwo40 * 1024}), none_i32,
                                   TensorView(nullptr, DType::I32, {kTwo40, 0}), 1,
                                   MutableTensorView(nullptr, DType::I64, {0, kTwo40 * 1024}), o);
       }},
      {"compress_norm_rope_store",
       [=](const Options& o) {
         compress_norm_rope_store(TensorView(nullptr, DType::F32, {kTwo40, 0, 1024}),
                                  TensorView(nullptr, DType::I64, {0, 4}), none_i64, none_i64,
                                  TensorView(weight.data(), DType::F32, {512}),
                                  TensorView(nullptr, DType::F32, {0, 64}),
                                  MutableTensorView(nullptr, DType::U8, {0, kTwo40 * 1024}), 1e-6,
                                  kTwo40, 4, ScaleClamp::cpu, o);
       }},
      {"swa_window_indices",
       [=](const Options& o) {
         swa_window_indices(none_i64, none_i32, TensorView(nullptr, DType::I32, {kTwo40, 0}),
                            kTwo40 * 1024, 64,
                            MutableTensorView(nullptr, DType::I64, {0, kTwo40 * 1024}),
                            MutableTensorView(), o);
       }},
      {"c128a_topk_indices",
       [=](const Options& o) {
         c128a_topk_indices(none_i64, none_i32, TensorView(nullptr, DType::I32, {kTwo40, 0}),
                            kTwo62, 64, MutableTensorView(nullptr, DType::I64, {0, kTwo62 / 128}),
                            o);
       }},
      {"c4a_global_topk_indices",
       [=](const Options& o) {
         c4a_global_topk_indices(TensorView(nullptr, DType::I64, {0, kTwo40 * 1024}), none_i32,
                                 TensorView(nullptr, DType::I32, {kTwo40, 0}), 64, TensorView(),
                                 MutableTensorView(nullptr, DType::I64, {0, kTwo40 * 1024}),
                                 none_i32, o);
       }},
      // T = 2^40 tokens, H = 0 heads, no column: nothing to attend, whatever T.
      {"sparse_mla_attention",
       [=](const Options& o) {
         sparse_mla_attention(TensorView(nullptr, DType::BF16, {kTwo40, 0, 512}),
                              TensorView(mla_page.data(), DType::U8, {1, 584}), 1,
                              TensorView(nullptr, DType::I32, {kTwo40, 0}),
                              TensorView(mla_page.data(), DType::U8, {1, 584}), 1,
                              TensorView(nullptr, DType::I32, {kTwo40, 0}), TensorView(),
                              kAttentionScale, NopeDecode::exact,
                              MutableTensorView(nullptr, DType::BF16, {kTwo40, 0, 512}),
                              MutableTensorView(nullptr, DType::F32, {kTwo40, 0}), o);
       }},
      {"fused_qnorm_rope_kv_insert",
       [=](const Options& o) {
         fused_qnorm_rope_kv_insert(TensorView(nullptr, DType::BF16, {0, 0, 512}),
                                    TensorView(nullptr, DType::BF16, {0, 512}), none_i64,
                                    none_i64,
                                    MutableTensorView(nullptr, DType::U8, {0, kTwo40 * 584}),
                                    TensorView(nullptr, DType::F32, {0, 64}), kTwo40, 1e-6,
                                    kTwo40, ScaleClamp::cpu, Fp8Subnormals::exact,
                                    MutableTensorView(nullptr, DType::BF16, {0, kTwo40, 512}), o);
       }},
      // T = 0 tokens of 2^40 heads.
      {"inverse_gptj_rope_o_proj",
       [=](const Options& o) {
         inverse_gptj_rope_o_proj(TensorView(nullptr, DType::F16, {0, kTwo40, 512}), none_i64,
                                  TensorView(nullptr, DType::F32, {0, 64}), 64,
                                  MutableTensorView(nullptr, DType::F32, {0, kTwo40, 512}), o);
       }},
      {"token_positions",
       [=](const Options& o) {
         token_positions(TensorView(qsl0.data(), DType::I32, {1}), none_i32, none_i64, none_i32,
                         o);
       }},
  };
}

DSV4CPU_RUN_TEST(HostileZeroSize, HugeOtherExtentsOverNullData, testing::OpList::every()) {
  for (const ZeroSizeCall& z : zero_size_calls())
    testing::for_each_run(z.op, [&](const testing::Run& run) {
      finishes_within(10, z.op + " " + run.label(), [&] {
        EXPECT_NO_THROW(z.call(run.options())) << z.op << " " << run.label();
      });
    });
}

// An empty block table [2^40, 0] over null data: its row count bounds the request indices only,
// never a size to allocate. Tokens reading no entry get -1 rows; a token reading one fails.
DSV4CPU_RUN_TEST(HostileZeroSize, EmptyBlockTableOfHugeRowCount,
                 {"c128a_topk_indices", "c4a_global_topk_indices"}) {
  const TensorView table(nullptr, DType::I32, {kTwo40, 0});
  const std::vector<int64_t> pos = {5}, req = {kTwo40 - 1}, none = {-1, -1}, one = {-1, 3};
  std::vector<int64_t> indices;
  std::vector<int32_t> lens;
  const auto snapshot = [&] { return testing::bytes_of(indices, lens); };
  testing::for_each_run("c128a_topk_indices", [&](const testing::Run& run) {
    indices.assign(8, 7);
    finishes_within(10, "c128a_topk_indices " + run.label(), [&] {
      c128a_topk_indices(TensorView(pos.data(), DType::I64, {1}),
                         TensorView(req.data(), DType::I64, {1}), table, 1024, 64,
                         MutableTensorView(indices.data(), DType::I64, {1, 8}), run.options());
    });
    EXPECT_EQ(indices, std::vector<int64_t>(8, -1)) << run.label();
  });
  testing::for_each_run("c4a_global_topk_indices", [&](const testing::Run& run) {
    indices.assign(2, 7);
    lens.assign(1, 7);
    finishes_within(10, "c4a_global_topk_indices " + run.label(), [&] {
      c4a_global_topk_indices(TensorView(none.data(), DType::I64, {1, 2}),
                              TensorView(req.data(), DType::I64, {1}), table, 64, TensorView(),
                              MutableTensorView(indices.data(), DType::I64, {1, 2}),
                              MutableTensorView(lens.data(), DType::I32, {1}), run.options());
    });
    EXPECT_EQ(indices, std::vector<int64_t>(2, -1)) << run.label();
    EXPECT_EQ(lens, std::vector<int32_t>(1, 0)) << run.label();
  });
  indices.assign(2, 7);
  lens.assign(1, 7);
  EXPECT_EQ(testing::expect_error(
                "c4a_global_topk_indices", "IndexError",
                [&](const Options& o) {
                  c4a_global_topk_indices(TensorView(one.data(), DType::I64, {1, 2}),
                                          TensorView(req.data(), DType::I64, {1}), table, 64,
                                          TensorView(),
                                          MutableTensorView(indices.data(), DType::I64, {1, 2}),
                                          MutableTensorView(lens.data(), DType::I32, {1}), o);
                },
                snapshot),
            "dsv4cpu::c4a_global_topk_indices: topk_indices[0, 1] = 3: references block-table "
            "column 0 beyond the table (expected column < 0)");
}

// ---- 5. returned vectors sized by argument values ----

DSV4CPU_RUN_TEST(HostileBuilders, PrefillChunksBoundedBeforeBuilding,
                 "split_indexer_prefill_chunks") {
  const std::vector<int64_t> compressed = {1}, query = {kTwo62};
  const std::string msg = testing::expect_error(
      "split_indexer_prefill_chunks", "IndexError", [&](const Options& o) {
        finishes_within(10, "split_indexer_prefill_chunks", [&] {
          split_indexer_prefill_chunks(TensorView(compressed.data(), DType::I64, {1}),
                                       TensorView(query.data(), DType::I64, {1}), 1, 4, 0, o);
        });
      });
  EXPECT_EQ(msg,
            "dsv4cpu::split_indexer_prefill_chunks: query_lens[0] = 4611686018427387904: more "
            "than 8388608 prefill chunks in all up to this request's group (expected at most "
            "8388608 chunks, 256 MiB of PrefillChunk)");
  // The same query length in one chunk is a valid result of one element.
  const std::vector<int64_t> none = {0};
  testing::for_each_run("split_indexer_prefill_chunks", [&](const testing::Run& run) {
    const std::vector<PrefillChunk> chunks = split_indexer_prefill_chunks(
        TensorView(none.data(), DType::I64, {1}), TensorView(query.data(), DType::I64, {1}), 1,
        4, 0, run.options());
    ASSERT_EQ(chunks.size(), 1u) << run.label();
    EXPECT_EQ(chunks[0].q_end, kTwo62) << run.label();
  });
}

DSV4CPU_RUN_TEST(HostileBuilders, IndexerMetadataDecodeWidthBounded, "indexer_metadata") {
  const std::vector<int32_t> qsl = {0, 1}, seq = {10}, table = {0};
  std::vector<int64_t> slots = sentinel<int64_t>(1);
  const std::string msg = testing::expect_error(
      "indexer_metadata", "ValueError",
      [&](const Options& o) {
        indexer_metadata(TensorView(qsl.data(), DType::I32, {2}),
                         TensorView(seq.data(), DType::I32, {1}),
                         TensorView(table.data(), DType::I32, {1, 1}), 64, kTwo40,
                         MutableTensorView(slots.data(), DType::I64, {1}), o);
      },
      [&] { return testing::bytes_of(slots); });
  EXPECT_EQ(msg,
            "dsv4cpu::indexer_metadata: next_n = 1099511627776: decode_seq_lens of 1 decode "
            "requests x next_n entries exceeds the returned-vector limit (expected num_decodes x "
            "next_n <= 67108864, 256 MiB of I32)");
}

DSV4CPU_RUN_TEST(HostileBuilders, IndexerMetadataPrefillChunkBounded, "indexer_metadata") {
  // One prefill request (2 tokens) whose compressed length 2^28 + 1 exceeds token_to_seq's limit;
  // its emitting token reads block-table column 0.
  const int64_t seq_len = 4 * ((int64_t{1} << 28) + 1);
  const std::vector<int64_t> qsl = {0, 2}, seq = {seq_len}, table = {0};
  std::vector<int64_t> slots = sentinel<int64_t>(2);
  const std::string msg = testing::expect_error(
      "indexer_metadata", "IndexError",
      [&](const Options& o) {
        indexer_metadata(TensorView(qsl.data(), DType::I64, {2}),
                         TensorView(seq.data(), DType::I64, {1}),
                         TensorView(table.data(), DType::I64, {1, 1}), int64_t{1} << 30, 1,
                         MutableTensorView(slots.data(), DType::I64, {2}), o);
      },
      [&] { return testing::bytes_of(slots); });
  EXPECT_EQ(msg,
            "dsv4cpu::indexer_metadata: seq_lens[0] = 1073741828: prefill chunk's cumulative "
            "compressed length exceeds the returned-vector limit of token_to_seq (expected sum of "
            "seq_len / 4 over prefill requests <= 67108864, 256 MiB of I32)");
}

// ---- outputs of one call aliasing each other ----

DSV4CPU_RUN_TEST(HostileAliasing, TopkRawAndPageIndicesShareMemory, "topk_transform_512") {
  const std::vector<float> scores(2 * 600, 1.0f);
  const std::vector<int32_t> lens = {600, 600}, table(2 * 600, 1);
  std::vector<int32_t> out = sentinel<int32_t>(2 * 512);
  const MutableTensorView both(out.data(), DType::I32, {2, 512});
  const std::string msg = testing::expect_error(
      "topk_transform_512", "ShapeError",
      [&](const Options& o) {
        topk_transform_512(TensorView(scores.data(), DType::F32, {2, 600}),
                           TensorView(lens.data(), DType::I32, {2}),
                           TensorView(table.data(), DType::I32, {2, 600}), 1, TopkMode::canonical,
                           both, both, o);
      },
      [&] { return testing::bytes_of(out); });
  EXPECT_EQ(msg,
            "dsv4cpu::topk_transform_512: page_indices: memory overlaps output raw_indices "
            "(expected outputs that do not overlap)");
}

DSV4CPU_RUN_TEST(HostileAliasing, QuantisedQueryAndWeightsShareMemory,
                 "fused_indexer_q_rope_quant") {
  const std::vector<float> q(2 * 128, 1.0f), w(2, 1.0f), table(4 * 64, 0.5f);
  const std::vector<int64_t> pos = {1, 3};
  std::vector<float> out = sentinel<float>(2 * 128);  // weights_out inside q_fp8's bytes
  const std::string msg = testing::expect_error(
      "fused_indexer_q_rope_quant", "ShapeError",
      [&](const Options& o) {
        fused_indexer_q_rope_quant(TensorView(q.data(), DType::F32, {2, 1, 128}),
                                   TensorView(w.data(), DType::F32, {2, 1}),
                                   TensorView(pos.data(), DType::I64, {2}),
                                   TensorView(table.data(), DType::F32, {4, 64}),
                                   MutableTensorView(out.data(), DType::F8_E4M3, {2, 1, 128}),
                                   MutableTensorView(out.data() + 16, DType::F32, {2, 1}), o);
      },
      [&] { return testing::bytes_of(out); });
  EXPECT_EQ(msg,
            "dsv4cpu::fused_indexer_q_rope_quant: weights_out: memory overlaps output q_fp8 "
            "(expected outputs that do not overlap)");
}

// ---- num_threads beyond the hardware ----

int process_threads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

DSV4CPU_RUN_TEST(HostileThreads, NumThreadsIsCappedAtTheHardware, "topk_transform_512") {
  const int hw = std::max(1, omp_get_num_procs());
  EXPECT_EQ(detail::max_threads(10000), hw);
  EXPECT_EQ(detail::max_threads(1), 1);
  EXPECT_LE(detail::max_threads(0), hw);
  // Parallel variants with num_threads = 10000: the process never holds more than the hardware's
  // worth of extra threads (OpenMP keeps its pool after the call).
  const std::vector<float> scores(8 * 4096, 1.0f);
  const std::vector<int32_t> lens(8, 4096);
  std::vector<int32_t> raw(8 * 512);
  const int before = process_threads();
  ASSERT_GT(before, 0);
  testing::for_each_run("topk_transform_512", [&](const testing::Run& run) {
    Options o = run.options();
    o.num_threads = 10000;
    topk_transform_512(TensorView(scores.data(), DType::F32, {8, 4096}),
                       TensorView(lens.data(), DType::I32, {8}), TensorView(), 1,
                       TopkMode::canonical, MutableTensorView(raw.data(), DType::I32, {8, 512}),
                       MutableTensorView(), o);
    EXPECT_LE(process_threads(), before + hw) << run.label();
  });
}

// ---- top-k indices beyond int32 ----

DSV4CPU_RUN_TEST(HostileIndices, IndexerTopkRowBeyondInt32, "indexer_topk") {
  // One token whose row has 2^31 + 1 keys (every block-table entry names the one page).
  const int64_t L = (int64_t{1} << 31) + 1, P = int64_t{1} << 16, MB = L / P + 1;
  const std::vector<uint8_t> q(128, 0x38), cache(static_cast<size_t>(P * 132), 0x38);
  const std::vector<float> w = {1.0f};
  const std::vector<int64_t> qsl = {0, 1}, seq = {4 * L}, table(static_cast<size_t>(MB), 0);
  std::vector<int32_t> out = sentinel<int32_t>(512);
  const std::string msg = testing::expect_error(
      "indexer_topk", "IndexError",
      [&](const Options& o) {
        indexer_topk(TensorView(q.data(), DType::F8_E4M3, {1, 1, 128}),
                     TensorView(w.data(), DType::F32, {1, 1}),
                     TensorView(qsl.data(), DType::I64, {2}),
                     TensorView(seq.data(), DType::I64, {1}),
                     TensorView(table.data(), DType::I64, {1, MB}),
                     TensorView(cache.data(), DType::U8, {1, P * 132}), P, TopkMode::canonical,
                     MutableTensorView(out.data(), DType::I32, {1, 512}), o);
      },
      [&] { return testing::bytes_of(out); });
  EXPECT_EQ(msg,
            "dsv4cpu::indexer_topk: seq_lens[0] = 8589934596: selects indices beyond the int32 "
            "range of topk_indices (expected seq_lens / 4 <= 2^31)");
}

}  // namespace
}  // namespace dsv4cpu
