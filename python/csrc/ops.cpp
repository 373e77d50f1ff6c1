// The PyTorch operators torch.ops.dsv4cpu.<op>: one boxed kernel per bound op reads its arguments
// by their schema names and calls the library. Arguments keep the specification's names and
// order; outputs and in-place buffers are arguments (Tensor(a!)), results the op returns by value
// are named returns, and every op with Options takes the keyword-only arguments
// impl, variant, check_finite and num_threads (and fresh_outputs, the ops that use it). An op with
// a tensor argument is a CPU kernel (its fake kernel, for torch.compile and meta tensors, is the
// package's: _fakes.py); one without is a CompositeExplicitAutograd kernel. What is not a tensor
// op (string results, the package's tooling: registry JSON, runs, Highway target pinning, fixture
// I/O) is torch.ops._dsv4cpu, so that every op of torch.ops.dsv4cpu can be traced and passes
// torch.library.opcheck; the size helpers and the version are plain C functions (extern "C"
// below) read through ctypes.
#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/SmallVector.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "dsv4cpu/dsv4cpu.hpp"
#include "python/csrc/binding.hpp"
#include "testing/isa.hpp"
#include "testing/runs.hpp"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define DSV4CPU_TORCH_HAS_FLOAT8 1
#endif

namespace dsv4cpu::python {

// ---- tensors ----

DType dtype_of(const at::Tensor& t, bool fp8, std::string_view op, std::string_view arg) {
  if (!t.device().is_cpu()) {
    const std::string where = t.device().str();
    throw ShapeError(std::string(op), std::string(arg), {}, where,
                     std::string(arg) + ": device " + where + " (expected a CPU tensor)");
  }
  switch (t.scalar_type()) {
    case c10::ScalarType::Float: return DType::F32;
    case c10::ScalarType::BFloat16: return DType::BF16;
    case c10::ScalarType::Half: return DType::F16;
    case c10::ScalarType::Byte: return fp8 ? DType::F8_E4M3 : DType::U8;
    case c10::ScalarType::Int: return DType::I32;
    case c10::ScalarType::Long: return DType::I64;
#ifdef DSV4CPU_TORCH_HAS_FLOAT8
    case c10::ScalarType::Float8_e4m3fn: return DType::F8_E4M3;
#endif
    default: break;
  }
  const std::string name = c10::toString(t.scalar_type());
  throw ShapeError(std::string(op), std::string(arg), {}, name,
                   std::string(arg) + ": dtype " + name +
                       " (expected float32, bfloat16, float16, uint8 or float8_e4m3fn codes, "
                       "int32 or int64)");
}

c10::ScalarType scalar_type_of(DType d) {
  switch (d) {
    case DType::F32: return c10::ScalarType::Float;
    case DType::BF16: return c10::ScalarType::BFloat16;
    case DType::F16: return c10::ScalarType::Half;
#ifdef DSV4CPU_TORCH_HAS_FLOAT8
    case DType::F8_E4M3: return c10::ScalarType::Float8_e4m3fn;
#else
    case DType::F8_E4M3: return c10::ScalarType::Byte;
#endif
    case DType::U8: return c10::ScalarType::Byte;
    case DType::I32: return c10::ScalarType::Int;
    case DType::I64: return c10::ScalarType::Long;
  }
  return c10::ScalarType::Byte;
}

DType view_dtype(const at::Tensor& t, bool fp8, std::string_view op, std::string_view arg) {
  const DType dtype = dtype_of(t, fp8, op, arg);
  const auto rank = static_cast<int>(t.dim());
  if (rank > kMaxRank)
    throw ShapeError(std::string(op), std::string(arg), {}, std::to_string(rank),
                     std::string(arg) + ": rank " + std::to_string(rank) + " (expected at most " +
                         std::to_string(kMaxRank) + " dimensions)");
  return dtype;
}

MutableTensorView view_of(const at::Tensor& t, bool fp8, std::string_view op,
                          std::string_view arg) {
  if (!t.defined()) return MutableTensorView();
  const DType dtype = view_dtype(t, fp8, op, arg);
  return MutableTensorView(t.data_ptr(), dtype, static_cast<int>(t.dim()), t.sizes().data(),
                           t.strides().data());
}

Impl parse_impl(const std::string& op, const std::string& text) {
  if (text == "best") return Impl::best;
  if (text == "reference") return Impl::reference;
  if (text == "optimized") return Impl::optimized;
  throw ValueError(op, "impl", {}, text,
                   "impl = " + text + ": unknown (expected best, reference or optimized)");
}

// ---- outputs allocated here ----

int64_t memory_bytes() {
  static const int64_t bytes =
      static_cast<int64_t>(sysconf(_SC_PAGE_SIZE)) * sysconf(_SC_PHYS_PAGES);
  return bytes;
}

bool allocatable(c10::IntArrayRef shape, int64_t element_bytes) {
  int64_t bytes = element_bytes;
  for (const int64_t e : shape)
    if (e < 0 || __builtin_mul_overflow(bytes, e, &bytes)) return false;
  return bytes <= memory_bytes();
}

namespace {

// The blocks of outputs allocated here, kept when the output is freed for the next output of up
// to their size and more than half of it, most recent first: torch.empty's memory would sit at a
// new address on every call, or be mapped anew, so the op would write lines no cache holds
// (docs/decisions.md, "Outputs allocated in C++ reuse the blocks of freed ones"). At most
// kCachedBlocks blocks and cap() bytes are kept; a larger output comes from at::empty. An engine's
// step allocates outputs of several sizes between two calls of one op (per layer the SWA insert's
// q_out, the logits, the top-k's indices, the inverse RoPE's out), so the list keeps enough
// blocks for each of them to find its own again. A block is
// a 64-byte header holding its capacity, then the data; the deleter may run on any thread, and
// the list is never destroyed (tensors can outlive static destruction).
class OutputBlocks {
 public:
  static constexpr size_t kCachedBlocks = 16, kHeader = 64;

  static size_t cap() {
    static const size_t bytes =
        std::min<size_t>(size_t{1} << 30, static_cast<size_t>(memory_bytes()) / 16);
    return bytes;
  }

  // The data of a block of at least `bytes` (0 < bytes <= cap()), or null when memory is
  // exhausted.
  static void* take(size_t bytes) {
    OutputBlocks& c = instance();
    {
      std::lock_guard<std::mutex> lock(c.mutex_);
      for (size_t i = c.blocks_.size(); i-- > 0;) {
        const size_t capacity = capacity_of(c.blocks_[i]);
        if (capacity < bytes || capacity / 2 >= bytes) continue;
        void* base = c.blocks_[i];
        c.blocks_.erase(c.blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        c.bytes_ -= capacity;
        return static_cast<char*>(base) + kHeader;
      }
    }
    const size_t capacity = (bytes + kHeader - 1) / kHeader * kHeader;
    void* base = std::aligned_alloc(kHeader, kHeader + capacity);
    if (base == nullptr) return nullptr;
    std::memcpy(base, &capacity, sizeof capacity);
    return static_cast<char*>(base) + kHeader;
  }

  // The DataPtr deleter: `base` (the context) back to the list, the oldest blocks freed to make
  // room.
  static void give(void* base) {
    OutputBlocks& c = instance();
    const size_t capacity = capacity_of(base);
    void* evicted[kCachedBlocks];
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(c.mutex_);
      while (!c.blocks_.empty() &&
             (c.blocks_.size() == kCachedBlocks || c.bytes_ + capacity > cap())) {
        c.bytes_ -= capacity_of(c.blocks_.front());
        evicted[n++] = c.blocks_.front();
        c.blocks_.erase(c.blocks_.begin());
      }
      c.blocks_.push_back(base);  // within the capacity reserved: a deleter must not throw
      c.bytes_ += capacity;
    }
    for (size_t i = 0; i < n; ++i) std::free(evicted[i]);
  }

 private:
  OutputBlocks() { blocks_.reserve(kCachedBlocks); }
  static OutputBlocks& instance() {
    static OutputBlocks* const blocks = new OutputBlocks();
    return *blocks;
  }
  static size_t capacity_of(void* base) {
    size_t capacity;
    std::memcpy(&capacity, base, sizeof capacity);
    return capacity;
  }

  std::mutex mutex_;
  std::vector<void*> blocks_;  // oldest first
  size_t bytes_ = 0;           // their capacities
};

// An uninitialised output: from OutputBlocks when it fits one, else (and when memory is exhausted,
// to raise torch's error) at::empty.
at::Tensor empty_output(c10::IntArrayRef shape, const at::TensorOptions& options) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(shape)) *
                       static_cast<size_t>(options.dtype().itemsize());
  if (bytes == 0 || bytes > OutputBlocks::cap()) return at::empty(shape, options);
  void* data = OutputBlocks::take(bytes);
  if (data == nullptr) return at::empty(shape, options);
  return at::for_blob(data, shape)
      .context(static_cast<char*>(data) - OutputBlocks::kHeader, &OutputBlocks::give)
      .options(options)
      .make_tensor();
}

}  // namespace

Allocated allocate_output(c10::IntArrayRef shape, const at::TensorOptions& options) {
  const int64_t element_bytes = static_cast<int64_t>(options.dtype().itemsize());
  if (allocatable(shape, element_bytes)) return {empty_output(shape, options), true};
  std::vector<int64_t> placed = shape.vec();
  for (int64_t& e : placed)
    if (e < 0 || !allocatable({e}, element_bytes)) e = 0;
  if (!allocatable(placed, element_bytes)) placed.assign(shape.size(), 0);
  return {at::empty(placed, options), false};
}

void raise_unallocatable(const char* op, const char* name, c10::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  text += "]";
  throw ValueError(op, name, {}, text,
                   std::string(name) + ": shape " + text + ": cannot be allocated (expected no " +
                       "negative extent and at most " + std::to_string(memory_bytes()) +
                       " bytes)");
}

at::Tensor inverse_gptj_rope_o_proj_fresh(const at::Tensor& o, const at::Tensor& positions,
                                          const at::Tensor& cos_sin_cache, int64_t rope_dim,
                                          Options options) {
  constexpr const char* op = "inverse_gptj_rope_o_proj";
  const c10::IntArrayRef shape = o.sizes();
  const Allocated out = allocate_output(shape, o.options().dtype(at::kFloat));
  options.fresh_outputs = true;
  inverse_gptj_rope_o_proj(view_of(o, false, op, "o"), view_of(positions, false, op, "positions"),
                           view_of(cos_sin_cache, false, op, "cos_sin_cache"), rope_dim,
                           view_of(out.tensor, false, op, "out"), options);
  if (!out.fits) raise_unallocatable(op, "out", shape);
  return out.tensor;
}

// ---- errors ----

std::string python_message(const Error& e) {
  const nlohmann::json fields = {{"op", e.op()},
                                 {"argument", e.argument()},
                                 {"index", e.index()},
                                 {"value", e.value()}};
  return std::string(e.what()) + "\n[dsv4cpu." + e.kind() + "] " +
         fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void raise_for_python(const Error& e) {
  const std::string message = python_message(e);
  // torch's own classes: every torch (1.13 to 2.15) raises them as IndexError and ValueError.
  const c10::SourceLocation where{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  if (dynamic_cast<const IndexError*>(&e) != nullptr) throw c10::IndexError(where, message);
  throw c10::ValueError(where, message);
}

namespace {

// True for a schema argument the op writes (Tensor(a!)).
bool written(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite();
}

// Options::num_threads of a call: torch's intra-op thread count (torch.get_num_threads()) when
// num_threads is None, else the count given (0: OpenMP's default).
int threads_of(const std::string& op, std::optional<int64_t> num_threads) {
  if (!num_threads) return at::get_num_threads();
  const int64_t threads = *num_threads;
  if (threads < 0 || threads > 1 << 16)
    throw ValueError(op, "num_threads", {}, std::to_string(threads),
                     "num_threads = " + std::to_string(threads) +
                         ": out of range (expected 0 for OpenMP's default, or a thread count)");
  return static_cast<int>(threads);
}

// ---- one call: the arguments on the stack, read by schema name ----

struct BoundOp;

// What a bound op's schema says of its arguments, worked out once when the op is registered, so
// that a call spends nothing on names it already knows: the op's name, which arguments it writes
// and which hold fp8 codes, and for each argument the address of the name literal a binding last
// read it by (a call site reads with the same literal every time: an address compare finds it).
class Signature {
 public:
  Signature(const BoundOp& op, const c10::FunctionSchema& schema);
  Signature(const Signature&) = delete;
  Signature& operator=(const Signature&) = delete;

  const BoundOp& op() const { return op_; }
  const std::string& name() const { return name_; }
  size_t size() const { return written_.size(); }
  bool writes(size_t i) const { return written_[i] != 0; }
  bool fp8(size_t i) const { return fp8_[i] != 0; }
  // The schema has the keyword-only options (the .no_options overload has not).
  bool options() const { return options_; }
  // The op takes the keyword fresh_outputs.
  bool fresh_outputs() const { return fresh_outputs_; }
  // The position of the argument called `name`, which must be a literal (static storage): its
  // address is kept. `last`: the position a call found before (or npos); a binding reads its
  // arguments in the schema's order or, as the arguments of one call, in the reverse order, so
  // the neighbours of `last` are tried first.
  size_t index(const c10::FunctionSchema& schema, const char* name,
               size_t last = static_cast<size_t>(-1)) const {
    const size_t n = literals_.size();
    const auto is = [&](size_t i) {
      return i < n && literals_[i].load(std::memory_order_relaxed) == name;
    };
    if (is(last + 1)) return last + 1;
    if (is(last - 1)) return last - 1;
    for (size_t i = 0; i < n; ++i)
      if (is(i)) return i;
    const auto i = schema.argumentIndexWithName(name);
    if (!i) throw std::logic_error(name_ + ": the binding reads '" + name + "', not in its schema");
    literals_[static_cast<size_t>(*i)].store(name, std::memory_order_relaxed);
    return static_cast<size_t>(*i);
  }

 private:
  const BoundOp& op_;
  std::string name_;
  std::vector<char> written_, fp8_;
  bool options_ = false, fresh_outputs_ = false;
  // Per argument, a pointer to a string equal to its name (or null), replaced by any thread.
  mutable std::vector<std::atomic<const char*>> literals_;
};

class Call {
 public:
  Call(const Signature& sig, const c10::FunctionSchema& schema, torch::jit::Stack& stack)
      : sig_(sig), schema_(schema), args_(torch::jit::last(stack, sig.size())) {
    // Every tensor argument, in the schema's (the specification's) order, so that the first
    // argument the library cannot take is the one reported. Only tensors get a view (clearing a
    // default view for every argument was most of a small call's binding time), made in place (a
    // copy of a view just made waits for its narrow stores: about 15 cycles each).
    view_at_.resize(args_.size());
    for (size_t i = 0; i < args_.size(); ++i) {
      if (!args_[i].isTensor()) continue;
      const at::Tensor& t = args_[i].toTensor();
      view_at_[i] = static_cast<uint8_t>(views_.size() + 1);
      if (!t.defined()) {
        views_.emplace_back();
        continue;
      }
      const DType dtype = view_dtype(t, sig.fp8(i), sig.name(), schema.arguments()[i].name());
      views_.emplace_back(t.data_ptr(), dtype, static_cast<int>(t.dim()), t.sizes().data(),
                          t.strides().data());
    }
  }

  // An input: a read-only view of the tensor (None: absent).
  const TensorView& in(const char* name) const { return view(index(name)); }
  // An output or in-place buffer, an argument the schema marks as written (Tensor(a!)).
  const MutableTensorView& out(const char* name) const {
    const size_t i = index(name);
    if (!sig_.writes(i))
      throw std::logic_error(op() + ": '" + name + "' is not a written argument");
    return view(i);
  }

  int64_t integer(const char* name) const { return arg(name).toInt(); }
  std::optional<int64_t> integer_or_none(const char* name) const {
    const c10::IValue& v = arg(name);
    return v.isNone() ? std::nullopt : std::optional<int64_t>(v.toInt());
  }
  double real(const char* name) const { return arg(name).toDouble(); }
  std::optional<double> real_or_none(const char* name) const {
    const c10::IValue& v = arg(name);
    return v.isNone() ? std::nullopt : std::optional<double>(v.toDouble());
  }
  bool flag(const char* name) const { return arg(name).toBool(); }
  std::string text(const char* name) const { return arg(name).toStringRef(); }
  std::string text_or(const char* name, const char* fallback) const {
    const c10::IValue& v = arg(name);
    return v.isNone() ? fallback : v.toStringRef();
  }
  const std::string& op() const { return sig_.name(); }

  // The keyword-only options; the .no_options overload runs at their defaults.
  Options options() {
    Options o;
    if (!sig_.options()) {
      o.num_threads = at::get_num_threads();
      return o;
    }
    o.impl = parse_impl(op(), arg("impl").toStringRef());
    if (const c10::IValue& v = arg("variant"); !v.isNone()) o.variant = v.toStringRef();
    o.check_finite = flag("check_finite");
    o.num_threads = threads_of(op(), integer_or_none("num_threads"));
    o.fresh_outputs = sig_.fresh_outputs() && flag("fresh_outputs");
    return o;
  }

  // Results, in the order of the schema's returns.
  void give(c10::IValue v) { results_.push_back(std::move(v)); }
  template <class T>
  void give_vector(const std::vector<T>& v, std::vector<int64_t> shape, c10::ScalarType type) {
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(T));
    give(std::move(t));
  }

  std::vector<c10::IValue>& results() { return results_; }

 private:
  size_t index(const char* name) const { return last_ = sig_.index(schema_, name, last_); }
  const c10::IValue& arg(const char* name) const { return args_[index(name)]; }
  const MutableTensorView& view(size_t i) const {
    static const MutableTensorView absent;
    return view_at_[i] ? views_[view_at_[i] - 1u] : absent;
  }

  const Signature& sig_;
  const c10::FunctionSchema& schema_;
  c10::ArrayRef<c10::IValue> args_;
  c10::SmallVector<MutableTensorView, 16> views_;  // the tensor arguments', on the stack
  c10::SmallVector<uint8_t, 32> view_at_;          // per argument: 1 + its view's place, or 0
  mutable size_t last_ = static_cast<size_t>(-1);  // the argument index() found last
  std::vector<c10::IValue> results_;
};

// ---- ops that need more than one line ----

// indexer.md §5: page_size matters only with page_table; without one, None stands for 1.
int64_t page_size_of(const Call& c) {
  if (const std::optional<int64_t> p = c.integer_or_none("page_size")) return *p;
  if (c.in("page_table").present())
    throw ValueError(c.op(), "page_size", {}, "None",
                     "page_size = None: required with page_table (expected a power of two)");
  return 1;
}

// The split as ints, or as I64 [1] tensors (the fixture form) for an op that also writes an
// argument: torch functionalizes such an op only when it returns tensors alone.
void give_split(Call& c, const DecodePrefillSplit& s, bool tensors = false) {
  for (int64_t v : {s.num_decodes, s.num_prefills, s.num_decode_tokens, s.num_prefill_tokens})
    if (tensors)
      c.give_vector(std::vector<int64_t>{v}, {1}, c10::ScalarType::Long);
    else
      c.give(v);
}

// The fixture's results of indexer_metadata (docs/fixture-ops.md): the split (I64 [1] each), the
// per-request compressed lengths, the decode fields (empty without decodes) and the prefill
// chunk (empty tensors without prefills: whether there are prefills depends on the data, so the
// schema's returns cannot be None for torch.compile; the wrapper gives None).
void run_indexer_metadata(Call& c) {
  const int64_t next_n = c.integer_or_none("next_n").value_or(1);
  const IndexerMetadata m = indexer_metadata(c.in("query_start_loc"), c.in("seq_lens"),
                                             c.in("block_table"), c.integer("block_size"),
                                             next_n, c.out("slot_mapping"), c.options());
  const auto n = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  constexpr c10::ScalarType kI32 = c10::ScalarType::Int;
  give_split(c, m.split, true);
  c.give_vector(m.compressed_seq_lens, {n(m.compressed_seq_lens)}, kI32);
  const IndexerDecodeMetadata d = m.decode.value_or(IndexerDecodeMetadata{{}, false, next_n, {}});
  c.give_vector(d.decode_lens, {n(d.decode_lens)}, kI32);
  c.give_vector(d.decode_seq_lens, {n(d.decode_lens), d.next_n}, kI32);
  const IndexerPrefillChunk p = m.prefill.value_or(IndexerPrefillChunk{});
  std::vector<int64_t> chunk;
  if (m.prefill)
    chunk = {p.req_start, p.req_end,      p.token_start,
             p.token_end, p.total_seq_lens, p.skip_kv_gather ? 1 : 0};
  c.give_vector(chunk, {n(chunk)}, c10::ScalarType::Long);
  for (const std::vector<int32_t>* v :
       {&p.cu_seq_lens, &p.cu_seqlen_ks, &p.cu_seqlen_ke, &p.token_req, &p.token_to_seq})
    c.give_vector(*v, {n(*v)}, kI32);
}

nlohmann::json variant_json(const VariantInfo& v) {
  return {{"name", v.name},
          {"role", v.role == Role::reference ? "reference" : "optimized"},
          {"available", v.available},
          {"highway", v.highway},
          {"isa", v.isa},
          {"target", v.target}};
}

// The registry as JSON, for dsv4cpu.registered_ops().
std::string registry_json() {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpInfo& op : registered_ops()) {
    nlohmann::json variants = nlohmann::json::array();
    for (const VariantInfo& v : op.variants) variants.push_back(variant_json(v));
    ops.push_back({{"name", op.name}, {"variants", std::move(variants)}});
  }
  return ops.dump();
}

// The runs of `op` that dsv4cpu-verify --impl all makes (testing::runs, every Highway target
// compiled in and supported here), as JSON for dsv4cpu.runs(): each run's label, variant, forced
// Highway target and its bit; then each absent fixed-ISA variant with the verifier's message and
// whether its ISA is required here.
std::string runs_json(const std::string& op) {
  nlohmann::json out = nlohmann::json::array();
  testing::RunList list;
  try {
    list = testing::runs(op);
  } catch (const std::invalid_argument&) {
    throw ValueError("runs", "op", {}, op, "op = " + op + ": not a registered op");
  }
  for (const testing::Run& r : list.runs)
    out.push_back({{"label", r.label()},
                   {"variant", variant_json(r.variant)},
                   {"target", r.target},
                   {"target_bits", r.target_bits}});
  for (const VariantInfo& v : list.absent) {
    testing::RunList one;
    one.absent = {v};
    const testing::Absence a = testing::absence(op, one);
    out.push_back({{"label", v.name},
                   {"variant", variant_json(v)},
                   {"absent", a.message},
                   {"required", a.required}});
  }
  return out.dump();
}

// Forces Highway dispatch to the target of bit `bits` (a run's target_bits; 0: dispatch as usual)
// for the whole process until the next call, and returns the bits forced before: what
// dsv4cpu.highway_target() sets and restores around the calls of one run.
int64_t pin_highway_target(int64_t bits) {
  static std::optional<testing::ScopedTarget> pinned;
  static int64_t current = 0;
  const int64_t before = current;
  pinned.reset();
  if (bits != 0) {
    testing::Run run;
    run.target_bits = bits;
    pinned.emplace(run);
  }
  current = bits;
  return before;
}

std::string bindings_json();

// ---- the bound ops ----

struct BoundOp {
  const char* name;
  const char* arguments;          // the schema's argument list, in the specification's order
  const char* returns;            // "()" or named returns
  bool options;                   // takes the keyword-only Options arguments
  std::vector<std::string> fp8;   // tensor arguments holding e4m3fn codes (uint8 accepted)
  void (*run)(Call& c);
};

constexpr const char* kOptionArguments =
    "*, str impl=\"best\", str? variant=None, bool check_finite=True, int? num_threads=None";
// Options::fresh_outputs, a keyword of the ops that use it only: torch fills in every keyword a
// call leaves out, about 0.2 µs each on a decode-sized call.
constexpr const char* kFreshOutputsArgument = ", bool fresh_outputs=False";
bool uses_fresh_outputs(const BoundOp& op) {
  return std::strcmp(op.name, "inverse_gptj_rope_o_proj") == 0;
}

const std::vector<BoundOp>& bound_ops() {
  static const std::vector<BoundOp> table = {
      // ---- compressor (compressor.md) ----
      {"save_partial_states",
       "Tensor kv, Tensor score, Tensor ape, Tensor positions, Tensor(a!) state_cache, "
       "Tensor slot_mapping",
       "()", true, {},
       [](Call& c) {
         save_partial_states(c.in("kv"), c.in("score"), c.in("ape"), c.in("positions"),
                             c.out("state_cache"), c.in("slot_mapping"), c.options());
       }},
      {"map_local_to_global_slots",
       "Tensor local_indices, Tensor req_idx, Tensor block_table, int block_size, "
       "Tensor(a!) slots",
       "()", true, {},
       [](Call& c) {
         map_local_to_global_slots(c.in("local_indices"), c.in("req_idx"), c.in("block_table"),
                                   c.integer("block_size"), c.out("slots"), c.options());
       }},
      {"compressor_window_slots",
       "Tensor positions, Tensor token_to_req, Tensor block_table, int block_size, "
       "int compress_ratio, bool overlap, Tensor(a!) gather_slots",
       "()", true, {},
       [](Call& c) {
         compressor_window_slots(c.in("positions"), c.in("token_to_req"), c.in("block_table"),
                                 c.integer("block_size"), c.integer("compress_ratio"),
                                 c.flag("overlap"), c.out("gather_slots"), c.options());
       }},
      {"compress_norm_rope_store",
       "Tensor state_cache, Tensor gather_slots, Tensor positions, Tensor kv_slot_mapping, "
       "Tensor rms_norm_weight, Tensor cos_sin_cache, Tensor(a!) kv_cache, float rms_norm_eps, "
       "int kv_cache_block_size, int compress_ratio, str scale_clamp=\"cpu\"",
       "()", true, {},
       [](Call& c) {
         compress_norm_rope_store(
             c.in("state_cache"), c.in("gather_slots"), c.in("positions"),
             c.in("kv_slot_mapping"), c.in("rms_norm_weight"), c.in("cos_sin_cache"),
             c.out("kv_cache"), c.real("rms_norm_eps"), c.integer("kv_cache_block_size"),
             c.integer("compress_ratio"), parse_scale_clamp(c.op().c_str(), c.text("scale_clamp")),
             c.options());
       }},
      {"compress_norm_rope_store_indexer",
       "Tensor state_cache, Tensor gather_slots, Tensor positions, Tensor kv_slot_mapping, "
       "Tensor rms_norm_weight, Tensor cos_sin_cache, Tensor(a!) kv_cache, float rms_norm_eps, "
       "int kv_cache_block_size, int compress_ratio, str scale_clamp=\"gpu\"",
       "()", true, {},
       [](Call& c) {
         compress_norm_rope_store_indexer(
             c.in("state_cache"), c.in("gather_slots"), c.in("positions"),
             c.in("kv_slot_mapping"), c.in("rms_norm_weight"), c.in("cos_sin_cache"),
             c.out("kv_cache"), c.real("rms_norm_eps"), c.integer("kv_cache_block_size"),
             c.integer("compress_ratio"), parse_scale_clamp(c.op().c_str(), c.text("scale_clamp")),
             c.options());
       }},
      {"make_cos_sin_cache",
       "int rows, float theta, float? yarn_factor, float? yarn_original_max, "
       "float? yarn_beta_fast, float? yarn_beta_slow, float? yarn_mscale, Tensor(a!) cos_sin_cache",
       "()", false, {},
       [](Call& c) {
         // YaRN iff yarn_factor is given; the other four default to DeepSeek-V4's values.
         std::optional<YarnParams> yarn;
         if (const std::optional<double> factor = c.real_or_none("yarn_factor")) {
           const YarnParams d;
           yarn = YarnParams{*factor, c.real_or_none("yarn_original_max").value_or(d.original_max),
                             c.real_or_none("yarn_beta_fast").value_or(d.beta_fast),
                             c.real_or_none("yarn_beta_slow").value_or(d.beta_slow),
                             c.real_or_none("yarn_mscale").value_or(d.mscale)};
         }
         make_cos_sin_cache(c.integer("rows"), c.real("theta"), yarn, c.out("cos_sin_cache"));
       }},
      // ---- indexer (indexer.md) ----
      {"fused_indexer_q_rope_quant",
       "Tensor q, Tensor weights, Tensor positions, Tensor cos_sin_cache, float? softmax_scale, "
       "float? head_scale, Tensor(a!) q_fp8, Tensor(b!) weights_out",
       "()", true, {"q_fp8"},
       [](Call& c) {
         // fp32 scalars: the Python float rounded once; None gives the spec's default.
         const auto scale = [&](const char* name, float fallback) {
           const std::optional<double> v = c.real_or_none(name);
           return v ? static_cast<float>(*v) : fallback;
         };
         fused_indexer_q_rope_quant(c.in("q"), c.in("weights"), c.in("positions"),
                                    c.in("cos_sin_cache"),
                                    scale("softmax_scale", kIndexerSoftmaxScale),
                                    scale("head_scale", kIndexerHeadScale), c.out("q_fp8"),
                                    c.out("weights_out"), c.options());
       }},
      {"fp8_paged_mqa_logits",
       "Tensor q_fp8, Tensor kv_cache, Tensor weights, Tensor seq_lens, Tensor page_table, "
       "int block_size, int max_seq_len, Tensor(a!) logits, int next_n=1",
       "()", true, {"q_fp8"},
       [](Call& c) {
         fp8_paged_mqa_logits(c.in("q_fp8"), c.in("kv_cache"), c.in("weights"), c.in("seq_lens"),
                              c.in("page_table"), c.integer("block_size"),
                              c.integer("max_seq_len"), c.out("logits"), c.integer("next_n"),
                              c.options());
       }},
      {"topk_transform_512",
       "Tensor scores, Tensor seq_lens, Tensor? page_table, int? page_size, str? mode, "
       "Tensor(a!) raw_indices, Tensor(b!)? page_indices",
       "()", true, {},
       [](Call& c) {
         topk_transform_512(c.in("scores"), c.in("seq_lens"), c.in("page_table"),
                            page_size_of(c), parse_topk_mode(c.op().c_str(),
                                                             c.text_or("mode", "canonical")),
                            c.out("raw_indices"), c.out("page_indices"), c.options());
       }},
      {"topk_transform_1024",
       "Tensor scores, Tensor seq_lens, Tensor? page_table, int? page_size, "
       "Tensor(a!) raw_indices, Tensor(b!)? page_indices",
       "()", true, {},
       [](Call& c) {
         topk_transform_1024(c.in("scores"), c.in("seq_lens"), c.in("page_table"),
                             page_size_of(c), c.out("raw_indices"), c.out("page_indices"),
                             c.options());
       }},
      {"short_context_topk", "Tensor positions, Tensor(a!) topk_indices", "()", true, {},
       [](Call& c) { short_context_topk(c.in("positions"), c.out("topk_indices"), c.options()); }},
      {"indexer_topk",
       "Tensor q_fp8, Tensor weights, Tensor query_start_loc, Tensor seq_lens, "
       "Tensor block_table, Tensor kv_cache, int block_size, str? mode, Tensor(a!) topk_indices",
       "()", true, {"q_fp8"},
       [](Call& c) {
         indexer_topk(c.in("q_fp8"), c.in("weights"), c.in("query_start_loc"), c.in("seq_lens"),
                      c.in("block_table"), c.in("kv_cache"), c.integer("block_size"),
                      parse_topk_mode(c.op().c_str(), c.text_or("mode", "canonical")),
                      c.out("topk_indices"), c.options());
       }},
      // ---- metadata (metadata.md) ----
      {"token_positions",
       "Tensor query_start_loc, Tensor seq_lens, Tensor(a!) positions, Tensor(b!) token_to_req",
       "()", true, {},
       [](Call& c) {
         token_positions(c.in("query_start_loc"), c.in("seq_lens"), c.out("positions"),
                         c.out("token_to_req"), c.options());
       }},
      {"slot_mapping",
       "Tensor positions, Tensor token_to_req, Tensor block_table, int block_size, "
       "Tensor(a!) slot_mapping",
       "()", true, {},
       [](Call& c) {
         slot_mapping(c.in("positions"), c.in("token_to_req"), c.in("block_table"),
                      c.integer("block_size"), c.out("slot_mapping"), c.options());
       }},
      {"split_decodes_and_prefills", "Tensor query_start_loc, int threshold",
       "(SymInt num_decodes, SymInt num_prefills, SymInt num_decode_tokens, "
       "SymInt num_prefill_tokens)",
       true, {},
       [](Call& c) {
         give_split(c, split_decodes_and_prefills(c.in("query_start_loc"), c.integer("threshold"),
                                                  c.options()));
       }},
      {"compressed_slot_mapping",
       "Tensor query_start_loc, Tensor seq_lens, Tensor block_table, int compress_ratio, "
       "int block_size, Tensor? token_slot_mapping, Tensor(a!) slot_mapping",
       "()", true, {},
       [](Call& c) {
         compressed_slot_mapping(c.in("query_start_loc"), c.in("seq_lens"), c.in("block_table"),
                                 c.integer("compress_ratio"), c.integer("block_size"),
                                 c.in("token_slot_mapping"), c.out("slot_mapping"), c.options());
       }},
      {"swa_window_indices",
       "Tensor positions, Tensor token_to_req, Tensor block_table, int window, int block_size, "
       "Tensor(a!) indices, Tensor(b!)? lens=None",
       "()", true, {},
       [](Call& c) {
         swa_window_indices(c.in("positions"), c.in("token_to_req"), c.in("block_table"),
                            c.integer("window"), c.integer("block_size"), c.out("indices"),
                            c.out("lens"), c.options());
       }},
      {"c128a_topk_indices",
       "Tensor positions, Tensor token_to_req, Tensor block_table, int max_model_len, "
       "int block_size, Tensor(a!) indices",
       "()", true, {},
       [](Call& c) {
         c128a_topk_indices(c.in("positions"), c.in("token_to_req"), c.in("block_table"),
                            c.integer("max_model_len"), c.integer("block_size"), c.out("indices"),
                            c.options());
       }},
      {"c128a_topk_indices_compact",
       "Tensor positions, Tensor token_to_req, Tensor block_table, int block_size, "
       "Tensor(a!) indices",
       "()", true, {},
       [](Call& c) {
         c128a_topk_indices_compact(c.in("positions"), c.in("token_to_req"), c.in("block_table"),
                                    c.integer("block_size"), c.out("indices"), c.options());
       }},
      {"c128a_decode_metadata",
       "Tensor positions, Tensor token_to_req, Tensor block_table, int max_model_len, "
       "int block_size, int num_decode_tokens, Tensor? token_slot_mapping, "
       "Tensor(a!) decode_global, Tensor(b!) decode_lens, Tensor(c!) prefill_local",
       "()", true, {},
       [](Call& c) {
         c128a_decode_metadata(c.in("positions"), c.in("token_to_req"), c.in("block_table"),
                               c.integer("max_model_len"), c.integer("block_size"),
                               c.integer("num_decode_tokens"), c.in("token_slot_mapping"),
                               c.out("decode_global"), c.out("decode_lens"),
                               c.out("prefill_local"), c.options());
       }},
      {"c4a_global_topk_indices",
       "Tensor topk_indices, Tensor token_to_req, Tensor block_table, int block_size, "
       "Tensor? token_slot_mapping, Tensor(a!) indices, Tensor(b!) lens",
       "()", true, {},
       [](Call& c) {
         c4a_global_topk_indices(c.in("topk_indices"), c.in("token_to_req"), c.in("block_table"),
                                 c.integer("block_size"), c.in("token_slot_mapping"),
                                 c.out("indices"), c.out("lens"), c.options());
       }},
      {"indexer_metadata",
       "Tensor query_start_loc, Tensor seq_lens, Tensor block_table, int block_size, int? next_n, "
       "Tensor(a!) slot_mapping",
       "(Tensor num_decodes, Tensor num_prefills, Tensor num_decode_tokens, "
       "Tensor num_prefill_tokens, Tensor compressed_seq_lens, Tensor decode_lens, "
       "Tensor decode_seq_lens, Tensor chunk, Tensor cu_seq_lens, Tensor cu_seqlen_ks, "
       "Tensor cu_seqlen_ke, Tensor token_req, Tensor token_to_seq)",
       true, {}, run_indexer_metadata},
      {"split_indexer_prefill_chunks",
       "Tensor compressed_lens, Tensor query_lens, int workspace, int max_logits_bytes, "
       "int request_offset",
       "(Tensor chunks)", true, {},
       [](Call& c) {
         const std::vector<PrefillChunk> chunks = split_indexer_prefill_chunks(
             c.in("compressed_lens"), c.in("query_lens"), c.integer("workspace"),
             c.integer("max_logits_bytes"), c.integer("request_offset"), c.options());
         std::vector<int64_t> rows;
         for (const PrefillChunk& ch : chunks)
           rows.insert(rows.end(), {ch.req_start, ch.req_end, ch.q_start, ch.q_end});
         c.give_vector(rows, {static_cast<int64_t>(chunks.size()), 4}, c10::ScalarType::Long);
       }},
      // ---- attention (attention.md) ----
      {"sparse_mla_attention",
       "Tensor q, Tensor window_cache, int window_block_size, Tensor window_slots, "
       "Tensor compressed_cache, int compressed_block_size, Tensor compressed_slots, "
       "Tensor? attn_sink, float? scale, str? nope_decode, Tensor(a!) out, Tensor(b!)? lse=None",
       "()", true, {},
       [](Call& c) {
         // scale: the Python float rounded once to fp32; None gives RN(512^-0.5).
         const std::optional<double> scale = c.real_or_none("scale");
         sparse_mla_attention(
             c.in("q"), c.in("window_cache"), c.integer("window_block_size"),
             c.in("window_slots"), c.in("compressed_cache"), c.integer("compressed_block_size"),
             c.in("compressed_slots"), c.in("attn_sink"),
             scale ? static_cast<float>(*scale) : kAttentionScale,
             parse_nope_decode(c.op().c_str(), c.text_or("nope_decode", "exact")), c.out("out"),
             c.out("lse"), c.options());
       }},
      {"fused_qnorm_rope_kv_insert",
       "Tensor q, Tensor kv, Tensor positions, Tensor slot_mapping, Tensor(a!) swa_cache, "
       "Tensor cos_sin_cache, int q_head_padded, float eps, int cache_block_size, "
       "str? scale_clamp, str? fp8_subnormals, Tensor(b!) q_out",
       "()", true, {},
       [](Call& c) {
         fused_qnorm_rope_kv_insert(
             c.in("q"), c.in("kv"), c.in("positions"), c.in("slot_mapping"), c.out("swa_cache"),
             c.in("cos_sin_cache"), c.integer("q_head_padded"), c.real("eps"),
             c.integer("cache_block_size"),
             parse_scale_clamp(c.op().c_str(), c.text_or("scale_clamp", "cpu")),
             parse_fp8_subnormals(c.op().c_str(), c.text_or("fp8_subnormals", "exact")),
             c.out("q_out"), c.options());
       }},
      {"inverse_gptj_rope_o_proj",
       "Tensor o, Tensor positions, Tensor cos_sin_cache, int rope_dim, Tensor(a!) out", "()",
       true, {},
       [](Call& c) {
         inverse_gptj_rope_o_proj(c.in("o"), c.in("positions"), c.in("cos_sin_cache"),
                                  c.integer("rope_dim"), c.out("out"), c.options());
       }},
      // ---- size helpers ----
      {"c128a_topk_width", "int max_model_len", "int", false, {},
       [](Call& c) { c.give(c128a_topk_width(c.integer("max_model_len"))); }},
      {"c128a_compact_width", "Tensor positions", "SymInt", false, {},
       [](Call& c) { c.give(c128a_compact_width(c.in("positions"))); }},
      {"c128a_decode_max_width", "int max_model_len", "int", false, {},
       [](Call& c) { c.give(c128a_decode_max_width(c.integer("max_model_len"))); }},
  };
  return table;
}

// torch.ops._dsv4cpu: what is not a tensor op (string results, process state, the package's
// tooling), kept out of torch.ops.dsv4cpu, whose every op torch.compile traces and opcheck checks.
const std::vector<BoundOp>& tool_ops() {
  static const std::vector<BoundOp> table = {
      {"build_tile_scheduler", "str layer_kind", "str", true, {},
       [](Call& c) { c.give(build_tile_scheduler(c.text("layer_kind"), c.options())); }},
      {"selected_variant", "str op", "str", true, {},
       [](Call& c) { c.give(selected_variant(c.text("op"), c.options())); }},
      {"_registered_ops", "", "str", false, {}, [](Call& c) { c.give(registry_json()); }},
      {"_runs", "str op", "str", false, {}, [](Call& c) { c.give(runs_json(c.text("op"))); }},
      {"_pin_highway_target", "int target_bits", "int", false, {},
       [](Call& c) { c.give(pin_highway_target(c.integer("target_bits"))); }},
      {"_bindings", "", "str", false, {}, [](Call& c) { c.give(bindings_json()); }},
      {"_num_threads", "int? num_threads", "int", false, {},
       [](Call& c) { c.give(threads_of(c.op(), c.integer_or_none("num_threads"))); }},
      {"_vllm_natives", "", "str", false, {}, [](Call& c) { c.give(vllm_natives_json()); }},
      {"_vllm_serve", "str name", "bool", false, {},
       [](Call& c) { c.give(vllm_serve(c.text("name"))); }},
      {"_vllm_unserve", "", "()", false, {}, [](Call&) { vllm_unserve(); }},
      {"_vllm_counts", "", "str", false, {}, [](Call& c) { c.give(vllm_counts_json()); }},
  };
  return table;
}

// Every bound op with the arguments that hold fp8 codes, for the dsv4cpu package (fixtures keep
// F8_E4M3 apart from U8 where torch has no float8 dtype).
std::string bindings_json() {
  nlohmann::json ops = nlohmann::json::object();
  for (const BoundOp& op : bound_ops()) ops[op.name] = {{"fp8", op.fp8}};
  return ops.dump();
}

// The overload of an op with options that takes none (it runs at their defaults): torch parses
// every keyword-only argument a call leaves out (a string made, hashed and looked up in the call's
// keywords), 0.29 µs for the four options on a decode-sized call of save_partial_states.
constexpr const char* kNoOptions = "no_options";

// The op's schema; `options` false: its .no_options overload (an op with options only).
std::string schema_of(const BoundOp& op, bool options = true) {
  if (!options) return std::string(op.name) + "." + kNoOptions + "(" + op.arguments + ") -> " +
                       op.returns;
  std::string s = std::string(op.name) + "(" + op.arguments;
  if (op.options) s += std::string(*op.arguments ? ", " : "") + kOptionArguments;
  if (uses_fresh_outputs(op)) s += kFreshOutputsArgument;
  return s + ") -> " + op.returns;
}

Signature::Signature(const BoundOp& op, const c10::FunctionSchema& schema)
    : op_(op), name_(op.name), options_(schema.argumentIndexWithName("impl").has_value()),
      fresh_outputs_(options_ && uses_fresh_outputs(op)), literals_(schema.arguments().size()) {
  for (const c10::Argument& a : schema.arguments()) {
    written_.push_back(written(a));
    fp8_.push_back(std::find(op.fp8.begin(), op.fp8.end(), a.name()) != op.fp8.end());
  }
}

// The one kernel of every bound op, made for its table entry when the op is registered: runs the
// entry on the stack's arguments and replaces them with its results. The Python binding of
// torch.ops releases the GIL around it.
class BoundKernel final : public c10::OperatorKernel {
 public:
  BoundKernel(const BoundOp& op, const c10::FunctionSchema& schema) : sig_(op, schema) {}

  void operator()(const c10::OperatorHandle& handle, c10::DispatchKeySet,
                  torch::jit::Stack* stack) const {
    const c10::FunctionSchema& schema = handle.schema();
    std::vector<c10::IValue> results;
    try {
      Call call(sig_, schema, *stack);
      sig_.op().run(call);
      results = std::move(call.results());
    } catch (const Error& e) {
      raise_for_python(e);
    }
    torch::jit::drop(*stack, sig_.size());
    for (c10::IValue& r : results) torch::jit::push(*stack, std::move(r));
  }

 private:
  Signature sig_;
};

torch::CppFunction kernel_of(const BoundOp& op, bool options = true) {
  return torch::CppFunction::makeFromBoxedFunctor(
      std::make_unique<BoundKernel>(op, torch::schema(schema_of(op, options).c_str())));
}

}  // namespace
}  // namespace dsv4cpu::python

namespace dsv4cpu::python {
namespace {

bool takes_tensors(const BoundOp& op) { return std::strstr(op.arguments, "Tensor") != nullptr; }

// torch.compile functionalizes an op that writes arguments through a higher-order op that takes
// the op's arguments as keywords beside its own `mode`: an op with an argument `mode`
// (topk_transform_512, indexer_topk) has instead a functional twin, _dsv4cpu::<op>_functional
// (the written arguments read only, their new values returned), and a Functionalize kernel that
// calls it.
bool has_functional_twin(const BoundOp& op) {
  return torch::schema(schema_of(op).c_str()).argumentIndexWithName("mode").has_value();
}

constexpr const char* kTwinSuffix = "_functional";

std::string twin_schema(const BoundOp& op) {
  std::string arguments = op.arguments;
  for (size_t at; (at = arguments.find("!)")) != std::string::npos;) arguments.erase(at - 2, 4);
  std::string returns;
  const c10::FunctionSchema schema = torch::schema(schema_of(op).c_str());
  for (const c10::Argument& a : schema.arguments())
    if (written(a))
      returns += std::string(returns.empty() ? "" : ", ") +
                 (a.type()->kind() == c10::TypeKind::OptionalType ? "Tensor? " : "Tensor ") +
                 a.name();
  return std::string(op.name) + kTwinSuffix + "(" + arguments + ", " + kOptionArguments +
         ") -> (" + returns + ")";
}

// The twin's CPU kernel: the op on copies of the written arguments, which it returns.
void run_twin(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const std::string& full = handle.schema().name();
  const size_t start = full.find("::") + 2;
  const std::string name = full.substr(start, full.size() - start - std::strlen(kTwinSuffix));
  const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow(("dsv4cpu::" + name).c_str(), "");
  const std::vector<c10::Argument>& arguments = op.schema().arguments();
  const size_t n = arguments.size();
  std::vector<c10::IValue> results;
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[stack->size() - n + i];
    if (!written(arguments[i])) continue;
    if (v.isTensor()) v = v.toTensor().clone();
    results.push_back(v);
  }
  op.callBoxed(stack);
  for (c10::IValue& r : results) torch::jit::push(*stack, std::move(r));
}

// The op's Functionalize kernel: its twin on the arguments' values (the .no_options overload's
// with the options' defaults); the results become the new values of the written arguments.
void functionalize(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  namespace functional = at::functionalization::impl;
  const std::string& full = handle.schema().name();
  const c10::OperatorHandle twin = c10::Dispatcher::singleton().findSchemaOrThrow(
      ("_" + full + kTwinSuffix).c_str(), "");
  const std::vector<c10::Argument>& arguments = handle.schema().arguments();
  const size_t n = arguments.size();
  std::vector<at::Tensor> buffers;  // the written arguments, None as undefined
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[stack->size() - n + i];
    const bool is_functional = v.isTensor() && functional::isFunctionalTensor(v.toTensor());
    if (written(arguments[i])) buffers.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
    if (!is_functional) continue;
    functional::sync(v.toTensor());
    v = functional::from_functional_tensor(v.toTensor());
  }
  for (size_t i = n; i < twin.schema().arguments().size(); ++i)
    torch::jit::push(*stack, *twin.schema().arguments()[i].default_value());
  {
    c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKey::Functionalize);
    twin.callBoxed(stack);
  }
  std::vector<c10::IValue> values = torch::jit::pop(*stack, buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].defined() || !functional::isFunctionalTensor(buffers[i])) continue;
    functional::replace_(buffers[i], values[i].toTensor());
    functional::commit_update(buffers[i]);
    functional::sync(buffers[i]);
  }
}

// The overload .functional of inverse_gptj_rope_o_proj: the op's inputs, its output allocated
// and returned, at the options' defaults (as .no_options). A decode call takes a few µs, and the
// wrapper's allocation of `out` from Python cost as much (docs/decisions.md, "PyTorch bindings");
// vLLM's operator allocates its own in C++ too.
constexpr const char* kInverseRopeFunctional =
    "inverse_gptj_rope_o_proj.functional(Tensor o, Tensor positions, Tensor cos_sin_cache, "
    "int rope_dim) -> Tensor out";

at::Tensor inverse_gptj_rope_o_proj_functional(const at::Tensor& o, const at::Tensor& positions,
                                               const at::Tensor& cos_sin_cache,
                                               int64_t rope_dim) {
  Options options;
  options.num_threads = at::get_num_threads();
  try {
    return inverse_gptj_rope_o_proj_fresh(o, positions, cos_sin_cache, rope_dim, options);
  } catch (const Error& e) {
    raise_for_python(e);
  }
}

// The twins' schemas, alive as long as the registrations that refer to them.
const std::vector<std::pair<std::string, std::string>>& twins() {
  static const std::vector<std::pair<std::string, std::string>> list = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const BoundOp& op : bound_ops())
      if (has_functional_twin(op)) out.emplace_back(op.name + std::string(kTwinSuffix),
                                                    twin_schema(op));
    return out;
  }();
  return list;
}

}  // namespace
}  // namespace dsv4cpu::python

// Every op; an op with options also as its overload .no_options (kNoOptions); the overload
// inverse_gptj_rope_o_proj.functional.
TORCH_LIBRARY(dsv4cpu, m) {
  using namespace dsv4cpu::python;
  for (const BoundOp& op : bound_ops()) {
    m.def(torch::schema(schema_of(op).c_str(), c10::AliasAnalysisKind::FROM_SCHEMA));
    if (op.options)
      m.def(torch::schema(schema_of(op, false).c_str(), c10::AliasAnalysisKind::FROM_SCHEMA));
  }
  m.def(torch::schema(kInverseRopeFunctional, c10::AliasAnalysisKind::FROM_SCHEMA));
}

namespace dsv4cpu::python {
namespace {

// Registers kernel(op, options) as the kernel of each overload of each op `which` selects.
template <class Which, class Kernel>
void impl_overloads(torch::Library& m, Which which, Kernel kernel) {
  for (const BoundOp& op : bound_ops()) {
    if (!which(op)) continue;
    m.impl(op.name, kernel(op, true));
    if (op.options) m.impl((std::string(op.name) + "." + kNoOptions).c_str(), kernel(op, false));
  }
}

}  // namespace
}  // namespace dsv4cpu::python

TORCH_LIBRARY_IMPL(dsv4cpu, CPU, m) {
  using namespace dsv4cpu::python;
  impl_overloads(m, takes_tensors, kernel_of);
  m.impl("inverse_gptj_rope_o_proj.functional", TORCH_FN(inverse_gptj_rope_o_proj_functional));
}

TORCH_LIBRARY_IMPL(dsv4cpu, Functionalize, m) {
  using namespace dsv4cpu::python;
  impl_overloads(m, has_functional_twin, [](const BoundOp&, bool) {
    return torch::CppFunction::makeFromBoxedFunction<&functionalize>();
  });
}

// Ops without a tensor argument have no backend to dispatch on: one kernel for every key.
TORCH_LIBRARY_IMPL(dsv4cpu, CompositeExplicitAutograd, m) {
  using namespace dsv4cpu::python;
  impl_overloads(m, [](const BoundOp& op) { return !takes_tensors(op); }, kernel_of);
}

TORCH_LIBRARY(_dsv4cpu, m) {
  using namespace dsv4cpu::python;
  for (const BoundOp& op : tool_ops())
    m.def(torch::schema(schema_of(op).c_str(), c10::AliasAnalysisKind::FROM_SCHEMA), kernel_of(op));
  // An output the wrappers allocate (dsv4cpu._wrappers.allocate), from the blocks of freed outputs
  // as the C++ allocations of the ops are (OutputBlocks).
  m.def("_empty_output(int[] shape, ScalarType dtype) -> Tensor",
        [](c10::IntArrayRef shape, c10::ScalarType dtype) {
          return empty_output(shape, at::TensorOptions().dtype(dtype));
        });
  // Raises the typed dsv4cpu error of a message of raise_for_python's form: its kernel is the
  // package's Python (dsv4cpu.vllm), called by the kernels of python/csrc/vllm.cpp.
  m.def("_raise_error(str message) -> ()");
  for (const auto& [name, schema] : twins()) {
    m.def(torch::schema(schema.c_str(), c10::AliasAnalysisKind::FROM_SCHEMA));
    m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CPU,
                                         torch::CppFunction::makeFromBoxedFunction<&run_twin>()));
  }
}

// The size helpers of cache_sizes.hpp and the library's version, for dsv4cpu.sizes and
// dsv4cpu.__version__ (ctypes): plain functions of integers, not tensor ops.
#define DSV4CPU_C_API extern "C" __attribute__((visibility("default")))
#define DSV4CPU_C_CONSTANT(name) DSV4CPU_C_API const int64_t dsv4cpu_##name = dsv4cpu::name;
#define DSV4CPU_C_SIZE1(name) \
  DSV4CPU_C_API int64_t dsv4cpu_##name(int64_t a) { return dsv4cpu::name(a); }
DSV4CPU_C_API const char* dsv4cpu_version() { return dsv4cpu::version(); }
DSV4CPU_C_CONSTANT(kFp8DsMlaEntryBytes)
DSV4CPU_C_CONSTANT(kIndexerKEntryBytes)
DSV4CPU_C_CONSTANT(kTokensPerCompressedBlock)
DSV4CPU_C_CONSTANT(kSwaBlockSize)
DSV4CPU_C_CONSTANT(kSlidingWindow)
DSV4CPU_C_CONSTANT(kMainHeadDim)
DSV4CPU_C_CONSTANT(kIndexerHeadDim)
DSV4CPU_C_CONSTANT(kCosSinColumns)
DSV4CPU_C_CONSTANT(kIndexerHeads)
DSV4CPU_C_CONSTANT(kIndexerTopk)
DSV4CPU_C_SIZE1(fp8_ds_mla_page_bytes)
DSV4CPU_C_SIZE1(indexer_k_page_bytes)
DSV4CPU_C_SIZE1(compressed_block_size)
DSV4CPU_C_SIZE1(compressor_state_block_size)
DSV4CPU_C_SIZE1(compressor_window)
DSV4CPU_C_SIZE1(compressor_overlap)
DSV4CPU_C_API int64_t dsv4cpu_compressor_window_overlap(int64_t r, bool overlap) {
  return dsv4cpu::compressor_window(r, overlap);
}
DSV4CPU_C_API int64_t dsv4cpu_compressor_state_width_overlap(int64_t hd, bool overlap) {
  return dsv4cpu::compressor_state_width(hd, overlap);
}
DSV4CPU_C_API int64_t dsv4cpu_compressor_state_width(int64_t r, int64_t hd) {
  return dsv4cpu::compressor_state_width(r, hd);
}
DSV4CPU_C_API int64_t dsv4cpu_compressor_state_row_floats(int64_t r, int64_t hd) {
  return dsv4cpu::compressor_state_row_floats(r, hd);
}
DSV4CPU_C_API int64_t dsv4cpu_compressor_state_page_floats(int64_t sbs, int64_t r, int64_t hd) {
  return dsv4cpu::compressor_state_page_floats(sbs, r, hd);
}
