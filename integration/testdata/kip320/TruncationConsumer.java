// TruncationConsumer reads partition 0 of a topic from the start with
// Kafka's own Java consumer in assign mode (no group), with
// auto.offset.reset=none, and reports what KIP-320 tells it:
//
//   READ <next offset>           after each poll that returned records
//   TRUNCATED <divergent offset> <fetch offset>
//                                on LogTruncationException, then exits 0
//   OUT_OF_RANGE <fetch offset>  on any other OffsetOutOfRangeException (exit 2)
//   TIMEOUT                      when the deadline passes first (exit 3)
//
// Usage: TruncationConsumer BOOTSTRAP TOPIC SECONDS
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class TruncationConsumer {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("auto.offset.reset", "none");
        p.put("enable.auto.commit", "false");
        p.put("metadata.max.age.ms", "500");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(args[1], 0);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[2]) * 1000;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            long next = 0;
            while (System.currentTimeMillis() < deadline) {
                try {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<byte[], byte[]> r : rs) {
                        next = r.offset() + 1;
                    }
                    if (!rs.isEmpty()) {
                        System.out.println("READ " + next);
                        System.out.flush();
                    }
                } catch (LogTruncationException e) {
                    System.out.println("TRUNCATED " + e.divergentOffsets().get(tp).offset() + " " + e.offsetOutOfRangePartitions().get(tp));
                    System.out.flush();
                    System.exit(0);
                } catch (OffsetOutOfRangeException e) {
                    System.out.println("OUT_OF_RANGE " + e.offsetOutOfRangePartitions().get(tp));
                    System.out.flush();
                    System.exit(2);
                }
            }
        }
        System.out.println("TIMEOUT");
        System.exit(3);
    }
}
