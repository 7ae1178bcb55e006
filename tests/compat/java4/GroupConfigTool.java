import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The Java Admin (kafka-clients 4.x) on ConfigResource.Type.GROUP, for the group-config tests:
 *
 *   GroupConfigTool BOOTSTRAP STEP [-- STEP]...
 *   STEP: describe GROUP | alter GROUP OP:name[=value]...    OP set|delete
 *
 * One JSON line per step: {"kind":"describe","entries":{name:[value,source,synonym sources]}},
 * {"kind":"alter"}, or {"kind":"error","step":...,"error":<exception class>,"message":...}.
 */
public final class GroupConfigTool {
    private GroupConfigTool() {}

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
                ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, s.get(1));
                try {
                    if (s.get(0).equals("describe")) {
                        Config c = admin.describeConfigs(Collections.singleton(r),
                                new DescribeConfigsOptions().includeSynonyms(true)).all().get().get(r);
                        StringBuilder b = new StringBuilder("{\"kind\":\"describe\",\"entries\":{");
                        boolean first = true;
                        for (ConfigEntry e : c.entries()) {
                            if (!first) b.append(',');
                            first = false;
                            b.append(q(e.name())).append(":[").append(q(e.value())).append(',').append(q(e.source().name()))
                                    .append(',').append(q(e.type().name())).append(",[");
                            boolean f2 = true;
                            for (ConfigEntry.ConfigSynonym syn : e.synonyms()) {
                                if (!f2) b.append(',');
                                f2 = false;
                                b.append(q(syn.name() + "=" + syn.source().name()));
                            }
                            b.append("]]");
                        }
                        System.out.println(b.append("}}"));
                    } else {
                        List<AlterConfigOp> ops = new ArrayList<>();
                        for (String op : s.subList(2, s.size())) {
                            String kind = op.substring(0, op.indexOf(':'));
                            String kv = op.substring(op.indexOf(':') + 1);
                            String key = kv.contains("=") ? kv.substring(0, kv.indexOf('=')) : kv;
                            String value = kv.contains("=") ? kv.substring(kv.indexOf('=') + 1) : null;
                            ops.add(new AlterConfigOp(new ConfigEntry(key, value),
                                    AlterConfigOp.OpType.valueOf(kind.toUpperCase())));
                        }
                        admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
                        System.out.println("{\"kind\":\"alter\"}");
                    }
                } catch (ExecutionException e) {
                    Throwable c = e.getCause();
                    System.out.println("{\"kind\":\"error\",\"step\":" + q(s.get(0)) + ",\"error\":"
                            + q(c.getClass().getSimpleName()) + ",\"message\":" + q(c.getMessage()) + "}");
                }
            }
        }
        System.out.println("{\"kind\":\"done\"}");
    }

    private static String q(String s) {
        if (s == null) return "null";
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
