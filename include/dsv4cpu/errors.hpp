// Exception hierarchy of bad-input.md §2.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4cpu/export.hpp"

namespace dsv4cpu {

// what() is "dsv4cpu::<op>: <message>"; the message follows bad-input.md §2, e.g.
// "gather_slots[3, 7] = 4096: slot beyond the state cache (expected ...)".
class DSV4CPU_API Error : public std::invalid_argument {
 public:
  Error(std::string op, std::string argument, std::vector<int64_t> index, std::string value,
        const std::string& message);
  const std::string& op() const noexcept { return op_; }
  const std::string& argument() const noexcept { return argument_; }
  const std::vector<int64_t>& index() const noexcept { return index_; }
  const std::string& value() const noexcept { return value_; }
  // Class name as used by fixtures' `expected_error` ("ShapeError", ...).
  virtual const char* kind() const noexcept { return "Error"; }

 private:
  std::string op_, argument_;
  std::vector<int64_t> index_;
  std::string value_;
};

// Missing array, dtype, rank, shape, stride, overlap.
class DSV4CPU_API ShapeError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ShapeError"; }
};
// Index, slot, position, block id or length out of range; duplicate write slot; int32 overflow.
class DSV4CPU_API IndexError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "IndexError"; }
};
// Scalar argument outside its domain.
class DSV4CPU_API ValueError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ValueError"; }
};
// NaN or ±inf where a finite value is required.
class DSV4CPU_API NonFiniteError : public ValueError {
 public:
  using ValueError::ValueError;
  const char* kind() const noexcept override { return "NonFiniteError"; }
};

}  // namespace dsv4cpu
