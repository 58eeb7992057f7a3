package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/httpapi"
)

// tokenCheckEvery is how often serve looks whether its token files
// changed.
var tokenCheckEvery = time.Second

// reloadTokens reads the token files again whenever one changes (a Secret
// updated in place, a rotation), until ctx ends, and gives the API the new
// tokens. A file that does not read (half written, empty, a token that is
// also the other kind's) leaves the old tokens in use, and is tried again
// at its next change.
func reloadTokens(ctx context.Context, cfg *config.Config, api *httpapi.Server, log zerolog.Logger) {
	files := []string{cfg.HTTPTokenFile, cfg.HTTPAdminTokenFile}
	if files[0] == "" && files[1] == "" {
		return
	}
	stamp := func() (s [2]config.FileStamp) {
		for i, f := range files {
			if f != "" {
				s[i] = config.StampOf(f)
			}
		}
		return s
	}
	last := stamp()
	// serve read both at start: these are the last good ones.
	lastTaker, _ := cfg.BearerTokens()
	lastAdmin, _ := cfg.AdminTokens()
	t := time.NewTicker(tokenCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := stamp()
		if cur == last {
			continue
		}
		// Each file on its own: one that does not read keeps its last
		// good tokens and does not hold the other back.
		taker, admin := lastTaker, lastAdmin
		if cur[0] != last[0] {
			if ts, err := cfg.BearerTokens(); err != nil {
				log.Error().Err(err).Msg("token file changed but not reloaded: its previous tokens stay in use")
			} else {
				taker = ts
			}
		}
		if cur[1] != last[1] {
			if ts, err := cfg.AdminTokens(); err != nil {
				log.Error().Err(err).Msg("admin token file changed but not reloaded: its previous tokens stay in use")
			} else {
				admin = ts
			}
		}
		last = cur
		if err := api.SetTokens(taker, admin); err != nil {
			log.Error().Err(err).Msg("token files changed but not reloaded: the previous tokens stay in use")
			continue
		}
		lastTaker, lastAdmin = taker, admin
		log.Info().Int("tokens", len(taker)).Int("admin_tokens", len(admin)).Msg("token files reloaded")
	}
}
