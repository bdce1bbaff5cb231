"""`lakestats watch`: the serverless event flow on any SQS queue (moto's server, localstack, AWS).

Long-polls the queue that S3 notifies and calls the Lambda handler with the SQS event payload a
Lambda function would get; messages the handler reports as failed stay in the queue and come
back. Table reductions are coalesced as on AWS, then run here when their window closes.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import boto3

from functions import lambda_handlers as lh
from monostore.invokers import make_invoker


def lambda_event(messages: list[dict], queue_arn: str, region: str) -> dict:
    """SQS messages as the Records of a Lambda SQS event."""
    return {"Records": [{
        "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
        "attributes": m.get("Attributes", {}), "messageAttributes": {},
        "md5OfBody": m.get("MD5OfBody", ""), "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn, "awsRegion": region} for m in messages]}


def watch(queue_url: str, *, wait_seconds: int = 5, visibility_seconds: int = 120,
          stop: Callable[[], bool] = lambda: False,
          on_reduced: Callable[[dict], None] | None = None) -> None:
    """Run until `stop()` says so (Ctrl-C from the command line)."""
    os.environ.pop("LAKESTATS_REDUCE_QUEUE_URL", None)   # reductions run here, not queued
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")   # no CloudWatch here
    os.environ.setdefault("LAKESTATS_REDUCE_WINDOW_SECONDS", "2")
    with make_invoker("local") as invoker:       # one worker pool for every reduction
        watcher = _Watcher(queue_url, visibility_seconds, invoker, on_reduced)
        while not stop():
            watcher.step(wait_seconds)


class _Watcher:
    def __init__(self, queue_url: str, visibility_seconds: int, invoker, on_reduced):
        self.sqs = boto3.client("sqs")
        self.queue_url, self.visibility, self.invoker = queue_url, visibility_seconds, invoker
        self.on_reduced = on_reduced
        self.arn = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[
            "QueueArn"])["Attributes"]["QueueArn"]
        self.window = float(os.environ["LAKESTATS_REDUCE_WINDOW_SECONDS"])
        self.due: dict[str, float] = {}          # table -> when its reduction runs

    def step(self, wait_seconds: int) -> None:
        """One long poll (shorter when a reduction is due), its batch, due reductions."""
        now = time.monotonic()
        wait = min([wait_seconds] + [max(0.0, t - now) for t in self.due.values()])
        received = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=int(wait),
            VisibilityTimeout=self.visibility, AttributeNames=["All"]).get("Messages", [])
        if received:
            self._batch(received)
        for table, at in list(self.due.items()):
            if time.monotonic() >= at:
                del self.due[table]
                report = lh.reduce_table(table, self.invoker)
                if self.on_reduced:
                    self.on_reduced(report)

    def _batch(self, received: list[dict]) -> None:
        event = lambda_event(received, self.arn, self.sqs.meta.region_name)
        response = lh.partition_stats_handler(event, lh.LocalContext(seconds=self.visibility))
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        done = [m for m in received if m["MessageId"] not in failed]
        if done:        # failed ones reappear once their visibility times out, as with Lambda
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
        for table in lh.LOCAL_REDUCTIONS:       # windows this batch opened
            self.due.setdefault(table, time.monotonic() + self.window)
        lh.LOCAL_REDUCTIONS.clear()
