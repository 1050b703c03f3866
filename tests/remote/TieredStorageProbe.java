// Runs Kafka's own LocalTieredStorage (kafka-storage test-fixtures jar) over a folder for
// tests/remote/test_remote_storage_manager.py (compiled there with javac into a temp folder).
// The segment's metadata comes as a RemoteLogMetadataSerde value in hex (from kafkalog's serde).
//   java TieredStorageProbe fetch <dir> <metadata hex> <out dir>
//       the .log from position 0 into <out>/SEGMENT, every index type into <out>/<TYPE>
//       (<out>/<TYPE>.missing when Kafka raises RemoteResourceNotFoundException)
//   java TieredStorageProbe copy <dir> <metadata hex> <log> <index> <timeindex> <txnindex or -> <snapshot> <epochs>
//   java TieredStorageProbe traverse <dir>     prints every segment id found, one a line

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.LocalTieredStorage;
import org.apache.kafka.server.log.remote.storage.LocalTieredStorageTraverser;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentFileset;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;

public class TieredStorageProbe {
    public static void main(String[] args) throws Exception {
        LocalTieredStorage storage = new LocalTieredStorage();
        Map<String, Object> configs = new HashMap<>();
        configs.put("dir", args[1]);
        configs.put("node.id", 1);
        storage.configure(configs);
        switch (args[0]) {
            case "fetch": {
                RemoteLogSegmentMetadata md = metadata(args[2]);
                Path out = Paths.get(args[3]);
                try (InputStream in = storage.fetchLogSegment(md, 0)) {
                    Files.write(out.resolve("SEGMENT"), in.readAllBytes());
                }
                for (IndexType type : IndexType.values()) {
                    try (InputStream in = storage.fetchIndex(md, type)) {
                        Files.write(out.resolve(type.name()), in.readAllBytes());
                    } catch (RemoteResourceNotFoundException e) {
                        Files.write(out.resolve(type.name() + ".missing"), e.getMessage().getBytes());
                    }
                }
                break;
            }
            case "copy": {
                RemoteLogSegmentMetadata md = metadata(args[2]);
                LogSegmentData data = new LogSegmentData(Paths.get(args[3]), Paths.get(args[4]), Paths.get(args[5]),
                        args[6].equals("-") ? Optional.empty() : Optional.of(Paths.get(args[6])), Paths.get(args[7]),
                        ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[8]))));
                storage.copyLogSegmentData(md, data);
                break;
            }
            case "traverse":
                storage.traverse(new LocalTieredStorageTraverser() {
                    public void visitTopicIdPartition(TopicIdPartition tip) {
                        System.out.println("partition " + tip.topicId() + " " + tip.topic() + " " + tip.partition());
                    }

                    public void visitSegment(RemoteLogSegmentFileset fileset) {
                        System.out.println("segment " + fileset.getRemoteLogSegmentId().id());
                    }
                });
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static RemoteLogSegmentMetadata metadata(String hex) {
        return (RemoteLogSegmentMetadata) new RemoteLogMetadataSerde().deserialize(HexFormat.of().parseHex(hex));
    }
}
