// Overlap of arrays (bad-input.md §1.4 (c), §3 "an output array's address range overlaps an
// input's"; include/dsv4cpu/options.hpp "Aliasing"): for every op of the registry, every pair of
// a written array (an output or an in-place buffer) with another array of the call, placed in one
// buffer at every relative position. Apart or adjacent, the call passes, writes what it writes
// with the arrays apart and leaves the input untouched; sharing a byte, it raises the ShapeError
// of core/check.cpp naming both arrays, with every buffer unchanged.
//
// The arguments are those of the embedded fixtures (fixtures/), passed by the verifier's op
// adapters (verify/ops.cpp) with the two arrays moved by a relocation of the Case.
//
// Pairs that may alias, and so are not placed: two inputs (spec README, "Arrays": only outputs
// may not overlap an input; options.hpp: "Inputs may overlap each other"; one array passed as two
// inputs: Overlap.InputsMayBeOneArray), and the in-place buffer with itself (bad-input.md §3,
// "other than the in-place buffer itself").
//
// The rule is on byte extents, [lowest byte, past the highest byte) of each view ("address
// range", bad-input.md §3): two strided views whose rows interleave overlap even when no element
// is shared (Overlap.InterleavedRows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/metadata.hpp"
#include "dsv4cpu/options.hpp"
#include "testing/gtest.hpp"
#include "verify/fixture.hpp"
#include "verify/ops.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu {
namespace {

using ArgRole = verify::Case::Role;

// ---- placements ----

// Where an array lies in the shared buffer: its first byte and its dim-0 stride in bytes (0: the
// view is C-contiguous).
struct Spot {
  size_t lo = 0;
  size_t row_stride = 0;
};
struct Spots {
  Spot written, other;
};

// The bytes of the two arrays: w (element size ew) written by the op, o the other one.
struct Sizes {
  size_t w, ew, o;
};

constexpr size_t kGap = 64;
size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
// A shift of about n / 2 bytes that keeps the written array on its element size when it can.
size_t half(size_t n, size_t ew) { return n / 2 / ew * ew > 0 ? n / 2 / ew * ew : n / 2; }

// The other array's first byte: aligned, with room for the written array before it; or, for the
// placements at its end, such that its end is aligned. The written array then lies on its element
// size in every placement that shares no byte (and in most of the others).
size_t start(const Sizes& s) { return round_up(s.w, kGap) + 2 * kGap; }
size_t end_aligned_start(const Sizes& s) { return start(s) + round_up(s.o, kGap) - s.o; }

// A relative placement of the written array and the other; nullopt when their sizes exclude it.
struct Placement {
  const char* name;
  bool overlaps;
  std::optional<Spots> (*place)(const Sizes& s);
};

std::optional<Spots> at(size_t written, size_t other) {
  return Spots{{written, 0}, {other, 0}};
}

const Placement kPlacements[] = {
    {"disjoint before", false,
     [](const Sizes& s) { return at(start(s) - kGap - s.w, start(s)); }},
    {"adjacent before", false, [](const Sizes& s) { return at(start(s) - s.w, start(s)); }},
    {"adjacent after", false,
     [](const Sizes& s) {
       const size_t o = end_aligned_start(s);
       return at(o + s.o, o);
     }},
    {"disjoint after", false,
     [](const Sizes& s) {
       const size_t o = end_aligned_start(s);
       return at(o + s.o + kGap, o);
     }},
    {"one byte at the start", true,
     [](const Sizes& s) { return at(start(s) + 1 - s.w, start(s)); }},
    {"one byte at the end", true,
     [](const Sizes& s) {
       const size_t o = end_aligned_start(s);
       return at(o + s.o - 1, o);
     }},
    {"before and into", true,
     [](const Sizes& s) -> std::optional<Spots> {
       const size_t k = half(std::min(s.w, s.o), s.ew);  // bytes shared
       if (k == 0 || k >= s.w || k >= s.o) return std::nullopt;
       return at(start(s) + k - s.w, start(s));
     }},
    {"after and into", true,
     [](const Sizes& s) -> std::optional<Spots> {
       const size_t k = half(std::min(s.w, s.o), s.ew), o = end_aligned_start(s);
       if (k == 0 || k >= s.w || k >= s.o) return std::nullopt;
       return at(o + s.o - k, o);
     }},
    {"inside", true,
     [](const Sizes& s) -> std::optional<Spots> {
       if (s.o < s.w + 2) return std::nullopt;
       return at(start(s) + half(s.o - s.w, s.ew), start(s));
     }},
    {"containing", true,
     [](const Sizes& s) -> std::optional<Spots> {
       if (s.w < s.o + 2) return std::nullopt;
       return at(start(s) - half(s.w - s.o, s.ew), start(s));
     }},
    {"same first byte", true, [](const Sizes& s) { return at(start(s), start(s)); }},
    {"same last byte", true,
     [](const Sizes& s) {
       const size_t o = end_aligned_start(s);
       return at(o + s.o - s.w, o);
     }},
};

// ---- the calls of the embedded fixtures ----

struct Array {
  std::string name;
  ArgRole role;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> before;  // its content handed to the op
  bool written() const { return role != ArgRole::input; }
};

// One passing fixture of an op and the arrays of its call, in the order the adapter passes them.
struct Sample {
  std::string fixture;
  const verify::SafetensorsFile* file;
  const verify::OpAdapter* adapter;
  std::vector<Array> arrays;
  size_t bytes = 0;  // of every array
  const Array* find(const std::string& name) const {
    for (const Array& a : arrays)
      if (a.name == name) return &a;
    return nullptr;
  }
};

// What a call raised, if anything.
struct Outcome {
  std::optional<std::string> error;  // "<kind>: <what>"
  std::string kind, argument, message;
};

std::vector<uint8_t> content(const TensorView& v) {
  const auto* p = static_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.numel() * static_cast<int64_t>(dtype_size(v.dtype())));
}

// Calls the fixture's op with `o`, the views relocated by `relocation` (none: the case's own).
Outcome call(verify::Case& c, const Sample& s, const Options& o,
             const verify::Case::Relocation& relocation) {
  if (relocation) c.relocate(relocation);
  Options opts = o;
  opts.check_finite = c.boolean("check_finite", true);
  Outcome out;
  try {
    s.adapter->run(c, opts);
  } catch (const Error& e) {
    out.error = std::string(e.kind()) + ": " + e.what();
    out.message = e.what();
    out.argument = e.argument();
    out.kind = e.kind();
  }
  return out;
}

// Every embedded fixture, by path, read once.
const std::map<std::string, verify::SafetensorsFile>& fixtures() {
  static const auto all = [] {
    std::map<std::string, verify::SafetensorsFile> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(DSV4CPU_FIXTURES_DIR))
      if (e.path().extension() == ".safetensors")
        files.emplace(e.path().string(), verify::read_safetensors(e.path().string()));
    return files;
  }();
  return all;
}

// The fixtures of `op` that pass on the reference, with the arrays of their calls. A state cache
// given as 2-D pages (`state_block_size`, fixtures.md) is left out: the adapter passes a 3-D view
// of it that stops short of the last page's padding, so the array placed is not the one the op
// sees.
std::vector<Sample> samples(const std::string& op) {
  std::vector<Sample> out;
  const verify::OpAdapter* adapter = verify::find_op_adapter(op);
  if (adapter == nullptr) return out;
  for (const auto& [path, file] : fixtures()) {
    const auto name = file.metadata.find("op");
    if (name == file.metadata.end() || name->second != op ||
        file.metadata.count("expected_error") || file.metadata.count("state_block_size"))
      continue;
    Sample s{path, &file, adapter, {}, 0};
    verify::Case c(file);
    Options ref;
    ref.impl = Impl::reference;
    const Outcome o = call(c, s, ref, [&](ArgRole role, const std::string& n,
                                          const MutableTensorView& v) {
      if (v.present()) {
        s.arrays.push_back(Array{n, role, v.dtype(), {}, content(v)});
        for (int d = 0; d < v.rank(); ++d) s.arrays.back().shape.push_back(v.size(d));
        s.bytes += s.arrays.back().before.size();
      }
      return v;
    });
    if (!o.error) out.push_back(std::move(s));
  }
  return out;
}

// A pair to place: a written array and another array of the same call, both holding bytes (an
// empty view addresses nothing and overlaps nothing), from the smallest fixture that has both.
struct Pair {
  const Sample* sample;
  const Array* written;
  const Array* other;
  std::string label() const {
    return written->name + " / " + other->name + " (" +
           std::filesystem::path(sample->fixture).stem().string() + ")";
  }
};

std::vector<Pair> pairs(const std::vector<Sample>& samples) {
  std::map<std::pair<std::string, std::string>, Pair> best;
  for (const Sample& s : samples)
    for (const Array& w : s.arrays)
      for (const Array& x : s.arrays) {
        if (!w.written() || &w == &x || w.before.empty() || x.before.empty()) continue;
        // Two written arrays once, in the order of the call.
        if (x.written() && &x < &w) continue;
        const auto key = std::make_pair(w.name, x.name);
        const auto it = best.find(key);
        if (it == best.end() || s.bytes < it->second.sample->bytes)
          best.insert_or_assign(key, Pair{&s, &w, &x});
      }
  std::vector<Pair> out;
  for (const auto& entry : best) out.push_back(entry.second);
  return out;
}

// The view of `a` at `p` in `buffer`; row_stride (bytes) replaces the dim-0 stride when set.
MutableTensorView view_at(uint8_t* buffer, const Array& a, const Spot& p) {
  std::vector<int64_t> strides(a.shape.size());
  int64_t acc = 1;
  for (size_t d = a.shape.size(); d-- > 0;) {
    strides[d] = acc;
    acc *= a.shape[d];
  }
  if (p.row_stride != 0) strides[0] = static_cast<int64_t>(p.row_stride / dtype_size(a.dtype));
  return MutableTensorView(buffer + p.lo, a.dtype, static_cast<int>(a.shape.size()), a.shape.data(),
                           strides.data());
}

// The bytes of `a` at `p`: `count` runs of `bytes`, `stride` apart (its dim-0 slices when strided).
struct Runs {
  size_t count, bytes, stride;
};
Runs runs_of(const Array& a, const Spot& p) {
  if (p.row_stride == 0) return {1, a.before.size(), a.before.size()};
  const auto rows = static_cast<size_t>(a.shape[0]);
  return {rows, a.before.size() / rows, p.row_stride};
}

// `a`'s elements at `p`, one run after the other.
std::vector<uint8_t> read_at(const std::vector<uint8_t>& buffer, const Array& a, const Spot& p) {
  const Runs r = runs_of(a, p);
  std::vector<uint8_t> out;
  for (size_t i = 0; i < r.count; ++i) {
    const auto first = buffer.begin() + static_cast<ptrdiff_t>(p.lo + i * r.stride);
    out.insert(out.end(), first, first + static_cast<ptrdiff_t>(r.bytes));
  }
  return out;
}

void write_at(std::vector<uint8_t>& buffer, const Array& a, const Spot& p) {
  const Runs r = runs_of(a, p);
  for (size_t i = 0; i < r.count; ++i)
    std::memcpy(buffer.data() + p.lo + i * r.stride, a.before.data() + i * r.bytes, r.bytes);
}

// The bytes from `a`'s first to past its last at `p`.
size_t extent(const Array& a, const Spot& p) {
  const Runs r = runs_of(a, p);
  return (r.count - 1) * r.stride + r.bytes;
}

// The argument named and the message (bad-input.md §2) of the pair's error: core/check.cpp's
// check_no_overlap, or check_outputs_disjoint, named at the later of the two outputs (either may
// come first).
std::vector<std::pair<std::string, std::string>> expected_errors(const std::string& op,
                                                                 const Array& w, const Array& x) {
  const std::string head = "dsv4cpu::" + op + ": ";
  if (!x.written())
    return {{w.name, head + w.name + ": memory overlaps input " + x.name +
                         " (expected an output that does not overlap any input)"}};
  const auto error = [&](const Array& a, const Array& b) {
    return std::pair{b.name, head + b.name + ": memory overlaps output " + a.name +
                                 " (expected outputs that do not overlap)"};
  };
  return {error(w, x), error(x, w)};
}

// The written bytes of every buffer after a passing call without relocation.
std::map<std::string, std::vector<uint8_t>> unplaced_results(const Sample& s, const Options& o) {
  verify::Case c(*s.file);
  const Outcome out = call(c, s, o, {});
  EXPECT_FALSE(out.error) << s.fixture << ": " << *out.error;
  std::map<std::string, std::vector<uint8_t>> bytes;
  for (const auto& [name, b] : c.written()) bytes[name].assign(b.data(), b.data() + b.size());
  return bytes;
}

// Places the pair at `layout` and calls the op; checks the outcome the placement demands.
void check_placement(const std::string& op, const testing::Run& run, const Pair& pair,
                     const char* placement, bool overlaps, const Spots& layout,
                     const std::map<std::string, std::vector<uint8_t>>& unplaced) {
  const Array& w = *pair.written;
  const Array& x = *pair.other;
  const std::string where = run.label() + ": " + pair.label() + ", " + placement;
  const size_t end = std::max(layout.written.lo + extent(w, layout.written),
                              layout.other.lo + extent(x, layout.other));
  std::vector<uint8_t> buffer(end + kGap, 0x5A);
  // The other array last: an input keeps its content where the two share bytes.
  write_at(buffer, w, layout.written);
  write_at(buffer, x, layout.other);
  const std::vector<uint8_t> before = buffer;
  verify::Case c(*pair.sample->file);
  const Outcome out =
      call(c, *pair.sample, run.options(),
           [&](ArgRole, const std::string& name, const MutableTensorView& v) {
             if (name == w.name) return view_at(buffer.data(), w, layout.written);
             if (name == x.name) return view_at(buffer.data(), x, layout.other);
             return v;
           });
  if (overlaps) {
    ASSERT_TRUE(out.error) << where << ": no error";
    EXPECT_EQ(out.kind, "ShapeError") << where << ": " << *out.error;
    const auto want = expected_errors(op, w, x);
    EXPECT_NE(std::find(want.begin(), want.end(), std::pair{out.argument, out.message}),
              want.end())
        << where << ": " << out.argument << ", " << out.message << "\nexpected\n  "
        << want.front().first << ", " << want.front().second;
    EXPECT_TRUE(buffer == before) << where << ": the shared buffer changed";
    const testing::Verdict v = c.check_untouched();
    EXPECT_TRUE(v.pass) << where << ": " << v.detail;
    return;
  }
  ASSERT_FALSE(out.error) << where << ": " << *out.error;
  for (const auto& [a, spot] : {std::pair{&w, layout.written}, std::pair{&x, layout.other}}) {
    const std::vector<uint8_t> got = read_at(buffer, *a, spot);
    if (a->written())
      EXPECT_TRUE(got == unplaced.at(a->name))
          << where << ": " << a->name << " differs from the call with the arrays apart";
    else
      EXPECT_TRUE(got == a->before) << where << ": input " << a->name << " was written";
  }
}

// Ops whose calls have no pair to place: no array argument, or no array the op writes.
const std::set<std::string> kNoPairs = {
    "make_cos_sin_cache",            // writes out, reads no array
    "split_decodes_and_prefills",    // returns values, writes no array
    "split_indexer_prefill_chunks",  // returns values, writes no array
    "build_tile_scheduler",          // no array argument (a layer kind in, a name out)
};

// Every pair of the op's arrays at every placement, on one run of the op: registered once per op
// and run (OverlapEveryOp.EveryPairEveryPlacement/<op>/<variant>/<target>/<threads>).
void every_pair_every_placement(const std::string& op) {
  const std::vector<Sample> all = samples(op);
  const std::vector<Pair> todo = pairs(all);
  ASSERT_FALSE(all.empty()) << op << ": no adapter, or no embedded fixture that passes";
  ASSERT_FALSE(todo.empty()) << op << ": no written array beside another array";
  std::set<std::string> placed;
  testing::for_each_run(op, [&](const testing::Run& run) {
    std::map<const Sample*, std::map<std::string, std::vector<uint8_t>>> unplaced;
    for (const Pair& pair : todo) {
      if (!unplaced.count(pair.sample))
        unplaced[pair.sample] = unplaced_results(*pair.sample, run.options());
      const Sizes sizes{pair.written->before.size(), dtype_size(pair.written->dtype),
                        pair.other->before.size()};
      for (const Placement& p : kPlacements)
        if (const std::optional<Spots> layout = p.place(sizes)) {
          check_placement(op, run, pair, p.name, p.overlaps, *layout, unplaced[pair.sample]);
          placed.insert(p.name);
        }
    }
  });
  // Every placement ran on some pair (inside and containing exclude each other on one pair).
  for (const Placement& p : kPlacements)
    EXPECT_TRUE(placed.count(p.name) || std::string(p.name) == "inside" ||
                std::string(p.name) == "containing")
        << op << ": placement " << p.name << " never ran";
  EXPECT_TRUE(placed.count("inside") || placed.count("containing")) << op;
}

[[maybe_unused]] const bool kEveryOpRegistered = [] {
  for (const std::string& op : testing::op_names())
    if (!kNoPairs.count(op))
      testing::register_run_tests("OverlapEveryOp", "EveryPairEveryPlacement", __FILE__, __LINE__,
                                  [op] { every_pair_every_placement(op); }, op);
  return true;
}();

TEST(OverlapEveryOp, OpsWithoutPairsHaveNone) {
  for (const std::string& op : kNoPairs)
    EXPECT_TRUE(pairs(samples(op)).empty())
        << op << " writes an array beside another: it has pairs to place";
}

// Strided views whose rows interleave: their byte extents overlap though no element is shared,
// which is an overlap (bad-input.md §3 speaks of address ranges). Each pair: the rows of the
// written array and of the other alternate with one dim-0 stride; the same views apart pass.
struct Interleaved {
  const char* op;
  const char* written;
  const char* other;
};
const Interleaved kInterleaved[] = {
    {"topk_transform_512", "raw_indices", "page_indices"},  // two outputs, unit inner stride
    {"topk_transform_512", "page_indices", "scores"},       // output and input rows
    {"save_partial_states", "state_cache", "kv"},           // in-place pages and input rows
};

DSV4CPU_RUN_TEST(Overlap, InterleavedRows, {"topk_transform_512", "save_partial_states"}) {
  for (const Interleaved& t : kInterleaved) {
    const std::vector<Sample> all = samples(t.op);
    const Sample* sample = nullptr;  // the smallest with both arrays of >= 2 rows
    for (const Sample& s : all) {
      const Array *w = s.find(t.written), *x = s.find(t.other);
      if (w && x && w->shape.size() >= 2 && x->shape.size() >= 2 && w->shape[0] >= 2 &&
          x->shape[0] >= 2 && (!sample || s.bytes < sample->bytes))
        sample = &s;
    }
    ASSERT_NE(sample, nullptr) << t.op << ": no fixture with " << t.written << " and " << t.other;
    const Pair pair{sample, sample->find(t.written), sample->find(t.other)};
    const size_t w_row = pair.written->before.size() / static_cast<size_t>(pair.written->shape[0]);
    const size_t x_row = pair.other->before.size() / static_cast<size_t>(pair.other->shape[0]);
    const size_t stride = w_row + x_row;
    ASSERT_EQ(stride % dtype_size(pair.written->dtype), 0u);
    ASSERT_EQ(stride % dtype_size(pair.other->dtype), 0u);
    const Spots interleaved{{0, stride}, {w_row, stride}};
    const Spots apart{{0, stride}, {round_up(extent(*pair.written, {0, stride}), kGap), stride}};
    testing::for_each_run(t.op, [&](const testing::Run& run) {
      const auto unplaced = unplaced_results(*sample, run.options());
      check_placement(t.op, run, pair, "rows interleaved", true, interleaved, unplaced);
      check_placement(t.op, run, pair, "strided rows apart", false, apart, unplaced);
    });
  }
}

// Two inputs may be one array (options.hpp, "Aliasing"): slot_mapping (metadata.md §3) with
// positions and token_to_req both [0, 1, 2], token t of request t at position t:
// slot[t] = bt[t][t / 4]·4 + t % 4 = 7·4 + 0, 8·4 + 1, 9·4 + 2.
DSV4CPU_RUN_TEST(Overlap, InputsMayBeOneArray, "slot_mapping") {
  const std::vector<int64_t> positions = {0, 1, 2}, table = {7, 8, 9};
  const TensorView pos(positions.data(), DType::I64, {3});
  const TensorView bt(table.data(), DType::I64, {3, 1});
  testing::for_each_run("slot_mapping", [&](const testing::Run& run) {
    std::vector<int64_t> slots(3, -5);
    slot_mapping(pos, pos, bt, 4, MutableTensorView(slots.data(), DType::I64, {3}),
                 run.options());
    EXPECT_EQ(slots, (std::vector<int64_t>{28, 33, 38})) << run.label();
  });
}

// The two checks of core/check.cpp on their own, every placement with the output and the input
// in either size order (so that both "inside" and "containing" hold for each role), both
// argument orders of the output/output check.
TEST(Overlap, CoreChecksEveryPlacementBothRoles) {
  for (const Sizes s : {Sizes{8, 1, 24}, Sizes{24, 1, 8}, Sizes{16, 1, 16}, Sizes{1, 1, 1}}) {
    for (const Placement& p : kPlacements) {
      const std::optional<Spots> layout = p.place(s);
      if (!layout) continue;
      std::vector<uint8_t> buffer(1024);
      const TensorView w(buffer.data() + layout->written.lo, DType::U8,
                         {static_cast<int64_t>(s.w)});
      const TensorView x(buffer.data() + layout->other.lo, DType::U8,
                         {static_cast<int64_t>(s.o)});
      const std::string where = std::string(p.name) + ", " + std::to_string(s.w) + " and " +
                                std::to_string(s.o) + " bytes";
      const auto raises = [](const std::function<void()>& f) {
        try {
          f();
        } catch (const ShapeError&) {
          return true;
        }
        return false;
      };
      EXPECT_EQ(raises([&] { detail::check_no_overlap("op", "out", w, "in", x); }), p.overlaps)
          << where;
      EXPECT_EQ(raises([&] { detail::check_outputs_disjoint("op", "a", w, "b", x); }), p.overlaps)
          << where;
      EXPECT_EQ(raises([&] { detail::check_outputs_disjoint("op", "b", x, "a", w); }), p.overlaps)
          << where;
    }
  }
}

}  // namespace
}  // namespace dsv4cpu
