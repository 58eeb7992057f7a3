package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Store faults: any single store object lost, or rolled back to an earlier
// version, at any moment (a compaction of the primary's included), and the
// newest segments of the log lost together. The store must never answer
// less than it was told without it costing at most availability: no ID
// twice, no deleted name back. The primary repairs what the object held
// (its audit, every 2 s here) from ZooKeeper, which holds every ceiling of
// a live sequence and a copy of every tombstone.

// storeObject is one object of the file store, by key.
type storeObject struct {
	key  string
	path string
}

// storeObjects lists the objects of the store now, of one kind ("meta",
// "epoch", "buckets/", "log/") or all.
func (e *env) storeObjects(kind string) []storeObject {
	var out []storeObject
	_ = filepath.WalkDir(e.storeDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		key, _ := filepath.Rel(e.storeDir, p)
		key = filepath.ToSlash(key)
		if kind == "" || key == kind || strings.HasSuffix(kind, "/") && strings.HasPrefix(key, kind) {
			out = append(out, storeObject{key: key, path: p})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b storeObject) int { return strings.Compare(a.key, b.key) })
	return out
}

// archiveStore keeps the current version of every store object, the
// versions a later fault may roll an object back to (up to three per key).
func (e *env) archiveStore() {
	for _, o := range e.storeObjects("") {
		data, err := os.ReadFile(o.path)
		if err != nil {
			continue // deleted meanwhile
		}
		vs := e.archive[o.key]
		if n := len(vs); n > 0 && string(vs[n-1]) == string(data) {
			continue
		}
		e.archive[o.key] = append(lastN2(vs, 2), data)
	}
}

func lastN2(vs [][]byte, n int) [][]byte {
	if len(vs) > n {
		return vs[len(vs)-n:]
	}
	return vs
}

// storeFaultKinds are the faults opStoreFault chooses from.
var storeFaultKinds = []string{
	"bucket-loss", "bucket-rollback", "segment-loss", "segment-rollback",
	"newest-segments-loss", "epoch-loss", "epoch-rollback", "meta-loss",
}

// opStoreFault loses one store object, or rolls one back to an earlier
// version, or loses the newest segments of the log; half the time while
// the primary's store compacts its log. It is injected only while
// ZooKeeper holds a validated state of every live sequence in its current
// epoch: ZooKeeper then knows on its own what the object held (the
// promise does not cover ZooKeeper and the store both losing data).
func (e *env) opStoreFault(r *rand.Rand) (string, bool) {
	if e.noStoreFaults.Load() || !e.zkHealthy() {
		return "", false
	}
	kind := storeFaultKinds[r.IntN(len(storeFaultKinds))]
	var victims []storeObject
	var restore []byte // for a rollback: the earlier version
	switch kind {
	case "bucket-loss":
		victims = pickOne(r, e.storeObjects("buckets/"))
	case "segment-loss":
		victims = pickOne(r, e.storeObjects("log/"))
	case "newest-segments-loss":
		segs := e.storeObjects("log/")
		n := 1 + r.IntN(4)
		victims = segs[max(0, len(segs)-n):]
	case "epoch-loss":
		victims = e.storeObjects("epoch")
	case "meta-loss":
		victims = e.storeObjects("meta")
	case "bucket-rollback", "segment-rollback", "epoch-rollback":
		prefix := map[string]string{"bucket-rollback": "buckets/", "segment-rollback": "log/", "epoch-rollback": "epoch"}[kind]
		var keys []string
		for k, vs := range e.archive {
			if (k == prefix || strings.HasSuffix(prefix, "/") && strings.HasPrefix(k, prefix)) && len(vs) > 0 {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return "", false
		}
		slices.Sort(keys)
		key := keys[r.IntN(len(keys))]
		vs := e.archive[key]
		restore = vs[r.IntN(len(vs))]
		victims = []storeObject{{key: key, path: filepath.Join(e.storeDir, filepath.FromSlash(key))}}
	}
	if len(victims) == 0 {
		return "", false
	}
	// Half the time the fault strikes while a compaction runs.
	during := r.IntN(2) == 0
	var wg sync.WaitGroup
	var compaction string
	if during {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		prim := e.primary()
		epoch, _, err := prim.store.Epoch(ctx)
		if err == nil {
			wg.Go(func() {
				res, err := prim.store.Compact(ctx, epoch)
				compaction = fmt.Sprintf("; the compaction it struck folded %d segments, deleted %d (%v)", res.Segments, res.Deleted, err)
			})
			time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		}
	}
	for _, v := range victims {
		var err error
		if restore != nil {
			err = writeFileAtomic(v.path, restore)
		} else {
			err = os.Remove(v.path)
		}
		if err != nil && !os.IsNotExist(err) {
			e.fatalf("store fault %s on %s: %v", kind, v.key, err)
		}
	}
	wg.Wait()
	// What the object held is the store's no more until the primary
	// repairs it: the records of a bucket or segment. The epoch and meta
	// objects hold none, and must cost nothing.
	e.m.mu.Lock()
	e.m.storeGen++
	if strings.HasPrefix(kind, "bucket") || strings.HasPrefix(kind, "segment") || strings.HasPrefix(kind, "newest") {
		for _, s := range e.specs {
			e.m.lost[s.name] = true
			delete(e.m.coveredSince, s.name)
		}
	}
	e.m.mu.Unlock()
	keys := make([]string, len(victims))
	for i, v := range victims {
		keys[i] = v.key
	}
	what := fmt.Sprintf("store-fault %s %s%s", kind, strings.Join(keys, ","), compaction)
	e.fault(what)
	return what, true
}

func pickOne(r *rand.Rand, objs []storeObject) []storeObject {
	if len(objs) == 0 {
		return nil
	}
	return []storeObject{objs[r.IntN(len(objs))]}
}

// writeFileAtomic replaces path with data, as S3 replaces an object: a
// reader sees the old version or the new one.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), ".model-rollback")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
