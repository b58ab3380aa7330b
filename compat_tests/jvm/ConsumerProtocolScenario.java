import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * The consumer group protocol (KIP-848, group.protocol=consumer) with the Java client: one to
 * four members join a topic of PARTITIONS partitions and then leave again while a producer
 * writes. Arguments: bootstrap, topic (already created with PARTITIONS partitions), group (its
 * heartbeat interval already set by the caller).
 *
 * <p>Checks: after each change the live members own every partition in equal shares; no
 * partition is ever assigned to a member while another one owns it (a revocation callback
 * runs before the client acknowledges it to the broker, so the ledger sees it first); a member
 * that keeps a partition through a change never had it revoked during it; every record written
 * is consumed; the committed offsets end at the log end offsets. Prints one "figures" line.
 */
public final class ConsumerProtocolScenario {
    private static final int PARTITIONS = 12;
    private static final long SETTLE_MS = 90_000;

    /** Partition owners as the members' rebalance listeners report them. */
    static final class Ledger {
        final Map<TopicPartition, String> owners = new HashMap<>();
        final Map<String, List<TopicPartition>> revoked = new HashMap<>();
        final List<String> doubleOwned = new ArrayList<>();

        synchronized void assign(String member, Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                String owner = owners.get(tp);
                if (owner != null && !owner.equals(member)) {
                    doubleOwned.add(tp + " owned by " + owner + " given to " + member);
                }
                owners.put(tp, member);
            }
        }

        synchronized void revoke(String member, Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                owners.remove(tp, member);
                revoked.computeIfAbsent(member, m -> new ArrayList<>()).add(tp);
            }
        }

        synchronized Map<String, Set<TopicPartition>> owned() {
            Map<String, Set<TopicPartition>> found = new HashMap<>();
            owners.forEach((tp, m) -> found.computeIfAbsent(m, k -> new HashSet<>()).add(tp));
            return found;
        }

        synchronized Map<String, Integer> revocationCounts() {
            Map<String, Integer> counts = new HashMap<>();
            revoked.forEach((m, tps) -> counts.put(m, tps.size()));
            return counts;
        }

        synchronized List<TopicPartition> revokedSince(String member, int from) {
            List<TopicPartition> all = revoked.getOrDefault(member, List.of());
            return new ArrayList<>(all.subList(Math.min(from, all.size()), all.size()));
        }
    }

    /** One member: a KafkaConsumer polled, committed and closed on a thread of its own. */
    static final class Member implements ConsumerRebalanceListener {
        final String name;
        final Ledger ledger;
        final Set<String> consumed = ConcurrentHashMap.newKeySet();
        final AtomicLong reads = new AtomicLong();
        final AtomicBoolean stop = new AtomicBoolean();
        final List<Throwable> errors = new ArrayList<>();
        final Thread thread;

        Member(String name, String bootstrap, String group, String topic, Ledger ledger) {
            this.name = name;
            this.ledger = ledger;
            KafkaConsumer<byte[], byte[]> consumer = ConsumerScenario.consumer(bootstrap,
                "group.id", group, "group.protocol", "consumer", "client.id", name,
                "enable.auto.commit", "false");
            thread = new Thread(() -> run(consumer, topic), name);
            thread.start();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            ledger.assign(name, partitions);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            ledger.revoke(name, partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            ledger.revoke(name, partitions);
        }

        private void run(KafkaConsumer<byte[], byte[]> consumer, String topic) {
            try (consumer) {
                consumer.subscribe(List.of(topic), this);
                boolean uncommitted = false;
                while (!stop.get()) {
                    int count = 0;
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        consumed.add(r.partition() + "@" + r.offset());
                        count++;
                    }
                    reads.addAndGet(count);
                    if (count == 0 && !uncommitted) {
                        continue;
                    }
                    try {
                        consumer.commitSync();
                        uncommitted = false;
                    } catch (KafkaException e) {
                        // A commit racing a revocation is refused (stale member epoch): tried
                        // again after the next poll; the next owner reads those records again.
                        uncommitted = true;
                    }
                }
            } catch (Throwable e) {
                synchronized (errors) {
                    errors.add(e);
                }
            }
        }

        void close() throws InterruptedException {
            stop.set(true);
            thread.join(60_000);
            Checks.check(!thread.isAlive(), name + " closed within 60 s");
            synchronized (errors) {
                Checks.check(errors.isEmpty(), name + " failed: " + errors);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        Set<TopicPartition> all = new HashSet<>();
        for (int p = 0; p < PARTITIONS; p++) {
            all.add(new TopicPartition(topic, p));
        }
        Ledger ledger = new Ledger();
        AtomicBoolean producing = new AtomicBoolean(true);
        AtomicLong sent = new AtomicLong();
        Thread producerThread = new Thread(() -> produce(bootstrap, topic, producing, sent), "producer");
        producerThread.start();
        List<Member> live = new ArrayList<>();
        List<Member> everyone = new ArrayList<>();
        List<String> phases = new ArrayList<>();
        try {
            for (int n = 1; n <= 4; n++) {
                Map<String, Set<TopicPartition>> before = ledger.owned();
                Map<String, Integer> revokedBefore = ledger.revocationCounts();
                long started = System.nanoTime();
                Member member = new Member("m" + n, bootstrap, group, topic, ledger);
                live.add(member);
                everyone.add(member);
                settle(ledger, live, all, "join of m" + n);
                phases.add(String.format("join m%d: %.2f s", n, (System.nanoTime() - started) / 1e9));
                onlyMovedRevoked(ledger, before, revokedBefore);
            }
            Checks.passed("join");
            for (int n = 4; n > 1; n--) {
                Map<String, Set<TopicPartition>> before = ledger.owned();
                Map<String, Integer> revokedBefore = ledger.revocationCounts();
                long started = System.nanoTime();
                live.remove(live.size() - 1).close();
                settle(ledger, live, all, "leave of m" + n);
                phases.add(String.format("leave m%d: %.2f s", n, (System.nanoTime() - started) / 1e9));
                onlyMovedRevoked(ledger, before, revokedBefore);
            }
            Checks.passed("leave");
        } finally {
            producing.set(false);
            producerThread.join(60_000);
        }
        Map<TopicPartition, Long> ends;
        try (KafkaConsumer<byte[], byte[]> probe = ConsumerScenario.consumer(bootstrap)) {
            ends = probe.endOffsets(all);
        }
        Checks.equal(sent.get(), ends.values().stream().mapToLong(Long::longValue).sum(), "records written");
        Member last = live.get(0);
        Checks.waitUntil(() -> {
            try (KafkaConsumer<byte[], byte[]> probe = ConsumerScenario.consumer(bootstrap, "group.id", group)) {
                Map<TopicPartition, Long> committed = new HashMap<>();
                probe.committed(all).forEach((tp, om) -> committed.put(tp, om == null ? -1L : om.offset()));
                return committed.equals(ends);
            }
        }, SETTLE_MS, "committed offsets at the log ends");
        last.close();
        Set<String> consumed = new HashSet<>();
        long reads = 0;
        for (Member m : everyone) {
            consumed.addAll(m.consumed);
            reads += m.reads.get();
        }
        for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
            for (long o = 0; o < end.getValue(); o++) {
                Checks.check(consumed.contains(end.getKey().partition() + "@" + o),
                    "record " + end.getKey() + "@" + o + " consumed");
            }
        }
        Checks.equal(List.of(), ledger.doubleOwned, "partitions owned by two members at once");
        Checks.passed("records");
        System.out.println("figures " + sent.get() + " records; " + String.join("; ", phases)
            + "; revocations per member " + new java.util.TreeMap<>(ledger.revocationCounts())
            + "; records read twice " + (reads - consumed.size()));
    }

    private static void produce(String bootstrap, String topic, AtomicBoolean producing, AtomicLong sent) {
        try (KafkaProducer<byte[], byte[]> producer = ProducerScenario.producer(bootstrap)) {
            while (producing.get()) {
                for (int p = 0; p < PARTITIONS; p++) {
                    long n = sent.getAndIncrement();
                    producer.send(new ProducerRecord<>(topic, p, null, ("v" + n).getBytes(StandardCharsets.UTF_8)));
                }
                Thread.sleep(10);
            }
            producer.flush();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Wait until the live members, and only they, own every partition in equal shares. */
    private static void settle(Ledger ledger, List<Member> live, Set<TopicPartition> all, String what)
            throws Exception {
        Set<String> names = new HashSet<>();
        live.forEach(m -> names.add(m.name));
        int share = all.size() / live.size();
        Checks.waitUntil(() -> {
            Map<String, Set<TopicPartition>> owned = ledger.owned();
            Set<TopicPartition> union = new HashSet<>();
            owned.values().forEach(union::addAll);
            return owned.keySet().equals(names) && union.equals(all)
                && owned.values().stream().allMatch(s -> s.size() == share);
        }, SETTLE_MS, "the partitions shared evenly after the " + what);
    }

    /** What a member kept through a change was never revoked during it. */
    private static void onlyMovedRevoked(
            Ledger ledger, Map<String, Set<TopicPartition>> before, Map<String, Integer> revokedBefore) {
        Map<String, Set<TopicPartition>> after = ledger.owned();
        before.forEach((member, ownedBefore) -> {
            Set<TopicPartition> kept = new HashSet<>(ownedBefore);
            kept.retainAll(after.getOrDefault(member, Set.of()));
            kept.retainAll(ledger.revokedSince(member, revokedBefore.getOrDefault(member, 0)));
            Checks.equal(Set.of(), kept, member + "'s kept partitions revoked during the change");
        });
    }
}
