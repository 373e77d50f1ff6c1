// Sparse MLA attention and the SWA insert (attention.md). Every op follows the contract of
// options.hpp (errors before any write, aliasing, threads, zero-size calls); each comment below
// adds the op's Shapes (with the cache_sizes.hpp helper that gives each size), Writes, Allocates,
// Throws and Threads. All allocations are temporary (released before the call returns).
#pragma once
#include <cstdint>
#include <string_view>

#include "dsv4cpu/cache_sizes.hpp"
#include "dsv4cpu/errors.hpp"
#include "dsv4cpu/export.hpp"
#include "dsv4cpu/numerics.hpp"
#include "dsv4cpu/options.hpp"
#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu {

// attention.md §2.1 default scale: RN(512^-0.5) = 0x3D3504F3.
inline constexpr float kAttentionScale = 0x1.6a09e6p-5f;

// attention.md §2.4: how NoPE codes are dequantised.
enum class NopeDecode : uint8_t {
  exact,  // the stored value (default)
  vllm,   // vLLM's widening: E = 0 codes read (1 + m/8)·S/128, scale byte 0 reads +0, bf16 values
};
// "exact" / "vllm" -> NopeDecode; anything else throws ValueError naming `op` and "nope_decode".
DSV4CPU_API NopeDecode parse_nope_decode(const char* op, std::string_view text);

// attention.md §3.4: fp8 codes of |y| < 2^-6.
enum class Fp8Subnormals : uint8_t {
  exact,  // e4m3_sat with subnormals (default)
  flush,  // the signed zero, as vLLM's SWA insert
};
// "exact" / "flush" -> Fp8Subnormals; anything else throws ValueError.
DSV4CPU_API Fp8Subnormals parse_fp8_subnormals(const char* op, std::string_view text);

// sparse_mla_attention (attention.md §2): per query token t and head h, online-softmax attention
// over the window columns then the compressed columns (slot -1 skipped), with the optional sink.
// Shapes:    q BF16 [T, H, 512], strides [>= H·512, 512, 1] (the first H heads of a head-padded
//            q_out may be passed); window_cache, compressed_cache U8 [pages, page_bytes]
//            fp8_ds_mla, unit inner stride, page stride >= page_bytes >= P·584
//            (fp8_ds_mla_page_bytes(P); compressed_cache may have 0 pages); window_block_size,
//            compressed_block_size P >= 1 (kSwaBlockSize; compressed_block_size(r));
//            window_slots I32/I64 [T, Nw], compressed_slots I32/I64 [T, Nc], contiguous, each slot
//            -1 or below pages·P of its cache; attn_sink F32 [H] (finite or -inf) or absent;
//            scale finite, > 0 (kAttentionScale); out BF16 [T, H, 512] contiguous; lse F32
//            [T, H] contiguous, or absent (not requested).
// Writes:    every element of out; of lse when given (the log-sum-exp without the sink, +inf
//            for rows without a valid entry).
// Allocates: ref: per token the gathered rows of its valid columns (2 KiB per column) and their
//            scores; amx, avx512bf16, hwy: a per-thread scratch kept between calls (row pointers
//            of a token, a 128-column block of decoded rows and the scores of 32 heads).
// Throws:    ValueError (block sizes, scale, nope_decode); ShapeError (shapes; out or lse
//            overlapping an input or each other); IndexError (a slot outside [-1, pages·P));
//            NonFiniteError (q not finite, attn_sink NaN or +inf). NaN codes or scale byte 255 in
//            a gathered row give a NaN output row.
// Threads:   amx, avx512bf16, hwy: (token, group of 32 heads) items split across threads; with
//            fewer such items than threads, (token, tile of 16 heads) items.
DSV4CPU_API void sparse_mla_attention(
    const TensorView& q, const TensorView& window_cache, int64_t window_block_size,
    const TensorView& window_slots, const TensorView& compressed_cache,
    int64_t compressed_block_size, const TensorView& compressed_slots, const TensorView& attn_sink,
    float scale, NopeDecode nope_decode, const MutableTensorView& out,
    const MutableTensorView& lse = {}, const Options& options = {});

// fused_qnorm_rope_kv_insert (attention.md §3): q RMSNorm (weight-free) and RoPE (table row
// positions[t]) into q_out, and the SWA kv rows rotated, quantised and written into swa_cache at
// slot_mapping.
// Shapes:    q BF16 [T, Hq, 512]; kv BF16 [T_kv, 512], T_ins <= T_kv <= T (rows from T_ins on
//            are padding: never read, checked or written); positions I32/I64 [T];
//            slot_mapping I32/I64 [T_ins] (-1 = skip, valid slots distinct); all contiguous;
//            swa_cache U8 [pages, page_bytes] (in place), unit inner stride, page stride >=
//            page_bytes >= P·584 (fp8_ds_mla_page_bytes(P), P = cache_block_size >= 1,
//            kSwaBlockSize in the model); cos_sin_cache F32 [R, 64] contiguous; q_head_padded
//            >= Hq; eps finite and >= 0; q_out BF16 [T, q_head_padded, 512] contiguous.
// Writes:    every element of q_out (heads >= Hq are +0); per written slot the 576 data bytes
//            and 8 scale bytes of its entry; nothing else of swa_cache.
// Allocates: 584 bytes per inserted row; ref also a q_out scratch (1 KiB per token and padded
//            head).
// Throws:    ValueError (q_head_padded, eps, cache_block_size, scale_clamp, fp8_subnormals);
//            ShapeError (shapes; swa_cache or q_out overlapping an input); IndexError (position
//            outside [0, R), slot outside [-1, pages·P), a slot written twice); NonFiniteError
//            (q, a written kv row or a used cos/sin row not finite; a non-finite computed value).
// Threads:   hwy: tokens split across threads.
DSV4CPU_API void fused_qnorm_rope_kv_insert(
    const TensorView& q, const TensorView& kv, const TensorView& positions,
    const TensorView& slot_mapping, const MutableTensorView& swa_cache,
    const TensorView& cos_sin_cache, int64_t q_head_padded, double eps, int64_t cache_block_size,
    ScaleClamp scale_clamp, Fp8Subnormals fp8_subnormals, const MutableTensorView& q_out,
    const Options& options = {});

// inverse_gptj_rope_o_proj (attention.md §4): the attention output widened to fp32, the last
// rope_dim dims of every head rotated back by the token's position (numerics.md §8.5 with sin
// negated: out[n+2i] = fma(e, cos_i, RN(o'·sin_i)), out[n+2i+1] = fma(o', cos_i, RN(e·(-sin_i))),
// n = D - rope_dim), before the output projection.
// Shapes:    o BF16 or F16 [T, H, D] contiguous (sparse_mla_attention's out: D = kMainHeadDim);
//            positions I32/I64 [T]; cos_sin_cache F32 [R, rope_dim] contiguous (cos_i in column i,
//            sin_i in column rope_dim/2 + i; the model's table: rope_dim = kCosSinColumns);
//            rope_dim even, 2 <= rope_dim <= D; out F32 [T, H, D] contiguous.
// Writes:    every element of out.
// Allocates: ref: a copy of out (4·D bytes per token and head); hwy: nothing.
// Throws:    ValueError (rope_dim odd, below 2 or above D); ShapeError (shapes; out overlapping an
//            input); IndexError (a position outside [0, R)); NonFiniteError (o or a used cos/sin
//            row not finite; a non-finite rotated value).
// Threads:   hwy: (token, head) rows split across threads.
DSV4CPU_API void inverse_gptj_rope_o_proj(const TensorView& o, const TensorView& positions,
                                          const TensorView& cos_sin_cache, int64_t rope_dim,
                                          const MutableTensorView& out,
                                          const Options& options = {});

}  // namespace dsv4cpu
