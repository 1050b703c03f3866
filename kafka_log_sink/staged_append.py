"""The commit's append of staged files: the tasks' bytes moved into a partition log by the
kernel, the driver touching only batch headers.

A task stages final record batches: records, compression, timestamps, producer id and epoch,
the transactional flag, all inside the CRC and final when the task writes them. Two fields
are not: the base offset (outside the CRC, as a broker assigns it) and the base sequence,
which only the commit can number, because several tasks write one partition under the query's
one producer id and Kafka wants that producer's sequences consecutive in a partition. The
commit therefore, per staged file:

1. maps it and checks every batch's CRC (a torn or damaged staged file never reaches a log),
   and checks the headers are what a task of this query writes; a file its task sent to the
   disk directly (``staging_file``: big files under fsync per commit) had its CRCs checked by
   the task as it wrote them, and a file fetched from a staging store by the fetch as its bytes
   arrived (``StagedRun.crcs_checked``): only their headers are read back here, not their 100s of MB;
2. numbers the batches in the map: base offsets from the log end offset, base sequences from
   the producer's last one in the partition, each CRC updated for its new sequence from the
   old CRC alone (``crc_patch``: the payload is not read again);
3. appends them as ``Log._append`` does (roll check, the producer state's sequence and epoch
   validation, index entries, log end offset, flush policy): a big file (option
   ``stagedSegmentMinBytes``, by default 1/32 of ``segment.bytes``) by renaming it into the
   log as a segment of its own, no byte copied; a smaller one a group at a time, copied
   staged file -> active segment by ``copy_file_range``.

What it skips, next to ``Log.append_raw``, is the per-record validation of a client's append
(``LogValidator``): these batches come from the query's own encoder, checked by CRC, as a
broker trusts its own coordinator's writes. Topics whose policy needs the records looked at
(compaction's keys, a CreateTime window, LogAppendTime stamping) keep the validated path.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from storage_core.common import LONG_MAX
from storage_core.config import LogConfig
from storage_core.errors import CorruptRecordError, KafkaLogError, RecordTooLargeError
from storage_core.format.batch_header import BatchField, HeaderColumn, patch_field
from storage_core.format.crc_patch import crc_after_field_change
from storage_core.format.log_input_stream import BatchArrays, scan_batches
from storage_core.format.record_batch import (CONTROL_FLAG_MASK, NO_PARTITION_LEADER_EPOCH,
                                              TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
                                              base_sequences, increment_sequence)
from storage_core.log import Log

from .writer import ProducerIdentity, StagedRun

GROUP_BYTES = 8 << 20       # bytes appended at a time: the validated path's piece size, so
                            # both paths roll segments at the same batches


def can_append_staged(config: LogConfig) -> bool:
    """Whether a topic's policy lets staged batches in without looking at their records."""
    return (not config.compact and config.message_timestamp_type == "CreateTime"
            and config.message_timestamp_before_max_ms == LONG_MAX
            and config.message_timestamp_after_max_ms == LONG_MAX)


@dataclass(frozen=True)
class StagedAppend:
    """What a partition's staged files added to its log."""

    first_offset: int
    last_offset: int
    records: int
    next_sequence: int


def append_staged(log: Log, runs: list[StagedRun], producer: ProducerIdentity,
                  first_sequence: int, segment_min_bytes: int) -> StagedAppend:
    """Append the staged files of ``runs`` (one partition's, in order) to ``log`` as batches
    of ``producer`` numbered from its end offset and from ``first_sequence``; returns what was
    appended and the next sequence. Every file is checked and numbered before the first is
    appended: a damaged one (not exactly ``run.size`` bytes of intact batches of this
    producer) fails the partition before anything is written to it. A file of
    at least ``segment_min_bytes`` that fits a segment becomes one (``Log.append_segment_file``:
    renamed in, not copied); a smaller one is copied onto the active segment."""
    # the commit is the only user of this log (the partition's writer lock is ours), so the
    # offsets the batches are numbered from are the ones they are appended at, which
    # Log.append_from_file / append_segment_file check all the same
    offset, seq = log.log_end_offset, first_sequence
    numbered: list[tuple[Path, int, int, BatchArrays | None]] = []
    try:
        for run in runs:
            path = Path(run.path)
            fd = os.open(path, os.O_RDWR)
            numbered.append((path, fd, run.size, None))
            size = os.fstat(fd).st_size
            if size != run.size:
                raise KafkaLogError(f"Staged file {path} holds {size} bytes, its task wrote "
                                    f"{run.size}: staging was changed or truncated")
            if size == 0:
                continue
            scan = _number(fd, size, path, offset, log.config, producer, seq,
                           verify=not run.crcs_checked)
            numbered[-1] = (path, fd, size, scan)
            count = int(scan.records_count.sum())
            offset += count
            seq = increment_sequence(seq, count)
        first = log.log_end_offset
        for path, fd, size, batches in numbered:
            if batches is None:
                continue
            if size >= segment_min_bytes and log.can_take_segment_file(path, batches):
                log.append_segment_file(path, batches)
            else:
                log.append_from_file(fd, batches, max_append_bytes=GROUP_BYTES)
    finally:
        for _, fd, _, _ in numbered:
            os.close(fd)
    return StagedAppend(first, log.log_end_offset - 1, log.log_end_offset - first, seq)


def _number(fd: int, size: int, path: Path, first_offset: int, config: LogConfig,
            producer: ProducerIdentity, first_sequence: int, verify: bool = True) -> BatchArrays:
    """Check the staged batches (CRCs unless ``verify`` is false, headers,
    ``max.message.bytes`` of ``config``) and give them their base offsets from
    ``first_offset`` and base sequences from ``first_sequence`` in place; returns their header
    walk as patched."""
    # Checking CRCs reads every byte: one fault-in of the file (it is in the page cache), not
    # 60k. Without, only the headers are read: a direct file is on disk, not in the page cache,
    # and is not read into it.
    flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if verify else 0)
    with mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE) as m:
        if not verify and hasattr(m, "madvise"):
            m.madvise(mmap.MADV_RANDOM)     # no read-ahead around each header
        scan = scan_batches(m, verify=verify, source=str(path))
        if scan.legacy_at_end or scan.end != size:
            raise KafkaLogError(f"Staged file {path} ends with {size - scan.end} bytes that are "
                                f"not a whole batch after {scan.end} of {size} bytes: staging "
                                f"was changed or truncated")
        _check_headers(scan, producer, config, path)
        counts = scan.records_count
        seqs = base_sequences(first_sequence, counts)
        bases = first_offset + np.cumsum(counts) - counts
        old_seqs = scan.column(HeaderColumn.BASE_SEQUENCE)
        seq_end = BatchField.BASE_SEQUENCE.offset + BatchField.BASE_SEQUENCE.size
        crcs = crc_after_field_change(scan.column(HeaderColumn.CRC), old_seqs, seqs,
                                      scan.size - seq_end)
        view = np.frombuffer(m, np.uint8)
        pos = scan.position
        try:
            patch_field(view, pos, BatchField.BASE_OFFSET, bases)
            patch_field(view, pos, BatchField.BASE_SEQUENCE, seqs)
            patch_field(view, pos, BatchField.CRC, crcs)
        finally:
            del view                    # the map must have no exports left when it closes
    scan.column(HeaderColumn.BASE_OFFSET)[:] = bases
    scan.column(HeaderColumn.BASE_SEQUENCE)[:] = seqs
    scan.column(HeaderColumn.CRC)[:] = crcs
    return scan


def _check_headers(scan: BatchArrays, producer: ProducerIdentity, config: LogConfig,
                   path: Path) -> None:
    """The staged batches are data batches of this query's transactional producer, in
    CreateTime, records numbered 0..n-1, each within max.message.bytes: what a task writes."""
    attrs = scan.column(HeaderColumn.ATTRIBUTES)
    counts = scan.records_count
    bad = np.flatnonzero(
        (scan.column(HeaderColumn.PRODUCER_ID) != producer.producer_id)
        | (scan.column(HeaderColumn.PRODUCER_EPOCH) != producer.epoch)
        | ((attrs & TRANSACTIONAL_FLAG_MASK) == 0) | ((attrs & CONTROL_FLAG_MASK) != 0)
        | ((attrs & TIMESTAMP_TYPE_MASK) != 0)
        | (scan.column(HeaderColumn.PARTITION_LEADER_EPOCH) != NO_PARTITION_LEADER_EPOCH)
        | (counts < 1) | (scan.column(HeaderColumn.LAST_OFFSET_DELTA) != counts - 1))
    if bad.size:
        i = int(bad[0])
        raise CorruptRecordError(
            f"Staged batch at position {int(scan.position[i])} of {path} is not a batch of "
            f"producer {producer.producer_id} (epoch {producer.epoch}) as the sink's tasks "
            f"write them: {scan.header(i)}", position=int(scan.position[i]))
    too_big = np.flatnonzero(scan.size > config.max_message_bytes)
    if too_big.size:
        i = int(too_big[0])
        raise RecordTooLargeError(
            f"The batch at position {int(scan.position[i])} of {path} is {int(scan.size[i])} "
            f"bytes, larger than max.message.bytes {config.max_message_bytes}")
