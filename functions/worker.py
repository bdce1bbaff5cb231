"""The worker entry point: one StepEvent (JSON) in, its step's result (JSON) out. The steps
function on AWS Lambda, the local invoker's worker processes and Spark tasks all run this.

The step is imported by its dotted name, only if the protocol registers it. When a
coordinator waits for the result, it is also recorded in the job's Redis records, where it
survives an invocation that fails after the step was done.
"""
from __future__ import annotations

import os

import pyarrow as pa

from core.settings import Settings
from fleet.connections import use_password
from fleet.jobs import Job
from fleet.protocol import FREQUENCY_SEND, PARTITION_STATISTICS, RANK_SAMPLE, StepEvent, resolve, \
    to_json
from functions import faults

# $REDIS_PASSWORD, or the password in $REDIS_URL (events carry the URL without it); the Lambda
# handlers may set a secret's
use_password(Settings.from_env(os.environ).redis_password)


def run(event: dict) -> dict:
    call = StepEvent.from_json(event)
    faults.at(call.name, "before")
    timer = faults.during(call.name)
    result = to_json(resolve(call.step)(call))
    if timer:
        timer.cancel()
    if call.job:
        Job(call.redis_url, call.job).record(call, result)
    faults.at(call.name, "after")
    return result


def warm() -> None:
    """Load what a first call would load on its way: the steps of the three algorithms, and
    pyarrow's first conversion of a Python list (it imports pandas when that is installed,
    half a second)."""
    for step in (PARTITION_STATISTICS, FREQUENCY_SEND, RANK_SAMPLE):
        resolve(step)
    pa.array([0])
