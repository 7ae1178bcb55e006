import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions as Java kafka-clients 4.x runs them against a broker that finalizes
 * transaction.version 2 (KIP-890 part 2: no AddPartitionsToTxn / AddOffsetsToTxn, Produce v12,
 * TxnOffsetCommit v5, EndTxn v5 bumping the epoch), the way an application writes them:
 *
 *   TxnV2Scenarios BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TRANSACTIONAL_ID TRANSACTIONS
 *
 * A consume-transform-produce loop reads IN_TOPIC (read_committed) and, for TRANSACTIONS
 * transactions, copies what it polled to OUT_TOPIC with the consumer's offsets sent to the
 * transaction; every third transaction is aborted instead (its records and offsets are
 * discarded; the consumer rewinds to the committed offsets). Then a second producer with the
 * same transactional id fences the first, whose next commit must fail with
 * ProducerFencedException. Prints JSON lines: {"kind":"txn","outcome":"commit"|"abort",...},
 * {"kind":"fenced"} or {"kind":"not-fenced"}, {"kind":"done","copied":n}.
 */
public final class TxnV2Scenarios {
    private TxnV2Scenarios() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], txnId = args[4];
        int transactions = Integer.parseInt(args[5]);
        long copied = 0;
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, group);
             KafkaProducer<String, String> producer = producer(bootstrap, txnId)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            int done = 0;
            long deadline = System.currentTimeMillis() + 120_000;
            while (done < transactions && System.currentTimeMillis() < deadline) {
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
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                done++;
                if (done % 3 == 0) {
                    producer.abortTransaction();
                    // read the aborted records again: back to the committed offsets
                    for (TopicPartition tp : offsets.keySet()) {
                        OffsetAndMetadata c = consumer.committed(java.util.Set.of(tp)).get(tp);
                        consumer.seek(tp, c == null ? 0 : c.offset());
                    }
                    emit("txn", "outcome", "abort", "records", records.count());
                } else {
                    producer.commitTransaction();
                    copied += records.count();
                    emit("txn", "outcome", "commit", "records", records.count());
                }
            }

            // a second instance with the same transactional id fences this one
            try (KafkaProducer<String, String> second = producer(bootstrap, txnId)) {
                second.initTransactions();
                second.beginTransaction();
                second.send(new ProducerRecord<>(out, "second", "from-the-second-instance"));
                second.commitTransaction();
                // the zombie's send fails (INVALID_PRODUCER_EPOCH, abortable), and so does its
                // abort, fatally: EndTxn with its old epoch is PRODUCER_FENCED
                String sendError = "none";
                try {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(out, "zombie", "zombie")).get();
                    producer.commitTransaction();
                } catch (Exception e) {
                    sendError = e.toString();
                }
                try {
                    producer.abortTransaction();
                    emit("not-fenced", "send", sendError);
                } catch (ProducerFencedException e) {
                    emit("fenced", "send", sendError, "abort", e.toString());
                } catch (Exception e) {
                    emit("not-fenced", "send", sendError, "abort", e.toString());
                }
            }
        }
        emit("done", "copied", copied);
        System.out.flush();
        System.exit(0);
    }

    static void emit(String kind, Object... kv) {
        StringBuilder b = new StringBuilder("{\"kind\":\"").append(kind).append('"');
        for (int i = 0; i + 1 < kv.length; i += 2) {
            b.append(",\"").append(kv[i]).append("\":");
            Object v = kv[i + 1];
            if (v instanceof Number) {
                b.append(v);
            } else {
                b.append('"').append(String.valueOf(v).replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            }
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }
}
