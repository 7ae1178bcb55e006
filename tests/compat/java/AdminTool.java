import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The Java AdminClient (kafka-clients 3.9.1) driven step by step by kcoord's admin tests.
 *
 *   AdminTool BOOTSTRAP STEP [ARGS...] [-- STEP [ARGS...]]...
 *
 * Steps (one JSON line each, "kind" = the step; a failure is {"kind":"error","step":...,
 * "error": exception class, "message": ...} and the next step still runs):
 *   create TOPIC PARTITIONS [name=value...]         createTopics (configs from the result)
 *   describe-configs topic|broker|broker-logger NAME [synonyms] [docs] [key=NAME...]
 *   incremental topic|broker|broker-logger NAME [validate] OP:name[=value]...   OP set|delete|append|subtract
 *   legacy topic|broker NAME [validate] [name=value...]    the deprecated whole-map alterConfigs
 *   describe-topics TOPIC[,TOPIC...]                 describeTopics (DescribeTopicPartitions)
 *   describe-cluster                                 describeCluster with authorized operations
 *   log-dirs BROKER                                  describeLogDirs
 *   elect preferred|unclean all|TOPIC:P[,TOPIC:P...]  electLeaders
 *   list-reassignments
 *   reassign TOPIC:P (BROKER[,BROKER...]|cancel)     alterPartitionReassignments
 *   create-partitions TOPIC N
 *   delete-topics TOPIC[,TOPIC...]
 *   describe-group GROUP                             members, committed offsets, end offsets, lag
 *   reset-offsets GROUP TOPIC earliest|latest|timestamp:MS|shift:N|to:OFFSET
 *   delete-offsets GROUP TOPIC PARTITION
 *   delete-group GROUP
 */
public final class AdminTool {
    private static final long T = 20_000;

    private AdminTool() {}

    public static void main(String[] args) {
        Properties p = KcoordClient.common(args[0], "kcoord-admin-tool");
        p.put(AdminClientConfig.RETRIES_CONFIG, "3");
        int failures = 0;
        try (Admin admin = Admin.create(p)) {
            List<String> step = new ArrayList<>();
            for (int i = 1; i <= args.length; i++) {
                if (i == args.length || args[i].equals("--")) {
                    if (!step.isEmpty() && !run(admin, step)) {
                        failures++;
                    }
                    step = new ArrayList<>();
                } else {
                    step.add(args[i]);
                }
            }
        }
        KcoordClient.emit("done", "failures", failures);
        System.out.flush();
        System.exit(0);
    }

    private static boolean run(Admin admin, List<String> a) {
        String name = a.get(0);
        try {
            switch (name) {
                case "create": create(admin, a); break;
                case "describe-configs": describeConfigs(admin, a); break;
                case "incremental": incremental(admin, a); break;
                case "legacy": legacy(admin, a); break;
                case "describe-topics": describeTopics(admin, a); break;
                case "describe-cluster": describeCluster(admin); break;
                case "log-dirs": logDirs(admin, a); break;
                case "elect": elect(admin, a); break;
                case "list-reassignments": listReassignments(admin); break;
                case "reassign": reassign(admin, a); break;
                case "create-partitions":
                    admin.createPartitions(Map.of(a.get(1), NewPartitions.increaseTo(Integer.parseInt(a.get(2)))))
                            .all().get(T, TimeUnit.MILLISECONDS);
                    KcoordClient.emit(name, "topic", a.get(1));
                    break;
                case "delete-topics":
                    admin.deleteTopics(Arrays.asList(a.get(1).split(","))).all().get(T, TimeUnit.MILLISECONDS);
                    KcoordClient.emit(name, "topics", a.get(1));
                    break;
                case "describe-group": describeGroup(admin, a.get(1)); break;
                case "reset-offsets": resetOffsets(admin, a.get(1), a.get(2), a.get(3)); break;
                case "delete-offsets":
                    admin.deleteConsumerGroupOffsets(a.get(1),
                            Set.of(new TopicPartition(a.get(2), Integer.parseInt(a.get(3))))).all()
                            .get(T, TimeUnit.MILLISECONDS);
                    KcoordClient.emit(name, "group", a.get(1));
                    break;
                case "delete-group":
                    admin.deleteConsumerGroups(List.of(a.get(1))).all().get(T, TimeUnit.MILLISECONDS);
                    KcoordClient.emit(name, "group", a.get(1));
                    break;
                default:
                    throw new IllegalArgumentException("unknown step " + name);
            }
            return true;
        } catch (Exception e) {
            KcoordClient.emit("error", "step", name, "error", KcoordClient.errorName(e),
                    "message", KcoordClient.errorMessage(e));
            return false;
        }
    }

    private static ConfigResource resource(String type, String name) {
        switch (type) {
            case "topic": return new ConfigResource(ConfigResource.Type.TOPIC, name);
            case "broker": return new ConfigResource(ConfigResource.Type.BROKER, name);
            case "broker-logger": return new ConfigResource(ConfigResource.Type.BROKER_LOGGER, name);
            default: throw new IllegalArgumentException(type);
        }
    }

    private static Map<String, String> pairs(List<String> items) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String s : items) {
            int eq = s.indexOf('=');
            out.put(s.substring(0, eq), s.substring(eq + 1));
        }
        return out;
    }

    private static void create(Admin admin, List<String> a) throws Exception {
        NewTopic nt = new NewTopic(a.get(1), Integer.parseInt(a.get(2)), (short) 1)
                .configs(pairs(a.subList(3, a.size())));
        CreateTopicsResult r = admin.createTopics(List.of(nt));
        r.all().get(T, TimeUnit.MILLISECONDS);
        Map<String, Object> cfg = new TreeMap<>();
        for (ConfigEntry e : r.config(a.get(1)).get().entries()) {
            cfg.put(e.name(), List.of(String.valueOf(e.value()), e.source().name()));
        }
        KcoordClient.emit("create", "topic", a.get(1), "partitions", r.numPartitions(a.get(1)).get(),
                "configs", cfg);
    }

    private static Map<String, Object> entry(ConfigEntry e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("value", e.value());
        m.put("source", e.source().name());
        m.put("read_only", e.isReadOnly());
        m.put("sensitive", e.isSensitive());
        m.put("type", e.type().name());
        m.put("doc", e.documentation());
        List<Object> syn = new ArrayList<>();
        e.synonyms().forEach(s -> syn.add(List.of(s.name(), String.valueOf(s.value()), s.source().name())));
        m.put("synonyms", syn);
        return m;
    }

    private static void describeConfigs(Admin admin, List<String> a) throws Exception {
        ConfigResource res = resource(a.get(1), a.get(2));
        DescribeConfigsOptions opts = new DescribeConfigsOptions()
                .includeSynonyms(a.contains("synonyms")).includeDocumentation(a.contains("docs"));
        Config c = admin.describeConfigs(List.of(res), opts).all().get(T, TimeUnit.MILLISECONDS).get(res);
        Map<String, Object> entries = new TreeMap<>();
        for (ConfigEntry e : c.entries()) {
            entries.put(e.name(), entry(e));
        }
        KcoordClient.emit("describe-configs", "resource", a.get(2), "entries", entries);
    }

    private static void incremental(Admin admin, List<String> a) throws Exception {
        ConfigResource res = resource(a.get(1), a.get(2));
        boolean validate = a.size() > 3 && a.get(3).equals("validate");
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String s : a.subList(validate ? 4 : 3, a.size())) {
            int colon = s.indexOf(':');
            String op = s.substring(0, colon);
            String rest = s.substring(colon + 1);
            int eq = rest.indexOf('=');
            String key = eq < 0 ? rest : rest.substring(0, eq);
            String value = eq < 0 ? null : rest.substring(eq + 1);
            ops.add(new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.valueOf(op.toUpperCase())));
        }
        admin.incrementalAlterConfigs(Map.of(res, ops), new AlterConfigsOptions().validateOnly(validate))
                .all().get(T, TimeUnit.MILLISECONDS);
        KcoordClient.emit("incremental", "resource", a.get(2));
    }

    @SuppressWarnings("deprecation")
    private static void legacy(Admin admin, List<String> a) throws Exception {
        ConfigResource res = resource(a.get(1), a.get(2));
        boolean validate = a.size() > 3 && a.get(3).equals("validate");
        List<ConfigEntry> entries = new ArrayList<>();
        pairs(a.subList(validate ? 4 : 3, a.size())).forEach((k, v) -> entries.add(new ConfigEntry(k, v)));
        admin.alterConfigs(Map.of(res, new Config(entries)), new AlterConfigsOptions().validateOnly(validate))
                .all().get(T, TimeUnit.MILLISECONDS);
        KcoordClient.emit("legacy", "resource", a.get(2));
    }

    private static void describeTopics(Admin admin, List<String> a) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(Arrays.asList(a.get(1).split(",")))
                .allTopicNames().get(T, TimeUnit.MILLISECONDS);
        for (TopicDescription td : new TreeMap<>(d).values()) {
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : td.partitions()) {
                parts.add(List.of(pi.partition(), pi.leader() == null ? -1 : pi.leader().id(),
                        ids(pi.replicas()), ids(pi.isr())));
            }
            KcoordClient.emit("topic", "name", td.name(), "topic_id", String.valueOf(td.topicId()),
                    "internal", td.isInternal(), "partitions", parts);
        }
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        nodes.forEach(n -> out.add(n.id()));
        return out;
    }

    private static void describeCluster(Admin admin) throws Exception {
        DescribeClusterResult r = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
        List<String> nodes = new ArrayList<>();
        for (Node n : r.nodes().get(T, TimeUnit.MILLISECONDS)) {
            nodes.add(n.id() + "@" + n.host() + ":" + n.port());
        }
        Set<AclOperation> ops = r.authorizedOperations().get(T, TimeUnit.MILLISECONDS);
        List<String> opNames = new ArrayList<>();
        if (ops != null) {
            ops.forEach(o -> opNames.add(o.name()));
            opNames.sort(null);
        }
        KcoordClient.emit("describe-cluster", "cluster_id", r.clusterId().get(), "controller",
                r.controller().get().id(), "nodes", nodes, "operations", ops == null ? null : opNames);
    }

    private static void logDirs(Admin admin, List<String> a) throws Exception {
        int broker = Integer.parseInt(a.get(1));
        Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(List.of(broker))
                .allDescriptions().get(T, TimeUnit.MILLISECONDS);
        for (Map.Entry<String, LogDirDescription> d : all.get(broker).entrySet()) {
            Map<String, Object> replicas = new TreeMap<>();
            for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet()) {
                replicas.put(r.getKey().toString(), List.of(r.getValue().size(), r.getValue().offsetLag(),
                        r.getValue().isFuture()));
            }
            KcoordClient.emit("log-dirs", "dir", d.getKey(), "error",
                    d.getValue().error() == null ? null : d.getValue().error().getClass().getSimpleName(),
                    "total", d.getValue().totalBytes().orElse(-1), "usable", d.getValue().usableBytes().orElse(-1),
                    "replicas", replicas);
        }
    }

    private static TopicPartition tp(String s) {
        int colon = s.lastIndexOf(':');
        return new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
    }

    private static void elect(Admin admin, List<String> a) throws Exception {
        ElectionType type = ElectionType.valueOf(a.get(1).toUpperCase());
        Set<TopicPartition> parts = null;
        if (!a.get(2).equals("all")) {
            parts = new HashSet<>();
            for (String s : a.get(2).split(",")) {
                parts.add(tp(s));
            }
        }
        Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(type, parts).partitions()
                .get(T, TimeUnit.MILLISECONDS);
        Map<String, Object> out = new TreeMap<>();
        r.forEach((k, v) -> out.put(k.toString(), v.map(t -> t.getClass().getSimpleName()).orElse(null)));
        KcoordClient.emit("elect", "results", out);
    }

    private static void listReassignments(Admin admin) throws Exception {
        Map<TopicPartition, PartitionReassignment> r = admin.listPartitionReassignments().reassignments()
                .get(T, TimeUnit.MILLISECONDS);
        List<String> names = new ArrayList<>();
        r.keySet().forEach(k -> names.add(k.toString()));
        KcoordClient.emit("list-reassignments", "partitions", names);
    }

    private static void reassign(Admin admin, List<String> a) throws Exception {
        Optional<NewPartitionReassignment> target = Optional.empty();
        if (!a.get(2).equals("cancel")) {
            List<Integer> replicas = new ArrayList<>();
            for (String s : a.get(2).split(",")) {
                replicas.add(Integer.parseInt(s));
            }
            target = Optional.of(new NewPartitionReassignment(replicas));
        }
        admin.alterPartitionReassignments(Map.of(tp(a.get(1)), target)).all().get(T, TimeUnit.MILLISECONDS);
        KcoordClient.emit("reassign", "partition", a.get(1));
    }

    // ---- what kafka-consumer-groups.sh does, through the AdminClient ----

    private static Map<TopicPartition, Long> offsets(Admin admin, Collection<TopicPartition> parts, OffsetSpec spec)
            throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        parts.forEach(tp -> req.put(tp, spec));
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> r = admin.listOffsets(req).all()
                .get(T, TimeUnit.MILLISECONDS);
        Map<TopicPartition, Long> out = new HashMap<>();
        r.forEach((k, v) -> out.put(k, v.offset()));
        return out;
    }

    private static void describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(group)).all()
                .get(T, TimeUnit.MILLISECONDS).get(group);
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(T, TimeUnit.MILLISECONDS);
        Map<TopicPartition, Long> ends = offsets(admin, committed.keySet(), OffsetSpec.latest());
        Map<String, Object> rows = new TreeMap<>();
        committed.forEach((tp, om) -> {
            long end = ends.get(tp);
            rows.put(tp.toString(), List.of(om.offset(), end, end - om.offset()));
        });
        List<String> members = new ArrayList<>();
        for (MemberDescription m : g.members()) {
            members.add(m.clientId());
        }
        KcoordClient.emit("describe-group", "group", group, "state", String.valueOf(g.state()),
                "members", members, "offsets", rows);
    }

    private static void resetOffsets(Admin admin, String group, String topic, String how) throws Exception {
        List<TopicPartition> parts = new ArrayList<>();
        int n = admin.describeTopics(List.of(topic)).allTopicNames().get(T, TimeUnit.MILLISECONDS)
                .get(topic).partitions().size();
        for (int i = 0; i < n; i++) {
            parts.add(new TopicPartition(topic, i));
        }
        Map<TopicPartition, Long> target;
        if (how.equals("earliest")) {
            target = offsets(admin, parts, OffsetSpec.earliest());
        } else if (how.equals("latest")) {
            target = offsets(admin, parts, OffsetSpec.latest());
        } else if (how.startsWith("timestamp:")) {
            target = offsets(admin, parts, OffsetSpec.forTimestamp(Long.parseLong(how.substring(10))));
            Map<TopicPartition, Long> latest = offsets(admin, parts, OffsetSpec.latest());
            target.replaceAll((tp, off) -> off < 0 ? latest.get(tp) : off);
        } else if (how.startsWith("shift:")) {
            long shift = Long.parseLong(how.substring(6));
            Map<TopicPartition, OffsetAndMetadata> current = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(T, TimeUnit.MILLISECONDS);
            Map<TopicPartition, Long> earliest = offsets(admin, parts, OffsetSpec.earliest());
            Map<TopicPartition, Long> latest = offsets(admin, parts, OffsetSpec.latest());
            target = new HashMap<>();
            for (TopicPartition tp : parts) {
                OffsetAndMetadata om = current.get(tp);
                long base = om == null ? latest.get(tp) : om.offset();
                target.put(tp, Math.max(earliest.get(tp), Math.min(latest.get(tp), base + shift)));
            }
        } else if (how.startsWith("to:")) {
            target = new HashMap<>();
            for (TopicPartition tp : parts) {
                target.put(tp, Long.parseLong(how.substring(3)));
            }
        } else {
            throw new IllegalArgumentException(how);
        }
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        target.forEach((tp, off) -> commit.put(tp, new OffsetAndMetadata(off)));
        admin.alterConsumerGroupOffsets(group, commit).all().get(T, TimeUnit.MILLISECONDS);
        Map<String, Object> out = new TreeMap<>();
        target.forEach((tp, off) -> out.put(tp.toString(), off));
        KcoordClient.emit("reset-offsets", "group", group, "offsets", out);
    }
}
