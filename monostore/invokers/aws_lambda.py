"""LambdaInvoker: each event becomes one synchronous AWS Lambda invocation (boto3)."""
from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor

from monostore.invokers.base import InvocationError, Invoker


class LambdaInvoker(Invoker):
    def __init__(self, function_name: str, workers: int = 64, client=None):
        import boto3
        self.function_name = function_name
        self.workers = workers
        self.client = client or boto3.client("lambda")
        self._threads = ThreadPoolExecutor(workers)

    def submit(self, event: dict) -> Future:
        return self._threads.submit(self.invoke, event)

    def invoke(self, event: dict) -> dict:
        response = self.client.invoke(FunctionName=self.function_name,
                                      InvocationType="RequestResponse",
                                      Payload=json.dumps(event).encode())
        payload = response["Payload"].read()
        if response.get("FunctionError"):
            raise InvocationError(f"{self.function_name}: {payload.decode(errors='replace')}")
        return json.loads(payload) if payload else {}

    def close(self) -> None:
        self._threads.shutdown(wait=True)
