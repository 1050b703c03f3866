"""Kafka's ``RemoteStorageManager`` (KIP-405): the plugin that owns a segment's bytes in the
remote tier, and ``PyArrowRemoteStorageManager``, which keeps them in any store ``pyarrow.fs``
opens (a local folder, S3 or an S3-compatible server, GCS, HDFS...).

Objects are laid out exactly as Kafka's test plugin ``LocalTieredStorage`` lays out its files
(``RemoteTopicPartitionDirectory``, ``RemoteLogSegmentFileset``)::

    <root>/kafka-tiered-storage/<topic>-<partition>-<topic id>/<start offset, 20 digits>-<segment id><suffix>

with the suffixes ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` (only when the segment had
one), ``.leader_epoch_checkpoint`` and ``.snapshot``; ids are Kafka's 22-character URL-safe base64.
A ``LocalTieredStorage`` configured with ``dir=<root>`` therefore reads what this class writes
into a local folder, and the other way round.

Copies are atomic per object: each object is first written under
``<root>/.kafkalog-uploads/<partition dir>/<object name>.<random>`` (outside
``kafka-tiered-storage``, whose every name Kafka's ``RemoteTopicPartitionDirectory`` parses) and
then moved to its name. On a local file system the temporary file is fsynced, renamed (atomic)
and the directory fsynced. On S3 a move is a server-side copy and a delete: a ``PUT`` alone would
be atomic too, but pyarrow completes an output stream even when the writer fails half way (its
streams close, never abort), so a direct upload interrupted by an error would leave a truncated
object under the final name. The ``.log`` is moved last, so a fileset whose ``.log`` exists is
complete. A failed copy deletes what it wrote (as ``LocalTieredStorage`` does); what a killed
process leaves under ``.kafkalog-uploads`` is never read, and ``delete_log_segment_data`` of the
segment removes it.

Ranged reads of a segment's ``.log`` in an object store share one open file per object (a few
are kept, the least recently read forgotten first): pyarrow's S3 file asks the object's size
when it is opened, so a sweep of a segment costs that request once, not once per ranged read. A
read through a shared file that fails forgets it and is tried once more on the object opened
afresh, so that a deleted object or a store gone away fails as it fails to open (the segment
ids are unique and an object is complete once it has its name: a shared file never sees its
object change).

Configuration follows Kafka's plugin convention: the broker properties under
``remote.log.storage.manager.impl.prefix`` (default ``rsm.config.``), prefix stripped
(``from_broker_properties``). Secrets are never logged nor shown in errors or ``repr``.
"""

from __future__ import annotations

import enum
import io
import logging
import os
import secrets
import stat
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import SplitResult, parse_qsl, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from ..checkpoint import topic_id_to_str
from ..data_files import kind_of, open_data_file
from ..errors import InvalidConfigError, RemotePositionError, RemoteResourceNotFoundError, RemoteStorageError
from ..log import filename_prefix
from .metadata import RemoteLogSegmentMetadata, TopicIdPartition
from .remote_input_stream import RemoteInputStream, storage_error

logger = logging.getLogger(__name__)

REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX_PROP = "remote.log.storage.manager.impl.prefix"
DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX = "rsm.config."
ROOT_STORAGE_DIR_NAME = "kafka-tiered-storage"          # LocalTieredStorage.ROOT_STORAGE_DIR_NAME
UPLOADS_DIR_NAME = ".kafkalog-uploads"
_CHUNK = 8 << 20
_OPEN_SEGMENTS = 16             # segment objects kept open for ranged reads (object stores)


class IndexType(enum.Enum):
    """``RemoteStorageManager.IndexType``."""

    OFFSET = "OFFSET"
    TIMESTAMP = "TIMESTAMP"
    PRODUCER_SNAPSHOT = "PRODUCER_SNAPSHOT"
    TRANSACTION = "TRANSACTION"
    LEADER_EPOCH = "LEADER_EPOCH"


class RemoteLogSegmentFileType(enum.Enum):
    """``RemoteLogSegmentFileset.RemoteLogSegmentFileType``: (suffix, optional)."""

    SEGMENT = (".log", False)
    OFFSET_INDEX = (".index", False)
    TIME_INDEX = (".timeindex", False)
    TRANSACTION_INDEX = (".txnindex", True)
    LEADER_EPOCH_CHECKPOINT = (".leader_epoch_checkpoint", False)
    PRODUCER_SNAPSHOT = (".snapshot", False)

    @property
    def suffix(self) -> str:
        return self.value[0]

    @property
    def optional(self) -> bool:
        return self.value[1]


_FILE_TYPE_OF_INDEX = {
    IndexType.OFFSET: RemoteLogSegmentFileType.OFFSET_INDEX,
    IndexType.TIMESTAMP: RemoteLogSegmentFileType.TIME_INDEX,
    IndexType.PRODUCER_SNAPSHOT: RemoteLogSegmentFileType.PRODUCER_SNAPSHOT,
    IndexType.TRANSACTION: RemoteLogSegmentFileType.TRANSACTION_INDEX,
    IndexType.LEADER_EPOCH: RemoteLogSegmentFileType.LEADER_EPOCH_CHECKPOINT,
}


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """Kafka's ``LogSegmentData``: what ``copy_log_segment_data`` uploads for one segment. The
    files are the local segment's; ``transaction_index`` is None when the segment has none;
    ``producer_snapshot_index`` is the snapshot at the *next* segment's base offset (the state
    after this segment); ``leader_epoch_index`` is the leader-epoch checkpoint text of every
    epoch entry below the next segment's base (``RemoteLogManager``), as bytes."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes

    def __post_init__(self) -> None:
        for name in ("log_segment", "offset_index", "time_index", "producer_snapshot_index"):
            value = getattr(self, name)
            if value is None:
                raise InvalidConfigError(f"LogSegmentData.{name} can not be null")
            object.__setattr__(self, name, Path(value))
        if self.transaction_index is not None:
            object.__setattr__(self, "transaction_index", Path(self.transaction_index))
        if not isinstance(self.leader_epoch_index, (bytes, bytearray, memoryview)):
            raise InvalidConfigError("LogSegmentData.leader_epoch_index must be bytes")
        object.__setattr__(self, "leader_epoch_index", bytes(self.leader_epoch_index))


@runtime_checkable
class RemoteStorageManager(Protocol):
    """Kafka's ``RemoteStorageManager`` interface. Positions are byte positions in the ``.log``;
    ``end_position`` is inclusive. Reads return a readable binary file object (Kafka's
    ``InputStream``), which the caller closes."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        """Store the segment and its side files; idempotent (a retry overwrites). Returns the
        custom metadata for the ``COPY_SEGMENT_FINISHED`` event, or None."""
        ...

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> io.RawIOBase:
        ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> io.RawIOBase:
        """One side file; a missing transaction index raises ``RemoteResourceNotFoundError``."""
        ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the segment's objects; idempotent."""
        ...

    def close(self) -> None:
        ...


# ------------------------------------------------------------------------------------- layout

def partition_dir_name(tip: TopicIdPartition) -> str:
    """``RemoteTopicPartitionDirectory``: ``<topic>-<partition>-<topic id>``."""
    return f"{tip.topic}-{tip.partition}-{topic_id_to_str(tip.topic_id)}"


def segment_file_name(metadata: RemoteLogSegmentMetadata, file_type: RemoteLogSegmentFileType) -> str:
    """``RemoteLogSegmentFileType.toFilename``: ``<start offset, 20 digits>-<segment id><suffix>``."""
    return (f"{filename_prefix(metadata.start_offset)}-{topic_id_to_str(metadata.remote_log_segment_id.id)}"
            f"{file_type.suffix}")


def describe_segment(metadata: RemoteLogSegmentMetadata) -> str:
    sid = metadata.remote_log_segment_id
    return (f"segment {topic_id_to_str(sid.id)} of {sid.topic_id_partition.topic}-{sid.topic_id_partition.partition} "
            f"(topic id {topic_id_to_str(sid.topic_id_partition.topic_id)}, offsets "
            f"{metadata.start_offset}-{metadata.end_offset})")


# ------------------------------------------------------------------------------------- config

_S3_KEYS = ("s3.endpoint", "s3.region", "s3.access.key.id", "s3.secret.access.key", "s3.session.token",
            "s3.connect.timeout.ms", "s3.request.timeout.ms", "s3.retry.max.attempts")
_SECRET_KEYS = frozenset({"s3.secret.access.key", "s3.session.token"})


def _bool(configs: Mapping[str, object], key: str, default: bool) -> bool:
    value = configs.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    # Boolean.parseBoolean: "true" in any case is true, anything else false
    return str(value).strip().lower() == "true"


def _positive_int(configs: Mapping[str, object], key: str) -> int | None:
    value = configs.get(key)
    if value is None:
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(f"{key} must be a positive integer, not {value!r}") from None
    if n <= 0:
        raise InvalidConfigError(f"{key} must be a positive integer, not {value!r}")
    return n


def _redacted(uri: str) -> str:
    """The URI without user info and query (where credentials may hide)."""
    parts = urlsplit(uri)
    if not parts.scheme or len(parts.scheme) == 1:          # a plain path (or a Windows drive)
        return uri
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def store_configs(options: Mapping[str, object], uri: str | None = None,
                  prefix: str = DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX) -> dict[str, object]:
    """The store's settings from options in one namespace, as Kafka configures its plugin: the keys
    under ``prefix`` (default ``rsm.config.``), prefix stripped; ``uri``, when given, is the
    ``storage.uri``. The Spark source and sink take their store settings this way (Spark hands
    them lower-cased keys, and every key here is lower case)."""
    configs: dict[str, object] = {k[len(prefix):]: v for k, v in options.items()
                                  if isinstance(k, str) and k.startswith(prefix)}
    if uri is not None:
        configs["storage.uri"] = uri
    return configs


def open_store(configs: Mapping[str, object]) -> tuple[pafs.FileSystem, str, str]:
    """(file system, root path inside it, the store's name for messages, credentials left out)
    from the storage manager's settings (``storage.uri`` or ``dir``, ``s3.*``): the one way a
    store is opened, for the storage manager and for anything else that keeps files in it."""
    return _open_store(configs)


def _open_store(configs: Mapping[str, object]) -> tuple[pafs.FileSystem, str, str]:
    """(file system, root path inside it, the store's name for messages) from the configs."""
    uri = configs.get("storage.uri")
    directory = configs.get("dir")
    unknown = sorted(k for k in configs if isinstance(k, str) and k.startswith("s3.") and k not in _S3_KEYS)
    if unknown:
        raise InvalidConfigError(f"unknown remote storage setting(s) {', '.join(unknown)} "
                                 f"(known: {', '.join(_S3_KEYS)})")
    if uri is None and directory is None:
        raise InvalidConfigError("PyArrowRemoteStorageManager needs `storage.uri` (a folder, s3://bucket/prefix or "
                                 "any URI pyarrow.fs opens) or `dir` (LocalTieredStorage's local folder)")
    if uri is None:
        path = str(Path(str(directory)).absolute())
        return pafs.LocalFileSystem(), path, path
    uri = str(uri)
    parts = urlsplit(uri)
    if parts.scheme in ("s3", "s3a"):          # s3a: Hadoop's name for the same store (Spark's paths)
        return _open_s3(configs, parts, uri)
    if any(configs.get(k) is not None for k in _S3_KEYS):
        raise InvalidConfigError(f"s3.* settings are given but storage.uri {_redacted(uri)} is not an s3:// URI")
    if not parts.scheme or len(parts.scheme) == 1:
        path = str(Path(uri).absolute())
        return pafs.LocalFileSystem(), path, path
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as e:
        raise InvalidConfigError(f"storage.uri {_redacted(uri)} cannot be opened by pyarrow.fs: {e}") from None
    return fs, path.rstrip("/"), _redacted(uri)


def _open_s3(configs: Mapping[str, object], parts: SplitResult, uri: str) -> tuple[pafs.FileSystem, str, str]:
    query = dict(parse_qsl(parts.query))
    kwargs: dict[str, object] = {}
    endpoint = configs.get("s3.endpoint") or query.get("endpoint_override")
    if endpoint:
        endpoint = str(endpoint)
        ep = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if ep.scheme not in ("http", "https") or not ep.netloc:
            raise InvalidConfigError(f"s3.endpoint must be http(s)://host:port, not {endpoint!r}")
        kwargs["endpoint_override"] = ep.netloc
        kwargs["scheme"] = ep.scheme
    region = configs.get("s3.region") or query.get("region")
    if region:
        kwargs["region"] = str(region)
    access = configs.get("s3.access.key.id") or (parts.username or None)
    secret = configs.get("s3.secret.access.key") or (parts.password or None)
    if (access is None) != (secret is None):
        raise InvalidConfigError("s3.access.key.id and s3.secret.access.key must be given together "
                                 "(or neither, for the AWS default credential chain)")
    if access is not None:
        kwargs["access_key"], kwargs["secret_key"] = str(access), str(secret)
        if configs.get("s3.session.token"):
            kwargs["session_token"] = str(configs["s3.session.token"])
    elif configs.get("s3.session.token"):
        raise InvalidConfigError("s3.session.token is given without s3.access.key.id and s3.secret.access.key")
    if (ms := _positive_int(configs, "s3.connect.timeout.ms")) is not None:
        kwargs["connect_timeout"] = ms / 1000
    if (ms := _positive_int(configs, "s3.request.timeout.ms")) is not None:
        kwargs["request_timeout"] = ms / 1000
    if (n := _positive_int(configs, "s3.retry.max.attempts")) is not None:
        kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=n)
    bucket = parts.hostname
    if not bucket:
        raise InvalidConfigError(f"storage.uri {_redacted(uri)} names no bucket (s3://bucket/prefix)")
    try:
        try:
            # an object smaller than an upload part is one PUT at close, not a multipart upload
            # created at open, filled and completed (three requests): the small files of a
            # segment copy, the metadata events, the sink's staged files (newer pyarrow only)
            fs = pafs.S3FileSystem(**kwargs, allow_delayed_open=True)
        except TypeError:
            fs = pafs.S3FileSystem(**kwargs)
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise InvalidConfigError(f"cannot configure S3 for {_redacted(uri)}: {e}") from None
    root = f"{bucket}{parts.path}".rstrip("/")
    name = f"s3://{root}" + (f" (endpoint {kwargs['scheme']}://{kwargs['endpoint_override']})" if endpoint else "")
    return fs, root, name


# ------------------------------------------------------------------------------------- manager

class PyArrowRemoteStorageManager:
    """A ``RemoteStorageManager`` over ``pyarrow.fs`` in ``LocalTieredStorage``'s layout.

    Settings (the plugin's own keys, i.e. after ``rsm.config.``):

    * ``storage.uri``: where the objects go: a local folder, ``file:///...``,
      ``s3://bucket/prefix`` or any URI ``pyarrow.fs.FileSystem.from_uri`` opens;
      ``dir``: ``LocalTieredStorage``'s local folder, used when ``storage.uri`` is absent.
    * ``s3.endpoint`` (``http(s)://host:port``, for S3-compatible servers), ``s3.region``,
      ``s3.access.key.id`` / ``s3.secret.access.key`` / ``s3.session.token`` (without them the
      AWS default chain: environment, profile, instance role), ``s3.connect.timeout.ms``,
      ``s3.request.timeout.ms``, ``s3.retry.max.attempts``.
    * ``delete.enable`` (default true; false makes deletes no-ops, as in ``LocalTieredStorage``).
    """

    def __init__(self, configs: Mapping[str, object]) -> None:
        # nothing secret kept: no secret keys, no credentials inside the URI
        self.configs = {k: (_redacted(str(v)) if k == "storage.uri" else v)
                        for k, v in configs.items() if k not in _SECRET_KEYS}
        self.filesystem, root, self.store = _open_store(configs)
        self.root = f"{root}/{ROOT_STORAGE_DIR_NAME}" if root else ROOT_STORAGE_DIR_NAME
        self.uploads = f"{root}/{UPLOADS_DIR_NAME}" if root else UPLOADS_DIR_NAME
        self.delete_enabled = _bool(configs, "delete.enable", True)
        self._local = isinstance(self.filesystem, pafs.LocalFileSystem)
        # folders are made by the first copy, not here: a reader (kafkalog dump/verify, the Spark
        # source) pointed at the wrong folder must not create anything in it
        self._object_store = self.filesystem.type_name in ("s3", "gcs", "abfs")
        self._open_segments: OrderedDict[str, pa.NativeFile] = OrderedDict()
        self._open_lock = threading.Lock()
        logger.info("Remote storage manager on %s (objects under %s)", self.store, ROOT_STORAGE_DIR_NAME)

    @classmethod
    def from_broker_properties(cls, properties: Mapping[str, object]) -> "PyArrowRemoteStorageManager":
        """Configure as Kafka's ``RemoteLogManager`` does: the properties under
        ``remote.log.storage.manager.impl.prefix`` (default ``rsm.config.``), prefix stripped,
        plus ``broker.id`` and ``node.id``."""
        prefix = str(properties.get(REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX_PROP,
                                    DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX))
        configs = {k[len(prefix):]: v for k, v in properties.items() if k.startswith(prefix)}
        for key in ("broker.id", "node.id"):
            if key in properties:
                configs[key] = properties[key]
        return cls(configs)

    def __repr__(self) -> str:
        return f"PyArrowRemoteStorageManager({self.store})"

    # ---------------------------------------------------------------------------------- paths

    def partition_path(self, tip: TopicIdPartition) -> str:
        return f"{self.root}/{partition_dir_name(tip)}"

    def object_path(self, metadata: RemoteLogSegmentMetadata, file_type: RemoteLogSegmentFileType) -> str:
        return f"{self.partition_path(metadata.topic_id_partition)}/{segment_file_name(metadata, file_type)}"

    def _upload_dir(self, metadata: RemoteLogSegmentMetadata) -> str:
        return f"{self.uploads}/{partition_dir_name(metadata.topic_id_partition)}"

    def _create_dir(self, path: str) -> None:
        try:
            self.filesystem.create_dir(path, recursive=True)
        except OSError as e:
            raise storage_error(f"Creating {path} in {self.store}", e) from e

    # ---------------------------------------------------------------------------------- copy

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        what = f"Copying {describe_segment(metadata)} to {self.store}"
        sources: list[tuple[RemoteLogSegmentFileType, Path | bytes]] = [
            (RemoteLogSegmentFileType.OFFSET_INDEX, data.offset_index),
            (RemoteLogSegmentFileType.TIME_INDEX, data.time_index),
        ]
        if data.transaction_index is not None:
            sources.append((RemoteLogSegmentFileType.TRANSACTION_INDEX, data.transaction_index))
        sources += [(RemoteLogSegmentFileType.LEADER_EPOCH_CHECKPOINT, data.leader_epoch_index),
                    (RemoteLogSegmentFileType.PRODUCER_SNAPSHOT, data.producer_snapshot_index),
                    (RemoteLogSegmentFileType.SEGMENT, data.log_segment)]      # last: .log means complete
        if not self._object_store:
            self._create_dir(self.partition_path(metadata.topic_id_partition))
            self._create_dir(self._upload_dir(metadata))
        try:
            for file_type, source in sources:
                self._put(metadata, file_type, source, what)
            if self._local:
                _fsync_dir(self.partition_path(metadata.topic_id_partition))
        except BaseException:
            # LocalTieredStorage: a failed copy leaves no part of the fileset behind
            try:
                self._delete_objects(metadata)
            except RemoteStorageError as cleanup:
                logger.warning("%s failed and its partial objects could not be deleted: %s", what, cleanup)
            raise
        logger.info("Copied %s to %s", describe_segment(metadata), self.store)
        return None

    def _put(self, metadata: RemoteLogSegmentMetadata, file_type: RemoteLogSegmentFileType,
             source: Path | bytes, what: str) -> None:
        final = self.object_path(metadata, file_type)
        name = final.rsplit("/", 1)[1]
        temp = f"{self._upload_dir(metadata)}/{name}.{secrets.token_hex(8)}"
        try:
            with self.filesystem.open_output_stream(temp) as out:
                if isinstance(source, bytes):
                    out.write(source)
                else:
                    _copy_file(source, out, what)
            if self._local:
                _fsync_file(temp)
            self.filesystem.move(temp, final)
        except OSError as e:
            self._delete_quietly(temp)
            raise storage_error(f"{what}: object {final}", e) from e
        except BaseException:
            self._delete_quietly(temp)
            raise

    def _delete_quietly(self, path: str) -> None:
        try:
            self.filesystem.delete_file(path)
        except OSError:
            pass

    # ---------------------------------------------------------------------------------- fetch

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> RemoteInputStream:
        """Bytes ``start_position`` to ``end_position`` (inclusive; default the end) of the
        ``.log``, bounded by the segment size in the metadata."""
        size = metadata.segment_size_in_bytes
        if start_position < 0:
            raise RemotePositionError(f"Start position must be positive: {start_position}")
        if end_position is None:
            if start_position > size:
                raise RemotePositionError(f"Start position {start_position} is beyond {describe_segment(metadata)} "
                                          f"of {size} bytes")
            end_position = size - 1
        elif end_position < start_position:
            raise RemotePositionError(f"End position {end_position} cannot be less than start position "
                                      f"{start_position}")
        elif end_position >= size:
            raise RemotePositionError(f"End position {end_position} is beyond {describe_segment(metadata)} "
                                      f"of {size} bytes")
        path = self.object_path(metadata, RemoteLogSegmentFileType.SEGMENT)
        what = f"{describe_segment(metadata)}, object {path} in {self.store}"
        if self._object_store:
            return RemoteInputStream(self._segment_file(path, what), start_position, end_position + 1, what,
                                     reopen=lambda: self._reopen_segment_file(path))
        return RemoteInputStream(self._open(path, what), start_position, end_position + 1, what)

    def _open(self, path: str, what: str) -> pa.NativeFile:
        try:
            return self._open_input_file(path)
        except OSError as e:
            raise storage_error(f"Fetching {what}", e) from e

    def _open_input_file(self, path: str) -> pa.NativeFile:
        """``open_input_file``; in a local folder, only of a regular file: pyarrow opens without
        ``O_NONBLOCK``, so a FIFO put under an object's name would block the read forever (and
        a device may act when opened). Object stores hold only objects."""
        if self._local:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                mode = None                     # pyarrow's own error names what is wrong
            if mode is not None and not stat.S_ISREG(mode):
                raise OSError(f"{path} is {kind_of(mode)}, not a regular file")
        return self.filesystem.open_input_file(path)

    def _segment_file(self, path: str, what: str) -> pa.NativeFile:
        """The shared open file of a segment object (opened, one request, on its first read).
        Its ``read_at`` is safe from several threads: each is a ranged GET of its own."""
        with self._open_lock:
            file = self._open_segments.get(path)
            if file is not None:
                self._open_segments.move_to_end(path)
                return file
        file = self._open(path, what)
        with self._open_lock:
            # another thread may have opened it meanwhile: keep one
            file = self._open_segments.setdefault(path, file)
            self._open_segments.move_to_end(path)
            while len(self._open_segments) > _OPEN_SEGMENTS:
                # not closed: a read may still use it (pyarrow closes it with its last reference)
                self._open_segments.popitem(last=False)
        return file

    def _reopen_segment_file(self, path: str) -> pa.NativeFile:
        """After a failed read: forget the shared file, open the object afresh (pyarrow's error)."""
        with self._open_lock:
            self._open_segments.pop(path, None)
        return self._open_input_file(path)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> RemoteInputStream:
        file_type = _FILE_TYPE_OF_INDEX[IndexType(index_type)]
        path = self.object_path(metadata, file_type)
        what = f"{index_type.name} index of {describe_segment(metadata)}, object {path} in {self.store}"
        try:
            file = self._open_input_file(path)
            size = file.size()
        except OSError as e:
            error = storage_error(f"Fetching {what}", e)
            if isinstance(error, RemoteResourceNotFoundError):
                raise RemoteResourceNotFoundError(
                    f"Index file for type: {index_type.name} not found for {describe_segment(metadata)}: "
                    f"no object {path} in {self.store}") from e
            raise error from e
        return RemoteInputStream(file, 0, size, what)

    # ---------------------------------------------------------------------------------- delete

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if not self.delete_enabled:
            logger.info("delete.enable=false: keeping %s in %s", describe_segment(metadata), self.store)
            return
        self._delete_objects(metadata)
        logger.info("Deleted %s from %s", describe_segment(metadata), self.store)

    def _delete_objects(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Every object of the segment, the ``.log`` first (so a half-deleted fileset is never
        taken for complete), then what an interrupted upload of it left."""
        what = f"Deleting {describe_segment(metadata)} from {self.store}"
        order = [RemoteLogSegmentFileType.SEGMENT] + [t for t in RemoteLogSegmentFileType
                                                      if t is not RemoteLogSegmentFileType.SEGMENT]
        for file_type in order:
            path = self.object_path(metadata, file_type)
            try:
                self.filesystem.delete_file(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                error = storage_error(f"{what}: object {path}", e)
                if not isinstance(error, RemoteResourceNotFoundError):
                    raise error from e
        prefix = segment_file_name(metadata, RemoteLogSegmentFileType.SEGMENT)[:-len(".log")] + "."
        try:
            leftovers = self.filesystem.get_file_info(
                pafs.FileSelector(self._upload_dir(metadata), allow_not_found=True))
            for info in leftovers:
                if info.type == pafs.FileType.File and info.base_name.startswith(prefix):
                    self._delete_quietly(info.path)
        except OSError as e:
            raise storage_error(f"{what}: listing {self._upload_dir(metadata)}", e) from e
        # a copy killed before its first object leaves no partition directory to sync
        if self._local and os.path.isdir(self.partition_path(metadata.topic_id_partition)):
            _fsync_dir(self.partition_path(metadata.topic_id_partition))

    def close(self) -> None:
        """Forget the segment objects kept open (pyarrow's object store files hold no connection
        between reads)."""
        with self._open_lock:
            self._open_segments.clear()

    def __enter__(self) -> "PyArrowRemoteStorageManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------- helpers

def _copy_file(source: Path, out: pa.NativeFile, what: str) -> None:
    """Copy a local file of the log into an output stream, in bounded chunks."""
    try:
        fd = open_data_file(source, os.O_RDONLY)
    except OSError as e:
        raise RemoteStorageError(f"{what}: cannot read {source}: {e}") from e
    try:
        # a new bytes object per chunk: pyarrow may upload a written buffer in the background,
        # so a reused buffer could change under it
        while chunk := os.read(fd, _CHUNK):
            out.write(chunk)
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
