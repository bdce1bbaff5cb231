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
    sqs = boto3.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    region = sqs.meta.region_name
    os.environ.pop("LAKESTATS_REDUCE_QUEUE_URL", None)   # reductions run here, not queued
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")   # no CloudWatch here
    due: dict[str, float] = {}
    window = float(os.environ.get("LAKESTATS_REDUCE_WINDOW_SECONDS") or 2)
    os.environ["LAKESTATS_REDUCE_WINDOW_SECONDS"] = str(window)
    with make_invoker("local") as invoker:       # one worker pool for every reduction
        _loop(sqs, queue_url, arn, region, wait_seconds, visibility_seconds, stop, on_reduced,
              due, window, invoker)


def _loop(sqs, queue_url, arn, region, wait_seconds, visibility_seconds, stop, on_reduced,
          due, window, invoker) -> None:
    while not stop():
        timeout = min([wait_seconds] + [max(0.0, t - time.monotonic()) for t in due.values()])
        received = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=int(timeout),
            VisibilityTimeout=visibility_seconds, AttributeNames=["All"]).get("Messages", [])
        if received:
            _batch(sqs, queue_url, received, arn, region, visibility_seconds, due, window)
        for table, at in list(due.items()):
            if time.monotonic() >= at:
                del due[table]
                report = lh.reduce_table(table, invoker)
                if on_reduced:
                    on_reduced(report)


def _batch(sqs, queue_url: str, received: list[dict], arn: str, region: str,
           visibility_seconds: int, due: dict[str, float], window: float) -> None:
    response = lh.partition_stats_handler(lambda_event(received, arn, region),
                                          lh.LocalContext(seconds=visibility_seconds))
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    done = [m for m in received if m["MessageId"] not in failed]
    if done:          # failed ones reappear once their visibility times out, as with Lambda
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
    for table in lh.LOCAL_REDUCTIONS:       # windows this batch opened
        due.setdefault(table, time.monotonic() + window)
    lh.LOCAL_REDUCTIONS.clear()
