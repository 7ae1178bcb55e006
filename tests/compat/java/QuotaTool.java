import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;

/**
 * Java's Admin client quotas (kafka-clients 3.9.1) for kcoord's quota tests.
 *
 *   QuotaTool BOOTSTRAP describe
 *       one line per entity: TYPE=NAME[,TYPE=NAME] key=value... (NAME <default> for a default)
 *   QuotaTool BOOTSTRAP alter TYPE=NAME[,TYPE=NAME] key=value|key= ...
 *       "ok", or "error CLASS MESSAGE" (key= removes the key)
 */
public class QuotaTool {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(props)) {
            if (args[1].equals("describe")) {
                Map<ClientQuotaEntity, Map<String, Double>> all =
                    admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get(30, TimeUnit.SECONDS);
                List<String> lines = new ArrayList<>();
                for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
                    StringBuilder sb = new StringBuilder();
                    for (Map.Entry<String, String> p : new TreeMap<>(e.getKey().entries()).entrySet()) {
                        if (sb.length() > 0) sb.append(',');
                        sb.append(p.getKey()).append('=').append(p.getValue() == null ? "<default>" : p.getValue());
                    }
                    for (Map.Entry<String, Double> v : new TreeMap<>(e.getValue()).entrySet()) {
                        sb.append(' ').append(v.getKey()).append('=').append(v.getValue());
                    }
                    lines.add(sb.toString());
                }
                java.util.Collections.sort(lines);
                for (String l : lines) System.out.println(l);
            } else {
                Map<String, String> entity = new HashMap<>();
                for (String pair : args[2].split(",")) {
                    String[] kv = pair.split("=", 2);
                    entity.put(kv[0], kv[1].equals("<default>") ? null : kv[1]);
                }
                List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
                for (int i = 3; i < args.length; i++) {
                    String[] kv = args[i].split("=", 2);
                    ops.add(new ClientQuotaAlteration.Op(kv[0], kv[1].isEmpty() ? null : Double.valueOf(kv[1])));
                }
                try {
                    admin.alterClientQuotas(List.of(new ClientQuotaAlteration(new ClientQuotaEntity(entity), ops)))
                        .all().get(30, TimeUnit.SECONDS);
                    System.out.println("ok");
                } catch (ExecutionException e) {
                    System.out.println("error " + e.getCause().getClass().getSimpleName() + " " + e.getCause().getMessage());
                }
            }
        }
    }
}
