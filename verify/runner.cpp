#include "verify/runner.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"
#include "testing/isa.hpp"
#include "testing/runs.hpp"
#include "verify/fixture.hpp"
#include "verify/ops.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu::verify {

namespace {

constexpr const char* kFormat = "dsv4cpu-fixture/1";

// One call of the op: an enumerated run (--impl all), or the selection by `impl`; and its label.
// A variant that cannot run here (--impl all, an absent fixed ISA) is planned with `absent` set.
struct Planned {
  Impl impl = Impl::best;
  std::optional<testing::Run> run;
  std::string label;
  std::optional<testing::Absence> absent;
};

std::vector<Planned> plan(const std::string& op, ImplMode mode) {
  const std::vector<OpInfo> ops = registered_ops();
  const OpInfo* info = nullptr;
  for (const OpInfo& i : ops)
    if (i.name == op) info = &i;
  const Impl impl = mode == ImplMode::reference ? Impl::reference : Impl::optimized;
  if (info == nullptr || info->variants.empty()) return {{impl, {}, "(unregistered)", {}}};
  if (mode == ImplMode::all) {  // every Highway target, every available variant
    std::vector<Planned> out;
    const testing::RunList list = testing::runs(op);
    for (const testing::Run& run : list.runs) out.push_back({Impl::best, run, run.label(), {}});
    for (const VariantInfo& v : list.absent) {
      testing::RunList one;
      one.absent = {v};
      out.push_back({Impl::best, {}, v.name, testing::absence(op, one)});
    }
    return out;
  }
  Options o;
  o.impl = impl;
  const std::string chosen = selected_variant(op, o);
  for (const VariantInfo& v : info->variants) {
    if (v.name != chosen) continue;
    std::string label = variant_label(v.name, v.target);
    if (mode == ImplMode::optimized && v.name == info->variants.back().name)
      label += info->variants.size() == 1 ? " (no optimized variant)"
                                          : " (no optimized variant available)";
    return {{impl, {}, label, {}}};
  }
  return {{impl, {}, chosen, {}}};
}

// bad-input.md §2: the class named by expected_error, or a subclass of it.
bool is_kind(const Error& e, const std::string& cls) {
  if (cls == "Error") return true;
  if (cls == "ShapeError") return dynamic_cast<const ShapeError*>(&e) != nullptr;
  if (cls == "IndexError") return dynamic_cast<const IndexError*>(&e) != nullptr;
  if (cls == "ValueError") return dynamic_cast<const ValueError*>(&e) != nullptr;
  if (cls == "NonFiniteError") return dynamic_cast<const NonFiniteError*>(&e) != nullptr;
  return false;
}
bool known_kind(const std::string& cls) {
  return cls == "Error" || cls == "ShapeError" || cls == "IndexError" || cls == "ValueError" ||
         cls == "NonFiniteError";
}

// Sets the outcome, its type and the detail.
void judge(CaseResult& r, Outcome outcome, const char* type, std::string detail) {
  r.outcome = outcome;
  r.type = type;
  r.detail = std::move(detail);
}

CaseResult run_once(const SafetensorsFile& file, const OpAdapter& adapter, const Planned& p,
                    const std::string& expected_error, const Tolerance& tol,
                    std::vector<std::string>* unused) {
  CaseResult r;
  r.variant = p.label;
  Case c(file);
  bool raised = false;
  try {
    Options o = p.run ? p.run->options() : Options{};
    o.impl = p.impl;
    o.check_finite = c.boolean("check_finite", true);
    std::optional<testing::ScopedTarget> target;
    if (p.run) target.emplace(*p.run);
    adapter.run(c, o);
  } catch (const FixtureError& e) {
    judge(r, Outcome::error, "fixture", std::string("fixture: ") + e.what());
    return r;
  } catch (const Error& e) {
    raised = true;
    r.error = e.what();
    const std::string kind = e.kind();
    if (expected_error.empty()) {
      judge(r, Outcome::error, e.kind(), kind + ": " + e.what());
    } else if (!is_kind(e, expected_error)) {
      judge(r, Outcome::failed, "wrong_exception",
            "raised " + kind + ", expected " + expected_error + ": " + e.what());
    } else if (const Verdict v = c.check_untouched(); !v.pass) {
      judge(r, Outcome::failed, "written_before_exception", v.detail);
    } else {
      judge(r, Outcome::passed, "",
            kind == expected_error ? kind + " as expected"
                                   : kind + " as expected (a subclass of " + expected_error + ")");
    }
  } catch (const std::exception& e) {
    judge(r, Outcome::error, "exception", std::string("unexpected exception: ") + e.what());
    return r;
  }
  *unused = c.unused_metadata();
  if (raised) return r;
  if (!expected_error.empty()) {
    judge(r, Outcome::failed, "no_exception", "no error raised (expected " + expected_error + ")");
    return r;
  }
  try {
    const Verdict v = c.check(tol);
    judge(r, v.pass ? Outcome::passed : Outcome::failed, v.pass ? "" : "mismatch", v.detail);
  } catch (const std::exception& e) {
    judge(r, Outcome::error, "comparison", std::string("comparison failed: ") + e.what());
  }
  return r;
}

// The adapter of a fixture's op; FixtureError when the file names no known op.
const OpAdapter& adapter_of(const SafetensorsFile& file) {
  const auto op = file.metadata.find("op");
  if (op == file.metadata.end()) throw FixtureError("no __metadata__ \"op\"");
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kFormat)
    throw FixtureError(std::string("__metadata__ \"format\" is not ") + kFormat);
  const OpAdapter* adapter = find_op_adapter(op->second);
  if (adapter == nullptr) throw FixtureError("unknown op '" + op->second + "'");
  return *adapter;
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::passed:
      return "PASS";
    case Outcome::failed:
      return "FAIL";
    case Outcome::error:
      return "ERROR";
    case Outcome::skipped:
      return "SKIP";
  }
  return "?";
}

Verdict check_results(const SafetensorsFile& file, const std::map<std::string, Tensor>& results) {
  const OpAdapter& adapter = adapter_of(file);
  const auto compare = file.metadata.find("compare");
  const Tolerance tol = parse_compare(compare == file.metadata.end() ? "" : compare->second);
  Case c(file);
  try {
    Options o;
    o.check_finite = c.boolean("check_finite", true);
    adapter.run(c, o);
  } catch (const Error& e) {
    return {false, std::string("the inputs fail dsv4cpu's validation, so no contract applies: ") +
                       e.kind() + ": " + e.what()};
  }
  for (const auto& [key, t] : file.tensors) {
    if (key.rfind("expected.", 0) != 0) continue;
    if (results.count(key.substr(9)) == 0)
      return {false, "no result for expected." + key.substr(9)};
  }
  for (const auto& [name, t] : results)
    if (!c.replace(name, t)) return {false, "the op has no output named '" + name + "'"};
  return c.check(tol);
}

std::map<std::string, Tensor> library_results(const SafetensorsFile& file, Options options) {
  const OpAdapter& adapter = adapter_of(file);
  Case c(file);
  options.check_finite = c.boolean("check_finite", true);
  adapter.run(c, options);
  return c.results();
}

std::string variant_label(const std::string& name, const std::string& target) {
  return target.empty() ? name : name + ":" + target;
}

namespace {

// run_fixture_file on the file `load` reads.
FileResult run_loaded(const std::function<SafetensorsFile()>& load, const std::string& name,
                      ImplMode mode) {
  FileResult out;
  const auto fail = [&](const std::string& op, const std::string& why,
                        const char* type = "fixture") {
    CaseResult r;
    r.op = op;
    r.name = name;
    r.variant = "-";
    judge(r, Outcome::error, type, why);
    out.cases.push_back(std::move(r));
    return out;
  };
  SafetensorsFile file;
  try {
    file = load();
  } catch (const SafetensorsError& e) {
    return fail("?", std::string("malformed safetensors: ") + e.what(), "malformed_file");
  }
  const auto meta = [&](const char* key) {
    const auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  const std::string op = meta("op");
  if (op.empty()) return fail("?", "no __metadata__ \"op\"");
  if (meta("format") != kFormat)
    return fail(op, "__metadata__ \"format\" is '" + meta("format") + "' (expected " + kFormat + ")");
  const OpAdapter* adapter = find_op_adapter(op);
  if (adapter == nullptr) return fail(op, "unknown op '" + op + "'");
  Tolerance tol;
  try {
    tol = parse_compare(meta("compare"));
  } catch (const std::invalid_argument& e) {
    return fail(op, std::string("bad \"compare\" override: ") + e.what());
  }
  const std::string expected_error = meta("expected_error");
  if (!expected_error.empty() && !known_kind(expected_error))
    return fail(op, "expected_error '" + expected_error +
                        "' is not Error, ShapeError, IndexError, ValueError or NonFiniteError");
  std::vector<Planned> runs;
  try {
    runs = plan(op, mode);
  } catch (const std::exception& e) {
    return fail(op, std::string("variant selection: ") + e.what());
  }
  if (runs.empty())
    return fail(op, "no variant of the op is available on this machine", "no_variant");
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> unused;
    CaseResult r;
    if (runs[i].absent) {
      r.variant = runs[i].label;
      if (runs[i].absent->required)
        judge(r, Outcome::failed, "isa_required", runs[i].absent->message);
      else
        judge(r, Outcome::skipped, "", runs[i].absent->message);
    } else {
      const auto start = std::chrono::steady_clock::now();
      r = run_once(file, *adapter, runs[i], expected_error, tol, &unused);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    r.op = op;
    r.name = name;
    out.cases.push_back(std::move(r));
    if (i == 0)
      for (const std::string& key : unused)
        out.warnings.push_back("metadata key '" + key + "' is not an argument of " + op +
                               "; ignored");
  }
  return out;
}

}  // namespace

FileResult run_fixture_file(const std::string& path, const std::string& name, ImplMode mode) {
  return run_loaded([&] { return read_safetensors(path); }, name, mode);
}

FileResult run_fixture_image(const uint8_t* data, size_t size, const std::string& name,
                             ImplMode mode) {
  return run_loaded([&] { return parse_safetensors(data, size); }, name, mode);
}

}  // namespace dsv4cpu::verify
