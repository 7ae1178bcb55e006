import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java kafka-clients 4.x on a replicated partition (partition 0 of TOPIC), driven by
 * tests/integration/test_replication_java.py through tests/clientlib.py's Background:
 *
 *   ReplicatedClient produce BOOTSTRAP TOPIC   an idempotent acks=all producer sending "0", "1", ...
 *       until the line "close", then flush and close; every acknowledgement and error printed:
 *       {"kind":"acked","acked":[[offset,value],...]}  {"kind":"error","value":V,"error":"Class: message"}
 *   ReplicatedClient consume BOOTSTRAP TOPIC   a consumer assigned partition 0 from the start,
 *       polling until "close": {"kind":"records","records":[[0,offset,"value"],...]}
 *   ReplicatedClient admin BOOTSTRAP TOPIC     reads lines: "describe" prints what describeTopics
 *       says of the topic, "elect" runs a preferred election of partition 0 and prints its result:
 *       {"kind":"described","partitions":[{"partition":0,"leader":ID,"replicas":[..],"isr":[..]}]}
 *       {"kind":"elected","error":null|"ClassName"}
 * Then {"kind":"closed"}.
 */
public final class ReplicatedClient {
    private ReplicatedClient() {}

    private static final Object OUT = new Object();

    static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static String quote(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        AtomicBoolean closing = new AtomicBoolean(false);
        List<String> commands = new ArrayList<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("close")) break;
                    synchronized (commands) {
                        commands.add(line.trim());
                    }
                }
            } catch (Exception e) {
                // end of input: close
            }
            closing.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        switch (mode) {
            case "produce" -> produce(bootstrap, topic, closing);
            case "consume" -> consume(bootstrap, topic, closing);
            case "admin" -> admin(bootstrap, topic, closing, commands);
            default -> throw new IllegalArgumentException(mode);
        }
        emit("{\"kind\":\"closed\"}");
        System.exit(0);
    }

    static void produce(String bootstrap, String topic, AtomicBoolean closing) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "180000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<long[]> acked = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            long value = 0;
            long lastEmit = System.currentTimeMillis();
            while (!closing.get()) {
                final long v = value++;
                producer.send(new ProducerRecord<>(topic, 0, null, Long.toString(v)), (md, e) -> {
                    if (e != null) {
                        emit("{\"kind\":\"error\",\"value\":" + v + ",\"error\":"
                             + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
                    } else {
                        synchronized (acked) {
                            acked.add(new long[] {md.offset(), v});
                        }
                    }
                });
                if (v % 20 == 19) Thread.sleep(5);  // bounded by buffer.memory anyway
                if (System.currentTimeMillis() - lastEmit > 200) {
                    flushAcked(acked);
                    lastEmit = System.currentTimeMillis();
                }
            }
            producer.flush();
        }
        flushAcked(acked);
    }

    static void flushAcked(List<long[]> acked) {
        StringBuilder sb = new StringBuilder("{\"kind\":\"acked\",\"acked\":[");
        synchronized (acked) {
            if (acked.isEmpty()) return;
            for (int i = 0; i < acked.size(); i++) {
                if (i > 0) sb.append(',');
                sb.append('[').append(acked.get(i)[0]).append(',').append(acked.get(i)[1]).append(']');
            }
            acked.clear();
        }
        emit(sb.append("]}").toString());
    }

    static void consume(String bootstrap, String topic, AtomicBoolean closing) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            while (!closing.get()) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                StringBuilder sb = new StringBuilder("{\"kind\":\"records\",\"records\":[");
                boolean first = true;
                for (ConsumerRecord<String, String> r : recs) {
                    if (!first) sb.append(',');
                    first = false;
                    sb.append('[').append(r.partition()).append(',').append(r.offset()).append(',')
                      .append(quote(r.value())).append(']');
                }
                emit(sb.append("]}").toString());
            }
        }
    }

    static void admin(String bootstrap, String topic, AtomicBoolean closing, List<String> commands) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(p)) {
            while (!closing.get()) {
                String cmd = null;
                synchronized (commands) {
                    if (!commands.isEmpty()) cmd = commands.remove(0);
                }
                if (cmd == null) {
                    Thread.sleep(20);
                    continue;
                }
                try {
                    if (cmd.equals("describe")) describe(admin, topic);
                    else if (cmd.equals("elect")) elect(admin, topic);
                } catch (ExecutionException e) {
                    emit("{\"kind\":\"error\",\"error\":" + quote(e.getCause().getClass().getSimpleName() + ": "
                                                                     + e.getCause().getMessage()) + "}");
                }
            }
        }
    }

    static String ids(List<Node> nodes) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < nodes.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append(nodes.get(i).id());
        }
        return sb.append(']').toString();
    }

    static void describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        StringBuilder sb = new StringBuilder("{\"kind\":\"described\",\"partitions\":[");
        boolean first = true;
        for (TopicPartitionInfo info : d.partitions()) {
            if (!first) sb.append(',');
            first = false;
            sb.append("{\"partition\":").append(info.partition())
              .append(",\"leader\":").append(info.leader() == null ? -1 : info.leader().id())
              .append(",\"replicas\":").append(ids(info.replicas()))
              .append(",\"isr\":").append(ids(info.isr())).append('}');
        }
        emit(sb.append("]}").toString());
    }

    static void elect(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<TopicPartition, java.util.Optional<Throwable>> r =
            admin.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get();
        java.util.Optional<Throwable> e = r.get(tp);
        emit("{\"kind\":\"elected\",\"error\":" + quote(e == null || e.isEmpty() ? null
                                                       : e.get().getClass().getSimpleName()) + "}");
    }
}
