// dsv4cpu-bench: the registry's benchmarks (bench_runs.cpp), the layer step (bench_layer_step.cpp)
// and the rooflines (bench_stream.cpp, bench_roof_amx.cpp, bench_roof_vector.cpp).
#include <algorithm>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

// Each compute roof where a run of its target is listed: amx_roof and amx_loaded_roof (its A tiles
// from 16 KiB and from 256 KiB) where the amx variants run, avx512bf16_roof, avx3_roof and
// avx2_roof where a run of AVX512_BF16, of an AVX3 target or of AVX2 is.
void register_compute_roofs() {
  using dsv4cpu::bench::BenchRun;
  struct Roof {
    const char* name;
    void (*body)(benchmark::State&);
    bool (*of)(const std::string& target);
    const char* arg_name = nullptr;  // and its values, one benchmark each
    std::vector<int64_t> args = {};
  };
  const Roof roofs[] = {
      {"amx_roof", &dsv4cpu::bench::amx_roof, [](const std::string& t) { return t == "AMX_BF16"; }},
      {"amx_loaded_roof", &dsv4cpu::bench::amx_loaded_roof,
       [](const std::string& t) { return t == "AMX_BF16"; }, "a_bytes", {16 << 10, 256 << 10}},
      {"avx512bf16_roof", &dsv4cpu::bench::avx512bf16_roof,
       [](const std::string& t) { return t == "AVX512_BF16"; }},
      {"avx3_roof", &dsv4cpu::bench::avx3_roof,
       [](const std::string& t) { return t.rfind("AVX3", 0) == 0; }},
      {"avx2_roof", &dsv4cpu::bench::avx2_roof, [](const std::string& t) { return t == "AVX2"; }},
  };
  const std::vector<BenchRun> runs = dsv4cpu::bench::benchmark_runs();
  for (const Roof& roof : roofs)
    if (std::any_of(runs.begin(), runs.end(),
                    [&roof](const BenchRun& b) { return roof.of(b.run.target); })) {
      benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(roof.name, roof.body);
      if (roof.arg_name != nullptr) b->ArgName(roof.arg_name);
      for (const int64_t arg : roof.args) b->Arg(arg);
    }
}

}  // namespace

int main(int argc, char** argv) {
  dsv4cpu::bench::register_benchmarks();
  dsv4cpu::bench::register_layer_step();
  dsv4cpu::bench::register_rooflines();
  register_compute_roofs();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
