"""Paths and helpers of the dsv4cpu package tests. ctest sets DSV4CPU_VERIFY, DSV4CPU_FIXTURES,
DSV4CPU_SHARED_CONFORMANCE, DSV4CPU_SHARED_CONFORMANCE_ATTENTION and
DSV4CPU_SHARED_CONFORMANCE_NEXT; by hand they default to the release build and the folders beside
the project."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.environ.get("DSV4CPU_FIXTURES") or os.path.join(ROOT, "fixtures")
SHARED = os.environ.get("DSV4CPU_SHARED_CONFORMANCE") or os.path.join(ROOT, "..", "shared",
                                                                      "conformance")
VERIFY = os.environ.get("DSV4CPU_VERIFY") or os.path.join(ROOT, "build", "release", "tools",
                                                          "dsv4cpu-verify")
SHARED_ATTENTION = os.environ.get("DSV4CPU_SHARED_CONFORMANCE_ATTENTION") or os.path.join(
    ROOT, "..", "shared", "conformance-attention")
SHARED_NEXT = os.environ.get("DSV4CPU_SHARED_CONFORMANCE_NEXT") or os.path.join(
    ROOT, "..", "shared", "conformance-next")
#: The user pages (docs/*.md), whose scripts the tests run.
DOCS = os.path.join(ROOT, "docs")
#: The metadata grammar's table (docs/conformance.md), shared with the verifier's tests.
METADATA_TABLE = os.path.join(ROOT, "tests", "data", "fixture_metadata.json")


def fixture_files(*folders):
    """Every *.safetensors under the folders that exist, as (path, id)."""
    out = []
    for folder in folders:
        for root, _, files in os.walk(folder):
            for f in sorted(files):
                if f.endswith(".safetensors"):
                    path = os.path.join(root, f)
                    out.append((path, os.path.relpath(path, os.path.dirname(folder))))
    return sorted(out, key=lambda item: item[1])


def fixture(op, name):
    """An embedded fixture: fixtures/<op>/<name>.safetensors."""
    return os.path.join(FIXTURES, op, name + ".safetensors")


def run(args, cwd=None, timeout=None):
    """Runs a command with this package and the test targets importable; (status, stdout). A
    command still running after ``timeout`` seconds fails the test."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, *sys.path])
    try:
        done = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{args} still running after {timeout} s; its output: {e.output}")
    return done.returncode, done.stdout


def conformance(*args, timeout=None):
    """python3 -m dsv4cpu.conformance ARGS: (status, stdout lines)."""
    status, out = run([sys.executable, "-m", "dsv4cpu.conformance", *args], timeout=timeout)
    return status, out.rstrip("\n").split("\n")


def verify(*args, timeout=None):
    """dsv4cpu-verify ARGS: (status, stdout lines)."""
    if not os.path.exists(VERIFY):
        if os.environ.get("DSV4CPU_VERIFY"):
            pytest.fail(f"dsv4cpu-verify not found at {VERIFY} (DSV4CPU_VERIFY)")
        pytest.skip(f"no dsv4cpu-verify at {VERIFY}: build the release preset or set "
                    f"DSV4CPU_VERIFY")
    status, out = run([VERIFY, *args], timeout=timeout)
    return status, out.rstrip("\n").split("\n")
