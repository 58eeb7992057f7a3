package host

import (
	"context"
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
			*p.path = p.old
		}
	}
	return nil
}

// keepsOldPath reports whether seqs's root was served on the default path
// old, as SettlePaths explains.
func keepsOldPath(ctx context.Context, seqs *seqzk.Client, old, derived string) (bool, error) {
	root, exists, foreign, err := seqs.ClaimOf(ctx, old)
	switch {
	case err != nil:
		return false, err
	case !exists || foreign:
		return false, nil
	case root != "":
		return root == seqs.Root(), nil
	}
	// Unclaimed: an earlier release's, of this root or of another.
	_, used, _, err := seqs.ClaimOf(ctx, derived)
	if err != nil || used {
		return false, err
	}
	served, _, err := seqs.ZK().Exists(ctx, seqs.Root())
	if err != nil {
		return false, fmt.Errorf("read %s: %w", seqs.Root(), err)
	}
	return served, nil
}
