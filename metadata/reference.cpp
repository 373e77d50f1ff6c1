// Reference metadata builders (metadata.md): each output element from the spec's per-token
// formula, the token's request looked up per token.
#include <algorithm>

#include "args/compressor.hpp"
#include "args/metadata.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu::detail {

// §4
DecodePrefillSplit compute_split(const IndexReader& qsl, int64_t R, int64_t threshold) {
  const int64_t T = qsl(R);
  for (int64_t f = 0; f < R; ++f)
    if (qsl(f + 1) - qsl(f) > threshold) return {f, R - f, qsl(f), T - qsl(f)};
  return {R, 0, T, 0};
}

namespace ref {
namespace {

// §2: pos_t = seq_lens[r] - q_r + (t - qsl[r]) for the request r that owns token t.
int64_t position_of_token(const IndexReader& qsl, const IndexReader& seq_lens, int64_t r,
                          int64_t t) {
  return seq_lens(r) - (qsl(r + 1) - qsl(r)) + (t - qsl(r));
}

// §9.3 build_prefill_chunk_metadata(rs, re, qa, qb).
IndexerPrefillChunk build_prefill_chunk_metadata(const IndexReader& qsl,
                                                 const IndexReader& seq_lens, int64_t R,
                                                 int64_t rs, int64_t re, int64_t qa,
                                                 int64_t qb) {
  IndexerPrefillChunk c;
  c.req_start = rs;
  c.req_end = re;
  c.num_reqs = re - rs;
  c.cu_seq_lens.assign(static_cast<size_t>(c.num_reqs + 1), 0);
  for (int64_t k = 0; k < c.num_reqs; ++k)
    c.cu_seq_lens[static_cast<size_t>(k + 1)] =
        c.cu_seq_lens[static_cast<size_t>(k)] + static_cast<int32_t>(seq_lens(rs + k) / 4);
  c.total_seq_lens = c.cu_seq_lens[static_cast<size_t>(c.num_reqs)];
  c.token_start = qsl(rs) + qa;
  c.token_end = qsl(rs) + qb;
  for (int64_t i = 0; i < qb - qa; ++i) {
    const int64_t u = c.token_start + i;
    const int64_t rho = request_of_token(qsl, R, u);
    const int64_t k = rho - rs;
    const int32_t ks = c.cu_seq_lens[static_cast<size_t>(k)];
    c.cu_seqlen_ks.push_back(ks);
    c.cu_seqlen_ke.push_back(
        ks + static_cast<int32_t>((position_of_token(qsl, seq_lens, rho, u) + 1) / 4));
    c.token_req.push_back(static_cast<int32_t>(k));
  }
  c.token_to_seq.assign(static_cast<size_t>(c.total_seq_lens), 0);
  for (int64_t k = 0; k < c.num_reqs; ++k)
    for (int64_t e = 0; e < seq_lens(rs + k) / 4; ++e)
      c.token_to_seq[static_cast<size_t>(c.cu_seq_lens[static_cast<size_t>(k)] + e)] =
          static_cast<int32_t>(k);
  c.skip_kv_gather = qa > 0;
  return c;
}

}  // namespace

// §2
void token_positions(const TokenPositionsArgs& a, const RunContext&) {
  const IndexReader qsl(a.query_start_loc), seq(a.seq_lens);
  int64_t* positions = a.positions.ptr<int64_t>();
  int32_t* token_to_req = a.token_to_req.ptr<int32_t>();
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t r = request_of_token(qsl, a.R, t);
    positions[t] = position_of_token(qsl, seq, r, t);
    token_to_req[t] = static_cast<int32_t>(r);
  }
}

// §3
void slot_mapping(const SlotMappingArgs& a, const RunContext&) {
  const IndexReader pos(a.positions), req(a.token_to_req), bt(a.block_table);
  const int64_t P = a.block_size;
  int64_t* out = a.slot_mapping.ptr<int64_t>();
  for (int64_t t = 0; t < a.padded; ++t)
    out[t] = t < a.T ? bt(req(t), pos(t) / P) * P + pos(t) % P : -1;
}

// §4
void split_decodes_and_prefills(const SplitDecodesAndPrefillsArgs& a, const RunContext&) {
  *a.result = compute_split(IndexReader(a.query_start_loc), a.R, a.threshold);
}

// §5
void compressed_slot_mapping(const CompressedSlotMappingArgs& a, const RunContext&) {
  const IndexReader qsl(a.query_start_loc), seq(a.seq_lens), bt(a.block_table),
      own(a.token_slot_mapping);
  const int64_t ratio = a.compress_ratio, P = a.block_size;
  int64_t* out = a.slot_mapping.ptr<int64_t>();
  for (int64_t t = 0; t < a.padded; ++t) {
    out[t] = -1;
    if (t >= a.T) continue;
    const int64_t r = request_of_token(qsl, a.R, t);
    const int64_t p = position_of_token(qsl, seq, r, t);
    if ((p + 1) % ratio != 0) continue;
    if (a.token_slot_mapping.present() && own(t) == -1) continue;
    const int64_t c = p / ratio;
    out[t] = bt(r, c / P) * P + c % P;
  }
}

// §6
void swa_window_indices(const SwaWindowIndicesArgs& a, const RunContext&) {
  const IndexReader pos(a.positions), req(a.token_to_req), bt(a.block_table);
  const int64_t W = a.window, P = a.block_size;
  int64_t* indices = a.indices.ptr<int64_t>();
  int32_t* lens = a.lens.present() ? a.lens.ptr<int32_t>() : nullptr;
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t p = pos(t), r = req(t);
    const int64_t start = std::max<int64_t>(p - W + 1, 0);
    const int64_t len = p - start + 1;
    for (int64_t o = 0; o < W; ++o)
      indices[t * W + o] = o < len ? bt(r, (start + o) / P) * P + (start + o) % P : -1;
    if (lens) lens[t] = static_cast<int32_t>(len);
  }
}

// §7.1: local[t][o] = o for o < n_t mapped through the C128A block table (for either width;
// validation guarantees n_t <= W).
void c128a_topk_indices(const C128aTopkIndicesArgs& a, const RunContext&) {
  const IndexReader pos(a.positions), req(a.token_to_req), bt(a.block_table);
  const int64_t W = a.W, P = a.block_size;
  int64_t* indices = a.indices.ptr<int64_t>();
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t n = std::min((pos(t) + 1) / 128, W), r = req(t);
    for (int64_t o = 0; o < W; ++o) indices[t * W + o] = o < n ? bt(r, o / P) * P + o % P : -1;
  }
}

// §7.2 with the active width W.
void c128a_decode_metadata(const C128aDecodeMetadataArgs& a, const RunContext&) {
  const IndexReader pos(a.positions), req(a.token_to_req), bt(a.block_table),
      own(a.token_slot_mapping);
  const int64_t W = a.W, P = a.block_size, nd = a.num_decode_tokens;
  int64_t* global = a.decode_global.ptr<int64_t>();
  int32_t* lens = a.decode_lens.ptr<int32_t>();
  int32_t* local = a.prefill_local.ptr<int32_t>();
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t n = std::min((pos(t) + 1) / 128, W), r = req(t);
    if (t < nd) {
      for (int64_t o = 0; o < W; ++o) global[t * W + o] = o < n ? bt(r, o / P) * P + o % P : -1;
      const bool own_slot = !a.token_slot_mapping.present() || own(t) >= 0;
      lens[t] = static_cast<int32_t>(own_slot ? n : 0);
    } else {
      for (int64_t o = 0; o < W; ++o)
        local[(t - nd) * W + o] = static_cast<int32_t>(o < n ? o : -1);
    }
  }
}

// §8: the compressor's map_local_to_global_slots, then the row counts.
void c4a_global_topk_indices(const C4aGlobalTopkIndicesArgs& a, const RunContext& ctx) {
  MapLocalToGlobalSlotsArgs map{a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                                a.indices};
  map.N = a.T;
  map.K = a.K;
  map_local_to_global_slots(map, ctx);
  const IndexReader own(a.token_slot_mapping);
  const int64_t* indices = a.indices.ptr<int64_t>();
  int32_t* lens = a.lens.ptr<int32_t>();
  for (int64_t t = 0; t < a.T; ++t) {
    int32_t valid = 0;
    for (int64_t k = 0; k < a.K; ++k) valid += indices[t * a.K + k] >= 0 ? 1 : 0;
    lens[t] = a.token_slot_mapping.present() && own(t) == -1 ? 0 : valid;
  }
}

// §9.1-9.4
void indexer_metadata(const IndexerMetadataArgs& a, const RunContext& ctx) {
  const IndexReader qsl(a.query_start_loc), seq(a.seq_lens);
  IndexerMetadata& m = *a.result;
  CompressedSlotMappingArgs slots{a.query_start_loc, a.seq_lens, a.block_table, 4,
                                  a.block_size,      TensorView(), a.slot_mapping};
  slots.R = a.R;
  slots.T = a.T;
  slots.padded = a.padded;
  compressed_slot_mapping(slots, ctx);
  m.max_seq_len = 0;
  for (int64_t r = 0; r < a.R; ++r) m.max_seq_len = std::max(m.max_seq_len, seq(r));
  m.split = compute_split(qsl, a.R, a.next_n);
  m.compressed_seq_lens.resize(static_cast<size_t>(a.R));
  for (int64_t r = 0; r < a.R; ++r)
    m.compressed_seq_lens[static_cast<size_t>(r)] = static_cast<int32_t>(seq(r) / 4);
  const int64_t nd = m.split.num_decodes;
  if (nd > 0) {
    IndexerDecodeMetadata d;
    d.next_n = a.next_n;
    for (int64_t r = 0; r < nd; ++r)
      d.decode_lens.push_back(static_cast<int32_t>(qsl(r + 1) - qsl(r)));
    d.requires_padding = *std::min_element(d.decode_lens.begin(), d.decode_lens.end()) !=
                         *std::max_element(d.decode_lens.begin(), d.decode_lens.end());
    for (int64_t r = 0; r < nd; ++r)
      for (int64_t j = 0; j < a.next_n; ++j)
        d.decode_seq_lens.push_back(static_cast<int32_t>(
            std::max<int64_t>(0, seq(r) - a.next_n + 1 + j) / 4));
    m.decode = std::move(d);
  }
  if (m.split.num_prefills > 0)  // §9.4: one chunk, kept even when its total is 0
    m.prefill = build_prefill_chunk_metadata(qsl, seq, a.R, nd, a.R, 0,
                                             m.split.num_prefill_tokens);
}

// §9.3 base rule, without vLLM's later drop of chunks with total_seq_lens = 0.
void split_indexer_prefill_chunks(const SplitIndexerPrefillChunksArgs& a, const RunContext&) {
  const IndexReader n(a.compressed_lens), m(a.query_lens);
  const int64_t off = a.request_offset;
  std::vector<PrefillChunk>& chunks = *a.result;
  for_each_prefill_group(n, m, a.count, a.workspace, a.max_logits_bytes / 4,
                         [&](int64_t start, int64_t end, int64_t M, int64_t step) {
                           for (int64_t qa = 0; qa < M; qa += std::min(step, M - qa))
                             chunks.push_back(
                                 {start + off, end + off, qa, qa + std::min(step, M - qa)});
                         });
}

// §10
void build_tile_scheduler(const BuildTileSchedulerArgs& a, const RunContext&) {
  *a.result = "none";
}

}  // namespace ref
}  // namespace dsv4cpu::detail
