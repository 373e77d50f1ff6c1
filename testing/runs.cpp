#include "testing/runs.hpp"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace dsv4cpu::testing {
namespace {

int64_t forced_bits = 0;  // the target ScopedTarget forces now (0: none)
const RunSelection* selection = nullptr;  // the ScopedSelection in force
int64_t entered_runs = 0;                 // its runs entered so far

bool matches(const Run& run) {
  return run.variant.name == selection->variant && run.target == selection->target &&
         (!selection->threads || run.threads == *selection->threads);
}

void force(int64_t bits) {
  forced_bits = bits;
  hwy::SetSupportedTargetsForTest(bits);
}

// The Highway targets compiled into the library (this file is built with the library's
// HWY_TARGETS) and supported by this CPU, best first, listed with dispatch as usual.
const std::vector<std::pair<int64_t, std::string>>& highway_targets() {
  static const std::vector<std::pair<int64_t, std::string>> targets = [] {
    const int64_t saved = forced_bits;
    force(0);
    std::vector<std::pair<int64_t, std::string>> t;
    for (int64_t bits : hwy::SupportedAndGeneratedTargets())
      t.emplace_back(bits, hwy::TargetName(bits));
    force(saved);
    return t;
  }();
  return targets;
}

const OpInfo& op_info(const std::vector<OpInfo>& ops, const std::string& op) {
  for (const OpInfo& info : ops)
    if (info.name == op) return info;
  throw std::invalid_argument("no registered op " + op);
}

bool selected(const VariantInfo& v, const Plan& plan) {
  if (!plan.reference && v.role == Role::reference) return false;
  return !plan.isa || v.isa == *plan.isa;
}

}  // namespace

Options Run::options() const {
  Options o;
  o.variant = variant.name;
  o.num_threads = threads;
  return o;
}

std::string Run::label() const {
  std::string s = target.empty() ? variant.name : variant.name + ":" + target;
  if (threads > 0) s += " " + std::to_string(threads) + "t";
  return s;
}

std::string Run::path() const { return run_path(op, variant.name, target, {threads}); }

std::string run_path(const std::string& op, const std::string& variant, const std::string& target,
                     const std::vector<int>& threads) {
  std::string t;
  for (int n : threads) t += (t.empty() ? "" : "+") + (n > 0 ? std::to_string(n) : "auto");
  return op + "/" + variant + "/" + (target.empty() ? "baseline" : target) + "/" + t;
}

RunList runs(const std::string& op, const Plan& plan) {
  if (selection && std::find(selection->ops.begin(), selection->ops.end(), op) ==
                       selection->ops.end())
    throw std::logic_error("a test of " + selection->variant + " runs enumerates the runs of " +
                           op + ", an op it does not declare");
  RunList out;
  bool offered = false;  // the op offers the selected variant, available
  const std::vector<OpInfo> ops = registered_ops();
  for (const VariantInfo& v : op_info(ops, op).variants) {
    if (!selected(v, plan)) continue;
    if (!v.available) {
      if (!selection || (v.name == selection->variant && selection->target == "absent"))
        out.absent.push_back(v);
      continue;
    }
    offered = offered || (selection && v.name == selection->variant);
    std::vector<std::pair<int64_t, std::string>> targets = {{0, v.target}};
    if (v.highway && plan.every_target) {
      targets.clear();
      targets = highway_targets();
    }
    for (const auto& [bits, name] : targets)
      for (int threads : plan.threads) {
        Run run{op, v, name, bits, threads};
        if (!selection || matches(run)) out.runs.push_back(std::move(run));
      }
  }
  // A loop whose plan leaves out the selected run of a variant the op offers would test that
  // variant in no registered test.
  if (offered && out.runs.empty())
    throw std::logic_error("a loop over the runs of " + op + " leaves out " + selection->variant +
                           ":" + selection->target + ", the run its test declares");
  return out;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const OpInfo& info : registered_ops()) out.push_back(info.name);
  return out;
}

std::vector<std::string> fixed_isas(const std::string& op) {
  std::vector<std::string> out;
  const std::vector<OpInfo> ops = registered_ops();
  for (const VariantInfo& v : op_info(ops, op).variants)
    if (!v.isa.empty() && std::find(out.begin(), out.end(), v.isa) == out.end())
      out.push_back(v.isa);
  return out;
}

std::vector<TestRun> test_runs(const std::vector<std::string>& ops, const Plan& plan,
                               bool per_thread_count, const std::string& label) {
  std::string joined = label;
  if (joined.empty())
    for (const std::string& op : ops) joined += (joined.empty() ? "" : "+") + op;
  std::vector<TestRun> out;
  const auto add = [&](TestRun t) {
    for (const TestRun& o : out)
      if (o.path == t.path) return;  // the same run of another declared op
    out.push_back(std::move(t));
  };
  for (const std::string& op : ops) {
    const RunList list = runs(op, plan);
    for (const Run& run : list.runs) {
      if (per_thread_count) {
        add({run_path(joined, run.variant.name, run.target, {run.threads}),
             {run.variant.name, run.target, run.threads, ops}, std::nullopt});
      } else if (run.threads == plan.threads.front()) {  // one test per variant and target
        add({run_path(joined, run.variant.name, run.target, plan.threads),
             {run.variant.name, run.target, std::nullopt, ops}, std::nullopt});
      }
    }
    for (const VariantInfo& v : list.absent)
      add({joined + "/" + v.name + "/absent", {v.name, "absent", std::nullopt, ops}, v});
  }
  return out;
}

ScopedSelection::ScopedSelection(RunSelection s) {
  selection = new RunSelection(std::move(s));
  entered_runs = 0;
}

ScopedSelection::~ScopedSelection() {
  delete selection;
  selection = nullptr;
}

int64_t ScopedSelection::entered() const { return entered_runs; }

ScopedTarget::ScopedTarget(const Run& run) : saved_(forced_bits) {
  if (selection && matches(run)) ++entered_runs;
  if (run.target_bits != forced_bits) force(run.target_bits);
}

ScopedTarget::~ScopedTarget() {
  if (forced_bits != saved_) force(saved_);
}

}  // namespace dsv4cpu::testing
