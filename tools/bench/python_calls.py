"""What a call from Python costs beside the op's work, at decode sizes: each op timed through its
wrapper (``dsv4cpu.<op>``), its operator's overload ``.no_options`` and its default overload
(``torch.ops.dsv4cpu.<op>``, which torch parses the options of), on the same inputs in one
process, repetitions interleaved, medians (docs/python.md, "Ops and wrappers"). An op with the
overload ``.functional`` is also timed without its output: through its wrapper (which then calls
``.functional``) and through ``.functional``, both allocating the output on every call.

    python3 python_calls.py [--repetitions N] [--seconds S] [-o FILE]

Prints one line per op and way of calling: microseconds per call and the time over that of
``.no_options``; with ``-o``, the same as JSON. One thread (``torch.set_num_threads(1)``)."""
import argparse
import json
import statistics
import sys
import time

import torch

import dsv4cpu

SCHEMA = "dsv4cpu-python-calls/1"


def generator(seed):
    return torch.Generator().manual_seed(seed)


def save_partial_states_case():
    """The indexer head's decode 8 (bench_compressor.cpp): SW = 256, 8 tokens, state pages of 4
    rows."""
    n, sw = 8, 256
    kv_score = torch.randn(n, 2 * sw, generator=generator(1))
    positions = torch.tensor([1024 * (b + 1) - 1 for b in range(n)])
    return (kv_score[:, :sw], kv_score[:, sw:], torch.randn(4, sw, generator=generator(2)) * 0.1,
            positions, torch.zeros(n, 4, 2 * sw), torch.arange(n) * 4 + 3), {}


def inverse_rope_case():
    """One token of 64 heads (bench_attention.cpp's decode 1); the output given."""
    o = torch.randn(1, 64, 512, generator=generator(3)).to(torch.bfloat16)
    table = torch.randn(8192, 64, generator=generator(4))
    return (o, torch.tensor([4000]), table, 64), {"out": torch.empty(1, 64, 512)}


CASES = {"save_partial_states": save_partial_states_case,
         "inverse_gptj_rope_o_proj": inverse_rope_case}


def calls(op, args, outputs):
    """The ways of calling ``op`` on ``args`` (its inputs, in order) and ``outputs`` (its outputs
    by name): the wrapper (outputs by keyword), then each operator overload (positionally); with
    ``.functional``, the wrapper without outputs and ``.functional``."""
    overloads = getattr(torch.ops.dsv4cpu, op)
    wrapper = getattr(dsv4cpu, op)
    names = [a.name for a in overloads.default._schema.arguments if not a.kwarg_only]
    positional = list(args) + [outputs[n] for n in names[len(args):]]
    ways = {"wrapper": lambda: wrapper(*args, **outputs),
            "no_options": lambda: overloads.no_options(*positional),
            "default": lambda: overloads.default(*positional)}
    if hasattr(overloads, "functional"):
        ways["wrapper_allocating"] = lambda: wrapper(*args)
        ways["functional"] = lambda: overloads.functional(*args)
    return ways


def sample(fn, seconds):
    """Seconds per call: the mean over ``seconds`` after a warm-up of a fifth of that."""
    def run(length):  # at least one call
        calls_made, start = 0, time.perf_counter()
        while True:
            fn()
            calls_made += 1
            elapsed = time.perf_counter() - start
            if elapsed >= length:
                return elapsed / calls_made
    run(seconds / 5)
    return run(seconds)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python_calls.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.05, help="length of one sample")
    parser.add_argument("-o", "--output")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for op, build in CASES.items():
        inputs, outputs = build()
        ways = calls(op, inputs, outputs)
        times = {way: [] for way in ways}
        for _ in range(args.repetitions):
            for way, fn in ways.items():
                times[way].append(sample(fn, args.seconds))
        base = statistics.median(times["no_options"])
        for way in ways:
            t = statistics.median(times[way])
            results.append({"op": op, "call": way, "seconds": t, "over_no_options": t / base})
            print(f"{op:<28} {way:<18} {t * 1e6:8.2f} µs {t / base:6.2f}x", flush=True)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"schema": SCHEMA, "torch": torch.__version__, "results": results}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
