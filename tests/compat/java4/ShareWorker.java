import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A Java kafka-clients 4.x share consumer that consumes (KIP-932, implicit acknowledgement),
 * driven by tests/integration/test_share_consumers.py:
 *
 *   ShareWorker BOOTSTRAP TOPIC GROUP CLIENT_ID [MODE]
 *
 * Prints {"kind":"record","p":P,"o":O,"d":DELIVERY_COUNT} for every record it is given, polls
 * until the line "close" (or the end of stdin), then closes (acknowledging what it got).
 * MODE: implicit (the default: each poll acknowledges the previous one's records), explicit
 * (share.acknowledgement.mode=explicit: ACCEPT each record, commitSync after each poll), release
 * (explicit, RELEASE each record: it comes again until the delivery-count limit archives it),
 * hold (stops polling after the first records, printing {"kind":"holding"}: they stay acquired).
 */
public final class ShareWorker {
    private ShareWorker() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], clientId = args[3];
        String mode = args.length > 4 ? args[4] : "implicit";
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (!mode.equals("implicit") && !mode.equals("hold")) p.put("share.acknowledgement.mode", "explicit");
        AtomicBoolean closing = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("close")) break;
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
                    ConsumerRecords<String, String> got = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : got) {
                        System.out.println("{\"kind\":\"record\",\"p\":" + r.partition() + ",\"o\":" + r.offset()
                            + ",\"d\":" + r.deliveryCount().orElse((short) -1) + "}");
                        if (mode.equals("explicit")) c.acknowledge(r, AcknowledgeType.ACCEPT);
                        if (mode.equals("release")) c.acknowledge(r, AcknowledgeType.RELEASE);
                    }
                    if (!got.isEmpty() && (mode.equals("explicit") || mode.equals("release"))) c.commitSync();
                    System.out.flush();
                    if (!got.isEmpty() && mode.equals("hold")) {
                        System.out.println("{\"kind\":\"holding\"}");
                        System.out.flush();
                        while (!closing.get()) Thread.sleep(100);
                    }
                } catch (Exception e) {
                    System.out.println("{\"kind\":\"error\",\"message\":\"" + e.getClass().getSimpleName() + "\"}");
                    System.out.flush();
                    Thread.sleep(200);
                }
            }
        }
        System.out.println("{\"kind\":\"closed\"}");
        System.out.flush();
    }
}
