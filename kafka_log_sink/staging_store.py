"""Staging in an object store (or any file system ``pyarrow.fs`` opens): what the sink's tasks
and its driver do with staged files and the sink's state files when ``stagingLocation`` or
``checkpointLocation`` is a store URI, for executors on other machines than the driver.

A task streams its encoded batches for a partition to the store as it encodes them
(``StoreStagingFile``: the store client uploads parts in the background while the task encodes
the next rows), so staging costs no local disk and no second pass over the bytes. The object
appears under its final name only when whole: on S3 an upload is a multipart upload, invisible
until the task completes it; on other file systems the task writes ``.<name>.uploading`` and
moves it to its name once closed. A task that fails deletes what it wrote; a killed one leaves
an uploading object (or an S3 upload never completed, which S3 keeps out of listings), which the
driver's sweep removes as it removes a killed task's local staging folder.

The driver's commit never lists the staging prefix to find its files: the tasks' commit
messages name them (``StagedRun.path`` with ``in_store``). It fetches each to a local file in
its own folder, each batch's CRC checked as its bytes arrive and, under fsync per commit, a big
file sent to the disk directly as a task's local staged file is, and appends that with the same
exactly-once protocol as a local staged file (``commit``), then deletes the write's folder,
whole, once the micro-batch is committed.
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from storage_core.checkpoint import CorruptCheckpointError
from storage_core.errors import CorruptRecordError, KafkaLogError
from storage_core.format.buffers import ByteBuffer
from storage_core.format.log_input_stream import scan_batches
from storage_core.remote import open_store

from .staging_file import StagingFile

logger = logging.getLogger(__name__)

FETCH_CHUNK = 32 << 20          # bytes per read of a fetched object (a ranged GET each on S3)
UPLOADING = ".uploading"
# The longest each of the sink's state files (kafkalog-sink/, local or in a store) can be:
# producer.json holds an id and an epoch (under 60 bytes); txn.json one micro-batch's
# partitions, at most ~270 bytes each (a 249-character topic and an int), so 64 MiB is over
# 200,000 partitions of the longest names. A longer file is not the sink's: it is refused
# before being read whole or parsed.
STATE_FILE_MAX_BYTES = {"producer.json": 4096, "txn.json": 64 << 20}


class StagingStore:
    """A folder in a store: ``uri`` with the store's settings ``configs`` (``rsm.config.*``,
    prefix stripped). ``name`` is the store's display name, credentials left out."""

    def __init__(self, uri: str, configs: Mapping[str, str]) -> None:
        self.fs, self.root, self.name = open_store(dict(configs, **{"storage.uri": uri}))
        # an S3 object exists only once its upload completes: no temporary name needed
        self.atomic_uploads = self.fs.type_name == "s3"

    def path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def open(self, path: str) -> "StoreStagingFile":
        return StoreStagingFile(self, path)

    # ---------------------------------------------------------------- the driver's side

    def fetch(self, path: str, size: int, local: Path, writer: ThreadPoolExecutor | None = None) -> bool:
        """The object ``path`` copied to the local file ``local`` (created): exactly ``size``
        bytes, each batch's CRC checked as its bytes arrive, or an error naming the object, the
        store and, for a damaged batch, its byte position. With ``writer`` (fsync per commit) a
        big file goes to the disk directly, as a task's local staged file does
        (``StagingFile``): filling page-cache pages the commit would then fsync costs the driver
        more CPU than the download itself. Returns whether every batch's CRC was checked here,
        so the commit reads only the headers back (not when one batch is larger than a read)."""
        got = 0
        checked = True
        staged: StagingFile | None = None
        try:
            with self.fs.open_input_stream(path) as src:
                staged = StagingFile(local, writer)
                # one buffer read into again and again: a fresh one per read costs a page
                # fault per 4 KiB of it; one byte more than the object shows one too many
                buf = bytearray(min(FETCH_CHUNK, size + 1))
                have = 0            # bytes at the start of buf not yet checked: a batch the read cut
                with memoryview(buf) as view:
                    while True:
                        if have == len(buf):        # one batch larger than a read
                            checked, have = False, 0
                        n = src.readinto(view[have:])
                        if not n:
                            break
                        staged.write(view[have:have + n])
                        got += n
                        if checked:
                            have = self._check_batches(buf, have + n, path, got)
                staged.finish()
        except (OSError, pa.ArrowException, KafkaLogError) as e:
            if staged is not None:
                staged.close()
            local.unlink(missing_ok=True)
            if isinstance(e, KafkaLogError):
                raise
            raise KafkaLogError(f"Fetching staged file {path} from {self.name} failed after {got} bytes: "
                                f"{e}") from None
        if got != size or (checked and have):
            local.unlink(missing_ok=True)
            what = (f"holds {got} bytes, its task wrote {size}" if got != size else
                    f"ends with {have} bytes that are not a whole batch after {got - have} bytes")
            raise KafkaLogError(f"Staged file {path} in {self.name} {what}: staging was changed or truncated")
        return checked

    def _check_batches(self, buf: bytearray, have: int, path: str, got: int) -> int:
        """The CRCs of the whole batches in ``buf[:have]`` (the object's bytes up to ``got``)
        checked; the rest, a batch not yet whole, moved to the start of ``buf``: its length."""
        try:
            end = scan_batches(buf, 0, have, verify=True).end
        except CorruptRecordError as e:
            raise e.located(source=f"staged file {path} in {self.name}", base_position=got - have) from None
        buf[:have - end] = buf[end:have]
        return have - end

    def delete(self, paths: Iterable[str]) -> None:
        """Delete staged objects and their task folders once empty; a failure is logged, not
        raised: the data is committed, the sweep retries."""
        folders = set()
        for p in paths:
            folders.add(p.rsplit("/", 1)[0])
            try:
                self.fs.delete_file(p)
            except FileNotFoundError:
                pass
            except (OSError, pa.ArrowException) as e:
                logger.warning("Could not delete staged file %s from %s (the sweep retries): %s", p, self.name, e)
        for d in folders:                       # the task folders (a filer keeps them as entries)
            try:
                if not self.fs.get_file_info(pafs.FileSelector(d, allow_not_found=True)):
                    self.fs.delete_dir(d)
            except (OSError, pa.ArrowException):
                pass

    def delete_write_folders(self, paths: Iterable[str]) -> None:
        """Delete the folders of the writes the staged objects ``paths`` belong to, whole: a
        write's folder (``<write>`` of ``<write>/batch-<id>/<attempt>/<file>``, named for one
        writer: its ``write_id``, ``sink``) holds nothing but its tasks' staged files, which its
        batch no longer needs once committed or aborted, and its next batch's tasks start only
        after that (Spark runs micro-batches one at a time). One folder a commit: one listing,
        one bulk delete (S3's DeleteObjects) and one directory marker, where deleting the task
        folders side by side had pyarrow recreate their shared parent's marker from every
        thread at once, which SeaweedFS answers one a second. A failure is logged, not raised:
        the data is committed, the sweep retries."""
        folders = sorted({p.rsplit("/", 3)[0] for p in paths})

        def drop(folder: str) -> None:
            if not folder.startswith(self.root + "/"):      # never the staging root or beside it
                logger.warning("Not deleting %s from %s: not a write's folder under the staging location",
                               folder, self.name)
                return
            try:
                self.fs.delete_dir(folder)
            except FileNotFoundError:
                pass
            except (OSError, pa.ArrowException) as e:
                logger.warning("Could not delete staged files under %s from %s (the sweep retries): %s",
                               folder, self.name, e)

        for folder in folders:          # one (a commit's runs are one writer's)
            drop(folder)

    def sweep(self, older_than_s: float) -> int:
        """Delete staged objects older than ``older_than_s`` (a killed or retried task attempt's,
        which no commit names); returns how many. Lists only what is still staged: committed
        files are deleted by their commit."""
        now = time.time()
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True, allow_not_found=True))
        except (OSError, pa.ArrowException) as e:
            logger.warning("Could not list staging %s for leftovers: %s", self.name, e)
            return 0
        old = [i.path for i in infos if i.type == pafs.FileType.File and i.mtime is not None
               and now - i.mtime.timestamp() > older_than_s]
        if old:
            logger.info("Removing %d staged files left by failed task attempts from %s", len(old), self.name)
            self.delete(old)
        return len(old)

    # ---------------------------------------------------------------- small state files

    def read(self, path: str, max_bytes: int | None = None) -> bytes | None:
        """The object ``path``, or None if there is none. One longer than ``max_bytes`` (the
        bound of its format, ``STATE_FILE_MAX_BYTES``) raises ``CorruptCheckpointError`` naming
        it and the position, having read one byte past the bound."""
        try:
            with self.fs.open_input_stream(path) as f:
                data = f.read(None if max_bytes is None else max_bytes + 1)
        except FileNotFoundError:
            return None
        except (OSError, pa.ArrowException) as e:
            raise KafkaLogError(f"Reading {path} from {self.name} failed: {e}") from None
        if max_bytes is not None and len(data) > max_bytes:
            raise CorruptCheckpointError(f"File longer than {max_bytes} bytes, more than its format holds",
                                         source=f"{path} in {self.name}", position=max_bytes)
        return data

    def write(self, path: str, data: bytes) -> None:
        """Replace the object ``path`` whole: readers see the old content or the new (an S3 PUT
        replaces atomically; elsewhere a temporary name moved over it)."""
        target = path if self.atomic_uploads else f"{path}.{uuid.uuid4().hex[:8]}{UPLOADING}"
        try:
            self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            with self.fs.open_output_stream(target) as out:
                out.write(data)
            if target != path:
                self.fs.move(target, path)
        except (OSError, pa.ArrowException) as e:
            raise KafkaLogError(f"Writing {path} to {self.name} failed: {e}") from None


class StoreStagingFile:
    """A task's staged batches for one partition, streamed to the store; the interface of
    ``staging_file.StagingFile`` that ``writer.BatchStager`` uses (never direct: the store client
    buffers and uploads parts on its own threads)."""

    may_go_direct = False
    written_direct = False

    def __init__(self, store: StagingStore, path: str) -> None:
        self.store, self.path = store, path
        folder, name = path.rsplit("/", 1)
        self._target = path if store.atomic_uploads else f"{folder}/.{name}{UPLOADING}"
        self.size = 0
        self._done = False
        try:
            if not store.atomic_uploads:
                store.fs.create_dir(folder, recursive=True)
            self._out: pa.NativeFile | None = store.fs.open_output_stream(self._target)
        except (OSError, pa.ArrowException) as e:
            raise KafkaLogError(f"Staging {path} in {store.name} failed: {e}") from None

    def reserve(self, n: int) -> None:
        return None

    def write(self, data: ByteBuffer) -> None:
        assert self._out is not None
        src = np.frombuffer(data, np.uint8)
        try:
            self._out.write(src)
        except (OSError, pa.ArrowException) as e:
            raise KafkaLogError(f"Staging {self.path} in {self.store.name} failed after {self.size} bytes: "
                                f"{e}") from None
        self.size += len(src)

    def finish(self) -> None:
        """Complete the upload: the object is under its name, whole."""
        out, self._out = self._out, None
        try:
            if out is not None:
                out.close()
            if self._target != self.path:
                self.store.fs.move(self._target, self.path)
        except (OSError, pa.ArrowException) as e:
            self._discard()
            raise KafkaLogError(f"Staging {self.path} in {self.store.name} failed at its end: {e}") from None
        self._done = True

    def close(self) -> None:
        """A failed task's file: what was uploaded is deleted (pyarrow completes an upload when
        its stream is closed, which it is whatever happens: the object is removed after)."""
        if self._done:
            return
        out, self._out = self._out, None
        if out is not None:
            try:
                out.close()
            except (OSError, pa.ArrowException):
                pass
        self._discard()

    def _discard(self) -> None:
        try:
            self.store.fs.delete_file(self._target)
        except (OSError, pa.ArrowException):
            pass                        # never created, or the store is away: the sweep's
