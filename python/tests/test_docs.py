"""The README and the pages of docs/ show only what exists: every script, preset, page and command
line flag they name, and the README's Python quick start runs and prints what it says."""
import glob
import json
import os
import re
import sys

import pytest

from support import ROOT, VERIFY, run

PAGES = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "DEVELOPERS.md"),
         *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]


def text(page):
    return open(page, encoding="utf-8").read()


def page_id(page):
    return os.path.relpath(page, ROOT)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_named_files_exist(page):
    """Every ci/, docs/, examples/ and cmake/ path a page names is in the tree (a name with the
    placeholder NN stands for a pattern)."""
    named = {p for p in re.findall(r"(?<![\w./-])((?:ci|docs|examples|cmake)/[\w./-]*\w)",
                                   text(page)) if "NN" not in p}
    missing = [p for p in sorted(named)
               if not glob.glob(os.path.join(ROOT, p + "*"))]
    assert not missing, f"{page_id(page)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_named_presets_exist(page):
    presets = json.load(open(os.path.join(ROOT, "CMakePresets.json"), encoding="utf-8"))
    names = {p["name"] for kind in ("configurePresets", "buildPresets", "testPresets",
                                    "workflowPresets") for p in presets.get(kind, [])}
    used = set(re.findall(r"--preset[ =]([\w-]+)", text(page)))
    assert used <= names, f"{page_id(page)} names unknown presets: {sorted(used - names)}"


def flags(page, command):
    """The --flags written after `command` on one line of the page."""
    found = set()
    for line in text(page).split("\n"):
        if command in line:
            found |= set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", line.split(command, 1)[1]))
    return found


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_verifier_flags_exist(page):
    if not flags(page, "dsv4cpu-verify"):
        return
    if not os.path.exists(VERIFY):
        pytest.fail(f"dsv4cpu-verify not found at {VERIFY} (set DSV4CPU_VERIFY)")
    _, usage = run([VERIFY, "--help"])
    assert flags(page, "dsv4cpu-verify") <= set(re.findall(r"--[a-z][\w-]*", usage))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_runner_flags_exist(page):
    used = flags(page, "dsv4cpu.conformance")
    if not used:
        return
    _, usage = run([sys.executable, "-m", "dsv4cpu.conformance", "--help"])
    assert used <= set(re.findall(r"--[a-z][\w-]*", usage)), usage


def test_readme_links_every_page():
    readme = text(os.path.join(ROOT, "README.md"))
    pages = {page_id(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))}
    assert {p for p in pages if p not in readme} == set()


def test_readme_python_quick_start(tmp_path):
    section = text(os.path.join(ROOT, "README.md")).split("## Python in ten lines", 1)[1]
    script = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(script.strip().split("\n")) <= 12
    status, out = run([sys.executable, "-c", script], cwd=tmp_path)
    assert status == 0, out
    import dsv4cpu
    version, slots = out.split("\n")[0].split(" ", 1)
    assert version == dsv4cpu.__version__ and slots == "[[28, 9, -1], [19, 0, 13]]"
    assert out.split("\n")[1] == "local_indices (1, 2) 9", out
