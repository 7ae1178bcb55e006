import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java kafka-clients 3.9.1 program driven by kcoord's integration tests (tests/clientlib.py).
 *
 * Every line it prints on stdout is one JSON object with a "kind" field; logs go to stderr.
 *
 *   admin           BOOTSTRAP TOPIC PARTITIONS GROUP
 *   findcoordinator BOOTSTRAP GROUP
 *   produce         BOOTSTRAP TOPIC N [KEY_PREFIX [COMPRESSION]]   (keys KEY_PREFIX+i, default "k";
 *                   values "v"+i; compression.type, default none)
 *   consume         BOOTSTRAP TOPIC GROUP MAX_MESSAGES IDLE_MS [INSTANCE_ID]  (idle: since the
 *                   first assignment or the last record; before an assignment it waits)
 *   readhex         BOOTSTRAP TOPIC PARTITION   (keys and values as hex, e.g. __consumer_offsets)
 *   member          BOOTSTRAP TOPIC GROUP [INSTANCE_ID|"" [SESSION_MS [CLIENT_ID]]]
 *
 * `member` is a roundrobin (eager) group member that runs until the line "close" (or the end)
 * arrives on stdin, then closes cleanly (LeaveGroup for a dynamic member). It prints
 * assigned/revoked/lost (integer partitions, with the generation), one "records" line per poll
 * batch, and "committed" after each synchronous commit (after every batch, and for the
 * partitions being revoked in onPartitionsRevoked, so a rebalance redelivers nothing).
 *
 * Every client call is bounded (request.timeout.ms, default.api.timeout.ms, get(timeout)) so
 * the program ends on its own even when the server misbehaves; the caller adds a process
 * timeout on top.
 */
public final class KcoordClient {
    private static final long CALL_TIMEOUT_MS = 20_000;

    private KcoordClient() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        int rc;
        switch (args[0]) {
            case "admin":
                need(args, 5);
                rc = admin(args[1], args[2], Integer.parseInt(args[3]), args[4]);
                break;
            case "findcoordinator":
                need(args, 3);
                rc = findCoordinator(args[1], args[2]);
                break;
            case "produce":
                need(args, 4);
                rc = produce(args[1], args[2], Integer.parseInt(args[3]), args.length > 4 ? args[4] : "k",
                        args.length > 5 ? args[5] : "none");
                break;
            case "consume":
                need(args, 6);
                rc = consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Long.parseLong(args[5]),
                        args.length > 6 ? args[6] : null);
                break;
            case "readhex":
                need(args, 4);
                rc = readHex(args[1], args[2], Integer.parseInt(args[3]));
                break;
            case "member":
                need(args, 4);
                rc = member(args[1], args[2], args[3], args.length > 4 ? args[4] : null,
                        args.length > 5 ? Integer.parseInt(args[5]) : 10_000,
                        args.length > 6 ? args[6] : "kcoord-java-member");
                break;
            default:
                usage();
                rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    private static void need(String[] args, int n) {
        if (args.length < n) {
            usage();
        }
    }

    private static void usage() {
        System.err.println("usage: KcoordClient admin BOOTSTRAP TOPIC PARTITIONS GROUP\n"
                + "       KcoordClient findcoordinator BOOTSTRAP GROUP\n"
                + "       KcoordClient produce BOOTSTRAP TOPIC N [KEY_PREFIX [COMPRESSION]]\n"
                + "       KcoordClient consume BOOTSTRAP TOPIC GROUP MAX_MESSAGES IDLE_MS [INSTANCE_ID]\n"
                + "       KcoordClient member BOOTSTRAP TOPIC GROUP [INSTANCE_ID [SESSION_MS [CLIENT_ID]]]");
        System.exit(2);
    }

    // ---- output: one JSON object per line ----

    static synchronized void emit(String kind, Object... kv) {
        StringBuilder sb = new StringBuilder("{\"kind\":").append(json(kind));
        for (int i = 0; i + 1 < kv.length; i += 2) {
            sb.append(',').append(json(String.valueOf(kv[i]))).append(':').append(json(kv[i + 1]));
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }

    static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof Collection) {
            StringBuilder sb = new StringBuilder("[");
            for (Object o : (Collection<?>) v) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(o));
            }
            return sb.append(']').toString();
        }
        if (v instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        String s = v.toString();
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    static String errorName(Throwable t) {
        Throwable c = t;
        while (c instanceof ExecutionException && c.getCause() != null) {
            c = c.getCause();
        }
        return c.getClass().getSimpleName();
    }

    static String errorMessage(Throwable t) {
        Throwable c = t;
        while (c instanceof ExecutionException && c.getCause() != null) {
            c = c.getCause();
        }
        return String.valueOf(c.getMessage());
    }

    static Properties common(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "20000");
        p.put("reconnect.backoff.max.ms", "1000");
        p.put("socket.connection.setup.timeout.ms", "5000");
        p.put("socket.connection.setup.timeout.max.ms", "5000");
        return p;
    }

    // ---- admin ----

    static int admin(String bootstrap, String topic, int partitions, String group) {
        Properties p = common(bootstrap, "kcoord-java-admin");
        p.put(AdminClientConfig.RETRIES_CONFIG, "3");
        int failures = 0;
        try (Admin admin = Admin.create(p)) {
            // DescribeCluster falls back to Metadata when the broker does not serve DescribeCluster.
            try {
                DescribeClusterResult dc = admin.describeCluster();
                List<String> nodes = new ArrayList<>();
                for (Node n : dc.nodes().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    nodes.add(n.id() + "@" + n.host() + ":" + n.port());
                }
                Node controller = dc.controller().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                emit("cluster", "cluster_id", dc.clusterId().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS),
                        "controller", controller == null ? null : controller.id(), "nodes", nodes);
            } catch (Exception e) {
                failures++;
                emit("error", "step", "describeCluster", "error", errorName(e), "message", errorMessage(e));
            }

            try {
                NewTopic nt = new NewTopic(topic, partitions, (short) 1)
                        .configs(Map.of("retention.ms", "3600000"));
                CreateTopicsResult r = admin.createTopics(List.of(nt));
                r.all().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                Map<String, String> cfg = new TreeMap<>();
                r.config(topic).get().entries().forEach(e -> cfg.put(e.name(), e.value()));
                emit("created", "topic", topic, "topic_id", String.valueOf(r.topicId(topic).get()),
                        "partitions", r.numPartitions(topic).get(),
                        "replication_factor", r.replicationFactor(topic).get(),
                        "retention_ms", cfg.get("retention.ms"));
            } catch (Exception e) {
                failures++;
                emit("error", "step", "createTopics", "error", errorName(e), "message", errorMessage(e));
            }

            // The same topic again, and an illegal name: both must fail with Kafka's exceptions.
            for (String name : List.of(topic, "bad name")) {
                try {
                    admin.createTopics(List.of(new NewTopic(name, 1, (short) 1)))
                            .all().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    emit("create_again", "topic", name, "error", null);
                } catch (Exception e) {
                    emit("create_again", "topic", name, "error", errorName(e), "message", errorMessage(e));
                }
            }

            try {
                Collection<TopicListing> listings = admin.listTopics(new ListTopicsOptions().listInternal(true))
                        .listings().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                for (TopicListing l : listings) {
                    emit("topic", "name", l.name(), "internal", l.isInternal(), "topic_id", String.valueOf(l.topicId()));
                }
            } catch (Exception e) {
                failures++;
                emit("error", "step", "listTopics", "error", errorName(e), "message", errorMessage(e));
            }

            try {
                Map<String, TopicDescription> d = admin.describeTopics(List.of(topic, "__consumer_offsets"))
                        .allTopicNames().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                for (TopicDescription td : d.values()) {
                    List<Integer> leaders = new ArrayList<>();
                    for (TopicPartitionInfo pi : td.partitions()) {
                        leaders.add(pi.leader() == null ? -1 : pi.leader().id());
                    }
                    emit("described", "name", td.name(), "topic_id", String.valueOf(td.topicId()),
                            "internal", td.isInternal(), "partitions", td.partitions().size(), "leaders", leaders);
                }
            } catch (Exception e) {
                failures++;
                emit("error", "step", "describeTopics", "error", errorName(e), "message", errorMessage(e));
            }

            // The coordinator as the admin client finds it: FindCoordinator, then DescribeGroups.
            try {
                Map<String, ConsumerGroupDescription> groups = admin.describeConsumerGroups(List.of(group),
                        new DescribeConsumerGroupsOptions().timeoutMs((int) CALL_TIMEOUT_MS))
                        .all().get(CALL_TIMEOUT_MS + 5000, TimeUnit.MILLISECONDS);
                ConsumerGroupDescription g = groups.get(group);
                Node c = g.coordinator();
                emit("group", "group", group, "state", String.valueOf(g.state()),
                        "coordinator_id", c.id(), "coordinator_host", c.host(), "coordinator_port", c.port(),
                        "members", g.members().size());
            } catch (Exception e) {
                failures++;
                emit("error", "step", "describeConsumerGroups", "error", errorName(e), "message", errorMessage(e));
            }
        } catch (Exception e) {
            emit("error", "step", "admin", "error", errorName(e), "message", errorMessage(e));
            return 1;
        }
        emit("done", "failures", failures);
        return failures == 0 ? 0 : 1;
    }

    // ---- FindCoordinator v0..v6 with Java's own request/response classes over a bare socket ----

    static int findCoordinator(String bootstrap, String group) throws Exception {
        String[] hp = bootstrap.split(",")[0].split(":");
        int failures = 0;
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 5000);
            s.setSoTimeout(10_000);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            DataInputStream in = new DataInputStream(s.getInputStream());
            int correlation = 1;
            for (short v = ApiKeys.FIND_COORDINATOR.oldestVersion(); v <= ApiKeys.FIND_COORDINATOR.latestVersion(); v++) {
                FindCoordinatorRequestData data = new FindCoordinatorRequestData();
                if (v >= 4) {
                    data.setCoordinatorKeys(List.of(group));
                } else {
                    data.setKey(group);
                }
                FindCoordinatorRequest req = new FindCoordinatorRequest.Builder(data).build(v);
                RequestHeader header = new RequestHeader(ApiKeys.FIND_COORDINATOR, v, "kcoord-java-raw", correlation++);
                ByteBuffer buf = req.serializeWithHeader(header);
                byte[] bytes = new byte[buf.remaining()];
                buf.get(bytes);
                out.writeInt(bytes.length);
                out.write(bytes);
                out.flush();
                int size = in.readInt();
                byte[] resp = new byte[size];
                in.readFully(resp);
                FindCoordinatorResponse r = (FindCoordinatorResponse) AbstractResponse.parseResponse(
                        ByteBuffer.wrap(resp), header);
                FindCoordinatorResponseData.Coordinator c = r.coordinatorByKey(group).orElse(null);
                if (v >= 4) {
                    if (c == null) {
                        failures++;
                        emit("findcoordinator", "version", (int) v, "error", "no coordinator for key");
                        continue;
                    }
                    emit("findcoordinator", "version", (int) v, "error_code", (int) c.errorCode(),
                            "node_id", c.nodeId(), "host", c.host(), "port", c.port(), "key", c.key());
                } else {
                    FindCoordinatorResponseData d = r.data();
                    emit("findcoordinator", "version", (int) v, "error_code", (int) d.errorCode(),
                            "node_id", d.nodeId(), "host", d.host(), "port", d.port(), "key", group);
                }
            }
        }
        return failures == 0 ? 0 : 1;
    }

    // ---- produce ----

    static int produce(String bootstrap, String topic, int n, String keyPrefix, String compression)
            throws Exception {
        Properties p = common(bootstrap, "kcoord-java-producer");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        // Defaults otherwise: enable.idempotence=true, acks=all.
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        Map<Integer, Long> lastOffset = Collections.synchronizedMap(new TreeMap<>());
        Map<String, Integer> errors = Collections.synchronizedMap(new TreeMap<>());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, keyPrefix + i, "v" + i), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                    } else {
                        acked.incrementAndGet();
                        lastOffset.merge(md.partition(), md.offset(), Math::max);
                    }
                });
            }
            producer.flush();
            producer.close(Duration.ofSeconds(10));
        } catch (Exception e) {
            emit("error", "step", "produce", "error", errorName(e), "message", errorMessage(e));
            return 1;
        }
        Map<String, Long> offsets = new LinkedHashMap<>();
        synchronized (lastOffset) {
            lastOffset.forEach((k, v) -> offsets.put(String.valueOf(k), v));
        }
        emit("produced", "topic", topic, "sent", n, "acked", acked.get(), "failed", failed.get(),
                "last_offsets", offsets, "errors", errors);
        return failed.get() == 0 && acked.get() == n ? 0 : 1;
    }

    // ---- readhex: one partition from the beginning to its end, keys and values as hex ----

    static int readHex(String bootstrap, String topic, int partition) {
        Properties p = common(bootstrap, "kcoord-java-reader");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("enable.auto.commit", "false");
        TopicPartition tp = new TopicPartition(topic, partition);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 30_000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    emit("record", "partition", r.partition(), "offset", r.offset(),
                            "key", hex(r.key()), "value", hex(r.value()));
                }
            }
            emit("done", "end", end, "position", consumer.position(tp));
            return consumer.position(tp) >= end ? 0 : 1;
        } catch (Exception e) {
            emit("error", "step", "readhex", "error", errorName(e), "message", errorMessage(e));
            return 1;
        }
    }

    static String hex(byte[] b) {
        if (b == null) {
            return null;
        }
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(String.format("%02x", x));
        }
        return sb.toString();
    }

    // ---- consume ----

    static int consume(String bootstrap, String topic, String group, int maxMessages, long idleMs,
                       String instanceId) {
        Properties p = common(bootstrap, "kcoord-java-consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (instanceId != null && !instanceId.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int count = 0;
        int commitFailures = 0;
        // The idle clock starts at the first assignment: joining can take longer than IDLE_MS on
        // a busy machine, and a consumer that gave up before it was assigned tested nothing.
        final long[] lastActivity = {Long.MAX_VALUE};
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    emit("revoked", "partitions", names(parts));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    lastActivity[0] = System.currentTimeMillis();
                    emit("assigned", "partitions", names(parts));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    emit("lost", "partitions", names(parts));
                }
            });
            while (count < maxMessages) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (lastActivity[0] != Long.MAX_VALUE && System.currentTimeMillis() - lastActivity[0] > idleMs) {
                        emit("idle", "ms", idleMs);
                        break;
                    }
                    continue;
                }
                lastActivity[0] = System.currentTimeMillis();
                for (ConsumerRecord<String, String> r : records) {
                    count++;
                    emit("record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                            "key", r.key(), "value", r.value());
                }
                try {
                    consumer.commitSync(Duration.ofMillis(CALL_TIMEOUT_MS));
                    Map<String, Long> committed = new TreeMap<>();
                    for (TopicPartition tp : records.partitions()) {
                        List<ConsumerRecord<String, String>> rs = records.records(tp);
                        committed.put(tp.toString(), rs.get(rs.size() - 1).offset() + 1);
                    }
                    emit("committed", "offsets", committed);
                } catch (Exception e) {
                    commitFailures++;
                    emit("error", "step", "commitSync", "error", errorName(e), "message", errorMessage(e));
                }
            }
            emit("closing", "count", count);
            consumer.close(Duration.ofSeconds(10));
        } catch (Exception e) {
            emit("error", "step", "consume", "error", errorName(e), "message", errorMessage(e));
            return 1;
        }
        emit("done", "count", count, "commit_failures", commitFailures);
        return commitFailures == 0 ? 0 : 1;
    }

    // ---- member: a long-running group member driven through stdin ----

    static int member(String bootstrap, String topic, String group, String instanceId, int sessionMs,
                      String clientId) {
        Properties p = common(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (instanceId != null && !instanceId.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RoundRobinAssignor.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(sessionMs));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // -Dkcoord.conf=name=value,name=value: extra consumer settings (tests/clientlib.py java_member)
        for (String kv : System.getProperty("kcoord.conf", "").split(",")) {
            if (kv.contains("=")) {
                p.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        AtomicBoolean stop = new AtomicBoolean();
        Map<TopicPartition, Long> pending = new TreeMap<>(
                (a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                        : a.topic().compareTo(b.topic()));
        emit("started", "lib", "java", "instance_id", instanceId);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            Thread watcher = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("close")) {
                        // ignore anything else
                    }
                } catch (Exception e) {
                    // end of stdin
                }
                stop.set(true);
                consumer.wakeup();
            });
            watcher.setDaemon(true);
            watcher.start();
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    commitPending(consumer, pending, parts);
                    emit("revoked", "partitions", numbers(parts));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    emit("assigned", "partitions", numbers(parts),
                            "generation", consumer.groupMetadata().generationId());
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    for (TopicPartition tp : parts) {
                        pending.remove(tp);
                    }
                    emit("lost", "partitions", numbers(parts));
                }
            });
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
                    batch.add(List.of(r.partition(), r.offset(), r.key() == null ? "" : r.key()));
                    pending.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                }
                emit("records", "records", batch);
                commitPending(consumer, pending, null);
            }
            consumer.close(Duration.ofSeconds(10));
        } catch (Exception e) {
            emit("error", "step", "member", "error", errorName(e), "message", errorMessage(e));
            return 1;
        }
        emit("closed");
        return 0;
    }

    static void commitPending(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> pending,
                              Collection<TopicPartition> only) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        Map<String, Long> shown = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> e : pending.entrySet()) {
            if (only == null || only.contains(e.getKey())) {
                offsets.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
                shown.put(String.valueOf(e.getKey().partition()), e.getValue());
            }
        }
        if (offsets.isEmpty()) {
            return;
        }
        for (int attempt = 0; ; attempt++) {
            try {
                consumer.commitSync(offsets, Duration.ofMillis(CALL_TIMEOUT_MS));
                break;
            } catch (WakeupException e) {
                // the stdin watcher's wakeup() (asking us to close) interrupted the commit:
                // the flag is consumed now, so commit again before closing
                if (attempt > 0) {
                    throw e;
                }
            } catch (Exception e) {
                emit("commit_error", "error", errorName(e), "message", errorMessage(e), "offsets", shown);
                return;
            }
        }
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            Long current = pending.get(e.getKey());
            if (current != null && current == e.getValue().offset()) {
                pending.remove(e.getKey());
            }
        }
        emit("committed", "offsets", shown);
    }

    static List<Integer> numbers(Collection<TopicPartition> parts) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(tp.partition());
        }
        Collections.sort(out);
        return out;
    }

    static List<String> names(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(tp.topic() + "-" + tp.partition());
        }
        Collections.sort(out);
        return out;
    }
}
