import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A Java kafka-clients 4.x share consumer (KafkaShareConsumer, KIP-932), driven by
 * tests/integration/test_share_groups_clients.py through tests/clientlib.py's Background:
 *
 *   ShareMember BOOTSTRAP TOPIC GROUP CLIENT_ID
 *
 * Subscribes and polls until the line "close" (or the end of stdin), then closes (it leaves the
 * group). On the line "describe" it prints what the Admin client's listShareGroups and
 * describeShareGroups say of GROUP:
 *   {"kind":"described","listed":true,"state":"Stable","epoch":N,"members":[["client-id",ASSIGNED_PARTITIONS],...]}
 *   {"kind":"error","message":...}, {"kind":"closed"}
 */
public final class ShareMember {
    private ShareMember() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], clientId = args[3];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        AtomicBoolean closing = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("close")) break;
                    if (line.trim().equals("describe")) describe(bootstrap, group);
                }
            } catch (Exception e) {
                // end of input: close
            }
            closing.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            System.out.println("{\"kind\":\"subscribed\"}");
            System.out.flush();
            while (!closing.get()) {
                try {
                    c.poll(Duration.ofMillis(200));
                } catch (Exception e) {
                    Thread.sleep(200);
                }
            }
        }
        System.out.println("{\"kind\":\"closed\"}");
        System.out.flush();
    }

    private static void describe(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            boolean listed = false;
            for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
                if (g.groupId().equals(group)) listed = true;
            }
            Map<String, ShareGroupDescription> d = admin.describeShareGroups(List.of(group)).all().get();
            ShareGroupDescription sg = d.get(group);
            StringBuilder members = new StringBuilder();
            sg.members().forEach(m -> {
                if (members.length() > 0) members.append(',');
                members.append("[\"").append(m.clientId()).append("\",")
                        .append(m.assignment().topicPartitions().size()).append(']');
            });
            System.out.println("{\"kind\":\"described\",\"listed\":" + listed + ",\"state\":\"" + sg.groupState()
                    + "\",\"epoch\":" + sg.groupEpoch() + ",\"members\":[" + members + "]}");
        } catch (Exception e) {
            System.out.println("{\"kind\":\"error\",\"message\":\"" + String.valueOf(e).replace('"', '\'') + "\"}");
        }
        System.out.flush();
    }
}
