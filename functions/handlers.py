"""Worker entry points. Each takes the JSON event an AWS Lambda function would receive, so the
local process pool, Spark tasks and Lambda all run exactly this code."""
from __future__ import annotations

import os

from functions import frequencies, partition, ranks
from functions.column_stats import BLOOM_MIN_DISTINCT
from functions.partition import PartitionError
from metastore.store import Store
from monostore.jobs import Job


def partition_stats(event: dict) -> dict:
    """Statistics of one data file. Event: table, rel_path, fingerprint, stats_dir, options, and
    job + redis_url when a coordinator is waiting for the result."""
    rel_path = event["rel_path"]
    base = {"rel_path": rel_path, "fingerprint": event["fingerprint"]}
    try:
        stats = partition.compute(Store(event["table"]), rel_path,
                                  max_bins=_option(event, "max_bins", "LAKESTATS_BINS"),
                                  bloom_min_distinct=_option(
                                      event, "bloom_min_distinct",
                                      "LAKESTATS_BLOOM_MIN_DISTINCT"))
    except PartitionError as e:
        result = {**base, "status": "failed", "error": str(e)}
    else:
        partition.write(stats, Store(event["stats_dir"]))
        result = {**base, "status": "ok", "row_count": stats.row_count}
    if event.get("job"):
        Job(event["redis_url"], event["job"]).report(rel_path, result)
    return result


def _option(event: dict, key: str, env: str) -> int:
    """The event's option, else the function's environment (template.yaml), else the default."""
    defaults = {"max_bins": partition.DEFAULT_BINS,
                "bloom_min_distinct": BLOOM_MIN_DISTINCT}
    return int(event.get(key) or os.environ.get(env) or defaults[key])


HANDLERS = {"partition_stats": partition_stats, "rank_sample": ranks.rank_sample,
            "rank_scatter": ranks.rank_scatter, "rank_merge": ranks.rank_merge,
            "freq_send": frequencies.freq_send, "freq_confirm": frequencies.freq_confirm,
            "freq_reduce": frequencies.freq_reduce}


def sqs_batch(event: dict) -> dict:
    """One SQS batch through the Lambda handler, in a worker process (`lakestats watch`):
    the handler's response and the tables whose reduction it left to the caller."""
    from functions import lambda_handlers as lh
    response = lh.partition_stats_handler(event["sqs_event"],
                                          lh.LocalContext(seconds=event["seconds"]))
    reductions = sorted(lh.LOCAL_REDUCTIONS)
    lh.LOCAL_REDUCTIONS.clear()
    return {"response": response, "reductions": reductions}


HANDLERS["sqs_batch"] = sqs_batch


def handle(event: dict, context=None) -> dict:
    return HANDLERS[event["action"]](event)


lambda_handler = handle
