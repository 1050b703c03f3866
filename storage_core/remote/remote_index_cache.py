"""Kafka's ``RemoteIndexCache``: the offset, time and transaction indexes of remote segments,
fetched once through the ``RemoteStorageManager`` and kept in ``remote-log-index-cache/`` of the
data directory, so that finding where an offset or a timestamp lies in a remote ``.log`` costs
no object request once the segment's indexes are cached (a read is then one ranged read).

Files are named as Kafka names them: ``<start offset>_<segment id><suffix>`` (the offset not
padded, the id in Kafka's base64), suffixes ``.index``, ``.timeindex``, ``.txnindex``; a segment
without a remote transaction index (``RemoteResourceNotFoundError``, or ``txnIdxEmpty`` in its
metadata) gets an empty ``.txnindex``. Each file is written as a unique ``.tmp`` file, fsynced,
then renamed, so a process killed while fetching leaves only ``.tmp`` files; at start ``.tmp`` and
``.deleted`` files are removed and a segment is loaded only if all three files exist and pass the
indexes' sanity checks (its other files are removed), as ``RemoteIndexCache.init`` does. A file
that fails its sanity check later is fetched again.

The cache is bounded in bytes (``remote.log.index.file.cache.total.size.bytes``, the sum of the
entries' file sizes): least recently used entries are evicted (Kafka's Caffeine cache evicts by
W-TinyLFU; plain LRU here), their files renamed ``.deleted`` and removed. Lookups use the index
classes' read-only mode (positioned reads, never a mapping), and only the most recently used
entries hold their files open, so the number of descriptors stays bounded however many entries
are cached. One process per cache directory, as one broker per log directory.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..checkpoint import INT64_RANGE, java_int, topic_id_from_str, topic_id_to_str
from ..common import INT_MAX
from ..data_files import open_data_file
from ..errors import CorruptIndexError, InvalidConfigError, KafkaLogError, RemoteResourceNotFoundError
from ..index import OffsetIndex, OffsetPosition, TimeIndex, TransactionIndex
from .metadata import RemoteLogSegmentMetadata
from .storage_manager import IndexType, RemoteStorageManager, describe_segment

logger = logging.getLogger(__name__)

DIR_NAME = "remote-log-index-cache"                          # RemoteIndexCache.DIR_NAME
REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES_PROP = "remote.log.index.file.cache.total.size.bytes"
DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES = 1024 * 1024 * 1024
TMP_FILE_SUFFIX = ".tmp"
DELETED_FILE_SUFFIX = ".deleted"
INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX = ".index", ".timeindex", ".txnindex"
_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_FETCH_CHUNK = 16 << 20             # one ranged read per 16 MiB of an index (segment.index.bytes is 10 MiB)
DEFAULT_MAX_OPEN_ENTRIES = 128


def remote_index_file_prefix(metadata: RemoteLogSegmentMetadata) -> str:
    """``RemoteIndexCache.generateFileNamePrefixForIndex``: ``<start offset>_<segment id>``."""
    return f"{metadata.start_offset}_{topic_id_to_str(metadata.remote_log_segment_id.id)}"


def _parse_prefix(prefix: str) -> tuple[int, uuid.UUID] | None:
    """(start offset, segment uuid) of ``<offset>_<id>``, None for a name that is not one (the
    offset has no ``_``: the first one separates; the id may contain ``_`` or start with ``-``).
    The offset is read as ``offsetFromRemoteIndexFileName`` reads it (``Long.parseLong``: a Java
    long; int() also took numbers beyond 2^63), and only the name ``remote_index_file_prefix``
    gives is one: a start offset >= 0, unpadded, unsigned, ASCII digits (Java's parseLong
    would read "٤" as 4; the cache never writes it). Kafka's
    ``init`` throws on a name it cannot parse; here its files are ignored with a warning."""
    offset, sep, sid = prefix.partition("_")
    if not sep or len(sid) != 22:
        return None
    try:
        start = java_int(offset, INT64_RANGE)
        key = topic_id_from_str(sid)
    except (ValueError, KafkaLogError):
        return None
    return (start, key) if start >= 0 and str(start) == offset else None


@dataclass
class Entry:
    """``RemoteIndexCache.Entry``: one segment's three cached index files. The indexes are
    opened on use (read-only) and closed when the entry leaves the cache's open set."""

    prefix: Path                     # <cache dir>/<start offset>_<segment id>
    start_offset: int
    size_bytes: int
    _offset_index: OffsetIndex | None = None
    _time_index: TimeIndex | None = None
    _txn_index: TransactionIndex | None = None

    @property
    def paths(self) -> tuple[Path, Path, Path]:
        return tuple(self.prefix.with_name(self.prefix.name + s) for s in _SUFFIXES)  # type: ignore[return-value]

    @property
    def is_open(self) -> bool:
        return self._offset_index is not None

    def open(self) -> None:
        if self._offset_index is None:
            offset_path, time_path, txn_path = self.paths
            offset_index = OffsetIndex(offset_path, self.start_offset, INT_MAX, writable=False)
            try:
                time_index = TimeIndex(time_path, self.start_offset, INT_MAX, writable=False)
            except BaseException:
                offset_index.close()
                raise
            self._offset_index, self._time_index = offset_index, time_index
            self._txn_index = TransactionIndex(txn_path, self.start_offset)

    @property
    def offset_index(self) -> OffsetIndex:
        self.open()
        return self._offset_index  # type: ignore[return-value]

    @property
    def time_index(self) -> TimeIndex:
        self.open()
        return self._time_index  # type: ignore[return-value]

    @property
    def txn_index(self) -> TransactionIndex:
        self.open()
        return self._txn_index  # type: ignore[return-value]

    def lookup_offset(self, target_offset: int) -> OffsetPosition:
        return self.offset_index.lookup(target_offset)

    def lookup_timestamp(self, timestamp: int, starting_offset: int) -> OffsetPosition:
        """``Entry.lookupTimestamp``: the offset-index entry at or below the time index's answer
        (never below ``starting_offset``)."""
        found = self.time_index.lookup(timestamp)
        return self.offset_index.lookup(max(starting_offset, found.offset))

    def close(self) -> None:
        for index in (self._offset_index, self._time_index, self._txn_index):
            if index is not None:
                index.close()
        self._offset_index = self._time_index = self._txn_index = None

    def cleanup(self) -> None:
        """``markForCleanup`` then ``cleanup``: rename the files ``.deleted``, then remove them
        (a process killed in between leaves ``.deleted`` files that the next start removes)."""
        self.close()
        renamed = []
        for path in self.paths:
            target = path.with_name(path.name + DELETED_FILE_SUFFIX)
            try:
                os.replace(path, target)
                renamed.append(target)
            except FileNotFoundError:
                pass
        for path in renamed:
            path.unlink(missing_ok=True)


def _sanity_check(entry: Entry) -> None:
    entry.offset_index.sanity_check()
    entry.time_index.sanity_check()
    entry.txn_index.sanity_check()


class RemoteIndexCache:
    """``RemoteIndexCache(maxSize, remoteStorageManager, logDir)``: keyed by segment id."""

    def __init__(self, remote_storage_manager: RemoteStorageManager, log_dir: str | os.PathLike[str],
                 max_size_bytes: int = DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES, *,
                 max_open_entries: int = DEFAULT_MAX_OPEN_ENTRIES) -> None:
        self._check_size(max_size_bytes)
        if max_open_entries < 1:
            raise InvalidConfigError(f"max_open_entries must be at least 1, not {max_open_entries}")
        self.remote_storage_manager = remote_storage_manager
        self.cache_dir = Path(log_dir) / DIR_NAME
        self.max_size_bytes = max_size_bytes
        self.max_open_entries = max_open_entries
        self._lock = threading.RLock()
        self._entries: OrderedDict[uuid.UUID, Entry] = OrderedDict()     # least recently used first
        self._open: OrderedDict[uuid.UUID, Entry] = OrderedDict()
        self._size = 0
        self._closed = False
        self.fetches = 0                    # index files fetched through the RSM since start
        self._init()

    @staticmethod
    def _check_size(max_size_bytes: int) -> None:
        if isinstance(max_size_bytes, bool) or not isinstance(max_size_bytes, int) or max_size_bytes < 1:
            raise InvalidConfigError(f"{REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES_PROP} must be a positive "
                                     f"integer, not {max_size_bytes!r}")

    # -- start ------------------------------------------------------------------------------------

    def _init(self) -> None:
        """``RemoteIndexCache.init``: remove ``.tmp``/``.deleted`` files, load every segment whose
        three files exist and pass their sanity checks, remove the files of the others."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        groups: dict[str, set[str]] = {}
        for dirent in os.scandir(self.cache_dir):
            name = dirent.name
            if name.endswith((TMP_FILE_SUFFIX, DELETED_FILE_SUFFIX)):
                Path(dirent.path).unlink(missing_ok=True)
                logger.debug("Deleted %s on cache initialization", dirent.path)
                continue
            prefix, dot, suffix = name.partition(".")
            if not dot or "." + suffix not in _SUFFIXES or _parse_prefix(prefix) is None \
                    or not dirent.is_file(follow_symlinks=False):
                logger.warning("Ignoring %s in %s: not a remote index cache file", name, self.cache_dir)
                continue
            groups.setdefault(prefix, set()).add("." + suffix)
        loaded = []
        for prefix, suffixes in groups.items():
            start_offset, key = _parse_prefix(prefix)  # type: ignore[misc]
            paths = [self.cache_dir / (prefix + s) for s in _SUFFIXES]
            if len(suffixes) == len(_SUFFIXES):
                entry = Entry(self.cache_dir / prefix, start_offset, sum(p.stat().st_size for p in paths))
                try:
                    _sanity_check(entry)
                    entry.close()
                    loaded.append((paths[0].stat().st_mtime_ns, key, entry))
                    continue
                except (CorruptIndexError, OSError) as e:
                    entry.close()
                    logger.warning("Removing the cached indexes %s: %s", prefix, e)
            for path in paths:
                path.unlink(missing_ok=True)
        for _, key, entry in sorted(loaded, key=lambda t: t[0]):
            self._entries[key] = entry
            self._size += entry.size_bytes
        self._evict()
        logger.info("Remote index cache in %s: %d segments, %d bytes", self.cache_dir, len(self._entries), self._size)

    # -- fetching ---------------------------------------------------------------------------------

    def _fetch_file(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType, path: Path) -> None:
        """``loadIndexFile``: the index through the RSM into a unique ``.tmp`` file, fsynced,
        renamed to ``path``."""
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}{TMP_FILE_SUFFIX}")
        fd = open_data_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                if index_type is IndexType.TRANSACTION and metadata.txn_idx_empty:
                    pass            # KAFKA-16780: the metadata says there is nothing to fetch
                else:
                    self.fetches += 1
                    with self.remote_storage_manager.fetch_index(metadata, index_type) as stream:
                        while True:
                            chunk = stream.read(_FETCH_CHUNK)
                            if not chunk:
                                break
                            view = memoryview(chunk)
                            while view:
                                view = view[os.write(fd, view):]
            except RemoteResourceNotFoundError:
                if index_type is not IndexType.TRANSACTION:
                    raise
                # no transactional records: an empty file stands for the index
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, path)

    def _create_entry(self, metadata: RemoteLogSegmentMetadata) -> Entry:
        """``createCacheEntry``: each file kept if it is already there and sane, else fetched."""
        entry = Entry(self.cache_dir / remote_index_file_prefix(metadata), metadata.start_offset, 0)
        kinds = (IndexType.OFFSET, IndexType.TIMESTAMP, IndexType.TRANSACTION)
        for index_type, path in zip(kinds, entry.paths):
            if not path.exists():
                self._fetch_file(metadata, index_type, path)
        try:
            _sanity_check(entry)
        except CorruptIndexError as e:
            # a file left by an earlier attempt, damaged: fetch all three again
            logger.info("Fetching the indexes of %s again: %s", describe_segment(metadata), e)
            entry.close()
            for index_type, path in zip(kinds, entry.paths):
                self._fetch_file(metadata, index_type, path)
            try:
                _sanity_check(entry)
            except CorruptIndexError:
                entry.close()
                raise
        entry.size_bytes = sum(p.stat().st_size for p in entry.paths)
        return entry

    def get_index_entry(self, metadata: RemoteLogSegmentMetadata) -> Entry:
        """The segment's entry, fetched on a miss; opened, most recently used."""
        with self._lock:
            if self._closed:
                raise KafkaLogError(f"Unable to fetch index for {describe_segment(metadata)}: the remote index "
                                    f"cache in {self.cache_dir} is closed")
            key = metadata.remote_log_segment_id.id
            entry = self._entries.get(key)
            if entry is None:
                entry = self._create_entry(metadata)
                self._entries[key] = entry
                self._size += entry.size_bytes
            else:
                self._entries.move_to_end(key)
            entry.open()
            self._open[key] = entry
            self._open.move_to_end(key)
            while len(self._open) > self.max_open_entries:
                _, old = self._open.popitem(last=False)
                old.close()
            return entry

    def lookup_offset(self, metadata: RemoteLogSegmentMetadata, offset: int) -> int:
        """The ``.log`` position to read from for ``offset`` (``lookupOffset``)."""
        with self._lock:
            try:
                return self.get_index_entry(metadata).lookup_offset(offset).position
            finally:
                self._evict()

    def lookup_timestamp(self, metadata: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int) -> int:
        """The ``.log`` position to read from for the first record at or after ``timestamp``
        (``lookupTimestamp``)."""
        with self._lock:
            try:
                return self.get_index_entry(metadata).lookup_timestamp(timestamp, starting_offset).position
            finally:
                self._evict()

    # -- eviction ---------------------------------------------------------------------------------

    def _evict(self) -> None:
        while self._size > self.max_size_bytes and self._entries:
            key, entry = self._entries.popitem(last=False)
            self._drop(key, entry)

    def _drop(self, key: uuid.UUID, entry: Entry) -> None:
        self._open.pop(key, None)
        self._size -= entry.size_bytes
        entry.cleanup()
        logger.debug("Evicted the cached indexes %s", entry.prefix.name)

    def remove(self, segment_id: uuid.UUID) -> None:
        """Forget a segment (deleted remotely): its files are removed."""
        with self._lock:
            entry = self._entries.pop(segment_id, None)
            if entry is not None:
                self._drop(segment_id, entry)

    def remove_all(self, segment_ids: Iterable[uuid.UUID]) -> None:
        for segment_id in segment_ids:
            self.remove(segment_id)

    def resize_cache_size(self, max_size_bytes: int) -> None:
        """``resizeCacheSize``: a new bound, applied at once."""
        self._check_size(max_size_bytes)
        with self._lock:
            self.max_size_bytes = max_size_bytes
            self._evict()

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._entries

    def close(self) -> None:
        """Close the open indexes; the files stay for the next start."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for entry in self._open.values():
                entry.close()
            self._open.clear()

    def __enter__(self) -> "RemoteIndexCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
