// dsv4cpu-bench: the registry's benchmarks (bench_runs.cpp), the layer step (bench_layer_step.cpp)
// and the rooflines (bench_stream.cpp, bench_roof_amx.cpp).
#include "bench_util.hpp"

int main(int argc, char** argv) {
  dsv4cpu::bench::register_benchmarks();
  dsv4cpu::bench::register_layer_step();
  dsv4cpu::bench::register_rooflines();
  dsv4cpu::bench::register_amx_roofline();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
