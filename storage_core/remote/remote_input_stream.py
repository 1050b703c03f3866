"""The stream a ``RemoteStorageManager`` returns for a byte range of an object (Kafka's
``fetchLogSegment`` returns an ``InputStream``), and how a store's errors are named: pyarrow
raises ``OSError`` for everything, which becomes ``RemoteResourceNotFoundError`` (the object is
missing), ``RetriableRemoteStorageError`` (the store did not answer) or ``RemoteStorageError``.

``RemoteInputStream`` reads with ranged reads: ``read``/``readall`` return the read's bytes as
they are, ``readinto`` reads straight into the caller's buffer. A stream over a shared open file
(an object store's, kept open by the storage manager) reads at its own position and never moves
the file's; a read through it that fails is tried once more on the object opened afresh."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import RemoteResourceNotFoundError, RemoteStorageError, RetriableRemoteStorageError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer    # io.RawIOBase.readinto's parameter type


class RemoteInputStream(io.RawIOBase):
    """Bytes ``[start, end)`` of one object, read with ranged reads; a failure names the segment,
    the object and the store. Reading everything at once is one request. With ``reopen`` the
    file is shared (closing the stream leaves it open) and a failed read is tried once more on
    the file ``reopen`` opens (the stream's own)."""

    def __init__(self, file: pa.NativeFile, start: int, end: int, what: str,
                 reopen: Callable[[], pa.NativeFile] | None = None) -> None:
        super().__init__()
        self._file, self._pos, self._end, self._what, self._reopen = file, start, end, what, reopen
        self._shared = reopen is not None

    def readable(self) -> bool:
        return True

    def _read(self, n: int, read: Callable[[pa.NativeFile], bytes | int]) -> bytes | int:
        """``read(file)``: ``n`` bytes at the position, as bytes or a count read into a buffer;
        a shared file that fails (or ends early) is reopened and read once more."""
        try:
            got = read(self._file)
        except OSError as e:
            if self._reopen is None:
                raise storage_error(f"Reading {self._what} at byte {self._pos}", e) from e
            got = 0
        if not got and n and self._reopen is not None:
            reopen, self._reopen = self._reopen, None
            try:
                self._file = reopen()
            except OSError as e:        # a deleted object, a store gone away: as a fresh read fails
                raise storage_error(f"Reading {self._what} at byte {self._pos}", e) from e
            self._shared = False        # the stream's own from now on
            return self._read(n, read)
        if not got and n:
            raise RemoteStorageError(f"Reading {self._what} at byte {self._pos}: the object ends before byte "
                                     f"{self._end} (truncated or replaced)")
        self._pos += got if isinstance(got, int) else len(got)
        return got

    def _read_at(self, n: int) -> bytes:
        return self._read(n, lambda f: f.read_at(n, self._pos))     # type: ignore[return-value]

    def readinto(self, b: WriteableBuffer) -> int:
        """Straight into ``b`` (one ranged read, no copy): a stream over the range, independent
        of the shared file's position."""
        out = memoryview(b).cast("B")
        n = min(len(out), self._end - self._pos)
        if n <= 0:
            return 0
        return self._read(n, lambda f: f.get_stream(self._pos, n).readinto(out[:n]))   # type: ignore[return-value]

    def read(self, size: int | None = -1) -> bytes:
        """One ranged read's bytes as they are (``RawIOBase.read`` copies them twice)."""
        return self.readall() if size is None or size < 0 else self._read_at(min(size, self._end - self._pos))

    def readall(self) -> bytes:
        parts = []
        while self._pos < self._end:
            parts.append(self._read_at(min(self._end - self._pos, 1 << 30)))
        return b"".join(parts)

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                if not self._shared:
                    self._file.close()
            finally:
                super().close()


def storage_error(what: str, e: BaseException) -> RemoteStorageError:
    """pyarrow raises OSError for everything; a missing object is FileNotFoundError (or an S3
    NoSuchKey / 404), a store that does not answer is worth a retry."""
    text = str(e)
    if isinstance(e, FileNotFoundError) or "NoSuchKey" in text or "Path does not exist" in text \
            or "response code 404" in text:
        return RemoteResourceNotFoundError(f"{what}: not found ({text})")
    lowered = text.lower()
    if isinstance(e, (ConnectionError, TimeoutError)) or any(
            s in lowered for s in ("couldn't connect", "connection refused", "curlcode: 7", "timed out",
                                   "timeout", "network", "connection reset", "unable to connect")):
        return RetriableRemoteStorageError(f"{what}: the store did not answer ({text})")
    return RemoteStorageError(f"{what}: {text}")
