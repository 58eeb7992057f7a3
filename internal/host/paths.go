package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// SettlePaths decides, for each of election_path and marker_path that the
// configuration derived from root (config.DerivedPaths), whether this root
// keeps the default path it was served on before the paths were derived:
// a root other than the default one that an earlier release served with
// the default election and marker must keep them, or the replicas of a
// rolling upgrade would hold two elections (and the primary look for its
// marker where it never wrote one). It keeps the default path when
//
//   - its claim names this root (a release since claims were written), or
//   - it has no claim (an earlier release), this root's znode exists
//     (it was served), and the derived path was never used.
//
// The default root's derived paths are the defaults, so it has nothing to
// decide. Serve and the operator commands that need the paths call it
// once connected, before they use them.
func SettlePaths(ctx context.Context, cfg *config.Config, seqs *seqzk.Client, log zerolog.Logger) error {
	if cfg.Root == config.DefaultRoot {
		return nil
	}
	return SettlePathsFrom(ctx, cfg, seqs, log, config.DefaultElectionPath, config.DefaultMarkerPath)
}

// SettlePathsFrom is SettlePaths with the earlier defaults given (tests
// keep them under their own root).
func SettlePathsFrom(ctx context.Context, cfg *config.Config, seqs *seqzk.Client, log zerolog.Logger, oldElection, oldMarker string) error {
	for _, p := range []struct {
		key  string
		path *string
		old  string
	}{
		{"election_path", &cfg.ElectionPath, oldElection},
		{"marker_path", &cfg.MarkerPath, oldMarker},
	} {
		if !cfg.PathDerived(p.key) {
			continue
		}
		keep, err := keepsOldPath(ctx, seqs, p.old, *p.path)
		if err != nil {
			return fmt.Errorf("%s: decide between %s (derived from root) and %s (used before): %w", p.key, *p.path, p.old, err)
		}
		if keep {
			log.Info().Str("root", cfg.Root).Str(p.key, p.old).Str("derived", *p.path).
				Msgf("%s: this root was served on %s before paths were derived from root; keeping it (set %s to say so and silence this)", p.key, p.old, p.key)
			// Settled, not assigned: a later Validate keeps it rather
			// than derive it from root again.
			if err := cfg.SettlePath(p.key, p.old); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepsOldPath reports whether seqs's root was served on the default path
// old, as SettlePaths explains.
func keepsOldPath(ctx context.Context, seqs *seqzk.Client, old, derived string) (bool, error) {
	root, exists, foreign, err := seqs.Operator().ClaimOf(ctx, old)
	switch {
	case err != nil:
		return false, err
	case !exists || foreign:
		return false, nil
	case root != "":
		return root == seqs.Root(), nil
	}
	// Unclaimed: an earlier release's, of this root or of another.
	_, used, _, err := seqs.Operator().ClaimOf(ctx, derived)
	if err != nil || used {
		return false, err
	}
	served, _, err := seqs.ZK().Session().Exists(ctx, seqs.Root())
	if err != nil {
		return false, fmt.Errorf("read %s: %w", seqs.Root(), err)
	}
	return served, nil
}

// ClaimPaths makes cfg's election_path and marker_path this root's, once
// RefuseUnknownElection has found no earlier release serving the root on
// other paths. Serve calls it before it joins the election, and so do the
// operator commands that write validated sequences without a primary
// (restore, import, adopt): what they write is validated, as only a
// primary's was before them, and the replica started next must find the
// paths they were written under claimed, not take the root for one an
// earlier release served on paths set by hand.
func ClaimPaths(ctx context.Context, cfg *config.Config, seqs *seqzk.Client) error {
	if err := RefuseUnknownElection(ctx, cfg, seqs); err != nil {
		return err
	}
	for _, c := range []struct{ path, what string }{{cfg.ElectionPath, "election_path"}, {cfg.MarkerPath, "marker_path"}} {
		if err := seqs.Operator().Claim(ctx, c.path, c.what); err != nil {
			if errors.Is(err, seqzk.ErrClaimed) {
				return &ConfigError{err}
			}
			return err
		}
	}
	return nil
}

// RefuseUnknownElection stops serve from opening a second election for a
// root that a primary has served on paths this release cannot find. That
// is the case when election_path was derived from root and never used (no
// such znode, and settlePaths found no default path the root used) while
// one of the root's sequences is validated, which only a primary does:
// an earlier release served the root on an election_path and marker_path
// set by hand (0.1.0's documentation asked for them for every root but the
// default one). A replica on the derived paths would then hold an
// election of its own beside the replicas still running there, and two
// primaries would serve the root at once. The operator sets the paths
// those replicas use; nothing else can find them.
//
// A root whose znode is gone (ZooKeeper lost its data, or it was never
// created) or that holds only registrations and legacy counters is not
// refused: no primary of this root has left a mark in this ZooKeeper (a
// legacy counter carries none, so a root of legacy counters alone served
// on hand-set paths goes undetected; docs/operations.md says to keep
// such settings).
func RefuseUnknownElection(ctx context.Context, cfg *config.Config, seqs *seqzk.Client) error {
	if !cfg.PathDerived("election_path") {
		return nil
	}
	_, used, _, err := seqs.Operator().ClaimOf(ctx, cfg.ElectionPath)
	if err != nil || used {
		return err
	}
	names, err := seqs.Names(ctx)
	if errors.Is(err, seqzk.ErrUnknownSequence) {
		return nil // no root: nothing was served here
	}
	if err != nil {
		return fmt.Errorf("election_path: look for a primary's marks under %s: %w", seqs.Root(), err)
	}
	for _, name := range names {
		st, _, err := seqs.Describe(ctx, name)
		if err != nil {
			continue // gone meanwhile, or not a sequence: no evidence either way
		}
		if !st.Legacy && st.Validated() {
			return &ConfigError{fmt.Errorf("root %s has sequences a primary served (%q is validated), but not on election_path %s (derived from root; "+
				"it does not exist, and neither serve nor restore nor import claimed it): a primary served this root on an election_path and marker_path set by hand (0.1.0's documentation asked for them), and its replicas may still run there. "+
				"Set election_path and marker_path to the values its replicas use (their config file, or %s and %s): "+
				"starting here would hold a second election beside theirs. If no replica serves this root any more and you "+
				"want the derived paths, set election_path %s and marker_path %s explicitly",
				seqs.Root(), name, cfg.ElectionPath, config.EnvName("election_path"), config.EnvName("marker_path"),
				cfg.ElectionPath, cfg.MarkerPath)}
		}
	}
	return nil
}
