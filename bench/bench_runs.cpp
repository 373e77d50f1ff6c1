// The benchmark list, derived from the registry through testing::runs.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "bench_util.hpp"

namespace dsv4cpu::bench {

const char* traffic_name(Traffic t) {
  switch (t) {
    case Traffic::read: return "read";
    case Traffic::copy: return "copy";
    case Traffic::write: return "write";
  }
  return "read";
}

double peak_flops_per_cycle(const std::string& target) {
  if (target == "AMX_BF16") return 1024;  // TDPBF16PS: 16·16·32 MACs every 16 cycles
  if (target == "AVX512_BF16") return 2 * 2 * 32;  // VDPBF16PS: 32 MACs, two pipes
  if (target.rfind("AVX3", 0) == 0) return 2 * 2 * 16;  // AVX3, AVX3_DL, AVX3_ZEN4, ...
  if (target == "AVX2") return 2 * 2 * 8;
  if (target == "SSE4" || target == "SSSE3" || target == "SSE2") return 2 * 4;  // mul + add
  return 2;  // scalar: the reference, portable variants, EMU128
}

void set_flop_counters(benchmark::State& state, double flops, double peak_flops) {
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["peak_flops"] = peak_flops;
  state.counters["peak_share"] =
      benchmark::Counter(flops / peak_flops, benchmark::Counter::kIsRate);
}

std::vector<BenchRun> benchmark_runs() {
  Cases cases;
  compressor_cases(cases);
  indexer_cases(cases);
  metadata_cases(cases);
  attention_cases(cases);
  const bool every_target = std::getenv("DSV4CPU_BENCH_EVERY_TARGET") != nullptr;
  const testing::Plan plan{true, std::nullopt, every_target, {1, 2}};
  std::vector<BenchRun> out;
  for (const Case& c : cases)
    for (const testing::Run& run : testing::runs(c.op, plan).runs) {
      const bool reference = run.variant.role == Role::reference;
      if (reference && (run.threads == 2 || !c.reference)) continue;
      // A Highway variant pinned to one target: <variant>:<target>, e.g. hwy:SSE4.
      const std::string variant =
          run.target_bits != 0 ? run.variant.name + ":" + run.target : run.variant.name;
      const std::string name = c.op + "/" + variant + "/" + c.shape;
      if (run.threads == 2) {
        out.push_back({name + "/threads:2", c, run});
        continue;
      }
      out.push_back({name, c, run});
      if (c.finite_checks && !reference) out.push_back({name + "/unchecked", c, run, true});
    }
  return out;
}

void register_benchmarks() {
  for (const BenchRun& b : benchmark_runs()) {
    const Prepare prepare = b.bench_case.prepare;
    Options options = b.run.options();
    options.check_finite = !b.unchecked;
    const std::string label = std::string("traffic=") + traffic_name(b.bench_case.traffic);
    // The compute roof of the target that runs, at the clock Google Benchmark measured.
    const double peak = peak_flops_per_cycle(b.run.target) *
                        benchmark::CPUInfo::Get().cycles_per_second * std::max(b.run.threads, 1);
    // An AMX run on one thread also gets the unit's rate measured just before and just after it,
    // and its share of that rate ("unit_share"): that rate moves from minute to minute on some
    // machines, so a roof measured apart from the run (amx_roof) is not the one it had.
    const bool unit = b.run.target == "AMX_BF16" && b.run.threads <= 1;
    const testing::Run run = b.run;
    auto body = [prepare, options, label, peak, unit, run](benchmark::State& state) {
      const Prepared p = prepare();
      const testing::ScopedTarget target(run);  // Highway dispatch pinned where the run says
      const double unit_before = unit && p.flops > 0 ? amx_unit_flops() : 0;
      for (auto _ : state) p.run(options);
      if (unit_before > 0) {
        const double unit_flops = (unit_before + amx_unit_flops()) / 2;
        state.counters["unit_flops"] = unit_flops;
        state.counters["unit_share"] = benchmark::Counter(
            static_cast<double>(state.iterations() * p.flops) / unit_flops,
            benchmark::Counter::kIsRate);
      }
      state.SetBytesProcessed(state.iterations() * p.bytes);
      state.SetLabel(label);
      if (p.items > 0) state.SetItemsProcessed(state.iterations() * p.items);
      if (p.flops > 0)
        set_flop_counters(state, static_cast<double>(state.iterations() * p.flops), peak);
      if (options.check_finite && p.check_bytes > 0)  // per iteration: the extra read of check before write
        state.counters["check_bytes"] = static_cast<double>(p.check_bytes);
    };
    benchmark::internal::Benchmark* r = benchmark::RegisterBenchmark(b.name.c_str(), body);
    if (b.run.threads == 2) r->UseRealTime();  // the work of both threads, in wall time
  }
}

}  // namespace dsv4cpu::bench
