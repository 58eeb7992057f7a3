package persist

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// The KMS keys a store URL may name: on AWS the forms S3 takes, checked
// before any request; on an S3-compatible server any name without spaces.
// A key ARN in another region than the store's is refused: S3 encrypts
// only with a key of the bucket's region.
func TestSSEKMSKeyForms(t *testing.T) {
	t.Parallel()
	const (
		uuid = "1234abcd-12ab-34cd-56ef-1234567890ab"
		arn  = "arn:aws:kms:eu-west-1:111122223333:key/" + uuid
	)
	for _, id := range []string{
		uuid, "mrk-1234abcd12ab34cd56ef1234567890ab", arn,
		"arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/" + uuid,
		"alias/seqkeeper", "alias/aws/s3", "arn:aws:kms:eu-west-1:111122223333:alias/seqkeeper-store",
	} {
		cfg, err := ParseS3URL("s3://ids/seqkeeper?region=eu-west-1&sse_kms_key_id=" + id)
		if err != nil || cfg.SSEKMSKeyID != id {
			t.Errorf("AWS key %q: %+v, %v", id, cfg, err)
		}
	}
	for _, id := range []string{"my-key", "1234", "alias", "alias/", "arn:aws:kms:eu-west-1:1111:key/" + uuid,
		"arn:aws:s3:::ids", "1234ABCD-12AB-34CD-56EF-1234567890AB", "key/" + uuid} {
		_, err := ParseS3URL("s3://ids/seqkeeper?region=eu-west-1&sse_kms_key_id=" + id)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "arn:aws:kms:REGION:ACCOUNT:key/KEY-ID") {
			t.Errorf("AWS key %q: %v; want ErrBadURL showing the forms", id, err)
		}
	}
	// MinIO and others name their keys as they please.
	if cfg, err := ParseS3URL("s3://ids?endpoint=http://minio:9000&sse_kms_key_id=my-key"); err != nil || cfg.SSEKMSKeyID != "my-key" {
		t.Errorf("MinIO key: %+v, %v", cfg, err)
	}
	for _, bad := range []string{"s3://ids?sse_kms_key_id=", "s3://ids?endpoint=http://minio:9000&sse_kms_key_id=a%20b",
		"s3://ids?endpoint=http://minio:9000&sse_kms_key_id=a%0Ab", "s3://ids?sse_kms_key_id=" + uuid + "&sse_kms_key_id=" + uuid} {
		if _, err := ParseS3URL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("ParseS3URL(%q) = %v, want ErrBadURL", bad, err)
		}
	}
	if _, err := ParseS3URL("s3://ids?kms_key_id=" + uuid); err == nil || !strings.Contains(err.Error(), "known: endpoint, region, sse_kms_key_id") {
		t.Errorf("a mistyped parameter: %v; want the known ones listed", err)
	}

	// NewS3 checks the same (for configurations not read from a URL),
	// and the key's region against the store's, without a request.
	ctx := testCtx(t)
	aws := S3Config{Bucket: "ids", Region: "us-east-1", AccessKey: "a", SecretKey: "s"}
	for id, want := range map[string]string{
		"my-key": "is not a KMS key that AWS S3 takes",
		arn:      "is a key in eu-west-1, the store is in us-east-1",
	} {
		c := aws
		c.SSEKMSKeyID = id
		if _, err := NewS3(ctx, c); !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("NewS3 with key %q: %v; want ErrBadURL saying %q", id, err, want)
		}
	}
	c := aws
	c.Region, c.SSEKMSKeyID = "eu-west-1", arn
	b, err := NewS3(ctx, c)
	if err != nil {
		t.Fatalf("NewS3 with a key of its region: %v", err)
	}
	if want := "s3://ids (eu-west-1, SSE-KMS key " + arn + ")"; b.String() != want {
		t.Errorf("String() = %q, want %q", b.String(), want)
	}
}

// A store with SSE-KMS writes every object encrypted with its key: the
// meta, epoch, log and bucket objects, through writes, a tombstone, a
// seal and a compaction. Another client reads it back whole, and the
// server's own HeadObject says which key encrypted each object.
func TestSSEKMSEncryptsEveryObject(t *testing.T) {
	t.Parallel()
	env := testenv.KMSObjectStore(t)
	ctx := testCtx(t)
	s := newStore(t, newS3(t, env, "enc"), StoreOptions{Buckets: 4})
	epoch, err := s.AdvanceEpoch(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		mustPut(t, s, epoch, rec(fmt.Sprintf("n%d", i%4), int64(100*(i+1)), int64(i+1)))
	}
	if _, err := tombstoneOf(ctx, s, "n3", 2000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx, epoch); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, epoch, rec("after", 50, 99)) // one segment left in the log
	want, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := newStore(t, newS3(t, env, "enc"), StoreOptions{Buckets: 4}).Load(ctx)
	if err != nil || len(got) != 5 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("another client's load: %v\n%+v\nwant\n%+v", err, got, want)
	}

	kinds := map[string]int{}
	for _, key := range env.Keys(t, "enc/") {
		head, err := env.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(env.Bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if head.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !isKey(aws.ToString(head.SSEKMSKeyId), env.KMSKeyID) {
			t.Errorf("%s: encryption %q with key %q; want aws:kms with %q", key, head.ServerSideEncryption, aws.ToString(head.SSEKMSKeyId), env.KMSKeyID)
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(key, "enc/"), "/")
		kinds[kind]++
	}
	for _, kind := range []string{"meta", "epoch", "log", "buckets"} {
		if kinds[kind] == 0 {
			t.Errorf("no %s object checked (%v)", kind, kinds)
		}
	}
}

// isKey says whether the key id a server reports (AWS: the key's ARN;
// MinIO: arn:aws:kms:NAME) is the key configured as id.
func isKey(reported, id string) bool {
	return reported == id || strings.HasSuffix(reported, ":"+id) || strings.HasSuffix(reported, "/"+id)
}

// A key the server does not hold, and a server with no KMS at all: the
// store's first write fails with an error naming the setting to fix, not
// as a conflict (which a caller would retry forever), and writes nothing.
func TestSSEKMSWrongKey(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, c := range []struct {
		env  *testenv.S3
		key  string
		want string
	}{
		{testenv.KMSObjectStore(t), "no-such-key", `the KMS key "no-such-key" (sse_kms_key_id in the store URL) does not exist`},
		{testenv.ObjectStore(t), testenv.TestKMSKeyID, "the S3 server has no KMS, so it cannot encrypt with the KMS key"},
	} {
		url := fmt.Sprintf("s3://%s/wrong?endpoint=%s&region=%s&sse_kms_key_id=%s", c.env.Bucket, c.env.Endpoint, c.env.Region, c.key)
		b, err := Open(ctx, url, OpenOptions{AccessKey: c.env.AccessKey, SecretKey: c.env.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		err = newStore(t, b, StoreOptions{}).Put(ctx, 0, rec("orders", 100, 1))
		if err == nil || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("key %q on %s: %v\nwant an error saying %q", c.key, c.env.Endpoint, err, c.want)
		}
		if keys := c.env.Keys(t, "wrong/"); len(keys) != 0 {
			t.Errorf("key %q: objects written: %q", c.key, keys)
		}
	}
}
