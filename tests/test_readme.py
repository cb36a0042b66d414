"""The README is a newcomer's front page: short, its first command near the top, no words of the project's
tracker and no paths outside the repository, its test command the one CI runs, its speed table the one
``experiments/readme_speed_table.py`` generates from ``experiments/out/``; every ``mrds-jax`` command shown in
it and in ``docs/getting_started.md`` is one the command line accepts (parsed, not run)."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mrds_jax.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import readme_speed_table as table  # noqa: E402

README = (ROOT / "README.md").read_text()
TEST_COMMAND = "python -m pytest -q -n 2 --dist loadfile --timeout=900"
FULL_MODE_COMMAND = "MRDS_SLOW=1 " + TEST_COMMAND
SHOWN_IN = ("README.md", "docs/getting_started.md")


def code_blocks(text):
    """The lines inside fenced code blocks."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def cli_commands(text):
    """The argument lists of the ``mrds-jax`` / ``python -m mrds_jax`` commands in code blocks and code spans."""
    found = []
    candidates = code_blocks(text) + re.findall(r"`([^`\n]*(?:mrds-jax|python -m mrds_jax)[^`\n]*)`", text)
    for line in candidates:
        line = line.split(" #")[0]
        for part in re.split(r"&&|;", line):
            words = shlex.split(part.strip())
            if words[:1] == ["mrds-jax"]:
                found.append(words[1:])
            elif words[:3] == ["python", "-m", "mrds_jax"] or words[:3] == ["python3", "-m", "mrds_jax"]:
                found.append(words[3:])
    return found


def accepts(args):
    """Whether the ``mrds-jax`` argument parser accepts ``args`` (nothing runs)."""
    try:
        build_parser().parse_args(args)
    except SystemExit as e:
        return e.code == 0
    return True


def test_readme_is_short_with_its_first_command_near_the_top():
    lines = README.splitlines()
    assert len(lines) <= 120, len(lines)
    first_fence = next(i for i, line in enumerate(lines, 1) if line.startswith("```bash"))
    assert first_fence + 1 <= 25 and "mrds-jax" in lines[first_fence], lines[first_fence]


def test_readme_has_no_tracker_words_or_outside_paths():
    assert not re.search(r"\bissues? \d+", README, re.I)
    assert "../" not in README and "shared/" not in README


def test_readme_test_command_is_the_one_ci_runs():
    """CI runs the README's test command, then the full mode (the same command with MRDS_SLOW=1, which the README
    names) restricted to the checks the first run skipped, less the heavy ones (``-m "slow and not heavy"``)."""
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().strip().splitlines() if ln and not ln.startswith("#")]
    assert ci[-2:] == [TEST_COMMAND, FULL_MODE_COMMAND + ' -m "slow and not heavy"']
    assert any(line.endswith("&& " + TEST_COMMAND) for line in code_blocks(README))
    assert f"`{FULL_MODE_COMMAND}`" in README


def test_readme_shows_the_main_job_and_links_the_docs():
    assert any(line.endswith("pip install . && mrds-jax optimize --out ckcm_design") for line in code_blocks(README))
    for page in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / page).exists(), page
    assert re.search(r"!\[[^\]]+\]\((docs/[^)]+\.png)\)", README)


def test_readme_example_runs_and_closes_its_loop():
    """The README's Python example, run as a reader would (a fresh interpreter): the loop gap and the energy
    drift it prints are small."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) == 1 and len(blocks[0].splitlines()) <= 20
    run = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    gap, drift = (float(x) for x in run.stdout.split())
    assert gap < 1e-8 and abs(drift) < 1e-6, (gap, drift)


def test_readme_speed_table_is_the_generated_one():
    assert table.current_table(README) == table.speed_table()


@pytest.mark.parametrize("page", SHOWN_IN)
def test_every_command_shown_is_accepted_by_the_cli(page):
    commands = cli_commands((ROOT / page).read_text())
    assert len(commands) >= 3, commands
    rejected = [" ".join(c) for c in commands if not accepts(c)]
    assert not rejected, rejected


def test_command_finder_and_parser_see_a_wrong_command():
    text = "```bash\npip install . && mrds-jax optimise --out x   # typo\nmrds-jax check\n```\nrun `mrds-jax frob`"
    commands = cli_commands(text)
    assert commands == [["optimise", "--out", "x"], ["check"], ["frob"]]
    assert not any(accepts(c) for c in commands)
    assert accepts(["simulate", "fourbar", "--out", "run"]) and accepts(["optimize", "--help"])


BENCH = """# Engine bars

x86_64, 2 cores, jax 0.11.0, mujoco 4.0.0; XLA_FLAGS ''; load average before: 0.50

## Stewart platform, batch 4096

| engine | dtype | integrator | path | steps/s | / (MuJoCo 1 thread × cores) | compile s |
| --- | --- | --- | --- | --- | --- | --- |
| MuJoCo mj_step (soft loops) | float64 | Euler | - | 1e+05 | 0.50 | - |
| mrds_jax (exact loops) | float32 | euler | auto (lilly) | 4e+05 | 2.00 | 5.0 |
| other engine | float32 | euler | auto (lilly) | 9e+09 | 9.00 | 9.0 |

| path | step | steps/s |
| --- | --- | --- |
| auto | lanewise | 1e+05 |

## Dual-arm grasp, batch 1024

| path | integrator | dtype | engine | compile s | steps/s | / (MuJoCo 1 thread × cores) |
| --- | --- | --- | --- | --- | --- | --- |
| general (general) | rk4_compact | float64 | mrds_jax (exact loops) | 12.0 | 3e+03 | 0.10 |
"""


def test_speed_table_picks_rows_by_label_in_every_section(tmp_path):
    (tmp_path / "a.md").write_text(BENCH)
    (tmp_path / "b.md").write_text(BENCH.replace("jax 0.11.0", "jax 0.9.2 (2026-12-01)").replace("4e+05", "3e+05"))
    out = table.speed_table(("a.md", "b.md"), root=tmp_path)
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == [
        "| Stewart platform | MuJoCo mj_step (soft loops) | float64 | Euler | - | 1e+05 | 1e+05 | 0.50 | 0.50 | - | - |",
        "| Stewart platform | mrds_jax (exact loops) | float32 | euler | auto (lilly) | 4e+05 | 3e+05 | 2.00 | 2.00 "
        "| 5.0 | 5.0 |",
        "| Dual-arm grasp | mrds_jax (exact loops) | float64 | rk4_compact | general (general) | 3e+03 | 3e+03 | 0.10 "
        "| 0.10 | 12.0 | 12.0 |"]
    assert "steps/s (jax 0.11.0) | steps/s (jax 0.9.2)" in out and "x86_64, 2 cores" in out
    assert "Dual-arm grasp, batch 1024" in out and "load average 0.50" in out
    assert "load average 0.50, 2026-12-01 (`b.md`)" in out          # a date in the file's header wins


def test_speed_table_is_replaced_between_the_markers_only():
    text = f"top\n{table.START}\nold\n{table.END}\nbottom\n"
    new = table.replace_between_markers(text, "new table")
    assert new == f"top\n{table.START}\nnew table\n{table.END}\nbottom\n"
    assert table.current_table(new) == "new table"
