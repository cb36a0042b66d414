"""The property-based tests of tests/test_fuzz_properties.py with many more examples and every structure
(issue 13): ψᵀφ = 1 of the library contacts, power balance and forward→inverse round trips of random trees and
random closed chains, invariance under renumbering links, relabelling E/P, reordering modules and contacts.

    python experiments/fuzz_properties.py [--scale 25]

runs the test file in one pytest process with ``MRDS_FUZZ_EXAMPLES=<scale>`` (each test's example count
multiplied; all tree and closed-chain structures instead of the suite's subset) and hypothesis' statistics, and
writes the examples tried per test to ``experiments/out/fuzz_properties.md``."""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=25.0, help="multiplier of the suite's example counts")
    args = ap.parse_args()
    env = {**os.environ, "MRDS_FUZZ_EXAMPLES": str(args.scale), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "--timeout=0",
           "--hypothesis-show-statistics", str(ROOT / "tests" / "test_fuzz_properties.py")]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    text = run.stdout + run.stderr
    rows = []
    for block in re.split(r"\n(?=tests/test_fuzz_properties.py::)", text):
        name = re.match(r"tests/test_fuzz_properties.py::(\w+)", block)
        phases = re.findall(r"(\d+) passing, (\d+) failing, and (\d+) invalid test cases", block)
        if name and phases:       # summed over hypothesis' phases (generate, shrink, explain)
            rows.append((name.group(1), *(sum(int(p[i]) for p in phases) for i in range(3))))
    summary = text.strip().splitlines()[-1] if text.strip() else "(no output)"
    lines = [f"# Property-based tests, extended run (scale {args.scale:g})", "",
             f"`{' '.join(['MRDS_FUZZ_EXAMPLES=' + str(args.scale)] + cmd[1:])}`", "",
             f"pytest: {summary}; wall {wall:.0f} s; exit status {run.returncode}", "",
             "| test | passing | failing | invalid |", "| --- | --- | --- | --- |"]
    lines += [f"| {n} | {p} | {f} | {i} |" for n, p, f, i in rows]
    lines += ["", f"Examples tried in all: {sum(r[1] + r[2] for r in rows)} (invalid: drawn and rejected by a filter)."]
    out = ROOT / "experiments" / "out" / "fuzz_properties.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if run.returncode:
        print(text[-6000:])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
