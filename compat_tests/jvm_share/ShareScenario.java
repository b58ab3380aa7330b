import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a share group (KIP-932) with Kafka's KafkaShareConsumer: explicit
 * acknowledgement, small acquisitions (share.acquire.mode=record_limit), each record
 * accepted and committed with commitSync. Prints "acked OFFSET DELIVERY-COUNT" for every
 * record whose acknowledgement the broker stored, and exits once IDLE_MS pass without a
 * record after the first one (or after 120 s).
 *
 * Arguments: BOOTSTRAP GROUP TOPIC MAX_POLL_RECORDS IDLE_MS
 */
public final class ShareScenario {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("share.acquire.mode", "record_limit");
        props.put("max.poll.records", args[3]);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        long idleMs = Long.parseLong(args[4]);
        long start = System.currentTimeMillis();
        long last = -1;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            while (System.currentTimeMillis() - start < 120_000) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    if (last >= 0 && System.currentTimeMillis() - last > idleMs) {
                        break;
                    }
                    continue;
                }
                last = System.currentTimeMillis();
                List<ConsumerRecord<String, String>> polled = new ArrayList<>();
                for (ConsumerRecord<String, String> record : records) {
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    polled.add(record);
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
                for (ConsumerRecord<String, String> record : polled) {
                    boolean stored = results.entrySet().stream().anyMatch(e ->
                        e.getKey().topicPartition().partition() == record.partition()
                            && e.getValue().isEmpty());
                    if (stored) {
                        System.out.println("acked " + record.offset() + " "
                            + record.deliveryCount().orElse((short) -1));
                    }
                }
                // Some work per poll, so the other members' fetches get their share.
                Thread.sleep(20);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        System.out.flush();
    }
}
