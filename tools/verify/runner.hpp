// Runs the cases of one fixture file on the selected variants of its op.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsv4cpu::verify {

enum class ImplMode { reference, optimized, all };

struct CaseResult {
  std::string op;       // "?" when the file names none
  std::string name;     // path relative to the searched folder, or the file name
  std::string variant;  // "ref", "hwy:AVX3", "ref (no optimized variant)", "-" when nothing ran
  bool pass = false;
  std::string detail;  // worst difference, or the failure reason
  std::string error;   // what() of the exception the op raised, if any
};

struct FileResult {
  std::vector<CaseResult> cases;      // one per variant that ran (one when the file is unusable)
  std::vector<std::string> warnings;  // unused metadata keys, once per file
};

FileResult run_fixture_file(const std::string& path, const std::string& name, ImplMode mode);
// The same for a file image in memory.
FileResult run_fixture_image(const uint8_t* data, size_t size, const std::string& name,
                             ImplMode mode);

// The variant label used on result lines: the registry name, plus ":<target>" when the registry
// reports one (e.g. "hwy:AVX3").
std::string variant_label(const std::string& name, const std::string& target);

}  // namespace dsv4cpu::verify
