"""Backends that run worker handlers: local processes, AWS Lambda, Spark."""
from monostore.invokers.base import InvocationError, Invoker, StepFailed, invoke_all


def make_invoker(name: str = "local", workers: int | None = None, **options) -> Invoker:
    if name == "local":
        from monostore.invokers.local import LocalInvoker
        return LocalInvoker(workers)
    if name == "spark":
        from monostore.invokers.spark import SparkInvoker
        return SparkInvoker(options.get("spark") or _local_spark(workers), workers)
    if name == "lambda":
        from monostore.invokers.aws_lambda import LambdaInvoker
        return LambdaInvoker(options["function_name"], workers or 64)
    raise ValueError(f"unknown invoker {name!r} (choose local, lambda or spark)")


def _local_spark(workers: int | None):
    """The active SparkSession, or a local one (master from SPARK_MASTER, else local[workers])."""
    import os
    import sys
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise RuntimeError("--invoker spark needs PySpark: pip install 'lakestats[spark]'") from None
    master = os.environ.get("SPARK_MASTER") or f"local[{workers or os.cpu_count() or 1}]"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers import lakestats
    session = (SparkSession.builder.master(master).appName("lakestats")
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


__all__ = ["InvocationError", "Invoker", "StepFailed", "invoke_all", "make_invoker"]
