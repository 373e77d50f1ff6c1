// A consumer of the installed library: one C4A compressor step of one request (4 tokens, the last
// one emitting; compressor.md §9.1 and §9.3) through the public API alone, every cache sized with
// the helpers of dsv4cpu/cache_sizes.hpp, and a bad call caught as dsv4cpu::Error.
#include <dsv4cpu/dsv4cpu.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using dsv4cpu::DType;
using dsv4cpu::MutableTensorView;
using dsv4cpu::TensorView;

template <class T>
std::vector<T> buffer(int64_t n, T fill = T()) {
  return std::vector<T>(static_cast<size_t>(n), fill);
}

// The compressor of head dim `hd` for ratio 4 over the step's tokens: writes their state rows
// (kv of token t = {1, 2, 3, 6}[t] in every channel, score + ape = 0), then the entry of the
// emitting token into `kv_cache` (one page of P entries).
void compress_step(int64_t hd, const TensorView& positions, const TensorView& token_to_req,
                   const TensorView& state_slots, const TensorView& state_block_table,
                   const TensorView& kv_slots, const TensorView& cos_sin,
                   const MutableTensorView& kv_cache, int64_t P) {
  constexpr int64_t r = 4, T = 4;
  const int64_t SW = dsv4cpu::compressor_state_width(r, hd);
  const int64_t sbs = dsv4cpu::compressor_state_block_size(r);
  const int64_t W = dsv4cpu::compressor_window(r);
  const int64_t pages = 1;
  std::vector<float> state =
      buffer<float>(pages * dsv4cpu::compressor_state_page_floats(sbs, r, hd));
  std::vector<float> kv = buffer<float>(T * SW), score = buffer<float>(T * SW);
  std::vector<float> ape = buffer<float>(r * SW), weight = buffer<float>(hd, 1.0f);
  const float values[T] = {1, 2, 3, 6};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < SW; ++i) kv[static_cast<size_t>(t * SW + i)] = values[t];
  const MutableTensorView state_v(state.data(), DType::F32,
                                  {pages, sbs, dsv4cpu::compressor_state_row_floats(r, hd)});
  dsv4cpu::save_partial_states(TensorView(kv.data(), DType::F32, {T, SW}),
                               TensorView(score.data(), DType::F32, {T, SW}),
                               TensorView(ape.data(), DType::F32, {r, SW}), positions, state_v,
                               state_slots);
  std::vector<int64_t> gather = buffer<int64_t>(T * W);
  dsv4cpu::compressor_window_slots(positions, token_to_req, state_block_table, sbs, r,
                                   dsv4cpu::compressor_overlap(r),
                                   MutableTensorView(gather.data(), DType::I64, {T, W}));
  const TensorView gather_v(gather.data(), DType::I64, {T, W});
  const TensorView weight_v(weight.data(), DType::F32, {hd});
  if (hd == dsv4cpu::kMainHeadDim)
    dsv4cpu::compress_norm_rope_store(state_v, gather_v, positions, kv_slots, weight_v, cos_sin,
                                      kv_cache, 1e-6, P, r);
  else
    dsv4cpu::compress_norm_rope_store_indexer(state_v, gather_v, positions, kv_slots, weight_v,
                                              cos_sin, kv_cache, 1e-6, P, r);
}

int run() {
  // The step's metadata: one request of 4 new tokens, every group's block table [0].
  const std::vector<int32_t> qsl = {0, 4}, seq_lens = {4}, block_table = {0};
  const TensorView qsl_v(qsl.data(), DType::I32, {2}), seq_v(seq_lens.data(), DType::I32, {1});
  const TensorView table_v(block_table.data(), DType::I32, {1, 1});
  std::vector<int64_t> positions(4), state_slots(4), kv_slots(4);
  std::vector<int32_t> token_to_req(4);
  dsv4cpu::token_positions(qsl_v, seq_v, MutableTensorView(positions.data(), DType::I64, {4}),
                           MutableTensorView(token_to_req.data(), DType::I32, {4}));
  const TensorView pos_v(positions.data(), DType::I64, {4});
  const TensorView req_v(token_to_req.data(), DType::I32, {4});
  dsv4cpu::slot_mapping(pos_v, req_v, table_v, dsv4cpu::compressor_state_block_size(4),
                        MutableTensorView(state_slots.data(), DType::I64, {4}));
  const int64_t P = dsv4cpu::compressed_block_size(4);
  dsv4cpu::compressed_slot_mapping(qsl_v, seq_v, table_v, 4, P, TensorView(),
                                   MutableTensorView(kv_slots.data(), DType::I64, {4}));
  std::vector<float> cos_sin = buffer<float>(4 * dsv4cpu::kCosSinColumns);
  dsv4cpu::make_cos_sin_cache(4, 160000, std::nullopt,
                              MutableTensorView(cos_sin.data(), DType::F32, {4, 64}));
  const TensorView cos_sin_v(cos_sin.data(), DType::F32, {4, 64});
  const TensorView state_slots_v(state_slots.data(), DType::I64, {4});
  const TensorView kv_slots_v(kv_slots.data(), DType::I64, {4});

  // The main compressed cache (fp8_ds_mla) and the indexer K cache: one page of P entries each.
  std::vector<uint8_t> main_cache = buffer<uint8_t>(dsv4cpu::fp8_ds_mla_page_bytes(P));
  std::vector<uint8_t> indexer_cache = buffer<uint8_t>(dsv4cpu::indexer_k_page_bytes(P));
  compress_step(dsv4cpu::kMainHeadDim, pos_v, req_v, state_slots_v, table_v, kv_slots_v, cos_sin_v,
                MutableTensorView(main_cache.data(), DType::U8,
                                  {1, dsv4cpu::fp8_ds_mla_page_bytes(P)}),
                P);
  compress_step(dsv4cpu::kIndexerHeadDim, pos_v, req_v, state_slots_v, table_v, kv_slots_v,
                cos_sin_v,
                MutableTensorView(indexer_cache.data(), DType::U8,
                                  {1, dsv4cpu::indexer_k_page_bytes(P)}),
                P);
  // Entry 0: NoPE code 0x78 and UE8M0 byte 0x77 (§9.1); indexer code 0x78, scale 2^-8 (§9.3).
  uint32_t indexer_scale = 0;
  std::memcpy(&indexer_scale, indexer_cache.data() + P * 128, 4);
  std::printf("compressed entry 0: code 0x%02x scale 0x%02x; indexer entry 0: code 0x%02x scale "
              "0x%08x\n",
              main_cache[0], main_cache[static_cast<size_t>(P * 576)], indexer_cache[0],
              indexer_scale);
  const bool bytes_ok = main_cache[0] == 0x78 && main_cache[static_cast<size_t>(P * 576)] == 0x77 &&
                        indexer_cache[0] == 0x78 && indexer_scale == 0x3B800000u;

  // Bad input: every error is a dsv4cpu::Error, thrown before anything is written.
  bool caught = false;
  try {
    dsv4cpu::slot_mapping(pos_v, req_v, table_v, 0,
                          MutableTensorView(state_slots.data(), DType::I64, {4}));
  } catch (const dsv4cpu::Error& e) {
    std::printf("caught %s on %s: %s\n", e.kind(), e.argument().c_str(), e.what());
    caught = true;
  }
  return bytes_ok && caught ? 0 : 1;
}

}  // namespace

int main() {
  std::printf("dsv4cpu %s (headers %s)\n", dsv4cpu::version(), DSV4CPU_VERSION_STRING);
  if (std::strcmp(dsv4cpu::version(), DSV4CPU_VERSION_STRING) != 0) return 1;
  try {
    if (run() != 0) return 1;
  } catch (const dsv4cpu::Error& e) {
    std::printf("unexpected %s: %s\n", e.kind(), e.what());
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
