// The public API beside the ops: view construction and const-correctness, the cache-size helpers
// against the spec's tables, the version.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "dsv4cpu/dsv4cpu.hpp"

namespace dsv4cpu {
namespace {

// Inputs read through const pointers; a mutable view is a view (for the overlap checks and any
// input parameter) and writes through non-const ones.
static_assert(std::is_same_v<decltype(TensorView().ptr<float>()), const float*>);
static_assert(std::is_same_v<decltype(TensorView().data()), const void*>);
static_assert(std::is_same_v<decltype(MutableTensorView().ptr<float>()), float*>);
static_assert(std::is_convertible_v<MutableTensorView, TensorView>);
static_assert(!std::is_convertible_v<TensorView, MutableTensorView>);
static_assert(
    !std::is_constructible_v<MutableTensorView, const float*, DType, int, const int64_t*>);

std::string view_error(void (*make)()) {
  try {
    make();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "no exception";
}

TEST(TensorView, ConstructionErrorsSayWhatWasExpected) {
  static float buf[8];
  EXPECT_EQ(view_error([] {
              const int64_t shape[5] = {1, 1, 1, 1, 1};
              TensorView(buf, DType::F32, 5, shape);
            }),
            "dsv4cpu::TensorView: view: rank 5 (expected 0 <= rank <= 4)");
  EXPECT_EQ(view_error([] { TensorView(buf, DType::F32, {2, -3}); }),
            "dsv4cpu::TensorView: view: shape[1] = -3 (expected extents >= 0)");
  EXPECT_EQ(view_error([] { MutableTensorView(buf, DType::F32, {2, 2}, {-1, 1}); }),
            "dsv4cpu::TensorView: view: strides[0] = -1 (expected strides >= 0)");
  EXPECT_EQ(view_error([] { TensorView(nullptr, DType::I64, {2, 3}); }),
            "dsv4cpu::TensorView: view: null data for 6 elements (expected a data pointer, or "
            "an extent of 0)");
  EXPECT_EQ(view_error([] { TensorView(buf, DType::F32, {2, 2}, {2}); }),
            "dsv4cpu::TensorView: view: 2 extents and 1 strides (expected one stride per extent)");
  EXPECT_NO_THROW(TensorView(nullptr, DType::I64, {0, 3}));
}

TEST(TensorView, MutableViewIsTheSameView) {
  std::vector<int32_t> v(12);
  const MutableTensorView m(v.data(), DType::I32, {3, 4}, {4, 1});
  const TensorView& t = m;
  EXPECT_EQ(t.data(), static_cast<const void*>(v.data()));
  EXPECT_EQ(m.ptr<int32_t>(), v.data());
  EXPECT_EQ(t.shape_string(), "[3, 4]");
  EXPECT_TRUE(t.overlaps(TensorView(v.data() + 11, DType::I32, {1})));
  EXPECT_FALSE(MutableTensorView().present());
}

// README "Per-kind derived sizes" and compressor.md §2, §3.1, §6.3, §7.
TEST(CacheSizes, MatchTheSpecTables) {
  // Packed pages: C4A main (P = 64) 37376 B, C128A main (P = 2) 1168 B, indexer (P = 64) 8448 B.
  EXPECT_EQ(fp8_ds_mla_page_bytes(compressed_block_size(4)), 37376);
  EXPECT_EQ(fp8_ds_mla_page_bytes(compressed_block_size(128)), 1168);
  EXPECT_EQ(indexer_k_page_bytes(compressed_block_size(4)), 8448);
  EXPECT_EQ(fp8_ds_mla_page_bytes(kSwaBlockSize), 37376);  // SWA: 584 B per token, 64 per page
  // Windows, state widths, state rows and pages (C4A main, C128A main, C4A indexer).
  EXPECT_EQ(compressor_window(4), 8);
  EXPECT_EQ(compressor_window(128), 128);
  EXPECT_EQ(compressor_window(4, false), 4);
  EXPECT_EQ(compressor_state_width(4, kMainHeadDim), 1024);
  EXPECT_EQ(compressor_state_width(128, kMainHeadDim), 512);
  EXPECT_EQ(compressor_state_width(4, kIndexerHeadDim), 256);
  EXPECT_EQ(compressor_state_width(kMainHeadDim, false), 512);
  EXPECT_EQ(compressor_state_row_floats(4, kMainHeadDim), 2048);
  EXPECT_EQ(compressor_state_row_floats(128, kMainHeadDim), 1024);
  EXPECT_EQ(compressor_state_row_floats(4, kIndexerHeadDim), 512);
  EXPECT_EQ(compressor_state_block_size(4), 4);
  EXPECT_EQ(compressor_state_block_size(128), 8);
  // A C4A state page of 4 rows is 32768 B (README, page strides).
  EXPECT_EQ(compressor_state_page_floats(4, 4, kMainHeadDim) * 4, 32768);
  EXPECT_EQ(compressed_block_size(4), 64);
  EXPECT_EQ(compressed_block_size(128), 2);
  EXPECT_EQ(kIndexerTopk, 512);
  EXPECT_EQ(kSlidingWindow, 128);
}

// Options::num_threads is the num_threads clause of the optimized variants' parallel regions: no
// call changes OpenMP's global settings, whatever thread count it asks for.
TEST(Threads, NumThreadsChangesNoGlobalOpenMpSetting) {
  const int max_threads = omp_get_max_threads(), dynamic = omp_get_dynamic(),
            levels = omp_get_max_active_levels();
  const int64_t N = 1 << 14, B = 8, S = 2048;
  std::vector<int64_t> local(N), slots(N);
  for (int64_t n = 0; n < N; ++n) local[static_cast<size_t>(n)] = n % 256;
  const std::vector<int32_t> req(N, 0), table = {3, 1, 4, 1};
  std::vector<float> scores(B * S);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i % 97);
  const std::vector<int32_t> lens(B, static_cast<int32_t>(S));
  std::vector<int32_t> raw(B * kIndexerTopk);
  for (const int threads : {1, 3, max_threads + 1}) {
    Options o;
    o.impl = Impl::optimized;
    o.num_threads = threads;
    map_local_to_global_slots(TensorView(local.data(), DType::I64, {N, 1}),
                              TensorView(req.data(), DType::I32, {N}),
                              TensorView(table.data(), DType::I32, {1, 4}), 64,
                              MutableTensorView(slots.data(), DType::I64, {N, 1}), o);
    topk_transform_512(
        TensorView(scores.data(), DType::F32, {B, S}), TensorView(lens.data(), DType::I32, {B}),
        TensorView(), 1, TopkMode::canonical,
        MutableTensorView(raw.data(), DType::I32, {B, kIndexerTopk}), MutableTensorView(), o);
    EXPECT_EQ(omp_get_max_threads(), max_threads) << threads;
    EXPECT_EQ(omp_get_dynamic(), dynamic) << threads;
    EXPECT_EQ(omp_get_max_active_levels(), levels) << threads;
  }
}

// The library reports the version it was compiled as, which is the headers' here.
TEST(Version, LibraryMatchesHeaders) {
  EXPECT_STREQ(version(), DSV4CPU_VERSION_STRING);
  EXPECT_EQ(std::string(DSV4CPU_VERSION_STRING),
            std::to_string(DSV4CPU_VERSION_MAJOR) + "." + std::to_string(DSV4CPU_VERSION_MINOR) +
                "." + std::to_string(DSV4CPU_VERSION_PATCH));
}

}  // namespace
}  // namespace dsv4cpu
