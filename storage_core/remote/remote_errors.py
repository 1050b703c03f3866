"""The errors of tiered storage (Kafka's ``RemoteStorageException`` family and the constructor
checks of its metadata classes). Kept in this package until they move to ``storage_core.errors``."""

from __future__ import annotations

from ..errors import CorruptRecordError, KafkaLogError


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
