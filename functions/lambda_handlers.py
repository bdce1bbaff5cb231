"""AWS Lambda entry points, thin and built on aws-lambda-powertools. `lakestats watch` calls the
same functions with the same SQS event payloads.

- partition_stats_handler  SQS (S3 notifications) -> each changed file's statistics; partial
                           batch failures; idempotent per (bucket, key, ETag) in Redis; asks
                           for a coalesced table reduction.
- table_reduce_handler     SQS (reduction requests) -> a new table-level version.
- steps_handler            direct invocations by the coordinator (LambdaInvoker): partition
                           statistics and the steps of the frequency and rank algorithms.
- lookup_handler           Function URL (IAM auth): statistics lookups as JSON.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import LambdaFunctionUrlEvent, SQSEvent
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer

from functions.handlers import handle
from monostore import events

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "lakestats"))
warnings.filterwarnings("ignore", "No application metrics to publish")  # a batch of removals
idempotency = IdempotencyConfig(expires_after_seconds=24 * 3600)


def _redis_url() -> str:
    return os.environ["REDIS_URL"]


def _options() -> dict:
    return {"max_bins": int(os.environ.get("LAKESTATS_BINS") or 1000)}


@dataclass
class LocalContext:
    """What the handlers read of a Lambda context, for `lakestats watch`: the time left bounds
    how long an interrupted event stays "in progress" for the idempotency layer."""
    function_name: str = "lakestats-watch"
    aws_request_id: str = "local"
    seconds: float = 300.0
    memory_limit_in_mb: int = 0
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:lakestats-watch"

    def __post_init__(self):
        self._deadline = time.monotonic() + self.seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


# -- partition statistics from S3 notifications


_changed = None


def _change_handler():
    """The idempotent handler of one change, built once the Redis URL is known."""
    global _changed
    if _changed is None:
        from monostore.jobs import client
        store = CachePersistenceLayer(client=client(_redis_url()))   # the project's Redis

        @idempotent_function(data_keyword_argument="change", persistence_store=store,
                             config=idempotency)
        def changed(change: dict) -> dict:
            located = events.table_of(change["uri"], events.watched_tables())
            if located is None:
                return {"status": "ignored"}
            table, rel_path = located
            result = {"status": "removed"}
            if change["created"]:
                started = time.monotonic()
                result = events.partition_statistics(table, rel_path, _options())
                if result["status"] == "failed":     # bad data: logged, not retried
                    logger.error("partition failed", extra=result)
                elif not result.get("reused") and result["status"] == "ok":
                    metrics.add_metric("PartitionsComputed", MetricUnit.Count, 1)
                    metrics.add_metric("PartitionSeconds", MetricUnit.Seconds,
                                       time.monotonic() - started)
            return {**result, "table": table}
        _changed = changed
    return _changed


def _record(record) -> list[str]:
    """One SQS message: every change it notifies; returns the tables touched."""
    tables = []
    for change in events.changes(json.loads(record.body)):
        # the idempotency key: (bucket, key, ETag) of a creation; a removal is keyed by its
        # sequencer, as a key may be removed, created and removed again
        out = _change_handler()(change={"uri": change.uri, "created": change.created,
                                        "version": change.etag if change.created
                                        else change.sequencer})
        if out.get("table"):
            tables.append(out["table"])
    return tables


@logger.inject_lambda_context(correlation_id_path="Records[0].messageId")
@tracer.capture_lambda_handler
@metrics.log_metrics
def partition_stats_handler(event: dict, context) -> dict:
    idempotency.register_lambda_context(context)
    touched: set[str] = set()
    processor = BatchProcessor(event_type=EventType.SQS)

    def record_handler(record):
        touched.update(_record(record))
    response = process_partial_response(event, record_handler, processor, context)
    for table in touched:
        schedule_reduction(table)
    return response


LOCAL_REDUCTIONS: set[str] = set()    # windows opened with no queue: `watch` runs them


def schedule_reduction(table: str) -> bool:
    """Coalesce: the first request of a window sends one delayed reduction request (Lambda) or
    leaves it to the caller (`watch`, when no queue is configured: LOCAL_REDUCTIONS)."""
    window = float(os.environ.get("LAKESTATS_REDUCE_WINDOW_SECONDS") or
                   events.DEFAULT_WINDOW_SECONDS)
    if not events.request_reduction(_redis_url(), table, window):
        return False
    queue = os.environ.get("LAKESTATS_REDUCE_QUEUE_URL")
    if queue:
        import boto3
        boto3.client("sqs").send_message(QueueUrl=queue, MessageBody=json.dumps({"table": table}),
                                         DelaySeconds=min(900, int(window)))
    else:
        LOCAL_REDUCTIONS.add(table)
    return True


# -- table reductions


def reduce_table(table: str, invoker=None) -> dict:
    """A new version of `table`; the coordinator's steps run on `invoker`, by default the
    steps function (LAKESTATS_STEPS_FUNCTION) or, without one, local processes."""
    from monostore.coordinator import Options, compute
    from monostore.frequencies import FrequencyOptions
    from monostore.invokers import make_invoker
    events.reduction_started(_redis_url(), table)
    options = Options(max_bins=_options()["max_bins"], frequencies=FrequencyOptions(
        low_distinct_max=int(os.environ.get("LAKESTATS_LOW_DISTINCT_MAX") or 1_000_000),
        low_duplicate_max=int(os.environ.get("LAKESTATS_LOW_DUPLICATE_MAX") or 1_000_000)))
    if invoker is not None:
        return compute(table, invoker, _redis_url(), options=options).as_json()
    function = os.environ.get("LAKESTATS_STEPS_FUNCTION")
    with make_invoker("lambda" if function else "local", function_name=function) as invoker:
        return compute(table, invoker, _redis_url(), options=options).as_json()


@logger.inject_lambda_context(correlation_id_path="Records[0].messageId")
@tracer.capture_lambda_handler
@metrics.log_metrics
def table_reduce_handler(event: dict, context) -> dict:
    processor = BatchProcessor(event_type=EventType.SQS)

    def record_handler(record):
        report = reduce_table(json.loads(record.body)["table"])
        logger.info("table reduced", extra=report)
        if report["published"]:
            metrics.add_metric("TableVersionsPublished", MetricUnit.Count, 1)
    return process_partial_response(event, record_handler, processor, context)


# -- the coordinator's direct invocations


@logger.inject_lambda_context(correlation_id_path="job")
@tracer.capture_lambda_handler
def steps_handler(event: dict, context) -> dict:
    return handle(event)


# -- lookups


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler
def lookup_handler(event: dict, context) -> dict:
    """GET ?table=s3://...&what=summary|frequencies|histogram|partitions[&column=][&top=]"""
    from metastore.reader import StatisticsNotFound, TableStatistics
    request = LambdaFunctionUrlEvent(event)
    q = request.query_string_parameters or {}
    try:
        stats = TableStatistics(events.stats_root_of(q["table"]))
        what, column = q.get("what", "summary"), q.get("column")
        body = {"summary": lambda: stats.summary(q.get("partition")),
                "partitions": lambda: {"partitions": stats.partitions()},
                "frequencies": lambda: stats.frequency_list(column, q.get("partition"),
                                                            int(q["top"]) if "top" in q else None),
                "histogram": lambda: {"column": column,
                                      "bins": stats.histogram(column, q.get("partition"))},
                }[what]()
        status = 200
    except (KeyError, StatisticsNotFound) as e:
        body, status = {"error": str(e).strip("'")}, 404 if isinstance(e, StatisticsNotFound) else 400
    return {"statusCode": status, "headers": {"content-type": "application/json"},
            "body": json.dumps(body, default=str)}


__all__ = ["LocalContext", "SQSEvent", "lookup_handler", "partition_stats_handler",
           "reduce_table", "schedule_reduction", "steps_handler", "table_reduce_handler"]
