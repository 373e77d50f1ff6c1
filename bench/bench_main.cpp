// dsv4cpu-bench: the registry's benchmarks (bench_runs.cpp), the layer step (bench_layer_step.cpp)
// and the rooflines (bench_stream.cpp, bench_roof_amx.cpp, bench_roof_vector.cpp).
#include <algorithm>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

// avx512bf16_roof and avx3_roof where a run of their target is listed.
void register_vector_roofs() {
  using dsv4cpu::bench::BenchRun;
  const std::vector<BenchRun> runs = dsv4cpu::bench::benchmark_runs();
  const auto listed = [&runs](bool (*match)(const std::string&)) {
    return std::any_of(runs.begin(), runs.end(),
                       [match](const BenchRun& b) { return match(b.run.target); });
  };
  if (listed([](const std::string& t) { return t == "AVX512_BF16"; }))
    benchmark::RegisterBenchmark("avx512bf16_roof", &dsv4cpu::bench::avx512bf16_roof);
  if (listed([](const std::string& t) { return t.rfind("AVX3", 0) == 0; }))
    benchmark::RegisterBenchmark("avx3_roof", &dsv4cpu::bench::avx3_roof);
}

}  // namespace

int main(int argc, char** argv) {
  dsv4cpu::bench::register_benchmarks();
  dsv4cpu::bench::register_layer_step();
  dsv4cpu::bench::register_rooflines();
  dsv4cpu::bench::register_amx_roofline();
  register_vector_roofs();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
