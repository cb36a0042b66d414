"""The README's speed table, generated from the engine benchmarks in ``experiments/out/`` (never typed by hand).

``python experiments/readme_speed_table.py`` rewrites the lines between ``<!-- speed-table:start -->`` and
``<!-- speed-table:end -->`` in README.md; ``--check`` only says whether they are up to date (exit status 1 when
not). The rows are picked by their labels (engine, dtype, integrator, path) from every ``##`` section of
``bench_engine_jax<version>.md`` whose table has those columns, so sections and rows added to the benchmark files
appear without a change here. ``tests/test_readme.py`` checks that the README's table is what this script
produces from the committed files. The date of each measurement is the ISO date in the file's header if it has
one, else the date the file was last committed (or, while it is changed and not committed, written): regenerate
the table after committing new benchmark files if the day changed in between.
"""
import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("experiments/out/bench_engine_jax0.10.2.md", "experiments/out/bench_engine_jax0.9.2.md")
START, END = "<!-- speed-table:start -->", "<!-- speed-table:end -->"
LABELS = ("engine", "dtype", "integrator", "path")
# (engine prefix, path prefix): the rows shown; None matches anything
SELECT = (("MuJoCo", None), ("mrds_jax", "auto"), ("mrds_jax", "general"))
RATIO_PREFIX = "/ (MuJoCo"


def split_row(line):
    """The cells of one markdown table row."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def sections(text):
    """[(heading, lines)] for each ``##`` section of a markdown file (the text before the first: heading '')."""
    out, heading, lines = [], "", []
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((heading, lines))
            heading, lines = line[3:].strip(), []
        else:
            lines.append(line)
    out.append((heading, lines))
    return out


def tables(lines):
    """Every markdown table in ``lines`` as a list of {column: cell} rows."""
    found, block = [], []
    for line in lines + [""]:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2 and re.fullmatch(r"[\s|:-]+", block[1]):
            header = split_row(block[0])
            found.append([dict(zip(header, split_row(row))) for row in block[2:]])
        block = []
    return found


def selected(row):
    """Whether a benchmark row is one the README shows (by its engine and path labels)."""
    return any(row.get("engine", "").startswith(engine) and (path is None or row.get("path", "").startswith(path))
               for engine, path in SELECT)


def ratio_column(row):
    """The name of the row's 'ours / (MuJoCo x cores)' column."""
    return next((k for k in row if k.startswith(RATIO_PREFIX)), None)


def machine(text):
    """'x86_64, 2 cores, jax 0.10.2, mujoco 4.0.0' and the load average, from a benchmark file's first lines."""
    line = next((ln for ln in text.splitlines() if " cores" in ln), "")
    load = re.search(r"load average before: ([\d.]+)", line)
    return line.split(";")[0].strip(), load.group(1) if load else "?"


def jax_version(text, path):
    """The jax version the benchmark ran on (its header, else the file name)."""
    found = re.search(r"jax (\d+\.\d+\.\d+)", text) or re.search(r"jax(\d+\.\d+\.\d+)", Path(path).name)
    return found.group(1) if found else "?"


def _git(args, root):
    """stdout of a git command in ``root`` ('' when git is missing or fails)."""
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def measured_on(text, path, root=ROOT):
    """The date of the measurement: an ISO date in the file's first lines; else, for a file changed since the last
    commit (just regenerated), its modification date; else the date of the last commit that changed it."""
    found = re.search(r"\b(20\d\d-\d\d-\d\d)\b", "\n".join(text.splitlines()[:4]))
    if found:
        return found.group(1)
    if _git(["status", "--porcelain", "--", str(path)], root):
        return datetime.date.fromtimestamp((Path(root) / path).stat().st_mtime).isoformat()
    return _git(["log", "-1", "--format=%cs", "--", str(path)], root) or "unknown date"


def benchmark_rows(text):
    """[(heading, row)] of the selected rows of every labelled table, with its section's heading."""
    out = []
    for heading, lines in sections(text):
        for table in tables(lines):
            if table and all(k in table[0] for k in LABELS):
                out += [(heading, row) for row in table if selected(row)]
    return out


def measurements(sources=SOURCES, root=ROOT):
    """{jax version: (text, [(heading, row)])} for each benchmark file, in the order given."""
    out = {}
    for source in sources:
        text = (root / source).read_text()
        rows = benchmark_rows(text)
        if not rows:
            raise ValueError(f"{source}: no benchmark rows labelled {LABELS}")
        out[jax_version(text, source)] = (source, text, rows)
    return out


def merged_rows(found):
    """{(system, engine, dtype, integrator, path): {version: row}}, keys in order of first appearance."""
    merged = {}
    for version, (_, _, rows) in found.items():
        for heading, row in rows:
            key = (heading.split(",")[0],) + tuple(row[k] for k in LABELS)
            merged.setdefault(key, {})[version] = row
    return merged


def cell(row, column):
    """One value of a benchmark row ('-' where the row or the column is missing)."""
    if row is None:
        return "-"
    if column == "ratio":
        column = ratio_column(row) or ""
    return row.get(column, "-")


def speed_table(sources=SOURCES, root=ROOT):
    """The markdown (without the markers) that stands between the README's speed-table markers."""
    found = measurements(sources, root)
    versions = list(found)
    header = ["system"] + list(LABELS) + [f"{what} (jax {v})" for what in ("steps/s", "/ MuJoCo", "compile s")
                                          for v in versions]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for key, by_version in merged_rows(found).items():
        values = [cell(by_version.get(v), column) for column in ("steps/s", "ratio", "compile s") for v in versions]
        lines.append("| " + " | ".join(list(key) + values) + " |")
    headings = list(dict.fromkeys(h for _, _, rows in found.values() for h, _ in rows))
    notes = []
    for version, (source, text, _) in found.items():
        where, load = machine(text)
        notes.append(f"jax {version}: {where}, load average {load}, {measured_on(text, source, root)} "
                     f"(`{source}`)")
    return "\n".join(lines + ["", "; ".join(headings) + ". Measured on " + "; ".join(notes) + ". Generated by "
                              "`python experiments/readme_speed_table.py` from `python experiments/bench_engine.py`'s "
                              "outputs."])


def replace_between_markers(text, body):
    """``text`` with the lines between the speed-table markers replaced by ``body``."""
    start, end = text.index(START) + len(START), text.index(END)
    return text[:start] + "\n" + body + "\n" + text[end:]


def current_table(text):
    """What stands between the README's markers now."""
    return text[text.index(START) + len(START):text.index(END)].strip("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether README.md is up to date")
    args = parser.parse_args(argv)
    readme = ROOT / "README.md"
    text, body = readme.read_text(), speed_table()
    if args.check:
        fresh = current_table(text) == body
        print("README speed table is up to date" if fresh else "README speed table is stale: rerun without --check")
        return 0 if fresh else 1
    readme.write_text(replace_between_markers(text, body))
    print(f"wrote the speed table into {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
