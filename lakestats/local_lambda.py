"""The Lambda handlers off AWS Lambda, for `lakestats watch` and the tests: a stand-in for the
Lambda context, and the worker entry point of watch's processes, which runs an SQS batch
through the partition handler as a concurrent Lambda invocation would, and hands any other
event (a reduction's steps) to functions.worker. The batch is no step of fleet.protocol's
STEPS: the Lambda package neither holds nor runs it.

`checkpoint` runs the test hooks of functions.worker ($LAKESTATS_WORKER_HOOKS: infra.faults'
plans) at a named moment outside any step, in this process: a watcher's, a batch's or a
reduction's ("watch.received", "batch.record", "reduce.publish", ...)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from lakestats.core.settings import Settings
from lakestats.fleet.protocol import from_json, to_json
from lakestats.functions import worker
from lakestats.functions.lambda_handlers import Touched, partition_batch

SQS_BATCH = "lakestats.local_lambda.sqs_batch"      # a batch's StepEvent names it as its step
ENTRY = "lakestats.local_lambda.run"                  # watch's worker entry point


@dataclass(frozen=True)
class BatchTask:
    """One SQS batch through the partition Lambda handler."""
    sqs_event: dict
    seconds: float                  # the Lambda time the batch is given
    settings: dict                  # core.settings.Settings, as JSON


@dataclass(frozen=True)
class BatchResult:
    response: dict                  # the handler's partial batch response
    touched: list[Touched]          # the tables it changed, recorded as pending


@dataclass(frozen=True)
class Moment:
    """A named moment, as a hook sees a step: it fires as before a step of that name."""
    name: str


def checkpoint(name: str) -> None:
    for hook in worker.HOOKS:
        moment = hook(Moment(name))
        next(moment, None)
        moment.close()


@dataclass
class LocalContext:
    """What the handlers read of a Lambda context: the time left bounds how long an
    interrupted event stays "in progress" for the idempotency layer."""
    function_name: str = "lakestats-watch"
    aws_request_id: str = "local"
    seconds: float = 300.0
    memory_limit_in_mb: int = 0
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:lakestats-watch"

    # seconds left, when given: an invocation that runs out of time at a chosen point
    remaining: Callable[[], float] | None = None

    def __post_init__(self):
        self._deadline = time.monotonic() + self.seconds

    def get_remaining_time_in_millis(self) -> int:
        if self.remaining is not None:
            return int(self.remaining() * 1000)
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def sqs_batch(task: BatchTask) -> BatchResult:
    """Reductions are left to the caller: `watch` runs them when their windows close."""
    response, touched = partition_batch(task.sqs_event, LocalContext(seconds=task.seconds),
                                        Settings.from_json(task.settings),
                                        checkpoint=checkpoint)
    return BatchResult(response, touched)


def run(event: dict) -> dict:
    """A batch's event, or a registered step's (functions.worker.run)."""
    if event.get("step") != SQS_BATCH:
        return worker.run(event)
    return to_json(sqs_batch(from_json(BatchTask, event["task"])))
