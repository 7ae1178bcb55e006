import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * One transaction of Java kafka-clients 4.x (transactions v2 against a server finalizing
 * transaction.version 2) as a SASL/PLAIN user, for the ACL tests:
 *
 *   SecureTxnV2 BOOTSTRAP USER PASSWORD TOPIC GROUP TRANSACTIONAL_ID
 *
 * initTransactions, one record to TOPIC partition 0, offset 1 of TOPIC-0 sent to the
 * transaction for GROUP, commit. Prints one JSON line: {"kind":"committed"}, or
 * {"kind":"refused","at":"init"|"commit","error":<exception class>} when the server refuses.
 */
public final class SecureTxnV2 {
    private SecureTxnV2() {}

    public static void main(String[] args) {
        String bootstrap = args[0], user = args[1], password = args[2], topic = args[3], group = args[4], tid = args[5];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String at = "init";
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            at = "commit";
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "in a v2 transaction")).get();
            producer.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1)),
                    new ConsumerGroupMetadata(group));
            producer.commitTransaction();
            System.out.println("{\"kind\":\"committed\"}");
        } catch (Exception e) {
            Throwable cause = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
            System.out.println("{\"kind\":\"refused\",\"at\":\"" + at + "\",\"error\":\"" + cause.getClass().getSimpleName() + "\"}");
        }
        System.out.flush();
        System.exit(0);
    }
}
