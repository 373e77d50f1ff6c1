#include "testing/runs.hpp"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <utility>

namespace dsv4cpu::testing {
namespace {

int64_t forced_bits = 0;  // the target ScopedTarget forces now (0: none)

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

RunList runs(const std::string& op, const Plan& plan) {
  RunList out;
  const std::vector<OpInfo> ops = registered_ops();
  for (const VariantInfo& v : op_info(ops, op).variants) {
    if (!selected(v, plan)) continue;
    if (!v.available) {
      out.absent.push_back(v);
      continue;
    }
    std::vector<std::pair<int64_t, std::string>> targets = {{0, v.target}};
    if (v.highway && plan.every_target) {
      targets.clear();
      targets = highway_targets();
    }
    for (const auto& [bits, name] : targets)
      for (int threads : plan.threads) out.runs.push_back({op, v, name, bits, threads});
  }
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

std::vector<Group> groups(const std::string& op, const Plan& plan) {
  std::vector<Group> out;
  Plan portable = plan;
  portable.isa = "";
  const RunList list = runs(op, portable);
  if (!list.runs.empty() || !list.absent.empty()) out.push_back({"EveryVariant", portable});
  for (const std::string& isa : fixed_isas(op)) {
    std::string name = isa;
    name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
    Plan p = plan;
    p.isa = isa;
    out.push_back({name, p});
  }
  return out;
}

ScopedTarget::ScopedTarget(const Run& run) : saved_(forced_bits) {
  if (run.target_bits != forced_bits) force(run.target_bits);
}

ScopedTarget::~ScopedTarget() {
  if (forced_bits != saved_) force(saved_);
}

}  // namespace dsv4cpu::testing
