// A vendor's table system publishing a shift with Kafka's Java client in transactions
// (tests/kafka/test_transactional_producer.py compiles it with javac against the broker's jars).
//
// java TransactionalShift BOOTSTRAP TOPIC LINES COMPRESSION TRANSACTIONAL_ID COMMIT_EVERY ABORT_AFTER ALTERED ZOMBIE_AFTER
//
// Publishes every line of LINES (one event, JSON) keyed by its table_id, with compression
// COMPRESSION, acks=all, idempotence on and transactional.id TRANSACTIONAL_ID, committing every
// COMMIT_EVERY lines. After line ABORT_AFTER it sends ALTERED altered copies of the lines before
// it (a new event_id each) in a transaction of their own and aborts it. After line ZOMBIE_AFTER
// it sends ALTERED more altered copies in an open transaction, flushed to the broker, and a new
// producer with the same transactional.id starts: the first one is fenced (a zombie: its
// commit fails) and its open transaction aborted; the new one publishes the rest of the lines.
// Prints one line per step to stdout; exits 0 only if the zombie was fenced.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransactionalShift {
    private static final Pattern TABLE = Pattern.compile("\"table_id\"\\s*:\\s*\"([^\"]+)\"");
    private static final Pattern EVENT_ID = Pattern.compile("\"event_id\"\\s*:\\s*\"([0-9A-Z]{26})\"");

    private TransactionalShift() {}

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String compression, String tid) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "vendor-" + tid);
        KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        return producer;
    }

    static String table(String line) {
        Matcher m = TABLE.matcher(line);
        if (!m.find()) {
            throw new IllegalArgumentException("no table_id in " + line);
        }
        return m.group(1);
    }

    /** The line with another event ID (its last four characters ZZZZ): a new event, never committed. */
    static String altered(String line) {
        Matcher m = EVENT_ID.matcher(line);
        if (!m.find()) {
            throw new IllegalArgumentException("no event_id in " + line);
        }
        String id = m.group(1);
        return line.substring(0, m.start(1)) + id.substring(0, 22) + "ZZZZ" + line.substring(m.end(1));
    }

    static void send(KafkaProducer<byte[], byte[]> producer, String topic, String line) {
        byte[] key = table(line).getBytes(StandardCharsets.UTF_8);
        producer.send(new ProducerRecord<>(topic, key, line.getBytes(StandardCharsets.UTF_8)));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        List<String> lines = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args[2]), StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                lines.add(line);
            }
        }
        String compression = args[3];
        String tid = args[4];
        int commitEvery = Integer.parseInt(args[5]);
        int abortAfter = Integer.parseInt(args[6]);
        int alteredCount = Integer.parseInt(args[7]);
        int zombieAfter = Integer.parseInt(args[8]);

        KafkaProducer<byte[], byte[]> producer = producer(bootstrap, compression, tid);
        boolean fenced = false;
        int inTransaction = 0;
        int commits = 0;
        producer.beginTransaction();
        for (int i = 0; i < lines.size(); i++) {
            send(producer, topic, lines.get(i));
            inTransaction++;
            int done = i + 1;
            boolean abortHere = done == abortAfter;
            boolean zombieHere = done == zombieAfter;
            if (inTransaction >= commitEvery || abortHere || zombieHere || done == lines.size()) {
                producer.commitTransaction();
                commits++;
                inTransaction = 0;
                if (abortHere) {
                    producer.beginTransaction();
                    for (int j = 0; j < alteredCount; j++) {
                        send(producer, topic, altered(lines.get(j % done)));
                    }
                    producer.flush();
                    producer.abortTransaction();
                    System.out.println("aborted a transaction of " + alteredCount + " altered copies after line " + done);
                }
                if (zombieHere) {
                    producer.beginTransaction();
                    for (int j = 0; j < alteredCount; j++) {
                        send(producer, topic, altered(lines.get((done - 1 - j + done) % done)));
                    }
                    producer.flush();
                    KafkaProducer<byte[], byte[]> newer = producer(bootstrap, compression, tid);
                    try {
                        producer.commitTransaction();
                        System.out.println("the zombie committed: it was not fenced");
                    } catch (ProducerFencedException e) {
                        fenced = true;
                    } catch (KafkaException e) {
                        fenced = e.getCause() instanceof ProducerFencedException
                                || e.getClass().getSimpleName().contains("Fenced");
                        if (!fenced) {
                            throw e;
                        }
                    }
                    producer.close();
                    producer = newer;
                    System.out.println("a newer producer fenced the zombie after line " + done
                            + " (its open transaction of " + alteredCount + " altered copies aborted)");
                }
                if (done < lines.size()) {
                    producer.beginTransaction();
                }
            }
        }
        producer.close();
        System.out.println("published " + lines.size() + " lines in " + commits + " committed transactions ("
                + compression + ", transactional.id " + tid + ")");
        System.exit(fenced ? 0 : 3);
    }
}
