package integration

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/zkclient"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

func TestMain(m *testing.M) {
	// The Ryuk reaper image cannot be pulled here; Cluster removes what it
	// creates itself.
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	flag.Parse()
	clusterSlotsFirst()
	// Requests to a replica's API, and answers, are held to the OpenAPI
	// document: each kind's first 50, then one in 10 (the workloads' take
	// loops and status polls make thousands alike).
	http.DefaultTransport = apitest.InstallDefault().Sampled(50, 10)
	code := m.Run()
	writeSlotLog()
	os.Exit(max(code, apitest.Check()))
}

// TestSmoke checks that the harness and the images do what the other suites
// rely on: a ZooKeeper ensemble that replicates, keeps a quorum through one
// crash and loses it in a partition; MinIO answering S3 conditional writes
// with 412 through pause and restart; seqkeeper containers that run a
// command and serve IDs.
func TestSmoke(t *testing.T) {
	takeClusterSlot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := NewCluster(ctx, t, Options{
		ZooKeepers:  3,
		MinIO:       true,
		Replicas:    1,
		ReplicaArgs: []string{"version"},
	})
	zoo1, zoo2, zoo3 := c.ZooKeepers[0], c.ZooKeepers[1], c.ZooKeepers[2]

	t.Run("seqkeeper container runs", func(t *testing.T) {
		r := c.Replicas()[0]
		state, err := r.Container.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Logs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if state.Running || state.ExitCode != 0 {
			t.Fatalf("seqkeeper version: running=%v exit code %d; output:\n%s", state.Running, state.ExitCode, out)
		}
		if !regexp.MustCompile(`^\S+\n?$`).MatchString(out) {
			t.Fatalf("seqkeeper version printed %q, want one version word", out)
		}
		t.Logf("seqkeeper version: %s", strings.TrimSpace(out))
	})

	t.Run("seqkeeper serve hands out IDs", func(t *testing.T) {
		r, err := c.AddReplica(ctx, "serve")
		if err != nil {
			t.Fatal(err)
		}
		// The operator CLI runs in the replica's container, with its
		// settings but one ZooKeeper server, each in turn; the replica
		// serves each name at once, so at least two of them are created
		// through a server its own session is not on.
		for _, zoo := range c.ZooKeepers {
			name := "smoke-" + zoo.Name
			create := []string{"/seqkeeper", "--zk", zoo.Name + ":" + portNumber(ZooKeeperPort), "create", name}
			code, out, err := r.Container.Exec(ctx, create, tcexec.Multiplexed())
			if err != nil || code != 0 {
				b, _ := io.ReadAll(out)
				t.Fatalf("%s: exit %d, %v: %s", strings.Join(create[1:], " "), code, err, b)
			}
			resp, err := http.Post("http://"+r.Addr(ReplicaPort)+"/v1/sequences/"+name+"/ids?count=5", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var ids struct{ Ranges [][2]int64 }
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ids) != nil || len(ids.Ranges) == 0 {
				t.Fatalf("take 5 IDs of %s, created through %s: %s %s", name, zoo.Name, resp.Status, body)
			}
			t.Logf("took IDs %v of %s from %s", ids.Ranges, name, r.Name)
		}
	})

	t.Run("write through one server, read through another", func(t *testing.T) {
		w := connectZK(t, zoo1)
		path := createSeq(t, w, "/smoke-", "hello")
		r := connectZK(t, zoo3)
		if err := r.Session().Sync(ctx, path); err != nil {
			t.Fatalf("sync %s via %s: %v", path, zoo3.Name, err)
		}
		data, _, err := r.Session().Get(ctx, path)
		if err != nil || string(data) != "hello" {
			t.Fatalf("get %s via %s = %q, %v; want %q", path, zoo3.Name, data, err, "hello")
		}
	})

	t.Run("quorum survives a killed server", func(t *testing.T) {
		if err := zoo2.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := zoo2.ZooKeeperMode(ctx); err == nil {
			t.Fatalf("%s still answers srvr after SIGKILL", zoo2.Name)
		}
		// If the killed server led, the other two elect a new leader first.
		path := eventuallyWrite(t, zoo1, "/killed-", "written while zoo2 is down", 30*time.Second)

		if err := zoo2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := c.WaitZooKeeperServing(wctx, zoo2); err != nil {
			t.Fatal(err)
		}
		r := connectZK(t, zoo2)
		if err := r.Session().Sync(ctx, path); err != nil {
			t.Fatalf("sync %s via restarted %s: %v", path, zoo2.Name, err)
		}
		if _, _, err := r.Session().Get(ctx, path); err != nil {
			t.Fatalf("restarted %s did not catch up: get %s: %v", zoo2.Name, path, err)
		}
	})

	t.Run("the network's DNS follows the nodes", func(t *testing.T) {
		// NewCluster and Reconnect wait for the names others dial
		// (waitResolvable): right after them a lookup must answer.
		for _, n := range []*Node{zoo1, zoo2, zoo3, c.MinIO} {
			addr, err := c.lookup(ctx, n.Name)
			if err != nil || addr != n.ip.String() {
				t.Fatalf("lookup of %s: %q, %v; want %s", n.Name, addr, err, n.ip)
			}
		}
		if addr, err := c.lookup(ctx, "no-such-node"); err == nil {
			t.Fatalf("lookup of a name no node has: %q, want an error", addr)
		}
		if err := zoo3.Disconnect(ctx); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			addr, err := c.lookup(ctx, zoo3.Name)
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still resolves (%q) 10s after it left the network", zoo3.Name, addr)
			}
		}
		if err := zoo3.Reconnect(ctx); err != nil {
			t.Fatal(err)
		}
		if addr, err := c.lookup(ctx, zoo3.Name); err != nil || addr != zoo3.ip.String() {
			t.Fatalf("lookup of %s right after Reconnect: %q, %v; want %s", zoo3.Name, addr, err, zoo3.ip)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := c.WaitZooKeeperServing(wctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("no writes without a quorum", func(t *testing.T) {
		for _, n := range []*Node{zoo2, zoo3} {
			if err := n.Disconnect(ctx); err != nil {
				t.Fatal(err)
			}
		}
		reconnected := false
		reconnect := func() {
			if reconnected {
				return
			}
			reconnected = true
			for _, n := range []*Node{zoo2, zoo3} {
				if err := n.Reconnect(ctx); err != nil {
					t.Error(err)
				}
			}
		}
		defer reconnect()

		// zoo1 notices the lost quorum within syncLimit ticks, then refuses
		// clients. Losing only the leader would do that too, but just for
		// the moment of an election; without a quorum it lasts.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := zoo1.ZooKeeperMode(ctx)
			if err != nil {
				t.Logf("%s alone stops serving: %v", zoo1.Name, err)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still serves 30s after it lost both peers", zoo1.Name)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			if mode, err := zoo1.ZooKeeperMode(ctx); err == nil {
				t.Fatalf("%s serves as %s without a quorum", zoo1.Name, mode)
			}
		}
		if err := tryWrite(zoo1, "/partitioned-", 3*time.Second); err == nil {
			t.Fatalf("write via %s succeeded without a quorum", zoo1.Name)
		} else {
			t.Logf("write via %s alone fails as it must: %v", zoo1.Name, err)
		}

		reconnect()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := c.WaitZooKeeperServing(wctx); err != nil {
			t.Fatal(err)
		}
		eventuallyWrite(t, zoo1, "/healed-", "after the partition", 30*time.Second)
	})

	t.Run("S3 conditional writes answer 412", func(t *testing.T) {
		s3c := newS3Client(c.MinIOEndpoint())
		bucket := "smoke"
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("create bucket: %v", err)
		}
		key := "ceilings/demo"
		put := func(s3c *s3.Client, body string, opt func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
			in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
			opt(in)
			return s3c.PutObject(ctx, in)
		}
		ifNoneMatch := func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }

		first, err := put(s3c, "1000", ifNoneMatch)
		if err != nil {
			t.Fatalf("create with If-None-Match *: %v", err)
		}
		_, err = put(s3c, "2000", ifNoneMatch)
		wantPreconditionFailed(t, "second create with If-None-Match *", err)
		_, err = put(s3c, "2000", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"0123456789abcdef0123456789abcdef"`) })
		wantPreconditionFailed(t, "update with a wrong If-Match ETag", err)
		if _, err := put(s3c, "2000", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag }); err != nil {
			t.Fatalf("update with the current ETag %s: %v", aws.ToString(first.ETag), err)
		}

		// A paused server accepts connections but answers nothing.
		if err := c.MinIO.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = s3c.HeadBucket(hctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		hcancel()
		if err == nil {
			t.Error("HeadBucket answered while MinIO was paused")
		}
		if err := c.MinIO.Unpause(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("HeadBucket after unpause: %v", err)
		}

		// The object outlives a graceful restart.
		if err := c.MinIO.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.MinIO.Start(ctx); err != nil {
			t.Fatal(err)
		}
		s3c = newS3Client(c.MinIOEndpoint())
		_, err = put(s3c, "3000", ifNoneMatch)
		wantPreconditionFailed(t, "create with If-None-Match * after a restart", err)
	})
}

// connectZK opens a session with exactly one server, closed when the test ends.
func connectZK(t *testing.T, n *Node) *zkclient.Client {
	t.Helper()
	c, err := dialZK(n, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// dialZK opens a session with one server, waiting up to timeout for it;
// the caller closes it.
func dialZK(n *Node, timeout time.Duration) (*zkclient.Client, error) {
	addr := n.Addr(ZooKeeperPort)
	c, err := zkclient.Dial(context.Background(), []string{addr}, zkclient.Options{SessionTimeout: 4 * time.Second, ConnectTimeout: timeout, TLS: n.cluster.ZooKeeperTLS()})
	if err != nil {
		return nil, fmt.Errorf("connect to %s at %s: %w", n.Name, addr, err)
	}
	return c, nil
}

// createSeq creates a persistent sequential znode under prefix.
func createSeq(t *testing.T, c *zkclient.Client, prefix, data string) string {
	t.Helper()
	path, err := c.Session().Create(context.Background(), prefix, []byte(data), zkclient.Sequential)
	if err != nil {
		t.Fatalf("create %s: %v", prefix, err)
	}
	return path
}

// tryWrite creates a sequential znode through a new session with n alone,
// giving up after timeout (a server without a quorum grants no session).
func tryWrite(n *Node, prefix string, timeout time.Duration) error {
	_, err := writeWithin(n, prefix, "", timeout)
	return err
}

// eventuallyWrite retries a write through n until it succeeds and returns
// the created path, failing the test after timeout.
func eventuallyWrite(t *testing.T, n *Node, prefix, data string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		path, err := writeWithin(n, prefix, data, 3*time.Second)
		if err == nil {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write via %s succeeded in %v; last error: %v", n.Name, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// writeWithin creates a sequential znode through a new session with n
// alone, within timeout in all.
func writeWithin(n *Node, prefix, data string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dialZK(n, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	path, err := c.Session().Create(ctx, prefix, []byte(data), zkclient.Sequential)
	if err != nil {
		return "", fmt.Errorf("create %s via %s: %w", prefix, n.Name, err)
	}
	return path, nil
}

// newS3Client returns an S3 client for MinIO at endpoint, independent of
// the host's AWS configuration.
func newS3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint:               aws.String(endpoint),
		Region:                     "us-east-1",
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(MinIOUser, MinIOPassword, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// wantPreconditionFailed fails the test unless err is S3's 412
// PreconditionFailed.
func wantPreconditionFailed(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want 412 PreconditionFailed", what)
	}
	var apiErr smithy.APIError
	var respErr *awshttp.ResponseError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" ||
		!errors.As(err, &respErr) || respErr.HTTPStatusCode() != http.StatusPreconditionFailed {
		t.Fatalf("%s: %v, want 412 PreconditionFailed", what, err)
	}
}
