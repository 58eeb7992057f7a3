package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// release is one version of seqkeeper in a rolling upgrade: its image and
// its library, as a worker binary.
type release struct {
	// Name is "old" or "new": worker ids start with go-<Name>.
	Name string
	// Image is its seqkeeper image.
	Image string
	// Version is what its replicas report on /v1/status (the image's
	// org.opencontainers.image.version label).
	Version string
	// Commit is the image's org.opencontainers.image.revision label.
	Commit string
	// Worker is a test binary of its container suite: its
	// TestChaosWorkerProcess is a library worker of this version.
	Worker string
}

func (r release) String() string {
	return fmt.Sprintf("%s (%s, %s)", r.Version, r.Image, shortCommit(r.Commit))
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// upgradeScript builds the earlier release; the suite runs in integration/.
const upgradeScript = "scripts/upgrade-from.sh"

// findReleases returns the earlier release (the commit
// SEQKEEPER_UPGRADE_FROM names, else integration/images/upgrade-from) and
// this tree's (seqkeeper:dev and this test binary). It fails the test,
// naming the script that builds it, when the earlier release's image or
// worker binary is missing: nothing is skipped.
func findReleases(ctx context.Context, t *testing.T) (old, cur release) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "../"+upgradeScript, "--print")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 3 {
		t.Fatalf("integration: which release to upgrade from (bash %s --print): %v: %s", upgradeScript, err, stderr.String())
	}
	old = release{Name: "old", Commit: lines[0], Image: lines[1], Worker: lines[2]}
	cur = release{Name: "new", Image: SeqkeeperImage, Worker: os.Args[0]}

	docker, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("integration: docker client: %v", err)
	}
	defer docker.Close()
	var missing []string
	if _, err := os.Stat(old.Worker); errors.Is(err, os.ErrNotExist) {
		missing = append(missing, old.Worker)
	} else if err != nil {
		t.Fatalf("integration: %v", err)
	}
	for _, r := range []*release{&old, &cur} {
		img, err := docker.ImageInspect(ctx, r.Image)
		switch {
		case cerrdefs.IsNotFound(err):
			missing = append(missing, r.Image)
			continue
		case err != nil:
			t.Fatalf("integration: inspect image %s: %v", r.Image, err)
		}
		r.Version = img.Config.Labels["org.opencontainers.image.version"]
		r.Commit = img.Config.Labels["org.opencontainers.image.revision"]
	}
	if len(missing) > 0 {
		setting := ""
		if v := os.Getenv("SEQKEEPER_UPGRADE_FROM"); v != "" {
			setting = "SEQKEEPER_UPGRADE_FROM=" + v + " "
		}
		t.Fatalf("integration: missing %s; build them from the repository root with: bash scripts/images.sh && %sbash %s",
			strings.Join(missing, ", "), setting, upgradeScript)
	}
	if old.Version == cur.Version {
		t.Fatalf("integration: %s and %s both report version %q: the upgrade could not tell the replicas apart", old.Image, cur.Image, old.Version)
	}
	return old, cur
}

// rotation is the set of replicas the HTTP workers spread their calls
// over, like a Service's endpoints: a replica leaves it before it is
// stopped, once no call to it is in flight, and joins it once ready.
type rotation struct {
	mu       sync.Mutex
	nodes    []*Node
	inflight map[*Node]int
}

func newRotation() *rotation { return &rotation{inflight: map[*Node]int{}} }

// Acquire picks a replica in service at random.
func (r *rotation) Acquire(rng *rand.Rand) *Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.nodes) == 0 {
		return nil
	}
	n := r.nodes[rng.IntN(len(r.nodes))]
	r.inflight[n]++
	return n
}

// Release ends a call to n.
func (r *rotation) Release(n *Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight[n]--
}

// add puts n in service.
func (r *rotation) add(n *Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, n)
}

// remove takes n out of service and returns once no call to it is in
// flight.
func (r *rotation) remove(ctx context.Context, n *Node) error {
	r.mu.Lock()
	r.nodes = slices.DeleteFunc(r.nodes, func(m *Node) bool { return m == n })
	r.mu.Unlock()
	for {
		r.mu.Lock()
		busy := r.inflight[n]
		r.mu.Unlock()
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still has %d calls in flight: %w", n.Name, busy, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// in returns the replicas in service.
func (r *rotation) in() []*Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.nodes)
}

// storeFormats returns the header lines of the store's meta and epoch
// objects, read from MinIO ("seqkeeper-store v1, seqkeeper-epoch v2"):
// the formats an earlier release may refuse.
func storeFormats(ctx context.Context, c *Cluster) string {
	s3c := newS3Client(c.MinIOEndpoint())
	var parts []string
	for _, key := range []string{"meta", "epoch"} {
		out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(StoreBucket), Key: aws.String(c.StorePrefix() + "/" + key)})
		if err != nil {
			parts = append(parts, key+": unreadable")
			continue
		}
		line, _ := bufio.NewReader(out.Body).ReadString('\n')
		out.Body.Close()
		parts = append(parts, strings.TrimSpace(line))
	}
	return strings.Join(parts, ", ")
}
