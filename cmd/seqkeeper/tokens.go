package main

import (
	"context"
	"os"
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
	stamp := func() (s [2]fileStamp) {
		for i, f := range files {
			if f != "" {
				if fi, err := os.Stat(f); err == nil {
					s[i] = fileStamp{fi.ModTime(), fi.Size()}
				}
			}
		}
		return s
	}
	last := stamp()
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
		last = cur
		taker, err := cfg.BearerTokens()
		var admin []string
		if err == nil {
			admin, err = cfg.AdminTokens()
		}
		if err == nil {
			err = api.SetTokens(taker, admin)
		}
		if err != nil {
			log.Error().Err(err).Msg("token file changed but not reloaded: the previous tokens stay in use")
			continue
		}
		log.Info().Int("tokens", len(taker)).Int("admin_tokens", len(admin)).Msg("token files reloaded")
	}
}

// fileStamp tells whether a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}
