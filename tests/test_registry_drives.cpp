// The registry drives every check: variants added to the registry alone (through its test hook,
// copies of the reference kernel) show up in the unit-test runs, the registered tests, the
// benchmark list and dsv4cpu-verify --impl all, with no other edit. One is Highway-dispatched (a
// run per Highway target), one portable (one run), one of an ISA this process may lack (one run,
// or listed as absent and skipped).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/registry.hpp"
#include "bench_util.hpp"
#include "core/cpu.hpp"
#include "dsv4cpu/compressor.hpp"
#include "testing/gtest.hpp"
#include "testing/isa.hpp"
#include "verify/runner.hpp"

namespace dsv4cpu {
namespace {

constexpr const char* kOp = "map_local_to_global_slots";
constexpr const char* kHighway = "extra_highway";
constexpr const char* kPortable = "extra_portable";
constexpr const char* kAmx = "extra_amx";

// The added variants, registered once before any test looks.
void add_variants() {
  static const bool added = [] {
    return detail::add_variant_for_test(kOp, kHighway, {true, detail::Isa::none}) &&
           detail::add_variant_for_test(kOp, kPortable, {false, detail::Isa::none}) &&
           detail::add_variant_for_test(kOp, kAmx, {false, detail::Isa::amx});
  }();
  ASSERT_TRUE(added);
}

bool amx_here() { return detail::isa_available(detail::Isa::amx); }

size_t count_runs(const std::vector<testing::Run>& runs, const std::string& variant) {
  return static_cast<size_t>(std::count_if(
      runs.begin(), runs.end(), [&](const testing::Run& r) { return r.variant.name == variant; }));
}

// The added variants are listed before the reference, in this CPU's order (core/registry.cpp):
// on Intel and AMD the AMX one leads the list and the other two follow in the order added;
// elsewhere the three keep the order added, the AMX one just before the reference.
TEST(RegistryDrives, RegisteredOpsListTheAddedVariantsBeforeTheReference) {
  add_variants();
  const std::string vendor = testing::cpuinfo_vendor();
  const bool ranked = vendor == "GenuineIntel" || vendor == "AuthenticAMD";
  size_t seen = 0;
  for (const OpInfo& op : registered_ops()) {
    if (op.name != kOp) continue;
    const auto& v = op.variants;
    std::vector<std::string> added;
    for (const VariantInfo& info : v)
      if (info.name.rfind("extra_", 0) == 0) added.push_back(info.name);
    ASSERT_GE(v.size(), 4u);
    EXPECT_EQ(v.back().role, Role::reference);
    if (ranked) {
      EXPECT_EQ(added, (std::vector<std::string>{kAmx, kHighway, kPortable})) << vendor;
      EXPECT_EQ(v.front().name, kAmx);
      EXPECT_EQ(v.front().isa, "amx");
    } else {
      EXPECT_EQ(added, (std::vector<std::string>{kHighway, kPortable, kAmx})) << vendor;
      EXPECT_EQ(v[v.size() - 2].name, kAmx);
    }
    for (const VariantInfo& info : v) {
      if (info.name == kHighway) {
        EXPECT_TRUE(info.highway);
      }
    }
    ++seen;
  }
  EXPECT_EQ(seen, 1u);
}

// Unit tests: testing::for_each_run calls every added variant, each Highway target separately.
TEST(RegistryDrives, UnitTestRuns) {
  add_variants();
  const std::vector<int64_t> local = {-1, 0, 5, 11};
  const std::vector<int32_t> req = {0, 0, 0, 0}, bt = {7, 3, 9};
  std::vector<std::string> labels;
  testing::for_each_run(kOp, [&](const testing::Run& run) {
    std::vector<int64_t> slots(4, 12345);
    map_local_to_global_slots(TensorView(local.data(), DType::I64, {4, 1}),
                              TensorView(req.data(), DType::I32, {4}),
                              TensorView(bt.data(), DType::I32, {1, 3}), 4,
                              MutableTensorView(slots.data(), DType::I64, {4, 1}), run.options());
    EXPECT_EQ(slots, (std::vector<int64_t>{-1, 28, 13, 39})) << run.label();
    labels.push_back(run.label());
  });
  const testing::RunList list = testing::runs(kOp);
  EXPECT_EQ(count_runs(list.runs, kHighway), detail::highway_targets().size());
  EXPECT_EQ(count_runs(list.runs, kPortable), 1u);
  EXPECT_EQ(count_runs(list.runs, kAmx), amx_here() ? 1u : 0u);
  EXPECT_EQ(list.absent.size(), amx_here() ? 0u : 1u);
  EXPECT_EQ(labels.size(), list.runs.size());
  for (const detail::HighwayTarget& t : detail::highway_targets())
    EXPECT_NE(std::find(labels.begin(), labels.end(), std::string(kHighway) + ":" + t.name),
              labels.end())
        << t.name;
}

// Registered tests: one per run, named <op>/<variant>/<target>/<threads> (unit tests), or one per
// variant and target with the thread counts inside (property tests); an absent variant gets one.
TEST(RegistryDrives, TestRunsPerRunAndPerTarget) {
  add_variants();
  const testing::Plan optimized{false, std::nullopt, true, {1, 2}};
  const auto per_run = testing::test_runs({kOp}, optimized, true);
  const auto per_target = testing::test_runs({kOp}, optimized, false);
  const auto has = [](const std::vector<testing::TestRun>& tests, const std::string& path) {
    return std::any_of(tests.begin(), tests.end(),
                       [&](const testing::TestRun& t) { return t.path == path; });
  };
  for (const detail::HighwayTarget& t : detail::highway_targets()) {
    const std::string base = std::string(kOp) + "/" + kHighway + "/" + t.name + "/";
    EXPECT_TRUE(has(per_run, base + "1") && has(per_run, base + "2")) << base;
    EXPECT_TRUE(has(per_target, base + "1+2")) << base;
  }
  EXPECT_TRUE(has(per_run, std::string(kOp) + "/" + kPortable + "/baseline/2"));
  EXPECT_TRUE(has(per_target, std::string(kOp) + "/" + kPortable + "/baseline/1+2"));
  EXPECT_FALSE(has(per_run, std::string(kOp) + "/ref/baseline/1"));  // the plan leaves it out
  const std::string amx = std::string(kOp) + "/" + kAmx + (amx_here() ? "/AMX_BF16/1+2" : "/absent");
  EXPECT_TRUE(has(per_target, amx)) << amx;
  const size_t targets = detail::highway_targets().size();
  const size_t mine = static_cast<size_t>(std::count_if(
      per_run.begin(), per_run.end(), [](const testing::TestRun& t) {
        return t.selection.variant.rfind("extra_", 0) == 0;
      }));
  EXPECT_EQ(mine, 2 * targets + 2 + (amx_here() ? 2 : 1));
}

// Inside a registered test, the loops visit its one run; an undeclared op is an error.
TEST(RegistryDrives, SelectionNarrowsTheLoops) {
  add_variants();
  const std::string target = detail::highway_targets().back().name;
  std::vector<std::string> visited;
  int64_t entered = 0;
  {
    const testing::ScopedSelection selection({kHighway, target, 2, {kOp}});
    testing::for_each_run(kOp, testing::Plan{true, std::nullopt, true, {1, 2}},
                          [&](const testing::Run& run) { visited.push_back(run.path()); });
    EXPECT_THROW(testing::runs("slot_mapping"), std::logic_error);
    entered = selection.entered();
  }
  EXPECT_EQ(visited, (std::vector<std::string>{std::string(kOp) + "/" + kHighway + "/" + target +
                                               "/2"}));
  EXPECT_EQ(entered, 1);
  EXPECT_GT(testing::runs(kOp).runs.size(), 1u);  // no selection in force: every run again
}

// Benchmarks: every case of the op, one and two threads, on the dispatched target.
TEST(RegistryDrives, BenchmarkList) {
  add_variants();
  std::vector<std::string> names;
  for (const bench::BenchRun& b : bench::benchmark_runs()) names.push_back(b.name);
  for (const char* variant : {kHighway, kPortable}) {
    const std::string base = std::string(kOp) + "/" + variant + "/C4/decode8";
    EXPECT_NE(std::find(names.begin(), names.end(), base), names.end()) << base;
    EXPECT_NE(std::find(names.begin(), names.end(), base + "/threads:2"), names.end()) << base;
  }
  const std::string amx = std::string(kOp) + "/" + kAmx + "/C4/decode8";
  EXPECT_EQ(std::find(names.begin(), names.end(), amx) != names.end(), amx_here());
}

// The compute roof of a benchmark follows the target that runs, not the variant's name.
TEST(RegistryDrives, BenchmarkPeakByTarget) {
  EXPECT_EQ(bench::peak_flops_per_cycle("AMX_BF16"), 1024.0);  // 16·16·32 MACs per 16 cycles
  EXPECT_EQ(bench::peak_flops_per_cycle("AVX512_BF16"), 128.0);
  for (const char* avx3 : {"AVX3", "AVX3_DL", "AVX3_ZEN4"})
    EXPECT_EQ(bench::peak_flops_per_cycle(avx3), 64.0) << avx3;
  EXPECT_EQ(bench::peak_flops_per_cycle("AVX2"), 32.0);
  EXPECT_EQ(bench::peak_flops_per_cycle("SSE4"), 8.0);
  for (const char* scalar : {"", "EMU128", "SCALAR"})
    EXPECT_EQ(bench::peak_flops_per_cycle(scalar), 2.0) << scalar;
  // The runs of a Highway variant carry the target they run on, whatever the variant is called.
  add_variants();
  for (const bench::BenchRun& b : bench::benchmark_runs()) {
    if (b.run.variant.name != std::string(kHighway)) continue;
    EXPECT_EQ(b.run.target, detail::highway_target()) << b.name;
  }
}

// dsv4cpu-verify --impl all: every run of the op on an embedded fixture, passing; an absent
// fixed-ISA variant is listed as skipped (failed when its ISA is required).
TEST(RegistryDrives, VerifierImplAll) {
  add_variants();
  const verify::FileResult r = verify::run_fixture_file(
      std::string(DSV4CPU_FIXTURES_DIR) + "/map_local_to_global_slots/spec_example.safetensors",
      "spec_example", verify::ImplMode::all);
  std::vector<std::string> ran, skipped;
  for (const verify::CaseResult& c : r.cases) {
    if (c.outcome == verify::Outcome::skipped) {
      skipped.push_back(c.variant);
      continue;
    }
    EXPECT_TRUE(c.passed()) << c.variant << ": " << c.detail;
    ran.push_back(c.variant);
  }
  const testing::RunList list = testing::runs(kOp);
  ASSERT_EQ(skipped.size(), list.absent.size());
  for (size_t i = 0; i < skipped.size(); ++i) EXPECT_EQ(skipped[i], list.absent[i].name);
  EXPECT_EQ(std::count(skipped.begin(), skipped.end(), kAmx), amx_here() ? 0 : 1);
  for (const testing::Run& run : testing::runs(kOp).runs)
    EXPECT_NE(std::find(ran.begin(), ran.end(), run.label()), ran.end()) << run.label();
  EXPECT_EQ(ran.size(), testing::runs(kOp).runs.size());
  EXPECT_EQ(std::count_if(ran.begin(), ran.end(),
                          [](const std::string& v) { return v.rfind(kHighway, 0) == 0; }),
            static_cast<long>(detail::highway_targets().size()));
}

}  // namespace
}  // namespace dsv4cpu
