#include "testing/runs.hpp"

#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/cpu.hpp"

namespace dsv4cpu::testing {
namespace {

int64_t forced_bits = 0;  // the target ScopedTarget forces now (0: none)

void force(int64_t bits) {
  forced_bits = bits;
  hwy::SetSupportedTargetsForTest(bits);
}

// The library's Highway targets, listed with dispatch as usual.
const std::vector<detail::HighwayTarget>& highway_targets() {
  static const std::vector<detail::HighwayTarget> targets = [] {
    const int64_t saved = forced_bits;
    force(0);
    std::vector<detail::HighwayTarget> t = detail::highway_targets();
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

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) {
    item.erase(std::remove_if(item.begin(), item.end(),
                              [](unsigned char c) { return std::isspace(c) != 0; }),
               item.end());
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

const char* required_isa_list() {
  const char* env = std::getenv("DSV4CPU_REQUIRE_ISA");
  return env ? env : "";
}

// The flags of the first processor in /proc/cpuinfo.
const std::vector<std::string>& cpuinfo_flags() {
  static const std::vector<std::string> flags = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("flags", 0) == 0 && line.find(':') != std::string::npos)
        return split(line.substr(line.find(':') + 1), ' ');
    return std::vector<std::string>{};
  }();
  return flags;
}

bool listed_in_env(const std::string& isa) {
  const std::vector<std::string> listed = split(required_isa_list(), ',');
  return std::find(listed.begin(), listed.end(), isa) != listed.end();
}

// The /proc/cpuinfo flags announcing `isa`, when all are there; else empty.
std::vector<std::string> announced_by_cpuinfo(const std::string& isa) {
  const std::vector<std::string> need = detail::isa_cpuinfo_flags(detail::isa_from_name(isa));
  for (const std::string& f : need)
    if (std::find(cpuinfo_flags().begin(), cpuinfo_flags().end(), f) == cpuinfo_flags().end())
      return {};
  return need;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
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
      for (const detail::HighwayTarget& t : highway_targets()) targets.push_back({t.bits, t.name});
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

bool isa_required(const std::string& isa) {
  return listed_in_env(isa) || !announced_by_cpuinfo(isa).empty();
}

Absence absence(const std::string& op, const RunList& list) {
  Absence a;
  for (const VariantInfo& v : list.absent) {
    const std::string what =
        "variant " + v.name + " of " + op + " is not available on this CPU or OS";
    a.absent = true;
    if (!isa_required(v.isa)) {
      if (a.message.empty()) a.message = what + " (" + upper(v.isa) + " absent)";
      continue;
    }
    std::string why;
    if (listed_in_env(v.isa)) {
      why = std::string("DSV4CPU_REQUIRE_ISA=") + required_isa_list();
    } else {
      why = "/proc/cpuinfo lists";
      for (const std::string& f : announced_by_cpuinfo(v.isa)) why += " " + f;
    }
    a.required = true;
    a.message = upper(v.isa) + " is required (" + why + ") but " + what;
    break;
  }
  return a;
}

}  // namespace dsv4cpu::testing
