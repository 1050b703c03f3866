"""Tests of storage_core.format.compression: Kafka's codecs and their exact framing.

Bracketed names point at the Kafka test (apache/kafka, clients/src/test/...) whose behaviour a test
mirrors. Interop tests use two independent Python Kafka clients (kafka-python's ``kafka.codec`` and
aiokafka's ``aiokafka.codec``) plus liblz4's own frame codec.
"""

from __future__ import annotations

import gzip
import io
import random
import struct
import time
import tracemalloc
import zlib

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from storage_core.errors import (
    CorruptRecordError,
    InvalidConfigError,
    RecordTooLargeError,
    UnsupportedFormatError,
)
from storage_core.format import compression as comp
from storage_core.format.compression import CompressionType, compress, decompress
from fixture_paths import FIXTURES, require_fixture

# kafka-python's protocol package uses deprecated importlib.resources calls on import.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

C = CompressionType
MAGICS = (0, 1, 2)
COMBOS = [(c, m) for c in C for m in MAGICS if not (c is C.ZSTD and m < 2)]
COMPRESSED_COMBOS = [(c, m) for c, m in COMBOS if c is not C.NONE]
BIG = 1 << 30
KAFKA_RUST_DATA = FIXTURES / "kafka-rust" / "test-data"

XERIAL_HEADER = bytes.fromhex("82534E415050590000000001" "00000001")
LZ4_HEADER_V1 = bytes.fromhex("04224D18604082")
LZ4_HEADER_V0 = bytes.fromhex("04224D1860401A")

FAST = settings(deadline=None, max_examples=40,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def make_payload(seed: int, size: int, kind: str) -> bytes:
    """Deterministic test data: incompressible, highly compressible, or record-like mixed."""
    rnd = random.Random(seed)
    if kind == "random":
        return rnd.randbytes(size)
    if kind == "zeros":
        return bytes(size)
    words = [rnd.randbytes(rnd.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words)
    return bytes(out[:size])


payloads = st.builds(
    make_payload,
    st.integers(0, 2**32),
    st.one_of(st.sampled_from([0, 1, 15, 16, 17, 32767, 32768, 32769, 65535, 65536, 65537,
                               131072, 140001]),
              st.integers(0, 150_000)),
    st.sampled_from(["random", "zeros", "mixed"]),
)


def liblz4_xxh32(data: bytes) -> int:
    """XXH32 computed by liblz4 (C), independently of our pure-Python one: it is the content
    checksum that closes an LZ4 frame."""
    frame = lz4.frame.compress(data, content_checksum=True, store_size=False)
    return int.from_bytes(frame[-4:], "little")


def parse_lz4_blocks(frame: bytes, header_len: int = 7) -> list[tuple[bool, bytes]]:
    """(stored_raw, block bytes) of every block of a frame without block checksums."""
    blocks, pos = [], header_len
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            assert pos == len(frame), "bytes after the end mark"
            return blocks
        size = word & 0x7FFFFFFF
        blocks.append((bool(word & 0x80000000), frame[pos:pos + size]))
        pos += size


def parse_xerial(stream: bytes) -> list[bytes]:
    assert stream[:16] == XERIAL_HEADER
    chunks, pos = [], 16
    while pos < len(stream):
        (size,) = struct.unpack_from(">i", stream, pos)
        chunks.append(stream[pos + 4:pos + 4 + size])
        pos += 4 + size
    assert pos == len(stream)
    return chunks


# ------------------------------------------------------------------------------------------------
# CompressionType


def test_compression_type_ids_and_names() -> None:
    """[CompressionTypeTest / CompressionType.forId, forName]"""
    assert [(c.value, c.name_kafka) for c in C] == [
        (0, "none"), (1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")]
    for c in C:
        assert C.from_id(c.value) is c
        assert C.from_name(c.name_kafka) is c
        assert C.from_name(c.name_kafka.upper()) is c
    assert C.from_name("Zstd") is C.ZSTD


@pytest.mark.parametrize("bad", ["uncompressed", "producer", "lz5", "", "gzip2"])
def test_compression_type_bad_name_is_a_config_error(bad: str) -> None:
    with pytest.raises(InvalidConfigError) as exc:
        C.from_name(bad)
    message = str(exc.value)
    assert repr(bad) in message
    for allowed in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert allowed in message


@pytest.mark.parametrize("codec_id", [5, 6, 7, 8, -1, 255])
def test_unknown_codec_ids_refused(codec_id: int) -> None:
    """Ids 5..7 fit in the 3 attribute bits but are not codecs (CompressionType.forId)."""
    with pytest.raises(UnsupportedFormatError, match=f"^Unknown compression type id {codec_id}$"):
        C.from_id(codec_id)
    with pytest.raises(UnsupportedFormatError, match="Unknown compression type id"):
        compress(codec_id, b"abc")
    with pytest.raises(UnsupportedFormatError, match="Unknown compression type id"):
        decompress(codec_id, b"abc", max_size=BIG)


# ------------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize(("codec", "magic"), COMBOS)
@FAST
@given(data=payloads)
def test_round_trip(codec: CompressionType, magic: int, data: bytes) -> None:
    """[GzipCompressionTest/SnappyCompressionTest/Lz4CompressionTest/ZstdCompressionTest
    .testCompressionDecompression]: every magic the codec supports, across block boundaries."""
    packed = compress(codec, data, magic=magic)
    assert decompress(codec, packed, magic=magic, max_size=len(data)) == data


@pytest.mark.parametrize(("codec", "magic"), COMBOS)
def test_round_trip_buffer_types(codec: CompressionType, magic: int) -> None:
    """bytes, bytearray and (sliced) memoryview inputs give the same results, like Kafka's
    ByteBuffer slices [KafkaLZ4Test.testArrayBackedBufferSlice]."""
    data = make_payload(7, 70_000, "mixed")
    packed = compress(codec, data, magic=magic)
    assert compress(int(codec), bytearray(data), magic=magic) == packed
    for form in (packed, bytearray(packed), memoryview(b"xx" + packed + b"yy")[2:-2]):
        assert decompress(int(codec), form, magic=magic, max_size=len(data)) == data
    assert decompress(codec, compress(codec, memoryview(data)[5:], magic=magic), magic=magic,
                      max_size=BIG) == data[5:]
    # Signed-byte and strided views are read as the bytes they show.
    signed = memoryview(bytearray(packed)).cast("b")
    assert decompress(codec, signed, magic=magic, max_size=len(data)) == data
    strided = memoryview(bytes(b for x in packed for b in (x, 0)))[::2]
    assert decompress(codec, strided, magic=magic, max_size=len(data)) == data
    assert compress(codec, memoryview(data + data)[::2], magic=magic) == compress(
        codec, (data + data)[::2], magic=magic)


@pytest.mark.parametrize(("codec", "level"), [
    (C.GZIP, 1), (C.GZIP, 9), (C.GZIP, -1),
    (C.LZ4, 1), (C.LZ4, 9), (C.LZ4, 12), (C.LZ4, 17),
    (C.ZSTD, -5), (C.ZSTD, 1), (C.ZSTD, 10), (C.ZSTD, 22)])
def test_levels_round_trip(codec: CompressionType, level: int) -> None:
    """KIP-390 levels [GzipCompressionTest/Lz4CompressionTest/ZstdCompressionTest]."""
    data = make_payload(3, 100_000, "mixed")
    assert decompress(codec, compress(codec, data, level=level), max_size=len(data)) == data


@pytest.mark.parametrize(("codec", "level"), [
    (C.GZIP, 0), (C.GZIP, 10), (C.GZIP, -2), (C.LZ4, 0), (C.LZ4, 18), (C.ZSTD, 23),
    (C.ZSTD, -131073)])
def test_bad_levels_refused(codec: CompressionType, level: int) -> None:
    """[GzipCompressionTest/Lz4CompressionTest/ZstdCompressionTest.testCompressionLevels]"""
    with pytest.raises(InvalidConfigError, match=f"compression.{codec.name_kafka}.level"):
        compress(codec, b"x", level=level)


def test_lz4_levels_pick_the_compressor_like_kafka() -> None:
    """Lz4BlockOutputStream: level 9 (default) = fastCompressor, any other level = HC.
    lz4-java's fastCompressor output is what liblz4's frame compressor writes for independent
    blocks (lz4.block.compress differs; Kafka's golden CRCs in test_record_format pin this)."""
    import lz4.frame

    data = make_payload(11, 60_000, "mixed")
    frame = lz4.frame.compress(data, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                               store_size=False, content_checksum=False, compression_level=0)
    fast = frame[11:-4]         # 7-byte header, 4-byte block size, ..., 4-byte end mark
    high = lz4.block.compress(data, store_size=False, mode="high_compression", compression=4)
    assert parse_lz4_blocks(compress(C.LZ4, data)) == [(False, fast)]
    assert parse_lz4_blocks(compress(C.LZ4, data, level=9)) == [(False, fast)]
    assert parse_lz4_blocks(compress(C.LZ4, data, level=4)) == [(False, high)]


@pytest.mark.parametrize(("codec", "magic"), COMBOS)
def test_max_size_is_inclusive(codec: CompressionType, magic: int) -> None:
    data = make_payload(5, 100_001, "mixed")
    packed = compress(codec, data, magic=magic)
    assert decompress(codec, packed, magic=magic, max_size=len(data)) == data
    with pytest.raises(RecordTooLargeError, match=f"limit of {len(data) - 1} bytes"):
        decompress(codec, packed, magic=magic, max_size=len(data) - 1)


@pytest.mark.parametrize(("codec", "magic"), COMBOS)
def test_empty_payload_round_trip(codec: CompressionType, magic: int) -> None:
    packed = compress(codec, b"", magic=magic)
    assert decompress(codec, packed, magic=magic, max_size=0) == b""


# ------------------------------------------------------------------------------------------------
# Exact framing: GZIP


def test_gzip_framing_is_javas() -> None:
    """GZIPOutputStream: 10-byte header without name/mtime (OS 255 = OS_UNKNOWN), raw deflate at
    Deflater's default level (6), CRC-32 and ISIZE little-endian."""
    data = make_payload(1, 50_000, "mixed")
    packed = compress(C.GZIP, data)
    assert packed[:10] == bytes.fromhex("1f8b 08 00 00000000 00 ff")
    assert packed[-8:] == struct.pack("<II", zlib.crc32(data), len(data))
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert packed[10:-8] == deflater.compress(data) + deflater.flush()
    assert gzip.decompress(packed) == data


def test_gzip_concatenated_members() -> None:
    """GZIPInputStream reads concatenated members (RFC 1952 multi-member files)."""
    parts = [make_payload(i, n, "mixed") for i, n in enumerate((0, 10, 70_000, 300))]
    stream = b"".join(gzip.compress(p, mtime=0) for p in parts) + compress(C.GZIP, b"tail")
    assert decompress(C.GZIP, stream, max_size=BIG) == b"".join(parts) + b"tail"
    with pytest.raises(RecordTooLargeError):
        decompress(C.GZIP, stream, max_size=70_000)


def test_gzip_header_fields_accepted() -> None:
    """A gzip member with FNAME/MTIME (Python's GzipFile) is as readable as Java's."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="records.bin", mode="wb", fileobj=buf, mtime=12345) as f:
        f.write(b"hello kafka")
    assert buf.getvalue()[3] & 0x08  # FNAME set
    assert decompress(C.GZIP, buf.getvalue(), max_size=BIG) == b"hello kafka"


# ------------------------------------------------------------------------------------------------
# Exact framing: Snappy (xerial)


def test_snappy_xerial_header_and_32k_chunks() -> None:
    """SnappyOutputStream: 16-byte header (magic, version 1, min compatible 1), then
    int32 BE length + raw snappy block per 32 KiB of input (DEFAULT_BLOCK_SIZE)."""
    data = make_payload(2, 3 * 32768 + 123, "mixed")
    packed = compress(C.SNAPPY, data)
    assert packed[:16] == XERIAL_HEADER
    chunks = parse_xerial(packed)
    assert len(chunks) == 4
    for i, chunk in enumerate(chunks):
        assert bytes(cramjam.snappy.decompress_raw(chunk)) == data[i * 32768:(i + 1) * 32768]
        assert bytes(chunk) == bytes(cramjam.snappy.compress_raw(data[i * 32768:(i + 1) * 32768]))
    assert compress(C.SNAPPY, b"") == XERIAL_HEADER


def test_snappy_kafka_rust_chunked_fixture() -> None:
    """snappy-java's SnappyOutputStream with 4 KiB chunks (kafka-rust test data): decodes to the
    fetch1.txt it was made from."""
    stream = (require_fixture(KAFKA_RUST_DATA) / "fetch1.snappy.chunked.4k").read_bytes()
    expected = (KAFKA_RUST_DATA / "fetch1.txt").read_bytes()
    chunks = parse_xerial(stream)
    assert len(chunks) == -(-len(expected) // 4096) > 1
    assert decompress(C.SNAPPY, stream, max_size=len(expected)) == expected
    with pytest.raises(RecordTooLargeError):
        decompress(C.SNAPPY, stream, max_size=len(expected) - 1)


def test_snappy_concatenated_streams_and_raw_block() -> None:
    """SnappyInputStream: a repeated header between chunks (concatenated streams) is skipped;
    a payload without the xerial magic is one raw snappy block (Snappy.compress)."""
    a, b = make_payload(1, 40_000, "mixed"), make_payload(2, 100, "random")
    assert decompress(C.SNAPPY, compress(C.SNAPPY, a) + compress(C.SNAPPY, b),
                      max_size=BIG) == a + b
    assert decompress(C.SNAPPY, compress(C.SNAPPY, a) + XERIAL_HEADER, max_size=BIG) == a
    raw = bytes(cramjam.snappy.compress_raw(a))
    assert decompress(C.SNAPPY, raw, max_size=len(a)) == a
    assert decompress(C.SNAPPY, cramjam.snappy.compress_raw(b"tiny"), max_size=4) == b"tiny"


def test_snappy_xerial_version_fields() -> None:
    """Only the magic and version >= 1 matter (some producers write the ints little-endian,
    see kafka-python #2414); version < 1 is SnappyInputStream's INCOMPATIBLE_VERSION."""
    data = b"abc" * 1000
    packed = compress(C.SNAPPY, data)
    little = packed[:8] + struct.pack("<ii", 1, 1) + packed[16:]
    assert decompress(C.SNAPPY, little, max_size=BIG) == data
    with pytest.raises(CorruptRecordError, match="version"):
        decompress(C.SNAPPY, packed[:8] + struct.pack(">ii", 0, 1) + packed[16:], max_size=BIG)


# ------------------------------------------------------------------------------------------------
# Exact framing: LZ4


@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_header_bytes(magic: int) -> None:
    """[Lz4CompressionTest.testLz4FramingMagicV1, KafkaLZ4Test.testCompression]: magic
    04 22 4D 18, FLG 0x60, BD 0x40, HC = (xxh32(FLG||BD) >> 8) & 0xFF = 0x82, end mark."""
    packed = compress(C.LZ4, b"hello hello hello hello", magic=magic)
    assert packed[:7] == LZ4_HEADER_V1
    assert packed[6] == (liblz4_xxh32(b"\x60\x40") >> 8) & 0xFF == 0x82
    assert packed[-4:] == b"\x00\x00\x00\x00"
    assert compress(C.LZ4, b"", magic=magic) == LZ4_HEADER_V1 + b"\x00\x00\x00\x00"


def test_lz4_magic_v0_broken_header_checksum() -> None:
    """[Lz4CompressionTest.testLz4FramingMagicV0]: for magic 0 Kafka hashes magic||FLG||BD
    (useBrokenFlagDescriptorChecksum) - the HC byte is 0x1A - and ignores HC when reading."""
    packed = compress(C.LZ4, b"legacy", magic=0)
    assert packed[:7] == LZ4_HEADER_V0
    assert packed[6] == (liblz4_xxh32(bytes.fromhex("04224D186040")) >> 8) & 0xFF == 0x1A
    assert decompress(C.LZ4, packed, magic=0, max_size=BIG) == b"legacy"
    # A v0 reader ignores HC entirely; a v1/v2 reader verifies it.
    assert decompress(C.LZ4, compress(C.LZ4, b"x", magic=2), magic=0, max_size=BIG) == b"x"
    mangled = packed[:6] + b"\x00" + packed[7:]
    assert decompress(C.LZ4, mangled, magic=0, max_size=BIG) == b"legacy"
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError, match="descriptor corrupted"):
            decompress(C.LZ4, packed, magic=magic, max_size=BIG)


@pytest.mark.parametrize("magic", MAGICS)
def test_lz4_blocks_64k_and_raw_bit(magic: int) -> None:
    """Lz4BlockOutputStream.writeBlock: 64 KiB blocks; an incompressible block is stored raw
    with bit 31 of its size set; no block or content checksum."""
    noise = make_payload(9, 65536 + 1000, "random")
    blocks = parse_lz4_blocks(compress(C.LZ4, noise, magic=magic))
    assert blocks == [(True, noise[:65536]), (True, noise[65536:])]
    text = make_payload(9, 2 * 65536 + 5000, "mixed")
    blocks = parse_lz4_blocks(compress(C.LZ4, text, magic=magic))
    assert [raw for raw, _ in blocks] == [False, False, False]
    tiny = parse_lz4_blocks(compress(C.LZ4, b"0123456789", magic=magic))
    assert tiny == [(True, b"0123456789")]  # 10 bytes do not shrink: stored raw
    assert b"".join(lz4.block.decompress(b, uncompressed_size=65536) for _, b in blocks) == text


@FAST
@given(st.binary(max_size=80))
def test_xxh32_matches_liblz4(data: bytes) -> None:
    assert comp._xxh32(data) == liblz4_xxh32(data)


def test_xxh32_known_vectors() -> None:
    assert comp._xxh32(b"") == 0x02CC5D05
    assert comp._xxh32(b"a") == 0x550D7456
    assert comp._xxh32(b"abc") == 0x32D153FF


@pytest.mark.parametrize("kwargs", [
    dict(block_linked=False, content_checksum=True, block_checksum=True, store_size=True),
    dict(block_linked=False),
    dict(block_linked=False, store_size=False, block_size=lz4.frame.BLOCKSIZE_MAX256KB),
    dict(block_linked=False, block_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX1MB),
    dict(block_linked=False, content_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX4MB),
    dict(block_linked=False, compression_level=lz4.frame.COMPRESSIONLEVEL_MINHC),
])
def test_lz4_reads_liblz4_frames(kwargs: dict) -> None:
    """Lz4BlockInputStream accepts any independent-block frame: content size (skipped, hashed in
    HC), block checksums (verified), content checksum (read), block sizes 64 KiB..4 MiB."""
    data = make_payload(4, 300_000, "mixed") + make_payload(5, 70_000, "random")
    frame = lz4.frame.compress(data, **kwargs)
    for magic in MAGICS:
        assert decompress(C.LZ4, frame, magic=magic, max_size=len(data)) == data


def test_lz4_dependent_blocks_refused() -> None:
    """FLG.validate: "Dependent block stream is unsupported" (liblz4's default block_linked)."""
    data = make_payload(4, 200_000, "mixed")
    frame = lz4.frame.compress(data, block_linked=True)
    assert not frame[4] & 0x20  # liblz4 really wrote a dependent-block FLG
    with pytest.raises(CorruptRecordError, match="Dependent block stream is unsupported"):
        decompress(C.LZ4, frame, max_size=BIG)


def _kafka_lz4_with_block_checksums(data: bytes) -> bytes:
    """What Lz4BlockOutputStream(blockChecksum=true) writes: FLG 0x70, xxh32 after each block."""
    flg, bd = 0x70, 0x40
    out = bytearray(b"\x04\x22\x4d\x18" + bytes((flg, bd, (liblz4_xxh32(bytes((flg, bd))) >> 8)
                                                   & 0xFF)))
    for i in range(0, len(data), 65536):
        block = data[i:i + 65536]
        packed = lz4.block.compress(block, store_size=False)
        word, body = (len(packed), packed) if len(packed) < len(block) else (
            len(block) | 0x80000000, block)
        out += struct.pack("<I", word) + body + struct.pack("<I", liblz4_xxh32(body))
    return bytes(out + b"\x00\x00\x00\x00")


def test_lz4_block_checksums_verified() -> None:
    """[KafkaLZ4Test with blockChecksum=true]: per-block XXH32 of the stored bytes is verified
    ("Block checksum mismatch")."""
    data = make_payload(6, 100_000, "mixed") + make_payload(6, 70_000, "random")
    frame = _kafka_lz4_with_block_checksums(data)
    assert decompress(C.LZ4, frame, max_size=len(data)) == data
    (first,) = struct.unpack_from("<I", frame, 7)
    checksum_at = 7 + 4 + (first & 0x7FFFFFFF)
    bad = bytearray(frame)
    bad[checksum_at] ^= 0x01
    with pytest.raises(CorruptRecordError, match="checksum"):
        decompress(C.LZ4, bytes(bad), max_size=BIG)


def test_lz4_header_premature_end() -> None:
    """[KafkaLZ4Test.testHeaderPrematureEnd]"""
    for magic in MAGICS:
        with pytest.raises(CorruptRecordError, match="prematurely"):
            decompress(C.LZ4, b"\x04\x22", magic=magic, max_size=BIG)


@pytest.mark.parametrize("magic", MAGICS)
def test_lz4_bad_magic(magic: int) -> None:
    """[KafkaLZ4Test.testNotSupported]"""
    packed = bytearray(compress(C.LZ4, b"data" * 100, magic=magic))
    packed[0] = 0
    with pytest.raises(CorruptRecordError, match="invalid magic"):
        decompress(C.LZ4, bytes(packed), magic=magic, max_size=BIG)


@pytest.mark.parametrize("magic", MAGICS)
def test_lz4_bad_frame_checksum(magic: int) -> None:
    """[KafkaLZ4Test.testBadFrameChecksum]: HC 0xFF fails unless the checksum is ignored (v0)."""
    packed = bytearray(compress(C.LZ4, b"data" * 100, magic=magic))
    packed[6] = 0xFF
    if magic == 0:
        assert decompress(C.LZ4, bytes(packed), magic=0, max_size=BIG) == b"data" * 100
    else:
        with pytest.raises(CorruptRecordError, match="descriptor corrupted"):
            decompress(C.LZ4, bytes(packed), magic=magic, max_size=BIG)


@pytest.mark.parametrize("magic", MAGICS)
def test_lz4_bad_block_size(magic: int) -> None:
    """[KafkaLZ4Test.testBadBlockSize]: a block larger than the BD maximum is refused."""
    packed = bytearray(compress(C.LZ4, make_payload(1, 1000, "random"), magic=magic))
    (word,) = struct.unpack_from("<I", packed, 7)
    struct.pack_into("<I", packed, 7, (word & 0x80000000) | (1 << 24))
    with pytest.raises(CorruptRecordError, match="exceeded max"):
        decompress(C.LZ4, bytes(packed), magic=magic, max_size=BIG)


@pytest.mark.parametrize("magic", MAGICS)
def test_lz4_unclosed_stream(magic: int) -> None:
    """[KafkaLZ4Test.testDecompression, close=false]: no end mark => PREMATURE_EOS."""
    packed = compress(C.LZ4, make_payload(1, 100_000, "mixed"), magic=magic)
    with pytest.raises(CorruptRecordError, match="prematurely"):
        decompress(C.LZ4, packed[:-4], magic=magic, max_size=BIG)


@pytest.mark.parametrize(("index", "value", "reason"), [
    (4, 0x61, "reserved bits of FLG"),       # FLG reserved bit
    (4, 0xA0, "version 2 is unsupported"),   # FLG version 10
    (4, 0x40, "Dependent block"),            # FLG without block independence
    (5, 0x41, "reserved bits of BD"),        # BD reserved2
    (5, 0xC0, "reserved bits of BD"),        # BD reserved3
    (5, 0x30, "between 4 and 7"),            # BD block size id 3
])
def test_lz4_descriptor_validation(index: int, value: int, reason: str) -> None:
    """FLG.validate / BD.validate, checked even for magic 0 (only HC is ignored there)."""
    packed = bytearray(compress(C.LZ4, b"payload", magic=0))
    packed[index] = value
    with pytest.raises(CorruptRecordError, match=reason):
        decompress(C.LZ4, bytes(packed), magic=0, max_size=BIG)


def test_lz4_concatenated_frames_and_trailing_bytes() -> None:
    a, b = b"first frame " * 10, make_payload(3, 70_000, "random")
    both = compress(C.LZ4, a) + compress(C.LZ4, b)
    assert decompress(C.LZ4, both, max_size=BIG) == a + b
    with pytest.raises(CorruptRecordError, match="trailing bytes"):
        decompress(C.LZ4, compress(C.LZ4, a) + b"\x00\x01", max_size=BIG)


# ------------------------------------------------------------------------------------------------
# Exact framing: ZSTD


def test_zstd_frames_with_and_without_content_size() -> None:
    """Kafka's ZstdOutputStream (streaming) writes no Frame_Content_Size; ours declares it. Both
    kinds, skippable frames and concatenated frames must be read (streaming decoder)."""
    data = make_payload(8, 300_000, "mixed")
    packed = compress(C.ZSTD, data)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.get_frame_parameters(packed).content_size == len(data)
    assert not zstandard.get_frame_parameters(packed).has_checksum
    streaming = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    unsized = streaming.compress(data) + streaming.flush()
    assert zstandard.get_frame_parameters(unsized).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(C.ZSTD, unsized, max_size=len(data)) == data
    skippable = b"\x5a\x2a\x4d\x18" + struct.pack("<I", 5) + b"12345"
    empty = zstandard.ZstdCompressor().compress(b"")
    stream = packed + skippable + empty + unsized
    assert decompress(C.ZSTD, stream, max_size=2 * len(data)) == data + data
    with pytest.raises(RecordTooLargeError):
        decompress(C.ZSTD, stream, max_size=2 * len(data) - 1)


def test_zstd_corrupt_checksum_detected() -> None:
    data = make_payload(8, 10_000, "mixed")
    packed = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    packed[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decompress(C.ZSTD, bytes(packed), max_size=BIG)


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_refused_for_legacy_magic(magic: int) -> None:
    """[MemoryRecordsBuilderTest.testUnsupportedCompress,
    AbstractLegacyRecordBatchTest.testZStdCompressionTypeWithV0OrV1]"""
    message = f"^ZStandard compression is not supported for magic {magic}$"
    with pytest.raises(UnsupportedFormatError, match=message):
        compress(C.ZSTD, b"abc", magic=magic)
    with pytest.raises(UnsupportedFormatError, match=message):
        decompress(C.ZSTD, compress(C.ZSTD, b"abc"), magic=magic, max_size=BIG)


@pytest.mark.parametrize("magic", [-1, 3, 99])
def test_unknown_magic_refused(magic: int) -> None:
    with pytest.raises(UnsupportedFormatError, match="magic"):
        compress(C.GZIP, b"abc", magic=magic)
    with pytest.raises(UnsupportedFormatError, match="magic"):
        decompress(C.GZIP, compress(C.GZIP, b"abc"), magic=magic, max_size=BIG)


def test_none_codec() -> None:
    data = memoryview(b"--plain--")[2:-2]
    assert compress(C.NONE, data) == b"plain"
    assert decompress(C.NONE, data, max_size=5) == b"plain"
    with pytest.raises(RecordTooLargeError):
        decompress(C.NONE, data, max_size=4)


# ------------------------------------------------------------------------------------------------
# Interop with independent implementations


class _SnappyShim:
    """python-snappy's API over cramjam, used only when python-snappy is not installed: the xerial
    framing under test stays kafka-python's own code."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


class _XXHashShim:
    """The ``xxhash`` module's xxh32 over liblz4's XXH32 (not over our pure-Python one), used only
    when ``xxhash`` is not installed: kafka-python's old-Kafka HC munging stays its own code."""

    class xxh32:  # noqa: N801 - mirrors xxhash.xxh32
        def __init__(self, data: bytes) -> None:
            self._value = liblz4_xxh32(bytes(data))

        def digest(self) -> bytes:
            return self._value.to_bytes(4, "big")


@pytest.fixture
def kafka_codec(monkeypatch: pytest.MonkeyPatch):
    import kafka.codec as kc

    if kc.snappy is None:
        monkeypatch.setattr(kc, "snappy", _SnappyShim)
    if kc.xxhash is None:
        monkeypatch.setattr(kc, "xxhash", _XXHashShim)
    return kc


INTEROP_DATA = [b"k", make_payload(21, 1000, "mixed"), make_payload(22, 150_000, "mixed"),
                make_payload(23, 70_000, "random")]


@pytest.mark.parametrize("data", INTEROP_DATA, ids=lambda d: f"{len(d)}B")
def test_interop_kafka_python(kafka_codec, data: bytes) -> None:
    """kafka-python (pure-Python client) encoders -> our decoder, our encoder -> its decoders."""
    kc = kafka_codec
    n = len(data)
    # gzip
    assert decompress(C.GZIP, kc.gzip_encode(data), max_size=n) == data
    assert kc.gzip_decode(compress(C.GZIP, data)) == data
    # snappy: xerial framing and raw
    assert decompress(C.SNAPPY, kc.snappy_encode(data, xerial_compatible=True), max_size=n) == data
    assert decompress(C.SNAPPY, kc.snappy_encode(data, xerial_compatible=False),
                      max_size=n) == data
    assert kc.snappy_encode(data, xerial_compatible=True) == compress(C.SNAPPY, data)
    assert kc.snappy_decode(compress(C.SNAPPY, data)) == data
    # lz4: KIP-57 frames for magic >= 1, the broken-HC frames for magic 0
    for magic in (1, 2):
        assert decompress(C.LZ4, kc.lz4_encode(data), magic=magic, max_size=n) == data
        assert kc.lz4_decode(compress(C.LZ4, data, magic=magic)) == data
    old = kc.lz4_encode_old_kafka(data)
    assert old[:7] == LZ4_HEADER_V0
    assert decompress(C.LZ4, old, magic=0, max_size=n) == data
    assert kc.lz4_decode_old_kafka(compress(C.LZ4, data, magic=0)) == data
    with pytest.raises(CorruptRecordError, match="descriptor corrupted"):
        decompress(C.LZ4, old, magic=1, max_size=n)
    # zstd
    assert decompress(C.ZSTD, kc.zstd_encode(data), max_size=n) == data
    assert kc.zstd_decode(compress(C.ZSTD, data)) == data


@pytest.mark.parametrize("data", INTEROP_DATA, ids=lambda d: f"{len(d)}B")
def test_interop_aiokafka(data: bytes) -> None:
    """aiokafka's codec module (cramjam based; its LZ4 frames carry block checksums)."""
    import aiokafka.codec as ac

    n = len(data)
    assert decompress(C.GZIP, ac.gzip_encode(data), max_size=n) == data
    assert ac.gzip_decode(compress(C.GZIP, data)) == data
    assert decompress(C.SNAPPY, ac.snappy_encode(data, xerial_compatible=True), max_size=n) == data
    assert decompress(C.SNAPPY, ac.snappy_encode(data, xerial_compatible=False),
                      max_size=n) == data
    assert ac.snappy_encode(data) == compress(C.SNAPPY, data)
    assert ac.snappy_decode(compress(C.SNAPPY, data)) == data
    for level in (1, 9):
        frame = ac.lz4_encode(data, level=level)
        assert decompress(C.LZ4, frame, magic=2, max_size=n) == data
    for magic in (1, 2):
        assert ac.lz4_decode(compress(C.LZ4, data, magic=magic)) == data
    assert decompress(C.ZSTD, ac.zstd_encode(data), max_size=n) == data
    assert ac.zstd_decode(compress(C.ZSTD, data)) == data


# ------------------------------------------------------------------------------------------------
# Hostile input


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """50 MB of zeros, compressed by each codec (and by zstd with a declared content size)."""
    zeros = bytes(50 * 1024 * 1024)
    out = {c.name_kafka: compress(c, zeros) for c in (C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD)}
    streaming = zstandard.ZstdCompressor().compressobj()  # no declared size: caught while decoding
    out["zstd-streaming"] = streaming.compress(zeros) + streaming.flush()
    out["snappy-raw"] = bytes(cramjam.snappy.compress_raw(zeros))
    out["lz4-4mb-blocks"] = lz4.frame.compress(zeros, block_linked=False,
                                               block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    return out


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd", "zstd-streaming",
                                  "snappy-raw", "lz4-4mb-blocks"])
def test_zip_bombs_refused_quickly_without_allocating(bombs: dict[str, bytes], name: str) -> None:
    """The decompression guard: 50 MB of zeros with a 1 MiB limit fails fast, and the Python heap
    never holds more than a few MiB (output is produced incrementally and checked)."""
    codec = C.from_name(name.split("-")[0])
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(RecordTooLargeError, match="limit of 1048576 bytes"):
            decompress(codec, bombs[name], max_size=1 << 20)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5
    assert peak < 8 * 1024 * 1024 + len(bombs[name])


@pytest.mark.parametrize("name", ["snappy", "snappy-raw", "zstd"])
def test_declared_sizes_refused_before_decompressing(bombs: dict[str, bytes], name: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Snappy blocks and zstd frames declare their size: an oversized payload is refused before
    any decompressor runs (nothing is allocated for it)."""

    def forbidden(*_args, **_kwargs):
        raise AssertionError("decompressor called")

    monkeypatch.setattr(comp.cramjam.snappy, "decompress_raw", forbidden)
    monkeypatch.setattr(comp.zstandard, "ZstdDecompressor", forbidden)
    with pytest.raises(RecordTooLargeError):
        decompress(C.from_name(name.split("-")[0]), bombs[name], max_size=1 << 20)


def test_snappy_lying_preamble_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A raw block claiming 4 GiB is refused from its 5-byte preamble alone."""
    monkeypatch.setattr(comp.cramjam.snappy, "decompress_raw",
                        lambda *_: pytest.fail("decompressor called"))
    lying = b"\xff\xff\xff\xff\x0f" + b"\x00" * 20
    with pytest.raises(RecordTooLargeError):
        decompress(C.SNAPPY, lying, max_size=1 << 20)
    with pytest.raises(RecordTooLargeError):
        decompress(C.SNAPPY, XERIAL_HEADER + struct.pack(">i", len(lying)) + lying,
                   max_size=1 << 20)


@pytest.mark.parametrize(("codec", "magic"), COMPRESSED_COMBOS)
def test_every_truncation_is_corrupt(codec: CompressionType, magic: int) -> None:
    """Every strict prefix of a stream fails as CorruptRecordError (never a library error, never
    a silent short read). A xerial stream cut at a chunk boundary is still a valid stream, so the
    data fits one chunk here and the bare 16-byte header (a valid empty stream) is skipped."""
    data = make_payload(12, 3000, "mixed")
    packed = compress(codec, data, magic=magic)
    for cut in range(len(packed)):
        if codec is C.SNAPPY and cut == 16:
            continue
        with pytest.raises(CorruptRecordError) as exc:
            decompress(codec, packed[:cut], magic=magic, max_size=BIG)
        assert exc.type is CorruptRecordError
        assert exc.value.position is None


@pytest.mark.parametrize(("codec", "magic"), COMPRESSED_COMBOS)
def test_bad_magic_and_trailing_garbage(codec: CompressionType, magic: int) -> None:
    data = make_payload(13, 5000, "mixed")
    packed = bytearray(compress(codec, data, magic=magic))
    packed[1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decompress(codec, bytes(packed), magic=magic, max_size=BIG)
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, data, magic=magic) + b"\x01\x02\x03", magic=magic,
                   max_size=BIG)


def test_snappy_bad_chunk_lengths() -> None:
    for tail in (struct.pack(">i", -5) + b"xxxx", struct.pack(">i", 0),
                 struct.pack(">i", 1000) + b"short", b"\x82SNAPPY\x00\x00\x00"):
        with pytest.raises(CorruptRecordError) as exc:
            decompress(C.SNAPPY, compress(C.SNAPPY, b"ok" * 10) + tail, max_size=BIG)
        assert exc.type is CorruptRecordError


@pytest.mark.parametrize(("codec", "magic"), COMPRESSED_COMBOS)
def test_corrupted_body_detected(codec: CompressionType, magic: int) -> None:
    """Flipping bytes inside a checksummed/structured body is detected (gzip CRC-32, zstd and
    snappy structure, lz4 block decoding) or at worst decodes to other bytes; never anything
    but CorruptRecordError."""
    data = make_payload(14, 20_000, "mixed")
    packed = compress(codec, data, magic=magic)
    rnd = random.Random(1)
    for _ in range(60):
        bad = bytearray(packed)
        where = rnd.randrange(len(bad))
        bad[where] ^= 1 << rnd.randrange(8)
        try:
            decompress(codec, bytes(bad), magic=magic, max_size=len(data) * 2)
        except CorruptRecordError:
            continue
        # gzip: everything after the 10-byte header is covered by the CRC-32/ISIZE trailer.
        assert not (codec is C.GZIP and where >= 10), f"undetected gzip corruption at {where}"


ERRORS = (CorruptRecordError, RecordTooLargeError)


@pytest.mark.parametrize(("codec", "magic"), COMPRESSED_COMBOS)
@FAST
@given(garbage=st.binary(max_size=400))
def test_random_garbage_only_raises_corrupt(codec: CompressionType, magic: int,
                                            garbage: bytes) -> None:
    try:
        out = decompress(codec, garbage, magic=magic, max_size=4096)
    except ERRORS:
        return
    assert len(out) <= 4096


PREFIXES = {
    C.GZIP: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff",
    C.SNAPPY: XERIAL_HEADER,
    C.LZ4: LZ4_HEADER_V1,
    C.ZSTD: b"\x28\xb5\x2f\xfd",
}


@pytest.mark.parametrize(("codec", "magic"), COMPRESSED_COMBOS)
@FAST
@given(body=st.binary(max_size=400), max_size=st.integers(0, 5000))
def test_garbage_behind_a_valid_header_only_raises_corrupt(codec: CompressionType, magic: int,
                                                           body: bytes, max_size: int) -> None:
    """Gets past the magic checks so that the block parsers see hostile lengths and flags."""
    try:
        out = decompress(codec, PREFIXES[codec] + body, magic=magic, max_size=max_size)
    except ERRORS:
        return
    assert len(out) <= max_size


@pytest.mark.parametrize(("codec", "magic"), COMPRESSED_COMBOS)
@FAST
@given(seed=st.integers(0, 2**32), edits=st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from(["set", "ins", "del"])),
    min_size=1, max_size=4))
def test_mutated_streams_only_raise_corrupt(codec: CompressionType, magic: int, seed: int,
                                            edits: list[tuple[int, int, str]]) -> None:
    data = make_payload(seed, seed % 80_000, "mixed")
    packed = bytearray(compress(codec, data, magic=magic))
    for where, value, op in edits:
        i = where % (len(packed) + 1)
        if op == "ins":
            packed.insert(i, value)
        elif i < len(packed):
            if op == "set":
                packed[i] = value
            else:
                del packed[i]
    assume(bytes(packed) != compress(codec, data, magic=magic))
    try:
        out = decompress(codec, bytes(packed), magic=magic, max_size=len(data) + 100)
    except ERRORS:
        return
    assert len(out) <= len(data) + 100


def test_library_errors_are_chained() -> None:
    """The codec library's exception stays available as __cause__ for debugging."""
    packed = bytearray(compress(C.GZIP, b"hello" * 100))
    packed[12] ^= 0xFF
    with pytest.raises(CorruptRecordError) as exc:
        decompress(C.GZIP, bytes(packed), max_size=BIG)
    assert isinstance(exc.value.__cause__, zlib.error)
    assert exc.value.reason.startswith("Corrupt gzip payload")
