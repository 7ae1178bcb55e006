import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Java kafka-clients 3.9.1 against kcoord's secure listeners (tests/integration/test_security_clients.py).
 *
 *   SecureClient DIR
 *
 * Runs every DIR/*.properties scenario at once, each in its own thread. A scenario is a consumer
 * configuration (security.protocol, sasl.*, ssl.* as any Kafka user writes them) plus:
 *   kcoord.expect   = consume | refuse
 *   kcoord.topic    = the topic to read; kcoord.messages = how many records it holds
 * consume: join the group (group.id), read kcoord.messages records, commitSync, print
 *          {"kind":"consumed","name":...,"records":N,"committed":OFFSET}
 * refuse:  poll until the client reports an AuthenticationException, print
 *          {"kind":"refused","name":...,"error":"SaslAuthenticationException","message":...}
 * denied:  poll until the client reports an AuthorizationException (ACLs), print
 *          {"kind":"denied","name":...,"error":"GroupAuthorizationException","message":...}
 * acls:    with the Admin client, create an ACL for kcoord.acl.principal (READ on the topics
 *          prefixed kcoord.acl.prefix), describe that principal's ACLs and delete them, print
 *          {"kind":"acls","name":...,"described":N,"deleted":M}
 * scram:   with the Admin client, upsert SCRAM-SHA-512 credentials (8192 iterations) for
 *          kcoord.scram.user / kcoord.scram.password (what kafka-configs.sh --alter --add-config
 *          'SCRAM-SHA-512=[...]' --entity-type users sends), describe them, authenticate a second
 *          Admin client with them (describeCluster), delete them and check that user is refused, print
 *          {"kind":"scram","name":...,"described":"SCRAM_SHA_512:8192","cluster":ID,"after_delete":"SaslAuthenticationException"}
 * Anything else prints {"kind":"failed",...}. One JSON object per line on stdout; logs go to stderr.
 */
public final class SecureClient {
    private static final long DEADLINE_MS = 60_000;

    private SecureClient() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: SecureClient SCENARIO_DIR");
            System.exit(2);
        }
        List<Path> files = new ArrayList<>();
        try (DirectoryStream<Path> dir = Files.newDirectoryStream(Paths.get(args[0]), "*.properties")) {
            for (Path p : dir) {
                files.add(p);
            }
        }
        Collections.sort(files);
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, files.size()));
        List<Future<?>> done = new ArrayList<>();
        for (Path file : files) {
            done.add(pool.submit(() -> run(file)));
        }
        for (Future<?> f : done) {
            f.get(2 * DEADLINE_MS, TimeUnit.MILLISECONDS);
        }
        pool.shutdown();
        System.out.flush();
        System.exit(0);
    }

    private static void run(Path file) {
        String name = file.getFileName().toString().replace(".properties", "");
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(file.toFile())) {
            props.load(in);
        } catch (Exception e) {
            emit("failed", name, "error", e.toString());
            return;
        }
        String expect = (String) props.remove("kcoord.expect");
        String topic = (String) props.remove("kcoord.topic");
        int messages = Integer.parseInt((String) props.remove("kcoord.messages"));
        if ("acls".equals(expect)) {
            acls(name, props, (String) props.remove("kcoord.acl.principal"), (String) props.remove("kcoord.acl.prefix"));
            return;
        }
        if ("scram".equals(expect)) {
            scram(name, props, (String) props.remove("kcoord.scram.user"), (String) props.remove("kcoord.scram.password"));
            return;
        }
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "kcoord-secure-" + name);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(Collections.singletonList(topic));
            int records = 0;
            while (System.currentTimeMillis() < deadline && records < messages) {
                ConsumerRecords<String, String> batch;
                try {
                    batch = consumer.poll(Duration.ofMillis(200));
                } catch (AuthorizationException e) {
                    emit("denied".equals(expect) ? "denied" : "failed", name, "error", e.getClass().getSimpleName(),
                            "message", String.valueOf(e.getMessage()));
                    return;
                } catch (AuthenticationException e) {
                    if ("refuse".equals(expect)) {
                        emit("refused", name, "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
                    } else {
                        emit("failed", name, "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
                    }
                    return;
                }
                records += batch.count();
            }
            if ("refuse".equals(expect) || "denied".equals(expect)) {
                emit("failed", name, "error", "not refused", "records", String.valueOf(records));
                return;
            }
            consumer.commitSync(Duration.ofSeconds(20));
            Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(Collections.singleton(new TopicPartition(topic, 0)), Duration.ofSeconds(20));
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, 0));
            emit("consumed", name, "records", String.valueOf(records), "committed", String.valueOf(om == null ? -1 : om.offset()));
        } catch (Exception e) {
            emit("failed", name, "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
        }
    }

    private static void acls(String name, Properties props, String principal, String prefix) {
        props.remove(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG);
        props.remove(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG);
        props.remove(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG);
        props.remove(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        props.remove(ConsumerConfig.GROUP_ID_CONFIG);
        try (Admin admin = Admin.create(props)) {
            AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
                    new AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW));
            admin.createAcls(Collections.singleton(binding)).all().get(20, TimeUnit.SECONDS);
            AclBindingFilter filter = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(principal, null, AclOperation.ANY, AclPermissionType.ANY));
            int described = admin.describeAcls(filter).values().get(20, TimeUnit.SECONDS).size();
            int deleted = admin.deleteAcls(Collections.singleton(filter)).all().get(20, TimeUnit.SECONDS).size();
            emit("acls", name, "described", String.valueOf(described), "deleted", String.valueOf(deleted));
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            emit("failed", name, "error", cause.getClass().getSimpleName(), "message", String.valueOf(cause.getMessage()));
        }
    }

    private static void scram(String name, Properties props, String user, String password) {
        props.remove(ConsumerConfig.GROUP_ID_CONFIG);
        Properties asUser = new Properties();
        asUser.putAll(props);
        asUser.put("sasl.mechanism", "SCRAM-SHA-512");
        asUser.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        asUser.put("default.api.timeout.ms", "15000");
        asUser.put("request.timeout.ms", "15000");
        try (Admin admin = Admin.create(props)) {
            admin.alterUserScramCredentials(Collections.singletonList(new UserScramCredentialUpsertion(
                    user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password)))
                    .all().get(20, TimeUnit.SECONDS);
            UserScramCredentialsDescription d = admin.describeUserScramCredentials(Collections.singletonList(user))
                    .description(user).get(20, TimeUnit.SECONDS);
            StringBuilder described = new StringBuilder();
            for (ScramCredentialInfo info : d.credentialInfos()) {
                described.append(described.length() == 0 ? "" : ",").append(info.mechanism()).append(':').append(info.iterations());
            }
            String cluster;
            try (Admin other = Admin.create(asUser)) {
                cluster = other.describeCluster().clusterId().get(20, TimeUnit.SECONDS);
            }
            admin.alterUserScramCredentials(Collections.singletonList(new UserScramCredentialDeletion(
                    user, ScramMechanism.SCRAM_SHA_512))).all().get(20, TimeUnit.SECONDS);
            String afterDelete = "accepted";
            try (Admin other = Admin.create(asUser)) {
                other.describeCluster().clusterId().get(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                afterDelete = cause.getClass().getSimpleName();
            }
            emit("scram", name, "described", described.toString(), "cluster", cluster, "after_delete", afterDelete);
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            emit("failed", name, "error", cause.getClass().getSimpleName(), "message", String.valueOf(cause.getMessage()));
        }
    }

    private static synchronized void emit(String kind, String name, String... kv) {
        StringBuilder sb = new StringBuilder("{\"kind\":").append(json(kind)).append(",\"name\":").append(json(name));
        for (int i = 0; i + 1 < kv.length; i += 2) {
            sb.append(',').append(json(kv[i])).append(':').append(json(kv[i + 1]));
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }

    private static String json(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
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
}
