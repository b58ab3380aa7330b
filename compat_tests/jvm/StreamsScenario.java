import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A stateless Kafka Streams topology (filter, map, branch to two topics) with the given
 * processing guarantee: every input record that passes the filter must reach its output
 * topic (exactly once, read with read_committed, under exactly_once_v2), and the application's
 * group must commit the whole input. Arguments: bootstrap,
 * prefix, record count, processing.guarantee, state directory. Topics: PREFIX-in (2 partitions), PREFIX-even,
 * PREFIX-odd; application id PREFIX-app.
 */
public final class StreamsScenario {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int count = Integer.parseInt(args[2]);
        String guarantee = args[3];
        String stateDir = args[4];
        String input = prefix + "-in";
        String even = prefix + "-even";
        String odd = prefix + "-odd";
        String applicationId = prefix + "-app";
        try (Admin admin = Admin.create(Checks.props(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(input, 2, (short) 1), new NewTopic(even, 1, (short) 1),
                new NewTopic(odd, 1, (short) 1))).all().get();
        }
        Set<String> expectedEven = new HashSet<>();
        Set<String> expectedOdd = new HashSet<>();
        try (KafkaProducer<byte[], byte[]> producer = ProducerScenario.producer(bootstrap)) {
            for (int i = 0; i < count; i++) {
                boolean dropped = i % 10 == 3;
                String value = "v" + i + (dropped ? "-drop" : "");
                producer.send(new ProducerRecord<>(input, ("k" + i).getBytes(StandardCharsets.UTF_8),
                    value.getBytes(StandardCharsets.UTF_8)));
                if (!dropped) {
                    (i % 2 == 0 ? expectedEven : expectedOdd).add(value.toUpperCase() + "@k" + i);
                }
            }
            producer.flush();
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .filter((key, value) -> !value.endsWith("-drop"))
            .mapValues((key, value) -> value.toUpperCase() + "@" + key)
            .split()
            .branch((key, value) -> Integer.parseInt(key.substring(1)) % 2 == 0,
                Branched.withConsumer(s -> s.to(even, Produced.with(Serdes.String(), Serdes.String()))))
            .defaultBranch(Branched.withConsumer(s -> s.to(odd, Produced.with(Serdes.String(), Serdes.String()))));
        Properties config = Checks.props(bootstrap,
            StreamsConfig.APPLICATION_ID_CONFIG, applicationId,
            StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee,
            StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100",
            StreamsConfig.STATE_DIR_CONFIG, stateDir);
        try (KafkaStreams streams = new KafkaStreams(builder.build(), config)) {
            streams.start();
            Checks.waitUntil(() -> streams.state() == KafkaStreams.State.RUNNING, 60_000, "the application running");
            boolean exactlyOnce = guarantee.startsWith("exactly_once");
            for (Map.Entry<String, Set<String>> output : Map.of(even, expectedEven, odd, expectedOdd).entrySet()) {
                List<String> read = readUntil(bootstrap, output.getKey(), output.getValue(), exactlyOnce);
                Checks.equal(output.getValue(), new HashSet<>(read), "records in " + output.getKey());
                if (exactlyOnce) {
                    // Read committed: exactly one output per input, no duplicate.
                    Checks.equal(output.getValue().size(), read.size(), "records read from " + output.getKey());
                }
            }
            Checks.passed("every-input-reaches-its-output");
            List<TopicPartition> partitions = List.of(new TopicPartition(input, 0), new TopicPartition(input, 1));
            try (Admin admin = Admin.create(Checks.props(bootstrap));
                    KafkaConsumer<byte[], byte[]> probe = ConsumerScenario.consumer(bootstrap)) {
                Map<TopicPartition, Long> ends = probe.endOffsets(partitions);
                Checks.waitUntil(() -> {
                    Map<TopicPartition, OffsetAndMetadata> committed =
                        admin.listConsumerGroupOffsets(applicationId).partitionsToOffsetAndMetadata().get();
                    Map<TopicPartition, Long> offsets = new HashMap<>();
                    committed.forEach((tp, om) -> offsets.put(tp, om.offset()));
                    return offsets.equals(ends);
                }, 30_000, "the application committing the whole input " + ends);
            }
            Checks.passed("input-committed");
        }
    }

    /**
     * The "value@key" strings read from `topic` until all of `expected` arrived (or a timeout),
     * in order, duplicates included; with `readCommitted` only what committed transactions wrote.
     */
    private static List<String> readUntil(String bootstrap, String topic, Set<String> expected,
            boolean readCommitted) throws Exception {
        List<String> seen = new ArrayList<>();
        String isolation = readCommitted ? "read_committed" : "read_uncommitted";
        try (KafkaConsumer<byte[], byte[]> consumer =
                ConsumerScenario.consumer(bootstrap, "isolation.level", isolation)) {
            List<TopicPartition> partitions = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.currentTimeMillis() + 60_000;
            while (!new HashSet<>(seen).containsAll(expected) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    seen.add(new String(record.value(), StandardCharsets.UTF_8));
                }
            }
        }
        return seen;
    }
}
