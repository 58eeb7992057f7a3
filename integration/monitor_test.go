package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// replicaStatus is the part of GET /v1/status the suite reads.
type replicaStatus struct {
	Replica struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"replica"`
	Leading bool `json:"leading"`
	// ZooKeeperSession is the replica's session ID in hex ("0x0" without
	// one).
	ZooKeeperSession string `json:"zookeeper_session"`
	// Store is the store's health as the replica's own last request found
	// it; LastRequest is "" before its first.
	Store struct {
		Healthy     bool   `json:"healthy"`
		Error       string `json:"error"`
		LastRequest string `json:"last_request"`
	} `json:"store"`
	Reserve *struct {
		// Epoch is the leader epoch the primary advanced the store to.
		Epoch     int64 `json:"epoch"`
		Sequences []struct {
			Name          string  `json:"name"`
			StoredCeiling int64   `json:"stored_ceiling"`
			Rate          float64 `json:"rate_per_second"`
			RunwaySeconds float64 `json:"runway_seconds"`
		} `json:"sequences"`
	} `json:"reserve"`
}

// monitor polls every replica's status four times a second.
func (w *Workload) monitor() {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		s, stored := w.poll(client)
		w.hist.AddSample(s, stored)
	}
}

// poll asks every replica for its status at once.
func (w *Workload) poll(client *http.Client) (Sample, map[string]int64) {
	replicas := w.cluster.Replicas()
	type answer struct {
		name string
		st   *replicaStatus
	}
	answers := make(chan answer, len(replicas))
	for _, r := range replicas {
		go func() {
			st, err := getStatus(w.ctx, client, r)
			if err != nil {
				st = nil
			}
			answers <- answer{r.Name, st}
		}()
	}
	s := Sample{T: time.Now()}
	stored := map[string]int64{}
	for range replicas {
		a := <-answers
		if a.st == nil {
			continue
		}
		s.Reachable++
		if a.st.Leading {
			s.Leaders = append(s.Leaders, a.name)
			if a.st.Reserve != nil {
				for _, seq := range a.st.Reserve.Sequences {
					stored[seq.Name] = seq.StoredCeiling
					if s.Rates == nil {
						s.Rates = map[string]float64{}
					}
					s.Rates[seq.Name] = seq.Rate
				}
			}
		}
	}
	sort.Strings(s.Leaders)
	if len(stored) > 0 {
		s.Stored = stored
	}
	return s, stored
}

func getStatus(ctx context.Context, client *http.Client, r *Node) (*replicaStatus, error) {
	addr := r.Addr(ReplicaPort)
	if addr == "" {
		return nil, errors.New("no address")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var st replicaStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Primary waits until exactly one reachable replica says it leads and
// returns it.
func (w *Workload) Primary(ctx context.Context) (*Node, error) {
	client := &http.Client{Timeout: time.Second}
	for {
		var leaders []*Node
		for _, r := range w.cluster.Replicas() {
			if st, err := getStatus(ctx, client, r); err == nil && st.Leading {
				leaders = append(leaders, r)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no single primary (%d replicas say they lead): %w", len(leaders), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// StoredCeilings returns the stored ceilings the primary reports now.
func (w *Workload) StoredCeilings(ctx context.Context) (map[string]int64, error) {
	p, err := w.Primary(ctx)
	if err != nil {
		return nil, err
	}
	st, err := getStatus(ctx, &http.Client{Timeout: 2 * time.Second}, p)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	if st.Reserve != nil {
		for _, s := range st.Reserve.Sequences {
			out[s.Name] = s.StoredCeiling
		}
	}
	return out, nil
}

// WaitRaised waits until the primary has stored a ceiling above the one
// it reported at the call for every sequence of names (a raise of each:
// a store write), and returns the stored ceilings before and after. The
// primary may change meanwhile; the error is ctx's.
func (w *Workload) WaitRaised(ctx context.Context, names []string) (before, after map[string]int64, err error) {
	if before, err = w.StoredCeilings(ctx); err != nil {
		return nil, nil, err
	}
	for {
		if after, err = w.StoredCeilings(ctx); err != nil {
			return before, nil, err
		}
		raised := 0
		for _, name := range names {
			if after[name] > before[name] {
				raised++
			}
		}
		if raised == len(names) {
			return before, after, nil
		}
		select {
		case <-ctx.Done():
			return before, after, fmt.Errorf("no raise of every sequence of %v stored: %v -> %v: %w", names, before, after, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
