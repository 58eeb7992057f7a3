// CuratorBench drives Apache Curator's DistributedAtomicLong.increment()
// from several threads against one ZooKeeper for a fixed time and prints
// one JSON line: the baseline that docs/performance.md compares seqkeeper's
// windows with (issue 18). Each thread has its own ZooKeeper session, as
// each client of 'seqkeeper bench' has, and increments the same counter.
//
// Usage: java -cp CLASSPATH CuratorBench ZK_CONNECT [threads] [seconds] [path]
//
// The retry policy is the one a user would pick for a hot counter: no
// sleep before the first retries, then a jittered backoff bounded at 10 ms
// (BoundedExponentialBackoffRetry(1, 10, 1000)); an increment that still
// fails is counted as failed, not as an ID.
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.retry.BoundedExponentialBackoffRetry;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorBench {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: CuratorBench ZK_CONNECT [threads] [seconds] [path]");
            System.exit(2);
        }
        String connect = args[0];
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 8;
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 5;
        String path = args.length > 3 ? args[3] : "/curator-bench/counter-" + System.nanoTime();

        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10_000, 10_000,
                    new ExponentialBackoffRetry(100, 3));
            c.start();
            c.blockUntilConnected();
            clients.add(c);
        }
        // Create the counter before the clock starts, as 'seqkeeper create'
        // does before 'seqkeeper bench'.
        new DistributedAtomicLong(clients.get(0), path, new BoundedExponentialBackoffRetry(1, 10, 1000)).initialize(0L);

        AtomicLong ids = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        long[][] latencies = new long[threads][];
        int[] counts = new int[threads];
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> workers = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < threads; i++) {
            final int t = i;
            DistributedAtomicLong counter = new DistributedAtomicLong(clients.get(i), path,
                    new BoundedExponentialBackoffRetry(1, 10, 1000));
            latencies[t] = new long[1 << 16];
            Thread w = new Thread(() -> {
                while (System.nanoTime() < deadline) {
                    long t0 = System.nanoTime();
                    try {
                        AtomicValue<Long> v = counter.increment();
                        if (!v.succeeded()) {
                            failed.incrementAndGet();
                            continue;
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        continue;
                    }
                    long d = System.nanoTime() - t0;
                    if (counts[t] == latencies[t].length) {
                        latencies[t] = Arrays.copyOf(latencies[t], counts[t] * 2);
                    }
                    latencies[t][counts[t]++] = d;
                    ids.incrementAndGet();
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        for (CuratorFramework c : clients) {
            c.close();
        }

        int n = 0;
        for (int c : counts) {
            n += c;
        }
        long[] all = new long[n];
        int k = 0;
        for (int t = 0; t < threads; t++) {
            System.arraycopy(latencies[t], 0, all, k, counts[t]);
            k += counts[t];
        }
        Arrays.sort(all);
        System.out.printf(
                "{\"baseline\":\"curator DistributedAtomicLong\",\"threads\":%d,\"duration_seconds\":%.3f,"
                        + "\"ids\":%d,\"ids_per_second\":%.1f,\"failed\":%d,"
                        + "\"latency_seconds\":{\"p50\":%.6f,\"p99\":%.6f,\"p999\":%.6f,\"max\":%.6f}}%n",
                threads, elapsed, ids.get(), ids.get() / elapsed, failed.get(),
                pct(all, 0.50), pct(all, 0.99), pct(all, 0.999), n == 0 ? 0 : all[n - 1] / 1e9);
    }

    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[Math.min(sorted.length - 1, (int) (sorted.length * p))] / 1e9;
    }
}
