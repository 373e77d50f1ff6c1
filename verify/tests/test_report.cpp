// The reports of a run: JUnit XML (counts per suite and in total, per-case time, failure and
// error types, skipped cases) and JSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "verify/report.hpp"

namespace dsv4cpu::verify {
namespace {

CaseResult result(const std::string& op, const std::string& name, Outcome outcome,
                  const std::string& type, const std::string& detail, double seconds) {
  CaseResult r;
  r.op = op;
  r.name = name;
  r.variant = "ref";
  r.outcome = outcome;
  r.type = type;
  r.detail = detail;
  r.seconds = seconds;
  return r;
}

std::vector<CaseResult> sample() {
  std::vector<CaseResult> rs = {
      result("slot_mapping", "a.safetensors", Outcome::passed, "", "exact", 0.25),
      result("slot_mapping", "b.safetensors", Outcome::failed, "mismatch",
             "slots[0]: got 1, expected 2", 0.5),
      result("indexer_topk", "c.safetensors", Outcome::error, "ShapeError", "ShapeError: <bad>",
             0.125),
      result("indexer_topk", "c.safetensors", Outcome::skipped, "", "AMX absent", 0.0)};
  rs[2].error = "dsv4cpu::indexer_topk: <bad> & more";
  rs[3].variant = "amx";
  return rs;
}

TEST(VerifyReport, JunitCountsTimesTypesAndSkips) {
  const std::string x = junit_report(sample());
  EXPECT_NE(x.find("<testsuites name=\"dsv4cpu-verify\" tests=\"4\" failures=\"1\" errors=\"1\" "
                   "skipped=\"1\" time=\"0.875000\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testsuite name=\"slot_mapping\" tests=\"2\" failures=\"1\" errors=\"0\" "
                   "skipped=\"0\" time=\"0.750000\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testcase classname=\"slot_mapping\" name=\"a.safetensors [ref]\" "
                   "time=\"0.250000\"><system-out>exact</system-out></testcase>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<failure type=\"mismatch\" message=\"slots[0]: got 1, expected 2\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<error type=\"ShapeError\" message=\"ShapeError: &lt;bad&gt;\">"
                   "dsv4cpu::indexer_topk: &lt;bad&gt; &amp; more</error>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("name=\"c.safetensors [amx]\" time=\"0.000000\"><skipped message=\"AMX "
                   "absent\"/></testcase>"),
            std::string::npos)
      << x;
}

TEST(VerifyReport, JsonStatusAndCounts) {
  const std::string j = json_report(sample());
  EXPECT_NE(j.find("\"status\": \"ERROR\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"type\": \"mismatch\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"passed\": 1,\n  \"failed\": 2,\n  \"skipped\": 1"), std::string::npos) << j;
}

}  // namespace
}  // namespace dsv4cpu::verify
