"""LocalInvoker: a pool of worker processes calling the Lambda handler with the same JSON event.

A worker that dies (killed, out of memory) breaks a ProcessPoolExecutor for every task in flight;
the invoker then fails those futures with InvocationError and starts a fresh pool for what follows,
so the coordinator's retries carry the job through.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from functions.handlers import handle
from monostore.invokers.base import InvocationError, Invoker


def _one_thread_per_worker() -> None:
    """Each worker process stands for one function: parallelism comes from the processes, and
    Arrow's own thread pool in every one of them would only oversubscribe the cores."""
    import pyarrow as pa
    pa.set_cpu_count(1)


class LocalInvoker(Invoker):
    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None or self._pool._broken:
                # spawn, not fork: forking a process that holds S3 clients and threads can hang
                self._pool = ProcessPoolExecutor(self.workers,
                                                 mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_one_thread_per_worker)
            return self._pool

    def submit(self, event: dict) -> Future:
        out: Future = Future()
        try:
            inner = self._executor().submit(handle, event)
        except BrokenProcessPool as e:
            out.set_exception(InvocationError(f"worker pool broken: {e}"))
            return out

        def relay(f: Future) -> None:
            try:
                out.set_result(f.result())
            except BrokenProcessPool:
                out.set_exception(InvocationError("worker process died"))
            except Exception as e:  # the handler raised: report it as the invocation's failure
                out.set_exception(InvocationError(f"{type(e).__name__}: {e}"))
        inner.add_done_callback(relay)
        return out

    def pids(self) -> list[int]:
        """Worker process ids (for operators and fault-injection tests)."""
        pool = self._pool
        return list(pool._processes) if pool and pool._processes else []

    def restart(self) -> None:
        for pid in self.pids():      # SIGKILL also ends a stopped (SIGSTOP) process
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
