// The fp8_ds_mla cache entry (compressor.md §6.3) and its dequantisation in attention
// (attention.md §2.4): the rules every attention variant shares, scalar. A vector decoder builds
// its lookup tables from nope_code_value() and tile_scale().
#pragma once
#include <cstdint>
#include <cstring>

#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::detail {

inline constexpr int kMlaDim = 512;       // K = V latent row
inline constexpr int kMlaNope = 448;      // NoPE dims: 7 tiles of 64 fp8 codes
inline constexpr int kMlaTiles = 7;
inline constexpr int kMlaTile = 64;
inline constexpr int kMlaRope = 64;       // RoPE dims: bf16
inline constexpr int64_t kMlaDataBytes = 576;   // per entry in the page's data region
inline constexpr int64_t kMlaScaleBytes = 8;    // 7 UE8M0 bytes + pad byte, in the scale region
inline constexpr int64_t kMlaEntryBytes = kMlaDataBytes + kMlaScaleBytes;

// Entry `slot` of a paged fp8_ds_mla cache U8 [pages, page_bytes] with P entries per page:
// page slot / P at byte (slot / P)·stride(0); entry j = slot % P has its data (448 codes, then
// 64 little-endian bf16 RoPE values) at j·576 and its scale bytes at P·576 + 8j.
template <class Byte>  // const uint8_t: a cache read; uint8_t: a cache written in place
class MlaEntries {
 public:
  template <class View>  // TensorView for Byte = const uint8_t, MutableTensorView for uint8_t
  MlaEntries(const View& cache, int64_t block_size)
      : base_(cache.template ptr<uint8_t>()),
        page_stride_(cache.rank() == 2 ? cache.stride(0) : 0),
        P_(block_size) {}
  Byte* data(int64_t slot) const noexcept {
    return base_ + (slot / P_) * page_stride_ + (slot % P_) * kMlaDataBytes;
  }
  Byte* scales(int64_t slot) const noexcept {
    return base_ + (slot / P_) * page_stride_ + P_ * kMlaDataBytes + (slot % P_) * kMlaScaleBytes;
  }

 private:
  Byte* base_;
  int64_t page_stride_, P_;
};
using MlaCache = MlaEntries<const uint8_t>;
using MlaCacheOut = MlaEntries<uint8_t>;

// attention.md §2.4: the factor of a tile with UE8M0 byte b: 2^(b − 127), byte 255 NaN; byte 0
// is 2^−127 (exact) or 0 (vllm: the tile reads +0, see decode_nope).
inline float tile_scale(uint8_t b, NopeDecode mode) noexcept {
  if (mode == NopeDecode::vllm && b == 0) return 0.0f;
  return ue8m0_decode(b);
}

// attention.md §2.4: the value a NoPE code stands for before scaling: the exact e4m3fn value, or
// in vllm mode ±2^−7·(1 + m/8) for codes with E = 0 (±0 and the subnormals).
inline float nope_code_value(uint8_t c, NopeDecode mode) noexcept {
  if (mode == NopeDecode::vllm && (c & 0x78u) == 0) {
    const float v = 0x1p-7f * (1.0f + static_cast<float>(c & 7u) / 8.0f);  // exact
    return (c & 0x80u) ? -v : v;
  }
  return fp8_e4m3_decode(c);
}

// attention.md §2.4: one NoPE value. exact: RN(value·S), which is exact or ±inf; vllm: a tile with
// scale byte 0 reads +0 (NaN codes included), otherwise the product rounded to bf16.
inline float decode_nope(uint8_t c, uint8_t b, NopeDecode mode) noexcept {
  if (mode == NopeDecode::exact) return nope_code_value(c, mode) * tile_scale(b, mode);
  if (b == 0) return 0.0f;
  return round_bf16(nope_code_value(c, mode) * tile_scale(b, mode));
}

// attention.md §2.4: the 512 fp32 values (K = V) of one entry: 448 decoded NoPE values, then the
// 64 RoPE values widened verbatim.
inline void decode_row(const uint8_t* data, const uint8_t* scales, NopeDecode mode,
                       float* out) noexcept {
  for (int d = 0; d < kMlaNope; ++d) out[d] = decode_nope(data[d], scales[d / kMlaTile], mode);
  for (int k = 0; k < kMlaRope; ++k) {
    uint16_t h;
    std::memcpy(&h, data + kMlaNope + 2 * k, 2);  // little-endian host
    out[kMlaNope + k] = bf16_to_f32(h);
  }
}

}  // namespace dsv4cpu::detail
