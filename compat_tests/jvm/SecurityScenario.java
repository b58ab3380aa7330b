import java.io.FileReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Admin, producer and group consumer over a secured listener. Arguments: a client
 * properties file (bootstrap.servers and the security settings, as a user writes them for
 * kafka-console-producer.sh --producer.config), the topic to create, the consumer group.
 */
public final class SecurityScenario {
    private static final int COUNT = 20;

    public static void main(String[] args) throws Exception {
        Properties base = new Properties();
        try (FileReader reader = new FileReader(args[0], StandardCharsets.UTF_8)) {
            base.load(reader);
        }
        String topic = args[1];
        String group = args[2];
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            Set<String> names = admin.listTopics().names().get();
            Checks.check(names.contains(topic), "listTopics shows " + topic);
        }
        Checks.passed("admin");
        Properties producerProps = (Properties) base.clone();
        producerProps.put("acks", "all");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < COUNT; i++) {
                producer.send(new ProducerRecord<>(topic, ("v" + i).getBytes(StandardCharsets.UTF_8))).get();
            }
        }
        Checks.passed("produce");
        Properties consumerProps = (Properties) base.clone();
        consumerProps.put("group.id", group);
        consumerProps.put("auto.offset.reset", "earliest");
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (values.size() < COUNT && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
            consumer.commitSync();
        }
        Checks.equal(COUNT, values.size(), "records consumed in the group");
        Checks.passed("consume");
    }
}
