"""`lakestats watch`: the serverless event flow on any SQS queue (moto's server, localstack, AWS).

Long-polls the queue that S3 notifies and calls the Lambda handler with the SQS event payload a
Lambda function would get; messages the handler reports as failed stay in the queue and come
back. Table reductions are coalesced as on AWS, then run here when their window closes.
"""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from typing import Callable

import boto3

from lakestats.core.settings import Settings
from lakestats.fleet.invokers.local import LocalInvoker
from lakestats.fleet.protocol import StepEvent, from_json
from lakestats.local_lambda import ENTRY, SQS_BATCH, BatchResult, BatchTask
from lakestats.monostore.compute import reduce_table


def lambda_event(messages: list[dict], queue_arn: str, region: str) -> dict:
    """SQS messages as the Records of a Lambda SQS event."""
    return {"Records": [{
        "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
        "attributes": m.get("Attributes", {}), "messageAttributes": {},
        "md5OfBody": m.get("MD5OfBody", ""), "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn, "awsRegion": region} for m in messages]}


def watch(queue_url: str, settings: Settings, *, wait_seconds: int = 5,
          visibility_seconds: int = 120, stop: Callable[[], bool] = lambda: False,
          on_reduced: Callable[[dict], None] | None = None) -> None:
    """Run until `stop()` says so (Ctrl-C from the command line). Needs settings.redis_url
    and settings.tables."""
    # one pool of workers: batches run in it side by side, as concurrent Lambda invocations
    # would, and so do the reductions' steps (its entry point runs both)
    with LocalInvoker(settings.workers, entry=ENTRY) as invoker:
        watcher = _Watcher(queue_url, settings, visibility_seconds, invoker, on_reduced)
        while not stop():
            watcher.step(wait_seconds)
        watcher.drain()


class _Watcher:
    def __init__(self, queue_url: str, settings: Settings, visibility_seconds: int, invoker,
                 on_reduced):
        self.sqs = boto3.client("sqs")
        self.queue_url, self.visibility, self.invoker = queue_url, visibility_seconds, invoker
        self.settings, self.on_reduced = settings, on_reduced
        self.arn = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[
            "QueueArn"])["Attributes"]["QueueArn"]
        self.window = settings.reduce_window
        self.due: dict[str, float] = {}          # table -> when its reduction runs
        self.batches: dict[Future, list[dict]] = {}

    def step(self, wait_seconds: int) -> None:
        """Collect finished batches, start a new one if a worker is free (long-polling only
        when nothing runs), run due reductions."""
        for future in [f for f in self.batches if f.done()]:
            self._finished(future, self.batches.pop(future))
        if len(self.batches) < self.invoker.workers:
            now = time.monotonic()
            wait = 0 if self.batches else min(
                [wait_seconds] + [max(0.0, t - now) for t in self.due.values()])
            received = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=int(wait),
                VisibilityTimeout=self.visibility, AttributeNames=["All"]).get("Messages", [])
            if received:
                task = BatchTask(lambda_event(received, self.arn, self.sqs.meta.region_name),
                                 self.visibility, self.settings.to_json())
                event = StepEvent(SQS_BATCH, "batch", task, redis_url=self.settings.redis_url)
                self.batches[self.invoker.submit(event.to_json())] = received
            elif self.batches:
                wait_futures(self.batches, timeout=0.2, return_when=FIRST_COMPLETED)
        else:
            wait_futures(self.batches, timeout=1, return_when=FIRST_COMPLETED)
        for table, at in list(self.due.items()):
            # a reduction waits for the batches in flight, but never more than a window
            if time.monotonic() >= at + (self.window if self.batches else 0):
                del self.due[table]
                report = reduce_table(table, self.invoker, self.settings).as_json()
                if self.on_reduced:
                    self.on_reduced(report)

    def drain(self) -> None:
        for future, received in self.batches.items():
            future.exception()          # wait; messages of a failed batch come back anyway
            self._finished(future, received)

    def _finished(self, future: Future, received: list[dict]) -> None:
        try:
            result = from_json(BatchResult, future.result())
        except Exception:  # noqa: BLE001 - the whole batch failed: its messages come back
            return
        failed = {f["itemIdentifier"] for f in result.response.get("batchItemFailures", [])}
        done = [m for m in received if m["MessageId"] not in failed]
        if done:        # failed ones reappear once their visibility times out, as with Lambda
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
        for table in result.reductions:          # windows this batch opened
            self.due.setdefault(table, time.monotonic() + self.window)
