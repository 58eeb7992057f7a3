package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
)

func newStatusCmd(g *globals) *cobra.Command {
	var replica string
	cmd := &cobra.Command{
		Use:   "status [--replica HOST:PORT]",
		Short: "Show a replica's status: its role, ZooKeeper session, store, runways and handovers",
		Long: `Show what a replica's GET /v1/status answers, as the operator reads it: the
replica and the primary, its ZooKeeper session, the store's health, and on
the primary the sequences' summary (how many, unhealthy, exhausted, the
shortest runway) and the last handovers it saw. Without --replica it asks
the primary, at the address its candidate node publishes (found through
ZooKeeper, as 'seqkeeper leader' does). The token is the configuration's
http_token. With -o json, the replica's answer as it is. Exit 1 when the
replica does not answer, or answers that its store is unhealthy or that it
has no ZooKeeper session.`,
		Example: `  seqkeeper status
  seqkeeper status --replica 10.0.0.7:7070 -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr := replica
			if addr == "" {
				var err error
				if addr, err = g.primaryAddress(cmd.Context()); err != nil {
					return err
				}
			}
			raw, st, err := g.replicaStatus(cmd.Context(), addr)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				_, err = fmt.Fprintf(g.stdout, "%s\n", raw)
			} else {
				printStatus(g.stdout, addr, st, time.Now())
			}
			return cmp.Or(err, statusProblem(addr, st))
		},
	}
	cmd.Flags().StringVar(&replica, "replica", "", "the replica's HTTP address (host:port); default: the primary's, from the election")
	return cmd
}

// primaryAddress is the HTTP address the primary's candidate node
// publishes.
func (g *globals) primaryAddress(ctx context.Context) (string, error) {
	zc, _, err := g.connect(ctx)
	if err != nil {
		return "", err
	}
	defer zc.Close()
	out, err := readLeader(ctx, zc, g.cfg.ElectionPath)
	if errors.Is(err, errNoLeader) {
		return "", fmt.Errorf("%w: no primary to ask; give a replica with --replica HOST:PORT", err)
	}
	if err != nil {
		return "", err
	}
	if out.Address == "" {
		return "", fmt.Errorf("the primary %s publishes no address (its 'advertise' setting): give it with --replica HOST:PORT", out.ID)
	}
	return out.Address, nil
}

// replicaStatus asks the replica at addr for GET /v1/status.
func (g *globals) replicaStatus(ctx context.Context, addr string) ([]byte, httpapi.StatusView, error) {
	var st httpapi.StatusView
	tokens, err := g.cfg.BearerTokens()
	if err != nil {
		return nil, st, err
	}
	token := ""
	if len(tokens) > 0 {
		token = tokens[0]
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := g.callReplica(ctx, http.MethodGet, addr, "/v1/status?sequences=none", token)
	if err != nil {
		return nil, st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, st, fmt.Errorf("replica %s: its status is not JSON of this release: %w", addr, err)
	}
	return raw, st, nil
}

// callReplica sends method path, with the bearer token unless it is
// empty, to the replica at addr (https when the configuration serves
// TLS), and returns the body of a 200 answer.
func (g *globals) callReplica(ctx context.Context, method, addr, path, token string) ([]byte, error) {
	scheme := "http"
	if g.cfg.HTTPTLSCertFile != "" {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+addr+path, nil)
	if err != nil {
		return nil, &usageError{fmt.Errorf("replica address %q: %w", addr, err)}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %s does not answer: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("replica %s: read its answer: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("replica %s answers %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// printStatus writes st, as replica addr answered it at now.
func printStatus(w io.Writer, addr string, st httpapi.StatusView, now time.Time) {
	role := "standby"
	if st.Leading {
		role = "primary"
	}
	fmt.Fprintf(w, "replica:    %s (%s) at %s%s\n", st.Replica.ID, role, addr, versionOf(st.Replica))
	if st.Primary != nil {
		fmt.Fprintf(w, "primary:    %s %s%s\n", st.Primary.ID, st.Primary.Address, versionOf(*st.Primary))
	} else {
		fmt.Fprintln(w, "primary:    unknown (no session, or no candidate)")
	}
	fmt.Fprintf(w, "zookeeper:  %s, session %s\n", st.ZooKeeperState, st.ZooKeeperSession)
	store := "healthy"
	if !st.Store.Healthy {
		store = "UNHEALTHY: " + st.Store.Error
	}
	if st.Store.LastRequest != nil {
		store += fmt.Sprintf(" (last request %s ago)", now.Sub(*st.Store.LastRequest).Round(time.Second))
	}
	fmt.Fprintf(w, "store:      %s %s\n", st.Store.URL, store)
	if r := st.Reserve; r != nil {
		s := r.Summary
		line := fmt.Sprintf("%d sequences, %d unhealthy", s.Sequences, s.Unhealthy)
		if s.Exhausted > 0 {
			line += fmt.Sprintf(", %d exhausted", s.Exhausted)
		}
		if s.MinRunwaySeconds != nil {
			line += fmt.Sprintf(", shortest runway %.1fs (%s)", *s.MinRunwaySeconds, s.MinRunwaySequence)
		}
		fmt.Fprintf(w, "sequences:  %s\n", line)
	}
	for i, h := range st.Handovers {
		to := "none"
		if h.Primary != nil {
			to = h.Primary.ID
		}
		label := "handovers: "
		if i > 0 {
			label = "           "
		}
		fmt.Fprintf(w, "%s %s ago: primary %s\n", label, now.Sub(h.At).Round(time.Second), to)
	}
	for _, r := range st.Roots {
		role, store := "standby", "healthy"
		if r.Leading {
			role = "primary"
		}
		if !r.Store.Healthy {
			store = "UNHEALTHY: " + r.Store.Error
		}
		fmt.Fprintf(w, "root:       %s (%s): %s, store %s\n", r.Name, r.Root, role, store)
	}
}

func versionOf(r httpapi.ReplicaView) string {
	if r.Version == "" {
		return ""
	}
	return ", version " + r.Version
}

// statusProblem is why st is not well, or nil.
func statusProblem(addr string, st httpapi.StatusView) error {
	switch {
	case !st.Store.Healthy:
		return fmt.Errorf("replica %s: its store is unhealthy: %s", addr, st.Store.Error)
	case st.ZooKeeperState != "has_session":
		return fmt.Errorf("replica %s: no ZooKeeper session (%s)", addr, st.ZooKeeperState)
	}
	return nil
}

func newStepDownCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "step-down",
		Short: "Hand the primary's leadership over to the next replica in line",
		Long: `A planned handover, before a primary's host is drained or upgraded: the
primary (found through the election, as 'seqkeeper leader' finds it)
resigns by the path a SIGTERM takes (its primary stops, its candidate node
is deleted, the next candidate leads) and rejoins as the last candidate,
still serving. It asks the primary's POST /v1/step-down with the
configuration's http_admin_token, and prints the replica that leads after.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			zc, _, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer zc.Close()
			before, err := readLeader(ctx, zc, g.cfg.ElectionPath)
			if err != nil {
				return err
			}
			if before.Address == "" {
				return fmt.Errorf("the primary %s publishes no address (its 'advertise' setting): ask its POST /v1/step-down yourself", before.ID)
			}
			if err := g.askStepDown(ctx, before.Address); err != nil {
				return err
			}
			after, err := readLeader(ctx, zc, g.cfg.ElectionPath)
			if err != nil {
				return fmt.Errorf("%s stepped down; no replica leads yet: %w", before.ID, err)
			}
			fmt.Fprintf(g.stdout, "%s stepped down; %s leads\n", before.ID, after.ID)
			return nil
		},
	}
}

// askStepDown sends POST /v1/step-down to the replica at addr.
func (g *globals) askStepDown(ctx context.Context, addr string) error {
	tokens, err := g.cfg.AdminTokens()
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		return usagef("step-down needs the admin token (http_admin_token or http_admin_token_file) of the replicas")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = g.callReplica(ctx, http.MethodPost, addr, "/v1/step-down", tokens[0])
	return err
}
