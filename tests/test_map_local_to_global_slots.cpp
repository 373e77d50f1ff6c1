// compressor.md §4.1 and bad-input.md §4 for map_local_to_global_slots.
#include <gtest/gtest.h>

#include <vector>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "test_util.hpp"

namespace dsv4cpu {
namespace {

TEST(MapLocalToGlobalSlots, SpecExample) {
  // P = 4, block_table[0] = [7, 3, 9], locals [-1, 0, 5, 11] -> [-1, 28, 13, 39].
  for (const auto& variant : test::variants_of("map_local_to_global_slots")) {
    std::vector<int64_t> local = {-1, 0, 5, 11};
    std::vector<int32_t> req = {0, 0, 0, 0};
    std::vector<int32_t> bt = {7, 3, 9};
    std::vector<int64_t> slots(4, 12345);
    map_local_to_global_slots(TensorView(local.data(), DType::I64, {4, 1}),
                              TensorView(req.data(), DType::I32, {4}),
                              TensorView(bt.data(), DType::I32, {1, 3}), 4,
                              TensorView(slots.data(), DType::I64, {4, 1}),
                              test::with_variant(variant));
    EXPECT_EQ(slots, (std::vector<int64_t>{-1, 28, 13, 39})) << variant;
  }
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
                              TensorView(slots.data(), DType::I64, {7, 1}));
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

TEST(MapLocalToGlobalSlots, ZeroSizeIsNoOp) {
  std::vector<int32_t> bt = {1};
  map_local_to_global_slots(TensorView(nullptr, DType::I64, {0, 5}),
                            TensorView(nullptr, DType::I32, {0}),
                            TensorView(bt.data(), DType::I32, {1, 1}), 4,
                            TensorView(nullptr, DType::I64, {0, 5}));
  SUCCEED();
}

}  // namespace
}  // namespace dsv4cpu
