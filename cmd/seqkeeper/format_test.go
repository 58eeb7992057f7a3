package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/persist"
)

// A store written in a format newer than this build reads (what a
// rollback past a format change meets) stops serve at its start, exit 2,
// with a message that says what to run: the release that wrote the format
// when the store records it (its release object), else "a later release".
// It never reports itself ready and waits to be elected to fail.
func TestServeRefusesANewerStoreFormat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx := context.Background()
	v, _, code := c.exe("version")
	if code != 0 {
		t.Fatalf("seqkeeper version: exit %d", code)
	}
	this := strings.TrimSpace(v)
	for _, tc := range []struct {
		name    string
		release string // the release object a later release wrote; "" none
		want    string
	}{
		{"release unknown", "", "store format seqkeeper-store v99 was written by a later release; this is " + this + ", which reads up to v2: run that release or a later one"},
		{"release recorded", "seqkeeper-release v1\nrelease \"v9.9.0\"\nseqkeeper-store 99\n",
			"store format seqkeeper-store v99 was written by seqkeeper v9.9.0; this is " + this + ", which reads up to v2: run v9.9.0 or later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b, err := persist.Open(ctx, "file://"+dir, persist.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := persist.NewStore(b, persist.StoreOptions{Root: c.root})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, 0, persist.Record{Name: "x", Ceiling: 5}); err != nil {
				t.Fatal(err)
			}
			// The meta object as a later release might write it.
			_, etag, err := b.Get(ctx, "meta")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Put(ctx, "meta", []byte("seqkeeper-store v99\nfrom the future\n"), etag); err != nil {
				t.Fatal(err)
			}
			if tc.release != "" {
				if _, err := b.Put(ctx, "release", []byte(tc.release), ""); err != nil {
					t.Fatal(err)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, seqkeeperBinary(t), "--root", c.root, "serve", "--id", "f0", "--http", "127.0.0.1:0")
			cmd.Env = append(c.environ(), "SEQKEEPER_STORE=file://"+dir)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("serve on a store of format v99: %v; want exit 2 saying %q; output:\n%s", err, tc.want, out)
			}
			t.Logf("%s", out)
		})
	}
}
