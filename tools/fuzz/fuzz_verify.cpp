// libFuzzer target, end to end: any file through the verifier's runner on every variant and
// Highway target the run enumerator lists (dsv4cpu-verify --impl all). Whatever the file holds,
// each case ends with a verdict: no crash, no hang, no sanitizer report, no unbounded allocation,
// and no exception other than the library's typed errors and the verifier's own.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "verify/runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsv4cpu::verify;
  for (const CaseResult& r : run_fixture_image(data, size, "fuzz", ImplMode::all).cases)
    for (const char* prefix : {"unexpected exception", "comparison failed"})
      if (r.detail.rfind(prefix, 0) == 0) {
        std::fprintf(stderr, "%s %s: %s\n", r.op.c_str(), r.variant.c_str(), r.detail.c_str());
        std::abort();
      }
  return 0;
}
