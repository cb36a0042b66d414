"""A worker that dies in native code: its stack is kept, the test it was running is run once more, and the run ends.

pytest-xdist 3.8's file scheduler (``--dist loadfile``) has two faults when a worker process dies (pytest-xdist
issues #784, #1323, #1371): it hands the replacement worker the dead worker's finished files again, with nothing
left to run in them, and the replacement then waits for work forever (a CI run of this suite hung until its 90-minute
limit this way after a segmentation fault, 2026-11-25); and it keeps the test that crashed pending, so a test that
crashes every time takes down every replacement. Here, as pytest-rerunfailures does for crashes and as
pytest-xdist's open pull request #1371 proposes:

- the dead worker's unfinished files only go back on the queue (``requeue_unfinished``);
- the test it was running is reported ``RERUN`` the first time and run once more by the replacement, and ``FAILED``
  if it crashes again (then it is not run a third time);
- each worker writes Python's fault handler output (every thread's stack at the crash) to
  ``.pytest_faults/<worker>.log``; the crash report carries the dead worker's log, and the terminal summary lists
  every crash with it, rerun or not, so no crash goes unseen.

tests/conftest.py imports these hooks; they do nothing unless a worker dies.
"""
import faulthandler
import os
from pathlib import Path

import pytest

FAULTS = Path(__file__).resolve().parent.parent / ".pytest_faults"
_crashed = {}          # node id -> the dead worker's fault log, on the controller


def _unit_of(workload, nodeid):
    return next((scope for scope, unit in workload.items() if nodeid in unit), None)


def requeue_unfinished(self, node):
    """``LoadScopeScheduling.remove_node`` with its crash faults fixed (see the module docstring)."""
    workload = self.assigned_work.pop(node)
    if not self._pending_of(workload):
        return None
    crashitem = next(nid for unit in workload.values() for nid, done in unit.items() if not done)
    if crashitem in _crashed:              # it crashed before: it has had its second run
        workload[_unit_of(workload, crashitem)][crashitem] = True
    self.workqueue.update({scope: unit for scope, unit in workload.items() if not all(unit.values())})
    for other in self.assigned_work:
        self._reschedule(other)
    return crashitem


def pytest_configure(config):
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope", "loadgroup"):
        from xdist.scheduler.loadscope import LoadScopeScheduling
        LoadScopeScheduling.remove_node = requeue_unfinished


def pytest_sessionstart(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        FAULTS.mkdir(exist_ok=True)
        session.config._fault_log = open(FAULTS / f"{worker}.log", "w")
        faulthandler.enable(file=session.config._fault_log, all_threads=True)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    log = FAULTS / f"{report.node.gateway.id}.log"
    stack = log.read_text() if log.exists() else "(the worker left no fault log)"
    first = crashitem not in _crashed
    _crashed[crashitem] = stack
    report.longrepr = f"{report.longrepr}\n{stack}"
    if first:
        report.outcome = "rerun"


def pytest_report_teststatus(report, config):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})


def pytest_terminal_summary(terminalreporter):
    for nodeid, stack in _crashed.items():
        terminalreporter.write_sep("=", f"worker crashed while running {nodeid}")
        terminalreporter.write_line(stack[-6000:])
