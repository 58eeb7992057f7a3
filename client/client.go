package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
)

// Defaults for Options.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultRetryFor       = 10 * time.Second
	// maxAnswer bounds an answer body.
	maxAnswer = 8 << 20
)

// Options configure a Client. Endpoints is required.
type Options struct {
	// Endpoints are the replicas' base URLs, e.g. "https://10.0.0.1:7070".
	Endpoints []string
	// Token is the bearer token (the replicas' http_token); empty: none.
	Token string
	// HTTPClient sends the requests; nil: a client of its own. Give one
	// with a Transport to set TLS (a CA, client certificates) or proxies.
	HTTPClient *http.Client
	// RequestTimeout bounds one attempt at one replica. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Root addresses one root of replicas that serve several (the config
	// file's roots: list): every call goes to /v1/roots/{Root}/... A
	// replica of one root answers under its root's name too (the root's
	// last path element, "sequences" for the default root). Empty: the
	// unrooted routes, of a replica of one root.
	Root string
	// RetryFor bounds how long a call tries replicas that answer 503 or do
	// not answer before it fails with ErrUnavailable (the call's context
	// may end it sooner). Default DefaultRetryFor.
	RetryFor time.Duration
}

// Client calls the HTTP API of a set of seqkeeper replicas. It is safe for
// concurrent use.
type Client struct {
	opts Options
	hc   *http.Client
	eps  []*endpoint
	next atomic.Uint64 // round robin
	// served remembers which replica handed out which IDs: a recycle goes
	// back to it.
	served served
}

// endpoint is one replica and when it may be tried again.
type endpoint struct {
	base string
	mu   sync.Mutex
	// downUntil is when a replica that failed may be tried again, and
	// failures how many times in a row it failed.
	downUntil time.Time
	failures  int
}

// New checks opts and returns a Client.
func New(opts Options) (*Client, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("client: Options.Endpoints is empty: give the base URL of at least one replica, e.g. http://127.0.0.1:7070")
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = DefaultRetryFor
	}
	if opts.RequestTimeout < 0 || opts.RetryFor < 0 {
		return nil, errors.New("client: RequestTimeout and RetryFor must not be negative")
	}
	if strings.ContainsFunc(opts.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("client: the token must not contain white space or control characters")
	}
	if opts.Root != "" && (strings.ContainsAny(opts.Root, "/?#%") || strings.ContainsFunc(opts.Root, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
		return nil, fmt.Errorf("client: Root %q: want a root's name as the replicas' roots: list gives it (letters, digits, '.', '_', '-')", opts.Root)
	}
	c := &Client{opts: opts, hc: opts.HTTPClient}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	for _, e := range opts.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("client: endpoint %q: want a base URL such as http://10.0.0.1:7070", e)
		}
		c.eps = append(c.eps, &endpoint{base: strings.TrimRight(e, "/")})
	}
	return c, nil
}

// downPolicy is how long a replica that failed is skipped: from 100 ms,
// doubling with each further failure, up to 5 s, with jitter.
var downPolicy = backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// Range is an inclusive run of IDs.
type Range struct{ Start, End int64 }

// Len is the number of IDs in r.
func (r Range) Len() int64 { return r.End - r.Start + 1 }

// Ranges are IDs as ascending ranges.
type Ranges []Range

// Count is the number of IDs in rs.
func (rs Ranges) Count() int64 {
	var n int64
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

func (rs Ranges) MarshalJSON() ([]byte, error) {
	pairs := make([][2]int64, len(rs))
	for i, r := range rs {
		pairs[i] = [2]int64{r.Start, r.End}
	}
	return json.Marshal(pairs)
}

func (rs *Ranges) UnmarshalJSON(data []byte) error {
	var pairs [][2]int64
	if err := json.Unmarshal(data, &pairs); err != nil {
		return err
	}
	out := make(Ranges, len(pairs))
	for i, p := range pairs {
		if p[0] > p[1] {
			return fmt.Errorf("range [%d,%d] is reversed", p[0], p[1])
		}
		out[i] = Range{p[0], p[1]}
	}
	*rs = out
	return nil
}

// Take takes count IDs of sequence name (POST /v1/sequences/{name}/ids).
// At a sequence's ceiling it may return fewer. A take whose answer was
// lost is retried on another replica: its IDs are lost, never reused.
func (c *Client) Take(ctx context.Context, name string, count int64) (Ranges, error) {
	var out struct {
		Ranges Ranges `json:"ranges"`
	}
	path := "/v1/sequences/" + url.PathEscape(name) + "/ids?count=" + strconv.FormatInt(count, 10)
	ep, err := c.do(ctx, nil, http.MethodPost, path, nil, nil, true, &out)
	if err != nil {
		return nil, err
	}
	if len(out.Ranges) == 0 {
		return nil, fmt.Errorf("client: take of %q: an answer without IDs", name)
	}
	c.served.add(name, ep, out.Ranges)
	return out.Ranges, nil
}

// Recycle pushes ids back to sequence name (POST .../recycle), so they are
// handed out again. A replica takes back only IDs that it handed out
// itself, so each part of ids goes to the replica that handed it out to
// this Client; without a key, to that replica only: when it does not
// answer, the part fails (ErrUnavailable) and its IDs count as lost. IDs
// this Client did not take go to any replica, which refuses them unless it
// handed them out (ErrNotHandedOut).
//
// With key (see NewPushKey; the same on every retry of one logical push) a
// call whose answer was lost is retried and answered definitively: already
// reports a push that had landed before (each part sent to another replica
// carries a key derived from key). Without a key such a call fails with
// ErrUncertain and must not be repeated: count the IDs as lost.
func (c *Client) Recycle(ctx context.Context, name string, ids Ranges, key string) (already bool, err error) {
	order, parts := c.served.split(name, ids)
	var errs []error
	all := true
	for i, ep := range order {
		k := key
		if key != "" && len(order) > 1 {
			k = fmt.Sprintf("%s.%d", key[:min(len(key), 60)], i)
		}
		a, err := c.recycleAt(ctx, ep, name, parts[ep], k)
		if err != nil {
			errs = append(errs, err)
		}
		all = all && a
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	return all, nil
}

// recycleAt sends one recycle to ep (any replica when nil).
func (c *Client) recycleAt(ctx context.Context, ep *endpoint, name string, ids Ranges, key string) (bool, error) {
	body, err := json.Marshal(map[string]Ranges{"ranges": ids})
	if err != nil {
		return false, err
	}
	var hdr http.Header
	if key != "" {
		hdr = http.Header{"Idempotency-Key": {key}}
	}
	var out struct {
		AlreadyApplied bool `json:"already_applied"`
	}
	_, err = c.do(ctx, ep, http.MethodPost, "/v1/sequences/"+url.PathEscape(name)+"/recycle", body, hdr, key != "", &out)
	return out.AlreadyApplied, err
}

// NewPushKey returns a fresh idempotency key for one logical push.
func NewPushKey() string {
	return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
}

// do sends a request to the replicas in turn (to only when it is not nil)
// until one answers it, or RetryFor or ctx ends, and returns the replica
// that answered. retry says whether a request whose answer was lost may be
// sent again; without it such a request fails with ErrUncertain.
func (c *Client) do(ctx context.Context, to *endpoint, method, path string, body []byte, hdr http.Header, retry bool, out any) (*endpoint, error) {
	if c.opts.Root != "" {
		// /v1/sequences/... -> /v1/roots/{root}/sequences/...
		path = "/v1/roots/" + c.opts.Root + strings.TrimPrefix(path, "/v1")
	}
	deadline := time.Now().Add(c.opts.RetryFor)
	var last error
	for {
		ep, wait := c.pick()
		if to != nil && (!retry || last == nil) {
			// A recycle goes to the replica that handed the IDs out;
			// without a key, to it only. With a key, a retry elsewhere
			// is answered definitively (already applied, or refused).
			ep, wait = to, to.wait()
		}
		if wait > 0 {
			if time.Now().Add(wait).After(deadline) {
				return nil, fmt.Errorf("client: %w: %w", ErrUnavailable, last)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			continue
		}
		sent, err := c.attempt(ctx, ep, method, path, body, hdr, out)
		if err == nil {
			ep.up()
			return ep, nil
		}
		if ctx.Err() != nil {
			if sent && !retry {
				return nil, fmt.Errorf("client: %s %s: %w (cancelled after the request was sent: count its IDs as lost): %w", method, path, ErrUncertain, ctx.Err())
			}
			return nil, ctx.Err()
		}
		var ae *APIError
		switch {
		case errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable:
			return nil, err // the caller's to act on
		case errors.As(err, &ae):
			ep.down(retryAfter(ae))
		case sent && !retry:
			ep.down(0)
			return nil, fmt.Errorf("client: %s %s: %w (the answer was lost; without an idempotency key it must not be sent again: count its IDs as lost): %w", method, path, ErrUncertain, err)
		default:
			ep.down(0)
		}
		last = err
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("client: %w: %w", ErrUnavailable, last)
		}
	}
}

// retryAfter is how long a 503 asked to wait (its Retry-After seconds).
func retryAfter(ae *APIError) time.Duration {
	return time.Duration(ae.retryAfter) * time.Second
}

// attempt sends one request to ep. sent reports whether the request may
// have reached the replica (anything but a refused connection).
func (c *Client) attempt(ctx context.Context, ep *endpoint, method, path string, body []byte, hdr http.Header, out any) (sent bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, method, ep.base+path, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false, err
		}
		return true, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return true, fmt.Errorf("read the answer of %s: %w", ep.base, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &APIError{Status: resp.StatusCode, Endpoint: ep.base}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			ae.Code, ae.Message = e.Error.Code, e.Error.Message
		} else {
			ae.Code, ae.Message = "http_"+strconv.Itoa(resp.StatusCode), strings.TrimSpace(string(data[:min(len(data), 200)]))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			ae.retryAfter = min(s, 60)
		}
		return true, ae
	}
	if err := json.Unmarshal(data, out); err != nil {
		return true, fmt.Errorf("the answer of %s is not what the API documents: %w", ep.base, err)
	}
	return true, nil
}

// pick returns the next replica to try, or how long until one may be
// tried again.
func (c *Client) pick() (*endpoint, time.Duration) {
	now := time.Now()
	start := int(c.next.Add(1))
	soonest := time.Duration(-1)
	for i := range c.eps {
		ep := c.eps[(start+i)%len(c.eps)]
		ep.mu.Lock()
		until := ep.downUntil
		ep.mu.Unlock()
		if !until.After(now) {
			return ep, 0
		}
		if w := until.Sub(now); soonest < 0 || w < soonest {
			soonest = w
		}
	}
	return nil, soonest
}

// down skips ep for at least wait, or a backoff that doubles with every
// failure in a row, with jitter.
func (ep *endpoint) down(wait time.Duration) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.failures++
	b := downPolicy.Delay(ep.failures - 1)
	ep.downUntil = time.Now().Add(max(b, wait))
}

// wait is how long until ep may be tried again (0: now).
func (ep *endpoint) wait() time.Duration {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return max(0, time.Until(ep.downUntil))
}

// up records that ep answered.
func (ep *endpoint) up() {
	ep.mu.Lock()
	ep.failures, ep.downUntil = 0, time.Time{}
	ep.mu.Unlock()
}
