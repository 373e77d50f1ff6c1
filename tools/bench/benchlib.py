"""Reading dsv4cpu benchmark result files (Google Benchmark JSON) and deriving the figures that the
comparison tool and the dashboard report, all taken within one run so that they survive a machine
that is slower or faster as a whole:

- share of the roof: bytes/s against the roofline of the benchmark's traffic kind (its label
  `traffic=read|copy|write`; files without labels count as `read`) at the same thread count,
  `stream_<kind>/<bytes>[/threads:2]` of the same run;
- speedup over the reference: the reference's time at the same op and shape (one thread, checked)
  over this benchmark's;
- 2-thread speedup: the one-thread time of the same variant and shape over the two-thread time;
- validation share: the part of a checked run's time that its `/unchecked` twin does not spend.

Two runs are compared on these figures; the share only for a benchmark bound by its roof (at least
ROOF_BOUND_SHARE of it in the baseline), raw times only between runs on the same machine (same
cpu_model, mhz_per_cpu, num_cpus and, when both runs list them, caches).

Benchmark names are `<op>/<variant>/<shape>[/unchecked][/threads:2][/real_time]`; a one-thread run
is timed in CPU time (as Google Benchmark computes its rates), a `/real_time` run in wall time."""
import json
import statistics
from dataclasses import dataclass, field

REFERENCE = "ref"
ROOFLINE_PREFIX = "stream_"
TRAFFIC_KINDS = ("read", "copy", "write")
# Compute roofs measured by the suite (bench/bench_roof_amx.cpp, bench_roof_vector.cpp): FLOP/s,
# not an op.
COMPUTE_ROOFS = ("amx_roof", "amx_loaded_roof", "avx512bf16_roof", "avx3_roof", "avx2_roof")

# A benchmark is bound by its roof when its baseline reaches at least this share of it (the
# baseline's, so that a drop below the bar is still judged). The memory-bound ops of this suite run
# at 30-130% of their roof (more where the data stay cached); the compute-bound ones and most
# scalar references run below 20%, where the share follows the measured roof, not the code.
ROOF_BOUND_SHARE = 0.25

# The context fields that identify the machine of a run (the caches too, when both runs list them):
# a VM may report only "AMD EPYC" for hosts of different clocks.
MACHINE_KEYS = ("cpu_model", "mhz_per_cpu", "num_cpus")

def median(values):
    return statistics.median(values) if values else None


@dataclass
class Bench:
    """One benchmark of one result file, aggregated over its repetitions."""
    name: str            # the full run name
    op: str
    variant: str
    shape: str           # without the /unchecked, /threads:N and /real_time suffixes
    threads: int = 1
    checked: bool = True
    traffic: str = "read"
    times_ns: list = field(default_factory=list)   # time per iteration, one per repetition
    bytes_per_second: list = field(default_factory=list)
    #: Bytes a checked run's finiteness checks read before its traffic (counter check_bytes), or 0.
    check_bytes: float = 0.0
    flops_per_second: list = field(default_factory=list)
    peak_flops: list = field(default_factory=list)  # the roof of the target that ran (the suite's)
    #: AMX runs on one thread: flops over the AMX unit's rate measured beside the run.
    unit_share: list = field(default_factory=list)

    @property
    def median_ns(self):
        return statistics.median(self.times_ns)

    @property
    def median_bps(self):
        return median(self.bytes_per_second)

    @property
    def median_flops(self):
        return median(self.flops_per_second)

    @property
    def bytes_per_iteration(self):
        """Bytes one iteration moves (rate × time): the work the share is taken of."""
        if not self.bytes_per_second:
            return None
        return self.median_bps * self.median_ns * 1e-9

    @property
    def is_roofline(self):
        return self.op.startswith(ROOFLINE_PREFIX) and self.op[len(ROOFLINE_PREFIX):] in TRAFFIC_KINDS

    @property
    def is_compute_roof(self):
        return self.op in COMPUTE_ROOFS

    @property
    def is_op(self):
        """A benchmark of an op, not a roof (stream traffic or compute)."""
        return not self.is_roofline and not self.is_compute_roof

    @property
    def key(self):
        """(op, variant, shape, threads, checked): a benchmark's identity across files."""
        return (self.op, self.variant, self.shape, self.threads, self.checked)


_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def split_name(run_name):
    """'compress_norm_rope_store/hwy/C4/prefill4096/unchecked' -> (op, variant, shape, threads,
    checked); rooflines have no variant: 'stream_copy/67108864/threads:2/real_time' ->
    ('stream_copy', '', '67108864', 2, True)."""
    parts = run_name.split("/")
    threads, checked = 1, True
    while len(parts) > 1 and (parts[-1] in ("real_time", "unchecked") or parts[-1].startswith("threads:")):
        last = parts.pop()
        if last == "unchecked":
            checked = False
        elif last.startswith("threads:"):
            threads = int(last.split(":", 1)[1])
    op = parts[0]
    if op.startswith(ROOFLINE_PREFIX):
        return op, "", "/".join(parts[1:]), threads, checked
    variant = parts[1] if len(parts) > 1 else ""
    return op, variant, "/".join(parts[2:]), threads, checked


@dataclass
class Results:
    path: str
    context: dict
    benches: dict  # name -> Bench, in file order

    def label(self):
        c = self.context
        return c.get("date", self.path)[:16] + (" " + c["commit"][:8] if c.get("commit") else "")

    def find(self, op, variant, shape, threads=1, checked=True):
        for b in self.benches.values():
            if b.key == (op, variant, shape, threads, checked):
                return b
        return None

    def roofline(self, traffic="read", threads=1):
        """The stream_<traffic> benchmark with the largest buffer at this thread count, or None."""
        rows = [b for b in self.benches.values()
                if b.op == ROOFLINE_PREFIX + traffic and b.threads == threads and b.median_bps]
        if not rows:
            return None
        return max(rows, key=lambda b: int("".join(ch for ch in b.shape if ch.isdigit()) or 0))

    def roofline_bps(self, traffic="read", threads=1):
        roof = self.roofline(traffic, threads)
        return roof.median_bps if roof else None

    def share(self, bench):
        """Bytes/s over the roofline of the benchmark's traffic at its thread count (a fraction).
        A run whose checks read check_bytes first is held to the roof of its own traffic: the
        time of its bytes at that roofline plus the time of check_bytes at stream_read."""
        roof = self.roofline_bps(bench.traffic, bench.threads)
        if bench.is_roofline or not roof or not bench.median_bps:
            return None
        share = bench.median_bps / roof
        if bench.check_bytes:
            read = self.roofline_bps("read", bench.threads)
            if not read:
                return None
            share += bench.check_bytes / (bench.median_ns * 1e-9) / read
        return share

    def roof_bound(self, bench):
        """Whether the benchmark reaches ROOF_BOUND_SHARE of its roof in this run."""
        return (self.share(bench) or 0) >= ROOF_BOUND_SHARE

    def share_samples(self, bench):
        roof = self.roofline(bench.traffic, bench.threads)
        if bench.is_roofline or not roof:
            return []
        if not bench.check_bytes:
            return [bps / r for bps, r in zip(bench.bytes_per_second, roof.bytes_per_second)]
        read = self.roofline("read", bench.threads)
        if not read:
            return []
        return [bps / r + bench.check_bytes / (t * 1e-9) / rd for bps, r, t, rd in
                zip(bench.bytes_per_second, roof.bytes_per_second, bench.times_ns,
                    read.bytes_per_second)]

    def _reference(self, bench):
        """The reference run (one thread, checked) of an optimized one-thread run, checked or not."""
        if bench.variant in ("", REFERENCE) or bench.threads != 1:
            return None
        return self.find(bench.op, REFERENCE, bench.shape)

    def speedup(self, bench):
        """Reference time (checked) / this variant's time at the same op and shape (one thread)."""
        ref = self._reference(bench)
        return ref.median_ns / bench.median_ns if ref else None

    def speedup_samples(self, bench):
        ref = self._reference(bench)
        return [r / t for r, t in zip(ref.times_ns, bench.times_ns)] if ref else []

    def _one_thread(self, bench):
        if bench.threads == 1:
            return None
        return self.find(bench.op, bench.variant, bench.shape, 1, bench.checked)

    def thread_speedup(self, bench):
        """One-thread time / this benchmark's time, for a run on several threads."""
        one = self._one_thread(bench)
        return one.median_ns / bench.median_ns if one else None

    def thread_speedup_samples(self, bench):
        one = self._one_thread(bench)
        return [o / t for o, t in zip(one.times_ns, bench.times_ns)] if one else []

    def two_threads(self, bench):
        """The two-thread run of a one-thread benchmark, or None."""
        return self.find(bench.op, bench.variant, bench.shape, 2, bench.checked)

    def unchecked(self, bench):
        return self.find(bench.op, bench.variant, bench.shape, bench.threads, False)

    def validation_share(self, bench):
        """The part of a checked run's time that the checks take: 1 - unchecked / checked."""
        u = self.unchecked(bench) if bench.checked else None
        return 1 - u.median_ns / bench.median_ns if u else None

    def peak_flops(self, bench):
        """The compute roof the suite reported for the run's target (bench/bench_runs.cpp)."""
        return median(bench.peak_flops)

    def ops(self):
        out = []
        for b in self.benches.values():
            if b.is_op and b.op not in out:
                out.append(b.op)
        return out


def load(path):
    with open(path) as f:
        doc = json.load(f)
    if "benchmarks" not in doc:
        raise ValueError(f"{path}: not a Google Benchmark JSON file (no 'benchmarks')")
    benches = {}
    # Registration order: repetitions run interleaved (ci/bench.sh) are written in random order.
    rows = sorted(doc["benchmarks"], key=lambda r: (r.get("family_index", 0),
                                                   r.get("per_family_instance_index", 0),
                                                   r.get("repetition_index", 0)))
    for row in rows:
        if row.get("run_type", "iteration") != "iteration" or row.get("error_occurred"):
            continue
        name = row.get("run_name", row["name"])
        op, variant, shape, threads, checked = split_name(name)
        b = benches.setdefault(name, Bench(name, op, variant, shape, threads, checked))
        label = row.get("label", "")
        if label.startswith("traffic=") and label[len("traffic="):] in TRAFFIC_KINDS:
            b.traffic = label[len("traffic="):]
        elif b.is_roofline:
            b.traffic = op[len(ROOFLINE_PREFIX):]
        # Google Benchmark's rates use CPU time unless the run says real_time.
        wall = name.endswith("/real_time") or "cpu_time" not in row
        time = row["real_time"] if wall else row["cpu_time"]
        b.times_ns.append(time * _UNIT_NS[row.get("time_unit", "ns")])
        if "bytes_per_second" in row:
            b.bytes_per_second.append(row["bytes_per_second"])
        if "flops" in row:
            b.flops_per_second.append(row["flops"])
        if "peak_flops" in row:
            b.peak_flops.append(row["peak_flops"])
        if "unit_share" in row:
            b.unit_share.append(row["unit_share"])
        if "check_bytes" in row:
            b.check_bytes = row["check_bytes"]
    return Results(path, doc.get("context", {}), benches)


def mann_whitney_p_greater(new, base):
    """Exact one-sided Mann-Whitney U test: the probability, under 'same distribution', of a U at
    least as large as observed for 'new is larger than base' (small samples, ties counted half)."""
    from itertools import combinations
    pooled = list(new) + list(base)
    n = len(new)

    def u_stat(sample_new, sample_base):
        return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in sample_new for b in sample_base)

    observed = u_stat(new, base)
    idx = range(len(pooled))
    total = hits = 0
    for chosen in combinations(idx, n):
        s = set(chosen)
        u = u_stat([pooled[i] for i in chosen], [pooled[i] for i in idx if i not in s])
        total += 1
        hits += u >= observed - 1e-12
    return hits / total


@dataclass
class Figure:
    """One normalised figure of a benchmark in two runs."""
    kind: str        # "share", "speedup", "2-thread", "time"
    base: float
    new: float
    p: float = None  # one-sided p-value that the new run is worse (None: too few repetitions)
    worse: bool = False

    def text(self):
        if self.kind == "share":
            return f"share {100 * self.base:.1f}->{100 * self.new:.1f}%"
        if self.kind == "time":
            return f"time {self.base / 1e3:.1f}->{self.new / 1e3:.1f}us"
        return f"{self.kind} {self.base:.2f}->{self.new:.2f}x"


def _judge(kind, base_median, new_median, base_samples, new_samples, threshold, alpha, lower_is_worse=True):
    """A Figure whose `worse` says the new run is worse beyond the threshold and, with at least 3
    repetitions on each side, beyond the noise of the repetitions (exact Mann-Whitney at alpha)."""
    ratio = new_median / base_median if base_median else 1.0
    beyond = ratio < 1 - threshold if lower_is_worse else ratio > 1 + threshold
    p = None
    significant = True
    if len(base_samples) >= 3 and len(new_samples) >= 3:
        p = (mann_whitney_p_greater(base_samples, new_samples) if lower_is_worse
             else mann_whitney_p_greater(new_samples, base_samples))
        significant = p <= alpha
    return Figure(kind, base_median, new_median, p, beyond and significant)


def machine_differences(base, new):
    """The machine fields of the two runs' contexts that differ or are unknown, as
    [(field, base value, new value)]; empty when both ran on the same machine."""
    out = [(k, base.context.get(k), new.context.get(k)) for k in MACHINE_KEYS
           if not base.context.get(k) or base.context.get(k) != new.context.get(k)]
    caches = base.context.get("caches"), new.context.get("caches")
    if all(caches) and caches[0] != caches[1]:
        out.append(("caches", *caches))
    return out


def same_machine(base, new):
    return not machine_differences(base, new)


def machine_kind(context):
    """What a baseline shares with the runs it serves: the CPU model and the ISA features that
    ci/bench.sh stamps (hosts of one kind may differ in clock and caches)."""
    return context.get("cpu_model"), context.get("isa")


def pick_baseline(run, baselines):
    """The baseline for `run` among `baselines` (Results): the newest by context date of the run's
    machine kind, else the newest of all; None when there is none."""
    kind = machine_kind(run.context)
    own = [b for b in baselines if all(kind) and machine_kind(b.context) == kind]
    return max(own or baselines, key=lambda b: b.context.get("date", ""), default=None)


def compare(base, new, threshold=0.10, alpha=0.05):
    """For every benchmark of `new` also in `base` (by op, variant, shape, threads, checks): the
    normalised figures both runs have (share of the matching roof when both runs have that roof,
    the benchmark moves the same bytes per iteration in both and is bound by its roof in the
    baseline; speedup over the reference; 2-thread speedup, for a one-thread run bound by its roof in
    the baseline only beside a share) and, only between runs on the same
    machine, the raw time. Returns [(new bench, base bench, [Figure])]."""
    raw = same_machine(base, new)
    by_key = {b.key: b for b in base.benches.values() if b.is_op}
    out = []
    for n in new.benches.values():
        if not n.is_op or n.key not in by_key:
            continue
        b = by_key[n.key]
        figures = []
        bb, nb = b.bytes_per_iteration, n.bytes_per_iteration
        same_work = bb and nb and abs(bb - nb) <= 0.01 * bb
        share_judged = bool(same_work and base.roof_bound(b) and b.traffic == n.traffic and new.share(n))
        if share_judged:
            figures.append(_judge("share", base.share(b), new.share(n), base.share_samples(b),
                                  new.share_samples(n), threshold, alpha))
        if base.speedup(b) and new.speedup(n):
            figures.append(_judge("speedup", base.speedup(b), new.speedup(n), base.speedup_samples(b),
                                  new.speedup_samples(n), threshold, alpha))
        # A roof-bound op's 2-thread speedup is the roof's own (which varies between runs on a
        # shared machine): it is judged only beside the share of the 2-thread roof.
        one = base._one_thread(b)
        if (share_judged or not (one and base.roof_bound(one))) and base.thread_speedup(b) \
                and new.thread_speedup(n):
            figures.append(_judge("2-thread", base.thread_speedup(b), new.thread_speedup(n),
                                  base.thread_speedup_samples(b), new.thread_speedup_samples(n),
                                  threshold, alpha))
        if raw:
            figures.append(_judge("time", b.median_ns, n.median_ns, b.times_ns, n.times_ns, threshold,
                                  alpha, lower_is_worse=False))
        out.append((n, b, figures))
    return out


def verdict(figures, threshold=0.10):
    """'REGRESSION (<figures>)' when every judged figure is worse (beyond the threshold and the
    noise) and one of them is normalised, 'ok (<figures> alone)' when only some are (or the raw
    time alone), else 'faster', 'ok' or '-' (nothing comparable). A slower benchmark moves all its
    figures; a roof or a reference measured slower or faster moves only the figure it normalises,
    and the whole machine only the raw time."""
    if not figures:
        return "-"
    worse = [f.kind for f in figures if f.worse]
    if worse and len(worse) == len(figures) and worse != ["time"]:
        return "REGRESSION (" + ", ".join(worse) + ")"
    if worse:
        return "ok (" + ", ".join(worse) + " alone)"
    better = any((f.new < f.base * (1 - threshold)) if f.kind == "time" else (f.new > f.base * (1 + threshold))
                 for f in figures)
    return "faster" if better else "ok"
