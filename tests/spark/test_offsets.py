"""Unit tests of ``kafka_log_source.offsets`` (no SparkSession): offset JSON formats, rate limits
and the splitting of offset ranges into input partitions, with the exact values of Spark's
JsonUtilsSuite, KafkaOffsetRangeLimitSuite, KafkaSourceOffsetSuite,
KafkaOffsetRangeCalculatorSuite, KafkaOffsetReaderSuite and KafkaMicroBatchSourceSuite.

Each docstring names the line of ../shared/spark_kafka_test_checklist.md it covers."""

from __future__ import annotations

import json

import pytest

from kafka_log_source.offsets import (EARLIEST, LATEST, OffsetRange, SpecificOffsets,
                                      offsets_behind, offsets_from_json, offsets_to_json,
                                      parse_partition_offsets, parse_partition_timestamps,
                                      parse_partitions, rate_limit, split_ranges)
from storage_core.errors import InvalidConfigError

LONG_MAX = 2 ** 63 - 1

OFFSETS_EXAMPLE = 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got '
TIMESTAMPS_EXAMPLE = ('Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
                      '"topicB": {"0": 123456789, "1": 123456789}}, got ')
ASSIGN_EXAMPLE = 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got '


def R(topic: str, partition: int, start: int, end: int) -> OffsetRange:
    return OffsetRange(topic, partition, start, end)


# KafkaOffsetRangeCalculatorSuite's three partitions
def tp1(start: int, end: int) -> OffsetRange:
    return R("t1", 1, start, end)


def tp2(start: int, end: int) -> OffsetRange:
    return R("t2", 1, start, end)


def tp3(start: int, end: int) -> OffsetRange:
    return R("t3", 1, start, end)


# ====================================================================== §2 offset JSON formats

class TestSourceOffsetJson:

    def test_serialises_with_string_partition_keys_and_long_values(self):
        """[KafkaSourceOffsetSuite "basic serialization - deserialization"]: a source offset
        serialises as {"topic":{"partition":nextOffset}}; topics sorted, partitions in numeric
        order so the JSON text is deterministic."""
        offsets = {("t", 10): 7, ("t", 2): 5, ("t", 0): 1, ("a", 0): LONG_MAX}
        obj = offsets_to_json(offsets)
        assert obj == {"a": {"0": LONG_MAX}, "t": {"0": 1, "2": 5, "10": 7}}
        assert json.dumps(obj, separators=(",", ":")) == (
            '{"a":{"0":9223372036854775807},"t":{"0":1,"2":5,"10":7}}')
        # insertion order does not leak into the text
        reversed_input = dict(reversed(list(offsets.items())))
        assert json.dumps(offsets_to_json(reversed_input)) == json.dumps(obj)

    def test_round_trip_gives_back_the_same_map(self):
        """[KafkaSourceOffsetSuite "basic serialization - deserialization", "OffsetSeqLog
        serialization - deserialization"]: serialise then deserialise gives back the same
        partition->offset map, from the dict and from its JSON text."""
        kso1 = {("t", 0): 1}
        assert offsets_from_json(offsets_to_json(kso1)) == kso1
        assert offsets_from_json(json.dumps(offsets_to_json(kso1))) == kso1

    def test_several_topics_round_trip_for_the_offset_log(self):
        """[KafkaSourceOffsetSuite "OffsetSeqLog serialization - deserialization"] (the offset
        JSON part): batch 0 and batch 1 offsets over several topics and partitions round-trip,
        and serialising the same offset again gives the identical text (so re-adding a batch
        changes nothing)."""
        batch0 = {("t", 0): 1}
        batch1 = {("t", 0): 2, ("t", 1): 4, ("u", 3): 0, ("u", 12): 99}
        for batch in (batch0, batch1):
            text = json.dumps(offsets_to_json(batch))
            assert offsets_from_json(text) == batch
            assert json.dumps(offsets_to_json(offsets_from_json(text))) == text
        assert json.dumps(offsets_to_json(batch1)) == (
            '{"t": {"0": 2, "1": 4}, "u": {"3": 0, "12": 99}}')

    def test_topic_names_are_case_sensitive(self):
        """[KafkaSourceOffsetSuite compare cases]: "t" and "T" are different topics in one
        offset."""
        offsets = {("t", 0): 1, ("T", 0): 0}
        obj = offsets_to_json(offsets)
        assert obj == {"T": {"0": 0}, "t": {"0": 1}}
        assert offsets_from_json(obj) == {("t", 0): 1, ("T", 0): 0}

    def test_legacy_spark_2_1_0_text_still_parses(self):
        """[KafkaSourceOffsetSuite "read Spark 2.1.0 offset format"]: the plain JSON text of
        kafka-source-offset-version-2.1.0.txt (with its trailing newline)."""
        text = '{"topic1":{"0":456,"1":789},"topic2":{"0":0}}\n'
        assert offsets_from_json(text) == {("topic1", 0): 456, ("topic1", 1): 789,
                                           ("topic2", 0): 0}

    def test_equality_of_the_compare_cases(self):
        """[KafkaSourceOffsetSuite compare cases]: {t-0:1} vs {t-0:2}, {t-0:1,t-1:0} vs
        {t-0:2,t-1:1} and {t-0:1} vs {t-0:2,t-1:1} are unequal, each equal to itself, also after
        a JSON round trip (Spark compares the JSON texts)."""
        pairs = [
            ({("t", 0): 1}, {("t", 0): 2}),
            ({("t", 0): 1, ("t", 1): 0}, {("t", 0): 2, ("t", 1): 1}),
            ({("t", 0): 1, ("T", 0): 0}, {("t", 0): 2, ("T", 0): 1}),
            ({("t", 0): 1}, {("t", 0): 2, ("t", 1): 1}),
        ]
        for one, two in pairs:
            j1, j2 = json.dumps(offsets_to_json(one)), json.dumps(offsets_to_json(two))
            assert j1 != j2
            assert offsets_from_json(j1) == one and offsets_from_json(j2) == two
            assert offsets_from_json(j1) != offsets_from_json(j2)
            assert json.dumps(offsets_to_json(offsets_from_json(j1))) == j1
            assert json.dumps(offsets_to_json(offsets_from_json(j2))) == j2

    def test_malformed_checkpointed_offset_is_rejected(self):
        """[code: JsonUtils.partitionOffsets]: an offset that is not {"topic":{"p":long}} fails
        with "Expected e.g. ..., got <input>"."""
        for text in ['{"t":[0,1]}', '{"t":{"x":1}}', '{"t":{"0":1.5}}', '{"t":{"0":true}}',
                     '[1]', 'not json', '{"t":{"0":9223372036854775808}}']:
            with pytest.raises(InvalidConfigError) as e:
                offsets_from_json(text)
            assert str(e.value) == OFFSETS_EXAMPLE + text
        with pytest.raises(InvalidConfigError, match="Expected e.g."):
            offsets_from_json({"t": {"0": "1"}})


class TestOptionJson:

    def test_partition_offsets(self):
        """[JsonUtilsSuite "parsing partitionOffsets", "parsing specificOffsets"]:
        {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}} parses to A-0=23, A-1=-1 (latest),
        B-0=-2 (earliest), with no topic-level offsets."""
        text = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
        parsed = parse_partition_offsets(text)
        assert parsed == SpecificOffsets(
            partitions={("topicA", 0): 23, ("topicA", 1): LATEST, ("topicB", 0): EARLIEST},
            topics={})
        assert (LATEST, EARLIEST) == (-1, -2)
        assert offsets_from_json(text) == parsed.partitions

    def test_malformed_partition_offsets_message(self):
        """[code: JsonUtils.partitionOffsets]: malformed per-partition offsets JSON fails with
        "Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got <input>"."""
        for text in ['{"topicA":{"0":23,"1":}}', '{"topicA":{"zero":23}}', '{"topicA":5}',
                     '{"topicA":{"0":NaN}}', '{"topicA":{"0":null}}', '']:
            with pytest.raises(InvalidConfigError) as e:
                parse_partition_offsets(text)
            assert str(e.value) == OFFSETS_EXAMPLE + text

    def test_surrounding_newlines_and_inner_spaces_accepted(self):
        """[KafkaRelationSuite "topic-partition for start offset and end offset must match"
        (multi-line JSON input)]: offset JSON with surrounding newlines and inner spaces."""
        text = '\n  {\n    "t": { "0": 1, "1" : -2 },\n    "u": "Earliest"\n  }\n  '
        parsed = parse_partition_offsets(text)
        assert parsed.partitions == {("t", 0): 1, ("t", 1): EARLIEST}
        assert parsed.topics == {"u": EARLIEST}
        assert parse_partition_timestamps('\n { "t" : { "0" : 1000 } }\n') == {("t", 0): 1000}

    def test_assign_partitions(self):
        """[JsonUtilsSuite "parsing partitions"]: {"topicA":[0,1],"topicB":[4,6]} yields A-0,
        A-1, B-4, B-6, in that order."""
        assert parse_partitions('{"topicA":[0,1],"topicB":[4,6]}') == [
            ("topicA", 0), ("topicA", 1), ("topicB", 4), ("topicB", 6)]

    def test_malformed_assign_message(self):
        """[code: JsonUtils.partitions]: assign that starts with "{" but is not
        {"topic":[ints]} fails with "Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got
        <value>"."""
        for text in ['{"topicA":{"0":1}}', '{"topicA":[0,"1"]}', '{"topicA":[0.5]}',
                     '{"topicA":0}', '{"topicA":[0,1]', '["topicA"]']:
            with pytest.raises(InvalidConfigError) as e:
                parse_partitions(text)
            assert str(e.value) == ASSIGN_EXAMPLE + text

    def test_partition_timestamps(self):
        """[code: JsonUtils.partitionTimestamps]: timestamp JSON has the offsets' shape; malformed
        input fails with "Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, "topicB":
        {"0": 123456789, "1": 123456789}}, got <input>"."""
        assert parse_partition_timestamps('{"topicA":{"0":1000,"1":2000},"topicB":{"3":0}}') == {
            ("topicA", 0): 1000, ("topicA", 1): 2000, ("topicB", 3): 0}
        for text in ['{"topicA":"earliest"}', '{"topicA":{"0":"1000"}}', '{"topicA":[1000]}',
                     'nope']:
            with pytest.raises(InvalidConfigError) as e:
                parse_partition_timestamps(text)
            assert str(e.value) == TIMESTAMPS_EXAMPLE + text

    def test_partition_timestamps_with_a_repeated_topic_are_rejected(self):
        """A topic given twice in timestamp JSON was merged (or its last value kept) silently;
        refused as parse_partition_offsets refuses it (a repeated key is almost surely a typo)."""
        for dup in ['{"topicA":{"0":1000},"topicA":{"0":2000}}', '{"topicA":{"0":1},"topicA":{"1":2}}']:
            with pytest.raises(InvalidConfigError) as e:
                parse_partition_timestamps(dup)
            assert "topicA" in str(e.value) and "more than once" in str(e.value)

    def test_topic_level_offsets(self):
        """[JsonUtilsSuite "parsing specificOffsets with topic-level earliest/latest"]:
        {"topicA":"earliest","topicB":"latest"} parses to topic offsets and no partition
        offsets."""
        parsed = parse_partition_offsets('{"topicA":"earliest","topicB":"latest"}')
        assert parsed.partitions == {}
        assert parsed.topics == {"topicA": EARLIEST, "topicB": LATEST}

    def test_mixed_forms(self):
        """[JsonUtilsSuite "parsing specificOffsets mixing topic-level and partition-level
        values"]: {"topicA":"earliest","topicB":{"0":23,"1":-1},"topicC":"LATEST"}."""
        parsed = parse_partition_offsets(
            '{"topicA":"earliest","topicB":{"0":23,"1":-1},"topicC":"LATEST"}')
        assert parsed.partitions == {("topicB", 0): 23, ("topicB", 1): -1}
        assert parsed.topics == {"topicA": EARLIEST, "topicC": LATEST}

    def test_topic_given_in_both_forms_is_rejected(self):
        """[JsonUtilsSuite "parsing specificOffsets rejects a topic given in both forms"]: a
        duplicate JSON key with both forms fails naming the topic and containing "both a
        topic-level offset"; a plain duplicate key is rejected too (Python's json would keep
        only the last one)."""
        text = '{"topicA":"earliest","topicA":{"0":23}}'
        with pytest.raises(InvalidConfigError) as e:
            parse_partition_offsets(text)
        assert str(e.value) == (
            "Topic(s) topicA are given both a topic-level offset\n"
            "and per-partition offsets, only one of the two forms is allowed per topic,\n"
            f"got {text}")
        for dup in ['{"topicA":{"0":1},"topicA":{"1":2}}', '{"topicA":"earliest","topicA":"latest"}']:
            with pytest.raises(InvalidConfigError) as e:
                parse_partition_offsets(dup)
            assert "topicA" in str(e.value) and "more than once" in str(e.value)
            assert "both a topic-level offset" not in str(e.value)

    def test_malformed_specific_offsets_echo_the_input(self):
        """[JsonUtilsSuite "parsing specificOffsets rejects malformed json"]: {"topicA":"first"},
        {"topicA":[0,1]}, {"topicA":{"0":"earliest"}}, a bare JSON string and "not json" are each
        rejected with a message that echoes the input."""
        for text in ['{"topicA":"first"}', '{"topicA":[0,1]}', '{"topicA":{"0":"earliest"}}',
                     '"earliest"', 'not json']:
            with pytest.raises(InvalidConfigError) as e:
                parse_partition_offsets(text)
            assert str(e.value) == OFFSETS_EXAMPLE + text


class TestTopicLevelResolution:

    def test_topic_level_offsets_expand_to_assigned_partitions(self):
        """[KafkaOffsetRangeLimitSuite "resolving topic-level offsets against the assigned
        partitions"]: A-0, A-1 earliest, B-0 23."""
        limit = SpecificOffsets(partitions={("topicB", 0): 23}, topics={"topicA": EARLIEST})
        assigned = [("topicA", 0), ("topicA", 1), ("topicB", 0)]
        assert limit.resolve(assigned) == {("topicA", 0): EARLIEST, ("topicA", 1): EARLIEST,
                                           ("topicB", 0): 23}

    def test_fully_enumerated_offsets_do_not_need_the_assignment(self):
        """[KafkaOffsetRangeLimitSuite "resolving fully enumerated offsets doesn't need the
        assigned partitions"]."""
        class Untouchable:
            def __iter__(self):
                raise AssertionError("the partitions should not have been fetched")

        limit = SpecificOffsets(partitions={("topicB", 0): 23}, topics={})
        assert limit.resolve(Untouchable()) == {("topicB", 0): 23}  # type: ignore[arg-type]

    def test_topic_level_offset_without_assigned_partitions_fails(self):
        """[KafkaOffsetRangeLimitSuite "resolving a topic-level offset of a topic without
        assigned partitions fails"]: KAFKA_TOPIC_OFFSET_DOES_NOT_MATCH_ASSIGNED naming topicC."""
        limit = SpecificOffsets(partitions={}, topics={"topicA": EARLIEST, "topicC": EARLIEST})
        with pytest.raises(InvalidConfigError) as e:
            limit.resolve([("topicA", 0)])
        message = str(e.value)
        assert message.startswith("[KAFKA_TOPIC_OFFSET_DOES_NOT_MATCH_ASSIGNED]")
        assert "topicC" in message


# ====================================================================== §5 rate limits

def _rows(start: dict, end: dict, values: dict) -> list[int]:
    """The record values a batch [start, end) reads, given each partition's value list."""
    return [v for tp in sorted(end) for v in values[tp][start[tp]:end[tp]]]


class TestRateLimit:

    def test_max_offsets_per_trigger_sequence(self):
        """[KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger"]: backlog 101/11/1 with limit 10
        gives 8/1/1, then 9/1/0 (share = limit x size / total, below 1 rounded up, else down)."""
        p0, p1, p2 = ("t", 0), ("t", 1), ("t", 2)
        values = {p0: list(range(100, 201)), p1: list(range(10, 21)), p2: [1]}
        latest = {p0: 101, p1: 11, p2: 1}
        start = {p0: 0, p1: 0, p2: 0}
        end = rate_limit(10, start, latest)
        assert end == {p0: 8, p1: 1, p2: 1}
        assert sorted(_rows(start, end, values)) == [1, 10, 100, 101, 102, 103, 104, 105, 106,
                                                     107]
        start, end = end, rate_limit(10, end, latest)
        assert end == {p0: 17, p1: 2, p2: 1}
        assert sorted(_rows(start, end, values)) == [11, 108, 109, 110, 111, 112, 113, 114, 115,
                                                     116]

    def test_rate_limited_sequence_continues_across_restart(self):
        """[KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger"]: after 2 batches, a restart from
        the checkpointed offset JSON gives 12,117..125, then 13,126..134."""
        p0, p1, p2 = ("t", 0), ("t", 1), ("t", 2)
        values = {p0: list(range(100, 201)), p1: list(range(10, 21)), p2: [1]}
        latest = {p0: 101, p1: 11, p2: 1}
        checkpoint = json.dumps(offsets_to_json({p0: 17, p1: 2, p2: 1}))
        start = offsets_from_json(checkpoint)
        end = rate_limit(10, start, latest)
        assert end == {p0: 26, p1: 3, p2: 1}
        assert sorted(_rows(start, end, values)) == [12] + list(range(117, 126))
        start, end = end, rate_limit(10, end, latest)
        assert end == {p0: 35, p1: 4, p2: 1}
        assert sorted(_rows(start, end, values)) == [13] + list(range(126, 135))

    def test_small_shares_round_up_and_never_pass_latest(self):
        """[code: KafkaMicroBatchStream.rateLimit]: because small shares round up, a batch can
        exceed the limit when many partitions have tiny backlogs; no end goes past latest."""
        latest = {("big", 0): 100, **{("small", i): 1 for i in range(20)}}
        start = {tp: 0 for tp in latest}
        end = rate_limit(10, start, latest)
        assert end[("big", 0)] == 8                     # floor(10 * 100 / 120)
        assert all(end[("small", i)] == 1 for i in range(20))
        assert sum(end[tp] - start[tp] for tp in latest) == 28      # > 10
        # a limit above the backlog is capped at latest
        assert rate_limit(1000, {("t", 0): 3, ("t", 1): 0}, {("t", 0): 8, ("t", 1): 2}) == {
            ("t", 0): 8, ("t", 1): 2}

    def test_no_backlog_keeps_offset_and_new_partitions_share(self):
        """[code: KafkaMicroBatchStream.rateLimit]: partitions without backlog keep their offset;
        a newly discovered partition takes part in the split from its earliest offset (given in
        start); one whose start is unknown gets no share and ends at latest."""
        start = {("t", 0): 50, ("t", 1): 7, ("t", 2): 0}     # t-2 new, earliest 0
        latest = {("t", 0): 50, ("t", 1): 37, ("t", 2): 10, ("t", 3): 4}
        end = rate_limit(8, start, latest)
        # backlog 0 / 30 / 10 (t-3 unknown): 8*30/40 = 6, 8*10/40 = 2
        assert end == {("t", 0): 50, ("t", 1): 13, ("t", 2): 2, ("t", 3): 4}
        # nothing to read anywhere: latest as is
        assert rate_limit(5, {("t", 0): 9}, {("t", 0): 9}) == {("t", 0): 9}

    def test_long_max_limit_does_not_overflow(self):
        """[KafkaMicroBatchSourceSuite "SPARK-26718 Rate limit set to Long.Max should not
        overflow integer during end offset calculation"]: start 5, five records appended ->
        end 10, no overflow; also with a start near Long.MaxValue."""
        assert rate_limit(LONG_MAX, {("t", 0): 5}, {("t", 0): 10}) == {("t", 0): 10}
        near = LONG_MAX - 10
        assert rate_limit(LONG_MAX, {("t", 0): near, ("t", 1): 0},
                          {("t", 0): LONG_MAX, ("t", 1): 3}) == {("t", 0): LONG_MAX, ("t", 1): 3}

    def test_min_offsets_per_trigger_counts(self):
        """[KafkaMicroBatchSourceSuite "minOffsetsPerTrigger"]: after the first batch (10/5/1
        read), 6 new offsets (< 15) give no batch; after 12 more (18 >= 15) a batch runs."""
        after_first = {("t", 0): 10, ("t", 1): 5, ("t", 2): 1}
        latest = {("t", 0): 10, ("t", 1): 11, ("t", 2): 1}
        assert offsets_behind(after_first, latest) == 6
        latest = {("t", 0): 21, ("t", 1): 11, ("t", 2): 2}
        assert offsets_behind(after_first, latest) == 18

    def test_offsets_behind_counts_missing_partitions_from_zero(self):
        """[code: KafkaMicroBatchStream.delayBatch]: new offsets = sum over partitions of
        (latest - start), partitions absent from start counted from 0."""
        start = {("t", 0): 4, ("gone", 0): 100}
        latest = {("t", 0): 10, ("t", 1): 7}
        assert offsets_behind(start, latest) == 6 + 7

    def test_composite_read_limit(self):
        """[KafkaMicroBatchSourceSuite "compositeReadLimit"]: min 15 / max 20 over backlog
        21/11/1: first batch 12/6/1 (19 rows); 14 pending (< 15); after 8/10/1 more, 33 pending,
        the batch is capped by the max split (112..121, 16..24, 2)."""
        p0, p1, p2 = ("t", 0), ("t", 1), ("t", 2)
        values = {p0: list(range(100, 129)), p1: list(range(10, 31)), p2: [1, 2]}
        start = {p0: 0, p1: 0, p2: 0}
        latest = {p0: 21, p1: 11, p2: 1}
        end = rate_limit(20, start, latest)
        assert end == {p0: 12, p1: 6, p2: 1}
        assert len(_rows(start, end, values)) == 19
        assert offsets_behind(end, latest) == 14
        start, latest = end, {p0: 29, p1: 21, p2: 2}
        assert offsets_behind(start, latest) == 33
        end = rate_limit(20, start, latest)
        assert end == {p0: 22, p1: 15, p2: 2}
        assert sorted(_rows(start, end, values)) == [2] + list(range(16, 25)) + list(
            range(112, 122))


# ====================================================================== §5 splitting

class TestSplitRanges:

    def test_no_min_partitions_one_range_per_partition(self):
        """[KafkaOffsetRangeCalculatorSuite "with no minPartition: N TopicPartitions to N offset
        ranges"]."""
        assert split_ranges([tp1(1, 2)]) == [tp1(1, 2)]

    def test_no_min_partitions_empty_ranges_dropped(self):
        """[KafkaOffsetRangeCalculatorSuite "with no minPartition: empty ranges ignored"]."""
        assert split_ranges([tp1(1, 2), tp2(1, 1)]) == [tp1(1, 2)]

    def test_negative_range_dropped(self):
        """[code: getOffsetRangesFromResolvedOffsets, KafkaOffsetRangeCalculator]: a partition
        whose end is below its start (failOnDataLoss=false) gets no range."""
        assert split_ranges([tp1(5, 3), tp2(0, 2)]) == [tp2(0, 2)]
        assert split_ranges([tp1(5, 3), tp2(0, 2)], min_partitions=3) == [tp2(0, 1), tp2(1, 2)]

    def test_min_partitions_not_above_range_count_does_not_split(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 3: N TopicPartitions to N offset
        ranges", "with minPartition = 1: SPARK-30656: minPartitions less than the length of
        topic partitions"]."""
        assert split_ranges([tp1(1, 2), tp2(1, 2), tp3(1, 2)], min_partitions=3) == [
            tp1(1, 2), tp2(1, 2), tp3(1, 2)]
        assert split_ranges([tp1(1, 5), tp2(1, 21)], min_partitions=1) == [tp1(1, 5), tp2(1, 21)]

    def test_min_partitions_option_plans(self):
        """[KafkaMicroBatchSourceSuite "minPartitions is supported"]: minPartitions unset or 1
        plans a single input partition for [0,100); 4 plans exactly 4."""
        assert split_ranges([R("t", 0, 0, 100)]) == [R("t", 0, 0, 100)]
        assert split_ranges([R("t", 0, 0, 100)], min_partitions=1) == [R("t", 0, 0, 100)]
        assert split_ranges([R("t", 0, 0, 100)], min_partitions=4) == [
            R("t", 0, 0, 25), R("t", 0, 25, 50), R("t", 0, 50, 75), R("t", 0, 75, 100)]

    def test_invalid_options_rejected(self):
        """[KafkaMicroBatchSourceSuite "minPartitions is supported"; code: validateGeneralOptions]:
        minPartitions 0 / -1 -> "minPartitions must be positive"; maxRecordsPerPartition <= 0 ->
        "maxRecordsPerPartition must be positive"."""
        for bad in (0, -1):
            with pytest.raises(InvalidConfigError, match="minPartitions must be positive"):
                split_ranges([tp1(0, 10)], min_partitions=bad)
            with pytest.raises(InvalidConfigError,
                               match="maxRecordsPerPartition must be positive"):
                split_ranges([tp1(0, 10)], max_records_per_partition=bad)

    def test_one_range_to_min_partitions_pieces(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 4: 1 TopicPartition to N offset
        ranges"]."""
        assert split_ranges([tp1(1, 5)], min_partitions=4) == [
            tp1(1, 2), tp1(2, 3), tp1(3, 4), tp1(4, 5)]

    def test_range_inexact_multiple_of_min_partitions(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 3: range inexact multiple of
        minPartitions"]: integer division, the last piece takes the remainder."""
        assert split_ranges([tp1(1, 11)], min_partitions=3) == [tp1(1, 4), tp1(4, 7), tp1(7, 11)]

    def test_skewed_ranges(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 4: N skewed TopicPartitions to M
        offset ranges"]."""
        assert split_ranges([tp1(1, 5), tp2(1, 21)], min_partitions=4) == [
            tp1(1, 5), tp2(1, 7), tp2(7, 14), tp2(14, 21)]

    def test_empty_ranges_ignored_before_splitting(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 4: SPARK-30656: ignore empty
        ranges and split the rest", "with minPartition = 4: empty ranges ignored"]."""
        assert split_ranges([tp1(1, 1), tp2(1, 21)], min_partitions=4) == [
            tp2(1, 6), tp2(6, 11), tp2(11, 16), tp2(16, 21)]
        assert split_ranges([tp1(1, 5), tp2(1, 21), tp3(1, 1)], min_partitions=4) == [
            tp1(1, 5), tp2(1, 7), tp2(7, 14), tp2(14, 21)]

    def test_very_skewed_ranges(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 4: SPARK-30656: N very skewed
        TopicPartitions to M offset ranges"]."""
        assert split_ranges([tp1(1, 2), tp2(1, 1001)], min_partitions=4) == [
            tp1(1, 2), tp2(1, 334), tp2(334, 667), tp2(667, 1001)]

    def test_never_drop_offsets(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 6: SPARK-28489: never drop
        offsets"]."""
        assert split_ranges([tp1(0, 10), tp2(0, 10), tp3(0, 1)], min_partitions=6) == [
            tp1(0, 3), tp1(3, 6), tp1(6, 10),
            tp2(0, 3), tp2(3, 6), tp2(6, 10),
            tp3(0, 1)]

    def test_streaming_min_partitions_reads_every_record_once(self):
        """[KafkaMicroBatchSourceSuite "SPARK-30656: minPartitions"]: minPartitions=6 over 3
        partitions with 10/10/1 records gives >= 6 input partitions covering all 21 records
        exactly once."""
        ranges = [R("t", 0, 0, 10), R("t", 1, 0, 10), R("t", 2, 0, 1)]
        pieces = split_ranges(ranges, min_partitions=6)
        assert len(pieces) >= 6
        covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
        assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
        assert len(covered) == 21

    def test_small_ranges_set_aside(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 9: SPARK-36576: 0 small unsplit
        ranges and 3 large split ranges", "with minPartition = 6: SPARK-36576: 1 small unsplit
        range and 2 large split ranges", "with minPartition = 6: SPARK-36576: 2 small unsplit
        ranges and 1 large split range"]."""
        assert split_ranges([tp1(0, 10000), tp2(0, 15000), tp3(0, 20000)], min_partitions=9) == [
            tp1(0, 5000), tp1(5000, 10000),
            tp2(0, 5000), tp2(5000, 10000), tp2(10000, 15000),
            tp3(0, 5000), tp3(5000, 10000), tp3(10000, 15000), tp3(15000, 20000)]
        assert split_ranges([tp1(0, 500), tp2(0, 12000), tp3(0, 15001)], min_partitions=6) == [
            tp1(0, 500),
            tp2(0, 6000), tp2(6000, 12000),
            tp3(0, 5000), tp3(5000, 10000), tp3(10000, 15001)]
        assert split_ranges([tp1(0, 1), tp2(0, 1), tp3(0, 10000)], min_partitions=6) == [
            tp1(0, 1), tp2(0, 1),
            tp3(0, 2500), tp3(2500, 5000), tp3(5000, 7500), tp3(7500, 10000)]

    def test_part_counts_round_halves_up(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartition = 6: SPARK-36576: 1 small unsplit
        range and 2 large split ranges"] (the proportional math, code: getPartCount): a share of
        exactly 2.5 parts becomes 3, as Java's Math.round does (Python's round() gives 2)."""
        # sizes 5 and 3, minPartitions 4: 5/8*4 = 2.5 -> 3 pieces, 3/8*4 = 1.5 -> 2 pieces
        assert split_ranges([tp1(0, 5), tp2(0, 3)], min_partitions=4) == [
            tp1(0, 1), tp1(1, 3), tp1(3, 5), tp2(0, 1), tp2(1, 3)]

    def test_max_records_per_partition_one_range(self):
        """[KafkaOffsetRangeCalculatorSuite "with maxRecordsPerPartition = 4: SPARK-49259: 1
        TopicPartition to N offset ranges"]: size 4 stays whole, [1,6) gives [1,3), [3,6)."""
        assert split_ranges([tp1(1, 5)], max_records_per_partition=4) == [tp1(1, 5)]
        assert split_ranges([tp1(1, 2)], max_records_per_partition=4) == [tp1(1, 2)]
        assert split_ranges([tp1(1, 6)], max_records_per_partition=4) == [tp1(1, 3), tp1(3, 6)]

    def test_max_records_per_partition_each_range_on_its_own(self):
        """[KafkaOffsetRangeCalculatorSuite "with maxRecordsPerPartition = 20: SPARK-49259: N
        TopicPartition to N offset ranges"]: sizes 39/49/59 give 2/3/3 pieces."""
        assert split_ranges([tp1(1, 40), tp2(1, 50), tp3(1, 60)],
                            max_records_per_partition=20) == [
            tp1(1, 20), tp1(20, 40),
            tp2(1, 17), tp2(17, 33), tp2(33, 50),
            tp3(1, 20), tp3(20, 40), tp3(40, 60)]

    def test_both_options_larger_piece_count_wins(self):
        """[KafkaOffsetRangeCalculatorSuite "with minPartitions = 1 and maxRecordsPerPartition =
        20: SPARK-49259: 1 TopicPartition with low minPartitions value", "with minPartitions = 4
        and maxRecordsPerPartition = 20: SPARK-49259: 1 TopicPartition with high minPartitions
        value"]."""
        assert split_ranges([tp1(1, 40)], min_partitions=1, max_records_per_partition=20) == [
            tp1(1, 20), tp1(20, 40)]
        assert split_ranges([tp1(1, 40)], min_partitions=4, max_records_per_partition=20) == [
            tp1(1, 10), tp1(10, 20), tp1(20, 30), tp1(30, 40)]

    # --- unresolved offsets (batch planning, KafkaOffsetReaderSuite) ---

    def test_sentinel_range_split_keeps_sentinels_at_the_ends(self):
        """[KafkaOffsetReaderSuite "SPARK-30656: getOffsetRangesFromUnresolvedOffsets - using
        special offsets"]: earliest->latest over 4 records with minPartitions=3 plans
        [EARLIEST,1), [1,2), [2,LATEST)."""
        assert split_ranges([R("t", 0, EARLIEST, LATEST)], min_partitions=3,
                            bounds={("t", 0): (0, 4)}) == [
            R("t", 0, EARLIEST, 1), R("t", 0, 1, 2), R("t", 0, 2, LATEST)]

    def test_specific_offsets_split(self):
        """[KafkaOffsetReaderSuite "SPARK-30656: getOffsetRangesFromUnresolvedOffsets - using
        specific offsets"]: 1->4 on one partition with minPartitions=3 plans [1,2), [2,3),
        [3,4)."""
        assert split_ranges([R("t", 0, 1, 4)], min_partitions=3) == [
            R("t", 0, 1, 2), R("t", 0, 2, 3), R("t", 0, 3, 4)]

    def test_unresolved_multiple_topic_partitions(self):
        """[KafkaOffsetReaderSuite "SPARK-30656: getOffsetRangesFromUnresolvedOffsets - multiple
        topic partitions"]: p0 earliest->latest (100 records) and p1 earliest->3 with
        minPartitions=4 plan p1 [E,3) and p0 [E,33), [33,66), [66,L)."""
        pieces = split_ranges([R("t", 0, EARLIEST, LATEST), R("t", 1, EARLIEST, 3)],
                              min_partitions=4, bounds={("t", 0): (0, 100), ("t", 1): (0, 3)})
        assert pieces == [R("t", 0, EARLIEST, 33), R("t", 0, 33, 66), R("t", 0, 66, LATEST),
                          R("t", 1, EARLIEST, 3)]

    def test_resolved_offsets_split(self):
        """[KafkaOffsetReaderSuite "SPARK-30656: getOffsetRangesFromResolvedOffsets"]: p0 0->100
        and p1 0->3 with minPartitions=4 plan p0 [0,33), [33,66), [66,100) and p1 [0,3)."""
        assert split_ranges([R("t", 0, 0, 100), R("t", 1, 0, 3)], min_partitions=4) == [
            R("t", 0, 0, 33), R("t", 0, 33, 66), R("t", 0, 66, 100), R("t", 1, 0, 3)]

    def test_unresolved_ranges_without_splitting_come_back_unchanged(self):
        """[KafkaOffsetReaderSuite "SPARK-30656: getOffsetRangesFromUnresolvedOffsets - using
        special offsets"] (the no-split branch): without a reason to split, unresolved ranges are
        returned as they are (no bounds needed, empty ones kept); with a reason to split but no
        bounds for a sentinel, the call fails instead of guessing sizes."""
        ranges = [R("t", 0, EARLIEST, LATEST), R("t", 1, 5, 5)]
        assert split_ranges(ranges) == ranges
        assert split_ranges(ranges, min_partitions=2) == ranges
        # Spark sizes unresolved ranges on the raw values: [-2,-1) has "size" 1, never above max
        assert split_ranges(ranges, max_records_per_partition=1) == ranges
        with pytest.raises(ValueError, match="t-0"):
            split_ranges(ranges, min_partitions=3)
        # a partition whose resolved range is empty disappears once splitting happens
        assert split_ranges(ranges, min_partitions=3, bounds={("t", 0): (0, 2)}) == [
            R("t", 0, EARLIEST, 1), R("t", 0, 1, LATEST)]
