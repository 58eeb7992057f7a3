package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// The status console is tested in a real headless Chromium against real
// replicas (ZooKeeper, a file store). It never skips for want of the
// browser: without it, it fails and says how to install it (-short skips
// it as slow).

// screenshotEnv, set to 1, makes TestConsoleInABrowser write
// docs/console.png (after a minute of traffic, so the charts have data).
const screenshotEnv = "SEQKEEPER_UPDATE_SCREENSHOT"

// chromiumPath finds the browser: SEQKEEPER_CHROMIUM, or chromium (Debian's
// package) or Chrome on $PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SEQKEEPER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found on $PATH (nor SEQKEEPER_CHROMIUM): the status console's browser test needs it; " +
		"run 'bash scripts/setup.sh' once (or apt-get install chromium)")
	return ""
}

// newBrowser starts a headless Chromium for the test and returns its
// context; pages open in tabs of it. The browser tests are not parallel,
// not even with -short: beside the others on a loaded machine, a page
// did not show its first row within 30 s.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // tests run as root
		chromedp.Headless,
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v (run 'bash scripts/setup.sh' if it is missing or broken)", err)
	}
	return bctx
}

// consolePage is the console of one replica, open in a tab. It records
// every request the page makes and every script error or policy
// violation.
type consolePage struct {
	t      *testing.T
	ctx    context.Context
	origin string

	mu       sync.Mutex
	requests []pageRequest
	problems []string
}

type pageRequest struct {
	url, auth string
}

// openConsole opens origin's /ui/ in a new tab.
func openConsole(t *testing.T, browser context.Context, origin string) *consolePage {
	t.Helper()
	return openConsoleAt(t, browser, origin, "/ui")
}

// openConsoleAt opens origin's console at path (/ui, or /ui/#root=NAME)
// in a new tab.
func openConsoleAt(t *testing.T, browser context.Context, origin, path string) *consolePage {
	t.Helper()
	p := &consolePage{t: t, origin: origin}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithListener(p.listen))
	t.Cleanup(cancel)
	p.ctx = ctx
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+path)); err != nil {
		t.Fatalf("open %s%s: %v", origin, path, err)
	}
	// A marker that a reload would lose: the page must update in place.
	p.eval(`window.__stillHere = 'yes'`)
	return p
}

// listen runs in the tab's event loop: record, return fast.
func (p *consolePage) listen(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		auth, _ := ev.Request.Headers["Authorization"].(string)
		p.requests = append(p.requests, pageRequest{url: ev.Request.URL, auth: auth})
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		p.problems = append(p.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, text))
	case *log.EventEntryAdded:
		// Failed fetches (401, a stopped replica) are expected; script
		// errors and Content-Security-Policy violations are not.
		if ev.Entry.Source != "network" && ev.Entry.Level == "error" {
			p.problems = append(p.problems, fmt.Sprintf("console %s: %s", ev.Entry.Source, ev.Entry.Text))
		}
	}
}

// eval evaluates a JavaScript expression whose value is a string.
func (p *consolePage) eval(js string) string {
	p.t.Helper()
	out, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`String((() => (`+js+`))() ?? '')`))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return out
}

// waitFor evaluates js until ok accepts its value (30 s at most) and
// returns the value.
func (p *consolePage) waitFor(what, js string, ok func(string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := p.eval(js)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: the console shows %q after 30 s\n%s", what, v, p.eval(`document.body.innerText`))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// text is the text of the first element matching a CSS selector.
func text(sel string) string {
	return fmt.Sprintf(`document.querySelector(%q)?.textContent.trim()`, sel)
}

func cell(seq, class string) string {
	return text(fmt.Sprintf(`tr[data-name=%q] td.%s`, seq, class))
}

func equals(want string) func(string) bool { return func(v string) bool { return v == want } }

// check fails the test for script errors, policy violations, a reload,
// and any request that left the replica.
func (p *consolePage) check() {
	p.t.Helper()
	if p.eval(`window.__stillHere`) != "yes" {
		p.t.Error("the page was reloaded; it must update in place")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.problems {
		p.t.Error(pr)
	}
	for _, r := range p.requests {
		if !strings.HasPrefix(r.url, p.origin+"/") {
			p.t.Errorf("the page requested %s, outside the replica %s", r.url, p.origin)
		}
	}
}

// requestsTo returns the recorded requests whose URL has path prefix.
func (p *consolePage) requestsTo(prefix string) []pageRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pageRequest
	for _, r := range p.requests {
		if strings.HasPrefix(r.url, p.origin+prefix) {
			out = append(out, r)
		}
	}
	return out
}

// traffic takes IDs from replicas until stop: per sequence, about rate IDs
// a second in all, swelling and ebbing over a minute so the charts move.
func traffic(replicas []*replicaProc, rates map[string]float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 2 * time.Second}
	began := time.Now()
	for _, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owed := map[string]float64{}
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				swell := 1 + 0.6*math.Sin(time.Since(began).Seconds()/60*2*math.Pi)
				for name, rate := range rates {
					owed[name] += rate * swell / 10 / float64(len(replicas))
					n := int(owed[name])
					if n < 1 {
						continue
					}
					owed[name] -= float64(n)
					resp, err := client.Post(fmt.Sprintf("http://%s/v1/sequences/%s/ids?count=%d", r.addr, name, n), "", nil)
					if err == nil {
						resp.Body.Close()
					}
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// The console of two replicas: it shows the primary, the sequences
// (unhealthy first), follows the traffic without a reload, and shows the
// new primary after a handover. It loads nothing from outside the replica.
func TestConsoleInABrowser(t *testing.T) {
	testenv.Slow(t)
	browser := newBrowser(t)
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	// A runway as in production (the default is a minute), rather than
	// the other tests' 2 s: the screenshot shows what operators see.
	a, b := c.serveWith("a", "--runway", "30s"), c.serveWith("b", "--runway", "30s")
	for _, r := range []*replicaProc{a, b} {
		eventually(t, "replica "+r.id+" ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	}
	leaderOf := func(r *replicaProc) string {
		var st struct {
			Primary *struct {
				ID string `json:"id"`
			} `json:"primary"`
		}
		if r.get(t, "/v1/status", &st) != http.StatusOK || st.Primary == nil {
			return ""
		}
		return st.Primary.ID
	}
	eventually(t, "a primary", func() bool { return leaderOf(a) != "" && leaderOf(a) == leaderOf(b) })
	leader, standby := a, b
	if leaderOf(a) == "b" {
		leader, standby = b, a
	}

	c.ok("create", "orders")
	c.ok("create", "invoices", "--start", "1000000", "--windows", "2")
	c.ok("create", "users")
	c.ok("create", "coupons", "--max", "100")
	for _, name := range []string{"orders", "invoices", "users"} {
		eventually(t, name+" serves IDs", func() bool { _, code := leader.ids(t, name, 1); return code == http.StatusOK })
	}
	// coupons runs out: an unhealthy sequence, which sorts first.
	eventually(t, "coupons exhausted", func() bool { _, code := leader.ids(t, "coupons", 100); return code == http.StatusConflict })
	stop := traffic([]*replicaProc{a, b}, map[string]float64{"orders": 400, "invoices": 120, "users": 15})
	defer stop()

	began := time.Now()
	p := openConsole(t, browser, "http://"+leader.addr)
	p.waitFor("the orders row", cell("orders", "name"), equals("orders"))
	if picker := p.eval(`String(document.getElementById('root-pick').hidden)`); picker != "true" {
		t.Errorf("a replica of one root shows the root picker (hidden = %s)", picker)
	}
	p.waitFor("the role", text("#role"), equals("PRIMARY"))
	p.waitFor("the primary", text("#primary"), equals(leader.id))
	p.waitFor("this replica", text("#replica"), equals(leader.id))
	p.waitFor("the ZooKeeper state", text("#zk"), equals("has session"))
	p.waitFor("the store", text("#store"), equals("healthy"))
	p.waitFor("the exhausted sequence first", `document.querySelector('#sequences tr').dataset.name`, equals("coupons"))
	if h := p.eval(cell("coupons", "health")); h != "exhausted" {
		t.Errorf("coupons shows health %q, want exhausted", h)
	}
	if w := p.eval(cell("invoices", "windows")); !strings.HasPrefix(w, "2 · ") || !strings.HasSuffix(w, " open") {
		t.Errorf("invoices shows windows %q, want 2 · n open", w)
	}
	if r := p.eval(cell("coupons", "runway")); r != "—" {
		t.Errorf("the exhausted coupons shows a runway of %q, want —", r)
	}
	if h := p.eval(`document.querySelector('#handovers li')?.textContent`); !strings.Contains(h, leader.id) {
		t.Errorf("handovers %q do not name the primary %s", h, leader.id)
	}
	// It follows the traffic without a reload.
	first := p.eval(cell("orders", "next"))
	p.waitFor("orders' next to move", cell("orders", "next"), func(v string) bool { return v != first && v != "" })
	// The primary's own rate (no ~ of an estimate): the page asked for the
	// reserve of its rows by name.
	p.waitFor("orders' IDs per second", cell("orders", "rate"), func(v string) bool {
		f, err := strconv.ParseFloat(strings.ReplaceAll(v, ",", ""), 64)
		return err == nil && f > 0
	})
	p.waitFor("orders' runway", cell("orders", "runway"), func(v string) bool { return strings.HasSuffix(v, " s") || strings.HasSuffix(v, "min") })
	t.Logf("the primary's console shows the sequences and follows the traffic %s after it opened", time.Since(began).Round(time.Millisecond))
	for _, r := range p.requestsTo("/v1/") {
		if r.auth != "" {
			t.Errorf("%s carried an Authorization header without a token configured", r.url)
		}
		if strings.Contains(r.url, "/v1/roots/") {
			t.Errorf("the page of a replica of one root asked %s", r.url)
		}
		// Never the primary's whole list of sequences.
		if strings.Contains(r.url, "/v1/status") && !strings.Contains(r.url, "sequences=unhealthy") && !strings.Contains(r.url, "sequences=none") {
			t.Errorf("the page asked for %s: the whole reserve, megabytes at 100,000 sequences", r.url)
		}
	}

	if os.Getenv(screenshotEnv) == "1" {
		// A minute of traffic fills the charts (a sample every 5 s).
		p.waitFor("a minute of history", `String(document.querySelectorAll('#chart-rate polyline').length > 0 && document.querySelectorAll('#chart-runway polyline').length > 0)`, equals("true"))
		time.Sleep(time.Until(began.Add(80 * time.Second)))
		p.eval(`window.scrollTo(0, 0), ''`)
		png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join("..", "..", "docs", "console.png")
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", out, len(png))
	}

	// The standby's console: the prefix search, then the handover.
	q := openConsole(t, browser, "http://"+standby.addr)
	q.waitFor("the standby's role", text("#role"), equals("STANDBY"))
	q.waitFor("the primary, from the standby", text("#primary"), equals(leader.id))
	q.waitFor("the standby's rows", cell("orders", "name"), equals("orders"))
	// A standby keeps no reserve: it estimates the rate itself (~).
	q.waitFor("the standby's estimate of orders' rate", cell("orders", "rate"), func(v string) bool {
		f, err := strconv.ParseFloat(strings.NewReplacer(",", "", "~", "").Replace(v), 64)
		return strings.HasPrefix(v, "~") && err == nil && f > 0
	})
	if err := chromedp.Do(q.ctx, chromedp.SendKeys(chromedp.CSS("#prefix"), "inv")); err != nil {
		t.Fatal(err)
	}
	q.waitFor("the prefix search", `[...document.querySelectorAll('#sequences tr')].map(r => r.dataset.name).join(',')`, equals("invoices"))

	p.check() // before its replica goes away
	leader.cancel()
	select {
	case code := <-leader.exit:
		leader.exit <- code
	case <-time.After(30 * time.Second):
		t.Fatal("the primary did not stop")
	}
	handover := time.Now()
	q.waitFor("the standby's console to show itself primary", text("#role"), equals("PRIMARY"))
	q.waitFor("the new primary", text("#primary"), equals(standby.id))
	t.Logf("the console showed the new primary %s after the old one stopped", time.Since(handover).Round(time.Millisecond))
	q.waitFor("the handover in the list", `document.querySelector('#handovers li')?.textContent`, func(v string) bool { return strings.Contains(v, standby.id) })
	q.eval(`document.querySelector('#prefix').value = ''`)
	if err := chromedp.Do(q.ctx, chromedp.SendKeys(chromedp.CSS("#prefix"), "o")); err != nil {
		t.Fatal(err)
	}
	q.waitFor("the search for o", `[...document.querySelectorAll('#sequences tr')].map(r => r.dataset.name).join(',')`, equals("orders"))
	before := q.eval(cell("orders", "next"))
	q.waitFor("orders' next to move on the new primary", cell("orders", "next"), func(v string) bool { return v != before })
	q.check()
}

// With a token configured the console asks for it on the first 401, keeps
// it in sessionStorage (never localStorage, never the URL), sends it as a
// bearer token and loads the data; a wrong one is refused and asked again.
func TestConsoleAsksForTheToken(t *testing.T) {
	const token = "console-s3cret-token"
	browser := newBrowser(t)
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	r := c.serveWith("t", "--http-token", token)
	eventually(t, "replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "tokened")

	p := openConsole(t, browser, "http://"+r.addr)
	visible := `String(!document.getElementById('auth').hidden)`
	p.waitFor("the token prompt", visible, equals("true"))
	if rows := p.eval(`String(document.querySelectorAll('#sequences tr[data-name]').length)`); rows != "0" {
		t.Fatalf("%s sequence rows shown without a token", rows)
	}
	submit := func(tok string) {
		t.Helper()
		if err := chromedp.Do(p.ctx,
			chromedp.SendKeys(chromedp.CSS("#token"), tok),
			chromedp.Click(chromedp.CSS("#auth-form button[type=submit]")),
		); err != nil {
			t.Fatal(err)
		}
	}
	submit("wrong-token")
	p.waitFor("the wrong token refused", text("#auth-why"), func(v string) bool { return strings.Contains(v, "refused") })
	p.waitFor("the prompt again", visible, equals("true"))
	submit(token)
	p.waitFor("the data with the token", cell("tokened", "name"), equals("tokened"))
	p.waitFor("the prompt gone", visible, equals("false"))
	p.waitFor("the role", text("#role"), equals("PRIMARY"))

	if got := p.eval(`sessionStorage.getItem('seqkeeper.token')`); got != token {
		t.Errorf("sessionStorage holds %q, want the token", got)
	}
	if n := p.eval(`String(localStorage.length)`); n != "0" {
		t.Errorf("localStorage holds %s items; the token must not go there", n)
	}
	if u := p.eval(`location.href`); strings.Contains(u, token) {
		t.Errorf("the token is in the URL %s", u)
	}
	var withToken int
	for _, req := range p.requestsTo("/") {
		if strings.Contains(req.url, token) {
			t.Errorf("the token is in the request URL %s", req.url)
		}
		if strings.HasPrefix(req.url, p.origin+"/ui") && req.auth != "" {
			t.Errorf("%s carried the token; the console's files need none", req.url)
		}
		if strings.HasPrefix(req.url, p.origin+"/v1/") && req.auth == "Bearer "+token {
			withToken++
		}
	}
	if withToken == 0 {
		t.Error("no /v1 request carried 'Authorization: Bearer <token>'")
	}
	p.check()
}
