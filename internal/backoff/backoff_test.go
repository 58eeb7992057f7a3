package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelayGrowsWithinBounds(t *testing.T) {
	p := Policy{Initial: 4 * time.Millisecond, Max: 100 * time.Millisecond}
	for attempt := range 70 {
		nominal := min(p.Max, p.Initial<<min(attempt, 30))
		for range 50 {
			d := p.Delay(attempt)
			if d < nominal/2 || d > nominal {
				t.Fatalf("Delay(%d) = %s; want within [%s, %s]", attempt, d, nominal/2, nominal)
			}
		}
	}
	if d := (Policy{}).Delay(3); d != 0 {
		t.Fatalf("zero policy Delay = %s; want 0", d)
	}
	// Jitter: not every draw is the same.
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[p.Delay(5)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("100 draws gave %d distinct delays; want jitter", len(seen))
	}
}

func TestWaitStopsWithContext(t *testing.T) {
	cause := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := (Policy{Initial: time.Hour, Max: time.Hour}).Wait(ctx, 0); !errors.Is(err, cause) {
		t.Fatalf("Wait on a done context = %v; want its cause", err)
	}
	ctx, cancel2 := context.WithCancelCause(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel2(cause) }()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("Sleep cancelled midway = %v; want its cause", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}
