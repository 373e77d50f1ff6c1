"""Parity of vLLM CPU's DeepSeek-V4 kernels with the spec: the conformance runner
(:mod:`dsv4cpu.conformance`, target ``torch.ops._C`` through :mod:`vllm_adapters`) over fixture
folders, with every case judged as

    PASS      the fixture's contract holds for vLLM's result
    EXPECTED  it fails only by a difference the spec documents (the section is printed): vLLM's
              result is then checked against the spec's semantics for vLLM's behaviour
    SKIP      vLLM has no such op, option or output (or this dsv4cpu build cannot judge the op)
    KNOWN     a finding recorded in docs/vllm-parity.md ("Known findings")
    FAIL      any other difference: a new finding

    python3 parity.py [--known FILE] [--report FILE] PATH...

Each fixture runs in a worker process, so that a kernel that crashes on bad input is reported
(status CRASH, counted as a finding) and the run goes on in a fresh worker. Prints one line per
case, a per-op table, and last ``N passed, N failed`` (failed = new findings); exits 0 only when
there is no new finding and at least one case passed.
"""
import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile

STATUSES = ("PASS", "EXPECTED", "SKIP", "KNOWN", "FAIL")
HERE = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------- worker (in the venv)

def worker():
    """Reads fixture paths (one JSON request per line), writes one JSON result line each."""
    import differences
    for line in sys.stdin:
        request = json.loads(line)
        try:
            status, detail = differences.judge(request["path"])
        except Exception as e:  # the harness's own error: a failure of the case, not a crash
            status, detail = "FAIL", f"harness error: {type(e).__name__}: {e}"
        print(json.dumps({"status": status, "detail": detail}), flush=True)


class Worker:
    """A worker process; restarted after a crash. A fixture that takes more than ``seconds``
    kills it: on some known findings' out-of-bounds indices vLLM's kernel loops instead of
    crashing (the largest fixture takes a few seconds)."""

    seconds = 300

    def __init__(self):
        self.process = None
        self.stderr = None

    def start(self):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, text=True, cwd=HERE)

    def judge(self, path):
        """(op status, detail) of one fixture; CRASH when the worker died on it."""
        if self.process is None:
            self.start()
        try:
            self.process.stdin.write(json.dumps({"path": os.path.abspath(path)}) + "\n")
            self.process.stdin.flush()
            answered = select.select([self.process.stdout], [], [], self.seconds)[0]
            line = self.process.stdout.readline() if answered else ""
        except BrokenPipeError:
            answered, line = True, ""
        if line:
            answer = json.loads(line)
            return answer["status"], answer["detail"]
        if not answered:
            self.process.kill()
        code = self.process.wait()
        self.stderr.seek(0)
        tail = [t for t in self.stderr.read().splitlines() if t.strip()]
        self.process = None
        if not answered:
            return "CRASH", f"the kernel did not return within {self.seconds} s (process killed)"
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return "CRASH", f"the kernel killed the process ({how})" + (f": {tail[-1]}" if tail else "")

    def close(self):
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait()


# --------------------------------------------------------------------------- driver

def judged(work, path, known):
    """``work.judge(path)``, asked again in a fresh worker when a worker that served earlier
    fixtures dies on a fixture that is not a known finding: vLLM's kernels write out of bounds on
    some known findings, and the heap they corrupt can kill the worker on a later fixture. A known
    finding is not asked again (its kernel may loop instead of crashing in a fresh process)."""
    used = work.process is not None
    status, detail = work.judge(path)
    if status == "CRASH" and used and not known:
        status, detail = work.judge(path)
    return status, detail


def known_findings(path):
    """The case names (``op/case``) listed in the "Known findings" section of ``path``."""
    known, inside = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip().lower().startswith("## known findings")
            elif inside and line.startswith("|"):
                known.update(re.findall(r"`([a-z0-9_]+/[A-Za-z0-9_.]+)`", line.split("|")[1]))
    return known


def case_id(name):
    """``op/case`` of a fixture name (relative path without .safetensors)."""
    parts = name[:-len(".safetensors")].split("/")
    return "/".join(parts[-2:])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="parity.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--known", default=os.path.join(HERE, "..", "..", "docs",
                                                        "vllm-parity.md"),
                        help="file with the Known findings table (default docs/vllm-parity.md)")
    parser.add_argument("--report", help="write every case and the counts as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", metavar="PATH")
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    sys.path.insert(0, HERE)
    from dsv4cpu.conformance import collect

    known = known_findings(args.known)
    files = []
    for p in args.paths:
        found = collect(p)
        if isinstance(found, str):
            print(f"parity.py: {found}", file=sys.stderr)
            return 2
        top = os.path.basename(os.path.normpath(p))
        # An entry that cannot be read is judged too: loading it fails with its reason.
        files += [(path, f"{top}/{name}") for path, name, _ in found]
    work = Worker()
    cases, seen_known = [], set()
    for path, name in files:
        ident = case_id(name)
        status, detail = judged(work, path, ident in known)
        op = ident.split("/")[0]
        if status in ("FAIL", "CRASH"):
            detail = ("crash: " if status == "CRASH" else "") + detail
            if ident in known:
                status = "KNOWN"
                seen_known.add(ident)
            else:
                status = "FAIL"
        cases.append({"op": op, "case": name, "status": status, "detail": detail})
        print(f"{status:<8}  {name}  {detail}", flush=True)
    work.close()

    rows = {}
    for c in cases:
        rows.setdefault(c["op"], dict.fromkeys(STATUSES, 0))[c["status"]] += 1
    width = max([len(op) for op in rows] + [2])
    print(f"\n{'op':<{width}}  " + "  ".join(f"{s.lower():>8}" for s in STATUSES))
    for op in sorted(rows):
        print(f"{op:<{width}}  " + "  ".join(f"{rows[op][s]:>8}" for s in STATUSES))
    count = {s: sum(c["status"] == s for c in cases) for s in STATUSES}
    stale = sorted(k for k in known if k not in seen_known
                   and any(case_id(c["case"]) == k and c["status"] != "SKIP" for c in cases))
    for k in stale:
        print(f"note: known finding {k} did not occur in this run")
    print(f"\n{count['EXPECTED']} expected (differences the spec documents), {count['KNOWN']} "
          f"known findings (docs/vllm-parity.md), {count['SKIP']} skipped (not counted as passed)")
    print(f"{count['PASS']} passed, {count['FAIL']} failed")
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump({"cases": cases, **{s.lower(): n for s, n in count.items()}}, f, indent=1)
            f.write("\n")
    return 0 if count["FAIL"] == 0 and count["PASS"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
