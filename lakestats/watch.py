"""`lakestats watch`: the serverless event flow on any SQS queue (moto's server, localstack, AWS).

Long-polls the queue that S3 notifies and calls the Lambda handler with the SQS event payload a
Lambda function would get; messages the handler reports as failed stay in the queue and come
back. A batch records its tables' changes as pending in Redis (fleet.windows) before it
answers, and only then are its messages deleted. The watcher reduces every pending table it
watches once its window closes, whoever recorded the changes: at start and at every poll, so a
reduction whose watcher died (a stopped one too) is taken over once that watcher's compute lock
has expired (LOCK_TTL after its last heartbeat). No change is lost with a watcher, whenever it
dies. A table left inexact by incremental versions is refolded exact once it has been quiet
for settings.exact_after seconds (monostore.reductions.refold), when no batch is in flight
and no reduction pending.

It logs one line per table version (the files it added, changed and removed to the version it
was built from) and one per batch once a version holds it (its files, rows, and the seconds
from its newest file's arrival to that version): text on a terminal, else JSON with
aws-lambda-powertools' keys (level, location, message, timestamp, service) and the line's own.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from typing import IO, Callable

import boto3

from lakestats.core.settings import Settings
from lakestats.fleet import windows
from lakestats.fleet.invokers.local import LocalInvoker
from lakestats.fleet.protocol import StepEvent, from_json
from lakestats.functions.lambda_handlers import Touched
from lakestats.local_lambda import ENTRY, SQS_BATCH, BatchResult, BatchTask, checkpoint
from lakestats.monostore.reductions import reduce_pending, refold
from lakestats.monostore.report import Report

BUSY_SECONDS = 2.0      # a table another compute holds is looked at again after this
# SQS long-polls whole seconds: a reduction due within one is looked for this often instead
NOTICE_SECONDS = 0.05


def lambda_event(messages: list[dict], queue_arn: str, region: str) -> dict:
    """SQS messages as the Records of a Lambda SQS event."""
    return {"Records": [{
        "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
        "attributes": m.get("Attributes", {}), "messageAttributes": {},
        "md5OfBody": m.get("MD5OfBody", ""), "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn, "awsRegion": region} for m in messages]}


def watch(queue_url: str, settings: Settings, *, wait_seconds: int = 5,
          visibility_seconds: int = 120, stop: Callable[[], bool] = lambda: False,
          on_reduced: Callable[[dict], None] | None = None,
          log: IO[str] | None = None) -> None:
    """Run until `stop()` says so (Ctrl-C from the command line); lines go to `log` (default
    stdout). Needs settings.redis_url and settings.tables."""
    # one pool of workers: batches run in it side by side, as concurrent Lambda invocations
    # would, and so do the reductions' steps (its entry point runs both)
    with LocalInvoker(settings.workers, entry=ENTRY) as invoker:
        watcher = _Watcher(queue_url, settings, visibility_seconds, invoker, on_reduced,
                           WatchLog(log or sys.stdout))
        while not stop():
            watcher.step(wait_seconds)
        watcher.drain()


class _Watcher:
    def __init__(self, queue_url: str, settings: Settings, visibility_seconds: int, invoker,
                 on_reduced, log: WatchLog):
        self.sqs = boto3.client("sqs")
        self.queue_url, self.visibility, self.invoker = queue_url, visibility_seconds, invoker
        self.settings, self.on_reduced, self.log = settings, on_reduced, log
        self.arn = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[
            "QueueArn"])["Attributes"]["QueueArn"]
        self.window = settings.reduce_window
        self.later: dict[str, float] = {}       # table -> not before (busy, or failing)
        self.quiet: list[str] = []              # tables inexact and quiet: to refold
        # batches no version holds yet, with when they were received and handled (epoch)
        self.unpublished: dict[str, list[tuple[Touched, float, float]]] = {}
        self.batches: dict[Future, list[dict]] = {}
        self.received: dict[Future, float] = {}

    def step(self, wait_seconds: int) -> None:
        """Collect finished batches, start a new one if a worker is free (long-polling only
        when nothing runs), run due reductions."""
        for future in [f for f in self.batches if f.done()]:
            self._finished(future, self.batches.pop(future))
        due = self._due()
        if len(self.batches) < self.invoker.workers:
            now = time.time()
            wait = 0 if self.batches else min(
                [wait_seconds] + [max(0.0, at - now) for at in due.values()])
            received = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                WaitTimeSeconds=math.floor(wait), VisibilityTimeout=self.visibility,
                AttributeNames=["All"]).get("Messages", [])
            if received:
                checkpoint("watch.received")
                task = BatchTask(lambda_event(received, self.arn, self.sqs.meta.region_name),
                                 self.visibility, self.settings.to_json())
                event = StepEvent(SQS_BATCH, "batch", task, redis_url=self.settings.redis_url)
                future = self.invoker.submit(event.to_json())
                self.batches[future], self.received[future] = received, time.time()
                future.add_done_callback(lambda f: setattr(f, "ended", time.time()))
            elif self.batches:
                wait_futures(self.batches, timeout=0.2, return_when=FIRST_COMPLETED)
            elif wait < 1:
                time.sleep(min(wait, NOTICE_SECONDS))
        else:
            wait_futures(self.batches, timeout=1, return_when=FIRST_COMPLETED)
        for table, at in due.items():
            # a reduction waits for the batches in flight, but never more than a window
            if time.time() >= at + (self.window if self.batches else 0):
                self._reduce(table)
        # refolds give way to changes: only with no batch in flight and nothing pending
        for table in self.quiet if not (self.batches or due) else ():
            if time.time() >= self.later.get(table, 0.0):
                self._reduce(table, refolding=True)

    def _due(self) -> dict[str, float]:
        """When each watched table with pending changes may be reduced; batches that a
        version now holds are logged."""
        state = windows.state(self.settings.redis_url, self.settings.tables)
        self._published(state, None)
        self.quiet = [t for t, found in state.items()
                      if found.quiet(self.settings.exact_after, time.time())]
        return {t: max(found.at, self.later.get(t, 0.0)) for t, found in state.items()
                if found.waiting}

    def _reduce(self, table: str, refolding: bool = False) -> None:
        moments = {"started": time.time()}      # epoch seconds, for the version's line

        def moment(name: str) -> None:
            moments[name] = time.time()
            checkpoint(f"reduce.{name}")
        try:
            report = (refold if refolding else reduce_pending)(
                table, self.invoker, self.settings, checkpoint=moment)
        except Exception as e:  # noqa: BLE001 - pending still: due again after a backoff
            self.later[table] = time.time() + windows.RETRY_SECONDS
            self.log.failed(table, e, refolding)
            return
        if report is None:          # another compute of the table holds it (or it changed)
            self.later[table] = time.time() + BUSY_SECONDS
            return
        self.later.pop(table, None)
        self.log.version(report, moments)
        if refolding:
            self.log.refolded(report)
        if report.export is not None:
            self.log.exported(report)
        if self.on_reduced:
            self.on_reduced(report.as_json())
        self._published(windows.state(self.settings.redis_url, [table]), report.version)

    def _published(self, state: dict[str, windows.Pending], version: str | None) -> None:
        now = time.time()
        for table, found in state.items():
            batches = self.unpublished.get(table, [])
            for batch in [b for b in batches if b[0].count <= found.reduced]:
                batches.remove(batch)
                self.log.batch(batch[0], version, now, *batch[1:])

    def drain(self) -> None:
        for future, received in self.batches.items():
            future.exception()          # wait; messages of a failed batch come back anyway
            self._finished(future, received)

    def _finished(self, future: Future, received: list[dict]) -> None:
        times = (self.received.pop(future, 0.0), getattr(future, "ended", time.time()))
        try:
            result = from_json(BatchResult, future.result())
        except Exception:  # noqa: BLE001 - the whole batch failed: its messages come back
            return
        failed = {f["itemIdentifier"] for f in result.response.get("batchItemFailures", [])}
        done = [m for m in received if m["MessageId"] not in failed]
        if done:        # failed ones reappear once their visibility times out, as with Lambda
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
        for touched in result.touched:          # pending already: reduced when due
            self.unpublished.setdefault(touched.table, []).append((touched, *times))


class WatchLog:
    """The watcher's lines, on a logger of its own."""

    def __init__(self, stream: IO[str]):
        self.logger = logging.Logger("lakestats.watch", logging.INFO)
        handler = logging.StreamHandler(stream)
        if stream.isatty():
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        else:
            from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
            handler.setFormatter(LambdaPowertoolsFormatter(service="lakestats", utc=True))
        self.logger.addHandler(handler)

    def version(self, r: Report, moments: dict[str, float] | None = None) -> None:
        what = f"version {r.version} {'published' if r.published else 'unchanged'}" \
            if r.version else "nothing published"
        self.logger.info(
            f"{r.table}: {what}, {r.row_count:,} rows: added {r.added}, changed {r.changed}, "
            f"removed {_files(r.removed)}", extra={
                "table": r.table, "version": r.version, "published": r.published,
                "row_count": r.row_count, "added": r.added, "changed": r.changed,
                "removed": r.removed, "computed": r.computed, "reused": r.reused,
                "seconds": round(r.seconds, 3),
                # when the reduction started, and its compute's moments (epoch seconds)
                "moments": {k: round(v, 3) for k, v in (moments or {}).items()}})

    def batch(self, b: Touched, version: str | None, now: float,
              received: float | None = None, handled: float | None = None) -> None:
        lag = None if b.newest is None else round(max(0.0, now - b.newest), 3)
        self.logger.info(
            f"{b.table}: a batch of {_files(b.files)}, {b.rows:,} rows, in "
            f"{'version ' + version if version else 'a published version'}"
            + ("" if lag is None else f" {lag:.1f} s after its newest file arrived"),
            extra={"table": b.table, "version": version, "files": b.files, "rows": b.rows,
                   "lag_seconds": lag,      # and when the watcher received and handled it
                   "received_at": received and round(received, 3),
                   "handled_at": handled and round(handled, 3)})

    def failed(self, table: str, error: Exception, refolding: bool = False) -> None:
        self.logger.error(
            f"{table}: refold failed, not tried again before the table's next quiet period: "
            f"{error}" if refolding else f"{table}: reduction failed, tried again later: {error}",
            extra={"table": table, "reason": f"{type(error).__name__}: {error}"})

    def refolded(self, r: Report) -> None:
        self.logger.info(f"{r.table}: exact again (refolded when quiet), version {r.version}",
                         extra={"table": r.table, "version": r.version, "exact": r.exact,
                                "refolded": True})


    def exported(self, r: Report) -> None:
        e = r.export
        if "error" in e:
            self.logger.error(f"{r.table}: export into the Iceberg catalog failed, tried again "
                              f"at the next reduction: {e['error']}",
                              extra={"table": r.table, "reason": e["error"]})
        else:
            self.logger.info(f"{r.table}: snapshot {e['snapshot']} exported: "
                             f"{e['statistics_path']}", extra={"table": r.table, **e})


def _files(n: int) -> str:
    return f"{n} file" + "s" * (n != 1)
