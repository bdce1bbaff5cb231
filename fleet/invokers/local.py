"""LocalInvoker: worker processes on this machine, each standing for one function instance.

Each worker is a process of its own, spawned (it shares no state with the coordinator), that
runs the worker entry point on one event at a time; a thread per worker feeds it calls from a
shared queue. Stopping a call (`cancel`) kills the process running it: only that call fails,
and a fresh process takes the worker's next call. A worker that dies fails only the call it
held. A process pool would not do: one dead worker breaks a ProcessPoolExecutor for every
call in flight.

Interrupted (Ctrl-C, or SIGTERM, which the command line turns into it) inside `with
LocalInvoker()`, the coordinator withdraws the calls waiting and kills the running ones. A
worker that a terminal's Ctrl-C reaches too, or whose coordinator is gone (even killed
outright), ends at once and quietly: no traceback, no BrokenPipeError.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time

from lakestats.fleet.invokers.base import Invocation, Invoker
from lakestats.fleet.protocol import WORKER_ENTRY, WORKER_WARM, InvocationError, resolve
from lakestats.metastore.s3 import end_process

_SPAWN = multiprocessing.get_context("spawn")   # forking a process with threads can hang


def _serve(conn, entry: str, warm: str | None) -> None:
    """A worker process: one event in, one (status, payload) out, until the pipe closes."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_end_with, args=(parent,), daemon=True,
                         name="lakestats-coordinator-watch").start()
    try:
        _calls(conn, entry, warm)
    except KeyboardInterrupt:       # a terminal's Ctrl-C reaches the whole process group
        pass
    end_process(0)      # no interpreter teardown (see end_process): no abort at exit


def _calls(conn, entry: str, warm: str | None) -> None:
    import pyarrow as pa
    pa.set_cpu_count(1)      # one process stands for one function: one core, no oversubscription
    run = resolve(entry)
    if warm:
        try:
            resolve(warm)()
        except Exception:  # noqa: BLE001 - only a head start: a call reports its own failure
            pass
    while True:
        try:
            event = conn.recv()
        except (EOFError, OSError):
            break
        try:
            reply = ("ok", run(event))
        except Exception as e:  # noqa: BLE001 - the step's failure goes back to the caller
            reply = ("error", f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except OSError:             # BrokenPipeError: the coordinator is gone
            break


def _end_with(parent) -> None:
    """The worker ends when its coordinator's process does, however it ended (the sentinel
    of multiprocessing's parent process reads end-of-file then)."""
    parent.join()
    os._exit(1)


class _Worker:
    """One worker process and the call it runs."""

    def __init__(self, entry: str, warm: str | None):
        self.entry, self.warm = entry, warm
        self.process = None
        self.conn = None
        self.current: Invocation | None = None
        self.stopped = False
        self.used = False
        self.aborted = False            # interrupted: no process starts any more

    def start(self) -> None:
        """A process, if none is alive: it imports the steps while the coordinator plans."""
        if self.aborted:
            raise InvocationError("stopped: interrupted")
        if self.process is None or not self.process.is_alive():
            self.conn, child = _SPAWN.Pipe()
            process = _SPAWN.Process(target=_serve, args=(child, self.entry, self.warm),
                                     daemon=True)
            process.start()
            self.process = process      # started: stop() from another thread may kill it
            child.close()
            if self.aborted:            # abort() came while it started
                process.kill()

    def run(self, event: dict, invocation: Invocation) -> dict:
        self.start()
        self.current, self.stopped, self.used = invocation, False, True
        invocation.started = time.monotonic()
        try:
            self.conn.send(event)
            status, payload = self.conn.recv()     # EOFError once the process is gone
        except (EOFError, OSError):
            self.process.join(5)
            self.process = None
            raise InvocationError("stopped: interrupted" if self.aborted
                                  else "stopped: ran too long" if self.stopped
                                  else "worker process died") from None
        finally:
            self.current = None
        if status == "error":
            raise InvocationError(payload)
        return payload

    def stop(self) -> None:
        """Kill the process (SIGKILL ends a stopped one too): its call fails at once."""
        self.stopped = True
        process = self.process       # run() may drop it meanwhile, from the worker's thread
        if process is not None:
            process.kill()

    def close(self) -> None:
        process = self.process
        if process is not None and process.is_alive():
            self.conn.close()                      # the process ends at its next receive
            process.join(5 if self.used else 0)    # one never used may still be importing
            if process.is_alive():
                process.kill()


class LocalInvoker(Invoker):
    def __init__(self, workers: int | None = None, entry: str = WORKER_ENTRY,
                 warm: str | None = WORKER_WARM):
        self.workers = workers or os.cpu_count() or 1
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._workers = [_Worker(entry, warm) for _ in range(self.workers)]
        self._threads = [threading.Thread(target=self._feed, args=(w,), daemon=True,
                                          name=f"lakestats-worker-{i}")
                         for i, w in enumerate(self._workers)]
        for t in self._threads:
            t.start()

    def submit(self, event: dict) -> Invocation:
        invocation = Invocation()
        self._calls.put((event, invocation))
        return invocation

    def __exit__(self, kind, *exc):
        if kind is not None and issubclass(kind, KeyboardInterrupt):     # Ctrl-C, SIGTERM
            self.abort()
        self.close()

    def abort(self) -> None:
        """Stop at once: the calls waiting are withdrawn, the running ones fail (their
        processes killed), and no process starts any more; close() then waits for none."""
        for worker in self._workers:
            worker.aborted = True
        while True:
            try:
                item = self._calls.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()
        for worker in self._workers:
            worker.stop()

    def _feed(self, worker: _Worker) -> None:
        try:
            worker.start()                         # warm: a call finds the steps imported
        except Exception:  # noqa: BLE001 - the first call tries again and reports the reason
            pass
        while (item := self._calls.get()) is not None:
            event, invocation = item
            if not invocation.set_running_or_notify_cancel():
                continue                           # withdrawn before it started
            try:
                invocation.set_result(worker.run(event, invocation))
            except InvocationError as e:
                invocation.set_exception(e)
            except Exception as e:  # noqa: BLE001 - e.g. no process could start: the call fails
                invocation.set_exception(InvocationError(f"{type(e).__name__}: {e}"))

    def cancel(self, invocation: Invocation) -> bool:
        for worker in self._workers:
            if worker.current is invocation:
                worker.stop()
                return True
        return invocation.cancel()

    def pids(self) -> list[int]:
        """Worker process ids (for operators and fault-injection tests)."""
        return [w.process.pid for w in self._workers
                if w.process is not None and w.process.is_alive()]

    def close(self) -> None:
        for _ in self._threads:
            self._calls.put(None)
        for t in self._threads:
            t.join()
        for w in self._workers:
            w.close()
