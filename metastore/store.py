"""Object stores behind one small interface: local directories and S3 (AWS, moto, localstack).

S3 is configured as the AWS SDK is (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION,
~/.aws/config): botocore resolves the endpoint and region, and Arrow's filesystem is pointed at
the same place, so the same code talks to AWS, moto's server or localstack.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


class StoreError(Exception):
    """An object store operation failed; the message names the object."""


@dataclass(frozen=True)
class DataFile:
    rel_path: str      # path relative to the table root, '/'-separated
    size: int
    etag: str          # S3 ETag, or the local file's mtime in ns
    # a table format's partition values (formats), else the path's Hive-style ones
    partition: tuple[tuple[str, str | None], ...] | None = field(default=None, compare=False)
    # how a table format's file is read (formats.rows): () for the file as it is
    reading: tuple[str, ...] = field(default=(), compare=False)

    @cached_property
    def fingerprint(self) -> str:
        return hashlib.sha1(f"{self.size}:{self.etag}".encode()).hexdigest()[:16]

    @property
    def partition_values(self) -> dict[str, str | None]:
        """The format's values, else Hive-style directory values: a/year=2024/m=1/f.parquet
        -> {year: 2024, m: 1}."""
        if self.partition is not None:
            return dict(self.partition)
        parts = self.rel_path.split("/")[:-1]
        return {k: unquote(v) for k, _, v in (p.partition("=") for p in parts if "=" in p)}


def is_hidden(rel_path: str) -> bool:
    return any(part.startswith(("_", ".")) for part in rel_path.split("/"))


class Store:
    """A root URI (a local directory or s3://bucket/prefix) and the operations lakestats needs."""

    def __init__(self, uri: str):
        self.uri = uri.rstrip("/")
        parsed = urlparse(self.uri)
        self.is_s3 = parsed.scheme in ("s3", "s3a")
        if self.is_s3:
            self.bucket, self.prefix = parsed.netloc, parsed.path.lstrip("/")
            self.root = f"{self.bucket}/{self.prefix}".rstrip("/")
            self.fs = s3_filesystem()
        else:
            self.root = os.path.abspath(parsed.path if parsed.scheme == "file" else self.uri)
            self.fs = pafs.LocalFileSystem()

    def child(self, *parts: str) -> "Store":
        return Store("/".join([self.uri, *parts]))

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def uri_of(self, *parts: str) -> str:
        return "/".join([self.uri, *parts])

    def list_files(self) -> list[DataFile]:
        """Every file below the root, hidden ones (any part starting with _ or .) excluded.
        Hidden top-level directories are not even listed: the statistics usually live in one
        (`_lakestats/`), with several files per partition."""
        try:
            files = self._list_s3() if self.is_s3 else self._list_local()
        except Exception as e:  # Arrow's and botocore's errors carry the reason in their text
            raise StoreError(f"{self.uri}: cannot list the table ({e})") from e
        return sorted((f for f in files if not is_hidden(f.rel_path)), key=lambda f: f.rel_path)

    def _list_local(self) -> list[DataFile]:
        start = len(self.root.rstrip("/")) + 1               # Arrow gives "/"-separated paths
        infos = []
        for top in self.fs.get_file_info(pafs.FileSelector(self.root)):
            if top.type == pafs.FileType.Directory and not is_hidden(top.base_name):
                infos += self.fs.get_file_info(pafs.FileSelector(top.path, recursive=True))
            else:
                infos.append(top)
        return [DataFile(i.path[start:], i.size, str(i.mtime_ns))
                for i in infos if i.type == pafs.FileType.File]

    def _list_s3(self) -> list[DataFile]:
        """One flat listing (1,000 keys a request); a hidden top-level directory is jumped
        over with one more request instead of paged through."""
        paginator = s3_client().get_paginator("list_objects_v2")
        prefix = f"{self.prefix}/" if self.prefix else ""
        out, after, jumped = [], "", set()
        while after is not None:
            pages = paginator.paginate(Bucket=self.bucket, Prefix=prefix,
                                       **({"StartAfter": after} if after else {}))
            after = None
            for obj in (o for page in pages for o in page.get("Contents", [])):
                top, nested, _ = obj["Key"][len(prefix):].partition("/")
                if nested and is_hidden(top):
                    if top not in jumped:
                        jumped.add(top)
                        after = f"{prefix}{top}/\U0010ffff"   # past every key below it
                        break
                    continue
                if not obj["Key"].endswith("/"):
                    out.append(DataFile(obj["Key"][len(prefix):], obj["Size"],
                                        obj["ETag"].strip('"')))
        return out

    def list_dirs(self) -> list[str]:
        """The names of the directories right below the root (on S3: one LIST a thousand)."""
        if not self.is_s3:
            try:
                return sorted(e.name for e in os.scandir(self.root) if e.is_dir())
            except FileNotFoundError:
                return []
        prefix = f"{self.prefix}/" if self.prefix else ""
        try:
            pages = s3_client().get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, Delimiter="/")
            return sorted(p["Prefix"][len(prefix):].rstrip("/")
                          for page in pages for p in page.get("CommonPrefixes", []))
        except Exception as e:  # botocore's errors carry the reason in their text
            raise StoreError(f"{self.uri}: cannot list ({e})") from e

    def data_file(self, rel_path: str) -> DataFile | None:
        """One file's listing entry, as list_files gives it (None if there is no such file):
        one HEAD request on S3."""
        if self.is_s3:
            try:
                head = _retried(lambda: _head(*self._key(rel_path)))
            except OSError as e:
                raise StoreError(f"{self.uri_of(rel_path)}: {e}") from e
            if head is None:
                return None
            return DataFile(rel_path, head["ContentLength"], head["ETag"].strip('"'))
        info = self.fs.get_file_info(self.path(rel_path))
        if info.type != pafs.FileType.File:
            return None
        return DataFile(rel_path, info.size, str(info.mtime_ns))

    def size(self, *parts: str) -> int | None:
        """A file's size (None if there is no such file): one HEAD on S3 (Arrow's adds a
        LIST when the key is missing, to tell a directory)."""
        if self.is_s3:
            head = _retried(lambda: _head(*self._key(*parts)))
            return None if head is None else head["ContentLength"]
        info = self.fs.get_file_info(self.path(*parts))
        return info.size if info.type == pafs.FileType.File else None

    def exists(self, *parts: str) -> bool:
        return self.size(*parts) is not None

    def root_exists(self) -> bool:
        """Whether the root is there: a local directory, or an S3 prefix holding an object
        (S3 has no empty directories). One LIST of one key on S3."""
        if not self.is_s3:
            return os.path.isdir(self.root)
        try:
            listed = s3_client().list_objects_v2(
                Bucket=self.bucket, Prefix=f"{self.prefix}/" if self.prefix else "", MaxKeys=1)
        except Exception as e:  # botocore's errors carry the reason in their text
            raise StoreError(f"{self.uri}: cannot list ({e})") from e
        return listed.get("KeyCount", 0) > 0

    def _key(self, *parts: str) -> tuple[str, str]:
        bucket, _, key = self.path(*parts).partition("/")
        return bucket, key

    # reads retry transient S3 errors themselves: Arrow's client does not retry them all, and
    # botocore does not retry a body whose reading fails. On S3 they are boto3 GETs: a GET
    # answers with the object's size, so no read needs a HEAD first
    def read_bytes(self, *parts: str) -> bytes:
        if self.is_s3:
            return _retried(lambda: _get(*self._key(*parts))[0])

        def read() -> bytes:
            with self.fs.open_input_stream(self.path(*parts)) as f:
                return f.read()
        return _retried(read)

    def read_range(self, offset: int, length: int, *parts: str) -> bytes:
        """`length` bytes from `offset` (one ranged GET on S3)."""
        if self.is_s3:
            return _retried(lambda: _get(*self._key(*parts),
                                         f"bytes={offset}-{offset + length - 1}")[0])
        with self.fs.open_input_file(self.path(*parts)) as f:
            return f.read_at(length, offset)

    def open_input(self, *parts: str):
        """A file to read by ranges (on S3: opened by one GET of its tail, which holds a
        small file whole; each further range one GET, retried)."""
        if self.is_s3:
            return pa.PythonFile(_S3Object(*self._key(*parts)), mode="r")
        return self.fs.open_input_file(self.path(*parts))

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Readers see the old object or the new one: S3 PUTs are atomic; locally we rename."""
        path = self.path(*parts)
        if self.is_s3:   # one PUT (a multipart upload would notify ObjectCreated twice)
            bucket, _, key = path.partition("/")
            s3_client().put_object(Bucket=bucket, Key=key, Body=data)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = _temporary(path)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @contextlib.contextmanager
    def atomic_output(self, *parts: str):
        """A stream that readers see only once the block ends without an exception: on S3 an
        upload completed then, and aborted otherwise (Arrow's S3 stream would complete it, a
        truncated file at the key); locally we write a temporary file and rename it."""
        path = self.path(*parts)
        if self.is_s3:
            upload = _S3Upload(*self._key(*parts))
            try:
                with pa.PythonFile(upload, mode="w") as stream:
                    yield stream
                upload.complete()
            except BaseException:
                upload.abort()
                raise
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = _temporary(path)
        try:
            with pa.OSFile(tmp, "wb") as stream:
                yield stream
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    # Parquet pages written here carry CRC checksums, verified whenever a page is read: a
    # corrupt statistics file fails its read instead of answering wrong
    def write_parquet(self, table: pa.Table, *parts: str, row_group_size: int | None = None) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=row_group_size, compression="zstd",
                       write_page_checksum=True)
        self.write_bytes(sink.getvalue().to_pybytes(), *parts)

    @contextlib.contextmanager
    def parquet_writer(self, name: str, schema: pa.Schema, compression: str = "zstd",
                       **options):
        """A ParquetWriter of a file that readers see whole, once closed."""
        with self.atomic_output(name) as sink, pq.ParquetWriter(
                sink, schema, compression=compression, write_page_checksum=True,
                **options) as writer:
            yield writer

    def read_parquet(self, *parts: str, columns: list[str] | None = None, filters=None) -> pa.Table:
        """`columns` are top-level names. Without filters, the file is read directly: the
        dataset machinery (and the pandas import it brings, half a second) only for filters."""
        if filters is None:
            with self.open_input(*parts) as f:
                return pq.ParquetFile(f, page_checksum_verification=True).read(columns=columns)
        return _retried(lambda: pq.read_table(self.path(*parts), filesystem=self.fs,
                                              columns=columns, filters=filters,
                                              page_checksum_verification=True))

    def open_parquet(self, *parts: str, whole: bool = False) -> pq.ParquetFile:
        """whole=True, for a file read entirely: one GET on S3 instead of one per column
        chunk (a file of 16 columns in 4 row groups is 60-odd requests otherwise)."""
        if whole and self.is_s3:
            return pq.ParquetFile(pa.BufferReader(self.read_bytes(*parts)),
                                  page_checksum_verification=True)
        return pq.ParquetFile(self.open_input(*parts), page_checksum_verification=True)

    def delete_dir(self, *parts: str) -> None:
        try:
            self.fs.delete_dir(self.path(*parts))
        except (FileNotFoundError, OSError):
            pass


def _temporary(path: str) -> str:
    """A temporary name beside `path`, hidden (a leading dot) from listings: what a writer
    killed before its rename leaves behind is never taken for a file."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.{uuid.uuid4().hex}.tmp")


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


def _is_transient(error: BaseException) -> bool:
    """An object-store error that the same request may not meet again."""
    return isinstance(error, OSError) and any(t in str(error) for t in TRANSIENT)


def _retried(read, attempts: int = READ_ATTEMPTS):
    """read(), again after a transient error (with a short backoff), up to `attempts` times."""
    for attempt in range(attempts):
        try:
            return read()
        except OSError as e:
            if not _is_transient(e) or attempt == attempts - 1:
                raise
            time.sleep(0.05 * 2 ** attempt)


@contextlib.contextmanager
def _s3_errors(bucket: str, key: str):
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


def _get(bucket: str, key: str, byte_range: str | None = None) -> tuple[bytes, int]:
    """One GET, of a byte range if given: the bytes, and the object's size."""
    from botocore.exceptions import ClientError
    with _s3_errors(bucket, key):
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


def _head(bucket: str, key: str) -> dict | None:
    """One HEAD: the object's metadata, None if there is no such object."""
    try:
        with _s3_errors(bucket, key):
            return s3_client().head_object(Bucket=bucket, Key=key)
    except FileNotFoundError:
        return None


class _S3Object(io.RawIOBase):
    """An S3 object read by ranges: opened by one GET of its last TAIL bytes (the size comes
    with them, and the Parquet footer, or the whole of a small file), then a GET a range."""

    def __init__(self, bucket: str, key: str):
        self._bucket, self._key = bucket, key
        self._tail, self._size = _retried(lambda: _get(bucket, key, f"bytes=-{TAIL}"))
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
            head = _retried(lambda: _get(self._bucket, self._key,
                                         f"bytes={start}-{upto - 1}")[0])
        data = head + self._tail[max(start, self._tail_at) - self._tail_at:
                                 max(end, self._tail_at) - self._tail_at]
        self._pos += len(data)
        return data

    readall = read


class _S3Upload(io.RawIOBase):
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
        with _s3_errors(self._bucket, self._key):
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
        with _s3_errors(self._bucket, self._key):
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


@functools.lru_cache(maxsize=None)
def s3_client():
    """One client per process (its endpoint is resolved once: cache_clear() after changing
    the AWS configuration), with a connection for each of the threads that read side by side."""
    import boto3
    from botocore.config import Config
    return boto3.client("s3", config=Config(max_pool_connections=32))
