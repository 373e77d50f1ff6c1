// The registry (api/registry.cpp) as every consumer sees it: the shape of every list, the
// selection (selected_variant is the call path's), the Highway targets the run enumerator forces,
// and the rule that a fixed-ISA variant is available wherever the machine must offer its ISA.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/cpu.hpp"
#include "core/registry.hpp"
#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"
#include "testing/gtest.hpp"
#include "testing/isa.hpp"

namespace dsv4cpu {
namespace {

TEST(Registry, EveryListEndsWithItsOnlyReference) {
  for (const OpInfo& op : registered_ops()) {
    ASSERT_FALSE(op.variants.empty()) << op.name;
    const VariantInfo& ref = op.variants.back();
    EXPECT_EQ(ref.role, Role::reference) << op.name;
    EXPECT_TRUE(ref.available) << op.name;
    EXPECT_FALSE(ref.highway) << op.name;
    EXPECT_TRUE(ref.isa.empty()) << op.name;
    std::set<std::string> names;
    int references = 0;
    for (const VariantInfo& v : op.variants) {
      EXPECT_TRUE(names.insert(v.name).second) << op.name << ": " << v.name << " twice";
      references += v.role == Role::reference;
      EXPECT_FALSE(v.highway && !v.isa.empty()) << op.name << ": " << v.name;
    }
    EXPECT_EQ(references, 1) << op.name;
    Options o;
    o.impl = Impl::reference;
    EXPECT_EQ(selected_variant(op.name, o), ref.name) << op.name;
  }
}

// Impl::best and Impl::optimized pick the first available variant of the list as
// registered_ops() shows it (in this CPU's order: VariantOrder below).
TEST(Registry, BestIsTheFirstAvailableVariant) {
  for (const OpInfo& op : registered_ops()) {
    std::string first;
    for (const VariantInfo& v : op.variants)
      if (v.available && first.empty()) first = v.name;
    EXPECT_EQ(selected_variant(op.name), first) << op.name;
    Options o;
    o.impl = Impl::optimized;
    EXPECT_EQ(selected_variant(op.name, o), first) << op.name;
  }
}

std::string what_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

// selected_variant runs the call path's own selection: the same errors, word for word.
TEST(Registry, SelectedVariantIsTheCallPath) {
  const std::vector<int64_t> local = {0};
  const std::vector<int32_t> req = {0}, bt = {3};
  std::vector<int64_t> slots(1);
  for (const char* name : {"no-such-variant", ""}) {
    Options o;
    o.variant = name;
    const std::string selected = what_of([&] { selected_variant("map_local_to_global_slots", o); });
    const std::string called = what_of([&] {
      map_local_to_global_slots(TensorView(local.data(), DType::I64, {1, 1}),
                                TensorView(req.data(), DType::I32, {1}),
                                TensorView(bt.data(), DType::I32, {1, 1}), 4,
                                MutableTensorView(slots.data(), DType::I64, {1, 1}), o);
    });
    EXPECT_EQ(selected, called);
    EXPECT_EQ(selected.empty(), *name == '\0') << selected;
  }
  EXPECT_EQ(what_of([] { selected_variant("no_such_op"); }),
            "dsv4cpu::registry: op = no_such_op: unknown op (expected a registered op name)");
}

// A name no op offers is an unknown variant; a name another op offers is "not offered for this
// op", listing the op's own variants; an unavailable one lists those that run here.
TEST(Registry, VariantErrorsSayWhatTheOpOffers) {
  const std::vector<OpInfo> ops = registered_ops();
  auto offered = [](const OpInfo& op) {
    std::string s;
    for (const VariantInfo& v : op.variants) s += (s.empty() ? "" : ", ") + v.name;
    return s;
  };
  Options o;
  o.variant = "no-such-variant";
  EXPECT_EQ(what_of([&] { selected_variant("short_context_topk", o); }),
            "dsv4cpu::short_context_topk: variant = no-such-variant: unknown variant, offered by "
            "no op (expected one of ref)");
  size_t checked = 0;
  for (const OpInfo& op : ops)
    for (const OpInfo& other : ops)
      for (const VariantInfo& v : other.variants) {
        bool mine = false;
        for (const VariantInfo& w : op.variants) mine |= w.name == v.name;
        if (mine) continue;
        o.variant = v.name;
        EXPECT_EQ(what_of([&] { selected_variant(op.name, o); }),
                  "dsv4cpu::" + op.name + ": variant = " + v.name +
                      ": not offered for this op: offered are " + offered(op) +
                      " (expected one of " + offered(op) + ")");
        ++checked;
      }
  EXPECT_GT(checked, 0u);
  for (const OpInfo& op : ops)
    for (const VariantInfo& v : op.variants) {
      if (v.available) continue;
      std::string runnable;
      for (const VariantInfo& w : op.variants)
        if (w.available) runnable += (runnable.empty() ? "" : ", ") + w.name;
      o.variant = v.name;
      EXPECT_EQ(what_of([&] { selected_variant(op.name, o); }),
                "dsv4cpu::" + op.name + ": variant = " + v.name +
                    ": not available on this CPU or OS (expected an available variant of this "
                    "op: " + runnable + ")");
    }
}

// Options::variant is compared as the whole string: a name with a NUL inside is no variant, and
// the message shows the whole name. The call leaves its output alone.
TEST(Registry, VariantIsTheWholeName) {
  const std::vector<int64_t> local = {0};
  const std::vector<int32_t> req = {0}, bt = {3};
  for (const std::string& name : {std::string("ref\0junk", 8), std::string("ref\0", 4)}) {
    Options o;
    o.variant = name;
    std::vector<int64_t> slots = {-7};
    const std::string shown = name.size() == 8 ? "ref\\x00junk" : "ref\\x00";
    const std::string message = "dsv4cpu::map_local_to_global_slots: variant = " + shown +
                                ": unknown variant, offered by no op (expected one of ";
    EXPECT_EQ(what_of([&] { selected_variant("map_local_to_global_slots", o); })
                  .rfind(message, 0),
              0u);
    EXPECT_EQ(what_of([&] {
                map_local_to_global_slots(TensorView(local.data(), DType::I64, {1, 1}),
                                          TensorView(req.data(), DType::I32, {1}),
                                          TensorView(bt.data(), DType::I32, {1, 1}), 4,
                                          MutableTensorView(slots.data(), DType::I64, {1, 1}), o);
              }).rfind(message, 0),
              0u);
    EXPECT_EQ(slots[0], -7);
  }
  Options o;
  o.variant = "ref";
  EXPECT_EQ(selected_variant("map_local_to_global_slots", o), "ref");
}

// Options::variant owns its text: the caller's string may go away.
TEST(Registry, OptionsOwnTheVariantName) {
  for (const OpInfo& op : registered_ops()) {
    Options o;
    {
      std::string name = op.variants.front().name;
      o.variant = name;
    }
    if (op.variants.front().available) {
      EXPECT_EQ(selected_variant(op.name, o), op.variants.front().name);
    }
  }
}

// A Highway variant is one run per Highway target compiled in and supported; while a run executes,
// dispatch and the registry report its target.
TEST(Registry, HighwayRunsCoverEveryTargetAndReportIt) {
  const size_t targets = detail::highway_targets().size();
  ASSERT_GT(targets, 0u);
  for (const std::string& op : testing::op_names()) {
    std::set<std::string> seen;
    size_t highway_variants = 0;
    testing::for_each_run(op, [&](const testing::Run& run) {
      if (!run.variant.highway) return;
      EXPECT_EQ(detail::highway_target(), run.target) << op;
      for (const OpInfo& info : registered_ops())
        for (const VariantInfo& v : info.variants)
          if (info.name == op && v.name == run.variant.name) {
            EXPECT_EQ(v.target, run.target) << op;
          }
      seen.insert(run.variant.name + ":" + run.target);
    });
    for (const OpInfo& info : registered_ops())
      if (info.name == op)
        for (const VariantInfo& v : info.variants) highway_variants += v.highway ? 1 : 0;
    EXPECT_EQ(seen.size(), highway_variants * targets) << op;
  }
}

// A machine that must offer an ISA (testing::isa_required: /proc/cpuinfo announces it, or
// DSV4CPU_REQUIRE_ISA names it) has every variant of that ISA available (and so selected first
// where it leads its list: BestIsTheFirstAvailableVariant).
TEST(Registry, RequiredIsasAreAvailable) {
  for (const OpInfo& op : registered_ops())
    for (const VariantInfo& v : op.variants) {
      if (v.isa.empty() || !testing::isa_required(v.isa)) continue;
      testing::RunList list;
      list.absent.push_back(v);
      EXPECT_TRUE(v.available) << testing::absence(op.name, list).message;
    }
}

// ---- The variant order per CPU (core/registry.cpp): a CPU description in, an order out ----

struct NoArgs {};
void no_kernel(const NoArgs&, const detail::RunContext&) {}

using detail::CpuDescription;
using detail::CpuVendor;
using Names = std::vector<std::string>;

// The lists of fp8_paged_mqa_logits, indexer_topk and sparse_mla_attention as api/registry.cpp
// writes them, of the Highway-only ops, of the metadata builders and of the reference-only ops.
detail::VariantList<NoArgs> matrix_list() {
  return {detail::fixed_isa("amx", detail::Isa::amx, no_kernel),
          detail::fixed_isa("avx512bf16", detail::Isa::avx512bf16, no_kernel),
          detail::highway("hwy", no_kernel), detail::reference(no_kernel)};
}
detail::VariantList<NoArgs> highway_list() {
  return {detail::highway("hwy", no_kernel), detail::reference(no_kernel)};
}
detail::VariantList<NoArgs> portable_list() {
  return {detail::portable("opt", no_kernel), detail::reference(no_kernel)};
}
detail::VariantList<NoArgs> reference_list() { return {detail::reference(no_kernel)}; }

struct Ordered {
  Names order;
  std::string default_variant;  // what Impl::best runs there
};
Ordered ordered(const CpuDescription& cpu, detail::VariantList<NoArgs> list) {
  detail::order_for(cpu, list);
  Ordered out;
  for (const auto& v : list) out.order.push_back(v.name);
  out.default_variant = detail::first_runnable(cpu, list).name;
  return out;
}

// The lists with one optimized variant or none are the same on every CPU.
void expect_single_lists_unchanged(const CpuDescription& cpu) {
  EXPECT_EQ(ordered(cpu, highway_list()).order, (Names{"hwy", "ref"}));
  EXPECT_EQ(ordered(cpu, highway_list()).default_variant, "hwy");
  EXPECT_EQ(ordered(cpu, portable_list()).order, (Names{"opt", "ref"}));
  EXPECT_EQ(ordered(cpu, portable_list()).default_variant, "opt");
  EXPECT_EQ(ordered(cpu, reference_list()).order, (Names{"ref"}));
}

// Intel Xeon Sapphire Rapids and later: AMX first, then Highway (AVX3), then AVX-512-BF16.
TEST(VariantOrder, IntelXeonWithAmx) {
  const CpuDescription spr{CpuVendor::intel, true, true};
  EXPECT_EQ(ordered(spr, matrix_list()).order, (Names{"amx", "hwy", "avx512bf16", "ref"}));
  EXPECT_EQ(ordered(spr, matrix_list()).default_variant, "amx");
  expect_single_lists_unchanged(spr);
}

// The same Xeon where the OS or hypervisor withholds the tile state (or a Cooper Lake): Highway.
TEST(VariantOrder, IntelWithAvx512Bf16WithoutAmx) {
  const CpuDescription cpu{CpuVendor::intel, true, false};
  EXPECT_EQ(ordered(cpu, matrix_list()).order, (Names{"amx", "hwy", "avx512bf16", "ref"}));
  EXPECT_EQ(ordered(cpu, matrix_list()).default_variant, "hwy");
}

// AMD EPYC Zen 4 (AVX-512-BF16, no AMX): AVX-512-BF16 before Highway.
TEST(VariantOrder, AmdZen4) {
  const CpuDescription zen4{CpuVendor::amd, true, false};
  EXPECT_EQ(ordered(zen4, matrix_list()).order, (Names{"amx", "avx512bf16", "hwy", "ref"}));
  EXPECT_EQ(ordered(zen4, matrix_list()).default_variant, "avx512bf16");
  expect_single_lists_unchanged(zen4);
}

// AVX2 only (Zen 3, Intel before AVX-512): Highway, whatever the vendor.
TEST(VariantOrder, Avx2Only) {
  for (const CpuVendor vendor : {CpuVendor::intel, CpuVendor::amd, CpuVendor::other}) {
    const CpuDescription cpu{vendor, false, false};
    EXPECT_EQ(ordered(cpu, matrix_list()).default_variant, "hwy");
    expect_single_lists_unchanged(cpu);
  }
}

// Another vendor (Hygon, Zhaoxin, an emulator's own string): the lists' order, api/registry.cpp.
TEST(VariantOrder, UnknownVendorKeepsTheListOrder) {
  const CpuDescription all{CpuVendor::other, true, true}, bf16{CpuVendor::other, true, false};
  EXPECT_EQ(ordered(all, matrix_list()).order, (Names{"amx", "avx512bf16", "hwy", "ref"}));
  EXPECT_EQ(ordered(all, matrix_list()).default_variant, "amx");
  EXPECT_EQ(ordered(bf16, matrix_list()).default_variant, "avx512bf16");
  expect_single_lists_unchanged(all);
}

// Variants of one rank keep their order; the reference stays last (the test hook's list shape).
TEST(VariantOrder, EqualRanksKeepTheListOrder) {
  const detail::VariantList<NoArgs> mixed = {
      detail::highway("hwy", no_kernel), detail::highway("hwy2", no_kernel),
      detail::portable("opt", no_kernel), detail::fixed_isa("amx", detail::Isa::amx, no_kernel),
      detail::reference(no_kernel)};
  const Names amx_first = {"amx", "hwy", "hwy2", "opt", "ref"};
  EXPECT_EQ(ordered({CpuVendor::intel, true, false}, mixed).order, amx_first);
  EXPECT_EQ(ordered({CpuVendor::amd, true, false}, mixed).order, amx_first);
  EXPECT_EQ(ordered({CpuVendor::other, true, true}, mixed).order,
            (Names{"hwy", "hwy2", "opt", "amx", "ref"}));
}

TEST(VariantOrder, VendorFromTheCpuidString) {
  EXPECT_EQ(detail::cpu_vendor("GenuineIntel"), CpuVendor::intel);
  EXPECT_EQ(detail::cpu_vendor("AuthenticAMD"), CpuVendor::amd);
  for (const char* id : {"HygonGenuine", "CentaurHauls", "  Shanghai  ", "", "GenuineIntel "})
    EXPECT_EQ(detail::cpu_vendor(id), CpuVendor::other) << id;
}

// This CPU: the vendor CPUID reports is the one /proc/cpuinfo names, and registered_ops() lists
// every op in that vendor's order, written out here by dispatch (no variant named): Intel amx,
// code without a fixed ISA, avx512bf16; AMD amx, avx512bf16, the rest; the reference last.
TEST(VariantOrder, RegisteredOpsShowThisCpusOrder) {
  const std::string vendor = testing::cpuinfo_vendor();
  const CpuVendor here = vendor == "GenuineIntel"   ? CpuVendor::intel
                         : vendor == "AuthenticAMD" ? CpuVendor::amd
                                                    : CpuVendor::other;
  EXPECT_EQ(detail::this_cpu().vendor, here) << vendor;
  const auto rank = [here](const VariantInfo& v) {
    if (v.role == Role::reference) return 3;
    if (here == CpuVendor::intel) return v.isa == "amx" ? 0 : v.isa.empty() ? 1 : 2;
    if (here == CpuVendor::amd) return v.isa == "amx" ? 0 : v.isa == "avx512bf16" ? 1 : 2;
    return 0;
  };
  size_t with_both = 0;  // ops listing avx512bf16 and Highway: where the vendors differ
  for (const OpInfo& op : registered_ops()) {
    bool bf16 = false, hwy = false;
    for (size_t i = 0; i < op.variants.size(); ++i) {
      if (i > 0) {
        EXPECT_LE(rank(op.variants[i - 1]), rank(op.variants[i])) << op.name << ": " << i;
      }
      bf16 |= op.variants[i].isa == "avx512bf16";
      hwy |= op.variants[i].highway;
    }
    with_both += bf16 && hwy;
  }
  EXPECT_GT(with_both, 0u);
}

}  // namespace
}  // namespace dsv4cpu
