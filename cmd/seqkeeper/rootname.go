package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/suggest"
)

// --root-name: which root of the config file's roots: list an operator
// command works on. serve hosts every root of the list; the operator
// commands work on one, and run with that entry's root, store, election
// and marker paths (as serve derives them: config.Config.ForRoot) and the
// shared top-level settings.

// envRootName is the environment variable of --root-name.
const envRootName = "SEQKEEPER_ROOT_NAME"

// annotationAllRoots marks serve, which hosts every root of the list and
// takes no --root-name.
const annotationAllRoots = "seqkeeper/all-roots"

// rootSettings are the settings a roots: entry gives its root: set
// beside --root-name they would say a second time which root is meant.
var rootSettings = []string{"root", "store", "election_path", "marker_path"}

// resolveRootName settles --root-name: the flag, else $SEQKEEPER_ROOT_NAME.
// It returns where the name came from, for messages ("" when none).
func (g *globals) resolveRootName() string {
	if g.rootName != "" {
		return "--root-name"
	}
	if v, _ := g.lookupEnv(envRootName); v != "" {
		g.rootName = v
		return envRootName
	}
	return ""
}

// checkRootName refuses --root-name for serve, and together with a
// root's own settings on the command line or in the environment: the name
// picks them from the config file, and two answers to "which root" is one
// too many. Called before the configuration is resolved, so that the
// message says this rather than what the roots: list's validation says of
// a stray root or store.
func (g *globals) checkRootName(cmd *cobra.Command, from string) error {
	if cmd.Annotations[annotationAllRoots] != "" {
		return usagef("%s %s: serve hosts every root of its configuration; %s picks one for the operator commands (unset it for serve)", from, g.rootName, from)
	}
	var given []string
	for _, key := range rootSettings {
		if f := cmd.Flags().Lookup(config.FlagName(key)); f != nil && f.Changed {
			given = append(given, "--"+config.FlagName(key))
		}
		if v, _ := g.lookupEnv(config.EnvName(key)); v != "" {
			given = append(given, config.EnvName(key))
		}
	}
	if len(given) == 0 {
		return nil
	}
	return usagef("%s %s and %s both say which root to work on: %s picks the root, its store and its paths from the config file; drop %s (or %s)",
		from, g.rootName, strings.Join(given, ", "), from, strings.Join(given, ", "), from)
}

// selectRoot narrows the resolved configuration to one root for the
// command cmd (checkRootName has passed):
//
//   - serve hosts every root of a roots: list;
//   - with a roots: list, the other commands need --root-name, one of its
//     names, and get that entry's configuration (config.Config.ForRoot);
//   - without one, --root-name may name the one root configured (its
//     default name, config.DefaultRootName, as its rooted routes
//     /v1/roots/{name}/... do), and anything else is refused.
//
// Every refusal is a usage error (exit 2).
func (g *globals) selectRoot(cmd *cobra.Command, cfg *config.Config, from string) (*config.Config, error) {
	names := cfg.RootNames()
	switch {
	case cmd.Annotations[annotationAllRoots] != "":
		return cfg, nil
	case len(names) == 0 && from == "":
		return cfg, nil
	case len(names) == 0:
		if own := config.DefaultRootName(cfg.Root); g.rootName != own {
			return nil, usagef("%s %s: the configuration has no roots: list; its one root, %s, is named %s (as in /v1/roots/%s/...): give that name or none",
				from, g.rootName, cfg.Root, own, own)
		}
		return cfg, nil
	case from == "":
		return nil, usagef("the config file lists several roots (%s); this command works on one: pick one with --root-name (one of: %s)",
			strings.Join(names, ", "), strings.Join(names, ", "))
	}
	one := cfg.ForRoot(g.rootName)
	if one == nil {
		hint := suggest.Phrase(suggest.Closest(g.rootName, names), func(s string) string { return s })
		return nil, usagef("%s %s: no root of that name in the config file's roots: list (%s)%s", from, g.rootName, strings.Join(names, ", "), hint)
	}
	return one, nil
}

// rootHint names how this command was told its root, for messages that
// ask whether serve runs on the same one.
func (g *globals) rootHint() string {
	if g.rootName != "" {
		return "root (--root-name " + g.rootName + ")"
	}
	return "--root"
}
