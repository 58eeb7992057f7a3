package persist

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// benchStorage is a backend for a benchmark and a way to measure what the
// store occupies on it.
type benchStorage struct {
	backend Backend
	size    func() (bytes, objects int64)
}

var benchBackends = []struct {
	name string
	open func(b *testing.B) benchStorage
}{
	{"s3", func(b *testing.B) benchStorage {
		env := testenv.ObjectStore(b)
		return benchStorage{newS3(b, env, "bench"), func() (int64, int64) { return s3Size(b, env, "bench/") }}
	}},
	{"file", func(b *testing.B) benchStorage {
		dir := b.TempDir()
		fb, err := NewFile(dir)
		if err != nil {
			b.Fatal(err)
		}
		return benchStorage{fb, func() (int64, int64) { return dirSize(b, dir) }}
	}},
}

func s3Size(b *testing.B, env *testenv.S3, prefix string) (size, objects int64) {
	p := s3.NewListObjectsV2Paginator(env.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(env.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			size += aws.ToInt64(o.Size)
			objects++
		}
	}
	return size, objects
}

func dirSize(b *testing.B, dir string) (size, objects int64) {
	fb, _ := NewFile(dir)
	for i := range DefaultBuckets {
		data, _, err := fb.Get(context.Background(), bucketKey(i))
		if err == nil {
			size += int64(len(data))
			objects++
		}
	}
	return size, objects
}

// benchRecords makes n records that look like a production store's: names
// of a few services, ceilings spread over a wide range, zxids of one
// ensemble epoch.
func benchRecords(n int) []Record {
	recs := make([]Record, n)
	now := time.Now()
	for i := range recs {
		recs[i] = Record{
			Name:    fmt.Sprintf("%s-%s-%06d", []string{"orders", "invoices", "users", "shipments"}[i%4], []string{"eu", "us", "ap"}[i%3], i),
			Ceiling: int64(i)*7919%1_000_000_000 + 1000,
			Czxid:   0x500000000 + int64(i),
			Mzxid:   0x500000000 + int64(i)*13,
			Version: int32(i % 5000),
			Updated: now.Add(-time.Duration(i) * time.Millisecond),
		}
	}
	return recs
}

// populate writes recs in batches of 10,000 (as a restore would).
func populate(b *testing.B, s *Store, recs []Record) {
	b.Helper()
	start := time.Now()
	for i := 0; i < len(recs); i += 10_000 {
		if err := s.Put(context.Background(), 1, recs[i:min(i+10_000, len(recs))]...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("wrote %d records in %s", len(recs), time.Since(start).Round(time.Millisecond))
}

// BenchmarkLoad: how long a new primary takes to read 100,000 and
// 1,000,000 sequences from the store (what a restore after a ZooKeeper wipe
// starts with), and how much the store occupies. The records are written
// in store writes of 10,000 (log segments) and compacted into the buckets,
// the state a store is in at a failover (plus at most CompactSegments short
// segments).
//
//	go test -run '^$' -bench 'Load' -benchtime 3x ./persist/
func BenchmarkLoad(b *testing.B) {
	for _, total := range []int{100_000, 1_000_000} {
		for _, bb := range benchBackends {
			b.Run(fmt.Sprintf("records=%d/%s", total, bb.name), func(b *testing.B) {
				st := bb.open(b)
				s := newStore(b, st.backend, StoreOptions{})
				populate(b, s, benchRecords(total))
				if _, err := s.Compact(context.Background(), 1); err != nil {
					b.Fatal(err)
				}
				size, objects := st.size()
				for b.Loop() {
					recs, err := newStore(b, st.backend, StoreOptions{}).Load(context.Background())
					if err != nil || len(recs) != total {
						b.Fatalf("load: %d records, %v", len(recs), err)
					}
				}
				b.ReportMetric(float64(size), "store-bytes")
				b.ReportMetric(float64(objects), "objects")
				b.ReportMetric(float64(size)/float64(total), "bytes/record")
			})
		}
	}
}

// BenchmarkPut: one raise of one sequence with a warm cache, in stores of
// 1,000 and 100,000 sequences (the raised bucket holds about n/256). PUTs
// per raise is what S3 bills and what bounds the primary's raise rate.
func BenchmarkPut(b *testing.B) {
	for _, bb := range benchBackends {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/sequences=%d", bb.name, n), func(b *testing.B) {
				st := bb.open(b)
				cb := &counting{Backend: st.backend}
				s := newStore(b, cb, StoreOptions{})
				recs := benchRecords(n)
				populate(b, s, recs)
				hot := recs[n/2]
				ctx := context.Background()
				mustPutB(b, s, hot) // warm the cache of the hot bucket
				gets, puts := cb.gets.Load(), cb.puts.Load()
				i := 0
				for b.Loop() {
					i++
					hot.Ceiling += 1000
					hot.Mzxid++
					hot.Updated = time.Time{}
					if err := s.Put(ctx, 1, hot); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cb.puts.Load()-puts)/float64(i), "PUTs/raise")
				b.ReportMetric(float64(cb.gets.Load()-gets)/float64(i), "GETs/raise")
			})
		}
	}
}

func mustPutB(b *testing.B, s *Store, recs ...Record) {
	b.Helper()
	if err := s.Put(context.Background(), 1, recs...); err != nil {
		b.Fatal(err)
	}
}
