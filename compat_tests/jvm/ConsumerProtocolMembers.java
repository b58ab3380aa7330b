import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * Consumer-protocol members (group.protocol=consumer) for a test that drives a group from
 * outside, such as a mixed group with classic members of another client. Arguments: bootstrap,
 * topic, group, number of members, stop file. Each member polls, commits after each batch and
 * prints, one line each: "A member partition" when a partition is assigned, "R member
 * partition" when revoked or lost, "C member partition offset" per record consumed. When the
 * stop file exists the members close (leaving the group) one after the other, and the program
 * prints "ok closed".
 */
public final class ConsumerProtocolMembers {
    private static final PrintStream OUT = System.out;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        Path stop = Path.of(args[4]);
        Thread[] threads = new Thread[count];
        Throwable[] failures = new Throwable[count];
        for (int i = 0; i < count; i++) {
            String name = "java" + i;
            int index = i;
            KafkaConsumer<byte[], byte[]> consumer = ConsumerScenario.consumer(bootstrap,
                "group.id", group, "group.protocol", "consumer", "client.id", name,
                "enable.auto.commit", "false");
            threads[i] = new Thread(() -> {
                try {
                    run(consumer, name, topic, stop);
                } catch (Throwable e) {
                    failures[index] = e;
                }
            }, name);
            threads[i].start();
        }
        for (int i = 0; i < count; i++) {
            threads[i].join();
            if (failures[i] != null) {
                throw new AssertionError("java" + i + " failed", failures[i]);
            }
        }
        Checks.passed("closed");
    }

    private static synchronized void print(String line) {
        OUT.println(line);
        OUT.flush();
    }

    private static void report(String kind, String name, Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            print(kind + " " + name + " " + tp.partition());
        }
    }

    private static void run(KafkaConsumer<byte[], byte[]> consumer, String name, String topic, Path stop) {
        try (consumer) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    report("A", name, partitions);
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    report("R", name, partitions);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    report("R", name, partitions);
                }
            });
            boolean uncommitted = false;
            while (!Files.exists(stop)) {
                StringBuilder consumed = new StringBuilder();
                int records = 0;
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    consumed.append("C ").append(name).append(' ').append(r.partition())
                        .append(' ').append(r.offset()).append('\n');
                    records++;
                }
                if (records > 0) {
                    print(consumed.substring(0, consumed.length() - 1));
                } else if (!uncommitted) {
                    continue;
                }
                try {
                    consumer.commitSync();
                    uncommitted = false;
                } catch (KafkaException e) {
                    // Refused while a rebalance moves partitions: tried again after the next
                    // poll; records the next owner reads again are consumed at least once.
                    uncommitted = true;
                }
            }
        }
    }
}
