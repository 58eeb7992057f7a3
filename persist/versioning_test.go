package persist

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// What a versioned bucket keeps of the store, and what bringing it back
// does (docs/operations.md, "Bucket versioning"): the log segments a
// compaction deletes stay as noncurrent versions behind delete markers,
// unseen by the store; an object overwritten by mistake is read as
// corrupt until its previous version is copied back; and undoing every
// delete under the prefix (removing the delete markers, as after an
// 'aws s3 rm --recursive') brings back the deleted objects together with
// the segments compaction had folded, which the store reads as the same
// records, because folding a segment twice changes nothing.
func TestVersionedBucketRecovery(t *testing.T) {
	t.Parallel()
	env := testenv.ObjectStore(t)
	env.EnableVersioning(t)
	ctx := testCtx(t)
	const prefix = "seqkeeper/"
	open := func() *Store { return newStore(t, newS3(t, env, "seqkeeper"), StoreOptions{Buckets: 4}) }
	s := open()
	for i := range 12 {
		mustPut(t, s, 0, rec(fmt.Sprintf("n%d", i%5), int64(100*(i+1)), int64(i+1)))
	}
	if _, err := tombstoneOf(ctx, s, "n4", 5000); err != nil {
		t.Fatal(err)
	}
	res, err := s.Compact(ctx, 0)
	if err != nil || res.Deleted != 13 {
		t.Fatalf("compact: %+v, %v; want 13 segments folded and deleted", res, err)
	}
	want, err := open().Load(ctx)
	if err != nil || len(want) != 5 {
		t.Fatalf("load: %d records, %v", len(want), err)
	}

	// The folded segments are noncurrent versions now, out of the
	// store's sight.
	if keys := env.Keys(t, prefix+logPrefix); len(keys) != 0 {
		t.Fatalf("the store lists %q after compaction", keys)
	}
	if n := versionsUnder(t, env, prefix+logPrefix); n != 13 {
		t.Fatalf("%d noncurrent versions of log segments, want the 13 folded", n)
	}

	// An overwrite by mistake: every bucket object replaced by junk.
	buckets := env.Keys(t, prefix+bucketPrefix)
	for _, key := range buckets {
		if _, err := env.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(env.Bucket), Key: aws.String(key), Body: strings.NewReader("junk")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := open().Load(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("load after the overwrite: %v, want ErrCorrupt", err)
	}
	for _, key := range buckets {
		env.RestorePrevious(t, key)
	}
	if got, err := open().Load(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after copying the previous versions back (%v):\n%+v\nwant\n%+v", err, got, want)
	}

	// A delete by mistake: every object under the prefix.
	for _, key := range env.Keys(t, prefix) {
		if _, err := env.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(env.Bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := open().Load(ctx); err != nil || len(got) != 0 {
		t.Fatalf("load after the delete: %d records, %v; want an empty store", len(got), err)
	}
	back := env.Undelete(t, prefix)
	if segs := len(env.Keys(t, prefix+logPrefix)); segs != 13 {
		t.Fatalf("undeleted %d objects, %d of them log segments; want the 13 folded ones back too", len(back), segs)
	}
	s = open()
	if got, err := s.Load(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after undeleting (%v):\n%+v\nwant\n%+v", err, got, want)
	}
	// The store goes on: a write, and a compaction that folds the
	// undeleted segments again and deletes them.
	mustPut(t, s, 0, rec("n0", 9000, 99))
	if res, err := s.Compact(ctx, 0); err != nil || res.Deleted != 14 {
		t.Fatalf("compact after undeleting: %+v, %v; want 14 segments folded and deleted", res, err)
	}
	if r := mustGet(t, open(), "n0"); r.Ceiling != 9000 {
		t.Fatalf("n0 after the write: %+v", r)
	}
	if r := mustGet(t, open(), "n4"); !r.Deleted() {
		t.Fatalf("n4 after undeleting: %+v, want its tombstone", r)
	}
}

// versionsUnder counts the noncurrent versions of objects under prefix.
func versionsUnder(t *testing.T, env *testenv.S3, prefix string) int {
	t.Helper()
	n := 0
	p := s3.NewListObjectVersionsPaginator(env.Client(), &s3.ListObjectVersionsInput{Bucket: aws.String(env.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			if !aws.ToBool(v.IsLatest) {
				n++
			}
		}
	}
	return n
}
