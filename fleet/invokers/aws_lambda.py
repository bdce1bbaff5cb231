"""LambdaInvoker: each call is one synchronous invocation of the steps function (boto3).

A running invocation cannot be stopped from here: it ends by itself or at the function's own
timeout (template.yaml). `cancel` therefore withdraws only calls still waiting for a thread;
for one already running it returns False, and the fan-out stops waiting for it."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

from lakestats.fleet.invokers.base import Invocation, Invoker
from lakestats.fleet.protocol import InvocationError, Throttled

# what Lambda answers when it has no capacity for the call now
THROTTLING = {"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException",
              "ENILimitReachedException", "SubnetIPAddressLimitReachedException"}


class LambdaInvoker(Invoker):
    def __init__(self, function_name: str, workers: int = 64, client=None):
        import boto3
        from botocore.config import Config
        self.function_name = function_name
        self.workers = workers
        # a call may run for Lambda's longest (900 s); retries are the fan-out's, not boto's
        self.client = client or boto3.client("lambda", config=Config(
            read_timeout=960, max_pool_connections=workers, retries={"total_max_attempts": 1}))
        self._threads = ThreadPoolExecutor(workers)

    def submit(self, event: dict) -> Invocation:
        invocation = Invocation()
        self._threads.submit(self._run, event, invocation)
        return invocation

    def _run(self, event: dict, invocation: Invocation) -> None:
        if not invocation.set_running_or_notify_cancel():
            return
        invocation.started = time.monotonic()
        try:
            invocation.set_result(self.invoke(event))
        except Exception as e:  # noqa: BLE001 - the call's failure, for the fan-out to judge
            invocation.set_exception(e)

    def invoke(self, event: dict) -> dict:
        from botocore.exceptions import ClientError
        try:
            response = self.client.invoke(FunctionName=self.function_name,
                                          InvocationType="RequestResponse",
                                          Payload=json.dumps(event).encode())
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            kind = Throttled if code in THROTTLING else InvocationError
            raise kind(f"{self.function_name}: {code or e}") from e
        payload = response["Payload"].read()
        if response.get("FunctionError"):
            raise InvocationError(f"{self.function_name}: {payload.decode(errors='replace')}")
        return json.loads(payload) if payload else {}

    def close(self) -> None:
        self._threads.shutdown(wait=True)
