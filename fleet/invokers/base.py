"""The invoker interface: run a StepEvent's JSON on a worker somewhere, get an Invocation.

Backends, one module each: local processes, AWS Lambda (and Spark tasks, in spark_bridge).
Nothing backend-specific leaks into the fan-out, which only submits, waits and cancels.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future


class Invocation(Future):
    """A call in flight: a Future of the step's JSON result, and the monotonic time the call
    started to run on a worker (None while it waits for one: waiting is not running late)."""
    started: float | None = None


class Invoker(ABC):
    workers: int        # calls that run at once

    @property
    def window(self) -> int:
        """How many calls the fan-out hands over at a time: enough to keep every worker busy
        while results travel back."""
        return 2 * self.workers

    @abstractmethod
    def submit(self, event: dict) -> Invocation:
        """Run the worker entry point (fleet.protocol.WORKER_ENTRY) on `event`."""

    def cancel(self, invocation: Invocation) -> bool:
        """Stop a call that runs too long, failing only it. The default only withdraws calls
        that have not started; a backend that cannot stop a running call returns False, and
        the fan-out stops waiting for it instead."""
        return invocation.cancel()

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
