package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Fault scenarios around the store: an operator's delete and re-create of
// a sequence in use, and a store that loses objects ZooKeeper still
// depends on. See docs/guarantees.md.

// deleteRecreate is an operator deleting each sequence while the workers
// take from it (seqkeeper delete NAME --yes: a tombstone in the store,
// then the znode goes) and creating it again under the same name a moment
// later, as newChaos created it. The new incarnation must start above
// every ID the old one handed out: the checker sees both under one name.
// Workers meanwhile get "unknown sequence" (or wait for the primary to
// initialise the new znode), and go on.
func (ch *chaos) deleteRecreate(ctx context.Context) error {
	names := slices.Clone(chaosSequences)
	ch.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	replicas := ch.c.Replicas()
	for i, name := range names {
		if i > 0 {
			sleep(ctx, 3*time.Second)
		}
		r := replicas[ch.rng.IntN(len(replicas))]
		out, err := ch.seqkeeper(ctx, r, "delete", name, "--yes", "-o", "json")
		if err != nil {
			return err
		}
		var del struct {
			Ceiling int64 `json:"tombstone_ceiling"`
		}
		if err := json.Unmarshal([]byte(out), &del); err != nil {
			return fmt.Errorf("seqkeeper delete %s: unexpected output %q: %w", name, out, err)
		}
		ch.hist.Event("note", name, fmt.Sprintf("deleted by an operator on %s; tombstone ceiling %d", r.Name, del.Ceiling))
		// The operator takes a moment before creating it again.
		sleep(ctx, time.Duration(ch.rng.IntN(2000))*time.Millisecond)
		if _, err := ch.seqkeeper(ctx, r, append([]string{"create", name}, chaosCreateArgs[name]...)...); err != nil {
			return err
		}
		ch.hist.Event("note", name, "created again under the same name")
		ch.logf("sequence %s deleted (tombstone ceiling %d) and created again via %s", name, del.Ceiling, r.Name)
	}
	return nil
}

// seqkeeper runs the seqkeeper CLI in replica r's container (whose
// environment names the cluster's ZooKeeper and store) and returns its
// standard output; a non-zero exit is an error with the output.
func (ch *chaos) seqkeeper(ctx context.Context, r *Node, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, rd, err := r.Container.Exec(cctx, append([]string{"/seqkeeper"}, args...), tcexec.Multiplexed())
	var out []byte
	if rd != nil {
		out, _ = io.ReadAll(rd)
	}
	if err != nil || code != 0 {
		return "", fmt.Errorf("seqkeeper %s on %s: exit %d, %v: %s", strings.Join(args, " "), r.Name, code, err, out)
	}
	return string(out), nil
}

// loseStoreObjects deletes bucket objects of the store from MinIO (all of
// them, or a random part) while ZooKeeper keeps its data. The primary's
// audit must notice and persist every lost ceiling again. The fault
// returns only once the store covers every sequence's ceiling in
// ZooKeeper again, since a ZooKeeper data loss before that (the next fault
// of a mixed run may be one) would hit both and is not covered by the
// promise; it fails after 2 minutes.
func (ch *chaos) loseStoreObjects(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	zc, err := zkclient.Dial(dctx, ch.proxy.Addrs(), zkclient.Options{SessionTimeout: chaosSessionTimeout})
	cancel()
	if err != nil {
		return err
	}
	defer zc.Close()
	seqs, err := sequence.NewClient(zc, sequence.Options{})
	if err != nil {
		return err
	}
	store, err := ch.store(ctx)
	if err != nil {
		return err
	}
	s3c := newS3Client(ch.c.MinIOEndpoint())
	prefix := ch.c.StorePrefix() + "/buckets/"
	var keys []string
	pages := s3.NewListObjectsV2Paginator(s3c, &s3.ListObjectsV2Input{Bucket: aws.String(StoreBucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list s3://%s/%s: %w", StoreBucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("no store objects under s3://%s/%s", StoreBucket, prefix)
	}
	slices.Sort(keys)
	// Either every bucket object, or those of a random part of the
	// sequences (the workload's and the idle ones).
	lose := keys
	what := fmt.Sprintf("all %d bucket objects", len(keys))
	if ch.rng.IntN(2) == 0 {
		names := slices.Concat(chaosSequences, chaosIdleSequences)
		ch.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		lose = nil
		names = names[:1+ch.rng.IntN(len(names))]
		slices.Sort(names)
		for _, name := range names {
			k := prefix + storeBucketOf(name)
			if !slices.Contains(keys, k) {
				return fmt.Errorf("no store object %s for sequence %s (does the store have %d buckets?)", k, name, persist.DefaultBuckets)
			}
			if !slices.Contains(lose, k) {
				lose = append(lose, k)
			}
		}
		slices.Sort(lose)
		what = fmt.Sprintf("the bucket objects of %s (%s)", strings.Join(names, ", "), strings.Join(lose, " "))
	}
	// One request (at most 1000 keys) so that the loss is as sudden as
	// can be: a primary's audit running meanwhile sees all or nothing.
	objs := make([]types.ObjectIdentifier, len(lose))
	for i, k := range lose {
		objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
	}
	deleted := time.Now()
	res, err := s3c.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(StoreBucket),
		Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
	})
	if err == nil && len(res.Errors) > 0 {
		e := res.Errors[0]
		err = fmt.Errorf("%d keys not deleted, the first %s: %s", len(res.Errors), aws.ToString(e.Key), aws.ToString(e.Message))
	}
	if err != nil {
		return fmt.Errorf("delete %s from s3://%s: %w", what, StoreBucket, err)
	}
	ch.hist.Event("note", "minio", "deleted "+what)

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	for {
		gaps, err := storeGaps(wctx, seqs, store)
		switch {
		case err != nil:
			last = err.Error()
		case len(gaps) == 0:
			d := time.Since(deleted)
			ch.hist.Event("note", "minio", fmt.Sprintf("the store covers every ceiling in ZooKeeper again after %.1fs", d.Seconds()))
			ch.logf("store lost %s; it covers every ceiling in ZooKeeper again after %.1fs", what, d.Seconds())
			return nil
		default:
			last = strings.Join(gaps, "; ")
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("the store does not cover ZooKeeper's ceilings 2 minutes after losing %s (is the primary's audit running? SEQKEEPER_AUDIT_INTERVAL=%s): %s",
				what, chaosReplicaEnv["SEQKEEPER_AUDIT_INTERVAL"], last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// storeBucketOf returns the key, under the store's prefix, of the bucket
// object holding name's record in a store of persist.DefaultBuckets
// buckets: fnv-1a (32 bit) of the name modulo the count, a fixed part of
// the store's format (docs/architecture.md).
func storeBucketOf(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%04x", h.Sum32()%persist.DefaultBuckets)
}

// storeGaps compares every sequence's ceiling in ZooKeeper with the
// record the store holds now, and describes each sequence the store does
// not cover (no record, a tombstone, or a lower ceiling). ZooKeeper is read
// first: the primary writes the store before ZooKeeper, so a store read
// afterwards holds at least the ceiling ZooKeeper had, when it holds it.
func storeGaps(ctx context.Context, seqs *sequence.Client, store *persist.Store) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ceilings := map[string]int64{}
	names := slices.Concat(chaosSequences, chaosIdleSequences)
	for _, name := range names {
		st, _, err := seqs.Describe(ctx, name)
		if err != nil {
			return nil, err
		}
		ceilings[name] = st.Ceiling
	}
	var gaps []string
	for _, name := range names {
		rec, err := store.Get(ctx, name)
		switch {
		case errors.Is(err, persist.ErrNotFound):
			gaps = append(gaps, fmt.Sprintf("%s: ceiling %d in ZooKeeper, no record in the store", name, ceilings[name]))
		case err != nil:
			return nil, err
		case rec.Deleted():
			gaps = append(gaps, fmt.Sprintf("%s: ceiling %d in ZooKeeper, a tombstone in the store", name, ceilings[name]))
		case rec.Ceiling < ceilings[name]:
			gaps = append(gaps, fmt.Sprintf("%s: ceiling %d in ZooKeeper, %d in the store", name, ceilings[name], rec.Ceiling))
		}
	}
	return gaps, nil
}

// store opens the cluster's store (read only, as used here) from the test
// process.
func (ch *chaos) store(ctx context.Context) (*persist.Store, error) {
	b, err := persist.NewS3(ctx, persist.S3Config{
		Bucket:    StoreBucket,
		Prefix:    ch.c.StorePrefix(),
		Endpoint:  ch.c.MinIOEndpoint(),
		Region:    "us-east-1",
		AccessKey: MinIOUser,
		SecretKey: MinIOPassword,
	})
	if err != nil {
		return nil, err
	}
	return persist.NewStore(b, persist.StoreOptions{})
}
