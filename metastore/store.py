"""Object stores behind one small interface: local directories and S3 (AWS, moto, localstack).

S3 is configured as the AWS SDK is (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION,
~/.aws/config): botocore resolves the endpoint and region, and Arrow's filesystem is pointed at
the same place, so the same code talks to AWS, moto's server or localstack.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import os
import uuid
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakestats.core.errors import ServiceUnavailable
from lakestats.metastore import s3
from lakestats.metastore.s3 import s3_client, s3_filesystem  # noqa: F401 - the store's S3 clients


# zstd sets up a context for every page it writes or reads (~9 us each way): on a small file
# that costs more than its smaller output saves (a partition of 5 small columns: its three
# files encoded in 0.57 ms with LZ4, 1.14 ms with zstd). Files of less data are written with
# LZ4, larger ones with zstd, whose bytes then count.
SMALL_PARQUET_BYTES = 256 << 10


def codec_for(table: pa.Table) -> str:
    """The codec of a file of `table`'s data (buffer sizes: 5 µs; nbytes took 40-100)."""
    return "lz4" if table.get_total_buffer_size() < SMALL_PARQUET_BYTES else "zstd"


class StoreError(ServiceUnavailable):
    """An object store operation failed (after retries of transient errors); the message
    names the object."""


class _computed_once:
    """functools.cached_property without the lock Python 3.11 takes at each first access: a
    listing of 10,000 files spent 25 ms in it."""

    def __init__(self, compute):
        self.compute, self.name, self.__doc__ = compute, compute.__name__, compute.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.compute(obj)   # the instance's from now on
        return value


@dataclass(frozen=True, init=False)
class DataFile:
    rel_path: str      # path relative to the table root, '/'-separated
    size: int
    etag: str          # S3 ETag, or the local file's mtime in ns
    # a table format's partition values (formats), else the path's Hive-style ones
    partition: tuple[tuple[str, str | None], ...] | None = field(default=None, compare=False)
    # how a table format's file is read (formats.rows): () for the file as it is
    reading: tuple[str, ...] = field(default=(), compare=False)
    # when it was last written, ns since the epoch (a local file's mtime, an S3 object's
    # LastModified); None where the listing does not say (a table format's snapshot)
    modified_ns: int | None = field(default=None, compare=False)

    def __init__(self, rel_path: str, size: int, etag: str,
                 partition: tuple[tuple[str, str | None], ...] | None = None,
                 reading: tuple[str, ...] = (), modified_ns: int | None = None):
        # frozen dataclasses set each field through object.__setattr__: twice as slow, and a
        # plan makes one of these per file of the table
        self.__dict__.update(rel_path=rel_path, size=size, etag=etag, partition=partition,
                             reading=reading, modified_ns=modified_ns)

    @_computed_once
    def fingerprint(self) -> str:
        """What names the file's rows: its content, and how it is read (the SHA-1 of
        "size:etag", then NUL and each reading step, NUL-separated)."""
        data = f"{self.size}:{self.etag}".encode()     # one digest call: a plan takes 10,000
        return hashlib.sha1(data + _reading_bytes(self.reading) if self.reading
                            else data).hexdigest()[:16]

    @_computed_once
    def partition_values(self) -> dict[str, str | None]:
        """The format's values, else Hive-style directory values: a/year=2024/m=1/f.parquet
        -> {year: 2024, m: 1} (one dict, not to be changed)."""
        if self.partition is not None:
            return dict(self.partition)
        return dict(directory_values(self.rel_path.rpartition("/")[0]))


@functools.lru_cache(maxsize=1 << 12)      # files of a directory or a snapshot share it
def _reading_bytes(reading: tuple[str, ...]) -> bytes:
    """A reading as its fingerprint hashes it after the file's size and ETag."""
    return ("\0" + "\0".join(reading)).encode()


@functools.lru_cache(maxsize=1 << 12)
def reading_digest(reading: tuple[str, ...]) -> str:
    """What the partition index records of how a file is read ('' for the file as it is):
    with its size and ETag, what its fingerprint hashes, so that a plan compares those three
    as arrays instead of hashing every listed file (pruning.freshness)."""
    return hashlib.sha1(_reading_bytes(reading)).hexdigest()[:16] if reading else ""


@functools.lru_cache(maxsize=1 << 16)      # files of one directory share its values
def directory_values(directory: str) -> tuple[tuple[str, str], ...]:
    """Hive-style values of a directory: a/year=2024/m=1 -> (("year", "2024"), ("m", "1"))."""
    return tuple((k, unquote(v)) for k, _, v in (p.partition("=") for p in directory.split("/")
                                                  if "=" in p))


def _ns(stamp) -> int | None:
    """An S3 answer's LastModified (a datetime) in ns since the epoch."""
    if stamp is None:
        return None
    epoch = dt.datetime(1970, 1, 1, tzinfo=stamp.tzinfo or dt.timezone.utc)
    return (stamp - epoch) // dt.timedelta(microseconds=1) * 1000


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
            self.fs = s3.s3_filesystem()
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
        Hidden directories are not even listed (on S3, the top-level ones): the statistics
        usually live in one (`_lakestats/`), with several files per partition."""
        return [DataFile(path, size, etag, None, (), modified)
                for path, size, etag, modified in self.list_entries()]

    def list_entries(self) -> list[tuple[str, int, str, int | None]]:
        """list_files' files as (rel_path, size, etag, modified_ns), in path order: for a
        caller that makes DataFiles of its own of them."""
        try:
            found = [e for e in self._list_s3() if not is_hidden(e[0])] if self.is_s3 \
                else self._list_local(self.root, "", [])
        except Exception as e:  # Arrow's and botocore's errors carry the reason in their text
            raise StoreError(f"{self.uri}: cannot list the table ({e})") from e
        found.sort()
        return found

    def _list_local(self, directory: str, prefix: str, out: list[tuple]) -> list[tuple]:
        """The files below `directory`, hidden ones not even entered; symbolic links are
        followed, as Arrow's listing follows them."""
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if name[0] in "_.":
                    continue
                if entry.is_dir():
                    self._list_local(entry.path, f"{prefix}{name}/", out)
                elif entry.is_file():
                    stat = entry.stat()
                    mtime = stat.st_mtime_ns
                    out.append((prefix + name, stat.st_size, str(mtime), mtime))
        return out

    def _list_s3(self) -> list[tuple]:
        """One flat listing (1,000 keys a request); a hidden top-level directory is jumped
        over with one more request instead of paged through."""
        paginator = s3.s3_client().get_paginator("list_objects_v2")
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
                    out.append((obj["Key"][len(prefix):], obj["Size"], obj["ETag"].strip('"'),
                                _ns(obj.get("LastModified"))))
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
            pages = s3.s3_client().get_paginator("list_objects_v2").paginate(
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
                head = s3.retried(lambda: s3.head_object(*self._key(rel_path)))
            except OSError as e:
                raise StoreError(f"{self.uri_of(rel_path)}: {e}") from e
            if head is None:
                return None
            return DataFile(rel_path, head["ContentLength"], head["ETag"].strip('"'),
                            modified_ns=_ns(head.get("LastModified")))
        info = self.fs.get_file_info(self.path(rel_path))
        if info.type != pafs.FileType.File:
            return None
        return DataFile(rel_path, info.size, str(info.mtime_ns), modified_ns=info.mtime_ns)

    def size(self, *parts: str) -> int | None:
        """A file's size (None if there is no such file): one HEAD on S3 (Arrow's adds a
        LIST when the key is missing, to tell a directory)."""
        if self.is_s3:
            head = s3.retried(lambda: s3.head_object(*self._key(*parts)))
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
            listed = s3.s3_client().list_objects_v2(
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
            return s3.retried(lambda: s3.get_object(*self._key(*parts))[0])

        def read() -> bytes:
            with self.fs.open_input_stream(self.path(*parts)) as f:
                return f.read()
        return s3.retried(read)

    def read_range(self, offset: int, length: int, *parts: str) -> bytes:
        """`length` bytes from `offset` (one ranged GET on S3)."""
        if self.is_s3:
            return s3.retried(lambda: s3.get_object(*self._key(*parts),
                                         f"bytes={offset}-{offset + length - 1}")[0])
        with self.fs.open_input_file(self.path(*parts)) as f:
            return f.read_at(length, offset)

    def open_input(self, *parts: str):
        """A file to read by ranges (on S3: opened by one GET of its tail, which holds a
        small file whole; each further range one GET, retried)."""
        if self.is_s3:
            return pa.PythonFile(s3.S3Object(*self._key(*parts)), mode="r")
        return self.fs.open_input_file(self.path(*parts))

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Readers see the old object or the new one: S3 PUTs are atomic; locally we rename."""
        path = self.path(*parts)
        if self.is_s3:   # one PUT (a multipart upload would notify ObjectCreated twice)
            bucket, _, key = path.partition("/")
            s3.s3_client().put_object(Bucket=bucket, Key=key, Body=data)
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
            upload = s3.S3Upload(*self._key(*parts))
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
    def write_parquet(self, table: pa.Table, *parts: str, row_group_size: int | None = None,
                      compression: str | None = None, **options) -> int:
        """`options`: pq.write_table's, beside the page checksums; `compression` by default
        as `codec_for` picks it. Returns the file's size."""
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=row_group_size,
                       compression=compression or codec_for(table), write_page_checksum=True,
                       **options)
        data = sink.getvalue().to_pybytes()
        self.write_bytes(data, *parts)
        return len(data)

    @contextlib.contextmanager
    def parquet_writer(self, name: str, schema: pa.Schema, compression: str = "zstd",
                       **options):
        """A ParquetWriter of a file that readers see whole, once closed; then its
        `file_size` is the file's size."""
        with self.atomic_output(name) as sink:
            with pq.ParquetWriter(sink, schema, compression=compression,
                                  write_page_checksum=True, **options) as writer:
                yield writer
            writer.file_size = sink.tell()

    def read_parquet(self, *parts: str, columns: list[str] | None = None, filters=None) -> pa.Table:
        """`columns` are top-level names. Without filters, the file is read directly: the
        dataset machinery (and the pandas import it brings, half a second) only for filters."""
        if filters is None:
            with self.open_input(*parts) as f:
                return pq.ParquetFile(f, page_checksum_verification=True).read(columns=columns)
        return s3.retried(lambda: pq.read_table(self.path(*parts), filesystem=self.fs,
                                              columns=columns, filters=filters,
                                              page_checksum_verification=True))

    def open_parquet(self, *parts: str, whole: bool = False, int96_unit: str | None = None
                     ) -> pq.ParquetFile:
        """whole=True, for a file read entirely: one GET on S3 instead of one per column
        chunk (a file of 16 columns in 4 row groups is 60-odd requests otherwise).
        `int96_unit`: the unit INT96 timestamps are read in (Arrow's default: ns). A UUID
        column is its 16 bytes (fixed_size_binary), as writers that do not annotate it store
        it, not Arrow's extension type, which no statistic covers."""
        source = pa.BufferReader(self.read_bytes(*parts)) if whole and self.is_s3 \
            else self.open_input(*parts)
        return pq.ParquetFile(source, page_checksum_verification=True,
                              coerce_int96_timestamp_unit=int96_unit,
                              arrow_extensions_enabled=False)

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
