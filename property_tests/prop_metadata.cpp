// Properties of the metadata builders (metadata.md §2-§9): for every builder with an optimized
// variant, every optimized variant of the registry with 1, 2 and 8 threads (whatever the
// processors) writes exactly the reference's bytes (every output, every entry of a returned
// struct) and throws the same error; output padding around each view keeps its garbage. Batches
// are mixed decode + prefill steps with positions up to 2^20 and shuffled, row-padded block tables
// whose unread entries hold garbage.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dsv4cpu/metadata.hpp"
#include "generators.hpp"
#include "prop_util.hpp"

namespace dsv4cpu::prop {
namespace {

// Every optimized variant against the reference, with 1, 2 and 8 threads (whatever the processors).
const testing::Plan kOptimized{false, std::nullopt, true, {1, 2, 8}};
constexpr size_t kGuard = 64;  // garbage bytes before and after every output view

// An output array inside garbage guard bytes.
struct Output {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  Output(DType dt, std::vector<int64_t> s, std::mt19937_64& rng) : dtype(dt), shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    bytes.resize(2 * kGuard + static_cast<size_t>(n) * dtype_size(dt));
    fill_garbage(rng, bytes.data(), bytes.size());
  }
  MutableTensorView view(std::vector<uint8_t>& storage) const {
    return MutableTensorView(storage.data() + kGuard, dtype, static_cast<int>(shape.size()),
                             shape.data());
  }
};

// Runs call(options, storages) -> summary of returned values, with the reference then on every
// run of `plan`, each on fresh copies of the outputs; the outcome, the summary and every byte of
// every storage must agree, and when the reference throws nothing may change.
template <class Call>
void check_opt_against_ref(const testing::Plan& plan, const char* op,
                           const std::vector<Output>& outputs, const Call& call) {
  std::vector<std::vector<uint8_t>> expected;
  for (const Output& o : outputs) expected.push_back(o.bytes);
  std::string ref_summary;
  const Outcome ref = capture([&] { ref_summary = call(reference(), expected); });
  RC_TAG(ref.kind.empty() ? "writes" : ref.kind);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!ref.kind.empty())
      assert_same_bytes(expected[i], outputs[i].bytes, std::string(op) + " (ref) wrote, then threw");
    assert_same_bytes(expected[i].data(), outputs[i].bytes.data(), kGuard,
                      std::string(op) + " (ref) guard");
    assert_same_bytes(expected[i].data() + expected[i].size() - kGuard,
                      outputs[i].bytes.data() + expected[i].size() - kGuard, kGuard,
                      std::string(op) + " (ref) guard");
  }
  testing::for_each(testing::runs(op, plan), [&](const testing::Run& run) {
    const std::string where = std::string(op) + " " + run.label();
    std::vector<std::vector<uint8_t>> got;
    for (const Output& o : outputs) got.push_back(o.bytes);
    std::string summary;
    const Outcome out = capture([&] { summary = call(run.options(), got); });
    if (!(out == ref))
      RC_FAIL(where + ": outcome '" + out.message + "' (" + out.kind + "), reference '" +
              ref.message + "' (" + ref.kind + ")");
    if (summary != ref_summary)
      RC_FAIL(where + ": returned " + summary + ", reference " + ref_summary);
    for (size_t i = 0; i < outputs.size(); ++i)
      assert_same_bytes(got[i], expected[i], where + ", output " + std::to_string(i));
  });
}

// A step's batch with the index arrays every builder reads, in random dtypes.
struct MetaCase {
  Batch batch;
  BlockTable table;  // the group under test; pages cover `units` of each request
  int64_t ratio = 1;  // 1: token positions; 4 or 128: compressed entries (seq_len / ratio)
  int64_t pad_tokens = 0;
  DType qsl_dtype = DType::I64, seq_dtype = DType::I64, pos_dtype = DType::I64,
        req_dtype = DType::I32, own_slot_dtype = DType::I64;
  int own_slot_minus_one_in = 0;  // 0: no token_slot_mapping; else 1 in n tokens get −1
  Seed seed;
};

std::ostream& operator<<(std::ostream& os, const MetaCase& c) {
  return os << "MetaCase{" << c.batch << ", " << c.table << ", ratio=" << c.ratio
            << ", pad_tokens=" << c.pad_tokens << ", qsl " << dtype_name(c.qsl_dtype)
            << ", seq_lens " << dtype_name(c.seq_dtype) << ", positions "
            << dtype_name(c.pos_dtype) << ", token_to_req " << dtype_name(c.req_dtype)
            << ", token_slot_mapping "
            << (c.own_slot_minus_one_in ? dtype_name(c.own_slot_dtype) : "absent")
            << " (-1 one in " << c.own_slot_minus_one_in << "), " << c.seed << "}";
}

// ratio 1: a token-position group with page size from `pages`; otherwise a compressed group.
rc::Gen<MetaCase> gen_meta_case(int64_t ratio, std::vector<int64_t> pages, int64_t max_position) {
  return rc::gen::exec([=] {
    MetaCase c;
    c.ratio = ratio;
    c.batch = *gen_batch({6, 40, max_position, ratio > 1 ? ratio : 0});
    const int64_t P = *rc::gen::elementOf(pages);
    std::vector<int64_t> units;
    for (int64_t s : c.batch.seq_lens) units.push_back(s / ratio);
    c.table = *gen_block_table(units, P);
    // Sometimes one page a formula may read is negative: bad input, the same IndexError.
    if (*rc::gen::inRange(0, 8) == 0) {
      std::vector<int64_t> used;
      for (size_t i = 0; i < c.table.entries.size(); ++i)
        if (c.table.entries[i] >= 0) used.push_back(static_cast<int64_t>(i));
      if (!used.empty()) {
        const int64_t i = used[*rc::gen::inRange<size_t>(0, used.size())];
        c.table.entries[i] = -1 - *rc::gen::inRange<int64_t>(0, 3);
        c.table.array.set(i / c.table.cols * c.table.array.row_stride + i % c.table.cols,
                          c.table.entries[i]);
      }
    }
    c.pad_tokens = *rc::gen::element<int64_t>(0, 0, 3);
    c.qsl_dtype = *gen_index_dtype();
    c.seq_dtype = *gen_index_dtype();
    c.pos_dtype = *gen_index_dtype();
    c.req_dtype = *gen_index_dtype();
    c.own_slot_dtype = *gen_index_dtype();
    c.own_slot_minus_one_in = *rc::gen::element(0, 2, 5);
    c.seed = *gen_seed();
    return c;
  });
}

// The arrays of a case.
struct MetaArrays {
  IndexArray qsl, seq_lens, positions, token_to_req, own_slot;
  int64_t R = 0, T = 0;
  std::vector<int64_t> pos, req;
  MetaArrays(const MetaCase& c, std::mt19937_64& rng) {
    R = c.batch.num_requests();
    T = c.batch.num_tokens();
    pos = c.batch.positions();
    req = c.batch.token_to_req();
    qsl = IndexArray(c.batch.query_start_loc(), c.qsl_dtype, R + 1, kVector, 0, rng());
    seq_lens = IndexArray(c.batch.seq_lens, c.seq_dtype, R, kVector, 0, rng());
    positions = IndexArray(pos, c.pos_dtype, T, kVector, 0, rng());
    token_to_req = IndexArray(req, c.req_dtype, T, kVector, 0, rng());
    std::vector<int64_t> own(static_cast<size_t>(T));
    for (auto& s : own)
      s = c.own_slot_minus_one_in && rng() % c.own_slot_minus_one_in == 0
              ? -1
              : static_cast<int64_t>(rng() % 100000);
    own_slot = IndexArray(own, c.own_slot_dtype, T, kVector, 0, rng());
  }
  TensorView own_slot_view(const MetaCase& c) const {
    return c.own_slot_minus_one_in ? own_slot.view() : TensorView();
  }
};

const int64_t kMaxPosition = int64_t{1} << 20;

void token_positions_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(1, {64}, kMaxPosition);
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  const std::vector<Output> outs = {Output(DType::I64, {m.T}, rng), Output(DType::I32, {m.T}, rng)};
  check_opt_against_ref(plan, "token_positions", outs, [&](const Options& o, auto& s) {
    token_positions(m.qsl.view(), m.seq_lens.view(), outs[0].view(s[0]), outs[1].view(s[1]), o);
    return std::string();
  });
}
const bool kTokenPositions = register_property(
    "TokenPositions", "EqualsReference", "token_positions", kOptimized, token_positions_property);

void slot_mapping_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(1, {1, 4, 6, 8, 64, 48}, kMaxPosition);
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  const std::vector<Output> outs = {Output(DType::I64, {m.T + c.pad_tokens}, rng)};
  check_opt_against_ref(plan, "slot_mapping", outs, [&](const Options& o, auto& s) {
    slot_mapping(m.positions.view(), m.token_to_req.view(), c.table.array.view(),
                 c.table.block_size, outs[0].view(s[0]), o);
    return std::string();
  });
}
const bool kSlotMapping = register_property("SlotMapping", "EqualsReference", "slot_mapping",
                                            kOptimized, slot_mapping_property);

void compressed_slot_mapping_property(const testing::Plan& plan) {
  const int64_t ratio = *rc::gen::element<int64_t>(4, 128);
  const MetaCase c = *gen_meta_case(ratio, {1, 2, 6, 64, 96}, kMaxPosition);
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  const std::vector<Output> outs = {Output(DType::I64, {m.T + c.pad_tokens}, rng)};
  check_opt_against_ref(plan, "compressed_slot_mapping", outs, [&](const Options& o, auto& s) {
    compressed_slot_mapping(m.qsl.view(), m.seq_lens.view(), c.table.array.view(), ratio,
                            c.table.block_size, m.own_slot_view(c), outs[0].view(s[0]), o);
    return std::string();
  });
}
const bool kCompressedSlotMapping =
    register_property("CompressedSlotMapping", "EqualsReference", "compressed_slot_mapping",
                      kOptimized, compressed_slot_mapping_property);

void swa_window_indices_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(1, {64, 16, 5, 12, 48}, kMaxPosition);
  const int64_t window = *rc::gen::element<int64_t>(128, 1, 7, 200);
  const bool with_lens = *rc::gen::arbitrary<bool>();
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  const std::vector<Output> outs = {Output(DType::I64, {m.T, window}, rng),
                                    Output(DType::I32, {m.T}, rng)};
  check_opt_against_ref(plan, "swa_window_indices", outs, [&](const Options& o, auto& s) {
    swa_window_indices(m.positions.view(), m.token_to_req.view(), c.table.array.view(), window,
                       c.table.block_size, outs[0].view(s[0]),
                       with_lens ? outs[1].view(s[1]) : MutableTensorView(), o);
    return std::string();
  });
}
const bool kSwaWindowIndices =
    register_property("SwaWindowIndices", "EqualsReference", "swa_window_indices", kOptimized,
                      swa_window_indices_property);

void c128a_topk_indices_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(128, {2, 1, 8, 6, 12}, int64_t{1} << 16);
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  int64_t longest = 1;
  for (int64_t s : c.batch.seq_lens) longest = std::max(longest, s);
  const int64_t max_model_len = longest + *rc::gen::inRange<int64_t>(0, 300);
  const std::vector<Output> outs = {
      Output(DType::I64, {m.T, c128a_topk_width(max_model_len)}, rng)};
  check_opt_against_ref(plan, "c128a_topk_indices", outs, [&](const Options& o, auto& s) {
    c128a_topk_indices(m.positions.view(), m.token_to_req.view(), c.table.array.view(),
                       max_model_len, c.table.block_size, outs[0].view(s[0]), o);
    return std::string();
  });
  // The compact form, at the step's width or wider.
  const int64_t width = c128a_compact_width(m.positions.view()) + *rc::gen::inRange<int64_t>(0, 3);
  const std::vector<Output> compact = {Output(DType::I64, {m.T, width}, rng)};
  check_opt_against_ref(
      plan, "c128a_topk_indices_compact", compact, [&](const Options& o, auto& s) {
        c128a_topk_indices_compact(m.positions.view(), m.token_to_req.view(), c.table.array.view(),
                                   c.table.block_size, compact[0].view(s[0]), o);
        return std::string();
      });
}
const bool kC128aTopkIndices =
    register_property("C128aTopkIndices", "EqualsReference",
                      {"c128a_topk_indices", "c128a_topk_indices_compact"}, kOptimized,
                      c128a_topk_indices_property);
// Streamed rows.
const bool kC128aTopkIndicesGated = register_gated_property(
    "C128aTopkIndices", "EqualsReference", {"c128a_topk_indices", "c128a_topk_indices_compact"},
    kOptimized, c128a_topk_indices_property);

void c128a_decode_metadata_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(128, {2, 1, 8, 6, 12}, int64_t{1} << 16);
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  int64_t longest = 1, widest = 0;
  for (int64_t s : c.batch.seq_lens) longest = std::max(longest, s);
  for (int64_t p : m.pos) widest = std::max(widest, (p + 1) / 128);
  const int64_t max_model_len = longest + *rc::gen::inRange<int64_t>(0, 300);
  const int64_t wmax = c128a_decode_max_width(max_model_len);
  const int64_t active =
      std::min(wmax, (widest + 127) / 128 * 128 + 128 * *rc::gen::inRange<int64_t>(0, 2));
  const int64_t nd = c.batch.num_decodes;
  const std::vector<Output> outs = {Output(DType::I64, {nd, active}, rng),
                                    Output(DType::I32, {nd}, rng),
                                    Output(DType::I32, {m.T - nd, active}, rng)};
  check_opt_against_ref(plan, "c128a_decode_metadata", outs, [&](const Options& o, auto& s) {
    c128a_decode_metadata(m.positions.view(), m.token_to_req.view(), c.table.array.view(),
                          max_model_len, c.table.block_size, nd, m.own_slot_view(c),
                          outs[0].view(s[0]), outs[1].view(s[1]), outs[2].view(s[2]), o);
    return std::string();
  });
}
const bool kC128aDecodeMetadata =
    register_property("C128aDecodeMetadata", "EqualsReference", "c128a_decode_metadata", kOptimized,
                      c128a_decode_metadata_property);
// Streamed rows.
const bool kC128aDecodeMetadataGated = register_gated_property(
    "C128aDecodeMetadata", "EqualsReference", "c128a_decode_metadata", kOptimized,
    c128a_decode_metadata_property);

void c4a_global_topk_indices_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(4, {64, 1, 16, 6, 48}, kMaxPosition);
  const int64_t K = *rc::gen::element<int64_t>(512, 1, 9, 64);
  const DType topk_dtype = *gen_index_dtype();
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  // Local selections of visible entries (0 <= idx < (pos + 1) / 4), −1 padded.
  std::vector<int64_t> topk(static_cast<size_t>(m.T * K), -1);
  for (int64_t t = 0; t < m.T; ++t) {
    const int64_t L = (m.pos[t] + 1) / 4;
    for (int64_t k = 0; k < K; ++k)
      if (L > 0 && rng() % 4 != 0) topk[t * K + k] = static_cast<int64_t>(rng() % L);
  }
  const IndexArray topk_indices(topk, topk_dtype, m.T, K, *gen_pad(4), rng());
  const std::vector<Output> outs = {Output(DType::I64, {m.T, K}, rng),
                                    Output(DType::I32, {m.T}, rng)};
  check_opt_against_ref(plan, "c4a_global_topk_indices", outs, [&](const Options& o, auto& s) {
    c4a_global_topk_indices(topk_indices.view(), m.token_to_req.view(), c.table.array.view(),
                            c.table.block_size, m.own_slot_view(c), outs[0].view(s[0]),
                            outs[1].view(s[1]), o);
    return std::string();
  });
}
const bool kC4aGlobalTopkIndices =
    register_property("C4aGlobalTopkIndices", "EqualsReference", "c4a_global_topk_indices",
                      kOptimized, c4a_global_topk_indices_property);
// Streamed rows.
const bool kC4aGlobalTopkIndicesGated = register_gated_property(
    "C4aGlobalTopkIndices", "EqualsReference", "c4a_global_topk_indices", kOptimized,
    c4a_global_topk_indices_property);

template <class T>
void print_vec(std::ostream& os, const char* name, const std::vector<T>& v) {
  os << name << "=";
  print_list(os, v, v.size()) << " ";
}

// Every field of the returned struct, as text.
std::string describe(const IndexerMetadata& md) {
  std::ostringstream os;
  os << "max_seq_len=" << md.max_seq_len << " split=" << md.split.num_decodes << "/"
     << md.split.num_prefills << "/" << md.split.num_decode_tokens << "/"
     << md.split.num_prefill_tokens << " ";
  print_vec(os, "compressed_seq_lens", md.compressed_seq_lens);
  if (md.decode) {
    os << "decode{requires_padding=" << md.decode->requires_padding
       << " next_n=" << md.decode->next_n << " ";
    print_vec(os, "decode_lens", md.decode->decode_lens);
    print_vec(os, "decode_seq_lens", md.decode->decode_seq_lens);
    os << "} ";
  }
  if (md.prefill) {
    const IndexerPrefillChunk& p = *md.prefill;
    os << "prefill{" << p.req_start << " " << p.req_end << " " << p.token_start << " "
       << p.token_end << " " << p.num_reqs << " " << p.total_seq_lens << " " << p.skip_kv_gather
       << " ";
    print_vec(os, "cu_seq_lens", p.cu_seq_lens);
    print_vec(os, "ks", p.cu_seqlen_ks);
    print_vec(os, "ke", p.cu_seqlen_ke);
    print_vec(os, "token_req", p.token_req);
    print_vec(os, "token_to_seq", p.token_to_seq);
    os << "}";
  }
  return os.str();
}

void indexer_metadata_property(const testing::Plan& plan) {
  const MetaCase c = *gen_meta_case(4, {64, 1, 16, 12, 96}, kMaxPosition);
  const int64_t next_n = *rc::gen::element<int64_t>(1, 1, 2, 3);
  std::mt19937_64 rng(c.seed.value);
  const MetaArrays m(c, rng);
  const std::vector<Output> outs = {Output(DType::I64, {m.T + c.pad_tokens}, rng)};
  check_opt_against_ref(plan, "indexer_metadata", outs, [&](const Options& o, auto& s) {
    return describe(indexer_metadata(m.qsl.view(), m.seq_lens.view(), c.table.array.view(),
                                     c.table.block_size, next_n, outs[0].view(s[0]), o));
  });
}
const bool kIndexerMetadata =
    register_property("IndexerMetadata", "EqualsReference", "indexer_metadata", kOptimized,
                      indexer_metadata_property);

}  // namespace
}  // namespace dsv4cpu::prop
