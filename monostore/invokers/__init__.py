"""Backends that run worker handlers: local processes, AWS Lambda, Spark."""
from monostore.invokers.base import InvocationError, Invoker


def make_invoker(name: str = "local", workers: int | None = None, **options) -> Invoker:
    if name == "local":
        from monostore.invokers.local import LocalInvoker
        return LocalInvoker(workers)
    if name == "lambda":
        from monostore.invokers.aws_lambda import LambdaInvoker
        return LambdaInvoker(options["function_name"], workers or 64)
    raise ValueError(f"unknown invoker {name!r} (choose local or lambda)")


__all__ = ["InvocationError", "Invoker", "make_invoker"]
