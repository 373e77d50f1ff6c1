// compressor_window_slots (compressor.md §4.2, §5; bad-input.md §4): the §5 table by hand, a
// brute-force oracle, and each bad-input rule with an untouched output.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "testing/gtest.hpp"

namespace dsv4cpu {
namespace {

struct WindowCase {
  std::vector<int64_t> positions;
  std::vector<int64_t> token_to_req;
  std::vector<int64_t> block_table;  // [R, MB]
  int64_t R = 1, MB = 0, block_size = 4, ratio = 4;
  bool overlap = true;
  DType index_type = DType::I64;

  int64_t W() const { return (overlap ? 2 : 1) * ratio; }
  int64_t N() const { return static_cast<int64_t>(positions.size()); }

  // Runs into `out` (resized to N·W and prefilled with 777 when empty).
  void run(std::vector<int64_t>& out, const Options& o = {}) const {
    if (out.empty()) out.assign(static_cast<size_t>(N() * W()), 777);
    std::vector<int32_t> p32(positions.begin(), positions.end()),
        r32(token_to_req.begin(), token_to_req.end()), b32(block_table.begin(), block_table.end());
    const bool i32 = index_type == DType::I32;
    compressor_window_slots(
        TensorView(i32 ? static_cast<const void*>(p32.data()) : positions.data(), index_type,
                   {N()}),
        TensorView(i32 ? static_cast<const void*>(r32.data()) : token_to_req.data(), index_type,
                   {N()}),
        TensorView(i32 ? static_cast<const void*>(b32.data()) : block_table.data(), index_type,
                   {R, MB}),
        block_size, ratio, overlap, MutableTensorView(out.data(), DType::I64, {N(), W()}), o);
  }
};

// compressor.md §4.2 written out directly: l = p − W + 1 + w; −1 for l < 0.
std::vector<int64_t> oracle(const WindowCase& c) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < c.N(); ++t)
    for (int64_t w = 0; w < c.W(); ++w) {
      const int64_t l = c.positions[static_cast<size_t>(t)] - c.W() + 1 + w;
      const int64_t req = c.token_to_req[static_cast<size_t>(t)];
      out.push_back(l < 0 ? -1
                          : c.block_table[static_cast<size_t>(req * c.MB + l / c.block_size)] *
                                    c.block_size +
                                l % c.block_size);
    }
  return out;
}

DSV4CPU_RUN_TEST(CompressorWindowSlots, SpecTable5, "compressor_window_slots") {
  // C4A main, state block table [7, 3, 9], sbs = 4.
  testing::for_each_run("compressor_window_slots", [&](const testing::Run& run) {
    for (DType type : {DType::I64, DType::I32}) {
      WindowCase c;
      c.positions = std::vector<int64_t>{3, 5, 11};
      c.token_to_req = std::vector<int64_t>{0, 0, 0};
      c.block_table = std::vector<int64_t>{7, 3, 9};
      c.MB = 3;
      c.index_type = type;
      std::vector<int64_t> out;
      c.run(out, run.options());
      EXPECT_EQ(out, (std::vector<int64_t>{-1, -1, -1, -1, 28, 29, 30, 31,  //
                                           -1, -1, 28, 29, 30, 31, 12, 13,  //
                                           12, 13, 14, 15, 36, 37, 38, 39}))
          << run.label();
    }
  });
}

DSV4CPU_RUN_TEST(CompressorWindowSlots, C128aBoundaryWindow, "compressor_window_slots") {
  // p = 255, ratio 128 without overlap, sbs 8: the 128 columns are tokens 128..255, i.e. block
  // table columns 16..31, rows 0..7 each.
  testing::for_each_run("compressor_window_slots", [&](const testing::Run& run) {
    WindowCase c;
    c.positions = std::vector<int64_t>{255};
    c.token_to_req = std::vector<int64_t>{0};
    c.MB = 32;
    for (int64_t k = 0; k < 32; ++k) c.block_table.push_back(100 + 3 * k);
    c.block_size = 8;
    c.ratio = 128;
    c.overlap = false;
    std::vector<int64_t> out;
    c.run(out, run.options());
    ASSERT_EQ(out.size(), 128u);
    for (int64_t w = 0; w < 128; ++w)
      EXPECT_EQ(out[static_cast<size_t>(w)], (100 + 3 * (16 + w / 8)) * 8 + w % 8) << run.label();
  });
}

DSV4CPU_RUN_TEST(CompressorWindowSlots, MatchesBruteForce, "compressor_window_slots") {
  std::mt19937 gen(5);
  testing::for_each_run("compressor_window_slots", [&](const testing::Run& run) {
    for (int64_t ratio : {4, 128})
      for (bool overlap : {false, true})
        for (int64_t bs : {1, 4, 8}) {
          WindowCase c;
          c.ratio = ratio;
          c.overlap = overlap;
          c.block_size = bs;
          c.R = 3;
          c.MB = 700 / bs + 1;
          for (int64_t i = 0; i < c.R * c.MB; ++i) c.block_table.push_back(gen() % 100000);
          for (int t = 0; t < 40; ++t) {
            c.positions.push_back(t < 10 ? t : static_cast<int64_t>(gen() % 700));
            c.token_to_req.push_back(gen() % 3);
          }
          std::vector<int64_t> out;
          c.run(out, run.options());
          EXPECT_EQ(out, oracle(c)) << run.label() << " r=" << ratio << " overlap=" << overlap;
        }
  });
}

DSV4CPU_RUN_TEST(CompressorWindowSlots, ZeroSizeIsNoOp, "compressor_window_slots") {
  testing::for_each_run("compressor_window_slots", [&](const testing::Run& run) {
    WindowCase c;
    c.MB = 0;
    c.R = 0;
    std::vector<int64_t> out;
    EXPECT_NO_THROW(c.run(out, run.options())) << run.label();
  });
}

// Expects exception class `kind` and one message from every run, the output untouched; returns
// the message.
std::string expect_error(const WindowCase& c, const char* kind) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(c.N() * c.W(), 1)), 777);
  return testing::expect_error(
      "compressor_window_slots", kind, [&](const Options& o) { c.run(out, o); },
      [&] { return testing::bytes_of(out); });
}

WindowCase small_case() {
  WindowCase c;
  c.positions = std::vector<int64_t>{3, 5, 11};
  c.token_to_req = std::vector<int64_t>{0, 0, 0};
  c.block_table = std::vector<int64_t>{7, 3, 9};
  c.MB = 3;
  return c;
}

DSV4CPU_RUN_TEST(CompressorWindowSlotsBadInput, Scalars, "compressor_window_slots") {
  WindowCase c = small_case();
  c.block_size = 0;
  EXPECT_EQ(expect_error(c, "ValueError"),
            "dsv4cpu::compressor_window_slots: block_size = 0: not a positive block size "
            "(expected block_size >= 1)");
  c = small_case();
  c.ratio = 16;
  expect_error(c, "ValueError");
}

DSV4CPU_RUN_TEST(CompressorWindowSlotsBadInput, Shapes, "compressor_window_slots") {
  WindowCase c = small_case();
  std::vector<int64_t> out(3 * 8, 777);
  const TensorView pos(c.positions.data(), DType::I64, {3}), req(c.token_to_req.data(), DType::I64, {3}),
      bt(c.block_table.data(), DType::I64, {1, 3});
  testing::for_each_run("compressor_window_slots", [&](const testing::Run& run) {
    const Options o = run.options();
    // W = 8 expected; an I32 output; token_to_req of another length; positions inside the output.
    EXPECT_THROW(compressor_window_slots(pos, req, bt, 4, 4, true,
                                         MutableTensorView(out.data(), DType::I64, {3, 4}), o),
                 ShapeError);
    EXPECT_THROW(compressor_window_slots(pos, req, bt, 4, 4, true,
                                         MutableTensorView(out.data(), DType::I32, {3, 8}), o),
                 ShapeError);
    EXPECT_THROW(
        compressor_window_slots(pos, TensorView(c.token_to_req.data(), DType::I64, {2}), bt, 4, 4,
                                true, MutableTensorView(out.data(), DType::I64, {3, 8}), o),
        ShapeError);
    EXPECT_THROW(
        compressor_window_slots(TensorView(out.data() + 4, DType::I64, {3}), req, bt, 4, 4, true,
                                MutableTensorView(out.data(), DType::I64, {3, 8}), o),
        ShapeError);
    EXPECT_EQ(out, std::vector<int64_t>(24, 777)) << run.label();
  });
}

DSV4CPU_RUN_TEST(CompressorWindowSlotsBadInput, IndexElements, "compressor_window_slots") {
  WindowCase c = small_case();
  c.positions[1] = -1;
  expect_error(c, "IndexError");

  c = small_case();
  c.token_to_req[2] = 1;
  EXPECT_EQ(expect_error(c, "IndexError"),
            "dsv4cpu::compressor_window_slots: token_to_req[2] = 1: request index out of range "
            "(expected 0 <= token_to_req < 1)");

  c = small_case();
  c.positions[2] = 12;  // local 12 needs block-table column 3 of 3
  EXPECT_EQ(expect_error(c, "IndexError"),
            "dsv4cpu::compressor_window_slots: positions[2] = 12: references block-table column 3 "
            "beyond the table (window column 7, local index 12) (expected column < 3)");

  c = small_case();
  c.block_table[1] = -1;  // referenced by p = 5 (locals 4, 5) and p = 11 (locals 4..7)
  EXPECT_EQ(expect_error(c, "IndexError"),
            "dsv4cpu::compressor_window_slots: block_table[0, 1] = -1: negative block id "
            "referenced by positions[1] = 5 (window column 6, local index 4) (expected >= 0)");

  c = small_case();
  c.block_table[0] = int64_t{1} << 62;  // slot = entry·4 + 3 overflows int64
  expect_error(c, "IndexError");
}

DSV4CPU_RUN_TEST(CompressorWindowSlotsBadInput, UnreferencedEntriesAreNotRead,
                 "compressor_window_slots") {
  // p = 3 with W = 8 reads locals 0..3 only: columns 1 and 2 of the table may hold anything.
  testing::for_each_run("compressor_window_slots", [&](const testing::Run& run) {
    WindowCase c;
    c.positions = std::vector<int64_t>{3};
    c.token_to_req = std::vector<int64_t>{0};
    c.block_table = std::vector<int64_t>{7, -1, -5};
    c.MB = 3;
    std::vector<int64_t> out;
    c.run(out, run.options());
    EXPECT_EQ(out, (std::vector<int64_t>{-1, -1, -1, -1, 28, 29, 30, 31})) << run.label();
  });
}

}  // namespace
}  // namespace dsv4cpu
