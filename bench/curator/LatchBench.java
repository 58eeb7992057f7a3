import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * The Curator baseline of the crash handover (docs/performance.md, issue
 * 29): one LeaderLatch candidate on PATH with a SESSION_MS session, which
 * prints "leader <unix ms>" when it becomes leader and runs until killed.
 *
 *   java LatchBench ZK_CONNECT PATH SESSION_MS ID
 */
public final class LatchBench {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(Integer.parseInt(args[2]))
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 10))
                .build();
        client.start();
        client.blockUntilConnected();
        LeaderLatch latch = new LeaderLatch(client, args[1], args[3]);
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                System.out.println("leader " + System.currentTimeMillis());
                System.out.flush();
            }

            @Override
            public void notLeader() {
                System.out.println("follower " + System.currentTimeMillis());
                System.out.flush();
            }
        });
        latch.start();
        System.out.println("started " + System.currentTimeMillis());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
