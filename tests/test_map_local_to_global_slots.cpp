// compressor.md §4.1 and bad-input.md §4 for map_local_to_global_slots.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

DSV4CPU_RUN_TEST(MapLocalToGlobalSlots, SpecExample, "map_local_to_global_slots") {
  // P = 4, block_table[0] = [7, 3, 9], locals [-1, 0, 5, 11] -> [-1, 28, 13, 39].
  testing::for_each_run("map_local_to_global_slots", [&](const testing::Run& run) {
    std::vector<int64_t> local = {-1, 0, 5, 11};
    std::vector<int32_t> req = {0, 0, 0, 0};
    std::vector<int32_t> bt = {7, 3, 9};
    std::vector<int64_t> slots(4, 12345);
    map_local_to_global_slots(TensorView(local.data(), DType::I64, {4, 1}),
                              TensorView(req.data(), DType::I32, {4}),
                              TensorView(bt.data(), DType::I32, {1, 3}), 4,
                              MutableTensorView(slots.data(), DType::I64, {4, 1}), run.options());
    EXPECT_EQ(slots, (std::vector<int64_t>{-1, 28, 13, 39})) << run.label();
  });
}

TEST(MapLocalToGlobalSlots, NegativeReferencedBlockIsIndexErrorAndWritesNothing) {
  std::vector<int64_t> local(7 * 1, 0);
  local[6] = 200;
  std::vector<int32_t> req(7, 1);
  std::vector<int32_t> bt(2 * 4, 1);
  bt[1 * 4 + 3] = -1;
  std::vector<int64_t> slots(7, 777);
  try {
    map_local_to_global_slots(TensorView(local.data(), DType::I64, {7, 1}),
                              TensorView(req.data(), DType::I32, {7}),
                              TensorView(bt.data(), DType::I32, {2, 4}), 64,
                              MutableTensorView(slots.data(), DType::I64, {7, 1}));
    FAIL() << "expected IndexError";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(),
                 "dsv4cpu::map_local_to_global_slots: block_table[1, 3] = -1: negative block id "
                 "referenced by local_indices[6, 0] = 200 (expected >= 0)");
    EXPECT_EQ(e.argument(), "block_table");
    EXPECT_EQ(e.index(), (std::vector<int64_t>{1, 3}));
  }
  EXPECT_EQ(slots, std::vector<int64_t>(7, 777));
}

DSV4CPU_RUN_TEST(MapLocalToGlobalSlots, AnyNegativeLocalGivesMinusOneAndIndexTypesMix,
                 "map_local_to_global_slots") {
  // Window arithmetic produces locals below -1; every index input may be I32 or I64.
  testing::for_each_run("map_local_to_global_slots", [&](const testing::Run& run) {
    std::vector<int32_t> local = {-7, -1, 3, 4, 0, 9};
    std::vector<int64_t> req = {1, 1, 0};
    std::vector<int64_t> bt = {5, 6, 7, 40, 41, 42};  // [2, 3]
    std::vector<int64_t> slots(6, 12345);
    map_local_to_global_slots(TensorView(local.data(), DType::I32, {3, 2}),
                              TensorView(req.data(), DType::I64, {3}),
                              TensorView(bt.data(), DType::I64, {2, 3}), 4,
                              MutableTensorView(slots.data(), DType::I64, {3, 2}), run.options());
    // row 0 (req 1): -7, -1 -> -1; row 1 (req 1): 3 -> 40·4 + 3, 4 -> 41·4 + 0;
    // row 2 (req 0): 0 -> 5·4, 9 -> 7·4 + 1.
    EXPECT_EQ(slots, (std::vector<int64_t>{-1, -1, 163, 164, 20, 29})) << run.label();
  });
}

// Expects exception class `kind` and one message from every run, slots untouched; returns the
// message.
std::string expect_error(const std::vector<int64_t>& local, int64_t K,
                         const std::vector<int32_t>& req, const std::vector<int32_t>& bt,
                         int64_t MB, int64_t P, const char* kind) {
  const int64_t N = static_cast<int64_t>(local.size()) / K;
  std::vector<int64_t> slots(local.size(), 777);
  return testing::expect_error(
      "map_local_to_global_slots", kind,
      [&](const Options& o) {
        map_local_to_global_slots(
            TensorView(local.data(), DType::I64, {N, K}),
            TensorView(req.data(), DType::I32, {static_cast<int64_t>(req.size())}),
            TensorView(bt.data(), DType::I32, {static_cast<int64_t>(bt.size()) / MB, MB}), P,
            MutableTensorView(slots.data(), DType::I64, {N, K}), o);
      },
      [&] { return testing::bytes_of(slots); });
}

DSV4CPU_RUN_TEST(MapLocalToGlobalSlots, BadInput, "map_local_to_global_slots") {
  EXPECT_EQ(expect_error({0, 1}, 2, {0}, {3}, 1, 0, "ValueError"),
            "dsv4cpu::map_local_to_global_slots: block_size = 0: not a positive block size "
            "(expected block_size >= 1)");
  expect_error({0, 1}, 2, {0, 0}, {3}, 1, 4, "ShapeError");  // req_idx of another length
  EXPECT_EQ(expect_error({0, 1, 2, 3}, 2, {0, 2}, {3, 4}, 1, 4, "IndexError"),
            "dsv4cpu::map_local_to_global_slots: req_idx[1] = 2: request index out of range "
            "(expected 0 <= req_idx < 2)");
  EXPECT_EQ(expect_error({0, 11}, 2, {0}, {3, 4}, 2, 4, "IndexError"),
            "dsv4cpu::map_local_to_global_slots: local_indices[0, 1] = 11: references block-table "
            "column 2 beyond the table (expected column < 2)");
  expect_error({0, 5}, 2, {0}, {2147483647}, 1, int64_t{1} << 33, "IndexError");  // overflow
  // The output inside an input.
  testing::for_each_run("map_local_to_global_slots", [&](const testing::Run& run) {
    std::vector<int64_t> buf = {0, 1, 2, 3};
    std::vector<int32_t> req = {0, 0}, bt = {3};
    EXPECT_THROW(map_local_to_global_slots(TensorView(buf.data(), DType::I64, {2, 2}),
                                           TensorView(req.data(), DType::I32, {2}),
                                           TensorView(bt.data(), DType::I32, {1, 1}), 4,
                                           MutableTensorView(buf.data() + 2, DType::I64, {2, 1}),
                                           run.options()),
                 ShapeError);
  });
}

TEST(MapLocalToGlobalSlots, ZeroSizeIsNoOp) {
  std::vector<int32_t> bt = {1};
  map_local_to_global_slots(
      TensorView(nullptr, DType::I64, {0, 5}), TensorView(nullptr, DType::I32, {0}),
      TensorView(bt.data(), DType::I32, {1, 1}), 4, MutableTensorView(nullptr, DType::I64, {0, 5}));
  SUCCEED();
}

}  // namespace
}  // namespace dsv4cpu
