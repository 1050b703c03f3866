// Runs Kafka's own RemoteLogMetadataSerde and RemoteLogMetadataTopicPartitioner for
// tests/remote/test_metadata_serde_interop.py (compiled there with javac into a temp folder).
//   java SerdeProbe decode <file>   one hex value a line -> one canonical line a record
//   java SerdeProbe encode <file>   one canonical line a record -> one hex value a line
//   java SerdeProbe partition <file> "PART<TAB>topicId<TAB>topic<TAB>partition<TAB>count" -> partition
// Canonical lines are tab-separated: SEG, UPD, DEL and SNAP records, as the Python test writes them.

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogMetadataTopicPartitioner;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogSegmentMetadataSnapshot;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

public class SerdeProbe {
    static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
        List<String> lines = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        for (String line : lines) {
            if (line.isEmpty()) continue;
            switch (args[0]) {
                case "decode":
                    out.append(canonical(serde.deserialize(HEX.parseHex(line)))).append('\n');
                    break;
                case "encode":
                    out.append(HEX.formatHex(serde.serialize(parse(line.split("\t", -1))))).append('\n');
                    break;
                case "partition": {
                    String[] f = line.split("\t", -1);
                    TopicIdPartition tip = new TopicIdPartition(Uuid.fromString(f[1]),
                            new TopicPartition(f[2], Integer.parseInt(f[3])));
                    out.append(new RemoteLogMetadataTopicPartitioner(Integer.parseInt(f[4])).metadataPartition(tip))
                            .append('\n');
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        }
        System.out.print(out);
    }

    static String epochs(Map<Integer, Long> m) {
        List<String> parts = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : m.entrySet()) parts.add(e.getKey() + ":" + e.getValue());
        return String.join(",", parts);
    }

    static TreeMap<Integer, Long> parseEpochs(String s) {
        TreeMap<Integer, Long> m = new TreeMap<>();
        for (String p : s.split(",")) {
            String[] kv = p.split(":");
            m.put(Integer.parseInt(kv[0]), Long.parseLong(kv[1]));
        }
        return m;
    }

    static String custom(Optional<RemoteLogSegmentMetadata.CustomMetadata> c) {
        return c.map(x -> "x" + HEX.formatHex(x.value())).orElse("-");
    }

    static Optional<RemoteLogSegmentMetadata.CustomMetadata> parseCustom(String s) {
        return s.equals("-") ? Optional.empty()
                : Optional.of(new RemoteLogSegmentMetadata.CustomMetadata(HEX.parseHex(s.substring(1))));
    }

    static String tip(TopicIdPartition t) {
        return t.topicId() + "\t" + t.topic() + "\t" + t.partition();
    }

    static TopicIdPartition parseTip(String[] f, int i) {
        return new TopicIdPartition(Uuid.fromString(f[i]), new TopicPartition(f[i + 1], Integer.parseInt(f[i + 2])));
    }

    static String canonical(RemoteLogMetadata md) {
        if (md instanceof RemoteLogSegmentMetadata m) {
            return String.join("\t", "SEG", tip(m.topicIdPartition()), m.remoteLogSegmentId().id().toString(),
                    "" + m.startOffset(), "" + m.endOffset(), "" + m.maxTimestampMs(), "" + m.brokerId(),
                    "" + m.eventTimestampMs(), "" + m.segmentSizeInBytes(), epochs(m.segmentLeaderEpochs()),
                    custom(m.customMetadata()), "" + m.state().id(), "" + m.isTxnIdxEmpty());
        } else if (md instanceof RemoteLogSegmentMetadataUpdate u) {
            return String.join("\t", "UPD", tip(u.topicIdPartition()), u.remoteLogSegmentId().id().toString(),
                    "" + u.eventTimestampMs(), custom(u.customMetadata()), "" + u.state().id(), "" + u.brokerId());
        } else if (md instanceof RemotePartitionDeleteMetadata d) {
            return String.join("\t", "DEL", tip(d.topicIdPartition()), "" + d.state().id(),
                    "" + d.eventTimestampMs(), "" + d.brokerId());
        } else if (md instanceof RemoteLogSegmentMetadataSnapshot s) {
            return String.join("\t", "SNAP", s.segmentId().toString(), "" + s.startOffset(), "" + s.endOffset(),
                    "" + s.maxTimestampMs(), "" + s.brokerId(), "" + s.eventTimestampMs(),
                    "" + s.segmentSizeInBytes(), epochs(s.segmentLeaderEpochs()), custom(s.customMetadata()),
                    "" + s.state().id(), "" + s.isTxnIdxEmpty());
        }
        throw new IllegalArgumentException("unexpected " + md);
    }

    static RemoteLogMetadata parse(String[] f) {
        switch (f[0]) {
            case "SEG": {
                RemoteLogSegmentId id = new RemoteLogSegmentId(parseTip(f, 1), Uuid.fromString(f[4]));
                return new RemoteLogSegmentMetadata(id, Long.parseLong(f[5]), Long.parseLong(f[6]),
                        Long.parseLong(f[7]), Integer.parseInt(f[8]), Long.parseLong(f[9]), Integer.parseInt(f[10]),
                        parseCustom(f[12]), RemoteLogSegmentState.forId(Byte.parseByte(f[13])), parseEpochs(f[11]),
                        Boolean.parseBoolean(f[14]));
            }
            case "UPD": {
                RemoteLogSegmentId id = new RemoteLogSegmentId(parseTip(f, 1), Uuid.fromString(f[4]));
                return new RemoteLogSegmentMetadataUpdate(id, Long.parseLong(f[5]), parseCustom(f[6]),
                        RemoteLogSegmentState.forId(Byte.parseByte(f[7])), Integer.parseInt(f[8]));
            }
            case "DEL":
                return new RemotePartitionDeleteMetadata(parseTip(f, 1),
                        RemotePartitionDeleteState.forId(Byte.parseByte(f[4])), Long.parseLong(f[5]),
                        Integer.parseInt(f[6]));
            case "SNAP":
                return new RemoteLogSegmentMetadataSnapshot(Uuid.fromString(f[1]), Long.parseLong(f[2]),
                        Long.parseLong(f[3]), Long.parseLong(f[4]), Integer.parseInt(f[5]), Long.parseLong(f[6]),
                        Integer.parseInt(f[7]), parseCustom(f[9]), RemoteLogSegmentState.forId(Byte.parseByte(f[10])),
                        parseEpochs(f[8]), Boolean.parseBoolean(f[11]));
            default:
                throw new IllegalArgumentException("unknown record kind " + f[0]);
        }
    }
}
