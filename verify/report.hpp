// Machine-readable reports of a run: JSON (case objects and totals) and JUnit XML (a testsuite
// per op, a testcase per case and variant).
#pragma once
#include <string>
#include <vector>

#include "verify/runner.hpp"

namespace dsv4cpu::verify {

std::string json_report(const std::vector<CaseResult>& results);
std::string junit_report(const std::vector<CaseResult>& results);

}  // namespace dsv4cpu::verify
