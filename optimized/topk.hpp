// The optimized top-k selection of indexer.md §5 (optimized/topk_hwy.cpp), row by row; shared by
// topk_transform_512/1024 and indexer_topk. Exactly the reference's output for the same scores.
#pragma once
#include <cstdint>
#include <vector>

#include "dsv4cpu/indexer.hpp"

namespace dsv4cpu::detail::opt {

// Per-thread working memory of the selection, reused across rows.
struct TopkScratch {
  std::vector<float> heap_scores;
  std::vector<uint64_t> heap_keys;
  std::vector<int32_t> survivor_index;
  std::vector<uint32_t> sample, keys, selection;
  std::vector<uint64_t> ranked;
};

// The K selected indices of scores[0 .. L) (L > K) in `mode`'s order (§5.3, or §5.4 with a heap
// of K) into out[0 .. K).
void topk_row(const float* scores, int64_t L, int64_t K, TopkMode mode, int32_t* out,
              TopkScratch& scratch);

}  // namespace dsv4cpu::detail::opt
