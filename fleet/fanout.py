"""The one fan-out: every step of every algorithm runs its calls through here.

At most `invoker.window` calls are handed to the invoker at a time (a few per worker), so the
fan-out's bookkeeping costs the calls in flight, not the step's 10,000 partitions.

Each call's attempts are counted in the job's Redis records. A call that fails is retried
until it has had `max_attempts`; one that the backend throttles is retried after a pause and
not counted. A call that has run longer than `timeout` (counted from when it started on a
worker, not from when it was queued) is cancelled alone, through the invoker, and retried; the
calls in flight beside it go on with their attempts. Where the backend cannot stop a running
call (AWS Lambda, Spark), the fan-out stops waiting for it: steps are idempotent, each call
rewriting its own outputs, so a late finish is harmless. When an invocation fails after its
step was done, the worker's own record of the result in Redis is taken.
"""
from __future__ import annotations

import collections
import random
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass
from typing import Callable

from lakestats.fleet.invokers.base import Invocation, Invoker
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import StepEvent, StepFailed, Throttled

# (done, total, label): how far a step has come
Progress = Callable[..., None]
THROTTLE_PAUSE = (0.2, 20.0)       # seconds: first pause, longest pause (doubling, with jitter)
MAX_THROTTLES = 12


@dataclass
class Outcome:
    result: object = None           # the step's typed result
    error: str | None = None        # why the call failed for good
    attempts: int = 0


def fan_out(invoker: Invoker, scope: JobScope, events: list[StepEvent], *, max_attempts: int,
            timeout: float, fail_fast: bool = True, progress: Progress | None = None,
            label: str | None = None,
            on_result: Callable[[int, object], None] | None = None) -> list[Outcome]:
    """Run every event's call and wait for all; outcomes in the events' order. `fail_fast`:
    a call out of attempts raises StepFailed (the others are withdrawn); otherwise its
    outcome carries the error. `on_result(i, result)` sees each result as it arrives."""
    events = [scope.stamp(e) for e in events]
    outcomes = [Outcome() for _ in events]
    waiting = collections.deque(range(len(events)))   # not yet handed to the invoker
    pending: dict[Invocation, int] = {}
    paused: list[tuple[float, int]] = []           # (when to resubmit, call) after throttling
    throttles = [0] * len(events)
    finished = 0

    def submit(i: int, attempt: bool = True) -> None:
        if attempt:
            outcomes[i].attempts = scope.job.attempt(events[i])
        pending[invoker.submit(events[i].to_json())] = i

    def finish() -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(finished, len(events), label)

    def failed(i: int, error: str) -> None:
        if outcomes[i].attempts < max_attempts:
            submit(i)
            return
        if fail_fast:
            for invocation in pending:
                invoker.cancel(invocation)
            raise StepFailed(f"{events[i].name} {events[i].call}: {error}")
        outcomes[i].error = error
        finish()

    def succeeded(i: int, result) -> None:
        outcomes[i].result = result
        if on_result:
            on_result(i, result)
        finish()

    def lost(i: int, error: str) -> None:
        """The call failed, or was given up: unless the worker recorded its result anyway."""
        recorded = scope.job.result(events[i])
        if recorded is None:
            failed(i, error)
        else:
            succeeded(i, events[i].result_from_json(recorded))

    def arrived(i: int, invocation: Invocation) -> None:
        try:
            result = events[i].result_from_json(invocation.result())
        except Throttled as e:
            throttles[i] += 1
            if throttles[i] > MAX_THROTTLES:
                failed(i, f"throttled {throttles[i]} times: {e}")
                return
            pause = min(THROTTLE_PAUSE[1], THROTTLE_PAUSE[0] * 2 ** throttles[i])
            paused.append((time.monotonic() + pause * random.uniform(0.5, 1.0), i))
        except Exception as e:  # noqa: BLE001 - any failure of the call: retried, then reported
            lost(i, str(e) or type(e).__name__)
        else:
            succeeded(i, result)

    while waiting or pending or paused:
        while waiting and len(pending) < invoker.window:
            submit(waiting.popleft())
        now = time.monotonic()
        for entry in [p for p in paused if p[0] <= now]:
            paused.remove(entry)
            submit(entry[1], attempt=False)
        deadlines = [inv.started + timeout for inv in pending if inv.started is not None]
        wake = min([now + 1.0, *deadlines, *(p[0] for p in paused)])
        if pending:
            done, _ = wait(list(pending), timeout=max(0.01, wake - now),
                           return_when=FIRST_COMPLETED)
        else:                                      # only paused calls: sleep until one is due
            time.sleep(max(0.0, wake - now))
            done = set()
        for invocation in done:
            arrived(pending.pop(invocation), invocation)
        now = time.monotonic()
        for invocation in [inv for inv in pending if inv.started is not None
                           and now - inv.started > timeout]:
            stopped = invoker.cancel(invocation)
            lost(pending.pop(invocation), f"timed out after {timeout:g} s"
                 + ("" if stopped else " (left running: it cannot be stopped)"))
    if events:
        scope.check(events[0].name)
    return outcomes


def results(outcomes: list[Outcome]) -> list:
    return [o.result for o in outcomes]


def retries(outcomes: list[Outcome]) -> int:
    return sum(max(0, o.attempts - 1) for o in outcomes)
