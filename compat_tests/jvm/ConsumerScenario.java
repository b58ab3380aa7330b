import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Java consumers against the broker: a group with manual commits and one with automatic
 * commits, rebalances between two members (eager and cooperative), offsetsForTimes, seek. Arguments: bootstrap,
 * prefix, records per partition, base timestamp. One topic PREFIX with 4 partitions whose
 * record n of each partition has CreateTime base + 10 * n.
 */
public final class ConsumerScenario {
    private static final int PARTITIONS = 4;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int perPartition = Integer.parseInt(args[2]);
        long baseTimestamp = Long.parseLong(args[3]);
        try (Admin admin = Admin.create(Checks.props(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get();
        }
        try (KafkaProducer<byte[], byte[]> producer = ProducerScenario.producer(bootstrap)) {
            for (int p = 0; p < PARTITIONS; p++) {
                for (int n = 0; n < perPartition; n++) {
                    byte[] value = ("p" + p + "-" + n).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(topic, p, baseTimestamp + 10L * n, null, value));
                }
            }
            producer.flush();
        }
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(topic, p));
        }
        manualCommits(bootstrap, topic, partitions, perPartition);
        autoCommits(bootstrap, topic, partitions, perPartition);
        rebalance(bootstrap, topic, partitions, "range", RangeAssignor.class);
        rebalance(bootstrap, topic, partitions, "cooperative", CooperativeStickyAssignor.class);
        offsetsForTimes(bootstrap, partitions, perPartition, baseTimestamp);
        seek(bootstrap, partitions.get(1), perPartition);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Object... settings) {
        List<Object> all = new ArrayList<>(List.of("auto.offset.reset", "earliest"));
        all.addAll(List.of(settings));
        return new KafkaConsumer<>(Checks.props(bootstrap, all.toArray()),
            new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** Poll until `expected` records arrived; returns them. */
    static List<ConsumerRecord<byte[], byte[]>> pollFor(KafkaConsumer<byte[], byte[]> consumer, int expected)
            throws Exception {
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        Checks.waitUntil(() -> {
            consumer.poll(Duration.ofMillis(200)).forEach(records::add);
            return records.size() >= expected;
        }, 60_000, expected + " records");
        Checks.equal(expected, records.size(), "records polled");
        return records;
    }

    private static void manualCommits(String bootstrap, String topic, List<TopicPartition> partitions,
            int perPartition) throws Exception {
        String group = topic + "-manual";
        int half = perPartition / 2;
        Map<TopicPartition, OffsetAndMetadata> halfway = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> first = consumer(bootstrap, "group.id", group, "enable.auto.commit", "false")) {
            first.subscribe(List.of(topic));
            pollFor(first, PARTITIONS * perPartition);
            for (TopicPartition tp : partitions) {
                halfway.put(tp, new OffsetAndMetadata(half, "manual-" + tp.partition()));
            }
            first.commitSync(halfway);
            Checks.equal(halfway, first.committed(new HashSet<>(partitions)), "committed() after commitSync");
        }
        try (KafkaConsumer<byte[], byte[]> second = consumer(bootstrap, "group.id", group, "enable.auto.commit", "false")) {
            second.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> rest = pollFor(second, PARTITIONS * (perPartition - half));
            Map<Integer, Long> firstOffsets = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> record : rest) {
                firstOffsets.merge(record.partition(), record.offset(), Math::min);
            }
            for (TopicPartition tp : partitions) {
                Checks.equal((long) half, firstOffsets.get(tp.partition()), "resumed offset of " + tp);
            }
            second.commitSync();
            for (OffsetAndMetadata committed : second.committed(new HashSet<>(partitions)).values()) {
                Checks.equal((long) perPartition, committed.offset(), "commitSync() of the positions");
            }
        }
        Checks.passed("manual-commits");
    }

    private static void autoCommits(String bootstrap, String topic, List<TopicPartition> partitions,
            int perPartition) throws Exception {
        String group = topic + "-auto";
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, "group.id", group,
                "enable.auto.commit", "true", "auto.commit.interval.ms", "100")) {
            consumer.subscribe(List.of(topic));
            pollFor(consumer, PARTITIONS * perPartition);
            Checks.waitUntil(() -> {
                consumer.poll(Duration.ofMillis(100));
                return consumer.committed(new HashSet<>(partitions)).values().stream()
                    .allMatch(c -> c != null && c.offset() == perPartition);
            }, 30_000, "automatic commits of every position");
        }
        Checks.passed("auto-commits");
    }

    /** Records the assignment as the group gives and takes partitions. */
    private static final class Tracking implements ConsumerRebalanceListener {
        final Set<TopicPartition> owned = new HashSet<>();
        int revocations;

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            owned.removeAll(partitions);
            if (!partitions.isEmpty()) {
                revocations++;
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            owned.addAll(partitions);
        }
    }

    /** Two members share the topic, then one leaves; `assignor` is eager or cooperative (KIP-429). */
    private static void rebalance(String bootstrap, String topic, List<TopicPartition> partitions, String name,
            Class<?> assignor) throws Exception {
        String group = topic + "-rebalance-" + name;
        Tracking firstOwns = new Tracking();
        Tracking secondOwns = new Tracking();
        Object[] settings = {"group.id", group, "partition.assignment.strategy", assignor.getName()};
        try (KafkaConsumer<byte[], byte[]> first = consumer(bootstrap, settings)) {
            first.subscribe(List.of(topic), firstOwns);
            Checks.waitUntil(() -> {
                first.poll(Duration.ofMillis(100));
                return firstOwns.owned.size() == PARTITIONS;
            }, 60_000, "the only member owns every partition");
            try (KafkaConsumer<byte[], byte[]> second = consumer(bootstrap, settings)) {
                second.subscribe(List.of(topic), secondOwns);
                Checks.waitUntil(() -> {
                    first.poll(Duration.ofMillis(100));
                    second.poll(Duration.ofMillis(100));
                    return firstOwns.owned.size() == PARTITIONS / 2 && secondOwns.owned.size() == PARTITIONS / 2;
                }, 60_000, "two members splitting the partitions");
                Set<TopicPartition> union = new HashSet<>(firstOwns.owned);
                union.addAll(secondOwns.owned);
                Checks.equal(new HashSet<>(partitions), union, "the members own every partition between them");
                Checks.check(firstOwns.revocations > 0, "the first member gave partitions up");
            }
            Checks.waitUntil(() -> {
                first.poll(Duration.ofMillis(100));
                return firstOwns.owned.size() == PARTITIONS;
            }, 60_000, "the remaining member owning every partition after the other left");
        }
        Checks.passed("rebalance-" + name);
    }

    private static void offsetsForTimes(String bootstrap, List<TopicPartition> partitions, int perPartition,
            long baseTimestamp) throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap)) {
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : partitions) {
                query.put(tp, baseTimestamp + 35);
            }
            query.put(partitions.get(1), baseTimestamp + 10L * perPartition);
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query);
            for (TopicPartition tp : partitions) {
                if (tp.equals(partitions.get(1))) {
                    Checks.equal(null, found.get(tp), "no record at or after the last timestamp");
                } else {
                    OffsetAndTimestamp first = found.get(tp);
                    Checks.equal(4L, first.offset(), "first offset at or after base + 35 in " + tp);
                    Checks.equal(baseTimestamp + 40, first.timestamp(), "its timestamp in " + tp);
                }
            }
            for (Long offset : consumer.beginningOffsets(partitions).values()) {
                Checks.equal(0L, offset, "beginning offset");
            }
            for (Long offset : consumer.endOffsets(partitions).values()) {
                Checks.equal((long) perPartition, offset, "end offset");
            }
        }
        Checks.passed("offsets-for-times");
    }

    private static void seek(String bootstrap, TopicPartition partition, int perPartition) throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap)) {
            consumer.assign(List.of(partition));
            consumer.seek(partition, 7);
            List<ConsumerRecord<byte[], byte[]>> records = pollFor(consumer, perPartition - 7);
            Checks.equal(7L, records.get(0).offset(), "first offset after seek(7)");
            Checks.equal("p1-7", new String(records.get(0).value(), StandardCharsets.UTF_8), "value at offset 7");
            consumer.seekToEnd(List.of(partition));
            Checks.equal((long) perPartition, consumer.position(partition), "position after seekToEnd");
            consumer.seekToBeginning(List.of(partition));
            Checks.equal(0L, consumer.position(partition), "position after seekToBeginning");
            consumer.seek(partition, new OffsetAndMetadata(3));
            Checks.equal(3L, pollFor(consumer, perPartition - 3).get(0).offset(), "first offset after seek(3)");
        }
        Checks.passed("seek");
    }
}
