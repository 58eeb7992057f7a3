package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/config"
)

// --all-roots: the read-only operator commands (verify, list, leader,
// status, acl show) run once per root of the config file's roots: list,
// each with its entry's configuration as --root-name would give it. Text
// output heads each root's with "== root NAME (ROOT) =="; -o json and
// yaml print one object, {"roots":[{"name","root","output","error"}]},
// each output being what the command prints for that root. The exit code
// is the worst: a usage error (2), else any failure (1), else a loss
// verify found (3).

// annotationEachRoot marks the commands --all-roots runs once per root.
const annotationEachRoot = "seqkeeper/each-root"

// eachRoot marks cmd as one --all-roots may run, and wraps its RunE.
func eachRoot(g *globals, cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationEachRoot] = "true"
	runOne := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if !g.allRoots {
			return runOne(c, args)
		}
		return g.runEachRoot(func() error { return runOne(c, args) })
	}
	return cmd
}

// rootRun is one root's part of an --all-roots run.
type rootRun struct {
	Name   string          `json:"name"`
	Root   string          `json:"root"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// runEachRoot runs once per root of g.all, with g.cfg that root's.
func (g *globals) runEachRoot(runOne func() error) error {
	out, structured := g.stdout, g.jsonOutput()
	defer func() { g.stdout = out }()
	var runs []rootRun
	var errs []error
	for _, name := range g.all.RootNames() {
		g.cfg = g.all.ForRoot(name)
		var buf bytes.Buffer
		if structured {
			g.stdout = &buf
		} else {
			fmt.Fprintf(out, "== root %s (%s) ==\n", name, g.cfg.Root)
		}
		err := runOne()
		if err != nil {
			errs = append(errs, fmt.Errorf("root %s: %w", name, err))
			if !structured {
				fmt.Fprintf(out, "root %s: %v\n", name, err)
			}
		}
		if structured {
			r := rootRun{Name: name, Root: g.cfg.Root}
			if err != nil {
				r.Error = err.Error()
			}
			if b := bytes.TrimSpace(buf.Bytes()); json.Valid(b) {
				r.Output = b
			}
			runs = append(runs, r)
		}
	}
	if structured {
		g.stdout = out
		if err := g.printJSON(map[string]any{"roots": runs}); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// checkAllRoots refuses --all-roots where it does not apply: a command
// that works on one root at a time, --root-name beside it, or a
// configuration without a roots: list.
func (g *globals) checkAllRoots(cmd *cobra.Command, cfg *config.Config, from string) error {
	switch {
	case cmd.Annotations[annotationEachRoot] == "":
		return usagef("--all-roots: %s works on one root at a time; --all-roots runs verify, list, leader, status and acl show once per root", cmd.CommandPath())
	case from != "":
		return usagef("--all-roots and %s %s both say which roots to work on: give one", from, g.rootName)
	case len(cfg.RootNames()) == 0:
		return usagef("--all-roots: the configuration has no roots: list (--config with roots:)")
	}
	return nil
}

// onlyLost reports whether every error err joins (--all-roots) is verify's
// lossPending: any other failure wins over it.
func onlyLost(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyLost(e) {
				return false
			}
		}
		return true
	}
	var lost lossPending
	return errors.As(err, &lost)
}
