"""SparkInvoker: worker events run as Spark tasks, so a Spark cluster computes the statistics.

Events submitted while a Spark job runs are gathered into the next job: one task per event.
A handler's exception is caught inside its task and fails only that event's future.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future

from monostore.invokers.base import InvocationError, Invoker

GATHER_SECONDS = 0.05


def _run_event(event: dict) -> dict:
    from functions.handlers import handle
    try:
        return {"ok": handle(event)}
    except Exception as e:  # noqa: BLE001 - reported per event, the Spark job goes on
        return {"error": f"{type(e).__name__}: {e}"}


class SparkInvoker(Invoker):
    def __init__(self, spark, workers: int | None = None):
        self.spark = spark
        self.workers = workers or spark.sparkContext.defaultParallelism
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="spark-invoker", daemon=True)
        self._thread.start()

    def submit(self, event: dict) -> Future:
        future: Future = Future()
        self._queue.put((event, future))
        return future

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            if batch[0] is None:
                return
            time.sleep(GATHER_SECONDS)      # events come in bursts: let the burst arrive
            while not self._queue.empty():
                batch.append(self._queue.get())
            stop = batch[-1] is None
            batch = [item for item in batch if item is not None]
            self._run(batch)
            if stop:
                return

    def _run(self, batch: list) -> None:
        events = [event for event, _ in batch]
        try:
            sc = self.spark.sparkContext
            sc.setJobDescription(f"lakestats: {len(events)} partition events")
            results = sc.parallelize(events, len(events)).map(_run_event).collect()
        except Exception as e:  # noqa: BLE001 - the whole Spark job failed: every event retries
            for _, future in batch:
                future.set_exception(InvocationError(f"Spark job failed: {e}"))
            return
        for (_, future), result in zip(batch, results):
            if "ok" in result:
                future.set_result(result["ok"])
            else:
                future.set_exception(InvocationError(result["error"]))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
