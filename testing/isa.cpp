#include "testing/isa.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/cpu.hpp"

namespace dsv4cpu::testing {
namespace {

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

std::string cpuinfo_vendor() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("vendor_id", 0) == 0 && line.find(':') != std::string::npos) {
      const std::vector<std::string> words = split(line.substr(line.find(':') + 1), ' ');
      return words.empty() ? "" : words.front();
    }
  return "";
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
