"""Kafka's record compression codecs, byte for byte (``CompressionType`` and ``common/compress/*``).

``compress`` writes what a Kafka producer/broker writes; ``decompress`` reads everything Kafka has
ever written, treats its input as hostile and never produces more than ``max_size`` bytes.
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam
import lz4.block
import lz4.frame
import zstandard

from storage_core.errors import (
    CorruptRecordError,
    InvalidConfigError,
    KafkaLogError,
    RecordTooLargeError,
    UnsupportedFormatError,
)

__all__ = ["CompressionType", "compress", "decompress"]

Bytes = bytes | bytearray | memoryview


class CompressionType(enum.IntEnum):
    """The codec id stored in bits 0-2 of a batch's (or legacy message's) attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def name_kafka(self) -> str:
        """Kafka's name (``CompressionType.name``): "none", "gzip", "snappy", "lz4", "zstd"."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> "CompressionType":
        # CompressionType.forName; a config value, so a bad one is a config error.
        try:
            return cls[name.strip().upper()]
        except (KeyError, AttributeError):
            allowed = ", ".join(c.name_kafka for c in cls)
            raise InvalidConfigError(
                f"Unknown compression type {name!r}; allowed: {allowed}") from None

    @classmethod
    def from_id(cls, codec_id: int) -> "CompressionType":
        # CompressionType.forId: ids 5..7 fit in the 3 attribute bits but mean nothing.
        try:
            return cls(codec_id)
        except ValueError:
            raise UnsupportedFormatError(f"Unknown compression type id {codec_id}") from None


# Levels accepted by Kafka's GzipCompression / Lz4Compression / ZstdCompression (KIP-390).
_GZIP_DEFAULT_LEVEL = -1  # java.util.zip.Deflater.DEFAULT_COMPRESSION == zlib level 6
_LZ4_DEFAULT_LEVEL = 9
_ZSTD_DEFAULT_LEVEL = 3
_ZSTD_MIN_LEVEL = -131072  # ZSTD_minCLevel()
_ZSTD_MAX_LEVEL = 22

_CHUNK = 256 * 1024  # output granularity of the incremental gzip/zstd decoders

_UINT32_LE = struct.Struct("<I")
_INT32_BE = struct.Struct(">i")


def _check_magic(codec: CompressionType, magic: int) -> None:
    if magic not in (0, 1, 2):
        raise UnsupportedFormatError(f"Unsupported record magic {magic}")
    if codec is CompressionType.ZSTD and magic < 2:
        # MemoryRecordsBuilder / LogValidator: zstd needs the v2 batch format.
        raise UnsupportedFormatError(f"ZStandard compression is not supported for magic {magic}")


def _as_view(data: Bytes) -> memoryview:
    """A flat unsigned-byte view of ``data`` (no copy unless the buffer is not contiguous)."""
    view = memoryview(data)
    if not view.c_contiguous:
        return memoryview(view.tobytes())
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view


def compress(codec: int | CompressionType, data: Bytes, *, magic: int = 2,
             level: int | None = None) -> bytes:
    """Compress ``data`` exactly as Kafka's output stream for ``codec`` would frame it."""
    ctype = CompressionType.from_id(codec)
    _check_magic(ctype, magic)
    view = _as_view(data)
    if ctype is CompressionType.NONE:
        return bytes(view)
    if ctype is CompressionType.GZIP:
        return _gzip_compress(view, _GZIP_DEFAULT_LEVEL if level is None else level)
    if ctype is CompressionType.SNAPPY:
        return _snappy_compress(view)
    if ctype is CompressionType.LZ4:
        return _lz4_compress(view, _LZ4_DEFAULT_LEVEL if level is None else level, magic)
    return _zstd_compress(view, _ZSTD_DEFAULT_LEVEL if level is None else level)


def decompress(codec: int | CompressionType, data: Bytes, *, magic: int = 2,
               max_size: int) -> bytes:
    """Decompress a Kafka payload; at most ``max_size`` bytes of output are ever produced.

    Raises ``RecordTooLargeError`` past the limit, ``CorruptRecordError`` on any malformed input.
    """
    ctype = CompressionType.from_id(codec)
    _check_magic(ctype, magic)
    if max_size < 0:
        raise InvalidConfigError(f"max_size must be >= 0, got {max_size}")
    view = _as_view(data)
    if ctype is CompressionType.NONE:
        if len(view) > max_size:
            raise _too_large(ctype, max_size)
        return bytes(view)
    try:
        if ctype is CompressionType.GZIP:
            return _gzip_decompress(view, max_size)
        if ctype is CompressionType.SNAPPY:
            return _snappy_decompress(view, max_size)
        if ctype is CompressionType.LZ4:
            return _lz4_decompress(view, max_size, magic)
        return _zstd_decompress(view, max_size)
    except KafkaLogError:
        raise
    except (zlib.error, lz4.block.LZ4BlockError, cramjam.DecompressionError, zstandard.ZstdError,
            RuntimeError, ValueError, OverflowError, struct.error, IndexError) as exc:
        # Library failures on hostile bytes become one error type; the caller adds the location.
        raise CorruptRecordError(f"Corrupt {ctype.name_kafka} payload: {exc}") from exc


def _too_large(codec: CompressionType, max_size: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"Decompressed {codec.name_kafka} payload exceeds the limit of {max_size} bytes")


def _corrupt(codec: CompressionType, reason: str) -> CorruptRecordError:
    return CorruptRecordError(f"Corrupt {codec.name_kafka} payload: {reason}")


def _join(parts: list[Bytes]) -> bytes:
    if len(parts) == 1:
        return bytes(parts[0])
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# GZIP: java.util.zip.GZIPOutputStream / GZIPInputStream (Kafka's GzipCompression)

# GZIPOutputStream.writeHeader: no FLG, MTIME 0, XFL 0, OS 255 (OS_UNKNOWN since JDK 16; 0 before).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_INPUT_SLICE = 64 * 1024  # bounds the unconsumed_tail copy zlib makes per call


def _gzip_compress(view: memoryview, level: int) -> bytes:
    if level != -1 and not 1 <= level <= 9:
        raise InvalidConfigError(
            f"compression.gzip.level must be -1 or between 1 and 9, got {level}")
    # Deflater(level, nowrap=true) + the JDK's own header/trailer, as GZIPOutputStream does.
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(view) + deflater.flush()
    trailer = struct.pack("<II", zlib.crc32(view), len(view) & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, body, trailer))


def _gzip_decompress(view: memoryview, max_size: int) -> bytes:
    codec = CompressionType.GZIP
    if len(view) < 2 or view[:2] != _GZIP_MAGIC:
        raise _corrupt(codec, "not in GZIP format")
    parts: list[Bytes] = []
    total = 0
    rest: Bytes = view  # input still to feed, starting at a member boundary
    while True:  # one iteration per gzip member (GZIPInputStream reads concatenated members)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pos = 0
        n = len(rest)
        while not inflater.eof:
            if pos >= n:
                raise _corrupt(codec, "truncated stream (unexpected end of ZLIB input)")
            tail: Bytes = rest[pos:pos + _GZIP_INPUT_SLICE]
            pos += len(tail)
            while True:  # drain this input slice with bounded output
                want = min(_CHUNK, max_size + 1 - total)
                out = inflater.decompress(tail, want)
                if out:
                    total += len(out)
                    if total > max_size:
                        raise _too_large(codec, max_size)
                    parts.append(out)
                before, tail = len(tail), inflater.unconsumed_tail
                if inflater.eof or (not tail and len(out) < want):
                    break
                if not out and len(tail) == before:  # no progress: never spin on bad input
                    raise _corrupt(codec, "inflater made no progress")
        # Bytes after this member: unused_data holds the rest of the current slice only.
        leftover = len(inflater.unused_data) + (n - pos)
        if leftover == 0:
            return _join(parts) if parts else b""
        start = n - leftover
        if leftover < 2 or rest[start:start + 2] != _GZIP_MAGIC:
            # GZIPInputStream silently ignores such bytes; they are never written by Kafka, so
            # they are treated as corruption here.
            raise _corrupt(codec, f"{leftover} trailing bytes after the last gzip member")
        rest = rest[start:]


# --------------------------------------------------------------------------------------------
# Snappy: org.xerial.snappy.SnappyOutputStream / SnappyInputStream framing

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible version 1
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)
_XERIAL_MAGIC_HEAD = _INT32_BE.unpack(_XERIAL_MAGIC[:4])[0]  # a "chunk length" that starts a header
_XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE


def _snappy_compress(view: memoryview) -> bytes:
    parts: list[Bytes] = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    pack = _INT32_BE.pack
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = memoryview(compress_raw(view[start:start + _XERIAL_BLOCK_SIZE]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_preamble(chunk: memoryview) -> int:
    """The uncompressed length a raw snappy block declares (little-endian base-128 uint32)."""
    result = 0
    for i in range(min(5, len(chunk))):
        byte = chunk[i]
        result |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if result > 0xFFFFFFFF:
                break
            return result
    raise _corrupt(CompressionType.SNAPPY, "invalid snappy block length preamble")


def _snappy_block(chunk: memoryview, expected: int) -> memoryview:
    out = memoryview(cramjam.snappy.decompress_raw(chunk))  # a view: no copy of cramjam's buffer
    if len(out) != expected:
        raise _corrupt(CompressionType.SNAPPY,
                       f"snappy block decompressed to {len(out)} bytes, header says {expected}")
    return out


def _xerial_header_ok(view: memoryview, pos: int) -> bool:
    """SnappyInputStream.isValidHeader: magic matches; a version < 1 is an error."""
    if view[pos:pos + 8] != _XERIAL_MAGIC:
        return False
    version = _INT32_BE.unpack_from(view, pos + 8)[0]
    if version < 1:
        raise _corrupt(CompressionType.SNAPPY, f"incompatible xerial snappy version {version}")
    return True


def _snappy_decompress(view: memoryview, max_size: int) -> bytes:
    codec = CompressionType.SNAPPY
    n = len(view)
    if n < _XERIAL_HEADER_SIZE or not _xerial_header_ok(view, 0):
        # SnappyInputStream.readFully: no xerial header => the whole payload is one raw block.
        size = _snappy_preamble(view)
        if size > max_size:
            raise _too_large(codec, max_size)
        return bytes(_snappy_block(view, size))
    # First pass: walk the chunk lengths and the sizes the chunks declare, so that an oversized
    # payload is refused before anything is decompressed.
    chunks: list[tuple[memoryview, int]] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < n:
        if n - pos < 4:
            raise _corrupt(codec, f"truncated chunk length ({n - pos} trailing bytes)")
        chunk_size = _INT32_BE.unpack_from(view, pos)[0]
        if chunk_size == _XERIAL_MAGIC_HEAD:
            # A repeated header: concatenated SnappyOutputStream outputs.
            if n - pos < _XERIAL_HEADER_SIZE or not _xerial_header_ok(view, pos):
                raise _corrupt(codec, "invalid xerial header inside the stream")
            pos += _XERIAL_HEADER_SIZE
            continue
        if chunk_size <= 0:
            raise _corrupt(codec, f"invalid chunk size {chunk_size}")
        pos += 4
        if chunk_size > n - pos:
            raise _corrupt(codec, f"chunk of {chunk_size} bytes truncated at {n - pos} bytes")
        chunk = view[pos:pos + chunk_size]
        pos += chunk_size
        size = _snappy_preamble(chunk)
        total += size
        if total > max_size:
            raise _too_large(codec, max_size)
        chunks.append((chunk, size))
    if not chunks:
        return b""
    return _join([_snappy_block(chunk, size) for chunk, size in chunks])


# --------------------------------------------------------------------------------------------
# LZ4: Kafka's own Lz4BlockOutputStream / Lz4BlockInputStream (partial LZ4 frame v1.5.1)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: Bytes, seed: int = 0) -> int:
    """XXH32 (as lz4-java's XXHash32). Pure Python: only used on the few frame-descriptor bytes."""
    view = _as_view(data)
    n = len(view)
    i = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed, (seed - _P1) & _M32
        stripes = n // 16
        words = struct.unpack_from(f"<{stripes * 4}I", view)
        for j in range(0, stripes * 4, 4):
            v1 = (_rotl((v1 + words[j] * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + words[j + 1] * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + words[j + 2] * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + words[j + 3] * _P2) & _M32, 13) * _P1) & _M32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
        i = stripes * 16
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (h + _UINT32_LE.unpack_from(view, i)[0] * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (h + view[i] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
_LZ4_FLG = 0x60  # version 01, block independence, no checksums, no content size
_LZ4_BD = 0x40  # block maximum size id 4 = 64 KiB (Lz4BlockOutputStream.BLOCKSIZE_64KB)
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_RAW_BIT = 0x80000000  # LZ4_FRAME_INCOMPRESSIBLE_MASK


def _lz4_hc(descriptor: Bytes) -> int:
    return (_xxh32(descriptor) >> 8) & 0xFF


# Lz4BlockOutputStream.writeHeader: the HC byte hashes FLG||BD; with
# useBrokenFlagDescriptorChecksum (magic 0 only) it hashes magic||FLG||BD instead.
_LZ4_HEADER = _LZ4_MAGIC + bytes((_LZ4_FLG, _LZ4_BD, _lz4_hc(bytes((_LZ4_FLG, _LZ4_BD)))))
_LZ4_HEADER_V0 = _LZ4_MAGIC + bytes(
    (_LZ4_FLG, _LZ4_BD, _lz4_hc(_LZ4_MAGIC + bytes((_LZ4_FLG, _LZ4_BD)))))
_LZ4_END_MARK = b"\x00\x00\x00\x00"


def _lz4_compress(view: memoryview, level: int, magic: int) -> bytes:
    if not 1 <= level <= 17:
        raise InvalidConfigError(f"compression.lz4.level must be between 1 and 17, got {level}")
    # The default level uses lz4-java's fastCompressor (LZ4_compress_default) for backward
    # compatibility; any other level uses the HC compressor (liblz4 caps HC levels at 12).
    options: dict[str, object] = {}
    if level != _LZ4_DEFAULT_LEVEL:
        options = {"mode": "high_compression", "compression": min(level, 12)}
    else:
        # liblz4's frame compressor with independent 64 KiB blocks and no checksums writes
        # exactly Kafka's frame, and its blocks are byte-identical to lz4-java's fastCompressor
        # (lz4.block.compress's are valid but differ), so Kafka's golden CRCs hold.
        frame = lz4.frame.compress(view, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                   block_linked=False, content_checksum=False,
                                   block_checksum=False, store_size=False, compression_level=0)
        if frame[:7] == _LZ4_HEADER:
            return (_LZ4_HEADER_V0 + frame[7:]) if magic == 0 else frame
    parts: list[Bytes] = [_LZ4_HEADER_V0 if magic == 0 else _LZ4_HEADER]
    pack = _UINT32_LE.pack
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        block = view[start:start + _LZ4_BLOCK_SIZE]
        packed = lz4.block.compress(block, store_size=False, **options)
        if len(packed) >= len(block):  # incompressible: stored raw, flagged by bit 31
            parts.append(pack(len(block) | _LZ4_RAW_BIT))
            parts.append(block)
        else:
            parts.append(pack(len(packed)))
            parts.append(packed)
    parts.append(_LZ4_END_MARK)  # no content checksum
    return b"".join(parts)


def _lz4_checked_block(bd: int, frame_block: memoryview) -> bytes:
    """Decode one block that carries a block checksum, letting liblz4 verify it: the block is
    wrapped in a one-block frame (FLG: version 1, independent, block checksum)."""
    flg = 0x70
    header = _LZ4_MAGIC + bytes((flg, bd, _lz4_hc(bytes((flg, bd)))))
    try:
        return lz4.frame.decompress(b"".join((header, frame_block, _LZ4_END_MARK)))
    except RuntimeError as exc:
        raise _corrupt(CompressionType.LZ4,
                       f"block checksum mismatch or corrupt block: {exc}") from exc


def _lz4_decompress(view: memoryview, max_size: int, magic: int) -> bytes:
    codec = CompressionType.LZ4
    n = len(view)
    blocks: list[tuple[int, bool, bool, memoryview]] = []   # (BD, checksummed, raw, block)
    bound = 0                                               # most bytes the blocks can expand to
    frames = 0
    pos = 0
    while True:  # one iteration per frame: validate the structure first, decompress after
        # Lz4BlockInputStream.readHeader
        if n - pos < 7:
            raise _corrupt(codec, "stream ended prematurely (frame header)")
        if view[pos:pos + 4] != _LZ4_MAGIC:
            raise _corrupt(codec, "stream unsupported (invalid magic bytes)")
        flg, bd = view[pos + 4], view[pos + 5]
        # FLG.validate / BD.validate
        if flg & 0x03:
            raise _corrupt(codec, "reserved bits of FLG must be 0")
        if not flg & 0x20:
            raise _corrupt(codec, "Dependent block stream is unsupported")
        if flg >> 6 != 1:
            raise _corrupt(codec, f"version {flg >> 6} is unsupported")
        if bd & 0x8F:
            raise _corrupt(codec, "reserved bits of BD must be 0")
        block_size_id = (bd >> 4) & 0x07
        if not 4 <= block_size_id <= 7:
            raise _corrupt(codec, "block size value must be between 4 and 7")
        max_block = 1 << (2 * block_size_id + 8)
        block_checksum = bool(flg & 0x10)
        content_checksum = bool(flg & 0x04)
        desc_end = pos + 6 + (8 if flg & 0x08 else 0)  # content size, skipped but hashed
        if desc_end >= n:
            raise _corrupt(codec, "stream ended prematurely (frame descriptor)")
        # Old clients (magic 0) wrote a wrong HC, so Kafka ignores HC for magic 0 only.
        if magic != 0 and view[desc_end] != _lz4_hc(view[pos + 4:desc_end]):
            raise _corrupt(codec, "stream frame descriptor corrupted (header checksum mismatch)")
        pos = desc_end + 1
        while True:  # Lz4BlockInputStream.readBlock
            if n - pos < 4:
                raise _corrupt(codec, "stream ended prematurely (block size)")
            word = _UINT32_LE.unpack_from(view, pos)[0]
            size = word & ~_LZ4_RAW_BIT
            if size == 0:  # end mark
                pos += 4
                if content_checksum:
                    # Read, not verified (Kafka's writer never sets it; 3.x readers skip it).
                    if n - pos < 4:
                        raise _corrupt(codec, "stream ended prematurely (content checksum)")
                    pos += 4
                break
            if size > max_block:
                raise _corrupt(codec, f"block size {size} exceeded max: {max_block}")
            end = pos + 4 + size + (4 if block_checksum else 0)
            if end > n:
                raise _corrupt(codec, "stream ended prematurely (block data)")
            blocks.append((bd, block_checksum, bool(word & _LZ4_RAW_BIT), view[pos:end]))
            bound += size if word & _LZ4_RAW_BIT else max_block
            pos = end
        frames += 1
        if pos == n:
            break
        # Kafka itself stops at the first end mark; a following frame is accepted only if it
        # starts with the LZ4 magic, anything else is corruption.
        if view[pos:pos + 4] != _LZ4_MAGIC:
            raise _corrupt(codec, f"{n - pos} trailing bytes after the LZ4 end mark")
    if magic != 0 and frames == 1 and bound <= max_size:
        # The frame is well-formed and cannot expand past the limit: let liblz4 decode it in
        # one call into one buffer (HC and checksums were checked above or are checked by it).
        try:
            return lz4.frame.decompress(view)
        except RuntimeError:
            pass                # fall through to the block-by-block path for a precise error
    parts: list[Bytes] = []
    total = 0
    for bd, checked, raw, block in blocks:
        if checked:
            out: Bytes = _lz4_checked_block(bd, block)
        elif raw:
            out = block[4:]
        else:
            # A block never decodes to more than the frame's block maximum size.
            out = lz4.block.decompress(block[4:], uncompressed_size=1 << (2 * ((bd >> 4) & 7) + 8))
        total += len(out)
        if total > max_size:
            raise _too_large(codec, max_size)
        if out:
            parts.append(out)
    return _join(parts) if parts else b""


# --------------------------------------------------------------------------------------------
# ZSTD: zstd-jni ZstdOutputStreamNoFinalizer / ZstdInputStreamNoFinalizer (Kafka's ZstdCompression)

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_DICT_ID_SIZE = (0, 1, 2, 4)
_ZSTD_FCS_SIZE = (0, 2, 4, 8)


def _zstd_compress(view: memoryview, level: int) -> bytes:
    if not _ZSTD_MIN_LEVEL <= level <= _ZSTD_MAX_LEVEL:
        raise InvalidConfigError(
            f"compression.zstd.level must be between {_ZSTD_MIN_LEVEL} and {_ZSTD_MAX_LEVEL}, "
            f"got {level}")
    # One standard frame, no checksum. Kafka's streaming ZstdOutputStream leaves out the content
    # size; writing it is equally valid for every Kafka reader, lets libzstd size its tables to
    # the batch (high levels then cost far less on small batches) and lets readers check the size
    # before decoding.
    return zstandard.ZstdCompressor(level=level).compress(view)


def _zstd_walk(view: memoryview, max_size: int) -> bool:
    """Walk the frame and block headers (RFC 8878) so that truncation is detected - the streaming
    decoder silently stops at the end of its input - and declared content sizes can be checked
    against ``max_size`` before anything is decompressed. True when the payload is exactly one
    frame that declares its content size."""
    codec = CompressionType.ZSTD
    n = len(view)
    if n == 0:
        raise _corrupt(codec, "empty payload")
    declared = 0
    frames = sized = 0
    pos = 0
    while pos < n:
        if n - pos < 4:
            raise _corrupt(codec, "truncated frame magic")
        frame_magic = _UINT32_LE.unpack_from(view, pos)[0]
        if (frame_magic & _ZSTD_SKIPPABLE_MASK) == _ZSTD_SKIPPABLE_MAGIC:
            if n - pos < 8:
                raise _corrupt(codec, "truncated skippable frame")
            pos += 8 + _UINT32_LE.unpack_from(view, pos + 4)[0]
            if pos > n:
                raise _corrupt(codec, "truncated skippable frame")
            continue
        if frame_magic != _ZSTD_MAGIC:
            raise _corrupt(codec, f"unknown frame magic 0x{frame_magic:08x}")
        if n - pos < 5:
            raise _corrupt(codec, "truncated frame header")
        fhd = view[pos + 4]
        if fhd & 0x08:
            raise _corrupt(codec, "reserved bit of the frame header descriptor is set")
        single_segment = (fhd >> 5) & 1
        fcs_flag = fhd >> 6
        fcs_size = _ZSTD_FCS_SIZE[fcs_flag] or single_segment
        fcs_at = pos + 5 + (1 - single_segment) + _ZSTD_DICT_ID_SIZE[fhd & 0x03]
        pos = fcs_at + fcs_size
        if pos > n:
            raise _corrupt(codec, "truncated frame header")
        frames += 1
        if fcs_size:
            sized += 1
            content_size = int.from_bytes(view[fcs_at:pos], "little") + (256 if fcs_size == 2 else 0)
            declared += content_size
            if declared > max_size:
                raise _too_large(codec, max_size)
        while True:
            if n - pos < 3:
                raise _corrupt(codec, "truncated block header")
            header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
            block_type = (header >> 1) & 0x03
            block_size = header >> 3
            if block_type == 3:
                raise _corrupt(codec, "reserved block type")
            if block_size > _ZSTD_BLOCK_MAX:
                raise _corrupt(codec, f"block size {block_size} exceeds {_ZSTD_BLOCK_MAX}")
            pos += 3 + (1 if block_type == 1 else block_size)  # an RLE block stores one byte
            if pos > n:
                raise _corrupt(codec, "truncated block")
            if header & 1:  # last block
                break
        if fhd & 0x04:  # content checksum
            pos += 4
            if pos > n:
                raise _corrupt(codec, "truncated content checksum")
    return frames == 1 and sized == 1


def _zstd_decompress(view: memoryview, max_size: int) -> bytes:
    codec = CompressionType.ZSTD
    if _zstd_walk(view, max_size):
        # one frame whose declared size is within the limit: one call, one exact allocation
        try:
            return zstandard.ZstdDecompressor().decompress(view)
        except zstandard.ZstdError as e:
            raise _corrupt(codec, str(e)) from e
    parts: list[Bytes] = []
    total = 0
    # Frames may lack a content size (Kafka writes with a streaming compressor): decode
    # incrementally, across concatenated frames, and stop as soon as the limit is passed.
    with zstandard.ZstdDecompressor().stream_reader(view, read_across_frames=True) as reader:
        while True:
            out = reader.read(min(_CHUNK, max_size + 1 - total))
            if not out:
                break
            total += len(out)
            if total > max_size:
                raise _too_large(codec, max_size)
            parts.append(out)
    return _join(parts) if parts else b""
