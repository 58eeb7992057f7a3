package persist

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// A store names the release that wrote its formats (the release object),
// and a build too old for one of its objects says which release to run:
// the refusal of a newer format names it, or says "a later release" when
// the store does not (written before releases were recorded).
func TestStoreNamesTheReleaseOfANewerFormat(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		b := isolated(t, open())
		s := newStore(t, b, StoreOptions{Root: "/r", Release: "v0.2.0"})
		mustPut(t, s, 1, rec("a", 10, 1))

		// A later release moves the meta object on to a format this
		// build does not read, and records itself in a later version
		// of the release object, with a line this build does not know.
		_, etag, err := b.Get(ctx, metaKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, metaKey, []byte("seqkeeper-store v3\nshards 16\nroot \"/r\"\n"), etag); err != nil {
			t.Fatal(err)
		}
		_, etag, err = b.Get(ctx, releaseKey)
		if err != nil {
			t.Fatalf("the release object this build wrote: %v", err)
		}
		later := "seqkeeper-release v2\nrelease \"v0.4.0\"\nseqkeeper-bucket 2\nseqkeeper-epoch 4\nseqkeeper-log 2\nseqkeeper-store 3\nsigned-by someone\n"
		if _, err := b.Put(ctx, releaseKey, []byte(later), etag); err != nil {
			t.Fatal(err)
		}
		old := newStore(t, b, StoreOptions{Root: "/r", Release: "v0.2.0"})
		err = old.Check(ctx)
		want := "store format seqkeeper-store v3 was written by seqkeeper v0.4.0; this is v0.2.0, which reads up to v2: run v0.4.0 or later"
		var nf *NewerFormatError
		if !errors.Is(err, ErrNewerFormat) || !errors.As(err, &nf) || nf.WrittenBy != "v0.4.0" || !strings.Contains(err.Error(), want) {
			t.Fatalf("check of a store whose meta object v0.4.0 wrote in format 3: %v; want ErrNewerFormat saying %q", err, want)
		}
		t.Log(err)
		if _, err := old.Load(ctx); !strings.Contains(err.Error(), want) {
			t.Errorf("load: %v, want %q", err, want)
		}
		// Without a release of its own, the build says "this build".
		if err := newStore(t, b, StoreOptions{Root: "/r"}).Check(ctx); err == nil || !strings.Contains(err.Error(), "v0.4.0; this build, which reads up to v2: run v0.4.0 or later") {
			t.Errorf("check without StoreOptions.Release: %v", err)
		}

		// The release object names another version of the format than
		// the object's (a later release moved it on once more): the
		// store does not say who wrote this one.
		_, etag, err = b.Get(ctx, releaseKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, releaseKey, []byte(strings.Replace(later, "seqkeeper-store 3", "seqkeeper-store 4", 1)), etag); err != nil {
			t.Fatal(err)
		}
		unknown := "store format seqkeeper-store v3 was written by a later release; this is v0.2.0, which reads up to v2: run that release or a later one"
		if err := newStore(t, b, StoreOptions{Root: "/r", Release: "v0.2.0"}).Check(ctx); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), unknown) {
			t.Errorf("check with the release of another format version: %v; want %q", err, unknown)
		}
		// A store without a release object (written before releases
		// were recorded): the same.
		if err := b.Delete(ctx, releaseKey); err != nil {
			t.Fatal(err)
		}
		if err := newStore(t, b, StoreOptions{Root: "/r", Release: "v0.2.0"}).Check(ctx); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), unknown) {
			t.Errorf("check of a store without a release object: %v; want %q", err, unknown)
		}

		// Another object of a newer format (here the epoch object,
		// the meta object being readable) is explained the same way.
		b2 := isolated(t, open())
		mustPut(t, newStore(t, b2, StoreOptions{Root: "/r", Release: "v0.2.0"}), 1, rec("a", 10, 1))
		_, etag, err = b2.Get(ctx, epochKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b2.Put(ctx, epochKey, []byte("seqkeeper-epoch v4\nepoch 1\n"), etag); err != nil {
			t.Fatal(err)
		}
		_, etag, _ = b2.Get(ctx, releaseKey)
		if _, err := b2.Put(ctx, releaseKey, []byte(later), etag); err != nil {
			t.Fatal(err)
		}
		err = newStore(t, b2, StoreOptions{Root: "/r", Release: "v0.2.0"}).Check(ctx)
		if want := "seqkeeper-epoch v4 was written by seqkeeper v0.4.0; this is v0.2.0, which reads up to v3: run v0.4.0 or later"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "epoch object") {
			t.Errorf("check of a store whose epoch object v0.4.0 wrote in format 4: %v; want %q", err, want)
		}
	})
}

// The release object is written with the store's formats, by the release
// that moves them on, and only then: a release of the same formats, or a
// build without a release, leaves it as it is. The meta and epoch objects
// are what a build without it writes, byte for byte, so that builds before
// the release object (which refuse lines they do not know) read the store.
func TestStoreRecordsTheReleaseOfItsFormats(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		release := func(b Backend) (releaseState, error) {
			t.Helper()
			data, _, err := b.Get(ctx, releaseKey)
			if err != nil {
				return releaseState{}, err
			}
			return decodeRelease(data)
		}
		b := isolated(t, open())
		s := newStore(t, b, StoreOptions{Root: "/r", Release: "v0.2.0"})
		if _, err := s.AdvanceEpoch(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, 1, rec("a", 10, 1))
		r, err := release(b)
		if err != nil || r.release != "v0.2.0" || !maps.Equal(r.formats, writtenFormats) {
			t.Fatalf("the release object of a new store: %+v, %v; want v0.2.0 with %v", r, err, writtenFormats)
		}
		// A later release of the same formats leaves it.
		s3 := newStore(t, b, StoreOptions{Root: "/r", Release: "v0.3.0"})
		if _, err := s3.AdvanceEpoch(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s3, 2, rec("a", 20, 2))
		if r, err := release(b); err != nil || r.release != "v0.2.0" {
			t.Errorf("after a release of the same formats wrote: %+v, %v; want v0.2.0 kept", r, err)
		}

		// A build without a release records nothing; its meta and epoch
		// objects are those of a build with one.
		plain := isolated(t, open())
		p := newStore(t, plain, StoreOptions{Root: "/r"})
		if _, err := p.AdvanceEpoch(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, p, 1, rec("a", 10, 1))
		if _, err := release(plain); !errors.Is(err, ErrNotFound) {
			t.Errorf("the release object of a store written without a release: %v, want none", err)
		}
		for _, key := range []string{metaKey, epochKey} {
			with, _, err1 := b.Get(ctx, key)
			without, _, err2 := plain.Get(ctx, key)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			// The epoch objects differ in epoch, holder and time only.
			if strings.SplitN(string(with), "\n", 2)[0] != strings.SplitN(string(without), "\n", 2)[0] ||
				lineKeys(with) != lineKeys(without) {
				t.Errorf("%s object with a release:\n%s\nwithout:\n%s", key, with, without)
			}
		}

		// The store of an earlier format, migrated: the release that
		// migrates it is recorded.
		mig := isolated(t, open())
		copyStore(t, mig, "testdata/v2-store")
		ms := newStore(t, mig, StoreOptions{Root: "/all-sequences", Release: "v0.2.0"})
		e, err := ms.AdvanceEpoch(ctx, "new-primary")
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, ms, e, rec("orders", 9100, 2))
		if r, err := release(mig); err != nil || r.release != "v0.2.0" {
			t.Errorf("the release object after migrating a store of meta v1: %+v, %v", r, err)
		}
	})
}

// lineKeys is the first word of every line of an object after its first.
func lineKeys(data []byte) string {
	var keys []string
	for _, l := range strings.Split(string(data), "\n")[1:] {
		k, _, _ := strings.Cut(l, " ")
		keys = append(keys, k)
	}
	return strings.Join(keys, " ")
}

func TestReleaseObject(t *testing.T) {
	r := releaseState{release: "v0.2.0", formats: writtenFormats}
	got, err := decodeRelease(encodeRelease(r))
	if err != nil || got.release != r.release || !maps.Equal(got.formats, r.formats) {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{
		"", "seqkeeper-release\n", "seqkeeper-store v1\nrelease \"x\"\n", "seqkeeper-release v1\n",
		"seqkeeper-release v1\nrelease x\n", "seqkeeper-release v1\nrelease \"\"\n",
		"seqkeeper-release v1\nrelease \"x\"\nseqkeeper-store 0\n", "seqkeeper-release v1\nrelease \"x\"",
	} {
		if _, err := decodeRelease([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeRelease(%q): %v, want ErrCorrupt", bad, err)
		}
	}
	for _, c := range []struct {
		formats map[string]int
		want    bool
	}{
		{nil, true},
		{writtenFormats, false},
		{map[string]int{metaMagic: metaVersion - 1, epochMagic: epochVersion}, true},
		{map[string]int{metaMagic: metaVersion + 1}, false},
		{map[string]int{metaMagic: metaVersion - 1, epochMagic: epochVersion + 1}, false},
	} {
		if got := supersedes(releaseState{release: "x", formats: c.formats}); got != c.want {
			t.Errorf("supersedes(%v) = %v, want %v", c.formats, got, c.want)
		}
	}
}
