package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// Operators beside a running primary and busy workers: every operator
// command that writes the store or ZooKeeper must be safe there (docs/cli.md
// says so of each): import, advance (transfer_ops_test.go), restore,
// verify, and create and delete over the HTTP API.

// opExport saves an export of the root as it is now, for a later import
// beside the primary (an operator importing an older export by mistake, or
// on purpose to lift counters).
func (e *env) opExport(*rand.Rand) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	var buf bytes.Buffer
	n, err := transfer.Export(ctx, e.admin, e.store, &buf)
	e.m.mu.Lock()
	e.m.call("export", err)
	e.m.mu.Unlock()
	if err != nil {
		return fmt.Sprintf("export -> %v", err), true
	}
	e.exports = append(lastStrings(e.exports, 3), buf.String())
	return fmt.Sprintf("export: %d sequences, %d tombstones", n.Sequences, n.Tombstones), true
}

func lastStrings(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// opImportBeside imports an export taken earlier into the live root, beside
// the running primary and the workers, while a deleted name may be
// registered again as a bare znode at the same time. It must move no
// counter back and bring back no deleted name; every ID after it is
// checked against the whole run.
func (e *env) opImportBeside(r *rand.Rand) (string, bool) {
	if len(e.exports) == 0 || e.stale != nil {
		return "", false
	}
	export := e.exports[r.IntN(len(e.exports))]
	var gone []string
	for _, s := range e.specs {
		if !e.live(s.name) {
			gone = append(gone, s.name)
		}
	}
	register := ""
	if len(gone) > 0 && r.IntN(2) == 0 && !e.skip["recreate"] {
		register = gone[r.IntN(len(gone))]
	}
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var regErr error
	if register != "" {
		wg.Go(func() {
			time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
			regErr = e.admin.Register(ctx, register, e.spec(register).reg)
		})
	}
	outs, err := transfer.Import(ctx, e.admin, e.store, strings.NewReader(export), transfer.ImportOptions{MinReserve: operatorReserve})
	wg.Wait()
	lost := register != "" && replyLost(regErr)
	landed := lost && e.existsSure(register)

	m := e.m
	m.mu.Lock()
	m.call("import-beside", err)
	counts := map[string]int{}
	for _, o := range outs {
		counts[o.Action]++
	}
	regLine := ""
	if register != "" {
		class := m.call("recreate", regErr)
		regLine = fmt.Sprintf("; bare registration of %s beside it -> %s", register, class)
		switch {
		case regErr == nil || landed:
			delete(e.deleted, register)
		case lost:
			e.undeletable[register] = true // it may still land
		}
	}
	m.mu.Unlock()
	line := fmt.Sprintf("import an earlier export beside the primary -> %v %v%s", counts, err, regLine)
	e.checkDeletedStayDeleted("import beside the primary")
	return line, true
}

// opOperatorRestore runs 'seqkeeper restore' beside the running primary:
// compare, plan, apply. It may re-create only what ZooKeeper lost.
func (e *env) opOperatorRestore(r *rand.Rand) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	rep, err := reconcile.Compare(ctx, e.admin, e.store)
	if err == nil {
		rep.Plan()
		err = reconcile.Apply(ctx, e.admin, e.store, rep, operatorReserve)
	}
	e.m.mu.Lock()
	class := e.m.call("operator-restore", err)
	e.m.mu.Unlock()
	acted := 0
	if rep != nil {
		for _, f := range rep.Findings {
			if f.Action != reconcile.Nothing {
				acted++
			}
		}
	}
	e.checkDeletedStayDeleted("an operator's restore")
	return fmt.Sprintf("operator restore beside the primary -> %s, %d findings acted on", class, acted), true
}

// opVerify runs 'seqkeeper verify' beside the running primary. Unsafe
// findings are possible while a store fault is being repaired; they are
// counted, not failed.
func (e *env) opVerify(*rand.Rand) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	rep, err := reconcile.Compare(ctx, e.admin, e.store)
	e.m.mu.Lock()
	class := e.m.call("verify", err)
	e.m.mu.Unlock()
	if err != nil {
		return "verify -> " + class, true
	}
	if n := rep.Unsafe(); n > 0 {
		e.m.mu.Lock()
		lost := len(e.m.lost) > 0
		e.m.mu.Unlock()
		if lost {
			e.m.note("verify found unsafe findings while the store was repairing a fault")
		} else {
			e.m.note("verify found unsafe findings")
		}
	}
	return fmt.Sprintf("verify beside the primary: %d findings, %d unsafe", len(rep.Findings), rep.Unsafe()), true
}

// checkDeletedStayDeleted fails the run if a name the model deleted (and
// did not create again) exists in ZooKeeper, unless a restore of ZooKeeper
// from a copy taken before its delete brought it back.
func (e *env) checkDeletedStayDeleted(after string) {
	for name, op := range e.deleted {
		if e.undeletable[name] {
			continue
		}
		if e.existsSure(name) {
			e.m.mu.Lock()
			e.m.fail(fmt.Sprintf("DELETED NAME BACK after %s (op #%d): %q, deleted at op #%d, exists in ZooKeeper again with no ZooKeeper rollback to before its delete",
				after, e.m.op, name, op))
			e.m.mu.Unlock()
		}
	}
}

// adminToken is the model's HTTP admin token.
const adminToken = "model-admin-token"

// httpAdmin returns the URL of an HTTP API on the admin session, serving
// the admin routes on the model's current store (rebuilt after a move
// replaces the store).
func (e *env) httpAdmin() string {
	if e.api != nil && e.apiStore == e.store {
		return e.api.URL
	}
	if e.api != nil {
		e.api.Close()
	}
	workers, err := sequence.NewClient(e.admin.ZK(), sequence.Options{Root: e.seqRoot, CeilingWait: ceilingWait})
	if err != nil {
		e.fatalf("%v", err)
	}
	srv, err := httpapi.New(httpapi.Options{
		Sequences: workers, AdminToken: adminToken,
		Admin: &httpapi.Operator{Sequences: e.admin, Store: e.store},
	})
	if err != nil {
		e.fatalf("%v", err)
	}
	e.api, e.apiStore = httptest.NewServer(srv), e.store
	e.closers = append(e.closers, e.api.Close)
	return e.api.URL
}

// httpDelete deletes name with DELETE /v1/sequences/{name} and returns
// the tombstone's ceiling; an error wraps sequence.ErrUnknownSequence for
// a 404, as seqzk.Operator.Delete's does.
func (e *env) httpDelete(ctx context.Context, name string) (int64, error) {
	var out httpapi.DeleteResponse
	err := e.adminCall(ctx, http.MethodDelete, "/v1/sequences/"+name, nil, &out)
	return out.TombstoneCeiling, err
}

// httpCreate registers name with POST /v1/sequences. A name that exists
// (with the same settings: the route answers 200) is an error saying so,
// as seqzk.Client.Register's is.
func (e *env) httpCreate(ctx context.Context, name string) error {
	s := e.spec(name)
	var out httpapi.CreateResponse
	if err := e.adminCall(ctx, http.MethodPost, "/v1/sequences", httpapi.CreateRequest{Name: name, Start: s.reg.Start, Max: s.reg.End, Windows: s.reg.Windows}, &out); err != nil {
		return err
	}
	if !out.Created {
		return fmt.Errorf("POST /v1/sequences %s: sequence already exists", name)
	}
	return nil
}

func (e *env) adminCall(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.httpAdmin()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s %s: %w: %s", method, path, sequence.ErrUnknownSequence, data)
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%s %s: sequence already exists: %s", method, path, data)
	case resp.StatusCode >= 300:
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
