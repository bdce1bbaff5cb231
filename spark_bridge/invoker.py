"""SparkInvoker: steps run as Spark tasks, so a Spark cluster does the workers' part.

Calls submitted while a Spark job runs are gathered into the next job: one task per call. A
step's exception is caught inside its task and fails only that call. Spark runs a batch of
calls as one job, and one task cannot be stopped alone: `cancel` withdraws only calls not yet
handed to Spark, and for running ones returns False (the fan-out stops waiting for them).
"""
from __future__ import annotations

import queue
import sys
import threading
import time

from lakestats.fleet.invokers import Invocation, Invoker
from lakestats.fleet.protocol import InvocationError
from lakestats.functions import worker

GATHER_SECONDS = 0.05


def run_task(event: dict) -> dict:
    """The Spark task function: the worker entry point, its failure caught as data."""
    try:
        return {"ok": worker.run(event)}
    except Exception as e:  # noqa: BLE001 - reported per call, the Spark job goes on
        return {"error": f"{type(e).__name__}: {e}"}


def local_session(master: str | None = None, workers: int | None = None):
    """The active SparkSession, or a local one (master `master`, else local[workers])."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise RuntimeError("--invoker spark needs PySpark: "
                           "pip install 'lakestats[spark]'") from None
    import os
    # workers import lakestats: they run this interpreter (the JVM a new session starts reads
    # PYSPARK_PYTHON; spark.pyspark.python set here comes too late for local workers)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master(master or f"local[{workers or os.cpu_count() or 1}]")
               .appName("lakestats").config("spark.ui.showConsoleProgress", "false")
               .config("spark.pyspark.python", sys.executable)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkInvoker(Invoker):
    def __init__(self, spark, workers: int | None = None):
        self.spark = spark
        self.workers = workers or spark.sparkContext.defaultParallelism
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="spark-invoker", daemon=True)
        self._thread.start()

    @property
    def window(self) -> int:
        """Spark runs what it is handed as one job: large batches keep its per-job overhead
        small."""
        return max(256, 4 * self.workers)

    def submit(self, event: dict) -> Invocation:
        invocation = Invocation()
        self._queue.put((event, invocation))
        return invocation

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            if batch[0] is None:
                return
            time.sleep(GATHER_SECONDS)      # calls come in bursts: let the burst arrive
            while not self._queue.empty():
                batch.append(self._queue.get())
            stop = batch[-1] is None
            self._run([(e, inv) for e, inv in (item for item in batch if item is not None)
                       if inv.set_running_or_notify_cancel()])
            if stop:
                return

    def _run(self, batch: list) -> None:
        if not batch:
            return
        events = [event for event, _ in batch]
        started = time.monotonic()
        for _, invocation in batch:
            invocation.started = started
        try:
            sc = self.spark.sparkContext
            sc.setJobDescription(f"lakestats: {len(events)} steps")
            results = sc.parallelize(events, len(events)).map(run_task).collect()
        except Exception as e:  # noqa: BLE001 - the whole Spark job failed: every call retries
            for _, invocation in batch:
                invocation.set_exception(InvocationError(f"Spark job failed: {e}"))
            return
        for (_, invocation), result in zip(batch, results):
            if "ok" in result:
                invocation.set_result(result["ok"])
            else:
                invocation.set_exception(InvocationError(result["error"]))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
