import static java.util.Map.entry;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java Admin client against the broker: topics (create, describe, delete), configs
 * (describe, incremental alter), partitions, DescribeCluster, listOffsets, deleteRecords,
 * describeLogDirs, consumer group listing and offsets. Arguments: bootstrap, a prefix for
 * the topic and group names this run creates.
 */
public final class AdminScenario {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String configured = prefix + "-configured";
        String growing = prefix + "-growing";
        String group = prefix + "-group";
        try (Admin admin = Admin.create(Checks.props(bootstrap))) {
            createTopics(admin, configured, growing);
            describeTopics(admin, configured);
            configs(admin, configured);
            partitions(admin, growing);
            cluster(admin);
            offsetsAndRecords(admin, bootstrap, growing);
            groups(admin, bootstrap, configured, group);
            deleteTopics(admin, configured, growing);
        }
    }

    private static void createTopics(Admin admin, String configured, String growing) throws Exception {
        NewTopic withConfigs = new NewTopic(configured, 3, (short) 1)
            .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
        admin.createTopics(List.of(withConfigs, new NewTopic(growing, 1, (short) 1))).all().get();
        Checks.failsWith(TopicExistsException.class,
            () -> admin.createTopics(List.of(new NewTopic(growing, 1, (short) 1))).all().get(),
            "creating an existing topic");
        Set<String> names = admin.listTopics().names().get();
        Checks.check(names.containsAll(List.of(configured, growing)), "listTopics shows both: " + names);
        Checks.passed("create-topics");
    }

    private static void describeTopics(Admin admin, String topic) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Checks.equal(3, description.partitions().size(), "partitions of " + topic);
        Checks.check(!description.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"), "a topic id");
        for (TopicPartitionInfo p : description.partitions()) {
            Checks.check(p.leader() != null && !p.leader().isEmpty(), "a leader for partition " + p.partition());
            Checks.equal(List.of(p.leader()), p.replicas(), "replicas of partition " + p.partition());
            Checks.equal(List.of(p.leader()), p.isr(), "isr of partition " + p.partition());
        }
        Checks.failsWith(UnknownTopicOrPartitionException.class,
            () -> admin.describeTopics(List.of(topic + "-missing")).allTopicNames().get(),
            "describing a missing topic");
        Checks.passed("describe-topics");
    }

    private static ConfigEntry topicConfig(Admin admin, String topic, String name) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        ConfigEntry entry = config.get(name);
        Checks.check(entry != null, "config " + name + " of " + topic + " described");
        return entry;
    }

    private static void configs(Admin admin, String topic) throws Exception {
        ConfigEntry retention = topicConfig(admin, topic, "retention.ms");
        Checks.equal("3600000", retention.value(), "retention.ms as created");
        Checks.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
        ConfigEntry segment = topicConfig(admin, topic, "segment.bytes");
        Checks.equal("1073741824", segment.value(), "segment.bytes default");
        Checks.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, segment.source(), "segment.bytes source");

        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(resource, List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)));
        admin.incrementalAlterConfigs(ops).all().get();
        Checks.equal("7200000", topicConfig(admin, topic, "retention.ms").value(), "retention.ms altered");
        Checks.equal("2000000", topicConfig(admin, topic, "max.message.bytes").value(), "max.message.bytes set");
        ConfigEntry cleanup = topicConfig(admin, topic, "cleanup.policy");
        Checks.equal("delete", cleanup.value(), "cleanup.policy back to its default");
        Checks.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, cleanup.source(), "cleanup.policy source");

        Node broker = admin.describeCluster().nodes().get().iterator().next();
        ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, broker.idString());
        Config brokerConfig = admin.describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
        Checks.equal("1048588", brokerConfig.get("message.max.bytes").value(), "broker message.max.bytes");
        Checks.passed("configs");
    }

    private static int partitionCount(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
    }

    private static void partitions(Admin admin, String topic) throws Exception {
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
        Checks.waitUntil(() -> partitionCount(admin, topic) == 3, 15_000, topic + " with 3 partitions");
        Checks.failsWith(InvalidPartitionsException.class,
            () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get(),
            "shrinking a topic");
        Checks.passed("create-partitions");
    }

    private static void cluster(Admin admin) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        Collection<Node> nodes = cluster.nodes().get();
        Checks.check(!nodes.isEmpty(), "brokers described");
        Node controller = cluster.controller().get();
        Checks.check(controller != null && !controller.isEmpty(), "a controller");
        Checks.check(nodes.contains(controller), "the controller " + controller + " among " + nodes);
        String clusterId = cluster.clusterId().get();
        Checks.check(clusterId != null && !clusterId.isEmpty(), "a cluster id");
        Checks.passed("describe-cluster");
    }

    private static void offsetsAndRecords(Admin admin, String bootstrap, String topic) throws Exception {
        TopicPartition partition = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Checks.props(bootstrap),
                new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < 10; i++) {
                // Timestamps rise, except record 7, the newest.
                long timestamp = i == 7 ? base + 1_000 : base + i;
                producer.send(new ProducerRecord<>(topic, 0, timestamp, null, new byte[] {(byte) i}));
            }
            producer.flush();
        }
        Checks.equal(0L, listOffset(admin, partition, OffsetSpec.earliest()).offset(), "earliest");
        Checks.equal(10L, listOffset(admin, partition, OffsetSpec.latest()).offset(), "latest");
        Checks.equal(4L, listOffset(admin, partition, OffsetSpec.forTimestamp(base + 4)).offset(), "by timestamp");
        ListOffsetsResultInfo newest = listOffset(admin, partition, OffsetSpec.maxTimestamp());
        Checks.equal(7L, newest.offset(), "offset of the max timestamp");
        Checks.equal(base + 1_000, newest.timestamp(), "max timestamp");
        Checks.equal(-1L, listOffset(admin, partition, OffsetSpec.forTimestamp(base + 5_000)).offset(),
            "no offset after the newest timestamp");

        long low = admin.deleteRecords(Map.of(partition, RecordsToDelete.beforeOffset(3)))
            .lowWatermarks().get(partition).get().lowWatermark();
        Checks.equal(3L, low, "low watermark after deleteRecords");
        Checks.equal(3L, listOffset(admin, partition, OffsetSpec.earliest()).offset(), "earliest after deleteRecords");

        int broker = admin.describeCluster().nodes().get().iterator().next().id();
        Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get();
        boolean found = dirs.get(broker).values().stream()
            .anyMatch(d -> d.error() == null && d.replicaInfos().containsKey(partition));
        Checks.check(found, "describeLogDirs lists " + partition);
        Checks.passed("offsets-and-records");
    }

    private static ListOffsetsResultInfo listOffset(Admin admin, TopicPartition partition, OffsetSpec spec)
            throws Exception {
        return admin.listOffsets(Map.of(partition, spec)).partitionResult(partition).get();
    }

    private static void groups(Admin admin, String bootstrap, String topic, String group) throws Exception {
        TopicPartition first = new TopicPartition(topic, 0);
        TopicPartition second = new TopicPartition(topic, 1);
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.ofEntries(
            entry(first, new OffsetAndMetadata(5, "first")), entry(second, new OffsetAndMetadata(0, "")));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                Checks.props(bootstrap, "group.id", group, "enable.auto.commit", "false"),
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.commitSync(offsets);
        }
        Checks.waitUntil(() -> admin.listConsumerGroups().all().get().stream()
            .map(ConsumerGroupListing::groupId).anyMatch(group::equals), 15_000, group + " listed");
        ConsumerGroupListing listing = admin.listConsumerGroups().all().get().stream()
            .filter(g -> g.groupId().equals(group)).findFirst().orElseThrow();
        Checks.equal(java.util.Optional.of(ConsumerGroupState.EMPTY), listing.state(), "listed state");
        Checks.equal(offsets, admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(),
            "committed offsets");
        ConsumerGroupDescription description =
            admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        Checks.equal(ConsumerGroupState.EMPTY, description.state(), "described state");
        Checks.check(description.members().isEmpty(), "no members");
        admin.alterConsumerGroupOffsets(group, Map.of(second, new OffsetAndMetadata(2, "altered"))).all().get();
        Checks.equal(new OffsetAndMetadata(2, "altered"),
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(second), "altered offset");
        admin.deleteConsumerGroupOffsets(group, Set.of(second)).all().get();
        Checks.equal(Map.of(first, offsets.get(first)),
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(), "offsets after a delete");
        admin.deleteConsumerGroups(List.of(group)).all().get();
        Checks.failsWith(GroupIdNotFoundException.class,
            () -> admin.deleteConsumerGroups(List.of(group)).all().get(), "deleting a deleted group");
        Checks.passed("consumer-groups");
    }

    private static void deleteTopics(Admin admin, String... topics) throws Exception {
        admin.deleteTopics(List.of(topics)).all().get();
        Checks.waitUntil(() -> {
            Set<String> names = admin.listTopics().names().get();
            return List.of(topics).stream().noneMatch(names::contains);
        }, 15_000, "deleted topics gone from listTopics");
        Checks.failsWith(UnknownTopicOrPartitionException.class,
            () -> admin.deleteTopics(List.of(topics[0])).all().get(), "deleting a deleted topic");
        Checks.passed("delete-topics");
    }
}
