// Attention ops at DeepSeek-V4 shapes (attention.md; fp8_ds_mla pages of 64 entries shuffled as an
// allocator hands them out, q and kv ~ N(0, 1), entries quantised like the compressor's):
//   sparse_mla_attention  `c4a_decode<T>_h<H>`: T = 1, 8, 64 decode tokens of H = 64 (Flash) and
//                         128 (Pro) heads, each over its 128-entry window and 512 selected C4A
//                         entries (Pc = 64), `c4a_decode1_h32` (Flash's heads under tensor
//                         parallelism of 2: one group of 32) and `c4a_decode8_h16` (16 heads: a
//                         rank of Pro under tensor parallelism of 8, the engine model of
//                         docs/vllm.md); `c128a_decode1_h64_<N>`: one token over its window
//                         and N = 1,024 or 8,192 C128A entries (Pc = 2);
//                         `c4a_prefill4096_h64`: a chunk of 4,096 tokens of one request, each
//                         over its sliding window and 512 of the request's entries (no reference
//                         run: minutes per iteration); `c4a_prefill4096_h16` likewise with 16
//                         heads, `c128a_prefill4096_h16` over each token's window and the C128A
//                         entries before it (Pc = 2, metadata.md §7.1), `c4a_prefill1920_h16`
//                         over each token's window and the C4A entries before it in order (a
//                         prompt of 2,048 tokens: every row L ≤ 512, indexer.md §5.2);
//   fused_qnorm_rope_kv_insert  the batch shapes, Hq = 64.
//   inverse_gptj_rope_o_proj    the batch shapes, H = 64, D = 512, rope_dim = 64 (`<shape>_h64`;
//                               no reference run at prefill4096), also without the finite checks,
//                               and `<shape>_h64/fresh_outputs` with Options::fresh_outputs.
// Bytes: every gathered entry (584 bytes per valid column), q, the slots, out and lse; for the
// insert q, kv, positions, slots, the table rows, q_out and the written entries; for the inverse
// RoPE o, out, the positions and their table rows. FLOP: the two
// matrix products, 2 × 2 × 512 per head and gathered row.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/numerics.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kP = 64, kEntry = 584, kWindow = 128;

// Fast deterministic N(0, 1) values as bf16: a table of 4096 draws indexed by random bits (the
// caches and queries of the prefill shape hold hundreds of millions of values).
class Bf16Normals {
 public:
  explicit Bf16Normals(uint64_t seed) : rng_(seed) {
    std::normal_distribution<float> normal;
    for (uint16_t& x : table_) x = to_bf16(normal(rng_));
  }
  void fill(uint16_t* x, size_t n) {
    for (size_t i = 0; i < n; i += 4) {
      const uint64_t r = rng_();
      for (size_t k = 0; k < 4 && i + k < n; ++k) x[i + k] = table_[(r >> (16 * k)) & 4095];
    }
  }

 private:
  std::mt19937_64 rng_;
  uint16_t table_[4096];
};

// A paged fp8_ds_mla cache of `entries` entries with P per page: every entry the quantisation of
// an N(0, 1) row (7 tiles of 64 codes with their UE8M0 bytes, 64 bf16 RoPE values); slot s of
// request-local entry e is page ids[e / P], entry e % P.
struct MlaCacheData {
  int64_t P, pages;
  Buffer<uint8_t> bytes;
  std::vector<int64_t> ids;
  MlaCacheData(int64_t entries, int64_t P_, uint64_t seed)
      : P(P_), pages((entries + P_ - 1) / P_),
        bytes(static_cast<size_t>(pages * P_ * kEntry)), ids(shuffled_pages(pages, seed)) {
    Bf16Normals normals(seed + 1);
    uint16_t row[512];
    for (int64_t s = 0; s < pages * P; ++s) {
      normals.fill(row, 512);
      uint8_t* data = bytes.data() + (s / P) * P * kEntry + (s % P) * 576;
      uint8_t* scales = bytes.data() + (s / P) * P * kEntry + P * 576 + (s % P) * 8;
      for (int q = 0; q < 7; ++q) {
        float amax = 0.0f;
        for (int d = 0; d < 64; ++d) amax = std::max(amax, std::fabs(bf16_to_f32(row[q * 64 + d])));
        const int e = static_cast<int>(std::ceil(std::log2(amax / 448.0f)));
        const float inv = std::ldexp(1.0f, -e);
        for (int d = 0; d < 64; ++d) data[q * 64 + d] = e4m3_sat(bf16_to_f32(row[q * 64 + d]) * inv);
        scales[q] = static_cast<uint8_t>(e + 127);
      }
      std::memcpy(data + 448, row + 448, 128);  // little-endian host
      scales[7] = 0;
    }
  }
  int64_t slot(int64_t e) const { return ids[static_cast<size_t>(e / P)] * P + e % P; }
  MutableTensorView view() const {
    return MutableTensorView(bytes.data(), DType::U8, {pages, P * kEntry});
  }
};

// R requests of n tokens each (T = R·n, H heads). Request r owns n + 127 SWA entries; its token i
// reads the window of entries i .. i + 127 and Nc entries drawn without repetition from the
// request's `pool` compressed entries (Pc per page), or with a ratio r > 0 (its position i + 127)
// the entries 0 .. (i + 128) / r − 1 of the pool in order and −1 in the columns after them: the
// rows of C128A, and of C4A where every L ≤ 512 (indexer.md §5.2).
Prepare attention_shape(int64_t R, int64_t n, int64_t H, int64_t Nc, int64_t pool, int64_t Pc,
                        int64_t in_order_ratio = 0) {
  return [=] {
    const int64_t T = R * n, swa = n + kWindow - 1;
    auto window = std::make_shared<MlaCacheData>(R * swa, kP, 21);
    auto compressed = std::make_shared<MlaCacheData>(R * pool, Pc, 22);
    auto q = std::make_shared<Buffer<uint16_t>>(static_cast<size_t>(T * H * 512));
    Bf16Normals(23).fill(q->data(), q->size());
    std::mt19937_64 rng(24);
    auto wslots = std::make_shared<std::vector<int64_t>>();
    auto cslots = std::make_shared<std::vector<int64_t>>();
    std::vector<int64_t> pick(static_cast<size_t>(pool));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t r = t / n, i = t % n;
      for (int64_t k = 0; k < kWindow; ++k) wslots->push_back(window->slot(r * swa + i + k));
      for (int64_t e = 0; e < pool; ++e) pick[static_cast<size_t>(e)] = r * pool + e;
      if (in_order_ratio > 0) {
        for (int64_t k = 0; k < Nc; ++k)
          cslots->push_back(k < (i + kWindow) / in_order_ratio ? compressed->slot(pick[size_t(k)])
                                                              : -1);
        continue;
      }
      std::shuffle(pick.begin(), pick.end(), rng);
      for (int64_t k = 0; k < Nc; ++k) cslots->push_back(compressed->slot(pick[size_t(k)]));
    }
    auto sink = std::make_shared<std::vector<float>>(static_cast<size_t>(H), 0.5f);
    auto out = std::make_shared<Buffer<uint16_t>>(static_cast<size_t>(T * H * 512));
    auto lse = std::make_shared<Buffer<float>>(static_cast<size_t>(T * H));
    Prepared p;
    p.run = [=](const Options& o) {
      sparse_mla_attention(TensorView(q->data(), DType::BF16, {T, H, 512}), window->view(), kP,
                           TensorView(wslots->data(), DType::I64, {T, kWindow}),
                           compressed->view(), Pc,
                           TensorView(cslots->data(), DType::I64, {T, Nc}),
                           TensorView(sink->data(), DType::F32, {H}), kAttentionScale,
                           NopeDecode::exact,
                           MutableTensorView(out->data(), DType::BF16, {T, H, 512}),
                           MutableTensorView(lse->data(), DType::F32, {T, H}), o);
    };
    int64_t rows = T * (kWindow + Nc);  // valid columns
    if (in_order_ratio > 0)
      for (int64_t t = 0; t < T; ++t) rows -= Nc - std::min(Nc, (t % n + kWindow) / in_order_ratio);
    p.bytes = rows * (kEntry + 8) + T * H * (512 * 2 * 2 + 4) + H * 4;
    p.items = rows;             // gathered rows
    p.flops = rows * H * 2048;  // scores and values: 2 × 2 × 512 per head and row
    return p;
  };
}

// The plain theta-10000 RoPE table [kRopeRows, 64] (cos in columns 0..31, sin in 32..63), and a
// token's position in it.
constexpr int64_t kRopeRows = 8192;
std::shared_ptr<Buffer<float>> rope_table() {
  auto table = std::make_shared<Buffer<float>>(static_cast<size_t>(kRopeRows * 64));
  for (int64_t r = 0; r < kRopeRows; ++r)
    for (int i = 0; i < 32; ++i) {
      const double angle = static_cast<double>(r) * std::pow(10000.0, -i / 32.0);
      (*table)[static_cast<size_t>(r * 64 + i)] = static_cast<float>(std::cos(angle));
      (*table)[static_cast<size_t>(r * 64 + 32 + i)] = static_cast<float>(std::sin(angle));
    }
  return table;
}
int64_t rope_position(int64_t t) { return (t * 977 + 5) % kRopeRows; }

// fused_qnorm_rope_kv_insert: T tokens of Hq = 64 heads, every token inserted.
Prepare insert_shape(int64_t T) {
  return [T] {
    constexpr int64_t kHq = 64;
    auto q = std::make_shared<Buffer<uint16_t>>(static_cast<size_t>(T * kHq * 512));
    auto kv = std::make_shared<Buffer<uint16_t>>(static_cast<size_t>(T * 512));
    Bf16Normals normals(31);
    normals.fill(q->data(), q->size());
    normals.fill(kv->data(), kv->size());
    auto table = rope_table();
    auto cache = std::make_shared<MlaCacheData>(T, kP, 32);
    auto pos = std::make_shared<std::vector<int64_t>>();
    auto slots = std::make_shared<std::vector<int64_t>>();
    for (int64_t t = 0; t < T; ++t) {
      pos->push_back(rope_position(t));
      slots->push_back(cache->slot(t));
    }
    auto q_out = std::make_shared<Buffer<uint16_t>>(static_cast<size_t>(T * kHq * 512));
    Prepared p;
    p.run = [=](const Options& o) {
      fused_qnorm_rope_kv_insert(TensorView(q->data(), DType::BF16, {T, kHq, 512}),
                                 TensorView(kv->data(), DType::BF16, {T, 512}),
                                 TensorView(pos->data(), DType::I64, {T}),
                                 TensorView(slots->data(), DType::I64, {T}), cache->view(),
                                 TensorView(table->data(), DType::F32, {kRopeRows, 64}), kHq, 1e-6,
                                 kP, ScaleClamp::cpu, Fp8Subnormals::exact,
                                 MutableTensorView(q_out->data(), DType::BF16, {T, kHq, 512}), o);
    };
    p.bytes = T * (kHq * 512 * 2 * 2 + 512 * 2 + 16 + 64 * 4 + kEntry);
    p.items = T;
    return p;
  };
}

// inverse_gptj_rope_o_proj: T tokens of H = 64 heads, D = 512, rope_dim = 64, BF16 o; with
// `fresh`, Options::fresh_outputs (the checks in the writing pass).
Prepare inverse_rope_shape(int64_t T, bool fresh) {
  return [T, fresh] {
    constexpr int64_t kH = 64, kD = 512;
    auto o = std::make_shared<Buffer<uint16_t>>(static_cast<size_t>(T * kH * kD));
    Bf16Normals(41).fill(o->data(), o->size());
    auto table = rope_table();
    auto pos = std::make_shared<std::vector<int64_t>>();
    for (int64_t t = 0; t < T; ++t) pos->push_back(rope_position(t));
    auto out = std::make_shared<Buffer<float>>(static_cast<size_t>(T * kH * kD));
    Prepared p;
    p.run = [=](const Options& opt) {
      Options options = opt;
      options.fresh_outputs = fresh;
      inverse_gptj_rope_o_proj(TensorView(o->data(), DType::BF16, {T, kH, kD}),
                               TensorView(pos->data(), DType::I64, {T}),
                               TensorView(table->data(), DType::F32, {kRopeRows, 64}), 64,
                               MutableTensorView(out->data(), DType::F32, {T, kH, kD}), options);
    };
    p.bytes = T * (kH * kD * (2 + 4) + 8 + 64 * 4);  // o, out, the position and its table row
    p.items = T;
    return p;
  };
}

}  // namespace

void attention_cases(Cases& out) {
  for (int64_t H : {64, 128})
    for (int64_t T : {1, 8, 64})
      out.push_back({"sparse_mla_attention",
                     "c4a_decode" + std::to_string(T) + "_h" + std::to_string(H),
                     attention_shape(T, 1, H, 512, 2048, kP)});
  out.push_back(
      {"sparse_mla_attention", "c4a_decode1_h32", attention_shape(1, 1, 32, 512, 2048, kP)});
  out.push_back(
      {"sparse_mla_attention", "c4a_decode8_h16", attention_shape(8, 1, 16, 512, 2048, kP)});
  for (int64_t N : {1024, 8192})
    out.push_back({"sparse_mla_attention", "c128a_decode1_h64_" + std::to_string(N),
                   attention_shape(1, 1, 64, N, N, 2)});
  out.push_back({"sparse_mla_attention", "c4a_prefill4096_h64",
                 attention_shape(1, 4096, 64, 512, 2048, kP), Traffic::read, false, false});
  out.push_back({"sparse_mla_attention", "c4a_prefill4096_h16",
                 attention_shape(1, 4096, 16, 512, 2048, kP), Traffic::read, false, false});
  out.push_back({"sparse_mla_attention", "c128a_prefill4096_h16",
                 attention_shape(1, 4096, 16, 34, 34, 2, 128), Traffic::read, false, false});
  out.push_back({"sparse_mla_attention", "c4a_prefill1920_h16",
                 attention_shape(1, 1920, 16, 512, 512, kP, 4), Traffic::read, false, false});
  for (const BatchShape& s : batch_shapes())
    out.push_back({"fused_qnorm_rope_kv_insert", s.name,
                   insert_shape(s.requests * s.tokens_per_request)});
  for (const BatchShape& s : batch_shapes()) {
    const int64_t T = s.requests * s.tokens_per_request;
    out.push_back({"inverse_gptj_rope_o_proj", s.name + "_h64", inverse_rope_shape(T, false),
                   Traffic::copy, true, T < 4096});
    out.push_back({"inverse_gptj_rope_o_proj", s.name + "_h64/fresh_outputs",
                   inverse_rope_shape(T, true), Traffic::copy, false, false});
  }
}

}  // namespace dsv4cpu::bench
