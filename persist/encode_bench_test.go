package persist

import (
	"fmt"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkEncodeBucket measures encoding one bucket object of 400
// records (100,000 sequences over the default 256 buckets), which every
// bucket write pays:
//
//	go test -run '^$' -bench EncodeBucket -benchmem ./persist/
func BenchmarkEncodeBucket(b *testing.B) {
	o := benchBucket()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeBucket(o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBucket measures decoding the same object, which a write
// to a bucket the cache holds pays (the cache keeps buckets encoded), with
// the encoded and the decoded size per record beside it:
//
//	go test -run '^$' -bench 'codeBucket' -benchmem ./persist/
func BenchmarkDecodeBucket(b *testing.B) {
	data, err := encodeBucket(benchBucket())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var o *bucketObject
	for b.Loop() {
		if o, err = decodeBucket(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data))/float64(len(o.recs)), "encoded-B/record")
	b.ReportMetric(float64(unsafe.Sizeof(Record{})), "decoded-B/record")
}

func benchBucket() *bucketObject {
	o := &bucketObject{bucket: 1, buckets: DefaultBuckets, epoch: 3}
	for i := range 400 {
		o.recs = append(o.recs, Record{Name: fmt.Sprintf("seq-%06d", i), Ceiling: int64(1e6 + i), Epoch: 3,
			Czxid: 1 << 32, Mzxid: 1<<32 + int64(i), Version: 7, Updated: time.UnixMilli(1767225600000), Start: 1, End: 1 << 62})
	}
	return o
}
