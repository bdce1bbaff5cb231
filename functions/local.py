"""The Lambda handlers off AWS Lambda, for `lakestats watch`: a stand-in for the Lambda
context, and the step that runs one SQS batch through the partition handler in a worker
process, as a concurrent Lambda invocation would."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from core.settings import Settings
from fleet.protocol import BatchResult, StepEvent
from functions.lambda_handlers import partition_batch


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


def sqs_batch(event: StepEvent) -> BatchResult:
    """Reductions are left to the caller: `watch` runs them when their windows close."""
    task = event.task
    response, opened = partition_batch(task.sqs_event, LocalContext(seconds=task.seconds),
                                       Settings.from_json(task.settings))
    return BatchResult(response, opened)
