import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;

/**
 * The topic lifecycle through Java kafka-clients' Admin, for kcoord's tests: each argument
 * after the bootstrap is one operation, run in order, each printing one JSON line
 * {"kind":"result","op":...,"error":<exception class or null>,"message":...,...}.
 *
 *   create:T:N[:name=value,...]   createTopics (replication factor 1, topic configs)
 *   delete:T                      deleteTopics by name
 *   deleteid:T                    deleteTopics by the topic id describeTopics reports (DeleteTopics v6)
 *   deleteid-random               deleteTopics of a random topic id
 *   describe:T                    describeTopics: "partitions" and "id"
 *   partitions:T:N[:B,B;B,...]    createPartitions to N (optionally with assignments)
 *   validate-partitions:T:N       createPartitions with validateOnly
 *   deleterecords:T:P:OFFSET      deleteRecords before OFFSET (-1: the high watermark): "low_watermark"
 *   earliest:T:P / latest:T:P     listOffsets: "offset"
 *
 * Reuses KcoordClient's output helpers.
 */
public final class TopicAdmin {
    private static final long CALL_TIMEOUT_MS = 30_000;

    private TopicAdmin() {}

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: TopicAdmin BOOTSTRAP OP...");
            System.exit(2);
        }
        Properties p = KcoordClient.common(args[0], "kcoord-java-topic-admin");
        p.put(AdminClientConfig.RETRIES_CONFIG, "3");
        try (Admin admin = Admin.create(p)) {
            for (int i = 1; i < args.length; i++) {
                run(admin, args[i]);
            }
        }
        System.out.flush();
        System.exit(0);
    }

    static void run(Admin admin, String op) {
        String[] a = op.split(":", -1);
        Map<String, Object> out = new HashMap<>();
        try {
            switch (a[0]) {
                case "create": {
                    NewTopic nt = new NewTopic(a[1], Integer.parseInt(a[2]), (short) 1);
                    if (a.length > 3 && !a[3].isEmpty()) {
                        Map<String, String> configs = new HashMap<>();
                        for (String kv : a[3].split(",")) {
                            String[] x = kv.split("=", 2);
                            configs.put(x[0], x[1]);
                        }
                        nt.configs(configs);
                    }
                    admin.createTopics(List.of(nt)).all().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    break;
                }
                case "delete":
                    admin.deleteTopics(List.of(a[1])).all().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    break;
                case "deleteid": {
                    Uuid id = describe(admin, a[1]).topicId();
                    out.put("id", id.toString());
                    admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all()
                            .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    break;
                }
                case "deleteid-random":
                    admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all()
                            .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    break;
                case "describe": {
                    TopicDescription d = describe(admin, a[1]);
                    out.put("partitions", d.partitions().size());
                    out.put("id", d.topicId().toString());
                    out.put("internal", d.isInternal());
                    break;
                }
                case "partitions":
                case "validate-partitions": {
                    int n = Integer.parseInt(a[2]);
                    NewPartitions np;
                    if (a.length > 3 && !a[3].isEmpty()) {
                        List<List<Integer>> assignments = new ArrayList<>();
                        for (String replicas : a[3].split(";")) {
                            List<Integer> r = new ArrayList<>();
                            for (String b : replicas.split(",")) {
                                r.add(Integer.parseInt(b));
                            }
                            assignments.add(r);
                        }
                        np = NewPartitions.increaseTo(n, assignments);
                    } else {
                        np = NewPartitions.increaseTo(n);
                    }
                    CreatePartitionsOptions opts = new CreatePartitionsOptions()
                            .validateOnly(a[0].equals("validate-partitions"));
                    admin.createPartitions(Map.of(a[1], np), opts).all().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    break;
                }
                case "deleterecords": {
                    TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                    long before = Long.parseLong(a[3]);
                    DeletedRecords dr = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before)))
                            .lowWatermarks().get(tp).get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    out.put("low_watermark", dr.lowWatermark());
                    break;
                }
                case "earliest":
                case "latest": {
                    TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                    OffsetSpec spec = a[0].equals("earliest") ? OffsetSpec.earliest() : OffsetSpec.latest();
                    ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp)
                            .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    out.put("offset", info.offset());
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown operation " + a[0]);
            }
            out.put("error", null);
        } catch (Exception e) {
            out.put("error", KcoordClient.errorName(e));
            out.put("message", KcoordClient.errorMessage(e));
        }
        List<Object> kv = new ArrayList<>(List.of("op", op));
        for (Map.Entry<String, Object> e : new java.util.TreeMap<>(out).entrySet()) {
            kv.add(e.getKey());
            kv.add(e.getValue());
        }
        KcoordClient.emit("result", kv.toArray());
    }

    static TopicDescription describe(Admin admin, String topic) throws Exception {
        return admin.describeTopics(Collections.singletonList(topic)).allTopicNames()
                .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
    }
}
