"""Exact table-level frequencies of every column, by three distributed algorithms.

Every partition stores its exact frequencies; the table's are their sum. The coordinator
chooses, per column, from the partitions' counts (S = sum of partition distinct counts, and the
duplicates estimated from the merged KMV sketch):

- low-distinct   S <= low_distinct_max. The columns are cut into batches (contiguous, of about
                 equal S, at most LOW_DISTINCT_BATCH values each), one reducer per batch.
                 Every partition sends each reducer one payload, its counts of the batch's
                 columns; the reducer sums them (one hash aggregation for all its columns) and
                 streams them back in file order. Moves S values twice, through the exchange
                 (object store): a thousand columns cost a few payloads per partition, not a
                 thousand Redis round trips, and nothing is held in Redis.
- low-duplicate  near-unique columns: at most low_duplicate_max values can repeat. Workers send
                 the 64-bit hashes of their values (8 bytes each, flagged when repeated within
                 the partition); the coordinator passes them, partition by partition, through
                 one Bloom filter sized for S values; hashes it has probably seen, and flagged
                 ones, are the candidates, consolidated in Redis and broadcast back; workers
                 send the candidates they hold with their counts to Redis, where they are
                 summed. Values seen once are implied, not stored, unless all_values asks for
                 them; the distinct count stays exact: S minus the repeats the candidates
                 reveal. Moves 9 bytes per value, plus the candidates.
- binned         everything else. Workers cut their counts into one bin per reducer (integer and
                 temporal values by range between the table's min and max, other values by
                 hash) and scatter them through the exchange (object store); each reducer sums
                 its bin and streams it back sorted. Moves every value twice.

The output of all three is identical, byte for byte: frequencies.parquet lists a column's
values by decreasing frequency, then by value bytes; values seen once are left out when the
column is near-unique (its automatic choice is low-duplicate) and all_values is off, whatever
algorithm was forced. The coordinator holds one batch per stream, the Bloom filter (one byte
per bit while it is built) and the candidates, never a whole column; a low-distinct reducer
holds its batch, at most LOW_DISTINCT_BATCH + low_distinct_max values.

Modules: choice (which algorithm suits a column), steps (the worker side), driver (the
coordinator side), collect (the coordinator's last step: streaming each column's result into
frequencies.parquet).
"""
from __future__ import annotations

from lakestats.core.settings import FREQUENCY_ALGORITHMS
from lakestats.fleet import protocol

LOW_DISTINCT, LOW_DUPLICATE, BINNED = FREQUENCY_ALGORITHMS


def channel(column: int | str, name: str) -> str:
    """The exchange channels of column k (bin, hashes, candidates, once, reduced), and of the
    low-distinct column batches (channel(LOW_DISTINCT, "counts" | "reduced"))."""
    return protocol.channel("frequencies", column, name)
