// The paged compressed caches written by the compress ops (compressor.md §6.3, §7) under the
// contracts of numerics.md §11 (testing/contracts.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "testing/contracts.hpp"

namespace dsv4cpu::testing {

enum class EntryLayout : uint8_t { fp8_ds_mla, indexer_k };
// `kv_cache` U8 [pages, page_bytes] (got and want), `P` entries per page, `slots` the entries the
// op writes. Bytes outside those entries must be equal; entries follow §11.5 (NoPE tiles or the
// indexer block), RoPE bf16 within tol.bf16_ulp, pad byte exact.
Verdict compare_compressed_cache(const std::string& name, const ArrayRef& got, const ArrayRef& want,
                                 EntryLayout layout, int64_t P, const std::vector<int64_t>& slots,
                                 const Tolerance& tol);

}  // namespace dsv4cpu::testing
