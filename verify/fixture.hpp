// One run of one fixture (fixtures.md): inputs by argument name, scalars from __metadata__ with
// defaults, in-place buffers (<name> + expected.<name>), returned arrays (expected.<name>), and the
// comparison of every expected.* tensor after the call.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4cpu/tensor.hpp"
#include "testing/contracts.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu::verify {

using testing::ArrayRef;
using testing::Tolerance;
using testing::Verdict;

// The `compare` metadata override (fixtures.md): "exact" or "key=value,..." (fp8_step, bf16_ulp,
// scale_step, rtol, atol, bound_factor). Unset keys keep the op's default contract; a named
// bf16_ulp also sets bf16_arrays (every BF16 array an op compares exactly by default is compared
// within bf16_ulp, numerics.md §11.3). Throws std::invalid_argument naming the bad key or value.
Tolerance parse_compare(const std::string& text);

// The grammar of fixture metadata values (docs/conformance.md), the one parser of dsv4cpu-verify
// and the Python runner; nullopt for text outside it:
//   integer  -?[0-9]+, within int64 (no sign '+', no space, no other byte)
//   real     -?([0-9]+(.[0-9]*)?|.[0-9]+)([eE][-+]?[0-9]+)?, rounded once to binary64 (a finite
//            text beyond its range is outside), or inf, -inf, nan
//   real32   the same, rounded once to binary32
//   boolean  0, 1, true, false
std::optional<int64_t> parse_integer(const std::string& text);
std::optional<double> parse_real(const std::string& text);
std::optional<float> parse_real32(const std::string& text);
std::optional<bool> parse_boolean(const std::string& text);

// A problem of the fixture itself, found by the verifier (not raised by the library).
class FixtureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Compares one output (`got`) with its expected.<name> tensor (`want`).
using Comparator =
    std::function<Verdict(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                          const Tolerance& tol)>;

inline constexpr uint8_t kGarbageByte = 0xA5;  // pre-fill of returned arrays

class Case {
 public:
  explicit Case(const SafetensorsFile& file);
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  // ---- arrays ----
  // Where the op's views point: by default at the case's own copies. A relocation gets every
  // view input(), inout() and output() hand out, with its role and name, and returns the view the
  // op is given instead: same dtype, shape and elements, at memory (and strides) the caller owns
  // and checks, since the case's checks and results keep reading its own copies (the overlap
  // test places arrays this way).
  enum class Role : uint8_t { input, inplace, output };
  using Relocation = std::function<MutableTensorView(Role role, const std::string& name,
                                                     const MutableTensorView& view)>;
  void relocate(Relocation r) { relocation_ = std::move(r); }

  // The input tensor `name` (never an expected.* one), or nullptr.
  const Tensor* tensor(const std::string& name) const;
  const Tensor* expected(const std::string& name) const;  // expected.<name>, or nullptr
  // A C-contiguous, aligned copy of input `name`; an absent view when the file lacks it (the
  // library then reports the missing array).
  TensorView input(const std::string& name);
  // In-place buffer: a copy of `name`, written by the op and compared with expected.<name>
  // (exact unless `cmp` is given; see check()). Every byte is checked.
  MutableTensorView inout(const std::string& name, Comparator cmp = {});
  // Returned array of `dtype`, shaped like expected.<name> when present, else `fallback`,
  // pre-filled with kGarbageByte. A FixtureError when its size overflows or exceeds
  // output_limit() bytes: nothing is allocated.
  MutableTensorView output(const std::string& name, DType dtype,
                           const std::vector<int64_t>& fallback, Comparator cmp = {});
  // A result the op returns by value, compared like an output.
  void result(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
              const void* data, Comparator cmp = {});

  // The most bytes one output may take: 8 x the tensor bytes of the file (an expected tensor of a
  // narrower dtype than the output) + 256 MiB (outputs without an expected tensor).
  int64_t output_limit() const noexcept { return output_limit_; }

  // ---- scalars (__metadata__, the grammar above); reading a key marks it as used ----
  bool has(const std::string& name);
  // Without a default an absent scalar is a FixtureError, as is text outside the grammar.
  std::string text(const std::string& name, std::optional<std::string> def = std::nullopt);
  int64_t integer(const std::string& name, std::optional<int64_t> def = std::nullopt);
  double real(const std::string& name, std::optional<double> def = std::nullopt);
  // An fp32 argument, rounded once from the decimal text.
  float real32(const std::string& name, std::optional<float> def = std::nullopt);
  bool boolean(const std::string& name, std::optional<bool> def = std::nullopt);

  // ---- after the call ----
  // Compares every expected.* tensor of the file with the op's result: by the buffer's
  // comparator; a buffer without one exactly, or, when tol.bf16_arrays, a BF16 one within
  // tol.bf16_ulp (tol.exact forces exact).
  Verdict check(const Tolerance& tol) const;
  // expected_error: every buffer the op may write still holds its content from before the call.
  Verdict check_untouched() const;
  // Every buffer the op may write (in-place buffers, outputs, results), name and bytes, in the
  // order they were requested.
  std::vector<std::pair<std::string, Bytes>> written() const;
  // Metadata keys that neither the runner nor the op read.
  std::vector<std::string> unused_metadata() const;

  // ---- results of another implementation (runner.hpp, check_results) ----
  // Every buffer of the op (in-place buffers, outputs, results) with its current content.
  std::map<std::string, Tensor> results() const;
  // Puts `t` (dtype and shape included) in place of buffer `name`; false when there is none.
  bool replace(const std::string& name, const Tensor& t);

 private:
  enum class Kind : uint8_t { inplace, output, result };
  struct Buffer {
    std::string name;
    Kind kind;
    DType dtype;
    std::vector<int64_t> shape;
    Bytes before, bytes;  // `before`: the content handed to the op (in-place buffers, outputs)
    Comparator cmp;
  };
  Buffer& add_buffer(const std::string& name, Kind kind, DType dtype,
                     const std::vector<int64_t>& shape, Comparator cmp);
  const std::string* scalar(const std::string& name);  // marks the key used; nullptr if absent
  // The scalar's text; nullptr when absent with a default; FixtureError when absent without one.
  const std::string* lookup(const std::string& name, bool has_default);
  // The view handed to the op: `v`, or where the relocation puts it.
  MutableTensorView placed(Role role, const std::string& name, const MutableTensorView& v);

  const SafetensorsFile& file_;
  std::map<std::string, Bytes> inputs_;
  std::deque<Buffer> buffers_;  // stable addresses for the views handed to the op
  std::set<std::string> used_;
  int64_t output_limit_ = 0;
  Relocation relocation_;
};

// A view of `bytes` with `dtype` and `shape` (rank <= 4, else FixtureError naming `name`).
MutableTensorView make_view(const std::string& name, void* data, DType dtype,
                            const std::vector<int64_t>& shape);

}  // namespace dsv4cpu::verify
