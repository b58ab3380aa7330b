import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * One Java KafkaShareConsumer (kafka-clients 4.3) for the share-group compat tests and the
 * share benchmark, driven from Python (compat_tests/share_workers.py). Arguments are key=value.
 *
 * <pre>
 * ShareWorker configure bootstrap=B group=G NAME=VALUE...   set the group's configs (GROUP resource)
 * ShareWorker consume bootstrap=B group=G topic=T id=ID [ack=POLICY] [stop=FILE] [hold=true]
 *             [max-poll-records=N] [work-us=N] [quiet=true]
 * </pre>
 *
 * consume acknowledges explicitly (share.acknowledgement.mode=explicit) and prints, flushed:
 * "ready ID" after subscribing; "acquired ID PARTITION OFFSET DELIVERY_COUNT TIME_MS" for each
 * record a poll hands over (TIME_MS when the poll returned); "ack ID PARTITION OFFSET TYPE
 * TIME_MS" for each acknowledgement once commitSync answered it without error (TIME_MS when the
 * commit was sent, so before the broker acted on it); "failed ID PARTITION ERROR" for a
 * partition whose commit failed. quiet=true prints instead "acked ID COUNT TIME_MS" after each
 * commit that acknowledged more (for the benchmark). POLICY decides each record's type from its offset and delivery
 * count: accept (default), release (always), reject-every-N, release-every-N (released on its
 * first delivery, accepted on the next). hold=true prints the first non-empty poll's records
 * and then sleeps without acknowledging (to be SIGKILLed holding them). The worker ends,
 * closing the consumer, when the file `stop` exists.
 */
public final class ShareWorker {
    private ShareWorker() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        switch (argv[0]) {
            case "configure" -> configure(args);
            case "consume" -> consume(args);
            default -> throw new IllegalArgumentException("unknown command " + argv[0]);
        }
    }

    private static void configure(Map<String, String> args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args.remove("bootstrap"));
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, args.remove("group"));
        List<AlterConfigOp> ops = new ArrayList<>();
        args.forEach((name, value) ->
            ops.add(new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET)));
        try (Admin admin = Admin.create(props)) {
            admin.incrementalAlterConfigs(Map.of(group, ops)).all().get();
        }
        System.out.println("configured");
    }

    private static AcknowledgeType decide(String policy, long offset, short deliveryCount) {
        if (policy.equals("accept")) {
            return AcknowledgeType.ACCEPT;
        }
        if (policy.equals("release")) {
            return AcknowledgeType.RELEASE;
        }
        int every = Integer.parseInt(policy.substring(policy.lastIndexOf('-') + 1));
        if (offset % every != 0) {
            return AcknowledgeType.ACCEPT;
        }
        if (policy.startsWith("reject-every-")) {
            return AcknowledgeType.REJECT;
        }
        if (policy.startsWith("release-every-")) {
            return deliveryCount == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
        }
        throw new IllegalArgumentException("unknown ack policy " + policy);
    }

    private record Pending(int partition, long offset, AcknowledgeType type) {}

    private static void consume(Map<String, String> args) throws Exception {
        String id = args.get("id");
        String policy = args.getOrDefault("ack", "accept");
        boolean hold = Boolean.parseBoolean(args.getOrDefault("hold", "false"));
        boolean quiet = Boolean.parseBoolean(args.getOrDefault("quiet", "false"));
        long workMicros = Long.parseLong(args.getOrDefault("work-us", "0"));
        Path stop = Path.of(args.getOrDefault("stop", "/nonexistent/stop"));
        Properties props = new Properties();
        props.put("bootstrap.servers", args.get("bootstrap"));
        props.put("group.id", args.get("group"));
        props.put("client.id", id);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("max.poll.records", args.getOrDefault("max-poll-records", "500"));
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        StringBuilder out = new StringBuilder();
        long acked = 0;
        long lastReported = 0;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args.get("topic")));
            System.out.println("ready " + id);
            System.out.flush();
            while (!Files.exists(stop)) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                long polledAt = System.currentTimeMillis();
                List<Pending> pending = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    short count = record.deliveryCount().orElse((short) 0);
                    if (!quiet) {
                        out.append("acquired ").append(id).append(' ').append(record.partition())
                            .append(' ').append(record.offset()).append(' ').append(count)
                            .append(' ').append(polledAt).append('\n');
                    }
                    if (!hold) {
                        AcknowledgeType type = decide(policy, record.offset(), count);
                        consumer.acknowledge(record, type);
                        pending.add(new Pending(record.partition(), record.offset(), type));
                    }
                    if (workMicros > 0) {
                        Thread.sleep(workMicros / 1000, (int) (workMicros % 1000) * 1000);
                    }
                }
                if (hold && !records.isEmpty()) {
                    System.out.print(out);
                    System.out.println("holding " + id);
                    System.out.flush();
                    Thread.sleep(Long.MAX_VALUE);
                }
                if (!pending.isEmpty()) {
                    long sentAt = System.currentTimeMillis();
                    Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                    Map<Integer, String> failed = new HashMap<>();
                    result.forEach((tp, error) ->
                        error.ifPresent(e -> failed.put(tp.partition(), e.toString())));
                    for (Pending p : pending) {
                        if (failed.containsKey(p.partition())) {
                            continue;
                        }
                        acked++;
                        if (!quiet) {
                            out.append("ack ").append(id).append(' ').append(p.partition())
                                .append(' ').append(p.offset()).append(' ').append(p.type().name())
                                .append(' ').append(sentAt).append('\n');
                        }
                    }
                    failed.forEach((partition, error) ->
                        out.append("failed ").append(id).append(' ').append(partition)
                            .append(' ').append(error).append('\n'));
                }
                if (quiet && acked != lastReported) {
                    out.append("acked ").append(id).append(' ').append(acked).append(' ')
                        .append(System.currentTimeMillis()).append('\n');
                    lastReported = acked;
                }
                if (out.length() > 0) {
                    System.out.print(out);
                    System.out.flush();
                    out.setLength(0);
                }
            }
        }
        System.out.println("acked " + id + " " + acked + " " + System.currentTimeMillis());
        System.out.println("closed " + id);
    }
}
