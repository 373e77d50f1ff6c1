// Helpers shared by the benchmark files. Each area's bench/bench_<area>.cpp lists its cases
// (<area>_cases: one per op and shape); bench_runs.cpp turns every case into one run per variant
// of testing::runs (the registry decides, so a new variant needs no benchmark edit) and registers
// them with Google Benchmark, in dsv4cpu-bench's main (bench_main.cpp).
//
// Naming: `<op>/<variant>/<shape>` runs on one thread (Options::num_threads = 1) and is timed in
// CPU time; `<op>/<variant>/<shape>/threads:2/real_time` (variants other than the reference) runs
// on two threads and is timed in wall-clock time; `<op>/<variant>/<shape>/unchecked` (variants
// other than the reference, ops with finiteness checks) runs one thread with
// Options::check_finite = false, so that the checks' share of the time shows. Every run reports
// bytes/s from SetBytesProcessed(bytes read + bytes written per iteration) and its traffic kind as
// the label `traffic=read|copy|write`: the roofline it is compared with, `stream_<kind>/<bytes>`
// (bench_stream.cpp) at the same thread count.
#pragma once
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dsv4cpu/options.hpp"
#include "testing/runs.hpp"

namespace dsv4cpu::bench {

// One iteration of an op on prepared data, with the given options.
using Iteration = std::function<void(const Options&)>;

// How an op moves its bytes, and so which roofline it is compared with: mostly reads (its output
// is small against its inputs), a copy (about as many bytes written as read), or writes only.
enum class Traffic { read, copy, write };
const char* traffic_name(Traffic t);

// What a shape prepares: the iteration and the bytes it reads and writes.
struct Prepared {
  Iteration run;
  int64_t bytes = 0;  // read + written per iteration
  int64_t items = 0;  // optional: work items per iteration (e.g. emitting tokens), 0 = none
  int64_t flops = 0;  // optional: arithmetic operations per iteration (compute-bound ops), 0 = none
  // Optional: bytes a checked run's finiteness checks read before the op moves `bytes` (check
  // before write reads those inputs once more); the run reports them as the counter
  // "check_bytes", and its roof adds their time at the stream_read roofline. 0 = none.
  int64_t check_bytes = 0;
};

// Builds the data of a shape (called once per registered run, outside the timed loop).
using Prepare = std::function<Prepared()>;

// One benchmark shape of an op.
struct Case {
  std::string op, shape;
  Prepare prepare;
  Traffic traffic = Traffic::read;
  bool finite_checks = false;  // the op has checks that Options::check_finite turns off
  bool reference = true;  // false: no run of the reference (too slow at this shape)
};
using Cases = std::vector<Case>;

// The cases of each area, in registration order (bench_<area>.cpp).
void compressor_cases(Cases& out);
void indexer_cases(Cases& out);
void metadata_cases(Cases& out);
void attention_cases(Cases& out);

// A benchmark of the suite: its name, its case and the run (variant, thread count) it times.
struct BenchRun {
  std::string name;
  Case bench_case;
  testing::Run run;
  bool unchecked = false;
};
// Every benchmark, without registering or running anything: each case on the dispatched target
// of every available variant (with DSV4CPU_BENCH_EVERY_TARGET set in the environment: a Highway
// variant once per target compiled in and supported here, named <variant>:<target>), with 1
// thread and (but the reference) 2, and (but the reference) unchecked on 1 thread when the case
// has finiteness checks.
std::vector<BenchRun> benchmark_runs();
// FLOP per cycle and core of the instructions a run's target computes with (Run::target: the
// Highway target or the fixed ISA, "" for scalar code): the compute roof of the "peak_share"
// counter, two FMA pipes where the ISA has them.
double peak_flops_per_cycle(const std::string& target);
// Registers benchmark_runs() with Google Benchmark.
void register_benchmarks();
// Registers layer_step/... (bench_layer_step.cpp): one C4A layer step, reference and optimized.
void register_layer_step();
// Registers the rooflines stream_read, stream_copy and stream_write (bench_stream.cpp).
void register_rooflines();
// The counters of a compute-bound benchmark: "flops" (`flops` in all, as a rate), the roof
// "peak_flops" (FLOP/s) and "peak_share", flops over that roof (a rate, so a fraction).
void set_flop_counters(benchmark::State& state, double flops, double peak_flops);
// The compute roofs, measured: amx_roof (bench_roof_amx.cpp, TDPBF16PS on resident tiles),
// avx512bf16_roof and avx3_roof (bench_roof_vector.cpp, VDPBF16PS and VFMADD231PS on zmm
// registers), avx2_roof (VFMADD231PS on ymm registers); bench_main.cpp registers each where a run
// of its target is listed.
void amx_roof(benchmark::State& state);
// amx_roof's products with their tiles loaded as the kernels' 2 × 2 blocks load them, the A tiles
// from state.range(0) bytes (bench_roof_amx.cpp).
void amx_loaded_roof(benchmark::State& state);
// The AMX unit's rate now, FLOP/s: amx_roof's products, 4096 of them, timed once on the calling
// thread. Only where the amx variants run.
double amx_unit_flops();
void avx512bf16_roof(benchmark::State& state);
void avx3_roof(benchmark::State& state);
void avx2_roof(benchmark::State& state);

// ---- data ----

// Zero-initialised storage, 2 MiB aligned and backed by transparent huge pages when the kernel
// grants them (as engines allocate their multi-GB caches): the paged caches are read in scattered
// 2-4 KB segments, which on 4 KB pages would measure TLB walks rather than the kernels.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n)
      : n_(n), p_(static_cast<T*>(std::aligned_alloc(kHugePage, round_up(n)))) {
    madvise(p_.get(), round_up(n), MADV_HUGEPAGE);
    std::memset(p_.get(), 0, round_up(n));
  }
  T* data() const { return p_.get(); }
  size_t size() const { return n_; }
  T& operator[](size_t i) const { return p_.get()[i]; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static size_t round_up(size_t n) {
    return (std::max<size_t>(n, 1) * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
  }
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  size_t n_ = 0;
  std::unique_ptr<T, Free> p_;
};

// Deterministic N(0, sigma) values.
inline void fill_normal(float* x, size_t n, float sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  for (size_t i = 0; i < n; ++i) x[i] = dist(rng);
}

// A random permutation of [0, n): physical pages of a paged cache as a real allocator hands
// them out (not contiguous).
inline std::vector<int64_t> shuffled_pages(int64_t n, uint64_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return v;
}

// Batch shapes shared by the areas: `decode<B>` (B requests with one token each) and
// `prefill<T>` (one request of T tokens from position 0).
struct BatchShape {
  std::string name;
  int64_t requests;
  int64_t tokens_per_request;
};
inline const std::vector<BatchShape>& batch_shapes() {
  static const std::vector<BatchShape> shapes = {
      {"decode1", 1, 1}, {"decode8", 8, 1}, {"decode64", 64, 1}, {"prefill4096", 1, 4096}};
  return shapes;
}

}  // namespace dsv4cpu::bench
