"""Tests of dsv4cpu-bench-compare and dsv4cpu-dashboard on synthetic and doctored result files."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

COMPARE = os.path.join(HERE, "dsv4cpu-bench-compare")
DASHBOARD = os.path.join(HERE, "dsv4cpu-dashboard")


def synthetic(scale=None, reps=5, jitter=0.01):
    """A result file with a reference and an optimized variant at two shapes plus stream_read.
    scale: {benchmark name: factor applied to its times}."""
    scale = scale or {}
    rows = []
    base = {"stream_read/67108864": (8e6, 67108864), "op_a/ref/s1": (1000.0, 4096), "op_a/hwy/s1": (50.0, 4096),
            "op_a/ref/s2": (8000.0, 32768), "op_a/hwy/s2": (400.0, 32768)}
    for name, (t, nbytes) in base.items():
        for i in range(reps):
            time = t * scale.get(name, 1.0) * (1 + jitter * ((i * 7) % 5 - 2) / 2)
            rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": reps,
                         "repetition_index": i, "iterations": 100, "real_time": time, "cpu_time": time,
                         "time_unit": "ns", "bytes_per_second": nbytes / (time * 1e-9)})
    return {"context": {"date": "2026-11-29T12:00:00", "cpu_model": "test", "commit": "0123456789"},
            "benchmarks": rows}


def run(tool, *args):
    p = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, doc):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def test_identical_runs_pass(self):
        a = self.write("a.json", synthetic())
        rc, out = run(COMPARE, a, a)
        self.assertEqual(rc, 0, out)
        self.assertIn("5 compared, 0 regressed", out)

    def test_injected_slowdown_is_flagged(self):
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({"op_a/hwy/s2": 1.25}))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 1, out)
        line = next(l for l in out.splitlines() if l.startswith("op_a/hwy/s2"))
        self.assertIn("REGRESSION", line)
        self.assertIn("1 regressed", out)

    def test_slowdown_below_threshold_passes(self):
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({"op_a/hwy/s2": 1.05}))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)

    def test_one_outlier_repetition_is_noise(self):
        doc = synthetic()
        slow = copy.deepcopy(doc)
        for row in slow["benchmarks"]:
            if row["name"] == "op_a/hwy/s1" and row["repetition_index"] == 0:
                row["real_time"] *= 3
        a, b = self.write("a.json", doc), self.write("b.json", slow)
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)

    def test_whole_machine_slower_flags_time_not_speedup(self):
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({"op_a/ref/s1": 2.0, "op_a/hwy/s1": 2.0}))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 1, out)
        line = next(l for l in out.splitlines() if l.startswith("op_a/hwy/s1"))
        self.assertIn("REGRESSION (time)", line)

    def test_speedup_drop_is_flagged(self):
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({"op_a/ref/s2": 0.8}))  # reference got faster: speedup fell 20%
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 1, out)
        line = next(l for l in out.splitlines() if l.startswith("op_a/hwy/s2"))
        self.assertIn("REGRESSION (speedup)", line)

    def test_malformed_input_exits_2(self):
        bad = self.write("bad.json", {"nothing": []})
        rc, out = run(COMPARE, bad, bad)
        self.assertEqual(rc, 2, out)

    def test_committed_baseline_flags_doctored_copy(self):
        baselines = os.path.join(HERE, "..", "..", "bench", "baselines")
        files = sorted(f for f in os.listdir(baselines) if f.endswith(".json")) if os.path.isdir(baselines) else []
        self.assertTrue(files, "no committed baseline under bench/baselines/")
        path = os.path.join(baselines, files[-1])
        with open(path) as f:
            doc = json.load(f)
        results = benchlib.load(path)
        victim = next(b.name for b in results.benches.values() if b.variant not in ("", "ref"))
        for row in doc["benchmarks"]:
            if row.get("run_name", row["name"]) == victim and row.get("run_type", "iteration") == "iteration":
                row["real_time"] *= 1.5
                row["cpu_time"] *= 1.5
        doctored = self.write("doctored.json", doc)
        rc, out = run(COMPARE, path, doctored)
        self.assertEqual(rc, 1, out)
        line = next(l for l in out.splitlines() if l.startswith(victim + " ") or l.startswith(victim))
        self.assertIn("REGRESSION", line)


class BenchlibTest(unittest.TestCase):
    def test_mann_whitney_extremes(self):
        self.assertAlmostEqual(benchlib.mann_whitney_p_greater([6, 7, 8], [1, 2, 3]), 1 / 20)
        self.assertEqual(benchlib.mann_whitney_p_greater([1, 2, 3], [6, 7, 8]), 1.0)

    def test_split_name(self):
        self.assertEqual(benchlib.split_name("compress_norm_rope_store/hwy/c4_prefill_4096"),
                         ("compress_norm_rope_store", "hwy", "c4_prefill_4096"))
        self.assertEqual(benchlib.split_name("stream_read/67108864"), ("stream_read", "", "67108864"))


class DashboardTest(unittest.TestCase):
    def test_renders_charts_for_history(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, s in enumerate([1.0, 1.1]):
                p = os.path.join(d, f"r{i}.json")
                with open(p, "w") as f:
                    json.dump(synthetic({"op_a/hwy/s1": s}), f)
                paths.append(p)
            out = os.path.join(d, "report.html")
            rc, text = run(DASHBOARD, *paths, "-o", out)
            self.assertEqual(rc, 0, text)
            with open(out) as f:
                page = f.read()
            self.assertEqual(page.count('<svg class="chart"'), 3)  # throughput, speedup, history
            self.assertIn("speedup over the reference", page)
            self.assertIn("stream_read", page)


if __name__ == "__main__":
    unittest.main()
