"""Backends that run worker steps: local processes, AWS Lambda (Spark tasks: spark_bridge)."""
from lakestats.fleet.invokers.base import Invocation, Invoker


def make_invoker(name: str = "local", workers: int | None = None,
                 function_name: str | None = None) -> Invoker:
    if name == "local":
        from lakestats.fleet.invokers.local import LocalInvoker
        return LocalInvoker(workers)
    if name == "lambda":
        from lakestats.fleet.invokers.aws_lambda import LambdaInvoker
        if not function_name:
            raise ValueError("the Lambda invoker needs the steps function's name "
                             "(--function-name, or LAKESTATS_STEPS_FUNCTION)")
        return LambdaInvoker(function_name, workers or 64)
    raise ValueError(f"unknown invoker {name!r} (choose local or lambda)")


__all__ = ["Invocation", "Invoker", "make_invoker"]
