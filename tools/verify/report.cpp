#include "tools/verify/report.hpp"

#include <nlohmann/json.hpp>

namespace dsv4cpu::verify {

namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:  // XML 1.0 allows no control character but tab, newline, carriage return
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
          out += "\xEF\xBF\xBD";  // U+FFFD
        else
          out += ch;
    }
  }
  return out;
}

size_t failures(const std::vector<const CaseResult*>& cases) {
  size_t n = 0;
  for (const CaseResult* c : cases) n += c->pass ? 0 : 1;
  return n;
}

}  // namespace

std::string json_report(const std::vector<CaseResult>& results) {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  size_t passed = 0;
  for (const CaseResult& r : results) {
    nlohmann::ordered_json c = {{"op", r.op},
                        {"case", r.name},
                        {"variant", r.variant},
                        {"status", r.pass ? "PASS" : "FAIL"},
                        {"detail", r.detail}};
    if (!r.error.empty()) c["error"] = r.error;
    cases.push_back(std::move(c));
    passed += r.pass ? 1 : 0;
  }
  const nlohmann::ordered_json doc = {
      {"cases", std::move(cases)}, {"passed", passed}, {"failed", results.size() - passed}};
  // Replace invalid UTF-8 (file names, messages) rather than throw.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string junit_report(const std::vector<CaseResult>& results) {
  // Suites in order of first appearance.
  std::vector<std::pair<std::string, std::vector<const CaseResult*>>> suites;
  for (const CaseResult& r : results) {
    auto it = suites.begin();
    while (it != suites.end() && it->first != r.op) ++it;
    if (it == suites.end()) it = suites.insert(suites.end(), {r.op, {}});
    it->second.push_back(&r);
  }
  size_t failed = 0;
  for (const auto& s : suites) failed += failures(s.second);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"dsv4cpu-verify\" tests=\"" + std::to_string(results.size()) +
       "\" failures=\"" + std::to_string(failed) + "\">\n";
  for (const auto& [op, cases] : suites) {
    x += "  <testsuite name=\"" + xml_escape(op) + "\" tests=\"" + std::to_string(cases.size()) +
         "\" failures=\"" + std::to_string(failures(cases)) + "\">\n";
    for (const CaseResult* c : cases) {
      x += "    <testcase classname=\"" + xml_escape(op) + "\" name=\"" +
           xml_escape(c->name + " [" + c->variant + "]") + "\">";
      if (c->pass) {
        x += "<system-out>" + xml_escape(c->detail) + "</system-out>";
      } else {
        x += "<failure message=\"" + xml_escape(c->detail) + "\">" +
             xml_escape(c->error.empty() ? c->detail : c->error) + "</failure>";
      }
      x += "</testcase>\n";
    }
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

}  // namespace dsv4cpu::verify
