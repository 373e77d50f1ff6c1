// dsv4cpu-verify: runs dsv4cpu-fixture/1 files (fixtures.md) through the library and compares
// the results with the recorded ones under each op's contract (numerics.md §11).
//
//   dsv4cpu-verify [--impl reference|optimized|all] [--report json|junit FILE]... PATH...
//   dsv4cpu-verify --list
//
// One line per case and variant: op, case, variant, PASS/FAIL/ERROR/SKIP, worst difference or
// reason; the last line is "N passed, N failed" (an error counts as failed), then ", N skipped"
// when a variant could not run here. Exit status 0 only when at least one case ran and none failed;
// a run that finds no fixture, or a PATH that does not exist, fails.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dsv4cpu/options.hpp"
#include "verify/ops.hpp"
#include "verify/report.hpp"
#include "verify/runner.hpp"

namespace fs = std::filesystem;
using namespace dsv4cpu;
using namespace dsv4cpu::verify;

namespace {

struct Fixture {
  std::string path, name;
  std::string error;  // why the path could not be read (one failed case), else empty
};

// The *.safetensors files under `dir`, recursively (symbolic links to folders are not followed);
// an entry or folder that cannot be read becomes a Fixture with its error. Only regular files
// (or symbolic links to them) are taken: FIFOs, devices and sockets are skipped, never opened.
void scan(const fs::path& root, const fs::path& dir, std::vector<Fixture>* found) {
  const auto name = [&](const fs::path& p) { return p.lexically_relative(root).generic_string(); };
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code entry_ec;
    if (it->symlink_status(entry_ec).type() == fs::file_type::directory) {
      scan(root, p, found);
    } else if (p.extension() == ".safetensors") {
      const bool regular = it->is_regular_file(entry_ec);  // follows links: loops fail here
      if (entry_ec)
        found->push_back({p.string(), name(p), "cannot read: " + entry_ec.message()});
      else if (regular)
        found->push_back({p.string(), name(p), ""});
    }
  }
  if (ec) found->push_back({dir.string(), name(dir), "cannot read folder: " + ec.message()});
}

// Files as given (a FIFO, device or socket is refused); folders searched recursively for
// *.safetensors, sorted by relative path.
bool collect(const std::string& arg, std::vector<Fixture>* out) {
  std::error_code ec;
  const fs::file_status st = fs::status(arg, ec);
  if (fs::is_regular_file(st)) {
    out->push_back({arg, fs::path(arg).filename().string(), ""});
    return true;
  }
  if (!fs::is_directory(st)) {
    std::cerr << "dsv4cpu-verify: "
              << (ec && ec != std::errc::no_such_file_or_directory
                      ? "cannot read " + arg + ": " + ec.message()
                  : fs::exists(st) ? "not a regular file or folder: " + arg
                                   : "no such file or folder: " + arg)
              << "\n";
    return false;
  }
  std::vector<Fixture> found;
  scan(arg, arg, &found);
  std::sort(found.begin(), found.end(),
            [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  out->insert(out->end(), found.begin(), found.end());
  return true;
}

void print_registry() {
  const std::vector<OpInfo> ops = registered_ops();
  for (const OpInfo& op : ops) {
    std::string line = op.name + ":";
    for (const VariantInfo& v : op.variants)
      line += " " + variant_label(v.name, v.target) +
              (v.available ? " (available)" : " (unavailable)") +
              (&v == &op.variants.back() ? "" : ",");
    if (find_op_adapter(op.name) == nullptr) line += "  [no fixture adapter]";
    std::cout << line << "\n";
  }
  for (const OpAdapter& a : op_adapters()) {
    const bool registered = std::any_of(ops.begin(), ops.end(),
                                        [&](const OpInfo& op) { return op.name == a.name; });
    if (!registered) std::cout << a.name << ": [fixture adapter, not in the registry]\n";
  }
}

// Text from a fixture (file names, op names, messages) with control characters shown as '?', so
// that no file can forge result lines or send terminal escapes.
std::string printable(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) ch = '?';
  return s;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::cerr << "dsv4cpu-verify: cannot write report " << path << "\n";
  return static_cast<bool>(out);
}

}  // namespace

// Per-op summary: cases passed and failed per op, with the variants that ran.
static void print_op_table(const std::vector<CaseResult>& results, size_t width) {
  struct Row {
    size_t passed = 0, failed = 0;
    std::set<std::string> variants;
  };
  std::map<std::string, Row> rows;
  for (const CaseResult& r : results) {
    Row& row = rows[r.op];
    if (r.outcome == Outcome::skipped) continue;
    (r.passed() ? row.passed : row.failed) += 1;
    row.variants.insert(r.variant);
  }
  std::cout << "\n" << std::left << std::setw(static_cast<int>(width)) << "op" << "  passed  failed  variants\n";
  for (const auto& [op, row] : rows) {
    std::string variants;
    for (const std::string& v : row.variants) variants += (variants.empty() ? "" : ", ") + v;
    std::cout << std::left << std::setw(static_cast<int>(width)) << printable(op) << "  "
              << std::right << std::setw(6) << row.passed << "  " << std::setw(6) << row.failed
              << "  " << variants << "\n";
  }
  std::cout << "\n";
}

int main(int argc, char** argv) {
  CLI::App app{"Checks dsv4cpu against dsv4cpu-fixture/1 safetensors files.", "dsv4cpu-verify"};
  std::string impl = "all";
  std::vector<std::pair<std::string, std::string>> reports;
  std::vector<std::string> paths;
  bool list = false;
  app.add_option("--impl", impl,
                 "reference: the reference variant; optimized: the preferred variant (the "
                 "reference when the op has no other); all: every available variant, a Highway "
                 "variant on every Highway target compiled in")
      ->check(CLI::IsMember({"reference", "optimized", "all"}))
      ->capture_default_str();
  app.add_option("--report", reports, "write a report: json FILE or junit FILE (repeatable)")
      ->check(CLI::IsMember({"json", "junit"}).application_index(0))
      ->allow_extra_args(false)
      ->type_name("json|junit FILE");
  app.add_flag("--list", list, "print every registered op and its variants, then exit");
  app.add_option("PATH", paths, "fixture files, or folders searched recursively for *.safetensors");
  CLI11_PARSE(app, argc, argv);

  if (list) {
    print_registry();
    return 0;
  }
  if (paths.empty()) {
    std::cerr << "dsv4cpu-verify: no PATH given\n" << app.help();
    return 2;
  }
  const ImplMode mode = impl == "reference"   ? ImplMode::reference
                        : impl == "optimized" ? ImplMode::optimized
                                              : ImplMode::all;
  std::vector<Fixture> fixtures;
  bool paths_ok = true;
  for (const std::string& p : paths) paths_ok = collect(p, &fixtures) && paths_ok;
  if (fixtures.empty()) std::cerr << "dsv4cpu-verify: no *.safetensors fixtures found\n";

  size_t width = 0;
  for (const OpAdapter& a : op_adapters()) width = std::max(width, std::string(a.name).size());
  std::vector<CaseResult> results;
  size_t passed = 0, skipped = 0;
  for (const Fixture& f : fixtures) {
    const FileResult fr = f.error.empty() ? run_fixture_file(f.path, f.name, mode)
                                          : FileResult{{{"?", f.name, "-", Outcome::error, "unreadable_file", f.error, "", 0.0}}, {}};
    for (const std::string& w : fr.warnings)
      std::cerr << "warning: " << printable(f.name) << ": " << printable(w) << "\n";
    for (const CaseResult& r : fr.cases) {
      std::string op = r.op;
      op.resize(std::max(width, op.size()), ' ');
      std::cout << printable(op) << "  " << printable(r.name) << "  " << r.variant << "  "
                << outcome_name(r.outcome) << "  " << printable(r.detail) << std::endl;
      passed += r.passed() ? 1 : 0;
      skipped += r.outcome == Outcome::skipped ? 1 : 0;
      results.push_back(r);
    }
  }
  const size_t failed = results.size() - passed - skipped;
  print_op_table(results, width);
  std::cout << passed << " passed, " << failed << " failed"
            << (skipped ? ", " + std::to_string(skipped) + " skipped" : std::string()) << std::endl;

  bool reports_ok = true;
  for (const auto& [kind, file] : reports)
    reports_ok = write_file(file, kind == "json" ? json_report(results) : junit_report(results)) &&
                 reports_ok;
  return failed == 0 && passed > 0 && paths_ok && reports_ok ? 0 : 1;
}
