// Runs the cases of one fixture file on the selected variants of its op.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsv4cpu/options.hpp"
#include "testing/contracts.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu::verify {

enum class ImplMode { reference, optimized, all };

// How a case and variant ended. A failure: the library's result, or the error it raised, is not
// the fixture's. An error: the case could not be judged (a malformed or inconsistent file, an
// exception nobody expected). Skipped: the variant cannot run on this machine (an absent ISA that
// nothing requires; a required one is a failure).
enum class Outcome : uint8_t { passed, failed, error, skipped };

struct CaseResult {
  std::string op;       // "?" when the file names none
  std::string name;     // path relative to the searched folder, or the file name
  std::string variant;  // "ref", "hwy:AVX3", "ref (no optimized variant)", "-" when nothing ran
  Outcome outcome = Outcome::error;
  // For a failure or an error, its type: failures "mismatch", "wrong_exception",
  // "no_exception", "written_before_exception", "isa_required"; errors "malformed_file",
  // "unreadable_file", "fixture", "comparison", "exception", or the class of an unexpected
  // dsv4cpu::Error ("ShapeError", ...).
  std::string type;
  std::string detail;    // worst difference, or the failure reason
  std::string error;     // what() of the exception the op raised, if any
  double seconds = 0.0;  // the run and its comparison
  bool passed() const { return outcome == Outcome::passed; }
};

// "PASS", "FAIL", "ERROR", "SKIP".
const char* outcome_name(Outcome o);

struct FileResult {
  std::vector<CaseResult> cases;      // one per variant that ran (one when the file is unusable)
  std::vector<std::string> warnings;  // unused metadata keys, once per file
};

FileResult run_fixture_file(const std::string& path, const std::string& name, ImplMode mode);
// The same for a file image in memory.
FileResult run_fixture_image(const uint8_t* data, size_t size, const std::string& name,
                             ImplMode mode);

// Results of another implementation of a fixture's op (the PyTorch bindings, an engine's kernel),
// named like the fixture's expected.* tensors. The op's adapter binds the inputs and comparison
// contracts and the library runs once (Impl::best): it validates the inputs the contracts read.
// Then `results` replace the library's outputs and are compared; every expected.* tensor must
// have its result. Inputs the library rejects fail the verdict; a malformed fixture throws
// FixtureError (or std::invalid_argument for a bad "compare" override).
testing::Verdict check_results(const SafetensorsFile& file,
                               const std::map<std::string, Tensor>& results);
// The library's own results for a fixture under `options` (check_finite from the fixture):
// every in-place buffer, output and returned array of the op's adapter. Throws what the op throws.
std::map<std::string, Tensor> library_results(const SafetensorsFile& file, Options options);

// The variant label used on result lines: the registry name, plus ":<target>" when the registry
// reports one (e.g. "hwy:AVX3").
std::string variant_label(const std::string& name, const std::string& target);

}  // namespace dsv4cpu::verify
