"""S3 requests as lakestats makes them: retried when transient, botocore's errors as Arrow's,
ranged reads through one file-like object, uploads that abort on failure, the clients
(boto3's and Arrow's) pointed where the AWS SDK points, and how a process that used them
ends."""
from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import io
import os
import sys
import threading
import time
from typing import NoReturn
from urllib.parse import urlparse

import pyarrow.fs as pafs


# how transient errors of S3 show in Arrow's and botocore's messages. Arrow's S3 client does not
# retry all of them: the body of an error answer to a small ranged GET overflows the read's
# buffer and is reported as INTERNAL_FAILURE "Failed to flush response stream"
READ_ATTEMPTS = 5
TRANSIENT = ("Failed to flush response stream", "NETWORK_CONNECTION", "SlowDown",
             "InternalError", "INTERNAL_FAILURE", "ServiceUnavailable", "Connection reset",
             "Connection was closed", "timed out", "Read timeout", "response stream",
             "Could not connect")
# a Parquet reader's speculative footer read: the first GET of a file asks for this much of
# its end, so a small statistics file is read whole in one request
TAIL = 64 * 1024
# the parts of a streamed S3 upload (S3 takes 5 MiB and more, but for the last)
PART_SIZE = 8 * 1024 * 1024


def is_transient(error: BaseException) -> bool:
    """An object-store error that the same request may not meet again."""
    return isinstance(error, OSError) and any(t in str(error) for t in TRANSIENT)


def retried(read, attempts: int = READ_ATTEMPTS):
    """read(), again after a transient error (with a short backoff), up to `attempts` times."""
    for attempt in range(attempts):
        try:
            return read()
        except OSError as e:
            if not is_transient(e) or attempt == attempts - 1:
                raise
            time.sleep(0.05 * 2 ** attempt)


@contextlib.contextmanager
def s3_errors(bucket: str, key: str):
    """botocore's errors as Arrow's are: OSError, FileNotFoundError for a missing object."""
    from botocore.exceptions import BotoCoreError, ClientError
    try:
        yield
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            raise FileNotFoundError(f"s3://{bucket}/{key}: no such object") from e
        raise OSError(f"s3://{bucket}/{key}: {e}") from e
    except BotoCoreError as e:
        raise OSError(f"s3://{bucket}/{key}: {e}") from e


def get_object(bucket: str, key: str, byte_range: str | None = None) -> tuple[bytes, int]:
    """One GET, of a byte range if given: the bytes, and the object's size."""
    from botocore.exceptions import ClientError
    with s3_errors(bucket, key):
        try:
            reply = s3_client().get_object(Bucket=bucket, Key=key,
                                           **({"Range": byte_range} if byte_range else {}))
        except ClientError as e:       # the tail of an empty object is not satisfiable
            if e.response.get("Error", {}).get("Code") == "InvalidRange" and \
                    (byte_range or "").startswith("bytes=-"):
                return b"", 0
            raise
        size = reply.get("ContentRange", "").rpartition("/")[2]
        return reply["Body"].read(), int(size or reply["ContentLength"])


def head_object(bucket: str, key: str) -> dict | None:
    """One HEAD: the object's metadata, None if there is no such object."""
    try:
        with s3_errors(bucket, key):
            return s3_client().head_object(Bucket=bucket, Key=key)
    except FileNotFoundError:
        return None


class S3Object(io.RawIOBase):
    """An S3 object read by ranges: opened by one GET of its last TAIL bytes (the size comes
    with them, and the Parquet footer, or the whole of a small file), then a GET a range."""

    def __init__(self, bucket: str, key: str):
        self._bucket, self._key = bucket, key
        self._tail, self._size = retried(lambda: get_object(bucket, key, f"bytes=-{TAIL}"))
        self._tail_at, self._pos = self._size - len(self._tail), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = (0, self._pos, self._size)[whence] + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        start = self._pos
        end = self._size if size is None or size < 0 else min(start + size, self._size)
        if end <= start:
            return b""
        head = b""
        if start < self._tail_at:              # the part before the tail, from S3
            upto = min(end, self._tail_at)
            head = retried(lambda: get_object(self._bucket, self._key,
                                         f"bytes={start}-{upto - 1}")[0])
        data = head + self._tail[max(start, self._tail_at) - self._tail_at:
                                 max(end, self._tail_at) - self._tail_at]
        self._pos += len(data)
        return data

    readall = read


class S3Upload(io.RawIOBase):
    """A stream to one S3 object, seen by readers only once complete() is called: one PUT if
    it holds less than a part, else a multipart upload of PART_SIZE parts sent as they fill
    (memory holds one) that abort() deletes."""

    def __init__(self, bucket: str, key: str):
        self._bucket, self._key = bucket, key
        self._buffer, self._written = bytearray(), 0
        self._upload_id, self._parts = None, []

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written

    def write(self, data) -> int:
        self._buffer += data
        self._written += len(data)
        while len(self._buffer) >= PART_SIZE:
            self._send(bytes(self._buffer[:PART_SIZE]))
            del self._buffer[:PART_SIZE]
        return len(data)

    def _send(self, part: bytes) -> None:
        where = {"Bucket": self._bucket, "Key": self._key}
        with s3_errors(self._bucket, self._key):
            if self._upload_id is None:
                self._upload_id = s3_client().create_multipart_upload(**where)["UploadId"]
            number = len(self._parts) + 1
            etag = s3_client().upload_part(**where, UploadId=self._upload_id, Body=part,
                                           PartNumber=number)["ETag"]
        self._parts.append({"ETag": etag, "PartNumber": number})

    def complete(self) -> None:
        if self._upload_id is not None and self._buffer:
            self._send(bytes(self._buffer))
        where = {"Bucket": self._bucket, "Key": self._key}
        with s3_errors(self._bucket, self._key):
            if self._upload_id is None:
                s3_client().put_object(**where, Body=bytes(self._buffer))
            else:
                s3_client().complete_multipart_upload(**where, UploadId=self._upload_id,
                                                      MultipartUpload={"Parts": self._parts})

    def abort(self) -> None:
        """Nothing appears at the key (an upload whose abort fails is invisible all the
        same, and a bucket lifecycle rule deletes its parts)."""
        if self._upload_id is not None:
            with contextlib.suppress(Exception):
                s3_client().abort_multipart_upload(Bucket=self._bucket, Key=self._key,
                                                   UploadId=self._upload_id)


def s3_filesystem() -> pafs.S3FileSystem:
    """Arrow's S3 filesystem at botocore's endpoint and region, one per process and endpoint."""
    meta = s3_client().meta
    return _s3_filesystem(meta.region_name or "us-east-1", meta.endpoint_url)


@functools.lru_cache(maxsize=None)
def _s3_filesystem(region: str, endpoint_url: str) -> pafs.S3FileSystem:
    # delayed open: an output stream closed before its first part is one PUT, not a
    # multipart upload's three requests
    kwargs = {"region": region, "allow_delayed_open": True}
    endpoint = urlparse(endpoint_url)
    if not (endpoint.hostname or "").endswith(".amazonaws.com"):
        kwargs.update(endpoint_override=endpoint.netloc, scheme=endpoint.scheme or "https")
    return pafs.S3FileSystem(**kwargs)


# at any interpreter exit, our filesystems are dropped before pyarrow's own exit handler (an
# earlier registration: it runs later) finalizes Arrow's S3, as its maintainers advise
atexit.register(_s3_filesystem.cache_clear)


def finalize_s3() -> None:
    """Arrow's S3 shut down for good in this process: our filesystems dropped (and any reader
    left in a reference cycle that holds one), then the AWS SDK finalized
    (pyarrow.fs.ensure_s3_finalized). From then on every S3 call through Arrow fails: for
    the end of a process only."""
    _s3_filesystem.cache_clear()
    gc.collect()
    pafs.ensure_s3_finalized()


# how long the exit handlers may take: one that hangs does not keep the process (Arrow's S3
# finalization has been reported to deadlock, apache/arrow#50188)
EXIT_HANDLERS_SECONDS = 10.0


def end_process(code: int) -> NoReturn:
    """End this process, its work done (the command line's own process, a worker process):
    output flushed, Arrow's S3 finalized and the exit handlers run while the interpreter is
    whole (for EXIT_HANDLERS_SECONDS at most), then os._exit, without the interpreter's
    teardown.

    In that teardown, a thread of Arrow's pools may still be dropping the last reference to a
    buffer Python owns (the bytes S3Object reads are handed to Parquet's decoding tasks
    uncopied) and ask for the GIL: CPython ends such a thread on the spot, inside a C++
    destructor, and std::terminate aborts the process ("terminate called without an active
    exception", exit 134) after complete output. Finalizing S3 does not wait for them."""
    _flush()
    handlers = threading.Thread(target=_exit_handlers, daemon=True, name="lakestats-exit")
    handlers.start()
    handlers.join(EXIT_HANDLERS_SECONDS)
    _flush()
    os._exit(code)


def _exit_handlers() -> None:
    with contextlib.suppress(Exception):
        finalize_s3()
    atexit._run_exitfuncs()      # what the interpreter runs at exit (logging, multiprocessing)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):     # a closed pipe, a stream that is no file
            stream.flush()


@functools.lru_cache(maxsize=None)
def s3_client():
    """One client per process (its endpoint is resolved once: cache_clear() after changing
    the AWS configuration), with a connection for each of the threads that read side by side."""
    import boto3
    from botocore.config import Config
    return boto3.client("s3", config=Config(max_pool_connections=32))
