// verify/ fixture semantics (fixtures.md): how a fixture file becomes a call and a verdict.
// The fixtures are small hand-made cases of map_local_to_global_slots (compressor.md §4.1 example)
// and save_partial_states (compressor.md §3.3) whose expected values are worked out by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"
#include "testing/runs.hpp"
#include "verify/fixture.hpp"
#include "verify/runner.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu::verify {
namespace {

template <class T>
Tensor make_tensor(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  return Tensor{dtype, std::move(shape), Bytes(values.data(), values.size() * sizeof(T))};
}

// P = 4, block_table[0] = [7, 3, 9], locals [-1, 0, 5, 11] -> slots [-1, 28, 13, 39].
SafetensorsFile map_example() {
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"},
                {"op", "map_local_to_global_slots"},
                {"block_size", "4"}};
  f.tensors["local_indices"] = make_tensor<int64_t>(DType::I64, {4, 1}, {-1, 0, 5, 11});
  f.tensors["req_idx"] = make_tensor<int32_t>(DType::I32, {4}, {0, 0, 0, 0});
  f.tensors["block_table"] = make_tensor<int32_t>(DType::I32, {1, 3}, {7, 3, 9});
  f.tensors["expected.slots"] = make_tensor<int64_t>(DType::I64, {4, 1}, {-1, 28, 13, 39});
  return f;
}

// compressor.md §3.3 with SW = 128 (ape [4, 128]), one token at position 5 into state slot 1 of a
// 2-D padded state cache F32 [1, 4·256 + 8] with state_block_size 4: floats [256, 384) receive kv,
// [384, 512) receive score + ape[5 % 4] = 1 + 0.5; everything else keeps its old value 7.
SafetensorsFile save_example() {
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"},
                {"op", "save_partial_states"},
                {"state_block_size", "4"}};
  std::vector<float> kv(128), ape(4 * 128, 0.0f), state(1032, 7.0f);
  for (int i = 0; i < 128; ++i) kv[static_cast<size_t>(i)] = static_cast<float>(i);
  for (int i = 0; i < 128; ++i) ape[static_cast<size_t>(128 + i)] = 0.5f;
  std::vector<float> expected = state;
  for (int i = 0; i < 128; ++i) {
    expected[static_cast<size_t>(256 + i)] = static_cast<float>(i);
    expected[static_cast<size_t>(384 + i)] = 1.5f;
  }
  f.tensors["kv"] = make_tensor<float>(DType::F32, {1, 128}, kv);
  f.tensors["score"] = make_tensor<float>(DType::F32, {1, 128}, std::vector<float>(128, 1.0f));
  f.tensors["ape"] = make_tensor<float>(DType::F32, {4, 128}, ape);
  f.tensors["positions"] = make_tensor<int64_t>(DType::I64, {1}, {5});
  f.tensors["slot_mapping"] = make_tensor<int64_t>(DType::I64, {1}, {1});
  f.tensors["state_cache"] = make_tensor<float>(DType::F32, {1, 1032}, state);
  f.tensors["expected.state_cache"] = make_tensor<float>(DType::F32, {1, 1032}, expected);
  return f;
}

// A temporary file name private to this test and process (ctest runs tests in parallel).
std::string temp_path(const std::string& tag) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return (std::filesystem::temp_directory_path() /
          ("dsv4cpu_" + test + "_" + tag + "_" + std::to_string(getpid()) + ".safetensors"))
      .string();
}

FileResult run(const SafetensorsFile& f, ImplMode mode = ImplMode::reference) {
  const std::string path = temp_path("case");
  write_safetensors(path, f);
  FileResult r = run_fixture_file(path, "case.safetensors", mode);
  std::filesystem::remove(path);
  return r;
}

// The single result of a reference run.
CaseResult run1(const SafetensorsFile& f) {
  FileResult r = run(f);
  EXPECT_EQ(r.cases.size(), 1u);
  return r.cases.empty() ? CaseResult{} : r.cases[0];
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The name of the reference variant of map_local_to_global_slots.
std::string reference_name() {
  Options o;
  o.impl = Impl::reference;
  return selected_variant("map_local_to_global_slots", o);
}

TEST(VerifyRunner, PassingFixture) {
  const CaseResult r = run1(map_example());
  EXPECT_TRUE(r.passed()) << r.detail;
  EXPECT_EQ(r.op, "map_local_to_global_slots");
  EXPECT_EQ(r.name, "case.safetensors");
  EXPECT_EQ(r.variant, reference_name());
  EXPECT_EQ(r.detail, "exact");
}

TEST(VerifyRunner, WrongExpectedValueFails) {
  SafetensorsFile f = map_example();
  f.tensors["expected.slots"] = make_tensor<int64_t>(DType::I64, {4, 1}, {-1, 28, 13, 40});
  const CaseResult r = run1(f);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_EQ(r.type, "mismatch");
  EXPECT_EQ(r.detail, "slots[3, 0]: got 39, expected 40 (1 of 4 elements differ)");
  EXPECT_GT(r.seconds, 0.0);
}

TEST(VerifyRunner, IndexInputsMayBeI64) {
  SafetensorsFile f = map_example();
  f.tensors["req_idx"] = make_tensor<int64_t>(DType::I64, {4}, {0, 0, 0, 0});
  f.tensors["block_table"] = make_tensor<int64_t>(DType::I64, {1, 3}, {7, 3, 9});
  EXPECT_TRUE(run1(f).passed());
}

TEST(VerifyRunner, ExpectedErrorClassOrSubclass) {
  SafetensorsFile f = map_example();
  f.tensors.erase("expected.slots");
  f.tensors["block_table"] = make_tensor<int32_t>(DType::I32, {1, 3}, {7, -1, 9});  // local 5
  f.metadata["expected_error"] = "IndexError";
  CaseResult r = run1(f);
  EXPECT_TRUE(r.passed()) << r.detail;
  EXPECT_EQ(r.detail, "IndexError as expected");
  EXPECT_TRUE(contains(r.error, "block_table[0, 1] = -1")) << r.error;
  f.metadata["expected_error"] = "Error";
  r = run1(f);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.detail, "IndexError as expected (a subclass of Error)");
  f.metadata["expected_error"] = "ShapeError";
  r = run1(f);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_EQ(r.type, "wrong_exception");
  EXPECT_TRUE(contains(r.detail, "raised IndexError, expected ShapeError")) << r.detail;
  f.metadata["expected_error"] = "KeyError";
  EXPECT_FALSE(run1(f).passed());
}

TEST(VerifyRunner, ExpectedErrorThatIsNotRaisedFails) {
  SafetensorsFile f = map_example();
  f.metadata["expected_error"] = "ValueError";
  const CaseResult r = run1(f);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_EQ(r.type, "no_exception");
  EXPECT_EQ(r.detail, "no error raised (expected ValueError)");
}

// An exception the fixture does not expect is an error (not a failure), typed by its class.
TEST(VerifyRunner, UnexpectedErrorIsAnErrorWithTheMessage) {
  SafetensorsFile f = map_example();
  f.metadata["block_size"] = "0";
  const CaseResult r = run1(f);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_EQ(r.type, "ValueError");
  EXPECT_TRUE(contains(r.detail, "ValueError: dsv4cpu::map_local_to_global_slots: block_size"))
      << r.detail;
}

TEST(VerifyRunner, MissingOrMistypedTensorFails) {
  SafetensorsFile f = map_example();
  f.tensors.erase("req_idx");
  CaseResult r = run1(f);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(contains(r.detail, "ShapeError") && contains(r.detail, "req_idx")) << r.detail;
  f = map_example();
  f.tensors["req_idx"] = make_tensor<float>(DType::F32, {4}, {0, 0, 0, 0});
  r = run1(f);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(contains(r.detail, "ShapeError") && contains(r.detail, "req_idx")) << r.detail;
  f = map_example();
  f.tensors["expected.slots"] = make_tensor<int32_t>(DType::I32, {4, 1}, {-1, 28, 13, 39});
  r = run1(f);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.detail, "expected.slots is I32 [4, 1], the op returns I64 [4, 1]");
}

TEST(VerifyRunner, MalformedFixtures) {
  SafetensorsFile f = map_example();
  f.metadata["op"] = "no_such_op";
  EXPECT_EQ(run1(f).detail, "unknown op 'no_such_op'");
  f = map_example();
  f.metadata.erase("op");
  EXPECT_EQ(run1(f).op, "?");
  f = map_example();
  f.metadata.erase("format");
  EXPECT_TRUE(contains(run1(f).detail, "format")) << run1(f).detail;
  f = map_example();
  f.metadata.erase("block_size");
  EXPECT_EQ(run1(f).detail, "fixture: missing scalar 'block_size' in __metadata__");
  f = map_example();
  f.metadata["block_size"] = "4.0";
  EXPECT_TRUE(contains(run1(f).detail, "not a 64-bit integer")) << run1(f).detail;
  EXPECT_EQ(run1(f).outcome, Outcome::error);
  EXPECT_EQ(run1(f).type, "fixture");
  f = map_example();
  f.tensors["expected.bogus"] = make_tensor<int64_t>(DType::I64, {1}, {0});
  EXPECT_TRUE(contains(run1(f).detail, "expected.bogus")) << run1(f).detail;
  f = map_example();
  f.tensors.erase("expected.slots");
  EXPECT_EQ(run1(f).detail, "no expected.* tensor to compare");
  f = map_example();
  f.metadata["compare"] = "ulps=3";
  EXPECT_TRUE(contains(run1(f).detail, "bad \"compare\" override")) << run1(f).detail;
}

TEST(VerifyRunner, TruncatedFileFails) {
  const std::string path = temp_path("truncated");
  write_safetensors(path, map_example());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  const FileResult r = run_fixture_file(path, "t", ImplMode::reference);
  std::filesystem::remove(path);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].outcome, Outcome::error);
  EXPECT_EQ(r.cases[0].type, "malformed_file");
  EXPECT_TRUE(contains(r.cases[0].detail, "malformed safetensors")) << r.cases[0].detail;
}

TEST(VerifyRunner, UnknownMetadataKeyWarnsOnce) {
  SafetensorsFile f = map_example();
  f.metadata["colour"] = "blue";
  const FileResult r = run(f, ImplMode::all);
  ASSERT_FALSE(r.cases.empty());
  for (const CaseResult& c : r.cases) EXPECT_TRUE(c.passed()) << c.detail;
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(contains(r.warnings[0], "'colour'")) << r.warnings[0];
}

TEST(VerifyRunner, ImplAllRunsEveryVariantOnEveryTarget) {
  const testing::RunList list = testing::runs("map_local_to_global_slots");
  const FileResult r = run(map_example(), ImplMode::all);
  ASSERT_EQ(r.cases.size(), list.runs.size());
  std::set<std::string> labels;
  for (size_t i = 0; i < list.runs.size(); ++i) {
    EXPECT_EQ(r.cases[i].variant, list.runs[i].label());
    EXPECT_TRUE(r.cases[i].passed()) << r.cases[i].variant << ": " << r.cases[i].detail;
    labels.insert(r.cases[i].variant);
  }
  EXPECT_EQ(labels.size(), list.runs.size());  // each Highway target is its own run
}

TEST(VerifyRunner, ImplOptimizedNamesTheReferenceFallback) {
  const CaseResult r = run(map_example(), ImplMode::optimized).cases.at(0);
  EXPECT_TRUE(r.passed());
  Options o;
  o.impl = Impl::optimized;
  if (selected_variant("map_local_to_global_slots", o) == reference_name())
    EXPECT_TRUE(contains(r.variant, reference_name() + " (no optimized variant")) << r.variant;
  else
    EXPECT_NE(r.variant.rfind(reference_name(), 0), 0u) << r.variant;
}

TEST(VerifyRunner, StateCache2DWithStateBlockSize) {
  EXPECT_TRUE(run1(save_example()).passed()) << run1(save_example()).detail;
  SafetensorsFile f = save_example();
  f.metadata.erase("state_block_size");
  EXPECT_EQ(run1(f).detail, "fixture: missing scalar 'state_block_size' in __metadata__");
  f = save_example();
  f.metadata["state_block_size"] = "5";  // 5 rows of 256 floats exceed a 1032-float page
  EXPECT_TRUE(contains(run1(f).detail, "cannot hold")) << run1(f).detail;
  f = save_example();  // the page padding must keep its content
  std::vector<float> expected(1032);
  std::memcpy(expected.data(), f.tensors["expected.state_cache"].bytes.data(), 1032 * 4);
  expected[1031] = 0.0f;
  f.tensors["expected.state_cache"] = make_tensor<float>(DType::F32, {1, 1032}, expected);
  EXPECT_TRUE(contains(run1(f).detail, "state_cache[0, 1031]")) << run1(f).detail;
}

TEST(VerifyRunner, InPlaceBufferNeedsItsExpectedTensor) {
  SafetensorsFile f = save_example();
  f.tensors.erase("expected.state_cache");
  EXPECT_EQ(run1(f).detail, "missing tensor expected.state_cache (in-place buffer)");
}

TEST(VerifyRunner, ExactOverride) {
  SafetensorsFile f = save_example();
  f.metadata["compare"] = "exact";
  EXPECT_TRUE(run1(f).passed());
}

TEST(VerifyCase, UntouchedCheckSeesWritesToOutputsAndInPlaceBuffers) {
  const SafetensorsFile f = save_example();
  Case c(f);
  const MutableTensorView out = c.output("extra", DType::I32, {2});
  EXPECT_EQ(out.ptr<uint8_t>()[0], kGarbageByte);
  const MutableTensorView state = c.inout("state_cache");
  EXPECT_TRUE(c.check_untouched().pass);
  out.ptr<int32_t>()[1] = 0;
  Verdict v = c.check_untouched();
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "extra")) << v.detail;
  out.ptr<int32_t>()[1] = static_cast<int32_t>(0xA5A5A5A5u);
  state.ptr<float>()[1031] = 1.0f;
  v = c.check_untouched();
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "state_cache")) << v.detail;
}

TEST(VerifyCase, ParseCompareOverride) {
  EXPECT_TRUE(parse_compare("exact").exact);
  const Tolerance d = parse_compare("");
  EXPECT_FALSE(d.exact);
  EXPECT_EQ(d.fp8_step, 1);
  EXPECT_FALSE(d.bound_factor.has_value());
  const Tolerance t = parse_compare(
      "fp8_step=2,bf16_ulp=0,scale_step=0,rtol=1e-3,atol=1e-9,"
      "bound_factor=4");
  EXPECT_EQ(t.fp8_step, 2);
  EXPECT_EQ(t.bf16_ulp, 0);
  EXPECT_EQ(t.scale_step, 0);
  EXPECT_DOUBLE_EQ(t.rtol, 1e-3);
  EXPECT_DOUBLE_EQ(t.atol, 1e-9);
  EXPECT_DOUBLE_EQ(*t.bound_factor, 4);
  // Naming bf16_ulp (even at its default) reaches every BF16 array (Case::check).
  EXPECT_TRUE(t.bf16_arrays);
  EXPECT_TRUE(parse_compare("bf16_ulp=1").bf16_arrays);
  EXPECT_FALSE(d.bf16_arrays);
  EXPECT_FALSE(parse_compare("fp8_step=2,scale_step=0").bf16_arrays);
  EXPECT_FALSE(parse_compare("exact").bf16_arrays);
  EXPECT_THROW(parse_compare("fp8_steps=2"), std::invalid_argument);
  EXPECT_THROW(parse_compare("fp8_step=1.5"), std::invalid_argument);
  EXPECT_THROW(parse_compare("rtol=-1"), std::invalid_argument);
  EXPECT_THROW(parse_compare("rtol"), std::invalid_argument);
  EXPECT_THROW(parse_compare("exact,rtol=1"), std::invalid_argument);
  // The metadata grammar: no space, no sign '+', no trailing comma.
  EXPECT_THROW(parse_compare("fp8_step=2, bf16_ulp=0"), std::invalid_argument);
  EXPECT_THROW(parse_compare(" exact"), std::invalid_argument);
  EXPECT_THROW(parse_compare("fp8_step=+2"), std::invalid_argument);
  EXPECT_THROW(parse_compare("rtol=1e-3,"), std::invalid_argument);
  EXPECT_THROW(parse_compare("rtol=inf"), std::invalid_argument);
}

// docs/fixture-ops.md, `compare`: a BF16 array the op compares exactly by default is compared
// within bf16_ulp ulps (numerics.md §11.3) when `compare` names bf16_ulp; arrays with their own
// contract and other dtypes keep theirs.
TEST(VerifyCase, CompareNamingBf16UlpReachesEveryBf16Array) {
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"}};
  // -0 for +0 and the largest finite for inf (1 ulp each), a NaN of another payload (matches).
  const std::vector<uint16_t> want = {0x0000, 0x7F80, 0x7FC0, 0x3F80};
  const std::vector<uint16_t> one = {0x8000, 0x7F7F, 0xFFC1, 0x3F80};
  const std::vector<uint16_t> two = {0x0000, 0x7F80, 0x7FC0, 0x3F82};
  f.tensors["expected.q"] = make_tensor<uint16_t>(DType::BF16, {2, 2}, want);
  f.tensors["expected.own"] = make_tensor<uint16_t>(DType::BF16, {1}, {0x3F80});
  f.tensors["expected.idx"] = make_tensor<int32_t>(DType::I32, {1}, {7});
  const auto verdict = [&](const std::vector<uint16_t>& q, int32_t idx,
                           const std::string& compare) {
    Case c(f);
    std::memcpy(c.output("q", DType::BF16, {2, 2}).data(), q.data(), 8);
    // A buffer with its own comparator keeps it: this one accepts only the byte pattern 0x3F81.
    const MutableTensorView own = c.output(
        "own", DType::BF16, {1}, [](const std::string&, const ArrayRef& g, const ArrayRef&,
                                    const Tolerance&) {
          return Verdict{g.data[0] == 0x81 && g.data[1] == 0x3F, "own contract"};
        });
    own.ptr<uint16_t>()[0] = 0x3F81;
    *c.output("idx", DType::I32, {1}).ptr<int32_t>() = idx;
    return c.check(parse_compare(compare));
  };
  Verdict v = verdict(one, 7, "");  // without `compare`: exact
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "q[0, 0]")) << v.detail;
  v = verdict(one, 7, "bf16_ulp=1");
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_EQ(v.detail, "q worst bf16 ulp 1 (2 of 4 elements not exact); own own contract");
  v = verdict(one, 7, "fp8_step=1,bf16_ulp=1");
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_FALSE(verdict(one, 7, "fp8_step=2").pass);  // other keys leave BF16 arrays exact
  EXPECT_FALSE(verdict(one, 7, "exact").pass);
  v = verdict(two, 7, "bf16_ulp=1");
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail,
            "q[1, 1]: got 1.015625 (0x3F82), expected 1 (0x3F80) 2 bf16 ulps apart "
            "(1 of 4 elements differ)");
  EXPECT_TRUE(verdict(two, 7, "bf16_ulp=2").pass);
  v = verdict(one, 8, "bf16_ulp=1000000");  // an I32 array stays exact
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail, "idx[0]: got 8, expected 7 (1 of 1 elements differ)");
}

TEST(VerifyCase, ScalarParsingAndDefaults) {
  SafetensorsFile f;
  f.metadata = {{"a", "12"}, {"b", "1e-06"}, {"c", "true"}, {"d", "0"}, {"e", "x"}, {"f", "-3"}};
  Case c(f);
  EXPECT_EQ(c.integer("a"), 12);
  EXPECT_EQ(c.integer("f"), -3);
  EXPECT_EQ(c.integer("zz", 64), 64);
  EXPECT_DOUBLE_EQ(c.real("b"), 1e-6);
  EXPECT_TRUE(c.boolean("c"));
  EXPECT_FALSE(c.boolean("d"));
  EXPECT_THROW(c.boolean("e"), FixtureError);
  EXPECT_THROW(c.integer("b"), FixtureError);
  EXPECT_THROW(c.real("missing"), FixtureError);
  EXPECT_EQ(c.text("mode", std::string("canonical")), "canonical");
  EXPECT_TRUE(c.unused_metadata().empty());  // every key read above
}

// Results of another implementation, judged by the op's contracts (check_results), and the
// library's own results of a fixture (library_results).
TEST(VerifyResults, ResultsOfAnotherImplementation) {
  const SafetensorsFile f = map_example();
  const Tensor right = f.tensors.at("expected.slots");
  EXPECT_TRUE(check_results(f, {{"slots", right}}).pass);
  Tensor wrong = right;
  wrong.bytes.data()[8] ^= 1;  // slots[1] = 29
  Verdict v = check_results(f, {{"slots", wrong}});
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.detail, "slots[1, 0]: got 29, expected 28 (1 of 4 elements differ)");
  v = check_results(f, {{"slots", make_tensor<int32_t>(DType::I32, {4, 1}, {-1, 28, 13, 39})}});
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "the op returns I32 [4, 1]")) << v.detail;
  EXPECT_EQ(check_results(f, {}).detail, "no result for expected.slots");
  EXPECT_EQ(check_results(f, {{"slots", right}, {"lens", right}}).detail,
            "the op has no output named 'lens'");
}

TEST(VerifyResults, InPlaceBufferOfAnotherImplementation) {
  const SafetensorsFile f = save_example();
  EXPECT_TRUE(check_results(f, {{"state_cache", f.tensors.at("expected.state_cache")}}).pass);
  // The padding float past the 4 rows must be left alone.
  Tensor wrong = f.tensors.at("expected.state_cache");
  wrong.bytes.data()[4 * 1031] ^= 1;
  EXPECT_FALSE(check_results(f, {{"state_cache", wrong}}).pass);
}

TEST(VerifyResults, InputsTheLibraryRejectsAreNotJudged) {
  SafetensorsFile f = map_example();
  f.metadata["block_size"] = "0";
  const Verdict v = check_results(f, {{"slots", f.tensors.at("expected.slots")}});
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(contains(v.detail, "fail dsv4cpu's validation")) << v.detail;
  EXPECT_TRUE(contains(v.detail, "ValueError")) << v.detail;
  f.metadata.erase("block_size");
  EXPECT_THROW(check_results(f, {}), FixtureError);
  f.metadata["op"] = "no_such_op";
  EXPECT_THROW(check_results(f, {}), FixtureError);
}

TEST(VerifyResults, LibraryResults) {
  Options o;
  o.impl = Impl::reference;
  const std::map<std::string, Tensor> r = library_results(map_example(), o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r.at("slots").bytes == map_example().tensors.at("expected.slots").bytes);
  SafetensorsFile bad = map_example();
  bad.metadata["block_size"] = "0";
  EXPECT_THROW(library_results(bad, o), ValueError);
}

}  // namespace
}  // namespace dsv4cpu::verify
