"""Reading dsv4cpu benchmark result files (Google Benchmark JSON) and deriving the figures that the
comparison tool and the dashboard report: per-benchmark medians over repetitions, bytes/s against
the machine's stream_read roofline, FLOP/s against the ISA's peak, and the speedup of every
optimized variant over the reference at the same shape, all taken from one run."""
import json
import statistics
from dataclasses import dataclass, field

REFERENCE = "ref"
ROOFLINE_OP = "stream_read"

# Single-precision FLOP per cycle and core of each ISA (two FMA pipes): the compute roofline for
# benchmarks that report a "flops" counter. The peak is this times the measured clock.
FLOP_PER_CYCLE = {"amx": 1024 * 2, "avx512bf16": 2 * 2 * 32, "avx512": 2 * 2 * 16,
                  "avx2": 2 * 2 * 8, "sse4": 2 * 4, "scalar": 2}


@dataclass
class Bench:
    """One benchmark of one result file, aggregated over its repetitions."""
    name: str            # <op>/<variant>/<shape>[/threads:N]
    op: str
    variant: str
    shape: str
    times_ns: list = field(default_factory=list)   # real time per iteration, one per repetition
    bytes_per_second: list = field(default_factory=list)
    flops_per_second: list = field(default_factory=list)

    @property
    def median_ns(self):
        return statistics.median(self.times_ns)

    @property
    def median_bps(self):
        return statistics.median(self.bytes_per_second) if self.bytes_per_second else None

    @property
    def median_flops(self):
        return statistics.median(self.flops_per_second) if self.flops_per_second else None


_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def split_name(run_name):
    """'compress_norm_rope_store/hwy/c4_prefill_4096' -> (op, variant, shape)."""
    parts = run_name.split("/")
    if parts[0] == ROOFLINE_OP:
        return ROOFLINE_OP, "", "/".join(parts[1:])
    if len(parts) < 3:
        return parts[0], parts[1] if len(parts) > 1 else "", ""
    return parts[0], parts[1], "/".join(parts[2:])


@dataclass
class Results:
    path: str
    context: dict
    benches: dict  # name -> Bench, in file order

    def label(self):
        c = self.context
        return c.get("date", self.path) + (" " + c["commit"][:8] if c.get("commit") else "")

    def roofline_bps(self):
        """Bytes/s of the largest stream_read benchmark in this run (the bandwidth roofline)."""
        rows = [b for b in self.benches.values() if b.op == ROOFLINE_OP and b.median_bps]
        if not rows:
            return None
        return max(rows, key=lambda b: int("".join(ch for ch in b.shape if ch.isdigit()) or 0)).median_bps

    def speedup(self, bench):
        """Reference time / this variant's time at the same op and shape, from this run."""
        if bench.variant in ("", REFERENCE):
            return None
        ref = self.benches.get("/".join([bench.op, REFERENCE, bench.shape]))
        return ref.median_ns / bench.median_ns if ref else None

    def peak_flops(self, bench):
        isa = bench.variant if bench.variant in FLOP_PER_CYCLE else "avx512" if bench.variant == "hwy" else "scalar"
        mhz = self.context.get("mhz_per_cpu")
        return FLOP_PER_CYCLE[isa] * mhz * 1e6 if mhz else None


def load(path):
    with open(path) as f:
        doc = json.load(f)
    if "benchmarks" not in doc:
        raise ValueError(f"{path}: not a Google Benchmark JSON file (no 'benchmarks')")
    benches = {}
    for row in doc["benchmarks"]:
        if row.get("run_type", "iteration") != "iteration" or row.get("error_occurred"):
            continue
        name = row.get("run_name", row["name"])
        op, variant, shape = split_name(name)
        b = benches.setdefault(name, Bench(name, op, variant, shape))
        b.times_ns.append(row["real_time"] * _UNIT_NS[row.get("time_unit", "ns")])
        if "bytes_per_second" in row:
            b.bytes_per_second.append(row["bytes_per_second"])
        if "flops" in row:
            b.flops_per_second.append(row["flops"])
    return Results(path, doc.get("context", {}), benches)


def mann_whitney_p_greater(new, base):
    """Exact one-sided Mann-Whitney U test: the probability, under 'same distribution', of a U at
    least as large as observed for 'new is slower than base' (small samples, ties counted half)."""
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
