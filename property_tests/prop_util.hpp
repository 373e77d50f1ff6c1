// Helpers of the property tests: running a body once per compiled Highway target, capturing the
// outcome of a call (success, or the exception's kind and message), and byte comparisons that
// report the first difference instead of printing whole buffers.
#pragma once
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <rapidcheck.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/options.hpp"

namespace dsv4cpu::prop {

// The target the library's "hwy" variant of `op` reports (what dynamic dispatch runs now).
inline std::string hwy_target_of(const std::string& op) {
  for (const OpInfo& info : registered_ops())
    if (info.name == op)
      for (const VariantInfo& v : info.variants)
        if (v.name == "hwy") return v.target;
  return "";
}

// Forces dynamic dispatch to one target for its lifetime; restores normal dispatch afterwards,
// also when a RapidCheck assertion throws.
class ForceTarget {
 public:
  explicit ForceTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~ForceTarget() { hwy::SetSupportedTargetsForTest(0); }
  ForceTarget(const ForceTarget&) = delete;
  ForceTarget& operator=(const ForceTarget&) = delete;
};

// Calls body(target_name) once for every Highway target compiled into the library (the test is
// compiled with the same HWY_TARGETS) and supported by this CPU, with dispatch forced to it.
// Checks that the library's "hwy" variant of `op` reports that target.
template <class F>
void for_each_target(const std::string& op, const F& body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    ForceTarget force(target);
    const std::string name = hwy::TargetName(target);
    RC_ASSERT(hwy_target_of(op) == name);
    body(name);
  }
}

// Success, or the exception a call threw.
struct Outcome {
  std::string kind;  // "" on success, else Error::kind()
  std::string message;
  bool operator==(const Outcome& o) const { return kind == o.kind && message == o.message; }
};
inline std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << (o.kind.empty() ? "success" : o.kind + ": " + o.message);
}

template <class F>
Outcome capture(const F& f) {
  try {
    f();
    return {};
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
}

inline Options variant(const char* name, int threads) {
  Options o;
  o.variant = name;
  o.num_threads = threads;
  return o;
}

// Fails the property at the first byte where a and b differ.
inline void assert_same_bytes(const void* a, const void* b, size_t n, const std::string& what) {
  if (std::memcmp(a, b, n) == 0) return;
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  size_t i = 0;
  while (x[i] == y[i]) ++i;
  RC_FAIL(what + ": byte " + std::to_string(i) + " of " + std::to_string(n) + " differs (" +
          std::to_string(x[i]) + " vs " + std::to_string(y[i]) + ")");
}
template <class T>
void assert_same_bytes(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  RC_ASSERT(a.size() == b.size());
  assert_same_bytes(a.data(), b.data(), a.size() * sizeof(T), what);
}

// Fails the property at the first byte outside the writable mask where `after` differs from
// `before`.
inline void assert_untouched(const std::vector<uint8_t>& before, const void* after,
                             const std::vector<uint8_t>& writable, const std::string& what) {
  const auto* y = static_cast<const unsigned char*>(after);
  for (size_t i = 0; i < before.size(); ++i)
    if (!writable[i] && before[i] != y[i])
      RC_FAIL(what + ": byte " + std::to_string(i) + " changed but the op must not write it");
}

}  // namespace dsv4cpu::prop
