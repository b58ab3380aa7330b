import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's transactions: a transactional producer that commits some transactions and
 * aborts others, read back with read_committed and read_uncommitted; offsets sent to a
 * transaction (visible to the group on commit, not on abort); and a producer fenced by a newer
 * one with the same transactional.id. Arguments: bootstrap, topic prefix. Topics: PREFIX-out,
 * PREFIX-in, PREFIX-fence (one partition each).
 */
public final class TransactionScenario {
    private static final int PER_TXN = 10;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        try (Admin admin = Admin.create(Checks.props(bootstrap))) {
            admin.createTopics(List.of(
                new NewTopic(prefix + "-out", 1, (short) 1),
                new NewTopic(prefix + "-in", 1, (short) 1),
                new NewTopic(prefix + "-fence", 1, (short) 1))).all().get();
        }
        commitAndAbort(bootstrap, prefix + "-out", prefix + "-tx");
        offsetsInTransactions(bootstrap, prefix + "-in", prefix + "-out", prefix + "-group", prefix + "-tx");
        fencing(bootstrap, prefix + "-fence", prefix + "-fence-tx");
    }

    static KafkaProducer<byte[], byte[]> transactional(String bootstrap, String transactionalId) {
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(
            Checks.props(bootstrap, "transactional.id", transactionalId),
            new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        return producer;
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** The values of partition 0 of `topic` at `isolation`, read until the consumer is at its end. */
    static List<String> readAll(String bootstrap, String topic, String isolation) throws Exception {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                Checks.props(bootstrap, "isolation.level", isolation),
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            Checks.waitUntil(() -> {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(new String(record.value(), StandardCharsets.UTF_8));
                }
                return consumer.position(partition) >= end;
            }, 30_000, "the end of " + topic + " (" + end + ") at " + isolation);
        }
        return values;
    }

    private static void commitAndAbort(String bootstrap, String topic, String transactionalId) throws Exception {
        List<String> committed = new ArrayList<>();
        List<String> all = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = transactional(bootstrap, transactionalId)) {
            for (int n = 0; n < 4; n++) {
                producer.beginTransaction();
                List<String> values = new ArrayList<>();
                for (int i = 0; i < PER_TXN; i++) {
                    values.add(n + "-" + i);
                    producer.send(new ProducerRecord<>(topic, bytes(n + "-" + i)));
                }
                all.addAll(values);
                if (n % 2 == 1) {
                    // Flushed first, so the aborted records are in the log for read_uncommitted.
                    producer.flush();
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                    committed.addAll(values);
                }
            }
        }
        Checks.equal(committed, readAll(bootstrap, topic, "read_committed"), "read_committed values");
        Checks.equal(all, readAll(bootstrap, topic, "read_uncommitted"), "read_uncommitted values");
        Checks.passed("commit-and-abort");
    }

    private static void offsetsInTransactions(
            String bootstrap, String input, String output, String group, String transactionalId) throws Exception {
        TopicPartition in = new TopicPartition(input, 0);
        try (KafkaProducer<byte[], byte[]> plain = new KafkaProducer<>(Checks.props(bootstrap),
                new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < 2 * PER_TXN; i++) {
                plain.send(new ProducerRecord<>(input, bytes("in-" + i)));
            }
        }
        try (KafkaProducer<byte[], byte[]> producer = transactional(bootstrap, transactionalId);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                 Checks.props(bootstrap, "group.id", group, "enable.auto.commit", "false",
                     "isolation.level", "read_committed", "auto.offset.reset", "earliest"),
                 new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(input));
            List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
            Checks.waitUntil(() -> {
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
                return records.size() >= 2 * PER_TXN;
            }, 30_000, "the input records");
            // First half committed with its offset, second half aborted with its offset.
            for (int half = 0; half < 2; half++) {
                producer.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> record : records.subList(half * PER_TXN, (half + 1) * PER_TXN)) {
                    producer.send(new ProducerRecord<>(output, record.value()));
                }
                long next = records.get((half + 1) * PER_TXN - 1).offset() + 1;
                producer.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(next)), consumer.groupMetadata());
                if (half == 0) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(Set.of(in));
            Checks.equal((long) PER_TXN, offsets.get(in).offset(), "the group's offset after commit then abort");
        }
        Checks.passed("offsets-in-transactions");
    }

    private static void fencing(String bootstrap, String topic, String transactionalId) throws Exception {
        KafkaProducer<byte[], byte[]> zombie = transactional(bootstrap, transactionalId);
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>(topic, bytes("zombie"))).get();
        try (KafkaProducer<byte[], byte[]> fresh = transactional(bootstrap, transactionalId)) {
            boolean fenced = false;
            // EndTxn with the old epoch: PRODUCER_FENCED. (A send would fail first, with the
            // abortable InvalidProducerEpochException of KIP-588, as against Kafka.)
            try {
                zombie.commitTransaction();
            } catch (ProducerFencedException e) {
                fenced = true;
            }
            Checks.check(fenced, "the older producer is fenced (ProducerFencedException)");
            zombie.close(Duration.ZERO);
            fresh.beginTransaction();
            fresh.send(new ProducerRecord<>(topic, bytes("fresh")));
            fresh.commitTransaction();
        }
        // The zombie's open transaction was aborted when the new producer initialized.
        Checks.equal(List.of("fresh"), readAll(bootstrap, topic, "read_committed"), "read_committed after fencing");
        Checks.passed("fencing");
    }
}
