// The benchmark list, derived from the registry through testing::runs.
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

std::vector<BenchRun> benchmark_runs() {
  Cases cases;
  compressor_cases(cases);
  indexer_cases(cases);
  metadata_cases(cases);
  attention_cases(cases);
  const testing::Plan plan{true, std::nullopt, false, {1, 2}};
  std::vector<BenchRun> out;
  for (const Case& c : cases)
    for (const testing::Run& run : testing::runs(c.op, plan).runs) {
      const bool reference = run.variant.role == Role::reference;
      if (reference && (run.threads == 2 || !c.reference)) continue;
      const std::string name = c.op + "/" + run.variant.name + "/" + c.shape;
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
    auto body = [prepare, options, label](benchmark::State& state) {
      const Prepared p = prepare();
      for (auto _ : state) p.run(options);
      state.SetBytesProcessed(state.iterations() * p.bytes);
      state.SetLabel(label);
      if (p.items > 0) state.SetItemsProcessed(state.iterations() * p.items);
      if (p.flops > 0)  // "flops": FLOP/s, compared with the ISA's peak by the dashboard
        state.counters["flops"] = benchmark::Counter(
            static_cast<double>(state.iterations() * p.flops), benchmark::Counter::kIsRate);
      if (options.check_finite && p.check_bytes > 0)  // per iteration: the extra read of check before write
        state.counters["check_bytes"] = static_cast<double>(p.check_bytes);
    };
    benchmark::internal::Benchmark* r = benchmark::RegisterBenchmark(b.name.c_str(), body);
    if (b.run.threads == 2) r->UseRealTime();  // the work of both threads, in wall time
  }
}

}  // namespace dsv4cpu::bench
