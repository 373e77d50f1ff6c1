#include "testing/cache_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace dsv4cpu::testing {

Verdict compare_compressed_cache(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                                 EntryLayout layout, int64_t P, const std::vector<int64_t>& slots,
                                 const Tolerance& tol) {
  if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
  if (want.dtype != DType::U8 || want.shape.size() != 2)
    return {false, "expected." + name + " is not U8 [pages, page_bytes]"};
  const bool mla = layout == EntryLayout::fp8_ds_mla;
  const int64_t data_bytes = mla ? 576 : 128, scale_bytes = mla ? 8 : 4;
  const int64_t pages = want.shape[0], stride = want.shape[1];
  if (P < 1 || P > stride / (data_bytes + scale_bytes))
    return {false, name + ": pages of " + std::to_string(stride) + " bytes cannot hold " +
                       std::to_string(P) + " entries"};
  const int64_t total = pages * stride;
  std::vector<uint8_t> in_entry(static_cast<size_t>(total), 0);
  const std::set<int64_t> written(slots.begin(), slots.end());
  for (int64_t slot : written) {
    if (slot < 0 || slot >= pages * P)
      return {false, name + ": slot " + std::to_string(slot) + " beyond the cache"};
    const int64_t base = (slot / P) * stride, j = slot % P;
    std::fill_n(in_entry.begin() + base + j * data_bytes, data_bytes, 1);
    std::fill_n(in_entry.begin() + base + P * data_bytes + j * scale_bytes, scale_bytes, 1);
  }
  // Bytes the op must not write, and the bytes of the written entries that are exact.
  int64_t first = -1, count = 0;
  bool identical = true;
  for (int64_t i = 0; i < total; ++i) {
    if (got.data[i] == want.data[i]) continue;
    identical = false;
    if (in_entry[static_cast<size_t>(i)]) continue;
    if (first < 0) first = i;
    ++count;
  }
  if (count > 0)
    return {false, name + "[" + std::to_string(first / stride) + ", " +
                       std::to_string(first % stride) + "] outside the written entries: got " +
                       hex(got.data[first], 2) + ", expected " + hex(want.data[first], 2) + " (" +
                       std::to_string(count) + " such bytes differ)"};
  if (identical) return {true, "exact"};
  int steps = 0, ulps = 0, rescaled = 0;
  double coarse = 0;
  for (int64_t slot : written) {
    const int64_t base = (slot / P) * stride, j = slot % P;
    const std::string where = name + " slot " + std::to_string(slot) + " (page " +
                              std::to_string(slot / P) + ", entry " + std::to_string(j) + ")";
    const uint8_t* ga = got.data + base;
    const uint8_t* wa = want.data + base;
    std::string why;
    if (mla) {
      const int64_t sc = P * 576 + 8 * j;
      for (int q = 0; q < 7; ++q) {
        const uint8_t ba = ga[sc + q], bb = wa[sc + q];
        const double sa = ba == 255 ? std::nan("") : pow2(ba - 127);
        const double sb = bb == 255 ? std::nan("") : pow2(bb - 127);
        if (ba != bb) ++rescaled;
        if (!quant_block_ok(ga + j * 576 + 64 * q, wa + j * 576 + 64 * q, 64, sa, sb, tol, &steps,
                            &coarse, &why))
          return {false, where + " NoPE tile " + std::to_string(q) + ": " + why};
      }
      for (int k = 0; k < 64; ++k) {
        const int64_t off = j * 576 + 448 + 2 * k;
        const uint16_t ha = load_u16(ga + off), hb = load_u16(wa + off);
        const int d = bf16_ulps(ha, hb);
        if (d > tol.bf16_ulp)
          return {false, where + " RoPE value " + std::to_string(k) + ": got " + hex(ha, 4) +
                             ", expected " + hex(hb, 4) +
                             (d == kNaNMismatch ? std::string(" (NaN against a number)")
                                                : " (" + std::to_string(d) + " bf16 ulps)")};
        ulps = std::max(ulps, d);
      }
      if (ga[sc + 7] != wa[sc + 7])
        return {false, where + " pad byte: got " + hex(ga[sc + 7], 2) + ", expected " +
                           hex(wa[sc + 7], 2)};
    } else {
      const int64_t sc = P * 128 + 4 * j;
      const double sa = load_f32(ga + sc), sb = load_f32(wa + sc);
      if (std::memcmp(ga + sc, wa + sc, 4) != 0) ++rescaled;
      if (!quant_block_ok(ga + j * 128, wa + j * 128, 128, sa, sb, tol, &steps, &coarse, &why))
        return {false, where + ": " + why};
    }
  }
  std::string detail = "worst fp8 step " + std::to_string(steps);
  if (mla) detail += ", bf16 ulp " + std::to_string(ulps);
  if (rescaled > 0)
    detail += ", " + std::to_string(rescaled) + " block(s) one scale step apart (max " +
              fmt("%.2f", coarse) + " coarse step)";
  return {true, detail};
}

}  // namespace dsv4cpu::testing
