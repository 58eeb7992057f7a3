package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tinyidThroughKillAndWipe runs clients written from Tinyid's client
// protocol (tinyid-client: TinyId.nextId) against the replicas while the
// primary is killed and then ZooKeeper is wiped. Each POSTs
// nextSegmentIdSimple to a replica at random, hands out its segment's IDs
// itself, loads the next segment once it passes loadingId and switches to
// it at maxId. Every segment joins the history as the client's IDs, so the
// checker finds one handed out twice, to any worker. Each client must
// take a segment after the kill and after the wipe.
func (ch *chaos) tinyidThroughKillAndWipe(ctx context.Context) error {
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	clients := make([]*tinyidWorker, 4)
	for i := range clients {
		clients[i] = &tinyidWorker{ch: ch, id: fmt.Sprintf("tinyid-%d", i), seq: chaosSequences[0],
			http: &http.Client{Timeout: 8 * time.Second}, rng: rand.New(rand.NewPCG(uint64(i), 7))}
		wg.Go(func() { clients[i].run(cctx) })
	}
	defer func() { stop(); wg.Wait() }()
	took := func(what string, since time.Time) error {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for _, c := range clients {
			if err := c.waitSegment(wctx, since); err != nil {
				return fmt.Errorf("%s took no segment within a minute of %s: %w", c.id, what, err)
			}
		}
		return nil
	}
	if err := took("starting", time.Now()); err != nil {
		return err
	}
	if err := ch.killPrimary(ctx); err != nil {
		return err
	}
	if err := took("the primary's kill", time.Now()); err != nil {
		return err
	}
	if err := ch.wipeZooKeeper(ctx); err != nil {
		return err
	}
	return took("the wipe", time.Now())
}

// tinyidWorker is one Tinyid client.
type tinyidWorker struct {
	ch   *chaos
	id   string
	seq  string
	http *http.Client
	rng  *rand.Rand

	mu   sync.Mutex
	last time.Time // when it last took a segment
}

// tinyidSegment is what nextSegmentIdSimple answers.
type tinyidSegment struct{ current, loading, max int64 }

// run hands out IDs, 100 every 10 ms, through segments until ctx ends,
// as CachedIdGenerator does: the next segment loads in the background
// from loadingId on, and the client switches to it at maxId (or queries
// one then, when none is loading).
func (w *tinyidWorker) run(ctx context.Context) {
	var cur *tinyidSegment
	var next chan *tinyidSegment // set while the next segment loads
	for ctx.Err() == nil {
		if cur == nil || cur.current >= cur.max {
			if next != nil {
				cur, next = <-next, nil
			} else {
				cur = w.fetch(ctx)
			}
			continue
		}
		cur.current = min(cur.current+100, cur.max)
		if cur.current >= cur.loading && next == nil {
			loaded := make(chan *tinyidSegment, 1)
			next = loaded
			go func() { loaded <- w.fetch(ctx) }()
		}
		sleep(ctx, 10*time.Millisecond)
	}
	if next != nil {
		<-next
	}
}

// fetch is HttpSegmentIdServiceImpl.getNextSegmentId: a segment from a
// replica at random, recorded in the history; nil on failure.
func (w *tinyidWorker) fetch(ctx context.Context) *tinyidSegment {
	for ctx.Err() == nil {
		replicas := w.ch.c.Replicas()
		r := replicas[w.rng.IntN(len(replicas))]
		t0 := time.Now()
		s, err := w.segment(ctx, r.Addr(ReplicaPort))
		if err != nil {
			w.ch.hist.Event("error", w.id, "tinyid "+err.Error())
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		w.ch.hist.Add(w.seq, w.id, r.Name, t0, time.Now(), [][2]int64{{s.current + 1, s.max}})
		w.mu.Lock()
		w.last = time.Now()
		w.mu.Unlock()
		return s
	}
	return nil
}

func (w *tinyidWorker) segment(ctx context.Context, addr string) (*tinyidSegment, error) {
	if addr == "" {
		return nil, errors.New("no address")
	}
	url := fmt.Sprintf("http://%s/tinyid/id/nextSegmentIdSimple?token=&bizType=%s", addr, w.seq)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return nil, errors.New("unreachable")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%d", resp.StatusCode) // IDs of a lost body are lost, never reused
	}
	f := strings.Split(strings.TrimSpace(string(body)), ",")
	if len(f) != 5 || f[3] != "1" || f[4] != "0" {
		return nil, fmt.Errorf("answer %q is not currentId,loadingId,maxId,1,0", body)
	}
	var v [3]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return nil, fmt.Errorf("answer %q: %v", body, err)
		}
	}
	if v[2] <= v[0] || v[1] < v[0] || v[1] > v[2] {
		return nil, fmt.Errorf("answer %q: not a segment", body)
	}
	return &tinyidSegment{current: v[0], loading: v[1], max: v[2]}, nil
}

// waitSegment waits until w took a segment after since.
func (w *tinyidWorker) waitSegment(ctx context.Context, since time.Time) error {
	for {
		w.mu.Lock()
		last := w.last
		w.mu.Unlock()
		if last.After(since) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
