// vLLM's operators served without Python on the call's path, for the dsv4cpu.vllm plugin
// (python/dsv4cpu/vllm.py): a C++ kernel registered on vLLM's own operator (torch.ops._C.<name>,
// CPU) reads vLLM's arguments from the stack, calls the library at vLLM's option values and leaves
// vLLM's results. An engine's call then costs torch's dispatch and the library's work, as vLLM's
// own kernel does, where a Python kernel would add its interpreter, the wrapper's binding and a
// second dispatch (docs/vllm.md, "How"). Outputs vLLM does not pass are allocated here by the
// op's wrapper's rule (allocate_output).
//
// Bad input raises the typed dsv4cpu error, as the Python path does: the kernel hands the message
// to _dsv4cpu::_raise_error, whose kernel is the package's Python (registered by the plugin),
// and the Python exception it raises goes through torch to vLLM's caller unchanged.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>
#include <torch/version.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsv4cpu/dsv4cpu.hpp"
#include "python/csrc/binding.hpp"

namespace dsv4cpu::python {
namespace {

// What the vLLM operator name's call reads: the stack's arguments in vLLM's schema order.
using Args = c10::ArrayRef<c10::IValue>;

// The dsv4cpu view of a tensor argument, named as the dsv4cpu op names it (errors match the op's).
// Kept as the MutableTensorView it is: a TensorView copy of a view just made waits for the view's
// narrow stores.
MutableTensorView view(const c10::IValue& v, const char* op, const char* name,
                       bool fp8 = false) {
  return view_of(v.toTensor(), fp8, op, name);
}

// vLLM's option values for the ops served here: the defaults, on torch's intra-op thread count.
Options vllm_options() {
  Options o;
  o.num_threads = at::get_num_threads();
  return o;
}

// save_partial_states_cpu(Tensor kv, Tensor score, Tensor ape, Tensor positions,
//                         Tensor(a!) state_cache, Tensor slot_mapping) -> ()
at::Tensor serve_save_partial_states(Args a) {
  constexpr const char* op = "save_partial_states";
  const MutableTensorView kv = view(a[0], op, "kv"), score = view(a[1], op, "score"),
                   ape = view(a[2], op, "ape"), positions = view(a[3], op, "positions");
  const MutableTensorView state_cache = view(a[4], op, "state_cache");
  save_partial_states(kv, score, ape, positions, state_cache, view(a[5], op, "slot_mapping"),
                      vllm_options());
  return {};
}

// The bytes [lo, hi) from the first to one past the last element (strides >= 0); an empty tensor
// gives [data, data).
std::pair<uintptr_t, uintptr_t> byte_range(const at::Tensor& t) {
  const auto lo = reinterpret_cast<uintptr_t>(t.data_ptr());
  if (t.numel() == 0) return {lo, lo};
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {lo, lo + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(t.element_size()))};
}

// dsv4cpu.vllm._compact_state (its docstring says why): vLLM's hybrid KV cache lays a compress
// op's state_cache and kv_cache_2d over one buffer; then the state pages gather_slots reads are
// passed as a compact copy, the slots renumbered. Slots outside [-1, nb·sbs) leave the arguments
// as they are, for the op to report.
std::pair<at::Tensor, at::Tensor> compact_state(const at::Tensor& state_cache,
                                                const at::Tensor& gather_slots,
                                                const at::Tensor& kv_cache) {
  const auto [s0, s1] = byte_range(state_cache);
  const auto [k0, k1] = byte_range(kv_cache);
  if (state_cache.dim() != 3 || gather_slots.numel() == 0 || !(s0 < k1 && k0 < s1))
    return {state_cache, gather_slots};
  const int64_t rows = state_cache.size(1);
  const at::Tensor slots = gather_slots.to(at::kLong);
  if ((slots < -1).any().item<bool>() || (slots >= state_cache.size(0) * rows).any().item<bool>())
    return {state_cache, gather_slots};
  const at::Tensor valid = slots >= 0;
  const at::Tensor pages =
      std::get<0>(at::_unique(at::div(slots.masked_select(valid), rows, "floor"), true, false));
  const at::Tensor read = slots.clamp_min(0);
  const at::Tensor local = at::searchsorted(pages, at::div(read, rows, "floor")) * rows +
                           at::remainder(read, rows);
  return {state_cache.index_select(0, pages),
          at::where(valid, local, slots).to(gather_slots.scalar_type()).contiguous()};
}

// compress_norm_rope_store_cpu and compress_norm_rope_store_indexer_cpu(Tensor state_cache,
//     Tensor gather_slots, Tensor positions, Tensor kv_slot_mapping, Tensor rms_norm_weight,
//     float rms_norm_eps, Tensor cos_sin_cache, Tensor(a!) kv_cache_2d, int kv_cache_block_size,
//     int compress_ratio) -> (): vLLM's scale_clamp is "cpu" for the first, "gpu" for the second
//     (dsv4cpu.vllm.OPTIONS, which the plugin's tests compare the bytes at).
template <bool kIndexer>
at::Tensor serve_compress(Args a) {
  constexpr const char* op =
      kIndexer ? "compress_norm_rope_store_indexer" : "compress_norm_rope_store";
  const auto [state, slots] = compact_state(a[0].toTensor(), a[1].toTensor(), a[7].toTensor());
  const MutableTensorView state_cache = view_of(state, false, op, "state_cache"),
                   gather_slots = view_of(slots, false, op, "gather_slots"),
                   positions = view(a[2], op, "positions"),
                   kv_slot_mapping = view(a[3], op, "kv_slot_mapping"),
                   rms_norm_weight = view(a[4], op, "rms_norm_weight"),
                   cos_sin_cache = view(a[6], op, "cos_sin_cache");
  const MutableTensorView kv_cache = view(a[7], op, "kv_cache");
  const auto run = kIndexer ? &compress_norm_rope_store_indexer : &compress_norm_rope_store;
  run(state_cache, gather_slots, positions, kv_slot_mapping, rms_norm_weight, cos_sin_cache,
      kv_cache, a[5].toDouble(), a[8].toInt(), a[9].toInt(),
      kIndexer ? ScaleClamp::gpu : ScaleClamp::cpu, vllm_options());
  return {};
}

// fused_indexer_q_rope_quant_cpu(Tensor positions, Tensor index_q,
//     Tensor index_q_cos_sin_cache, Tensor(a!) index_q_fp8, Tensor index_weights,
//     float index_weights_softmax_scale, float index_weights_head_scale,
//     Tensor(b!) index_weights_out) -> ()
// The views in the dsv4cpu op's argument order, so that the same argument is reported first.
at::Tensor serve_fused_indexer_q_rope_quant(Args a) {
  constexpr const char* op = "fused_indexer_q_rope_quant";
  const MutableTensorView q = view(a[1], op, "q"), weights = view(a[4], op, "weights"),
                   positions = view(a[0], op, "positions"),
                   cos_sin_cache = view(a[2], op, "cos_sin_cache");
  const MutableTensorView q_fp8 = view(a[3], op, "q_fp8", true);
  fused_indexer_q_rope_quant(q, weights, positions, cos_sin_cache,
                             static_cast<float>(a[5].toDouble()),
                             static_cast<float>(a[6].toDouble()), q_fp8,
                             view(a[7], op, "weights_out"), vllm_options());
  return {};
}

// inverse_gptj_rope_o_proj_cpu(Tensor o, Tensor positions, Tensor cos_sin_cache,
//                              int rope_dim) -> Tensor: out allocated and returned.
at::Tensor serve_inverse_gptj_rope_o_proj(Args a) {
  return inverse_gptj_rope_o_proj_fresh(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(),
                                        a[3].toInt(), vllm_options());
}

// fused_qnorm_rope_kv_insert_cpu(Tensor q, Tensor kv, Tensor positions,
//     Tensor(a!) swa_kv_cache_2d, Tensor slot_mapping, Tensor cos_sin_cache, int q_head_padded,
//     float eps, int cache_block_size) -> Tensor: at vLLM's options (dsv4cpu.vllm.OPTIONS, which
//     the plugin's tests compare the bytes at), q_out (BF16 [T, q_head_padded, 512]) allocated here
//     by the op's wrapper's rule (allocate_output).
at::Tensor serve_fused_qnorm_rope_kv_insert(Args a) {
  constexpr const char* op = "fused_qnorm_rope_kv_insert";
  const at::Tensor& q_tensor = a[0].toTensor();
  const std::vector<int64_t> shape = {q_tensor.dim() > 0 ? q_tensor.size(0) : 0, a[6].toInt(),
                                      kMainHeadDim};
  const Allocated q_out = allocate_output(shape, q_tensor.options().dtype(at::kBFloat16));
  const MutableTensorView q = view(a[0], op, "q"), kv = view(a[1], op, "kv"),
                   positions = view(a[2], op, "positions"),
                   slot_mapping = view(a[4], op, "slot_mapping");
  const MutableTensorView swa_cache = view(a[3], op, "swa_cache");
  fused_qnorm_rope_kv_insert(q, kv, positions, slot_mapping, swa_cache,
                             view(a[5], op, "cos_sin_cache"), a[6].toInt(), a[7].toDouble(),
                             a[8].toInt(), ScaleClamp::cpu, Fp8Subnormals::flush,
                             view_of(q_out.tensor, false, op, "q_out"), vllm_options());
  if (!q_out.fits) raise_unallocatable(op, "q_out", shape);
  return q_out.tensor;
}

// fp8_paged_mqa_logits_cpu(Tensor q_fp8, Tensor kvcache_fp8, Tensor weight, Tensor seq_lens,
//     Tensor page_table, int block_size, int max_seq_len) -> Tensor: logits (F32 [rows of q_fp8,
//     max_seq_len], the rows counted as the op's wrapper counts them) allocated here.
at::Tensor serve_fp8_paged_mqa_logits(Args a) {
  constexpr const char* op = "fp8_paged_mqa_logits";
  const at::Tensor& q_tensor = a[0].toTensor();
  const int64_t rows = q_tensor.dim() == 4   ? q_tensor.size(0) * q_tensor.size(1)
                       : q_tensor.dim() > 0 ? q_tensor.size(0)
                                            : 0;
  const std::vector<int64_t> shape = {rows, a[6].toInt()};
  const Allocated logits = allocate_output(shape, q_tensor.options().dtype(at::kFloat));
  const MutableTensorView q_fp8 = view(a[0], op, "q_fp8", true),
                          kv_cache = view(a[1], op, "kv_cache"), weights = view(a[2], op, "weights"),
                          seq_lens = view(a[3], op, "seq_lens"),
                          page_table = view(a[4], op, "page_table");
  fp8_paged_mqa_logits(q_fp8, kv_cache, weights, seq_lens, page_table, a[5].toInt(), a[6].toInt(),
                       view_of(logits.tensor, false, op, "logits"), 1, vllm_options());
  if (!logits.fits) raise_unallocatable(op, "logits", shape);
  return logits.tensor;
}

// topk_transform_512_cpu(Tensor scores, Tensor seq_lens, Tensor page_tables,
//     Tensor(a!) out_page_indices, int page_size, Tensor(b!)? out_raw_indices) -> (): vLLM's mode
//     is "vllm" (dsv4cpu.vllm.OPTIONS); dsv4cpu always writes raw_indices, allocated here (I32
//     [B, 512]) when vLLM passes none.
at::Tensor serve_topk_transform_512(Args a) {
  constexpr const char* op = "topk_transform_512";
  const at::Tensor& scores_tensor = a[0].toTensor();
  const std::vector<int64_t> shape = {scores_tensor.dim() > 0 ? scores_tensor.size(0) : 0, 512};
  const Allocated raw = a[5].isNone()
                            ? allocate_output(shape, scores_tensor.options().dtype(at::kInt))
                            : Allocated{a[5].toTensor(), true};
  const MutableTensorView scores = view(a[0], op, "scores"), seq_lens = view(a[1], op, "seq_lens"),
                          page_table = view(a[2], op, "page_table");
  topk_transform_512(scores, seq_lens, page_table, a[4].toInt(), TopkMode::vllm,
                     view_of(raw.tensor, false, op, "raw_indices"),
                     view(a[3], op, "page_indices"), vllm_options());
  if (!raw.fits) raise_unallocatable(op, "raw_indices", shape);
  return {};
}

// flash_mla_with_kvcache_cpu(Tensor(a!) out, Tensor q, Tensor window_cache_2d,
//     Tensor window_slots, int window_block_size, Tensor compressed_cache_2d,
//     Tensor compressed_slots, int compressed_block_size, Tensor attn_sink, float scale) -> ():
//     vLLM's nope_decode is "vllm" (dsv4cpu.vllm.OPTIONS); scale is rounded once to fp32, as by
//     the op's own binding. The views in the dsv4cpu op's argument order.
at::Tensor serve_sparse_mla_attention(Args a) {
  constexpr const char* op = "sparse_mla_attention";
  const MutableTensorView q = view(a[1], op, "q"), window_cache = view(a[2], op, "window_cache"),
                          window_slots = view(a[3], op, "window_slots"),
                          compressed_cache = view(a[5], op, "compressed_cache"),
                          compressed_slots = view(a[6], op, "compressed_slots"),
                          attn_sink = view(a[8], op, "attn_sink");
  const MutableTensorView out = view(a[0], op, "out");
  sparse_mla_attention(q, window_cache, a[4].toInt(), window_slots, compressed_cache, a[7].toInt(),
                       compressed_slots, attn_sink, static_cast<float>(a[9].toDouble()),
                       NopeDecode::vllm, out, {}, vllm_options());
  return {};
}

struct NativeOp {
  const char* name;  // vLLM's operator
  size_t arguments;  // in vLLM's schema
  at::Tensor (*serve)(Args);  // the result, undefined for an op that returns nothing
};

constexpr NativeOp kNativeOps[] = {
    {"save_partial_states_cpu", 6, &serve_save_partial_states},
    {"compress_norm_rope_store_cpu", 10, &serve_compress<false>},
    {"compress_norm_rope_store_indexer_cpu", 10, &serve_compress<true>},
    {"fused_indexer_q_rope_quant_cpu", 8, &serve_fused_indexer_q_rope_quant},
    {"fused_qnorm_rope_kv_insert_cpu", 9, &serve_fused_qnorm_rope_kv_insert},
    {"inverse_gptj_rope_o_proj_cpu", 4, &serve_inverse_gptj_rope_o_proj},
    {"fp8_paged_mqa_logits_cpu", 7, &serve_fp8_paged_mqa_logits},
    {"topk_transform_512_cpu", 6, &serve_topk_transform_512},
    {"flash_mla_with_kvcache_cpu", 10, &serve_sparse_mla_attention},
};
constexpr size_t kNativeCount = sizeof(kNativeOps) / sizeof(kNativeOps[0]);

// Calls served per native op since the process started.
std::atomic<int64_t> g_served[kNativeCount];

// Raises `e` as the typed dsv4cpu error through the package's _dsv4cpu::_raise_error; without a
// kernel for it (the plugin not imported), as raise_for_python does.
[[noreturn]] void raise_typed(const Error& e) {
  static const c10::OperatorHandle handle =
      c10::Dispatcher::singleton().findSchemaOrThrow("_dsv4cpu::_raise_error", "");
  torch::jit::Stack stack{c10::IValue(python_message(e))};
  try {
    handle.callBoxed(&stack);
  } catch (const c10::NotImplementedError&) {
  }
  raise_for_python(e);
}

class NativeKernel final : public c10::OperatorKernel {
 public:
  explicit NativeKernel(size_t index) : index_(index) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) const {
    const NativeOp& op = kNativeOps[index_];
    g_served[index_].fetch_add(1, std::memory_order_relaxed);
    at::Tensor result;
    try {
      result = op.serve(torch::jit::last(*stack, op.arguments));
    } catch (const Error& e) {
      raise_typed(e);
    }
    torch::jit::drop(*stack, op.arguments);
    if (result.defined()) torch::jit::push(*stack, std::move(result));
  }

 private:
  size_t index_;
};

// The registrations in force, by vLLM operator: dropping one restores the kernel it replaced.
// Never destroyed: at exit the dispatcher may be gone before it.
std::mutex g_mutex;
std::map<std::string, std::unique_ptr<torch::Library>>& registrations() {
  static auto* map = new std::map<std::string, std::unique_ptr<torch::Library>>;
  return *map;
}

// Drops torch's warning that a kernel replaces vLLM's: replacing it is the point (the Python
// kernels' registrations filter the same warning, docs/vllm.md).
class Silent final : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning&) override {}
#else
  void process(const c10::SourceLocation&, const std::string&, const bool) override {}
#endif
};
#if TORCH_VERSION_MAJOR >= 2
using WarningGuard = c10::WarningUtils::WarningHandlerGuard;
#else
using WarningGuard = c10::Warning::WarningHandlerGuard;
#endif

size_t native_index(const std::string& name) {
  for (size_t i = 0; i < kNativeCount; ++i)
    if (name == kNativeOps[i].name) return i;
  return kNativeCount;
}

}  // namespace

std::string vllm_natives_json() {
  nlohmann::json names = nlohmann::json::array();
  for (const NativeOp& op : kNativeOps) names.push_back(op.name);
  return names.dump();
}

bool vllm_serve(const std::string& name) {
  const size_t i = native_index(name);
  if (i == kNativeCount) return false;
  const std::lock_guard<std::mutex> lock(g_mutex);
  auto& slot = registrations()[name];
  if (slot) return true;
  Silent silent;
  const WarningGuard quiet(&silent);
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "_C",
                                                  c10::DispatchKey::CPU, __FILE__, __LINE__);
  library->impl(kNativeOps[i].name,
                torch::CppFunction::makeFromBoxedFunctor(std::make_unique<NativeKernel>(i)));
  slot = std::move(library);
  return true;
}

void vllm_unserve() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  registrations().clear();
}

std::string vllm_counts_json() {
  nlohmann::json counts = nlohmann::json::object();
  for (size_t i = 0; i < kNativeCount; ++i)
    counts[kNativeOps[i].name] = g_served[i].load(std::memory_order_relaxed);
  return counts.dump();
}

}  // namespace dsv4cpu::python
