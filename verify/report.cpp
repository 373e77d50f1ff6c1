#include "verify/report.hpp"

#include <cstdio>
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

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

// The JUnit counts of a group of cases: tests, failures, errors, skipped, time.
std::string counts(const std::vector<const CaseResult*>& cases) {
  size_t failures = 0, errors = 0, skipped = 0;
  double seconds = 0.0;
  for (const CaseResult* c : cases) {
    failures += c->outcome == Outcome::failed ? 1 : 0;
    errors += c->outcome == Outcome::error ? 1 : 0;
    skipped += c->outcome == Outcome::skipped ? 1 : 0;
    seconds += c->seconds;
  }
  return "tests=\"" + std::to_string(cases.size()) + "\" failures=\"" + std::to_string(failures) +
         "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) +
         "\" time=\"" + seconds_text(seconds) + "\"";
}

}  // namespace

std::string json_report(const std::vector<CaseResult>& results) {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  size_t passed = 0, skipped = 0;
  for (const CaseResult& r : results) {
    nlohmann::ordered_json c = {{"op", r.op},           {"case", r.name},
                                {"variant", r.variant}, {"status", outcome_name(r.outcome)},
                                {"detail", r.detail},   {"seconds", r.seconds}};
    if (!r.type.empty()) c["type"] = r.type;
    if (!r.error.empty()) c["error"] = r.error;
    cases.push_back(std::move(c));
    passed += r.passed() ? 1 : 0;
    skipped += r.outcome == Outcome::skipped ? 1 : 0;
  }
  const nlohmann::ordered_json doc = {{"cases", std::move(cases)},
                                      {"passed", passed},
                                      {"failed", results.size() - passed - skipped},
                                      {"skipped", skipped}};
  // Replace invalid UTF-8 (file names, messages) rather than throw.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string junit_report(const std::vector<CaseResult>& results) {
  // Suites (one per op) in order of first appearance.
  std::vector<std::pair<std::string, std::vector<const CaseResult*>>> suites;
  std::vector<const CaseResult*> all;
  for (const CaseResult& r : results) {
    auto it = suites.begin();
    while (it != suites.end() && it->first != r.op) ++it;
    if (it == suites.end()) it = suites.insert(suites.end(), {r.op, {}});
    it->second.push_back(&r);
    all.push_back(&r);
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"dsv4cpu-verify\" " + counts(all) + ">\n";
  for (const auto& [op, cases] : suites) {
    x += "  <testsuite name=\"" + xml_escape(op) + "\" " + counts(cases) + ">\n";
    for (const CaseResult* c : cases) {
      x += "    <testcase classname=\"" + xml_escape(op) + "\" name=\"" +
           xml_escape(c->name + " [" + c->variant + "]") + "\" time=\"" + seconds_text(c->seconds) +
           "\">";
      const std::string message = xml_escape(c->detail);
      const std::string text = xml_escape(c->error.empty() ? c->detail : c->error);
      switch (c->outcome) {
        case Outcome::passed:
          x += "<system-out>" + message + "</system-out>";
          break;
        case Outcome::failed:
          x += "<failure type=\"" + xml_escape(c->type) + "\" message=\"" + message + "\">" + text +
               "</failure>";
          break;
        case Outcome::error:
          x += "<error type=\"" + xml_escape(c->type) + "\" message=\"" + message + "\">" + text +
               "</error>";
          break;
        case Outcome::skipped:
          x += "<skipped message=\"" + message + "\"/>";
          break;
      }
      x += "</testcase>\n";
    }
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

}  // namespace dsv4cpu::verify
