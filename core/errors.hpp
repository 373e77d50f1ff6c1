// The error builders of the library (bad-input.md §2): every message has the form
// "<argument><index> = <value>: <problem> (expected <constraint>)".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::detail {

std::string format_float(double v);  // "nan", "inf", "-inf", else shortest round-trip text
std::string format_f32(float v);     // the same for an fp32 value: "3e+38", not "3.00000000549e+38"
std::string format_index(const std::vector<int64_t>& idx);  // "[3, 7]" or ""
// Text with its control bytes (NUL included) written \xNN: what() ends at a NUL, and a message
// names the whole value ("variant = ref\x00junk").
std::string format_text(const std::string& text);

// "<argument><index> = <value>: <problem> (expected <expected>)"
template <class E>
[[noreturn]] void fail(const char* op, const std::string& argument, std::vector<int64_t> index,
                       const std::string& value, const std::string& problem,
                       const std::string& expected) {
  std::string msg = argument + format_index(index) + " = " + format_text(value) + ": " +
                    problem + " (expected " + expected + ")";
  throw E(op, argument, std::move(index), value, msg);
}

// Scalar argument: ValueError "<name> = <value>: <problem> (expected <expected>)".
[[noreturn]] void fail_value(const char* op, const char* name, const std::string& value,
                             const std::string& problem, const std::string& expected);

// Whole-array problem: ShapeError "<name>: dtype F32, shape [4, 64] (expected <expected>)",
// or "<name>: missing (expected ...)" when absent.
[[noreturn]] void fail_shape(const char* op, const char* name, const TensorView& v,
                             const std::string& expected);

// bad-input.md §1.4 (f): NonFiniteError for a value computed for token t, e.g.
// "token 9 (position 131): pooled channel 12 = inf: intermediate overflow (expected finite;
// nothing was written)" ("not finite" for NaN). `quantity` names the value ("pooled channel",
// "weights_out head"), `channel` its channel or head (-1: none); `operands`, when given, names the
// finite values it was computed from (", from score[5, 17] = 3e+38 and ape[1, 17] = 3e+38").
// argument() is "token t", index() {t, channel} (or {t}).
[[noreturn]] void fail_computed(const char* op, int64_t t, int64_t position, const char* quantity,
                                int64_t channel, float value, const std::string& operands = {});

// bad-input.md §1.4 (f) when a non-finite input value caused the non-finite intermediate: a
// NonFiniteError naming that input element, its value and how token t read it (`how`), e.g.
// "state_cache[7, 0, 524] = inf: not finite, read by token 9 (position 131) as window column 4
// (gather_slots[9, 4] = 28) (expected a finite value; nothing was written)".
[[noreturn]] void fail_computed_input(const char* op, const char* argument,
                                      std::vector<int64_t> index, float value, int64_t t,
                                      int64_t position, const std::string& how);

}  // namespace dsv4cpu::detail
