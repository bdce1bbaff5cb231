"""The worker entry point: one StepEvent (JSON) in, its step's result (JSON) out. The steps
function on AWS Lambda, the local invoker's worker processes and Spark tasks all run this.

The step is imported by its dotted name, only if the protocol registers it. When a
coordinator waits for the result, it is also recorded in the job's Redis records, where it
survives an invocation that fails after the step was done.

Hooks around every step are for the local stack's tests (infra.faults): $LAKESTATS_WORKER_HOOKS
names them, as dotted names of functions that take the environment and return a hook. A hook
is a generator of the StepEvent: it runs to its first `yield` before the step, to its second
once the step returned (or raised: then it is closed), and to its end once the result is
recorded. Without the variable (on AWS Lambda) there is none, and nothing of them is imported.
"""
from __future__ import annotations

import os

import pyarrow as pa

from lakestats.core.settings import Settings
from lakestats.fleet.connections import use_password
from lakestats.fleet.jobs import Job
from lakestats.fleet.protocol import (FREQUENCY_SEND, PARTITION_STATISTICS, RANK_SAMPLE, StepEvent,
                                      resolve, to_json)

# $REDIS_PASSWORD, or the password in $REDIS_URL (events carry the URL without it); the Lambda
# handlers may set a secret's
use_password(Settings.from_env(os.environ).redis_password)

# never on AWS Lambda, whatever its environment says: a hook can kill the worker
HOOKS = [] if "AWS_LAMBDA_FUNCTION_NAME" in os.environ else [
    resolve(name.strip())(os.environ)
    for name in os.environ.get("LAKESTATS_WORKER_HOOKS", "").split(",") if name.strip()]


def run(event: dict) -> dict:
    call = StepEvent.from_json(event)
    hooks = [hook(call) for hook in HOOKS]
    try:
        _advance(hooks)                         # before the step
        result = to_json(resolve(call.step)(call))
        _advance(hooks)                         # the step returned
        if call.job:
            Job(call.redis_url, call.job).record(call, result)
        _advance(hooks)                         # its result is recorded
    finally:
        for hook in hooks:
            hook.close()
    return result


def _advance(hooks: list) -> None:
    for hook in hooks:
        next(hook, None)


def warm() -> None:
    """Load what a first call would load on its way: the steps of the three algorithms, and
    pyarrow's first conversion of a Python list (it imports pandas when that is installed,
    half a second)."""
    for step in (PARTITION_STATISTICS, FREQUENCY_SEND, RANK_SAMPLE):
        resolve(step)
    pa.array([0])
