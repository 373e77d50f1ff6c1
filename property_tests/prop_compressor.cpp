// Properties of the compressor ops (compressor.md §3, §4.1, §6, §7): every optimized variant of
// the registry, on every compiled Highway target and with 1, 2, 3 or 8 threads (whatever the
// processors, prop_util.hpp), leaves every byte of its outputs and in-place caches exactly as the reference does
// (numerics.md §11.1) and throws the same error with the same message; bytes the op must not write
// keep their garbage.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "args/compressor.hpp"
#include "core/fallback.hpp"
#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/numerics.hpp"
#include "generators.hpp"
#include "optimized/compressor_kernel.hpp"
#include "prop_util.hpp"

namespace dsv4cpu::prop {
namespace {

// Every optimized variant against the reference, with 1, 2, 3 and 8 threads: 3 splits a token's
// 8 channel blocks unevenly.
const testing::Plan kOptimized{false, std::nullopt, true, {1, 2, 3, 8}};

// A zero-mean value with standard deviation sigma (triangular: the sum of two uniforms from one
// draw; cheap enough for whole caches in sanitizer builds).
float spread(std::mt19937_64& rng, float sigma) {
  const uint64_t b = rng();
  const double u =
      (static_cast<double>(b & 0xFFFFFFFFu) + static_cast<double>(b >> 32)) * 0x1p-32 - 1.0;
  return static_cast<float>(u * 2.449489742783178 * sigma);  // triangular on [-√6σ, √6σ]
}

// Marks the bytes [p, p + n) of a buffer that starts at `base` as writable.
void mark(std::vector<uint8_t>& writable, const void* base, const void* p, size_t n) {
  const size_t off = static_cast<size_t>(static_cast<const uint8_t*>(p) -
                                         static_cast<const uint8_t*>(base));
  std::fill(writable.begin() + off, writable.begin() + off + n, 1);
}

// Runs `call(options, buffer)` with the reference on a copy of `initial`, checks that only
// `writable` bytes changed (none when it threw), then on every run of `plan` (each on a fresh copy
// of `initial`) and checks the same outcome and the same bytes.
template <class T, class Call>
void check_against_reference(const testing::Plan& plan, const char* op,
                             const std::vector<T>& initial, const std::vector<uint8_t>& writable,
                             const Call& call) {
  std::vector<T> expected = initial;
  const Outcome ref = capture([&] { call(reference(), expected); });
  RC_TAG(ref.kind.empty() ? "writes" : ref.kind);
  std::vector<uint8_t> before(initial.size() * sizeof(T)), none(before.size(), 0);
  std::memcpy(before.data(), initial.data(), before.size());
  assert_untouched(before, expected.data(), ref.kind.empty() ? writable : none,
                   std::string(op) + " (ref)");
  testing::for_each(testing::runs(op, plan), [&](const testing::Run& run) {
    const std::string where = std::string(op) + " " + run.label();
    std::vector<T> got = initial;
    const uint64_t handed = detail::fallback_count();
    const Outcome out = capture([&] { call(run.options(), got); });
    // No hand-over to the reference (core/fallback.hpp) where the reference succeeds.
    if (ref.kind.empty() && detail::fallback_count() != handed)
      RC_FAIL(where + ": handed the call to the reference, which succeeds on it");
    if (!(out == ref))
      RC_FAIL(where + ": outcome '" + out.message + "' (" + out.kind + "), reference '" +
              ref.message + "' (" + ref.kind + ")");
    assert_same_bytes(got, expected, where);
  });
}

// ---- save_partial_states ----

struct SaveCase {
  int64_t r = 4, SW = 1024, sbs = 4, extra_pages = 0, page_pad = 0, row_pad = 0;
  Batch batch;
  DType pos_dtype = DType::I64, slot_dtype = DType::I64;
  int fault = 0;  // 0 none, 1 non-finite kv of a written token, 2 in a skipped token, 3 overflow
  Seed seed;
};

std::ostream& operator<<(std::ostream& os, const SaveCase& c) {
  return os << "SaveCase{r=" << c.r << ", SW=" << c.SW << ", sbs=" << c.sbs
            << ", extra_pages=" << c.extra_pages << ", page_pad=" << c.page_pad
            << ", row_pad=" << c.row_pad << ", " << c.batch << ", positions "
            << dtype_name(c.pos_dtype) << ", slot_mapping " << dtype_name(c.slot_dtype)
            << ", fault=" << c.fault << ", " << c.seed << "}";
}

rc::Gen<SaveCase> gen_save_case() {
  return rc::gen::exec([] {
    SaveCase c;
    c.r = *rc::gen::element<int64_t>(4, 128);
    c.SW = *rc::gen::element<int64_t>(128, 256, 512, 1024);
    c.sbs = *rc::gen::element<int64_t>(1, 4, 6, 8, 12);
    c.batch = *gen_batch({3, 12, int64_t{1} << 20, 0});
    c.extra_pages = *rc::gen::inRange<int64_t>(0, 3);
    c.page_pad = *gen_pad(40);
    c.row_pad = *gen_pad(20);
    c.pos_dtype = *gen_index_dtype();
    c.slot_dtype = *gen_index_dtype();
    c.fault = *rc::gen::weightedElement<int>({{8, 0}, {1, 1}, {1, 2}, {1, 3}});
    c.seed = *gen_seed();
    return c;
  });
}

void save_partial_states_property(const testing::Plan& plan) {
  const SaveCase c = *gen_save_case();
  std::mt19937_64 rng(c.seed.value);
  const int64_t N = c.batch.num_tokens(), SW = c.SW;
  const int64_t nb = (N + c.sbs - 1) / c.sbs + c.extra_pages;
  const int64_t row = SW + c.row_pad, page = c.sbs * 2 * SW + c.page_pad;
  const std::vector<int64_t> slots = draw_slots(rng, N, nb * c.sbs, 4);
  std::vector<float> kv(static_cast<size_t>(std::max<int64_t>(N * row, 1)));
  std::vector<float> score(kv.size()), ape(static_cast<size_t>(c.r * SW));
  fill_garbage(rng, kv.data(), kv.size() * 4);
  fill_garbage(rng, score.data(), score.size() * 4);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t i = 0; i < SW; ++i) {
      kv[t * row + i] = spread(rng, 1.0f);
      score[t * row + i] = spread(rng, 4.0f);
    }
  for (float& x : ape) x = spread(rng, 1.0f);
  const std::vector<int64_t> pos = c.batch.positions();
  for (int64_t t = 0; t < N && c.fault != 0; ++t) {
    if ((slots[t] >= 0) != (c.fault != 2)) continue;
    const int64_t i = special_index(rng, boundary_indices(SW), SW);
    if (c.fault == 3) {
      score[t * row + i] = 3e38f;
      ape[(pos[t] % c.r) * SW + i] = 3e38f;
    } else {
      kv[t * row + i] = rng() % 2 ? std::numeric_limits<float>::quiet_NaN() : INFINITY;
    }
    break;
  }
  std::vector<float> state(static_cast<size_t>(std::max<int64_t>(nb * page, 1)));
  fill_garbage(rng, state.data(), state.size() * 4);
  std::vector<uint8_t> writable(state.size() * 4, 0);
  for (int64_t t = 0; t < N; ++t)
    if (slots[t] >= 0)
      mark(writable, state.data(),
           state.data() + (slots[t] / c.sbs) * page + (slots[t] % c.sbs) * 2 * SW,
           static_cast<size_t>(2 * SW * 4));
  const IndexArray positions(pos, c.pos_dtype, N, kVector, 0, rng());
  const IndexArray slot_mapping(slots, c.slot_dtype, N, kVector, 0, rng());
  check_against_reference(
      plan, "save_partial_states", state, writable, [&](const Options& o, std::vector<float>& st) {
        save_partial_states(
            TensorView(kv.data(), DType::F32, {N, SW}, {row, 1}),
            TensorView(score.data(), DType::F32, {N, SW}, {row, 1}),
            TensorView(ape.data(), DType::F32, {c.r, SW}), positions.view(),
            MutableTensorView(st.data(), DType::F32, {nb, c.sbs, 2 * SW}, {page, 2 * SW, 1}),
            slot_mapping.view(), o);
      });
}
const bool kSavePartialStates =
    register_property("SavePartialStates", "EqualsReference", "save_partial_states", kOptimized,
                      save_partial_states_property);
// Streamed rows and the sorted repeated-slot search.
const bool kSavePartialStatesGated =
    register_gated_property("SavePartialStates", "EqualsReference", "save_partial_states",
                            kOptimized, save_partial_states_property);

// ---- map_local_to_global_slots ----

struct MapCase {
  Batch batch;
  BlockTable table;
  int64_t K = 0, local_pad = 0;
  DType local_dtype = DType::I64, req_dtype = DType::I64;
  int beyond_one_in = 0;  // 0: every valid local index is inside its request's pages
  Seed seed;
};

std::ostream& operator<<(std::ostream& os, const MapCase& c) {
  return os << "MapCase{" << c.batch << ", " << c.table << ", K=" << c.K
            << ", local_pad=" << c.local_pad << ", local_indices " << dtype_name(c.local_dtype)
            << ", req_idx " << dtype_name(c.req_dtype) << ", beyond_one_in=" << c.beyond_one_in
            << ", " << c.seed << "}";
}

rc::Gen<MapCase> gen_map_case() {
  return rc::gen::exec([] {
    MapCase c;
    c.batch = *gen_batch({4, 16, int64_t{1} << 20, 0});
    const int64_t P = *rc::gen::element<int64_t>(1, 3, 4, 6, 12, 16, 48, 64, 96, 256);
    c.table = *gen_block_table(c.batch.seq_lens, P);
    c.K = *rc::gen::inRange<int64_t>(0, 40);
    c.local_pad = *gen_pad(5);
    c.local_dtype = *gen_index_dtype();
    c.req_dtype = *gen_index_dtype();
    c.beyond_one_in = *rc::gen::weightedElement<int>({{6, 0}, {1, 50}});
    c.seed = *gen_seed();
    return c;
  });
}

void map_local_to_global_slots_property(const testing::Plan& plan) {
  const MapCase c = *gen_map_case();
  std::mt19937_64 rng(c.seed.value);
  const std::vector<int64_t> req = c.batch.token_to_req();
  const int64_t N = c.batch.num_tokens(), K = c.K, P = c.table.block_size;
  std::vector<int64_t> local(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t seq = c.batch.seq_lens[req[n]];
      int64_t l;
      switch (rng() % 4) {
        case 0: l = -1; break;
        case 1: l = -static_cast<int64_t>(rng() % 1000) - 2; break;  // window arithmetic
        default: l = static_cast<int64_t>(rng() % seq);
      }
      if (c.beyond_one_in > 0 && rng() % c.beyond_one_in == 0)
        l = static_cast<int64_t>(rng() % ((c.table.cols + 2) * P));  // may read garbage or beyond
      local[n * K + k] = l;
    }
  const IndexArray locals(local, c.local_dtype, N, K, c.local_pad, rng());
  const IndexArray req_idx(req, c.req_dtype, N, kVector, 0, rng());
  // The output sits between guard elements of garbage.
  constexpr int64_t kGuard = 8;
  std::vector<int64_t> out(static_cast<size_t>(N * K + 2 * kGuard));
  fill_garbage(rng, out.data(), out.size() * 8);
  std::vector<uint8_t> writable(out.size() * 8, 0);
  mark(writable, out.data(), out.data() + kGuard, static_cast<size_t>(N * K * 8));
  check_against_reference(plan, "map_local_to_global_slots", out, writable,
                          [&](const Options& o, std::vector<int64_t>& s) {
                            map_local_to_global_slots(
                                locals.view(), req_idx.view(), c.table.array.view(), P,
                                MutableTensorView(s.data() + kGuard, DType::I64, {N, K}), o);
                          });
}
const bool kMapLocalToGlobalSlots =
    register_property("MapLocalToGlobalSlots", "EqualsReference", "map_local_to_global_slots",
                      kOptimized, map_local_to_global_slots_property);
// Streamed rows.
const bool kMapLocalToGlobalSlotsGated =
    register_gated_property("MapLocalToGlobalSlots", "EqualsReference",
                            "map_local_to_global_slots", kOptimized,
                            map_local_to_global_slots_property);

// ---- pooling (numerics.md §8.4), compared before any rounding to bf16 or fp8 ----

struct PoolCase {
  int64_t valid = 1, d0 = 0, d1 = 64;
  float score_sigma = 1.0f, kv_scale = 1.0f;
  int neg_inf_one_in = 0;  // scores set to −inf (0: none)
  Seed seed;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) {
  return os << "PoolCase{valid=" << c.valid << ", channels [" << c.d0 << ", " << c.d1
            << "), score_sigma=" << c.score_sigma << ", kv_scale=" << c.kv_scale
            << ", neg_inf_one_in=" << c.neg_inf_one_in << ", " << c.seed << "}";
}

rc::Gen<PoolCase> gen_pool_case() {
  return rc::gen::exec([] {
    PoolCase c;
    c.valid = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::inRange<int64_t>(1, 257)}});
    c.d0 = 64 * *rc::gen::inRange<int64_t>(0, 8);
    c.d1 = c.d0 + 64 * *rc::gen::inRange<int64_t>(1, 9 - c.d0 / 64);
    c.score_sigma = *rc::gen::element(0.0f, 0.01f, 1.0f, 8.0f, 60.0f);
    c.kv_scale = *rc::gen::element(1.0f, 0x1p-130f, 1e-20f, 1e20f);
    c.neg_inf_one_in = *rc::gen::element(0, 0, 16);
    c.seed = *gen_seed();
    return c;
  });
}

// The kernel of a compress variant, from its family's table (DSV4CPU_COMPRESSOR_KERNELS), or null.
const detail::opt::CompressorKernel* compressor_kernel(const std::string& variant) {
#define DSV4CPU_KERNEL_OF(name, highway, isa) \
  if (variant == #name) return &detail::opt::name##_compressor_kernel();
  DSV4CPU_COMPRESSOR_KERNELS(DSV4CPU_KERNEL_OF)
#undef DSV4CPU_KERNEL_OF
  return nullptr;
}

// The pooling step of every compressor kernel, alone, on every target of its run.
RC_GTEST_PROP(CompressorKernelPool, EqualsSpecOrderOnEveryTarget, ()) {
  const PoolCase c = *gen_pool_case();
  RC_TAG(c.valid <= 8 ? "short window" : "long window");
  std::mt19937_64 rng(c.seed.value);
  const size_t rows = static_cast<size_t>(c.valid), D = 512;
  std::vector<float> kv(rows * D), score(rows * D);
  for (size_t i = 0; i < rows * D; ++i) {
    kv[i] = spread(rng, 1.0f) * c.kv_scale;
    score[i] = spread(rng, c.score_sigma);
    if (c.neg_inf_one_in > 0 && rng() % c.neg_inf_one_in == 0) score[i] = -INFINITY;
  }
  std::vector<const float*> kv_rows, score_rows;
  for (size_t j = 0; j < rows; ++j) {
    kv_rows.push_back(kv.data() + j * D);
    score_rows.push_back(score.data() + j * D);
  }
  // The spec's order, per channel: m = max_w s_w; den, acc over w ascending; c = RN(acc / den).
  std::vector<float> want(D, 0.0f);
  for (int64_t d = c.d0; d < c.d1; ++d) {
    float m = score[d];
    for (size_t j = 1; j < rows; ++j) m = std::max(m, score[j * D + d]);
    float den = 0.0f, acc = 0.0f;
    for (size_t j = 0; j < rows; ++j) {
      const float e = exp_lib(score[j * D + d] - m);
      den = den + e;
      acc = std::fma(e, kv[j * D + d], acc);
    }
    want[d] = acc / den;
  }
  testing::for_each(
      testing::runs("compress_norm_rope_store", kOptimized), [&](const testing::Run& run) {
        const detail::opt::CompressorKernel* kernel = compressor_kernel(run.variant.name);
        if (kernel == nullptr || run.threads != 1) return;
        std::vector<float> got(D, 0.0f);
        kernel->pool(kv_rows.data(), score_rows.data(), rows, static_cast<size_t>(c.d0),
                     static_cast<size_t>(c.d1), got.data(), nullptr, nullptr, 0);
        for (int64_t d = c.d0; d < c.d1; ++d)
          if (f32_bits(got[d]) != f32_bits(want[d]) && !(std::isnan(got[d]) && std::isnan(want[d])))
            RC_FAIL("channel " + std::to_string(d) + " on " + run.label() + ": " +
                    std::to_string(got[d]) + " vs " + std::to_string(want[d]));
      });
}

// ---- compress_norm_rope_store, compress_norm_rope_store_indexer ----

// The RoPE table: positions reach 2^20, so the table is a lazily zero-filled mapping of the
// model's 2^20 rows (plus slack); each case writes the rows it uses.
float* cos_sin_table(int64_t rows) {
  static const size_t bytes = static_cast<size_t>(rows) * 64 * sizeof(float);
  static float* table = [] {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<float*>(p);
  }();
  return table;
}
constexpr int64_t kTableRows = (int64_t{1} << 20) + 8;

enum Profile : int {
  kTypical,        // scores N(0, σ), kv N(0, 1)
  kWideScores,     // scores N(0, 60) with some −inf: many exp_lib underflows and skipped weights
  kTiny,           // kv ~ 2^-130: subnormal pooled values, ss underflow, fp8 subnormal codes
  kHuge,           // kv ~ 1e19 and large weights: overflow → NonFiniteError
  kNonFiniteState, // a NaN or +inf in one row that an emitting token reads
  kEqualScores,    // every score equal: exp_lib(0) = 1 everywhere
  kBf16Values,     // bf16-representable inputs, as vLLM passes them
  kProfiles
};

struct CompressCase {
  bool indexer = false;
  int64_t r = 4, coff = 2, sbs = 4, P = 64, extra_state_pages = 0, state_pad = 0;
  int64_t extra_kv_pages = 0, page_pad = 0, stride_pad = 0, cos_extra = 0;
  Batch batch;
  double eps = 1e-6;
  ScaleClamp clamp = ScaleClamp::cpu;
  DType gather_dtype = DType::I64, pos_dtype = DType::I64, slot_dtype = DType::I64;
  int knockout_one_in = 0;  // non-own window columns set to -1 (0: none)
  int profile = kTypical;
  Seed seed;
};

std::ostream& operator<<(std::ostream& os, const CompressCase& c) {
  return os << "CompressCase{" << (c.indexer ? "indexer" : "main") << ", r=" << c.r
            << ", coff=" << c.coff << ", sbs=" << c.sbs << ", P=" << c.P
            << ", extra_state_pages=" << c.extra_state_pages << ", state_pad=" << c.state_pad
            << ", extra_kv_pages=" << c.extra_kv_pages << ", page_pad=" << c.page_pad
            << ", stride_pad=" << c.stride_pad << ", cos_extra=" << c.cos_extra << ", "
            << c.batch << ", eps=" << c.eps
            << ", clamp=" << (c.clamp == ScaleClamp::cpu ? "cpu" : "gpu")
            << ", gather " << dtype_name(c.gather_dtype) << ", positions "
            << dtype_name(c.pos_dtype) << ", kv_slot_mapping " << dtype_name(c.slot_dtype)
            << ", knockout_one_in=" << c.knockout_one_in << ", profile=" << c.profile << ", "
            << c.seed << "}";
}

rc::Gen<CompressCase> gen_compress_case(bool indexer) {
  return rc::gen::exec([indexer] {
    CompressCase c;
    c.indexer = indexer;
    // The model's (r, coff): C4A main and indexer (4, 2), C128A (128, 1); the kernels also accept
    // (4, 1) and (128, 2).
    const auto rc_pair = indexer ? *rc::gen::weightedElement<std::pair<int64_t, int64_t>>(
                                       {{6, {4, 2}}, {1, {4, 1}}, {1, {128, 1}}})
                                 : *rc::gen::weightedElement<std::pair<int64_t, int64_t>>(
                                       {{4, {4, 2}}, {3, {128, 1}}, {1, {4, 1}}, {1, {128, 2}}});
    c.r = rc_pair.first;
    c.coff = rc_pair.second;
    c.sbs = *rc::gen::element<int64_t>(1, 4, 6, 8);
    c.P = *rc::gen::element<int64_t>(1, 2, 3, 6, 12, 64);
    c.batch = c.r == 4 ? *gen_batch({5, 24, int64_t{1} << 20, 4})
                       : *gen_batch({3, 140, int64_t{1} << 20, 128});
    c.extra_state_pages = *rc::gen::inRange<int64_t>(0, 3);
    c.state_pad = *gen_pad(24);
    c.extra_kv_pages = *rc::gen::inRange<int64_t>(0, 3);
    c.page_pad = *gen_pad(40);
    c.stride_pad = *gen_pad(40);
    c.cos_extra = *rc::gen::inRange<int64_t>(0, 3);
    c.eps = *rc::gen::element(1e-6, 0.0, 1e-3, 1.0);
    c.clamp = *rc::gen::element(ScaleClamp::cpu, ScaleClamp::gpu);
    c.gather_dtype = *gen_index_dtype();
    c.pos_dtype = *gen_index_dtype();
    c.slot_dtype = *gen_index_dtype();
    c.knockout_one_in = *rc::gen::element(0, 0, 3, 16);
    c.profile = *rc::gen::weightedElement<int>({{6, kTypical},
                                                {2, kWideScores},
                                                {1, kTiny},
                                                {1, kHuge},
                                                {1, kNonFiniteState},
                                                {1, kEqualScores},
                                                {2, kBf16Values}});
    c.seed = *gen_seed();
    return c;
  });
}

void check_compress(const testing::Plan& plan, const CompressCase& c) {
  std::mt19937_64 rng(c.seed.value);
  const char* op = c.indexer ? "compress_norm_rope_store_indexer" : "compress_norm_rope_store";
  const int64_t HD = c.indexer ? 128 : 512, entry = c.indexer ? 132 : 584;
  const int64_t data_bytes = c.indexer ? 128 : 576, scale_bytes = entry - data_bytes;
  const int64_t r = c.r, W = c.coff * r, SW = c.coff * HD;
  const std::vector<int64_t> pos = c.batch.positions(), req = c.batch.token_to_req();
  const int64_t N = c.batch.num_tokens();

  // State pages: one per (request, state page column) that some window touches, shuffled.
  std::map<std::pair<int64_t, int64_t>, int64_t> page_of;
  for (int64_t t = 0; t < N; ++t)
    for (int64_t w = 0; w < W; ++w)
      if (pos[t] - W + 1 + w >= 0) page_of[{req[t], (pos[t] - W + 1 + w) / c.sbs}] = 0;
  const int64_t nb = static_cast<int64_t>(page_of.size()) + c.extra_state_pages;
  std::vector<int64_t> ids(static_cast<size_t>(nb));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (auto& kv : page_of) kv.second = ids[next++];
  std::vector<int64_t> gather(static_cast<size_t>(N * W), -1);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t w = 0; w < W; ++w) {
      const int64_t l = pos[t] - W + 1 + w;
      const bool knocked = w < W - 1 && c.knockout_one_in > 0 && rng() % c.knockout_one_in == 0;
      if (l >= 0 && !knocked) gather[t * W + w] = page_of[{req[t], l / c.sbs}] * c.sbs + l % c.sbs;
    }

  // Compressed-cache slots: distinct for boundary tokens (some -1), anything for the others.
  int64_t boundary = 0;
  for (int64_t p : pos) boundary += p % r == r - 1;
  const int64_t nblk = (boundary + c.P - 1) / c.P + c.extra_kv_pages;
  const std::vector<int64_t> drawn = draw_slots(rng, boundary, nblk * c.P, 5);
  std::vector<int64_t> kv_slot(static_cast<size_t>(N));
  std::vector<int64_t> emitting;
  for (int64_t t = 0, b = 0; t < N; ++t) {
    if (pos[t] % r == r - 1) {
      kv_slot[t] = drawn[b++];
      if (kv_slot[t] >= 0) emitting.push_back(t);
    } else {
      kv_slot[t] = nblk * c.P > 0 && rng() % 2 ? static_cast<int64_t>(rng() % (nblk * c.P)) : -1;
    }
  }

  // State cache: finite decoys everywhere (a misread segment changes the entry instead of making
  // it non-finite), values in the segments that emitting tokens read.
  const int64_t page = c.sbs * 2 * SW + c.state_pad;
  std::vector<float> state(static_cast<size_t>(std::max<int64_t>(nb * page, 1)));
  testing::fill_decoys(rng, state.data(), state.size());
  const float score_sigma =
      c.profile == kWideScores ? 60.0f : std::ldexp(1.0f, static_cast<int>(rng() % 5) - 1);
  const float kv_scale = c.profile == kTiny ? 0x1p-130f : c.profile == kHuge ? 1e19f : 1.0f;
  const float equal_score = spread(rng, 2.0f);
  auto value = [&](float x) { return c.profile == kBf16Values ? round_bf16(x) : x; };
  std::vector<float*> read_segments;  // kv segments; the score segment is at + SW
  for (int64_t t : emitting)
    for (int64_t w = 0; w < W; ++w) {
      const int64_t g = gather[t * W + w];
      if (g < 0) continue;
      float* seg = state.data() + (g / c.sbs) * page + (g % c.sbs) * 2 * SW + (w >= r ? HD : 0);
      read_segments.push_back(seg);
      for (int64_t d = 0; d < HD; ++d) {
        seg[d] = value(spread(rng, 1.0f) * kv_scale);
        seg[SW + d] = c.profile == kEqualScores ? equal_score : value(spread(rng, score_sigma));
        if (c.profile == kWideScores && rng() % 64 == 0) seg[SW + d] = -INFINITY;
      }
    }
  if (c.profile == kNonFiniteState && !read_segments.empty()) {
    float* seg = read_segments[rng() % read_segments.size()];
    seg[(rng() % 2) * SW + special_index(rng, boundary_indices(HD), HD)] =
        rng() % 2 ? std::numeric_limits<float>::quiet_NaN() : INFINITY;
  }

  std::vector<float> weight(static_cast<size_t>(HD));
  for (float& w : weight) w = round_bf16(1.0f + spread(rng, 0.3f));
  if (rng() % 8 == 0) weight[rng() % HD] = 0.0f;
  if (c.profile == kHuge && rng() % 2) weight[rng() % HD] = 1e30f;

  float* table = cos_sin_table(kTableRows);
  RC_ASSERT(table != nullptr);
  int64_t rows = static_cast<int64_t>(rng() % 4);
  for (int64_t t : emitting) {
    const int64_t p0 = pos[t] / r * r;
    rows = std::max(rows, p0 + 1 + c.cos_extra);
    for (int i = 0; i < 32; ++i) {
      const double angle = std::ldexp(static_cast<double>(rng() >> 11), -53) * 6.283185307179586;
      table[p0 * 64 + i] = static_cast<float>(std::cos(angle));
      table[p0 * 64 + 32 + i] = static_cast<float>(std::sin(angle));
    }
  }
  rows = std::min(rows, kTableRows);

  // kv_cache: pages of page_bytes >= P·entry, page stride >= page_bytes, pre-filled garbage.
  const int64_t page_bytes = c.P * entry + c.page_pad, stride = page_bytes + c.stride_pad;
  std::vector<uint8_t> cache(static_cast<size_t>(std::max<int64_t>(nblk * stride, 1)));
  fill_garbage(rng, cache.data(), cache.size());
  std::vector<uint8_t> writable(cache.size(), 0);
  for (int64_t t : emitting) {
    uint8_t* pg = cache.data() + (kv_slot[t] / c.P) * stride;
    const int64_t j = kv_slot[t] % c.P;
    mark(writable, cache.data(), pg + j * data_bytes, static_cast<size_t>(data_bytes));
    mark(writable, cache.data(), pg + c.P * data_bytes + j * scale_bytes,
         static_cast<size_t>(scale_bytes));
  }

  const IndexArray gather_slots(gather, c.gather_dtype, N, W, 0, rng());
  const IndexArray positions(pos, c.pos_dtype, N, kVector, 0, rng());
  const IndexArray kv_slot_mapping(kv_slot, c.slot_dtype, N, kVector, 0, rng());
  const TensorView state_view(state.data(), DType::F32, {nb, c.sbs, 2 * SW}, {page, 2 * SW, 1});
  const TensorView weight_view(weight.data(), DType::F32, {HD});
  const TensorView table_view(table, DType::F32, {rows, 64});
  check_against_reference(
      plan, op, cache, writable, [&](const Options& o, std::vector<uint8_t>& kvc) {
        const MutableTensorView kv_view(kvc.data(), DType::U8, {nblk, page_bytes}, {stride, 1});
        if (c.indexer)
          compress_norm_rope_store_indexer(state_view, gather_slots.view(), positions.view(),
                                           kv_slot_mapping.view(), weight_view, table_view, kv_view,
                                           c.eps, c.P, r, c.clamp, o);
        else
          compress_norm_rope_store(state_view, gather_slots.view(), positions.view(),
                                   kv_slot_mapping.view(), weight_view, table_view, kv_view, c.eps,
                                   c.P, r, c.clamp, o);
      });
}

const bool kCompressNormRopeStore = register_property(
    "CompressNormRopeStore", "EqualsReference", "compress_norm_rope_store", kOptimized,
    [](const testing::Plan& plan) { check_compress(plan, *gen_compress_case(false)); });
const bool kCompressNormRopeStoreIndexer = register_property(
    "CompressNormRopeStoreIndexer", "EqualsReference", "compress_norm_rope_store_indexer",
    kOptimized, [](const testing::Plan& plan) { check_compress(plan, *gen_compress_case(true)); });

}  // namespace
}  // namespace dsv4cpu::prop
