"""Kafka's record format: bytes <-> values, pure functions over buffers.

``decode_batches``/``encode_batches`` (columnar, Arrow) are the hot path; the scalar modules
(``record_batch``, ``legacy``, ``control``, ``log_input_stream``) serve tools, tests and headers.
"""

from .buffers import ByteBuffer, as_buffer
from .columnar import (DEFAULT_MAX_BATCH_BYTES, SCHEMA, DecodedRun, decode_batches, decode_run,
                       empty_table, encode_batches)
from .compression import CompressionType, compress, decompress
from .control import ControlRecordType, EndTransactionMarker, control_key_type_id, end_transaction_marker_batch
from .murmur2 import murmur2, murmur2_bytes
from .log_input_stream import (BatchInfo, LogInputStream, batch_records, iter_batches,
                               iter_records)
from .record_batch import (CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, BatchHeader, Header,
                           Record, RecordInput, build_batch, write_empty_header)

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES", "SCHEMA", "DecodedRun", "decode_batches", "decode_run",
    "empty_table", "encode_batches", "CompressionType", "compress", "decompress",
    "ControlRecordType", "EndTransactionMarker", "control_key_type_id", "end_transaction_marker_batch", "BatchInfo",
    "LogInputStream", "batch_records", "iter_batches", "iter_records", "CREATE_TIME",
    "LOG_APPEND_TIME", "NO_TIMESTAMP_TYPE", "BatchHeader", "Header", "Record", "RecordInput",
    "build_batch", "write_empty_header", "ByteBuffer", "as_buffer", "murmur2", "murmur2_bytes",
]
