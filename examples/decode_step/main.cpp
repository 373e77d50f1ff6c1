// decode_step: one C4A attention layer step of DeepSeek-V4 for a batch of decode requests, through
// an installed dsv4cpu. The calls and the buffers they read and write are in layer_step.cpp, in
// the order an engine makes them; this program sets up the batch, runs the step a few times and
// prints the time per step with the share of every call.
//
//   decode_step --batch 8 --context 32768 --heads 64 --threads 1 --impl optimized
//   decode_step --impl optimized --variant sparse_mla_attention=ref   (one op's variant by name)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/numerics.hpp"
#include "layer_step.hpp"

namespace {

// "hwy:AVX3" for a Highway variant (the target it dispatches to), else the variant's name.
std::string variant_label(std::string_view op, const dsv4cpu::Options& options) {
  const std::string name = dsv4cpu::selected_variant(op, options);
  for (const dsv4cpu::OpInfo& info : dsv4cpu::registered_ops())
    if (info.name == op)
      for (const dsv4cpu::VariantInfo& v : info.variants)
        if (v.name == name && v.highway) return name + ":" + v.target;
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  decode_step::Shape shape;
  decode_step::StepOptions options;
  std::string impl = "optimized";
  std::vector<std::string> variants;
  int steps = 10;

  CLI::App app{"One C4A attention layer step of DeepSeek-V4 for a batch of decode requests.",
               "decode_step"};
  app.add_option("-b,--batch", shape.batch, "decode requests (one token each)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("-c,--context", shape.context, "seq_len of the longest request after the step")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--heads", shape.heads, "attention heads: 64 (V4-Flash) or 128 (V4-Pro)")
      ->check(CLI::IsMember({64, 128}))
      ->capture_default_str();
  app.add_option("-t,--threads", options.threads, "threads of the parallel variants")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--impl", impl, "variant role for every op")
      ->check(CLI::IsMember({"optimized", "reference", "best"}))
      ->capture_default_str();
  app.add_option("--variant", variants, "OP=NAME: run op OP with the registry variant NAME");
  app.add_option("--steps", steps, "steps timed (after one untimed warm-up step)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  options.impl = impl == "reference" ? dsv4cpu::Impl::reference
                 : impl == "best"    ? dsv4cpu::Impl::best
                                     : dsv4cpu::Impl::optimized;
  for (const std::string& v : variants) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "--variant %s: expected OP=NAME\n", v.c_str());
      return 2;
    }
    options.variants[v.substr(0, eq)] = v.substr(eq + 1);
  }

  try {
    decode_step::LayerStep step(shape);
    step.run(options);  // warm-up: first touch of every buffer
    decode_step::Timing timing;
    std::vector<double> seconds;
    for (int i = 0; i < steps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      step.run(options, &timing);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }

    // The attention output must be finite: the step's data has no NaN code and no empty row.
    int64_t non_finite = 0;
    for (uint16_t v : step.out) non_finite += std::isfinite(dsv4cpu::bf16_to_f32(v)) ? 0 : 1;

    double mean = 0;
    for (double s : seconds) mean += s / steps;
    std::printf("C4A layer step: %lld decode requests, seq_len %lld..%lld, %lld heads, impl %s, "
                "%d thread(s)\n",
                static_cast<long long>(shape.batch),
                static_cast<long long>(*std::min_element(step.seq_lens.begin(),
                                                         step.seq_lens.end())),
                static_cast<long long>(shape.context), static_cast<long long>(shape.heads),
                impl.c_str(), options.threads);
    std::printf("indexer: %s\n",
                step.short_context
                    ? "short context (every compressed length <= 512): identity rows"
                    : "fp8_paged_mqa_logits over each request's compressed entries, top-512");
    std::printf("time per step: %.3f ms (mean of %d step(s) after one warm-up; fastest %.3f ms)\n\n",
                1e3 * mean, steps, 1e3 * *std::min_element(seconds.begin(), seconds.end()));
    std::printf("%-36s %-24s %12s %7s\n", "call", "variant", "ms/step", "share");
    for (const decode_step::Timing::Entry& e : timing.calls) {
      const std::string_view op = decode_step::op_of(e.call);
      std::printf("%-36s %-24s %12.4f %6.1f%%\n", e.call.c_str(),
                  variant_label(op, options.for_op(op)).c_str(),
                  1e3 * e.seconds / static_cast<double>(timing.steps),
                  100 * e.seconds / timing.total());
    }
    std::printf("\nattention output: %lld x %lld rows, %s\n", static_cast<long long>(step.T),
                static_cast<long long>(shape.heads),
                non_finite == 0 ? "all finite" : "NOT FINITE");
    return non_finite == 0 ? 0 : 1;
  } catch (const dsv4cpu::Error& e) {
    std::fprintf(stderr, "dsv4cpu: %s\n", e.what());
    return 1;
  }
}
