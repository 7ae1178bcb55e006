import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A consume-transform-produce loop with exactly-once semantics, the way a Java application
 * writes one with kafka-clients 3.9 (KIP-447: one transactional producer per instance, the
 * consumer's group metadata passed to sendOffsetsToTransaction):
 *
 *   TxnCopier BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TRANSACTIONAL_ID [PAUSE_MS]
 *
 * Every input record (key k, value v) becomes one output record (key k, value "copy-" + v),
 * produced in the transaction that also commits the consumer's offsets; PAUSE_MS (default 0)
 * is slept between the sends and the commit, so that a test's crash lands inside a transaction. The input is read with
 * isolation.level=read_committed. When anything fails (the server was killed, a request timed
 * out, the transaction was aborted by the coordinator), the producer and consumer are closed and
 * made again: initTransactions() fences and aborts what was left open, the consumer starts from
 * the committed offsets, so nothing is lost or copied twice. Runs until "close" (or the end of
 * stdin) arrives. Prints JSON lines: {"kind":"txn","records":n}, {"kind":"assigned",...},
 * {"kind":"recovering","error":...}, {"kind":"closed"}.
 */
public final class TxnCopier {
    private TxnCopier() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: TxnCopier BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TRANSACTIONAL_ID [PAUSE_MS]");
            System.exit(2);
        }
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], txnId = args[4];
        long pauseMs = args.length > 5 ? Long.parseLong(args[5]) : 0;
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.trim().equals("close")) {
                        break;
                    }
                }
            } catch (Exception ignored) {
                // end of stdin: stop as well
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        long copied = 0;
        while (!stop.get()) {
            KafkaConsumer<String, String> consumer = consumer(bootstrap, group, txnId);
            KafkaProducer<String, String> producer = producer(bootstrap, txnId);
            try {
                producer.initTransactions();
                consumer.subscribe(List.of(in), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        KcoordClient.emit("revoked", "partitions", partitions(parts));
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        KcoordClient.emit("assigned", "partitions", partitions(parts));
                    }
                });
                while (!stop.get()) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    if (records.isEmpty()) {
                        continue;
                    }
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(out, r.key(), "copy-" + r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                    copied += records.count();
                    KcoordClient.emit("txn", "records", records.count(), "total", copied);
                }
            } catch (Exception e) {
                // fenced, timed out, aborted: start over from the committed offsets
                KcoordClient.emit("recovering", "error", e.toString());
            } finally {
                producer.close(Duration.ofSeconds(5));
                consumer.close(Duration.ofSeconds(5));
            }
        }
        KcoordClient.emit("closed");
        System.out.flush();
        System.exit(0);
    }

    private static List<Integer> partitions(Collection<TopicPartition> parts) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(tp.partition());
        }
        return out;
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String group, String clientId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId + "-consumer");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "200");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, txnId + "-producer");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "15000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }
}
