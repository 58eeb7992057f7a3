package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func TestMain(m *testing.M) { Main(m) }

func TestSharedZooKeeperGivesEachTestItsOwnRoot(t *testing.T) {
	t.Parallel()
	a, b := ZooKeeper(t), ZooKeeper(t)
	if a.Root == b.Root {
		t.Fatalf("two calls returned the same root %s", a.Root)
	}
	conn := Connect(t, a.Servers, 10*time.Second)
	if _, err := conn.Session().Create(context.Background(), a.Path("x"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := conn.Session().Exists(context.Background(), b.Path("x")); err != nil || ok {
		t.Fatalf("node created under %s is visible under %s (exists=%v, err=%v)", a.Root, b.Root, ok, err)
	}
}

func TestEnsembleQuorumWipeAndRollback(t *testing.T) {
	t.Parallel()
	e := StartEnsemble(t, 3)

	// Written through one server, read through another.
	c0 := Connect(t, []string{e.Addr(0)}, 4*time.Second)
	if _, err := c0.Session().Create(context.Background(), "/k", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	c2 := Connect(t, []string{e.Addr(2)}, 4*time.Second)
	if err := c2.Session().Sync(context.Background(), "/k"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := c2.Session().Get(context.Background(), "/k"); err != nil || string(got) != "v1" {
		t.Fatalf("read through server 3 = %q, %v; want v1", got, err)
	}

	// One server down: the other two still form a quorum.
	e.Kill(0)
	if _, err := c2.Session().Set(context.Background(), "/k", []byte("v2"), -1); err != nil {
		t.Fatalf("write with 2 of 3 servers up: %v", err)
	}

	// Keep a copy of server 3's data to roll back to later.
	e.Stop(2)
	saved := t.TempDir()
	if err := e.SaveData(2, saved); err != nil {
		t.Fatal(err)
	}
	// Two down: no quorum, writes cannot succeed. The survivor stops
	// serving once it sees that: a follower when its leader's connection
	// drops, a leader within syncLimit ticks without a quorum's acks.
	err := e.servers[1].proc.waitFor(2*syncLimit*TickTime, func(ctx context.Context) error {
		if mode, err := e.Mode(ctx, 1); err == nil {
			return fmt.Errorf("still serves (%s) with 2 of 3 servers down", mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Whole-ensemble data loss: every server comes back empty.
	if err := e.WipeAll(); err != nil {
		t.Fatal(err)
	}
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	c1 := Connect(t, []string{e.Addr(1)}, 4*time.Second)
	if ok, _, err := c1.Session().Exists(context.Background(), "/k"); err != nil || ok {
		t.Fatalf("after wipe /k exists=%v err=%v; want gone", ok, err)
	}

	// Roll every server back to the saved copy: /k returns with v2.
	e.StopAll()
	for i := 0; i < e.Len(); i++ {
		if err := e.RestoreData(i, saved); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	c1b := Connect(t, []string{e.Addr(1)}, 4*time.Second)
	if got, _, err := c1b.Session().Get(context.Background(), "/k"); err != nil || string(got) != "v2" {
		t.Fatalf("after rollback /k = %q, %v; want v2", got, err)
	}
}

func TestObjectStoreConditionalWrites(t *testing.T) {
	t.Parallel()
	s := ObjectStore(t)
	c := s.Client()
	ctx := context.Background()
	put := func(body string, mod func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
		in := &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("obj"), Body: bytes.NewReader([]byte(body))}
		mod(in)
		return c.PutObject(ctx, in)
	}
	first, err := put("a", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	if err != nil {
		t.Fatalf("create with If-None-Match: %v", err)
	}
	if _, err := put("b", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); !isPreconditionFailed(err) {
		t.Fatalf("second create with If-None-Match: err = %v; want PreconditionFailed", err)
	}
	if _, err := put("c", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"0000"`) }); !isPreconditionFailed(err) {
		t.Fatalf("update with a wrong If-Match: err = %v; want PreconditionFailed", err)
	}
	if _, err := put("d", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag }); err != nil {
		t.Fatalf("update with the right If-Match: %v", err)
	}
}

func TestMinIORestartKeepsData(t *testing.T) {
	t.Parallel()
	m := StartMinIO(t)
	s := m.S3()
	s.Bucket = "restart-test"
	ctx := context.Background()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	if _, err := s.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)}); err == nil {
		t.Fatal("stopped MinIO still answers")
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatalf("bucket lost across restart: %v", err)
	}
}

func isPreconditionFailed(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed"
}

// A port FreePort hands out is locked for this process: another test
// process (here: another open file description) cannot reserve it.
func TestFreePortIsReservedAcrossProcesses(t *testing.T) {
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(portLocks, strconv.Itoa(p)), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no lock file for port %d: %v", p, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatalf("port %d could be reserved a second time", p)
	}
}
