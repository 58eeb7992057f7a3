package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd, newRestoreCmd) }

// finding is one result of comparing ZooKeeper with the store.
type finding struct {
	Sequence string `json:"sequence"`
	// Level: "unsafe" (an ID may be or have been handed out twice, or above
	// the durable ceiling), "pending" (the primary will fix it: missing,
	// not yet validated, registered) or "ok".
	Level   string `json:"level"`
	Problem string `json:"problem,omitempty"`
	Next    int64  `json:"next,omitempty"`
	Ceiling int64  `json:"ceiling,omitempty"`
	Stored  int64  `json:"stored_ceiling,omitempty"`
	// Action is what restore does (or would do, with --dry-run).
	Action string `json:"action,omitempty"`

	state  sequence.State
	record persist.Record
	kind   actionKind
}

type actionKind int

const (
	actNone actionKind = iota
	actRecreate
	actCoverInStore // the store lost data: raise it to what ZooKeeper shows
	actRevalidate
)

// compare reads every sequence in ZooKeeper and every record in the store
// and classifies each name.
func compare(ctx context.Context, conn *zk.Conn, seqs *sequence.Client, store *persist.Store, epoch int64) ([]finding, error) {
	recs, err := store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the store: %w", err)
	}
	byName := make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		byName[r.Name] = r
	}
	names, _, err := conn.Children(seqs.Root())
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("list %s: %w", seqs.Root(), err)
	}
	inZK := make(map[string]bool, len(names))
	var out []finding
	for _, name := range names {
		inZK[name] = true
		st, _, err := seqs.Describe(ctx, name)
		f := finding{Sequence: name, Level: "ok", state: st, record: byName[name]}
		rec, stored := byName[name]
		f.Stored = rec.Ceiling
		switch {
		case errors.Is(err, sequence.ErrCorrupt):
			f.Level, f.Problem = "unsafe", err.Error()
		case errors.Is(err, sequence.ErrUnknownSequence):
			continue // deleted meanwhile
		case errors.Is(err, sequence.ErrInvalidName):
			f.Level, f.Problem = "pending", "not a sequence name; seqkeeper ignores this znode"
		case err != nil:
			return nil, err
		case st.Registered:
			f.Level, f.Problem = "pending", "registered; the primary has not initialised it yet"
		case st.Legacy:
			f.Next = st.Next
			switch {
			case !stored:
				f.Level, f.Problem, f.kind = "unsafe", "legacy counter with no mark in the store", actCoverInStore
			case st.Next > rec.Ceiling:
				f.Level, f.Problem, f.kind = "unsafe", fmt.Sprintf("legacy counter %d is past its stored mark %d", st.Next, rec.Ceiling), actCoverInStore
			}
		default:
			f.Next, f.Ceiling = st.Next, st.Ceiling
			switch {
			case !stored:
				f.Level, f.Problem, f.kind = "unsafe", "no record in the store: a ZooKeeper data loss would reissue its IDs", actCoverInStore
			case st.Ceiling > rec.Ceiling:
				f.Level, f.Problem, f.kind = "unsafe", fmt.Sprintf("ZooKeeper ceiling %d is above the stored ceiling %d", st.Ceiling, rec.Ceiling), actCoverInStore
			case rec.Deleted:
				f.Level, f.Problem = "pending", "the store holds a tombstone for this name; the primary fast-forwards the re-created sequence"
			case st.ZKEpoch != epoch:
				f.Level, f.Problem, f.kind = "pending", fmt.Sprintf("validated in ZooKeeper epoch %d, now %d: clients wait until it is revalidated", st.ZKEpoch, epoch), actRevalidate
			}
		}
		out = append(out, f)
	}
	for _, r := range recs {
		if !inZK[r.Name] && !r.Deleted {
			out = append(out, finding{Sequence: r.Name, Level: "pending", Stored: r.Ceiling, record: r, kind: actRecreate,
				Problem: "in the store but not in ZooKeeper"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return out, nil
}

// storeEpochAndZK opens everything verify and restore need.
func (g *globals) reconcileSetup(ctx context.Context) (*zk.Conn, *sequence.Client, *persist.Store, func(), error) {
	if g.cfg.Store == "" {
		return nil, nil, nil, nil, usagef("this command compares ZooKeeper with the store: set --store or SEQKEEPER_STORE")
	}
	zc, seqs, err := g.connect(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	store, err := openStore(ctx, g.cfg, false)
	if err != nil {
		zc.Close()
		return nil, nil, nil, nil, err
	}
	return zc.Conn(), seqs, store, zc.Close, nil
}

// reconciliation is what verify and restore start from: the connections,
// the current ZooKeeper epoch and the comparison.
type reconciliation struct {
	seqs     *sequence.Client
	store    *persist.Store
	epoch    int64
	findings []finding
	done     func()
}

func (g *globals) reconcileStart(ctx context.Context) (*reconciliation, error) {
	conn, seqs, store, done, err := g.reconcileSetup(ctx)
	if err != nil {
		return nil, err
	}
	epoch, err := seqs.CurrentEpoch(ctx)
	if err == nil {
		var fs []finding
		if fs, err = compare(ctx, conn, seqs, store, epoch); err == nil {
			return &reconciliation{seqs: seqs, store: store, epoch: epoch, findings: fs, done: done}, nil
		}
	}
	done()
	return nil, err
}

func newVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Compare ZooKeeper with the store; exit 1 on any unsafe state",
		Long: `Compare every sequence in ZooKeeper with its record in the store. Unsafe
(exit 1): a ZooKeeper ceiling above the stored one, a sequence the store does
not cover, a legacy counter past its mark, corrupt data. Pending (exit 0): what
a running primary fixes by itself (missing znodes, sequences not yet validated
in the current ZooKeeper epoch, registrations).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := g.reconcileStart(ctx)
			if err != nil {
				return err
			}
			defer r.done()
			fs := r.findings
			unsafe := g.printFindings(fs, false)
			if unsafe > 0 {
				return fmt.Errorf("%d unsafe sequence(s): see above; is 'seqkeeper serve' running with this store? 'seqkeeper restore' covers ZooKeeper ceilings in the store", unsafe)
			}
			return nil
		},
	}
}

func newRestoreCmd(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Reconcile ZooKeeper with the store now (a running primary does this by itself)",
		Long: `Re-create sequences the store knows and ZooKeeper lacks, at their stored
ceiling + 1; raise the store to cover ceilings ZooKeeper holds above it; and
revalidate sequences not validated in the current ZooKeeper epoch. Every new
ceiling is written to the store before ZooKeeper. With --dry-run, print the
plan only.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := g.reconcileStart(ctx)
			if err != nil {
				return err
			}
			defer r.done()
			fs := r.findings
			for i := range fs {
				fs[i].Action = describeAction(fs[i])
			}
			if !dryRun {
				if err := g.restore(ctx, r.seqs, r.store, r.epoch, fs); err != nil {
					return err
				}
			}
			g.printFindings(fs, true)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be done, change nothing")
	return cmd
}

// restoreReserve is the reserve restore gives a sequence it re-creates or
// revalidates; the primary resizes it from the traffic afterwards.
func (g *globals) restoreReserve() int64 { return max(g.cfg.MinReserve, 1) }

func describeAction(f finding) string {
	switch f.kind {
	case actRecreate:
		return fmt.Sprintf("re-create at %d", sequence.AddSat(f.record.Ceiling, 1))
	case actCoverInStore:
		return fmt.Sprintf("raise the stored ceiling to %d", max(f.state.Ceiling, f.state.Next))
	case actRevalidate:
		return fmt.Sprintf("fast-forward to %d and stamp the current epoch", sequence.AddSat(max(f.record.Ceiling, f.state.Ceiling), 1))
	}
	return ""
}

// restore carries out the findings' actions, the store always first.
func (g *globals) restore(ctx context.Context, seqs *sequence.Client, store *persist.Store, zkEpoch int64, fs []finding) error {
	storeEpoch, _, err := store.Epoch(ctx)
	if err != nil {
		return err
	}
	reserve := g.restoreReserve()
	var recs []persist.Record
	var recreate []sequence.State
	for i := range fs {
		f := &fs[i]
		r := f.record
		r.Name = f.Sequence
		switch f.kind {
		case actRecreate:
			var st sequence.State
			st, r = primary.Recreate(r, reserve)
			recreate = append(recreate, st)
		case actCoverInStore:
			r.Ceiling = max(r.Ceiling, f.state.Ceiling, f.state.Next)
			r.Legacy = f.state.Legacy
		case actRevalidate:
			r.Ceiling = sequence.AddSat(max(r.Ceiling, f.state.Ceiling), reserve)
		default:
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	if err := store.Put(ctx, storeEpoch, recs...); err != nil {
		return fmt.Errorf("write %d ceilings to the store (nothing changed in ZooKeeper): %w", len(recs), err)
	}
	if _, _, err := seqs.Restore(ctx, recreate, zkEpoch); err != nil {
		return err
	}
	for _, f := range fs {
		if f.kind != actRevalidate {
			continue
		}
		floor := sequence.AddSat(max(f.record.Ceiling, f.state.Ceiling), 1)
		if _, err := seqs.Revalidate(ctx, f.Sequence, floor, sequence.AddSat(floor, reserve-1)); err != nil {
			return err
		}
	}
	return nil
}

// printFindings prints the findings (all with all, else the not-ok ones)
// and returns how many are unsafe.
func (g *globals) printFindings(fs []finding, all bool) int {
	unsafe := 0
	shown := fs[:0:0]
	for _, f := range fs {
		if f.Level == "unsafe" {
			unsafe++
		}
		if all || f.Level != "ok" {
			shown = append(shown, f)
		}
	}
	if g.jsonOutput() {
		_ = g.printJSON(map[string]any{"sequences": len(fs), "unsafe": unsafe, "findings": shown})
		return unsafe
	}
	for _, f := range shown {
		line := fmt.Sprintf("%-8s %s", f.Level, f.Sequence)
		if f.Problem != "" {
			line += ": " + f.Problem
		}
		if f.Action != "" {
			line += " -> " + f.Action
		}
		fmt.Fprintln(g.stdout, line)
	}
	fmt.Fprintf(g.stdout, "%d sequences checked, %d unsafe\n", len(fs), unsafe)
	return unsafe
}
