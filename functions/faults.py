"""Faults a worker injects into itself, for the fault tests of the local stack (infra.faults
writes the plan). Inert unless LAKESTATS_FAULTS names a plan file when the worker starts.

A plan is a JSON list of faults: {"step": "frequencies.send", "moment": "before" | "after" |
"during", "action": "kill" | "sleep", "times": n, "seconds": s}. "before" is before the step
runs, "after" once its result is recorded in Redis, "during" `seconds` into the step (a
kill, on a timer). "sleep" holds the step back `seconds`. Each fault fires `times` times across all worker processes: a firing claims a marker
file beside the plan, created exclusively.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

PLAN = os.environ.get("LAKESTATS_FAULTS")


def _faults(step: str, moment: str) -> list[tuple[int, dict]]:
    if not PLAN:
        return []
    with open(PLAN) as f:
        return [(i, fault) for i, fault in enumerate(json.load(f))
                if fault["step"] == step and fault.get("moment", "before") == moment]


def _claim(i: int, fault: dict) -> bool:
    for n in range(fault.get("times", 1)):
        try:
            os.close(os.open(f"{PLAN}.{i}.{n}.fired", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            continue
    return False


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def at(step: str, moment: str) -> None:
    """Fire the plan's faults for `step` at `moment` ("before" or "after")."""
    for i, fault in _faults(step, moment):
        if _claim(i, fault):
            if fault.get("action", "kill") == "kill":
                _kill()
            time.sleep(fault.get("seconds", 1.0))


def during(step: str) -> threading.Timer | None:
    """Arm the plan's "during" faults for `step`; cancel the timer when the step ends."""
    for i, fault in _faults(step, "during"):
        if _claim(i, fault):
            timer = threading.Timer(fault.get("seconds", 0.2), _kill)
            timer.daemon = True
            timer.start()
            return timer
    return None
