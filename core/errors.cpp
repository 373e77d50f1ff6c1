#include "dsv4cpu/errors.hpp"

namespace dsv4cpu {

Error::Error(std::string op, std::string argument, std::vector<int64_t> index, std::string value,
             const std::string& message)
    : std::invalid_argument("dsv4cpu::" + op + ": " + message),
      op_(std::move(op)),
      argument_(std::move(argument)),
      index_(std::move(index)),
      value_(std::move(value)) {}

}  // namespace dsv4cpu
