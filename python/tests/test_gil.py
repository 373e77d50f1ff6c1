"""The GIL is released while an op computes: a Python thread makes progress during a long call."""
import threading
import time

import torch

import dsv4cpu


def long_logits_call():
    """fp8_paged_mqa_logits on the reference variant, one thread: 64 heads x 128 dims x 16K keys
    (about 0.1 s or more)."""
    keys, block = 16384, 64
    pages = keys // block
    q = torch.full((1, 64, 128), 0x38, dtype=torch.uint8)  # 1.0
    cache = torch.zeros(pages, block * 132, dtype=torch.uint8)
    cache[:, block * 128:].view(torch.float32).fill_(1.0)  # key scales
    cache[:, :block * 128] = 0x38
    weights = torch.ones(1, 64)
    table = torch.arange(pages, dtype=torch.int32).reshape(1, pages)
    seq_lens = torch.tensor([keys], dtype=torch.int32)
    return dsv4cpu.fp8_paged_mqa_logits(q, cache, weights, seq_lens, table, block, keys,
                                        variant="ref", num_threads=1)


def test_python_runs_during_an_op():
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        time.sleep(0.01)
        start, before = time.perf_counter(), count[0]
        time.sleep(0.1)  # the spinning thread's rate while this one waits without the GIL
        rate = (count[0] - before) / (time.perf_counter() - start)
        start, before = time.perf_counter(), count[0]
        logits = long_logits_call()
        seconds = time.perf_counter() - start
        during = count[0] - before
    finally:
        stop.set()
        thread.join()
    assert float(logits[0, 0]) == 64 * 128.0  # Σ_h w·relu(q·k) with every code 1.0
    assert seconds > 0.1, "the call is too short to show anything"
    # Holding the GIL, the op would leave the spinning thread at most one switch interval
    # (5 ms) of the call; released, it spins about as fast as while this thread slept.
    assert during > 0.25 * rate * seconds, \
        f"{during} increments in {seconds:.3f} s, {rate:.0f}/s while sleeping"
