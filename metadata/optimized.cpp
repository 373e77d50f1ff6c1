// Optimized metadata builders (metadata.md). Same integers as the reference: requests are walked
// once instead of looked up per token, slots advance page by page instead of dividing per
// element, rows are filled in runs, and large steps split their tokens over OpenMP threads (each
// output element is written by exactly one thread, so results do not depend on the count).
#include <algorithm>
#include <vector>

#include "args/compressor.hpp"
#include "args/metadata.hpp"
#include "core/check_index.hpp"
#include "core/parallel.hpp"
#include "metadata/common.hpp"
#include "core/fill.hpp"

namespace dsv4cpu::detail::opt {
namespace {

// f(lo, hi) over a split of [0, n) into one non-empty contiguous range per thread; `work` output
// elements (8 bytes each) decide the threads (core/parallel.hpp).
template <class F>
void parallel_ranges(int64_t n, int64_t work, const RunContext& ctx, F&& f) {
  const int64_t parts = std::min<int64_t>(threads_for(ctx.num_threads, work * 8), n);
  const int64_t q = parts > 0 ? n / parts : 0, rem = parts > 0 ? n % parts : 0;
  parallel_for(parts, static_cast<int>(parts), [&](int64_t i) {
    const int64_t lo = i * q + std::min(i, rem);
    f(lo, lo + q + (i < rem ? 1 : 0));
  });
}

// A contiguous 1-D index array as int64: the data itself when I64, else a widened copy.
class Int64Array {
 public:
  explicit Int64Array(const TensorView& v) {
    if (!v.present()) return;
    if (v.dtype() == DType::I64) {
      p_ = v.ptr<const int64_t>();
      return;
    }
    const int32_t* s = v.ptr<const int32_t>();
    buf_.assign(s, s + v.numel());
    p_ = buf_.data();
  }
  int64_t operator()(int64_t i) const { return p_[i]; }
  bool present() const { return p_ != nullptr; }

 private:
  std::vector<int64_t> buf_;
  const int64_t* p_ = nullptr;
};

// Slots bt[r][l / P] * P + l % P of the consecutive locals l = first, first + 1, ... into
// out[0, n), one block-table read per page.
void page_walk(const IndexReader& bt, int64_t r, int64_t P, int64_t first, int64_t n,
               int64_t* out) {
  int64_t col = first / P, off = first % P;
  for (int64_t o = 0; o < n;) {
    const int64_t run = std::min(P - off, n - o);
    iota64(out + o, run, bt(r, col) * P + off);
    o += run;
    ++col;
    off = 0;
  }
}

// §7.1 rows: every token reads a prefix of its request's slot row, so each request's longest
// prefix is built once and copied (tokens [0, n) of positions / token_to_req).
class C128aRows {
 public:
  C128aRows(const Int64Array& pos, const Int64Array& req, const TensorView& block_table,
            int64_t P, int64_t W, int64_t n, const RunContext& ctx)
      : pos_(pos),
        req_(req),
        W_(W),
        // An empty table [R, 0] holds no slot (every token has 0 entries), whatever R.
        R_(block_table.size(1) > 0 ? block_table.size(0) : 0),
        offset_(static_cast<size_t>(R_) + 1, 0) {
    const int64_t R = R_;
    std::vector<int64_t> longest(static_cast<size_t>(R), 0);
    for (int64_t t = 0; t < n; ++t) {
      if (entries(t) == 0) continue;
      int64_t& l = longest[static_cast<size_t>(req(t))];
      l = std::max(l, entries(t));
    }
    for (int64_t r = 0; r < R; ++r)
      offset_[static_cast<size_t>(r + 1)] =
          offset_[static_cast<size_t>(r)] + longest[static_cast<size_t>(r)];
    slots_.resize(static_cast<size_t>(offset_[static_cast<size_t>(R)]));
    const IndexReader bt(block_table);
    parallel_ranges(R, static_cast<int64_t>(slots_.size()), ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        page_walk(bt, r, P, 0, longest[static_cast<size_t>(r)],
                  slots_.data() + offset_[static_cast<size_t>(r)]);
    });
  }
  // n_t = min((pos_t + 1) / 128, W)
  int64_t entries(int64_t t) const { return std::min(completed_entries(pos_(t), 128), W_); }
  void write(int64_t t, int64_t* row, bool stream) const {
    const int64_t n = entries(t);  // n = 0 for every token when R_ = 0: offset_ is not indexed
    const int64_t* src = n > 0 ? slots_.data() + offset_[static_cast<size_t>(req_(t))] : nullptr;
    copy_then_minus_one(row, src, n, W_, stream);
  }

 private:
  const Int64Array& pos_;
  const Int64Array& req_;
  int64_t W_, R_;
  std::vector<int64_t> offset_;
  std::vector<int64_t> slots_;
};

// §5 for the tokens [lo, hi) (non-empty) of a validated step (out indexed by token).
void compressed_slots_range(const Int64Array& qsl, const Int64Array& seq, const IndexReader& bt,
                            const Int64Array& own, int64_t R, int64_t ratio, int64_t P,
                            int64_t lo, int64_t hi, int64_t* out) {
  std::fill(out + lo, out + hi, int64_t{-1});
  for (int64_t r = request_of_token(qsl, R, lo); r < R && qsl(r) < hi; ++r) {
    const int64_t t0 = std::max(qsl(r), lo), t1 = std::min(qsl(r + 1), hi);
    if (t0 >= t1) continue;
    const int64_t shift = seq(r) - qsl(r + 1);  // pos_t = shift + t (§2)
    const int64_t p0 = shift + t0;
    const int64_t first = p0 + (ratio - 1 - p0 % ratio);  // first emitting position >= p0
    int64_t c = first / ratio, col = -1, base = 0;
    for (int64_t t = first - shift; t < t1; t += ratio, ++c) {
      if (own.present() && own(t) == -1) continue;
      if (c / P != col) {  // read a page only when an emitting token uses it
        col = c / P;
        base = bt(r, col) * P;
      }
      out[t] = base + c % P;
    }
  }
}

// §9.3 build_prefill_chunk_metadata(rs, re, qa, qb), request by request.
IndexerPrefillChunk build_prefill_chunk_metadata(const Int64Array& qsl, const Int64Array& seq,
                                                 int64_t R, int64_t rs, int64_t re, int64_t qa,
                                                 int64_t qb, const RunContext& ctx) {
  IndexerPrefillChunk c;
  c.req_start = rs;
  c.req_end = re;
  c.num_reqs = re - rs;
  c.cu_seq_lens.assign(static_cast<size_t>(c.num_reqs + 1), 0);
  for (int64_t k = 0; k < c.num_reqs; ++k)
    c.cu_seq_lens[static_cast<size_t>(k + 1)] =
        c.cu_seq_lens[static_cast<size_t>(k)] + static_cast<int32_t>(seq(rs + k) / 4);
  c.total_seq_lens = c.cu_seq_lens[static_cast<size_t>(c.num_reqs)];
  c.token_start = qsl(rs) + qa;
  c.token_end = qsl(rs) + qb;
  c.skip_kv_gather = qa > 0;
  const int64_t n = qb - qa, u0 = c.token_start;
  c.cu_seqlen_ks.resize(static_cast<size_t>(n));
  c.cu_seqlen_ke.resize(static_cast<size_t>(n));
  c.token_req.resize(static_cast<size_t>(n));
  parallel_ranges(n, n, ctx, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo, rho = request_of_token(qsl, R, u0 + lo); i < hi; ++rho) {
      const int64_t end = std::min(hi, qsl(rho + 1) - u0);
      const int64_t k = rho - rs, shift = seq(rho) - qsl(rho + 1) + u0;  // pos = shift + i
      const int32_t ks = c.cu_seq_lens[static_cast<size_t>(k)];
      for (; i < end; ++i) {
        c.cu_seqlen_ks[static_cast<size_t>(i)] = ks;
        c.cu_seqlen_ke[static_cast<size_t>(i)] = ks + static_cast<int32_t>((shift + i + 1) / 4);
        c.token_req[static_cast<size_t>(i)] = static_cast<int32_t>(k);
      }
    }
  });
  c.token_to_seq.resize(static_cast<size_t>(c.total_seq_lens));
  for (int64_t k = 0; k < c.num_reqs; ++k)
    std::fill(c.token_to_seq.begin() + c.cu_seq_lens[static_cast<size_t>(k)],
              c.token_to_seq.begin() + c.cu_seq_lens[static_cast<size_t>(k + 1)],
              static_cast<int32_t>(k));
  return c;
}

}  // namespace

// §2
void token_positions(const TokenPositionsArgs& a, const RunContext& ctx) {
  const Int64Array qsl(a.query_start_loc), seq(a.seq_lens);
  int64_t* positions = a.positions.ptr<int64_t>();
  int32_t* token_to_req = a.token_to_req.ptr<int32_t>();
  parallel_ranges(a.T, a.T, ctx, [&](int64_t lo, int64_t hi) {
    for (int64_t r = request_of_token(qsl, a.R, lo), t = lo; t < hi; ++r) {
      const int64_t end = std::min(qsl(r + 1), hi), shift = seq(r) - qsl(r + 1);
      for (; t < end; ++t) {
        positions[t] = shift + t;
        token_to_req[t] = static_cast<int32_t>(r);
      }
    }
  });
}

// §3 for tokens [lo, hi): bt[r][p / P] * P + p % P, `column` and `offset` dividing by P (all
// by value, so the loop keeps them in registers while it stores).
template <class Pos, class Req, class Bt, class Column, class Offset>
void slots_range(const Pos* pos, const Req* req, const Bt* bt, int64_t row_stride, int64_t P,
                 Column column, Offset offset, int64_t lo, int64_t hi, int64_t* out) {
  for (int64_t t = lo; t < hi; ++t) {
    const int64_t p = pos[t];
    out[t] = int64_t{bt[req[t] * row_stride + column(p)]} * P + offset(p);
  }
}

// §3 per token on the typed inputs, without a branch (a shift and a mask for power-of-two P).
void slot_mapping(const SlotMappingArgs& a, const RunContext& ctx) {
  const int64_t P = a.block_size, row_stride = a.block_table.stride(0);
  int64_t* out = a.slot_mapping.ptr<int64_t>();
  with_data(a.positions, a.token_to_req, [&](const auto* pos, const auto* req) {
    with_data(a.block_table, [&](const auto* bt) {
      const auto run = [&](auto column, auto offset) {
        parallel_ranges(a.T, a.T, ctx, [&](int64_t lo, int64_t hi) {
          // Runs of consecutive positions of one request (prefills) page by page, other tokens
          // one by one.
          for (int64_t t = lo, e = lo; t < hi; t = e) {
            if (t + 1 < hi && pos[t + 1] == pos[t] + 1 && req[t + 1] == req[t]) {
              e = std::min(position_run_end(a.positions, a.token_to_req, t), hi);
              page_walk(IndexReader(a.block_table), req[t], P, pos[t], e - t, out + t);
            } else {
              e = t + 1;
              slots_range(pos, req, bt, row_stride, P, column, offset, t, e, out);
            }
          }
        });
      };
      if ((P & (P - 1)) == 0) {
        const int shift = __builtin_ctzll(static_cast<unsigned long long>(P));
        run([shift](int64_t p) { return p >> shift; }, [P](int64_t p) { return p & (P - 1); });
      } else {
        run([P](int64_t p) { return p / P; }, [P](int64_t p) { return p % P; });
      }
    });
  });
  std::fill(out + a.T, out + a.padded, int64_t{-1});
}

// §5
void compressed_slot_mapping(const CompressedSlotMappingArgs& a, const RunContext& ctx) {
  const Int64Array qsl(a.query_start_loc), seq(a.seq_lens), own(a.token_slot_mapping);
  const IndexReader bt(a.block_table);
  int64_t* out = a.slot_mapping.ptr<int64_t>();
  parallel_ranges(a.T, a.T, ctx, [&](int64_t lo, int64_t hi) {
    compressed_slots_range(qsl, seq, bt, own, a.R, a.compress_ratio, a.block_size, lo, hi, out);
  });
  std::fill(out + a.T, out + a.padded, int64_t{-1});
}

// §6: each row is at most ceil(W / P) + 1 page runs, then the -1 tail.
void swa_window_indices(const SwaWindowIndicesArgs& a, const RunContext& ctx) {
  const Int64Array pos(a.positions), req(a.token_to_req);
  const IndexReader bt(a.block_table);
  const int64_t W = a.window;
  int64_t* indices = a.indices.ptr<int64_t>();
  int32_t* lens = a.lens.present() ? a.lens.ptr<int32_t>() : nullptr;
  parallel_ranges(a.T, a.T * W, ctx, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t p = pos(t), start = std::max<int64_t>(p - W + 1, 0), len = p - start + 1;
      int64_t* row = indices + t * W;
      page_walk(bt, req(t), a.block_size, start, len, row);
      std::fill(row + len, row + W, int64_t{-1});
      if (lens) lens[t] = static_cast<int32_t>(len);
    }
  });
}

// §7.1 (either width)
void c128a_topk_indices(const C128aTopkIndicesArgs& a, const RunContext& ctx) {
  const Int64Array pos(a.positions), req(a.token_to_req);
  const C128aRows rows(pos, req, a.block_table, a.block_size, a.W, a.T, ctx);
  int64_t* indices = a.indices.ptr<int64_t>();
  const bool stream = a.T * a.W * 8 >= thresholds().stream_bytes;
  parallel_ranges(a.T, a.T * a.W, ctx, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) rows.write(t, indices + t * a.W, stream);
  });
}

// §7.2
void c128a_decode_metadata(const C128aDecodeMetadataArgs& a, const RunContext& ctx) {
  const Int64Array pos(a.positions), req(a.token_to_req), own(a.token_slot_mapping);
  const int64_t W = a.W, nd = a.num_decode_tokens;
  const C128aRows rows(pos, req, a.block_table, a.block_size, W, nd, ctx);
  int64_t* global = a.decode_global.ptr<int64_t>();
  int32_t* lens = a.decode_lens.ptr<int32_t>();
  int32_t* local = a.prefill_local.ptr<int32_t>();
  const bool stream = nd * W * 8 + (a.T - nd) * W * 4 >= thresholds().stream_bytes;
  parallel_ranges(a.T, a.T * W, ctx, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = rows.entries(t);
      if (t < nd) {
        rows.write(t, global + t * W, stream);
        lens[t] = static_cast<int32_t>(!own.present() || own(t) >= 0 ? n : 0);
      } else {
        iota_then_minus_one(local + (t - nd) * W, n, W, stream);
      }
    }
  });
}

// §8: the compressor's optimized map_local_to_global_slots, which counts each row's locals >= 0
// (its slots >= 0) into lens as it maps them; rows whose own slot is -1 get 0.
void c4a_global_topk_indices(const C4aGlobalTopkIndicesArgs& a, const RunContext& ctx) {
  const IndexReader own(a.token_slot_mapping);
  int32_t* lens = a.lens.ptr<int32_t>();
  const MapLocalToGlobalSlotsArgs map{
      a.topk_indices, a.token_to_req, a.block_table, a.block_size, a.indices, a.T, a.K};
  const bool stream = a.T * a.K * 8 >= thresholds().stream_bytes;
  parallel_ranges(a.T, a.T * a.K, ctx, [&](int64_t lo, int64_t hi) {
    map_slot_rows(map, lo, hi, stream, lens);
    if (a.token_slot_mapping.present())
      for (int64_t t = lo; t < hi; ++t)
        if (own(t) == -1) lens[t] = 0;
  });
}

// §9.1-9.4
void indexer_metadata(const IndexerMetadataArgs& a, const RunContext& ctx) {
  const Int64Array qsl(a.query_start_loc), seq(a.seq_lens);
  IndexerMetadata& m = *a.result;
  CompressedSlotMappingArgs slots{a.query_start_loc, a.seq_lens, a.block_table, 4,
                                  a.block_size,      TensorView(), a.slot_mapping};
  slots.R = a.R;
  slots.T = a.T;
  slots.padded = a.padded;
  compressed_slot_mapping(slots, ctx);
  m.max_seq_len = 0;
  m.compressed_seq_lens.resize(static_cast<size_t>(a.R));
  for (int64_t r = 0; r < a.R; ++r) {
    m.max_seq_len = std::max(m.max_seq_len, seq(r));
    m.compressed_seq_lens[static_cast<size_t>(r)] = static_cast<int32_t>(seq(r) / 4);
  }
  m.split = compute_split(IndexReader(a.query_start_loc), a.R, a.next_n);
  const int64_t nd = m.split.num_decodes, next_n = a.next_n;
  if (nd > 0) {
    IndexerDecodeMetadata d;
    d.next_n = next_n;
    d.decode_lens.resize(static_cast<size_t>(nd));
    d.decode_seq_lens.resize(static_cast<size_t>(nd * next_n));
    for (int64_t r = 0; r < nd; ++r) {
      d.decode_lens[static_cast<size_t>(r)] = static_cast<int32_t>(qsl(r + 1) - qsl(r));
      for (int64_t j = 0; j < next_n; ++j)
        d.decode_seq_lens[static_cast<size_t>(r * next_n + j)] =
            static_cast<int32_t>(std::max<int64_t>(0, seq(r) - next_n + 1 + j) / 4);
    }
    const auto [lo, hi] = std::minmax_element(d.decode_lens.begin(), d.decode_lens.end());
    d.requires_padding = *lo != *hi;
    m.decode = std::move(d);
  }
  if (m.split.num_prefills > 0)  // §9.4: one chunk, kept even when its total is 0
    m.prefill = build_prefill_chunk_metadata(qsl, seq, a.R, nd, a.R, 0,
                                             m.split.num_prefill_tokens, ctx);
}

}  // namespace dsv4cpu::detail::opt
