package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// tinyidClient is Tinyid's Java client (tinyid-client: TinyId.nextId,
// CachedIdGenerator, HttpSegmentIdServiceImpl), written again from its
// protocol: it POSTs nextSegmentIdSimple to one of its servers at random,
// with the token and bizType in the query and no body, reads
// currentId,loadingId,maxId,delta,remainder, hands out currentId+delta up
// to maxId, loads the next segment in the background once an ID reaches
// loadingId, and switches to it when the current one is used up.
type tinyidClient struct {
	servers []string // each a base URL: ends in .../nextSegmentIdSimple?token=T&bizType=
	bizType string
	pick    func(n int) int

	mu          sync.Mutex
	cur, next   *tinyidSegment
	loadingNext bool
	loadErr     error
}

type tinyidSegment struct {
	current, loading, max, delta, remainder int64
}

// nextID is CachedIdGenerator.nextId.
func (c *tinyidClient) nextID() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.cur == nil || c.cur.current >= c.cur.max {
			if err := c.loadCurrent(); err != nil {
				return 0, err
			}
			continue
		}
		for c.cur.current%c.cur.delta != c.cur.remainder { // SegmentId.init
			c.cur.current++
		}
		c.cur.current += c.cur.delta
		id := c.cur.current
		if id > c.cur.max {
			continue
		}
		if id >= c.cur.loading && c.next == nil && !c.loadingNext {
			c.loadingNext = true
			go func() {
				seg, err := c.query()
				c.mu.Lock()
				c.next, c.loadErr, c.loadingNext = seg, err, false
				c.mu.Unlock()
			}()
		}
		return id, nil
	}
}

// loadCurrent moves to the loaded next segment, or queries one now.
func (c *tinyidClient) loadCurrent() error {
	if c.next != nil {
		c.cur, c.next = c.next, nil
		return nil
	}
	c.mu.Unlock()
	seg, err := c.query()
	c.mu.Lock()
	if err != nil {
		return err
	}
	c.cur = seg
	return nil
}

// query is HttpSegmentIdServiceImpl.getNextSegmentId.
func (c *tinyidClient) query() (*tinyidSegment, error) {
	url := c.servers[c.pick(len(c.servers))] + c.bizType
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s %v", url, resp.StatusCode, body, err)
	}
	f := strings.Split(strings.TrimSpace(string(body)), ",")
	if len(f) != 5 {
		return nil, fmt.Errorf("%s: %q is not currentId,loadingId,maxId,delta,remainder", url, body)
	}
	var v [5]int64
	for i := range f {
		if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return nil, fmt.Errorf("%s: %q: %v", url, body, err)
		}
	}
	return &tinyidSegment{current: v[0], loading: v[1], max: v[2], delta: v[3], remainder: v[4]}, nil
}

// Tinyid's own client, unchanged but for its server list: eight of them on
// two replicas take IDs through segments, loading the next at loadingId;
// every ID is handed out once. The JSON routes answer in Tinyid's
// envelope.
func TestTinyidClientTakesThroughSegments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("orders", seqzk.Registration{}, 1<<40)
	replicas := []*replica{
		e.replica(httpapi.Options{Token: "T"}, sequence.Options{}),
		e.replica(httpapi.Options{Token: "T"}, sequence.Options{}),
	}
	var servers []string
	for _, r := range replicas {
		servers = append(servers, r.ts.URL+"/tinyid/id/nextSegmentIdSimple?token=T&bizType=")
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	const clients, each = 8, 3000
	for g := range clients {
		c := &tinyidClient{servers: servers, bizType: "orders", pick: func(n int) int { return g % n }}
		wg.Go(func() {
			for range each {
				id, err := c.nextID()
				if err != nil {
					t.Errorf("client %d: %v", g, err)
					return
				}
				mu.Lock()
				if prev, dup := seen[id]; dup {
					t.Errorf("ID %d handed out to client %d and to client %d", id, prev, g)
				}
				seen[id] = g
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != clients*each {
		t.Fatalf("%d IDs, want %d", len(seen), clients*each)
	}

	// The segment routes' shapes, and a segment's contiguous range: the
	// next one starts above it, sized as the answer says.
	r := replicas[0]
	status, _, body := r.call("GET", "/tinyid/id/nextSegmentIdSimple?bizType=orders&token=T", "", "")
	var cur, loading, max, delta, rem int64
	if _, err := fmt.Sscanf(string(body), "%d,%d,%d,%d,%d", &cur, &loading, &max, &delta, &rem); status != 200 || err != nil ||
		delta != 1 || rem != 0 || max <= cur || loading != cur+(max-cur)/5 {
		t.Fatalf("nextSegmentIdSimple: %d %q (%v)", status, body, err)
	}
	status, _, body = r.call("POST", "/tinyid/id/nextSegmentId?bizType=orders&token=T", "", "")
	var seg struct {
		Data struct {
			CurrentID int64 `json:"currentId"`
			LoadingID int64 `json:"loadingId"`
			MaxID     int64 `json:"maxId"`
			Delta     int64 `json:"delta"`
			Remainder int64 `json:"remainder"`
		} `json:"data"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &seg); status != 200 || err != nil || seg.Code != 200 || seg.Data.CurrentID < max || seg.Data.MaxID <= seg.Data.CurrentID || seg.Data.Delta != 1 {
		t.Fatalf("nextSegmentId after a segment up to %d: %d %s (%v)", max, status, body, err)
	}
	status, _, body = r.call("GET", "/tinyid/id/nextId?bizType=orders&batchSize=3&token=T", "", "")
	var ids struct {
		Data    []int64 `json:"data"`
		Code    int     `json:"code"`
		Message string  `json:"message"`
	}
	if err := json.Unmarshal(body, &ids); status != 200 || err != nil || len(ids.Data) != 3 || ids.Code != 200 || !strings.Contains(string(body), `"message":""`) {
		t.Fatalf("nextId batchSize=3: %d %s (%v)", status, body, err)
	}
	for _, id := range ids.Data {
		if _, dup := seen[id]; dup || id > seg.Data.CurrentID && id <= seg.Data.MaxID {
			t.Errorf("nextId handed out %d again", id)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/tinyid/id/nextSegmentIdSimple?bizType=orders&batchSize=2&token=T", `unknown query parameter \"batchSize\"`},
		{"/tinyid/id/nextSegmentId?token=T", "nextSegmentId needs bizType"},
		{"/tinyid/id/nextSegmentIdSimple?bizType=missing&token=T", `sequence \"missing\" does not exist`},
	} {
		if status, _, body := r.call("GET", c.path, "", ""); status/100 != 4 || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s: %d %s; want a 4xx saying %s", c.path, status, body, c.want)
		}
	}
}
