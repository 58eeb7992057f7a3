package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// s3CLI is a command line whose store is bucket under prefix, with the
// bucket's credentials in the process's environment (where the AWS SDK
// reads them: the test cannot be parallel).
func s3CLI(t *testing.T, bucket *testenv.S3, prefix, params string) *cli {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", bucket.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bucket.SecretKey)
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s%s", bucket.Bucket, prefix, bucket.Endpoint, bucket.Region, params)
	return c
}

// The recovery docs/operations.md ("Bucket versioning") describes: every
// store object deleted by mistake, and then ZooKeeper's data lost too,
// which without versioning loses the counters for good. Removing the
// delete markers brings the store back as it was; verify agrees, restore
// re-creates the sequence above every ID it handed out, and the deleted
// sequence stays deleted.
func TestVersionedBucketUndoesAMistakenDelete(t *testing.T) {
	bucket := testenv.ObjectStore(t)
	bucket.EnableVersioning(t)
	c := s3CLI(t, bucket, "seqkeeper", "")
	ctx := context.Background()
	c.ok("create", "orders")
	c.initialise("orders", 5000)
	c.ok("take", "orders", "-n", "10")
	c.ok("create", "gone")
	c.initialise("gone", 300)
	c.ok("delete", "gone", "--yes")
	c.ok("restore") // the store covers orders' ceiling
	if out := c.ok("verify"); !strings.Contains(out, "0 unsafe") {
		t.Fatalf("verify before the mistake:\n%s", out)
	}

	// The mistake: 'aws s3 rm --recursive s3://BUCKET/seqkeeper/'.
	deleted := bucket.Keys(t, "seqkeeper/")
	if len(deleted) == 0 {
		t.Fatal("no store object to delete")
	}
	for _, key := range deleted {
		if _, err := bucket.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket.Bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	if out, _, code := c.run("", "verify"); code != 1 || !strings.Contains(out, "unsafe   orders") {
		t.Fatalf("verify after the delete: exit %d\n%s\nwant exit 1 with orders unsafe", code, out)
	}
	// And before anyone runs restore, ZooKeeper loses the root.
	if err := testenv.DeleteAll(c.conn, c.root); err != nil {
		t.Fatal(err)
	}

	// verify found the meta object missing and wrote it again (the same:
	// this root, the default bucket count), and before it the release
	// object (the release of the store's formats), so their delete
	// markers are no longer their current versions; the others are
	// undone.
	back := bucket.Undelete(t, "seqkeeper/")
	if now := bucket.Keys(t, "seqkeeper/"); len(back) != len(deleted)-2 || !slices.Equal(now, deleted) {
		t.Fatalf("undeleted %q; the store holds %q; want %q back", back, now, deleted)
	}
	if out, errOut, code := c.run("", "verify"); code != 3 || !strings.Contains(errOut, "1 sequence(s) lost with ZooKeeper's data and not re-created yet") || !strings.Contains(out, "orders: in the store but not in ZooKeeper: lost with ZooKeeper's data") || !strings.Contains(out, "gone: deleted") || !strings.Contains(out, "0 unsafe") {
		t.Fatalf("verify after undeleting: exit %d (want 3, the loss not yet repaired)\n%s%s", code, out, errOut)
	}
	if out := c.ok("restore", "--dry-run"); !strings.Contains(out, "re-create at 5001") {
		t.Fatalf("restore --dry-run:\n%s", out)
	}
	c.ok("restore")
	if out := c.ok("take", "orders", "-n", "3"); strings.TrimSpace(out) != "5001:5003" {
		t.Fatalf("take after the restore: %q; want 5001:5003", out)
	}
	if ok, _, _ := c.conn.Session().Exists(ctx, c.root+"/gone"); ok {
		t.Fatal("the deleted sequence came back")
	}
	if out := c.ok("verify"); !strings.Contains(out, "0 unsafe") {
		t.Fatalf("verify after the restore:\n%s", out)
	}
}

// A store URL with sse_kms_key_id: the operator commands write every
// object encrypted with the key and read it back; a malformed key is a
// configuration error (exit 2) naming the fix, and a key the server does
// not hold fails the first write (exit 1) saying so.
func TestStoreURLWithSSEKMS(t *testing.T) {
	bucket := testenv.KMSObjectStore(t)
	c := s3CLI(t, bucket, "enc", "&sse_kms_key_id="+bucket.KMSKeyID)
	ctx := context.Background()
	c.ok("create", "orders")
	c.initialise("orders", 700)
	c.ok("create", "gone")
	c.initialise("gone", 30)
	c.ok("delete", "gone", "--yes")
	c.ok("restore")
	if out := c.ok("verify"); !strings.Contains(out, "0 unsafe") {
		t.Fatalf("verify:\n%s", out)
	}
	if out, errOut, code := c.run("", "export"); code != 0 || !strings.Contains(out, `"name":"gone","deleted":true`) || !strings.Contains(out, `"ceiling":700`) {
		t.Fatalf("export: exit %d\n%s\n%s", code, out, errOut)
	}
	keys := bucket.Keys(t, "enc/")
	if len(keys) == 0 {
		t.Fatal("no object in the store")
	}
	for _, key := range keys {
		head, err := bucket.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket.Bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if head.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !strings.HasSuffix(aws.ToString(head.SSEKMSKeyId), bucket.KMSKeyID) {
			t.Errorf("%s: encryption %q, key %q; want aws:kms with %s", key, head.ServerSideEncryption, aws.ToString(head.SSEKMSKeyId), bucket.KMSKeyID)
		}
	}

	for _, tc := range []struct{ store, want string }{
		{"s3://ids/p?endpoint=http://minio:9000&sse_kms_key_id=", "empty sse_kms_key_id"},
		{"s3://ids/p?region=us-east-1&sse_kms_key_id=my-key", `sse_kms_key_id "my-key" is not a KMS key that AWS S3 takes`},
		{"s3://ids/p?region=us-east-1&sse_kms_key_id=arn:aws:kms:eu-west-1:111122223333:alias/ids", "is a key in eu-west-1, the store is in us-east-1"},
		{"s3://ids/p?region=us-east-1&kms_key_id=alias/ids", `unknown parameter "kms_key_id"`},
	} {
		c.env["SEQKEEPER_STORE"] = tc.store
		if _, errOut, code := c.run("", "verify"); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("verify with store %s: exit %d, %q; want 2 saying %q", tc.store, code, errOut, tc.want)
		}
	}
	c.env["SEQKEEPER_STORE"] = fmt.Sprintf("s3://%s/other?endpoint=%s&region=%s&sse_kms_key_id=no-such-key", bucket.Bucket, bucket.Endpoint, bucket.Region)
	if _, errOut, code := c.run("", "restore"); code != 1 || !strings.Contains(errOut, `the KMS key "no-such-key" (sse_kms_key_id in the store URL) does not exist`) {
		t.Errorf("restore with a key the server does not hold: exit %d, %q", code, errOut)
	}
}

// serve started beside a store that does not answer yet (MinIO starting
// with it, or its pod being replaced) waits for it and says so, as it
// waits for ZooKeeper, and becomes ready once the store answers, instead
// of exiting at once.
func TestServeWaitsForAStoreThatStartsAfterIt(t *testing.T) {
	m, err := testenv.NewMinIO(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	bucket := m.S3()
	bucket.Bucket = "late"
	c := s3CLI(t, bucket, "seqkeeper", "")
	r := c.serve("r1")
	eventually(t, "serve to say it waits for the store", func() bool {
		return strings.Contains(r.stderr.String(), "the S3 endpoint does not answer yet; waiting for it")
	})
	select {
	case code := <-r.exit:
		t.Fatalf("serve exited (status %d) while the store did not answer yet", code)
	default:
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "serve to become ready once the store answers", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "late")
	// Ready is not yet leading: the primary's first sweep picks the
	// sequence up.
	eventually(t, "serve to hand out IDs", func() bool { ranges, code := r.ids(t, "late", 5); return code == http.StatusOK && len(ranges) > 0 })
}
