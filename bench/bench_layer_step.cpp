// layer_step/<ref|opt>/<shape>: one C4A attention layer step for a batch of decode requests
// (examples/decode_step/layer_step.cpp), every op run by its reference (`ref`, Impl::reference) or
// by its first optimized variant this CPU offers (`opt`, Impl::optimized). Shapes:
// decode<B>_ctx<N>_h<H>, B requests of one token at seq_len N (N - b % 4 for request b), H heads.
// The time is per step; one counter per call of the step gives its seconds per step. Every
// iteration replays the same step (the ops write the same bytes each time).
#include <string>
#include <tuple>

#include "bench_util.hpp"
#include "layer_step.hpp"

namespace dsv4cpu::bench {

void register_layer_step() {
  struct StepShape {
    const char* name;
    decode_step::Shape shape;
  };
  static const StepShape shapes[] = {{"decode1_ctx32K_h64", {1, 32768, 64, 1}},
                                     {"decode8_ctx32K_h64", {8, 32768, 64, 1}},
                                     {"decode8_ctx32K_h128", {8, 32768, 128, 1}}};
  for (const StepShape& s : shapes)
    for (const auto& [variant, impl, threads] :
         {std::tuple{"ref", Impl::reference, 1}, {"opt", Impl::optimized, 1},
          {"opt", Impl::optimized, 2}}) {
      std::string name = std::string("layer_step/") + variant + "/" + s.name;
      if (threads == 2) name += "/threads:2";
      decode_step::StepOptions options;
      options.impl = impl;
      options.threads = threads;
      const decode_step::Shape shape = s.shape;
      benchmark::internal::Benchmark* r =
          benchmark::RegisterBenchmark(name.c_str(), [shape, options](benchmark::State& state) {
            decode_step::LayerStep step(shape);
            decode_step::Timing timing;
            for (auto _ : state) step.run(options, &timing);
            for (const decode_step::Timing::Entry& e : timing.calls)
              state.counters[e.call] =
                  benchmark::Counter(e.seconds, benchmark::Counter::kAvgIterations);
          });
      if (threads == 2) r->UseRealTime();
    }
}

}  // namespace dsv4cpu::bench
