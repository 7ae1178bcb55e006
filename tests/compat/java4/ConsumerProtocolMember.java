import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A Java kafka-clients 4.x consumer with group.protocol=consumer (KIP-848), driven by
 * tests/integration/test_consumer_protocol_java.py through tests/clientlib.py's Background:
 *
 *   ConsumerProtocolMember BOOTSTRAP TOPIC GROUP INSTANCE_ID|"" CLIENT_ID [REMOTE_ASSIGNOR|""]
 *
 * TOPIC starting with "^" is a regex subscription (SubscriptionPattern: the server resolves it
 * from SubscribedTopicRegex); otherwise one topic name. REMOTE_ASSIGNOR is group.remote.assignor
 * (the server-side assignor the member asks for). The session and heartbeat interval come from
 * the server, as the consumer protocol wants (setting them here is refused by the client).
 *
 * Runs until the line "close" (or the end of stdin), then closes cleanly: a dynamic member
 * leaves (epoch -1), a static one leaves for a while (epoch -2). Prints JSON lines as
 * KcoordClient's member does, with the consumer protocol's incremental callbacks:
 *   {"kind":"assigned","partitions":[...],"topics":[...],"incremental":true,"generation":EPOCH,"member_id":..}
 *   {"kind":"revoked"|"lost","partitions":[...],"topics":[...]}
 *   {"kind":"records","records":[[partition, offset, key, topic], ...]}   one poll batch
 *   {"kind":"committed","offsets":{"topic-partition"|"partition": offset},"epoch":EPOCH}
 *   {"kind":"commit_error",...}, {"kind":"error",...}, {"kind":"closed"}
 * It commits synchronously (commitSync: OffsetCommit with its member epoch) after every poll
 * batch and, in onPartitionsRevoked, for the partitions it gives up, so that nothing it
 * processed is redelivered to the next owner.
 */
public final class ConsumerProtocolMember {
    private static final Comparator<TopicPartition> ORDER =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private ConsumerProtocolMember() {}

    public static void main(String[] args) {
        if (args.length < 5) {
            System.err.println("usage: ConsumerProtocolMember BOOTSTRAP TOPIC GROUP INSTANCE_ID|\"\" CLIENT_ID "
                    + "[REMOTE_ASSIGNOR]");
            System.exit(2);
        }
        System.exit(run(args[0], args[1], args[2], args[3], args[4], args.length > 5 ? args[5] : ""));
    }

    static int run(String bootstrap, String topic, String group, String instanceId, String clientId,
                   String assignor) {
        Properties p = KcoordClient.common(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (!instanceId.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        if (!assignor.isEmpty()) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // a topic created for a regex shows up in the client's metadata within this
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        AtomicBoolean stop = new AtomicBoolean();
        Map<TopicPartition, Long> pending = new TreeMap<>(ORDER);
        KcoordClient.emit("started", "lib", "java4", "instance_id", instanceId,
                "pid", ProcessHandle.current().pid());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            Thread watcher = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("close")) {
                        // anything else is ignored
                    }
                } catch (Exception e) {
                    // the end of stdin
                }
                stop.set(true);
                consumer.wakeup();
            });
            watcher.setDaemon(true);
            watcher.start();
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    if (parts.isEmpty()) {
                        return;  // the consumer protocol calls it with nothing on some transitions
                    }
                    commit(consumer, pending, parts);
                    KcoordClient.emit("revoked", "partitions", KcoordClient.numbers(parts), "topics", topics(parts),
                            "tps", KcoordClient.names(parts));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    KcoordClient.emit("assigned", "partitions", KcoordClient.numbers(parts), "topics", topics(parts),
                            "tps", KcoordClient.names(parts), "incremental", true,
                            "generation", consumer.groupMetadata().generationId(),
                            "member_id", consumer.groupMetadata().memberId());
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    for (TopicPartition tp : parts) {
                        pending.remove(tp);
                    }
                    KcoordClient.emit("lost", "partitions", KcoordClient.numbers(parts), "topics", topics(parts),
                            "tps", KcoordClient.names(parts));
                }
            };
            if (topic.startsWith("^")) {
                consumer.subscribe(new SubscriptionPattern(topic), listener);
            } else {
                consumer.subscribe(List.of(topic), listener);
            }
            while (!stop.get()) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) {
                    continue;
                }
                List<Object> batch = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    batch.add(List.of(r.partition(), r.offset(), r.key() == null ? "" : r.key(), r.topic()));
                    pending.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                }
                KcoordClient.emit("records", "records", batch);
                commit(consumer, pending, null);
            }
            consumer.close(Duration.ofSeconds(10));
        } catch (Exception e) {
            KcoordClient.emit("error", "step", "member", "error", KcoordClient.errorName(e),
                    "message", KcoordClient.errorMessage(e));
            return 1;
        }
        KcoordClient.emit("closed");
        return 0;
    }

    /** commitSync of what was processed (of `only`, when given); the consumer sends its member epoch. */
    static void commit(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> pending,
                       Collection<TopicPartition> only) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        Map<String, Long> shown = new TreeMap<>();
        boolean oneTopic = pending.keySet().stream().map(TopicPartition::topic).distinct().count() <= 1;
        for (Map.Entry<TopicPartition, Long> e : pending.entrySet()) {
            if (only == null || only.contains(e.getKey())) {
                offsets.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
                TopicPartition tp = e.getKey();
                shown.put(oneTopic ? String.valueOf(tp.partition()) : tp.topic() + "-" + tp.partition(), e.getValue());
            }
        }
        if (offsets.isEmpty()) {
            return;
        }
        int epoch = consumer.groupMetadata().generationId();
        for (int attempt = 0; ; attempt++) {
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(20));
                break;
            } catch (WakeupException e) {
                // the stdin watcher's wakeup() (asking us to close) interrupted the commit: the
                // wakeup is consumed now, so commit again before closing
                if (attempt > 0) {
                    throw e;
                }
            } catch (Exception e) {
                KcoordClient.emit("commit_error", "error", KcoordClient.errorName(e),
                        "message", KcoordClient.errorMessage(e), "offsets", shown, "epoch", epoch);
                return;
            }
        }
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            Long current = pending.get(e.getKey());
            if (current != null && current == e.getValue().offset()) {
                pending.remove(e.getKey());
            }
        }
        KcoordClient.emit("committed", "offsets", shown, "epoch", epoch);
    }

    static List<String> topics(Collection<TopicPartition> parts) {
        TreeSet<String> out = new TreeSet<>();
        for (TopicPartition tp : parts) {
            out.add(tp.topic());
        }
        return new ArrayList<>(out);
    }
}
