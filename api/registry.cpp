// The registry: every op's variants in the fallback order of preference, the reference last and
// always available (oneDNN style), and the op listing behind registered_ops(). op_entry puts each
// list in this CPU's order once (the table of core/registry.cpp; a CPU of another vendor keeps
// this order). Adding a variant is one line in its list; ops that share an argument pack share one
// list.
//
//   reference(k)                  the scalar oracle ("ref")
//   highway(name, k)              Highway dynamic dispatch (every compiled target is a test run)
//   fixed_isa(name, Isa::..., k)  a translation unit built for one ISA (core/cpu.hpp probes it)
//   portable(name, k)             plain C++ with no ISA of its own
// A kernel family with a table (DSV4CPU_COMPRESSOR_KERNELS, DSV4CPU_LOGITS_KERNELS,
// DSV4CPU_ATTENTION_KERNELS) gives one variant per line of its table, through the
// DSV4CPU_*_VARIANT lines below.
#include "api/registry.hpp"

#include <string_view>

#include "args/attention.hpp"
#include "args/compressor.hpp"
#include "args/indexer.hpp"
#include "args/metadata.hpp"
#include "core/errors.hpp"
#include "optimized/attention_kernel.hpp"
#include "optimized/compressor_kernel.hpp"
#include "optimized/indexer_logits.hpp"

namespace dsv4cpu {
namespace detail {

const std::vector<OpEntry>& registered_op_entries() {
  // ---- compressor (compressor.md) ----
  static VariantList<SavePartialStatesArgs> save_partial_states = {
      highway("hwy", opt::save_partial_states),
      reference(ref::save_partial_states),
  };
  static VariantList<MapLocalToGlobalSlotsArgs> map_local_to_global_slots = {
      highway("hwy", opt::map_local_to_global_slots),
      reference(ref::map_local_to_global_slots),
  };
  static VariantList<CompressorWindowSlotsArgs> compressor_window_slots = {
      reference(ref::compressor_window_slots),
  };
  static VariantList<CompressNormRopeStoreArgs> compress_norm_rope_store = {
      // both heads
      DSV4CPU_COMPRESSOR_KERNELS(DSV4CPU_COMPRESS_VARIANT)
      reference(ref::compress_norm_rope_store),
  };
  static VariantList<MakeCosSinCacheArgs> make_cos_sin_cache = {
      reference(ref::make_cos_sin_cache),
  };
  // ---- indexer (indexer.md) ----
  static VariantList<FusedIndexerQRopeQuantArgs> fused_indexer_q_rope_quant = {
      highway("hwy", opt::fused_indexer_q_rope_quant_hwy),
      reference(ref::fused_indexer_q_rope_quant),
  };
  static VariantList<Fp8PagedMqaLogitsArgs> fp8_paged_mqa_logits = {
      DSV4CPU_LOGITS_KERNELS(DSV4CPU_LOGITS_VARIANT)
      reference(ref::fp8_paged_mqa_logits),
  };
  static VariantList<TopkTransformArgs> topk_transform = {
      // K = 512 and 1024
      highway("hwy", opt::topk_transform_hwy),
      reference(ref::topk_transform),
  };
  static VariantList<ShortContextTopkArgs> short_context_topk = {
      reference(ref::short_context_topk),
  };
  static VariantList<IndexerTopkArgs> indexer_topk = {
      DSV4CPU_LOGITS_KERNELS(DSV4CPU_INDEXER_TOPK_VARIANT)
      reference(ref::indexer_topk),
  };
  // ---- metadata builders (metadata.md) ----
  static VariantList<TokenPositionsArgs> token_positions = {
      portable("opt", opt::token_positions),
      reference(ref::token_positions),
  };
  static VariantList<SlotMappingArgs> slot_mapping = {
      portable("opt", opt::slot_mapping),
      reference(ref::slot_mapping),
  };
  static VariantList<SplitDecodesAndPrefillsArgs> split_decodes_and_prefills = {
      reference(ref::split_decodes_and_prefills),
  };
  static VariantList<CompressedSlotMappingArgs> compressed_slot_mapping = {
      portable("opt", opt::compressed_slot_mapping),
      reference(ref::compressed_slot_mapping),
  };
  static VariantList<SwaWindowIndicesArgs> swa_window_indices = {
      portable("opt", opt::swa_window_indices),
      reference(ref::swa_window_indices),
  };
  static VariantList<C128aTopkIndicesArgs> c128a_topk_indices = {
      // both widths
      portable("opt", opt::c128a_topk_indices),
      reference(ref::c128a_topk_indices),
  };
  static VariantList<C128aDecodeMetadataArgs> c128a_decode_metadata = {
      portable("opt", opt::c128a_decode_metadata),
      reference(ref::c128a_decode_metadata),
  };
  static VariantList<C4aGlobalTopkIndicesArgs> c4a_global_topk_indices = {
      portable("opt", opt::c4a_global_topk_indices),
      reference(ref::c4a_global_topk_indices),
  };
  static VariantList<IndexerMetadataArgs> indexer_metadata = {
      portable("opt", opt::indexer_metadata),
      reference(ref::indexer_metadata),
  };
  static VariantList<SplitIndexerPrefillChunksArgs> split_indexer_prefill_chunks = {
      reference(ref::split_indexer_prefill_chunks),
  };
  static VariantList<BuildTileSchedulerArgs> build_tile_scheduler = {
      reference(ref::build_tile_scheduler),
  };
  // ---- attention (attention.md) ----
  static VariantList<SparseMlaAttentionArgs> sparse_mla_attention = {
      DSV4CPU_ATTENTION_KERNELS(DSV4CPU_ATTENTION_VARIANT)
      highway("hwy", opt::sparse_mla_attention_hwy),
      reference(ref::sparse_mla_attention),
  };
  static VariantList<FusedQnormRopeKvInsertArgs> fused_qnorm_rope_kv_insert = {
      highway("hwy", opt::fused_qnorm_rope_kv_insert),
      reference(ref::fused_qnorm_rope_kv_insert),
  };
  static VariantList<InverseGptjRopeOProjArgs> inverse_gptj_rope_o_proj = {
      highway("hwy", opt::inverse_gptj_rope_o_proj),
      reference(ref::inverse_gptj_rope_o_proj),
  };

  // The ops in spec order, with their lists.
  static const std::vector<OpEntry> ops = {
      op_entry("save_partial_states", save_partial_states),
      op_entry("map_local_to_global_slots", map_local_to_global_slots),
      op_entry("compressor_window_slots", compressor_window_slots),
      op_entry("compress_norm_rope_store", compress_norm_rope_store),
      op_entry("compress_norm_rope_store_indexer", compress_norm_rope_store),
      op_entry("make_cos_sin_cache", make_cos_sin_cache),
      op_entry("fused_indexer_q_rope_quant", fused_indexer_q_rope_quant),
      op_entry("fp8_paged_mqa_logits", fp8_paged_mqa_logits),
      op_entry("topk_transform_512", topk_transform),
      op_entry("topk_transform_1024", topk_transform),
      op_entry("short_context_topk", short_context_topk),
      op_entry("indexer_topk", indexer_topk),
      op_entry("token_positions", token_positions),
      op_entry("slot_mapping", slot_mapping),
      op_entry("split_decodes_and_prefills", split_decodes_and_prefills),
      op_entry("compressed_slot_mapping", compressed_slot_mapping),
      op_entry("swa_window_indices", swa_window_indices),
      op_entry("c128a_topk_indices", c128a_topk_indices),
      op_entry("c128a_topk_indices_compact", c128a_topk_indices),
      op_entry("c128a_decode_metadata", c128a_decode_metadata),
      op_entry("c4a_global_topk_indices", c4a_global_topk_indices),
      op_entry("indexer_metadata", indexer_metadata),
      op_entry("split_indexer_prefill_chunks", split_indexer_prefill_chunks),
      op_entry("build_tile_scheduler", build_tile_scheduler),
      op_entry("sparse_mla_attention", sparse_mla_attention),
      op_entry("fused_qnorm_rope_kv_insert", fused_qnorm_rope_kv_insert),
      op_entry("inverse_gptj_rope_o_proj", inverse_gptj_rope_o_proj),
  };
  return ops;
}

void throw_unknown_variant(const char* op, const std::string& variant,
                           const std::string& offered) {
  for (const OpEntry& e : registered_op_entries())
    for (const VariantInfo& v : e.info(e).variants)
      if (v.name == variant)
        fail<ValueError>(op, "variant", {}, variant,
                         "not offered for this op: offered are " + offered, "one of " + offered);
  fail<ValueError>(op, "variant", {}, variant, "unknown variant, offered by no op",
                   "one of " + offered);
}

void throw_unavailable_variant(const char* op, const std::string& variant,
                               const std::string& available) {
  fail<ValueError>(op, "variant", {}, variant, "not available on this CPU or OS",
                   "an available variant of this op: " + available);
}

const OpEntry* find_op_entry(std::string_view op) {
  for (const OpEntry& e : registered_op_entries())
    if (op == e.name) return &e;
  return nullptr;
}

bool add_variant_for_test(const std::string& op, const char* name, const Dispatch& dispatch) {
  const OpEntry* e = find_op_entry(op);
  if (e) e->add_copy_of_reference(*e, name, dispatch);
  return e != nullptr;
}

}  // namespace detail

std::vector<OpInfo> registered_ops() {
  std::vector<OpInfo> out;
  for (const detail::OpEntry& e : detail::registered_op_entries()) out.push_back(e.info(e));
  return out;
}

std::string selected_variant(std::string_view op, const Options& options) {
  if (const detail::OpEntry* e = detail::find_op_entry(op)) return e->select(*e, options);
  detail::fail<ValueError>("registry", "op", {}, std::string(op), "unknown op",
                           "a registered op name");
}

}  // namespace dsv4cpu
