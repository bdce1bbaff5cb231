"""AWS Lambda entry points, one per function in template.yaml, built on aws-lambda-powertools.
Each parses its event, hands the work to the domain code and leaves logging, metrics and
tracing to powertools; settings come from the function's environment, read once here.

- partition_stats_handler  SQS (S3 notifications) -> each changed file's statistics; partial
                           batch failures; idempotent per (bucket, key, ETag) in Redis; records
                           the tables' changes as pending (fleet.windows) before it answers,
                           so before its messages are deleted; asks for a coalesced reduction.
- table_reduce_handler     SQS (reduction requests) -> a new table version; on its schedule,
                           the pending reductions no one runs (one that died is taken over),
                           then the refolds of tables quiet since a version left them inexact.
- steps_handler            direct invocations by the coordinator (LambdaInvoker): one step.
- lookup_handler           Function URL (IAM auth): statistics lookups as JSON.
"""
from __future__ import annotations

import functools
import json
import math
import os
import time
import warnings
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (BatchProcessor, EventType,
                                                   process_partial_response)
from aws_lambda_powertools.utilities.data_classes import LambdaFunctionUrlEvent
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer

from lakestats.algorithms.partitions.step import statistics_of_object
from lakestats.core.errors import LakestatsError
from lakestats.core.settings import Settings
from lakestats.fleet import protocol
from lakestats.fleet.connections import client, use_password
from lakestats.fleet.invokers import make_invoker
from lakestats.fleet import windows
from lakestats.functions import worker
from lakestats.functions.notifications import (BadEvent, changes, commit_of, refused,
                                               table_of)
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsNotFound, StatisticsReader
from lakestats.monostore.report import Report
from lakestats.monostore.reductions import reduce_due, reduce_pending, refold_quiet

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace="lakestats")     # POWERTOOLS_METRICS_NAMESPACE overrides it
warnings.filterwarnings("ignore", "No application metrics to publish")  # a batch of removals
idempotency = IdempotencyConfig(expires_after_seconds=protocol.IDEMPOTENCY_TTL_SECONDS)
SETTINGS = Settings.from_env(os.environ)


def redis_password(env=os.environ) -> str | None:
    """The secret that LAKESTATS_REDIS_SECRET_ARN names (its text, or the "password" key of
    its JSON), read once per cold start; else the password in $REDIS_URL, else $REDIS_PASSWORD."""
    arn = env.get("LAKESTATS_REDIS_SECRET_ARN")
    if not arn:
        return Settings.from_env(env).redis_password
    from aws_lambda_powertools.utilities import parameters
    secret = parameters.get_secret(arn)
    try:
        return json.loads(secret)["password"]
    except (ValueError, KeyError, TypeError):
        return secret


@functools.cache
def _authenticate() -> None:
    """Once per cold start, before the first Redis connection (the lookups need none)."""
    use_password(redis_password())


# the time an invocation keeps for itself: to answer, after its last record or step
ANSWER_SECONDS = 1.0


class NoTimeLeft(LakestatsError):
    """Too little of the invocation's time is left to start this record: it goes back to
    the queue (a partial batch failure) for the next invocation."""


# -- partition statistics from S3 notifications

_idempotent: dict[tuple, object] = {}


def _change_handler(settings: Settings, metrics: Metrics | None):
    """The handler of one object change, idempotent through records in the project's Redis."""
    # one per Redis and what the handler reads of the settings (a process that serves several,
    # as the tests do, would otherwise refuse the tables of all but the first)
    key = (settings.redis_url, settings.tables, settings.partition, metrics is None)
    if key not in _idempotent:
        store = CachePersistenceLayer(client=client(settings.redis_url))

        @idempotent_function(data_keyword_argument="change", persistence_store=store,
                             config=idempotency, key_prefix=protocol.IDEMPOTENCY_PREFIX)
        def changed(change: dict) -> dict:
            located = table_of(change["uri"], settings.tables)
            if located is None:
                committed = commit_of(change["uri"], settings.tables)
                if committed is not None:       # a format's new snapshot: its reduction
                    return {"status": "commit", "table": committed}
                return {"status": "refused" if refused(change["uri"], settings.tables)
                        else "ignored"}
            table, rel_path = located
            if not change["created"]:
                return {"status": "removed", "table": table}
            started = time.monotonic()
            result = statistics_of_object(table, rel_path, Layout.of_table(table),
                                          settings.partition)
            if result.status == "failed":               # bad data: logged, not retried
                logger.error("partition failed", extra=protocol.to_json(result))
            elif result.status == "ok" and not result.reused and metrics is not None:
                metrics.add_metric("PartitionsComputed", MetricUnit.Count, 1)
                metrics.add_metric("PartitionSeconds", MetricUnit.Seconds,
                                   time.monotonic() - started)
            return {**protocol.to_json(result), "table": table}
        _idempotent[key] = changed
    return _idempotent[key]


@dataclass(frozen=True)
class Touched:
    """A table's changes in one batch, recorded as pending (fleet.windows) before the batch
    answers: its messages are deleted only then."""
    table: str
    files: int                      # object changes handled
    rows: int                       # rows of the files created (removed ones: none)
    newest: float | None            # the newest change's arrival (epoch seconds)
    count: int = 0                  # the table's change count with this batch's
    opened: bool = False            # this batch opened the table's window: its reduction
    #                                 is the caller's to schedule


def arrival(body: dict, record) -> float | None:
    """When a message's newest change arrived: its S3 event time, else the time SQS got it."""
    times = [body.get("time")] + [r.get("eventTime") for r in body.get("Records") or []
                                  if isinstance(r, dict)]
    found = []
    for text in times:
        try:
            found.append(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
        except (AttributeError, TypeError, ValueError):
            continue
    if found:
        return max(found)
    try:
        return int(record.attributes.sent_timestamp) / 1000
    except (KeyError, TypeError, ValueError):
        return None


def partition_batch(event: dict, context, settings: Settings, metrics: Metrics | None = None,
                    checkpoint: Callable[[str], None] | None = None
                    ) -> tuple[dict, list[Touched]]:
    """One SQS batch of S3 notifications: the partial batch response, and the tables it
    changed, recorded as pending before it returns (the caller schedules the reductions whose
    window it opened). `checkpoint` hears "batch.record" after each record handled."""
    idempotency.register_lambda_context(context)
    handler = _change_handler(settings, metrics)
    touched: dict[str, list] = {}       # table -> [files, rows, newest arrival]

    slowest = 0.0             # the longest record so far: what the next one may take

    def record_handler(record) -> None:
        nonlocal slowest
        left = context.get_remaining_time_in_millis() / 1000
        if left < 1.5 * slowest + ANSWER_SECONDS:
            raise NoTimeLeft(f"{left:.1f} s left of the invocation: handed back to the queue")
        started = time.monotonic()
        try:
            body = json.loads(record.body)
            found = changes(body)
        except (ValueError, BadEvent) as e:         # retrying will not help: logged, dropped
            logger.error("refused: not an S3 notification",
                         extra={"message_id": record.message_id, "reason": str(e)})
            return
        handled = []
        for change in found:
            # the key of a creation is (bucket, key, ETag); a removal's is its sequencer, as a
            # key may be removed, created and removed again
            out = handler(change={"uri": change.uri, "created": change.created,
                                  "version": change.etag if change.created else change.sequencer})
            if out.get("table"):
                handled.append((out["table"], out.get("row_count") or 0))
            elif out.get("status") == "refused":
                logger.warning("refused: not a data file of a watched table",
                               extra={"uri": change.uri, "tables": list(settings.tables)})
        at = arrival(body, record) if handled else None
        for table, rows in handled:                 # the record's changes, all handled
            seen = touched.setdefault(table, [0, 0, None])
            seen[0], seen[1] = seen[0] + 1, seen[1] + rows
            seen[2] = at if seen[2] is None else max(seen[2], at or seen[2])
        slowest = max(slowest, time.monotonic() - started)
        if checkpoint is not None:
            checkpoint("batch.record")
    response = process_partial_response(event, record_handler,
                                         BatchProcessor(event_type=EventType.SQS), context)
    return response, [Touched(table, *seen, *windows.record(settings.redis_url, table,
                                                             settings.reduce_window))
                      for table, seen in sorted(touched.items())]


@logger.inject_lambda_context(correlation_id_path="Records[0].messageId")
@tracer.capture_lambda_handler
@metrics.log_metrics
def partition_stats_handler(event: dict, context) -> dict:
    _authenticate()
    response, touched = partition_batch(event, context, SETTINGS, metrics)
    opened = [t.table for t in touched if t.opened]
    if opened and not SETTINGS.reduce_queue_url:
        logger.warning("no LAKESTATS_REDUCE_QUEUE_URL: reductions not scheduled",
                       extra={"tables": opened})
    elif opened:
        import boto3
        sqs = boto3.client("sqs")
        for table in opened:       # the reduction runs when the window closes
            sqs.send_message(QueueUrl=SETTINGS.reduce_queue_url,
                             MessageBody=json.dumps({"table": table}),
                             DelaySeconds=min(900, math.ceil(SETTINGS.reduce_window)))
    return response


# -- table reductions


def _reduced(report: Report) -> None:
    logger.info("table reduced", extra=report.as_json())
    if report.published:
        metrics.add_metric("TableVersionsPublished", MetricUnit.Count, 1)


@logger.inject_lambda_context(correlation_id_path="Records[0].messageId")
@tracer.capture_lambda_handler
@metrics.log_metrics
def table_reduce_handler(event: dict, context) -> dict:
    """A reduction request's table, if its changes are still pending; the schedule's event
    (no Records): every configured table's pending reduction that is due, then the refold of
    every one quiet for LAKESTATS_EXACT_AFTER_SECONDS since a version left it inexact."""
    _authenticate()
    # past the deadline, a reduction publishes nothing; its changes stay pending
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - ANSWER_SECONDS
    # the coordinator's steps run in the steps function, or here without one
    invoker = functools.partial(make_invoker, "lambda" if SETTINGS.steps_function else "local",
                                function_name=SETTINGS.steps_function)
    if "Records" not in event:
        with invoker() as steps:
            reports = reduce_due(SETTINGS.tables, steps, SETTINGS, deadline, lambda table, e:
                                 logger.error("reduction failed", extra={
                                     "table": table, "reason": f"{type(e).__name__}: {e}"}))
            exact = refold_quiet(SETTINGS.tables, steps, SETTINGS, deadline, lambda table, e:
                                 logger.error("refold failed: not tried again before the "
                                              "table's next quiet period", extra={
                                                  "table": table,
                                                  "reason": f"{type(e).__name__}: {e}"}))
        for report in reports + exact:
            _reduced(report)
        return {"reduced": [r.table for r in reports], "exact_again": [r.table for r in exact]}

    def record_handler(record) -> None:
        table = json.loads(record.body)["table"]
        with invoker() as steps:
            # another compute of the table may hold it for up to half the time left: then
            # what it does not cover stays pending, for the schedule
            report = reduce_pending(table, steps, SETTINGS, deadline, wait=max(0.0, min(
                SETTINGS.lock_wait, (deadline - time.monotonic()) / 2)))
        if report is None:
            logger.info("nothing to reduce: no change pending, or another compute runs",
                        extra={"table": table})
        else:
            _reduced(report)
    return process_partial_response(event, record_handler,
                                    BatchProcessor(event_type=EventType.SQS), context)


# -- the coordinator's direct invocations


@logger.inject_lambda_context(correlation_id_path="job")
@tracer.capture_lambda_handler
def steps_handler(event: dict, context) -> dict:
    _authenticate()
    return worker.run(event)


# -- lookups


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler
def lookup_handler(event: dict, context) -> dict:
    """GET ?table=s3://...&what=summary|frequencies|histogram|partitions[&column=][&top=]"""
    q = LambdaFunctionUrlEvent(event).query_string_parameters or {}
    try:
        stats = StatisticsReader(Layout.of_table(q["table"]).uri)
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
