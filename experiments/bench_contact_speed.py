"""Issue 39's speed table: the independent checks of ``../shared/bench`` on the contact step, run side by side and
collected into one Markdown table (``docs/benchmarks.md``'s contact section is this script's output).

Rows (each one subprocess, nothing else running; the peer in the same process as ours):

* limits that nothing touches: ``mjcf_speed.py ROBOT.xml --batch 4096`` with ``--contact file`` and ``--contact off``
  on the four-loop biped with ranges on its knees and ankles and no floor (``tests/data/biped_fourbar.xml`` plus
  the ranges of ``experiments/biped_drop.py``) and on Menagerie's Cassie (``tests/data/cassie.xml``, its visual
  meshes left out): the velocity-level step (limits and self-collision enforced) against the acceleration-level
  one of the same robot, both against MuJoCo × cores;
* contact scenes at batch 1024: the quadruped standing (``tests/data/quadruped_contact.xml --steps 10 --settle 1``)
  and the four-loop biped standing on its box feet (``experiments/biped_drop.py``'s file, ``--settle 1``), with
  MJX 3.17 (``mjx_speed.py``, its JAX implementation) on the same file, state and batch when a second Python with
  jax 0.9.2 and mujoco-mjx is given (``--mjx-python``).

    python experiments/bench_contact_speed.py [--mjx-python /path/to/venv092/bin/python] [--out docs/benchmarks_contact.md]

Prints the table and the raw JSON lines; writes the Markdown file given by ``--out`` (default: print only).
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "bench"
sys.path.insert(0, str(ROOT / "experiments"))


def biped_with_ranges_xml():
    """The four-loop biped with its knee and ankle ranges (biped_drop.py's) and no floor: limits nothing touches."""
    xml = (ROOT / "tests" / "data" / "biped_fourbar.xml").read_text()
    for side in ("L", "R"):
        xml = xml.replace(f'<joint name="knee_{side}" axis="0 1 0" ref="0.05"',
                          f'<joint name="knee_{side}" axis="0 1 0" ref="0.05" range="-0.05 1.6"')
        xml = xml.replace(f'<joint name="ankle_{side}" axis="0 1 0"', f'<joint name="ankle_{side}" axis="0 1 0" range="-0.6 0.6"')
    return xml


def biped_on_floor_xml():
    import biped_drop
    return biped_drop.biped_on_floor_xml()


def run(python, script, args):
    out = subprocess.run([python, str(BENCH / script), *args], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode or not lines:
        return {"error": (out.stderr or out.stdout)[-400:]}
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mjx-python", default=None, help="a Python with jax 0.9.2, mujoco and mujoco-mjx")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", nargs="*", default=None, help="row names to run (limits-biped limits-cassie "
                                                            "quadruped biped-feet)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "biped_ranges.xml").write_text(biped_with_ranges_xml())
    (tmp / "biped_feet.xml").write_text(biped_on_floor_xml())
    py = sys.executable
    rows, raw = [], []
    plan = {
        "limits-biped": ("four-loop biped, ranges, no floor", str(tmp / "biped_ranges.xml"), ["--batch", "4096"], True),
        "limits-cassie": ("Cassie (Menagerie), ranges + self-collision, no floor", "tests/data/cassie.xml",
                          ["--batch", "4096"], True),
        "quadruped": ("quadruped standing (4 sphere feet)", "tests/data/quadruped_contact.xml",
                      ["--batch", "1024", "--steps", "10", "--settle", "1"], False),
        "biped-feet": ("four-loop biped standing on box feet", str(tmp / "biped_feet.xml"),
                       ["--batch", "1024", "--steps", "10", "--settle", "1"], False),
    }
    for key, (label, xml, opts, limits) in plan.items():
        if args.only and key not in args.only:
            continue
        ours = run(py, "mjcf_speed.py", [xml, *opts, "--contact", "file"])
        raw.append((key, "ours", ours))
        off = run(py, "mjcf_speed.py", [xml, *opts, "--contact", "off"]) if limits else None
        if off is not None:
            raw.append((key, "off", off))
        mjx = None
        if args.mjx_python and not limits:
            mjx = run(args.mjx_python, "mjx_speed.py", [xml, *opts])
            raw.append((key, "mjx", mjx))
        rows.append((label, ours, off, mjx))
        print(key, json.dumps(ours), json.dumps(off), json.dumps(mjx), flush=True)

    def f(d, k, fmt="{:,.0f}"):
        return fmt.format(d[k]) if d and k in d else "—"

    mjx_key = lambda d: next((k for k in ("mjx_steps_per_s", "ours_steps_per_s") if d and k in d), None)  # noqa: E731
    head = (f"## Contact step: speed (issue 39)\n\n{datetime.date.today()}, {platform.machine()} "
            f"({platform.processor() or 'cpu'}, {os.cpu_count()} cores), float32, "
            f"jax {next((r['jax'] for _, r, _, _ in rows if r and 'jax' in r), '?')}; "
            "`python experiments/bench_contact_speed.py --mjx-python …`\n\n"
            "| scene | batch | ours, contact step (steps/s) | ours, acceleration level (steps/s) | velocity / "
            "acceleration | MuJoCo 1 thread | ours / (MuJoCo × cores) | MJX (steps/s) | compile (s) |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    body = ""
    for label, ours, off, mjx in rows:
        ratio = (f"{ours['ours_steps_per_s'] / off['ours_steps_per_s']:.2f}" if ours and off and
                 "ours_steps_per_s" in ours and "ours_steps_per_s" in off else "—")
        mk = mjx_key(mjx)
        body += (f"| {label} | {f(ours, 'batch')} | {f(ours, 'ours_steps_per_s')} | {f(off, 'ours_steps_per_s')} | "
                 f"{ratio} | {f(ours, 'mujoco_1thread_steps_per_s')} | {f(ours, 'ratio_vs_mujoco_all_cores', '{:.3f}')} | "
                 f"{f(mjx, mk) if mk else '—'} | {f(ours, 'compile_s', '{:.1f}')} |\n")
    text = head + body + "\nRaw JSON lines:\n\n```\n" + "\n".join(f"{k} {w} {json.dumps(d)}" for k, w, d in raw) + "\n```\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
