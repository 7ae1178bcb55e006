import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java Admin (kafka-clients 4.x) share-group offsets calls, for the share-group operations
 * tests (tests/integration/test_share_group_ops.py):
 *
 *   ShareAdminTool BOOTSTRAP STEP [-- STEP]...
 *   STEP: offsets GROUP | alter GROUP TOPIC:PARTITION=OFFSET... | delete-offsets GROUP TOPIC...
 *       | delete GROUP
 *
 * One JSON line per step: {"kind":"offsets","offsets":{"topic-p":[start,lag]}}, {"kind":"alter"},
 * {"kind":"delete-offsets"}, {"kind":"delete"}, or {"kind":"error","step":...,"error":<exception class>}.
 */
public final class ShareAdminTool {
    private ShareAdminTool() {}

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        List<List<String>> steps = new ArrayList<>();
        List<String> cur = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--")) {
                steps.add(cur);
                cur = new ArrayList<>();
            } else {
                cur.add(args[i]);
            }
        }
        steps.add(cur);
        try (Admin admin = Admin.create(p)) {
            for (List<String> s : steps) {
                String kind = s.get(0), group = s.get(1);
                try {
                    switch (kind) {
                        case "offsets": {
                            Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(
                                    Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
                            StringBuilder b = new StringBuilder("{\"kind\":\"offsets\",\"offsets\":{");
                            boolean first = true;
                            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : got.entrySet()) {
                                if (!first) b.append(',');
                                first = false;
                                SharePartitionOffsetInfo v = e.getValue();
                                b.append('"').append(e.getKey()).append("\":[")
                                        .append(v == null ? -1 : v.startOffset()).append(',')
                                        .append(v == null ? -1 : v.lag().orElse(-1L)).append(']');
                            }
                            System.out.println(b.append("}}"));
                            break;
                        }
                        case "alter": {
                            Map<TopicPartition, Long> offsets = new HashMap<>();
                            for (String spec : s.subList(2, s.size())) {
                                String tp = spec.substring(0, spec.indexOf('='));
                                int colon = tp.lastIndexOf(':');
                                offsets.put(new TopicPartition(tp.substring(0, colon), Integer.parseInt(tp.substring(colon + 1))),
                                        Long.parseLong(spec.substring(spec.indexOf('=') + 1)));
                            }
                            admin.alterShareGroupOffsets(group, offsets).all().get();
                            System.out.println("{\"kind\":\"alter\"}");
                            break;
                        }
                        case "delete-offsets":
                            admin.deleteShareGroupOffsets(group, new HashSet<>(s.subList(2, s.size()))).all().get();
                            System.out.println("{\"kind\":\"delete-offsets\"}");
                            break;
                        case "delete":
                            admin.deleteShareGroups(List.of(group)).all().get();
                            System.out.println("{\"kind\":\"delete\"}");
                            break;
                        default:
                            throw new IllegalArgumentException(kind);
                    }
                } catch (ExecutionException e) {
                    System.out.println("{\"kind\":\"error\",\"step\":\"" + kind + "\",\"error\":\""
                            + e.getCause().getClass().getSimpleName() + "\"}");
                }
                System.out.flush();
            }
        }
    }
}
