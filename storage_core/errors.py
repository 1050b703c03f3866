"""The small error hierarchy of kafkalog.

Every error names where it happened (file, byte position, offset or option) so that the person
reading a log at 3 a.m. knows which bytes to look at.
"""

from __future__ import annotations

from os import PathLike


class KafkaLogError(Exception):
    """Base class of every error kafkalog raises on purpose."""


class CorruptRecordError(KafkaLogError):
    """Bytes that are not a valid Kafka batch or record (Kafka's CorruptRecordException and
    InvalidRecordException). ``position`` is the byte position of the batch (or record) at fault in
    ``source`` (a file path, or ``None`` for an in-memory buffer)."""

    def __init__(self, reason: str, *, position: int | None = None,
                 source: str | PathLike[str] | None = None, offset: int | None = None) -> None:
        self.reason = reason
        self.position = position
        self.source = None if source is None else str(source)
        self.offset = offset
        where = []
        if self.source is not None:
            where.append(self.source)
        if position is not None:
            where.append(f"position {position}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)

    def located(self, *, source: str | PathLike[str] | None = None,
                base_position: int = 0) -> "CorruptRecordError":
        """The same error seen from a file: position shifted by where the buffer starts."""
        pos = None if self.position is None else self.position + base_position
        err = type(self)(self.reason, position=pos, source=source or self.source, offset=self.offset)
        err.__cause__ = self.__cause__
        return err


class RecordTooLargeError(CorruptRecordError):
    """A batch or its decompressed payload claims more bytes than the configured limit allows
    (Kafka's RecordTooLargeException / the decompression guard). Refused before allocating."""


class UnsupportedFormatError(KafkaLogError):
    """A format, magic, codec or file version kafkalog does not know: refused loudly."""


class UnknownMagicError(CorruptRecordError, UnsupportedFormatError):
    """A batch whose magic byte is not 0, 1 or 2: corrupt data or a format newer than kafkalog.
    Kafka reports it as corruption; catch either base."""


class InvalidTimestampError(KafkaLogError, ValueError):
    """A record timestamp outside ``message.timestamp.before/after.max.ms`` of the append's now
    (Kafka's ``InvalidTimestampException``); names the timestamp, the window and the batch."""


class InvalidConfigError(KafkaLogError, ValueError):
    """A configuration or option value that is not allowed; the message names the option."""


class CorruptIndexError(KafkaLogError):
    """An index file fails Kafka's sanity checks (``CorruptIndexException``); the message names
    the file. Recovery rebuilds the index from the log."""


class InvalidOffsetError(KafkaLogError, ValueError):
    """An offset that breaks the log's ordering (``InvalidOffsetException``): an index entry not
    above the last one, an append below the log end offset."""


class OffsetOverflowError(KafkaLogError, ValueError):
    """An offset too far from its segment's base offset to fit the 32-bit relative offsets of
    the indexes (``IndexOffsetOverflowException`` / ``LogSegmentOffsetOverflowException``)."""


class OffsetOutOfRangeError(KafkaLogError, ValueError):
    """A read or truncation outside ``[log start offset, log end offset]``; names both bounds."""


class CorruptSnapshotError(KafkaLogError):
    """A producer-state ``.snapshot`` file with a bad version, CRC or length."""


class InvalidTopicError(KafkaLogError, ValueError):
    """A topic or partition name Kafka would refuse, or one that would leave the data dir."""


class InconsistentTopicIdError(KafkaLogError):
    """A partition was given a topic id different from the one already recorded for it in its
    ``partition.metadata`` (Kafka's ``InconsistentTopicIdException``): the directory holds
    another topic of the same name. The message names the directory and both ids."""


class LogLockedError(KafkaLogError):
    """Another process holds the partition's writer lock."""


class LogInvariantError(KafkaLogError):
    """A log's offsets broke ``log_start_offset <= recovery_point <= log_end_offset`` (a bug in
    the engine or files changed under it); the message names the partition directory and all three."""


class LogCleaningAbortedError(KafkaLogError):
    """A clean of a partition was aborted (``LogCleaningAbortedException``): the partition was
    paused, truncated or deleted, or a segment had to be split first. Nothing was swapped in."""


class LogCleaningError(KafkaLogError):
    """Cleaning a partition failed (``LogCleaningException``); ``log`` names the partition, which
    is marked uncleanable while the others go on."""

    def __init__(self, message: str, *, log: object | None = None) -> None:
        self.log = log
        super().__init__(message)


class UnsafeFileError(KafkaLogError):
    """A file named like one of a partition's (segment, index, snapshot, checkpoint) or a
    partition directory that is a symbolic link or not a regular file (a FIFO, a directory, a
    device): refused rather than followed or opened; the message names the path."""


# --- tiered storage (KIP-405): Kafka's RemoteStorageException family ---------------------------

class RemoteStorageError(KafkaLogError):
    """A remote storage operation failed (Kafka's ``RemoteStorageException``); the message names
    the segment and the store."""


class RetriableRemoteStorageError(RemoteStorageError):
    """A remote storage failure worth retrying, e.g. the store did not answer
    (``RetriableRemoteStorageException``)."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """An object of a segment is not in the store (``RemoteResourceNotFoundException``), e.g. the
    transaction index of a segment that had none."""


class InvalidRemoteLogMetadataError(KafkaLogError, ValueError):
    """Remote log metadata a Kafka constructor would refuse (its ``IllegalArgumentException`` /
    ``NullPointerException``), or a state transition ``RemoteLogSegmentState`` does not allow."""


class CorruptRemoteLogMetadataError(CorruptRecordError):
    """Bytes that are not a ``RemoteLogMetadataSerde`` value: bad framing, a length beyond the
    buffer, trailing bytes. ``position`` is the byte position in the value."""


class RemotePositionError(KafkaLogError, ValueError):
    """A byte range outside a remote segment's ``.log`` (the checks of ``LocalTieredStorage``'s
    ``fetchLogSegment``); names the positions, the segment and its size."""
