// Indexer ops at DeepSeek-V4-Flash shapes (indexer.md §1: H = 64 heads of 128 dims, 64 entries
// per K-cache page, pages shuffled as an allocator hands them out):
//   fp8_paged_mqa_logits  `row8K`, `row32K`, `row128K` (one query row over that many compressed
//                         keys) and `decode8x32K` (eight requests at 32K keys each);
//   topk_transform_512    canonical (§5.3) on `random*` and `ascending*` rows of 32K, 128K and 1M
//                         scores, and the vllm heap (§5.4) on `vllm_random*` / `vllm_ascending*`;
//   indexer_topk          `decode8x32K`: eight decode tokens, logits and selection fused;
//   fused_indexer_q_rope_quant `tokens64`.
// Bytes: everything the op reads (K-cache entries, queries, weights, page tables, scores) plus
// everything it writes (logits rows, indices).
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "dsv4cpu/indexer.hpp"

namespace dsv4cpu::bench {
namespace {

constexpr int64_t kH = 64, kP = 64, kEntry = 132;

// A paged indexer K cache holding `batch` requests of L keys each: random finite codes, key scales
// 2^e; page_table[b][c] = physical page of request b's page c.
struct IndexerCache {
  int64_t batch, L, pages_per_row;
  Buffer<uint8_t> bytes;
  std::vector<int32_t> page_table;
  IndexerCache(int64_t batch_, int64_t L_, uint64_t seed)
      : batch(batch_), L(L_), pages_per_row((L_ + kP - 1) / kP),
        bytes(static_cast<size_t>(batch_ * pages_per_row * kP * kEntry)) {
    std::mt19937_64 rng(seed);
    const std::vector<int64_t> ids = shuffled_pages(batch * pages_per_row, seed + 1);
    page_table.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) page_table[i] = static_cast<int32_t>(ids[i]);
    for (int64_t page = 0; page < batch * pages_per_row; ++page) {
      uint8_t* base = bytes.data() + page * kP * kEntry;
      for (int64_t i = 0; i < kP * 128; i += 8) {
        uint64_t r = rng() & 0xFEFEFEFEFEFEFEFEull;  // bit 0 clear: never 0x7F / 0xFF
        std::memcpy(base + i, &r, 8);
      }
      for (int64_t e = 0; e < kP; ++e) {
        const float s = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 12);
        std::memcpy(base + kP * 128 + 4 * e, &s, 4);
      }
    }
  }
  TensorView view() const {
    return TensorView(bytes.data(), DType::U8, {batch * pages_per_row, kP * kEntry});
  }
  TensorView table() const {
    return TensorView(page_table.data(), DType::I32, {batch, pages_per_row});
  }
};

// Query codes (finite, near the quantised range) and head weights of `rows` rows.
struct Queries {
  std::vector<uint8_t> q;
  std::vector<float> w;
  Queries(int64_t rows, uint64_t seed) : q(static_cast<size_t>(rows * kH * 128)), w(rows * kH) {
    std::mt19937_64 rng(seed);
    for (auto& c : q) c = static_cast<uint8_t>(rng() & 0xF6);  // never 0x7F / 0xFF
    fill_normal(w.data(), w.size(), 0.05f, seed + 2);
  }
};

Prepare logits_shape(int64_t batch, int64_t L) {
  return [batch, L] {
    auto cache = std::make_shared<IndexerCache>(batch, L, 7);
    auto queries = std::make_shared<Queries>(batch, 8);
    auto lens = std::make_shared<std::vector<int32_t>>(batch, static_cast<int32_t>(L));
    auto logits = std::make_shared<Buffer<float>>(static_cast<size_t>(batch * L));
    Prepared p;
    p.run = [=](const Options& o) {
      fp8_paged_mqa_logits(TensorView(queries->q.data(), DType::F8_E4M3, {batch, kH, 128}),
                           cache->view(), TensorView(queries->w.data(), DType::F32, {batch, kH}),
                           TensorView(lens->data(), DType::I32, {batch}), cache->table(), kP, L,
                           MutableTensorView(logits->data(), DType::F32, {batch, L}), 1, o);
    };
    p.bytes = batch * (L * kEntry + kH * 128 + kH * 4 + cache->pages_per_row * 4 + 4 + L * 4);
    p.items = batch * L;  // keys scored
    p.flops = p.items * kH * 128 * 2;  // one multiply-add per head and dim of every key
    return p;
  };
}

// Scores of one row: N(0, 1) (random) or 0, 1, 2, ... (ascending).
Prepare topk_shape(int64_t L, bool ascending, TopkMode mode) {
  return [L, ascending, mode] {
    auto scores = std::make_shared<Buffer<float>>(static_cast<size_t>(L));
    if (ascending)
      for (int64_t i = 0; i < L; ++i) (*scores)[static_cast<size_t>(i)] = static_cast<float>(i);
    else
      fill_normal(scores->data(), static_cast<size_t>(L), 1.0f, 9);
    auto lens = std::make_shared<std::vector<int32_t>>(1, static_cast<int32_t>(L));
    auto raw = std::make_shared<std::vector<int32_t>>(512);
    Prepared p;
    p.run = [=](const Options& o) {
      topk_transform_512(TensorView(scores->data(), DType::F32, {1, L}),
                         TensorView(lens->data(), DType::I32, {1}), TensorView(), 1, mode,
                         MutableTensorView(raw->data(), DType::I32, {1, 512}), MutableTensorView(),
                         o);
    };
    p.bytes = L * 4 + 4 + 512 * 4;
    p.items = L;
    return p;
  };
}

// `batch` decode tokens, each of a request with 4·L tokens (L compressed entries).
Prepare indexer_topk_shape(int64_t batch, int64_t L) {
  return [batch, L] {
    auto cache = std::make_shared<IndexerCache>(batch, L, 11);
    auto queries = std::make_shared<Queries>(batch, 12);
    auto qsl = std::make_shared<std::vector<int32_t>>();
    for (int64_t b = 0; b <= batch; ++b) qsl->push_back(static_cast<int32_t>(b));
    auto lens = std::make_shared<std::vector<int32_t>>(batch, static_cast<int32_t>(4 * L));
    auto out = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(batch * 512));
    Prepared p;
    p.run = [=](const Options& o) {
      indexer_topk(TensorView(queries->q.data(), DType::F8_E4M3, {batch, kH, 128}),
                   TensorView(queries->w.data(), DType::F32, {batch, kH}),
                   TensorView(qsl->data(), DType::I32, {batch + 1}),
                   TensorView(lens->data(), DType::I32, {batch}), cache->table(), cache->view(), kP,
                   TopkMode::canonical, MutableTensorView(out->data(), DType::I32, {batch, 512}),
                   o);
    };
    p.bytes = batch * (L * kEntry + kH * 128 + kH * 4 + cache->pages_per_row * 4 + 12 + 512 * 4);
    p.items = batch * L;
    p.flops = p.items * kH * 128 * 2;
    return p;
  };
}

Prepare quant_shape(int64_t T) {
  return [T] {
    constexpr int64_t kRows = 4096;
    auto q = std::make_shared<Buffer<float>>(static_cast<size_t>(T * kH * 128));
    auto w = std::make_shared<Buffer<float>>(static_cast<size_t>(T * kH));
    auto table = std::make_shared<Buffer<float>>(static_cast<size_t>(kRows * 64));
    fill_normal(q->data(), q->size(), 1.0f, 13);
    fill_normal(w->data(), w->size(), 1.0f, 14);
    for (int64_t r = 0; r < kRows; ++r)
      for (int i = 0; i < 32; ++i) {
        const double angle = static_cast<double>(r) * std::pow(160000.0, -i / 32.0);
        (*table)[static_cast<size_t>(r * 64 + i)] = static_cast<float>(std::cos(angle));
        (*table)[static_cast<size_t>(r * 64 + 32 + i)] = static_cast<float>(std::sin(angle));
      }
    auto pos = std::make_shared<std::vector<int64_t>>();
    for (int64_t t = 0; t < T; ++t) pos->push_back((t * 977) % kRows);
    auto codes = std::make_shared<Buffer<uint8_t>>(static_cast<size_t>(T * kH * 128));
    auto w_out = std::make_shared<Buffer<float>>(static_cast<size_t>(T * kH));
    Prepared p;
    p.run = [=](const Options& o) {
      fused_indexer_q_rope_quant(TensorView(q->data(), DType::F32, {T, kH, 128}),
                                 TensorView(w->data(), DType::F32, {T, kH}),
                                 TensorView(pos->data(), DType::I64, {T}),
                                 TensorView(table->data(), DType::F32, {kRows, 64}),
                                 MutableTensorView(codes->data(), DType::F8_E4M3, {T, kH, 128}),
                                 MutableTensorView(w_out->data(), DType::F32, {T, kH}), o);
    };
    p.bytes = T * (kH * 128 * 4 + kH * 4 + 8 + 64 * 4 + kH * 128 + kH * 4);
    p.items = T * kH;
    return p;
  };
}

}  // namespace

void indexer_cases(Cases& out) {
  // Every indexer op mostly reads (the logits and indexer_topk are compute-bound: they also
  // report FLOP/s); only the Q quantisation has finiteness checks.
  const auto add = [&out](const std::string& op, const std::string& shape, const Prepare& p) {
    out.push_back({op, shape, p, Traffic::read, op == "fused_indexer_q_rope_quant"});
  };
  for (const auto& [name, L] : {std::pair{"row8K", 8192}, {"row32K", 32768}, {"row128K", 131072}})
    add("fp8_paged_mqa_logits", name, logits_shape(1, L));
  add("fp8_paged_mqa_logits", "decode8x32K", logits_shape(8, 32768));
  for (const auto& [name, L] : {std::pair{"32K", 32768}, {"128K", 131072}, {"1M", 1048576}}) {
    add("topk_transform_512", std::string("random") + name,
        topk_shape(L, false, TopkMode::canonical));
    add("topk_transform_512", std::string("ascending") + name,
        topk_shape(L, true, TopkMode::canonical));
    add("topk_transform_512", std::string("vllm_random") + name,
        topk_shape(L, false, TopkMode::vllm));
    add("topk_transform_512", std::string("vllm_ascending") + name,
        topk_shape(L, true, TopkMode::vllm));
  }
  add("indexer_topk", "decode8x32K", indexer_topk_shape(8, 32768));
  add("fused_indexer_q_rope_quant", "tokens64", quant_shape(64));
}

}  // namespace dsv4cpu::bench
