"""Child processes for the kill-and-resume tests (test_checkpoints.py, test_ckcm_design.py)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).parent


def kill_when_ready(script, args, marker, timeout=300):
    """Run ``script`` in a child Python, SIGKILL it as soon as it prints ``marker``; return the child's output."""
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={**os.environ, "PYTHONPATH": str(TESTS.parent)})
    lines, t0 = [], time.monotonic()
    try:
        for line in child.stdout:
            lines.append(line)
            if marker in line:
                child.send_signal(signal.SIGKILL)
                break
            assert time.monotonic() - t0 < timeout, "".join(lines)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL, "".join(lines)[-3000:]
    return "".join(lines)
