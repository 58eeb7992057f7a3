package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// settlePaths is host.SettlePaths: whether a root keeps the default
// election and marker paths it was served on before they were derived.
func settlePaths(ctx context.Context, cfg *config.Config, seqs *seqzk.Client, log zerolog.Logger) error {
	return host.SettlePaths(ctx, cfg, seqs, log)
}

// settlePathsFrom is host.SettlePathsFrom (tests keep the earlier
// defaults under their own root).
func settlePathsFrom(ctx context.Context, cfg *config.Config, seqs *seqzk.Client, log zerolog.Logger, oldElection, oldMarker string) error {
	return host.SettlePathsFrom(ctx, cfg, seqs, log, oldElection, oldMarker)
}

// refuseUnknownElection is host.RefuseUnknownElection, as serve's usage
// error (exit 2).
func refuseUnknownElection(ctx context.Context, cfg *config.Config, seqs *seqzk.Client) error {
	return usageIfConfig(host.RefuseUnknownElection(ctx, cfg, seqs))
}
