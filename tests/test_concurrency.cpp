// Concurrent calls: every embedded fixture (fixtures/, every op, passing and failing cases) on
// every available variant, from several threads at once with mixed num_threads, each call's
// outcome (the bytes of every buffer it wrote, or the error it raised) equal to that of a
// single-threaded run. The ThreadSanitizer build (preset tsan) runs this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"
#include "verify/fixture.hpp"
#include "verify/ops.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu {
namespace {

using verify::Case;
using verify::SafetensorsFile;

struct Fixture {
  std::string name;
  SafetensorsFile file;
  const verify::OpAdapter* adapter;
};

// Every fixture whose op the verifier knows, read once.
std::vector<Fixture> load_fixtures() {
  std::vector<Fixture> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(DSV4CPU_FIXTURES_DIR)) {
    if (e.path().extension() != ".safetensors") continue;
    SafetensorsFile file = verify::read_safetensors(e.path().string());
    const auto op = file.metadata.find("op");
    const verify::OpAdapter* adapter =
        op == file.metadata.end() ? nullptr : verify::find_op_adapter(op->second);
    if (adapter != nullptr) out.push_back({e.path().filename().string(), std::move(file), adapter});
  }
  std::sort(out.begin(), out.end(),
            [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  return out;
}

// What one call did: the error it raised ("ShapeError: ...") or the bytes of every buffer.
std::string outcome(const Fixture& f, const Options& o) {
  Case c(f.file);
  Options opts = o;
  std::string result;
  try {
    opts.check_finite = c.boolean("check_finite", true);
    f.adapter->run(c, opts);
  } catch (const Error& e) {
    return std::string(e.kind()) + ": " + e.what();
  } catch (const verify::FixtureError& e) {
    return std::string("fixture: ") + e.what();
  }
  for (const auto& [name, bytes] : c.written()) {
    result += name + ":";
    result.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return result;
}

struct Call {
  const Fixture* fixture;
  std::string variant;
  int threads;
  const std::string* expected;  // the single-threaded outcome of fixture and variant
};

TEST(Concurrency, EveryOpFromSeveralThreadsMatchesSingleThreadedRuns) {
  const std::vector<Fixture> fixtures = load_fixtures();
  ASSERT_GT(fixtures.size(), 20u);
  // Single-threaded outcomes per fixture and available variant, then the calls with mixed
  // thread counts (0: OpenMP's default), twice each, shuffled so that different ops overlap.
  std::vector<std::string> expected;
  expected.reserve(fixtures.size() * 8);
  std::vector<Call> calls;
  std::vector<std::string> ops_seen;
  for (const Fixture& f : fixtures) {
    for (const OpInfo& op : registered_ops()) {
      if (op.name != f.adapter->name) continue;
      ops_seen.push_back(op.name);
      for (const VariantInfo& v : op.variants) {
        if (!v.available) continue;
        Options o;
        o.variant = v.name;
        o.num_threads = 1;
        expected.push_back(outcome(f, o));
        for (int repeat = 0; repeat < 2; ++repeat)
          for (int threads : {0, 1, 2, 3}) calls.push_back({&f, v.name, threads, &expected.back()});
      }
    }
  }
  std::sort(ops_seen.begin(), ops_seen.end());
  ops_seen.erase(std::unique(ops_seen.begin(), ops_seen.end()), ops_seen.end());
  EXPECT_GE(ops_seen.size(), 20u);
  std::shuffle(calls.begin(), calls.end(), std::mt19937_64(10));

  std::atomic<size_t> next{0};
  std::mutex mismatch_mutex;
  std::vector<std::string> mismatches;
  const auto worker = [&] {
    for (size_t i = next++; i < calls.size(); i = next++) {
      const Call& c = calls[i];
      Options o;
      o.variant = c.variant;
      o.num_threads = c.threads;
      if (outcome(*c.fixture, o) != *c.expected) {
        const std::lock_guard<std::mutex> lock(mismatch_mutex);
        mismatches.push_back(c.fixture->name + " " + c.variant + " num_threads " +
                             std::to_string(c.threads));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(mismatches.empty()) << mismatches.size() << " calls differ from their "
                                  << "single-threaded run, e.g. " << mismatches.front();
  EXPECT_GT(calls.size(), 400u);
}

}  // namespace
}  // namespace dsv4cpu
