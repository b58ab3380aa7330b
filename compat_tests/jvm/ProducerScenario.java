import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The idempotent Java producer with every codec, headers and CreateTimes, read back by a
 * consumer; then a record near the broker's message.max.bytes and one over it. Arguments:
 * bootstrap, topic prefix, then the record count per codec, the base timestamp, the sizes
 * of the near-limit and over-limit values. Topics: PREFIX-CODEC (one per codec), PREFIX-big.
 */
public final class ProducerScenario {
    private static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int count = Integer.parseInt(args[2]);
        long baseTimestamp = Long.parseLong(args[3]);
        int nearLimit = Integer.parseInt(args[4]);
        int overLimit = Integer.parseInt(args[5]);
        try (Admin admin = Admin.create(Checks.props(bootstrap))) {
            List<NewTopic> topics = new ArrayList<>();
            for (String codec : CODECS) {
                topics.add(new NewTopic(prefix + "-" + codec, 1, (short) 1));
            }
            topics.add(new NewTopic(prefix + "-big", 1, (short) 1));
            admin.createTopics(topics).all().get();
        }
        for (String codec : CODECS) {
            roundTrip(bootstrap, prefix + "-" + codec, codec, count, baseTimestamp);
            Checks.passed("codec-" + codec);
        }
        sizeLimits(bootstrap, prefix + "-big", nearLimit, overLimit);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Object... settings) {
        Object[] all = Arrays.copyOf(new Object[] {"enable.idempotence", "true", "acks", "all"}, 4 + settings.length);
        System.arraycopy(settings, 0, all, 4, settings.length);
        return new KafkaProducer<>(Checks.props(bootstrap, all), new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Every record of partition 0 of `topic`, read from the start by an assigned consumer. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic, int expected)
            throws Exception {
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(Checks.props(bootstrap),
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            Checks.waitUntil(() -> {
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
                return records.size() >= expected;
            }, 30_000, expected + " records from " + topic);
        }
        Checks.equal(expected, records.size(), "records read from " + topic);
        return records;
    }

    static byte[] compressibleValue(int i) {
        return ("value-%06d|".formatted(i)).repeat(17).getBytes(StandardCharsets.UTF_8);
    }

    private static void roundTrip(String bootstrap, String topic, String codec, int count, long baseTimestamp)
            throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, "compression.type", codec, "linger.ms", "20")) {
            for (int i = 0; i < count; i++) {
                List<Header> headers = List.of(
                    new RecordHeader("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                    new RecordHeader("empty", new byte[0]),
                    new RecordHeader("null", null));
                byte[] key = i % 10 == 0 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
                sent.add(producer.send(new ProducerRecord<>(topic, 0, baseTimestamp + i, key, compressibleValue(i), headers)));
            }
            producer.flush();
        }
        for (int i = 0; i < count; i++) {
            RecordMetadata metadata = sent.get(i).get();
            Checks.equal((long) i, metadata.offset(), "offset of record " + i);
            Checks.equal(baseTimestamp + i, metadata.timestamp(), "acknowledged timestamp of record " + i);
        }
        List<ConsumerRecord<byte[], byte[]>> records = readAll(bootstrap, topic, count);
        for (int i = 0; i < count; i++) {
            ConsumerRecord<byte[], byte[]> record = records.get(i);
            String where = topic + " record " + i;
            Checks.equal((long) i, record.offset(), "offset of " + where);
            Checks.equal(baseTimestamp + i, record.timestamp(), "timestamp of " + where);
            Checks.equal(TimestampType.CREATE_TIME, record.timestampType(), "timestamp type of " + where);
            byte[] key = i % 10 == 0 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
            Checks.equal(key, record.key(), "key of " + where);
            Checks.equal(compressibleValue(i), record.value(), "value of " + where);
            Header[] headers = record.headers().toArray();
            Checks.equal(3, headers.length, "header count of " + where);
            Checks.equal("idx", headers[0].key(), "first header key of " + where);
            Checks.equal(Integer.toString(i).getBytes(StandardCharsets.UTF_8), headers[0].value(),
                "first header value of " + where);
            Checks.equal(0, headers[1].value().length, "empty header of " + where);
            Checks.equal(null, headers[2].value(), "null header of " + where);
        }
    }

    private static void sizeLimits(String bootstrap, String topic, int nearLimit, int overLimit) throws Exception {
        byte[] near = new byte[nearLimit];
        Arrays.fill(near, (byte) 'n');
        byte[] after = "after".getBytes(StandardCharsets.UTF_8);
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, "max.request.size", "4000000")) {
            Checks.equal(0L, producer.send(new ProducerRecord<>(topic, near)).get().offset(), "near-limit offset");
            Checks.passed("near-limit-record-accepted");
            Checks.failsWith(RecordTooLargeException.class,
                () -> producer.send(new ProducerRecord<>(topic, new byte[overLimit])).get(),
                "a record over message.max.bytes");
            Checks.passed("over-limit-record-refused");
            Checks.equal(1L, producer.send(new ProducerRecord<>(topic, after)).get().offset(),
                "the producer carries on after a refused record");
        }
        List<ConsumerRecord<byte[], byte[]>> records = readAll(bootstrap, topic, 2);
        Checks.equal(near, records.get(0).value(), "near-limit value read back");
        Checks.equal(after, records.get(1).value(), "the record after the refused one");
        Checks.passed("producer-carries-on");
    }
}
