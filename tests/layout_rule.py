#!/usr/bin/env python3
"""DEVELOPERS.md's layout rule, read off the #include lines of every C++ source.

The library's layers include only those below them: core/ <- args/ <- {reference/, optimized/,
metadata/} <- api/ (the three middle layers not each other), and none of them includes a
checking or measuring folder. testing/ (the oracle and harness) includes the library only;
verify/ (the fixture verifier, beside it) the library and testing/. The leaves (tests/,
property_tests/, bench/, tools/, python/csrc/, examples/) are included by no other folder.

Usage: layout_rule.py ROOT   prints each include against the rule and exits 1 if there is one.
       layout_rule.py --self-test   checks that a tree breaking each rule is caught.
"""
import pathlib
import re
import sys
import tempfile

LIBRARY = {"core": 0, "args": 1, "reference": 2, "optimized": 2, "metadata": 2, "api": 3}
LEAVES = ["tests", "property_tests", "bench", "tools", "python/csrc", "examples"]
SOURCES = (".cpp", ".hpp", ".h", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def area(path):
    """The folder of the rule a repository path (or include) belongs to, or None."""
    for leaf in LEAVES:
        if path == leaf or path.startswith(leaf + "/"):
            return leaf
    top = path.split("/", 1)[0]
    return top if top in LIBRARY or top in ("testing", "verify") else None


def allowed(src, dst):
    """Whether a file of area `src` may include a header of area `dst`."""
    if src == dst:
        return True
    if src in LIBRARY:
        return dst in LIBRARY and LIBRARY[dst] < LIBRARY[src]
    if src == "testing":
        return dst in LIBRARY
    if src == "verify":
        return dst in LIBRARY or dst == "testing"
    return dst not in LEAVES  # a leaf: anything but another leaf


def violations(root):
    root = pathlib.Path(root)
    found = []
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if not f.is_file() or f.suffix not in SOURCES or rel.startswith(("build/", "out/")):
            continue
        src = area(rel)
        if src is None:
            continue
        for inc in INCLUDE.findall(f.read_text(errors="replace")):
            dst = area(inc)
            if dst is not None and not (root / inc).exists():
                dst = None  # a path relative to the including file, not to the root
            if dst is not None and not allowed(src, dst):
                found.append(f"{rel}: includes {inc} ({src} may not include {dst})")
    return found


def self_test():
    cases = {
        "core/a.cpp": "args/x.hpp",            # a layer including one above it
        "optimized/b.cpp": "metadata/x.hpp",   # a middle layer including a sibling
        "api/c.cpp": "testing/x.hpp",          # the library including the harness
        "testing/d.cpp": "verify/x.hpp",       # the harness including the verifier
        "verify/e.cpp": "tools/x.hpp",         # a library including a leaf
        "python/csrc/f.cpp": "tests/x.hpp",    # a leaf including another leaf
    }
    fine = {"api/g.cpp": "optimized/x.hpp", "verify/h.cpp": "testing/x.hpp",
            "python/csrc/i.cpp": "verify/x.hpp", "tests/j.cpp": "tests/x.hpp"}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for src, inc in {**cases, **fine}.items():
            for p, text in ((src, f'#include "{inc}"\n'), (inc, "")):
                (root / p).parent.mkdir(parents=True, exist_ok=True)
                (root / p).write_text(text)
        caught = {v.split(":", 1)[0] for v in violations(root)}
    missed = sorted(set(cases) - caught)
    wrong = sorted(caught - set(cases))
    for m in missed:
        print(f"self-test: {m} including {cases[m]} was not reported")
    for w in wrong:
        print(f"self-test: {w} including {fine[w]} was reported")
    if missed or wrong:
        return 1
    print(f"self-test: {len(cases)} breaches reported, {len(fine)} allowed includes passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    found = violations(argv[1])
    for v in found:
        print(v)
    print(f"layout rule: {len(found)} includes against it")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
