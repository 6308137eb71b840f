package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchCounter is an Observer that keeps the stats of every Fetch.
type fetchCounter struct {
	fetcher.NopObserver
	mu      sync.Mutex
	fetches []fetcher.RequestStats
}

func (f *fetchCounter) RequestDone(s fetcher.RequestStats) {
	if s.Key != kmsg.Fetch {
		return
	}
	f.mu.Lock()
	f.fetches = append(f.fetches, s)
	f.mu.Unlock()
}

func (f *fetchCounter) since(n int) []fetcher.RequestStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fetches[min(n, len(f.fetches)):])
}

// Against Kafka, which grants a consumer a KIP-227 session (its cache has
// max.incremental.fetch.session.cache.slots = 1000): each broker's worker
// makes one with its first Fetch, and every later Fetch is incremental;
// once caught up, a long poll names no partition (those left out of the
// answer are answered from the session rather than failed), records
// produced later still arrive, and the copy is byte-equal to the leaders'
// logs.
func TestFetchSessions(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{})
	c.CreateTopic(ctx, "sessions", rf3x4, nil)
	for p := range int32(4) {
		produceTo(ctx, t, c, "sessions", p, "before", 2000)
	}

	counter := &fetchCounter{}
	s := followWith(t, fetcher.Config{
		Client:           c.Client(kgo.MetadataMinAge(100 * time.Millisecond)),
		Follow:           func(topic string) bool { return topic == "sessions" },
		MetadataInterval: time.Second,
		Backoff:          follower.BackoffPolicy{Base: 50 * time.Millisecond, Max: time.Second},
		Observers:        []fetcher.Observer{counter},
		// The binary's sessions are on its own Fetch connections: a
		// session is the broker's (FetchSessionCache, by id), whatever
		// connection carries its requests.
		DirectFetch: testDirectFetch(),
	})

	s.waitCaughtUp(ctx, c, "sessions", 4)
	// Idle: a few long polls of every broker, each naming nothing once the
	// last offsets are sent.
	n := len(counter.since(0))
	deadline := time.Now().Add(30 * time.Second)
	var idle []fetcher.RequestStats
	for {
		idle = counter.since(n)
		empty := 0
		for _, f := range idle {
			if f.Named == 0 {
				empty++
			}
		}
		if empty >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no idle incremental Fetch requests after catching up: %+v", idle)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, f := range idle[len(idle)-3:] {
		if !f.Incremental || f.Named != 0 || f.Err != nil {
			t.Fatalf("idle Fetch %+v, want an incremental one naming nothing", f)
		}
	}

	for p := range int32(4) {
		produceTo(ctx, t, c, "sessions", p, "after", 100)
	}
	s.waitCaughtUp(ctx, c, "sessions", 4)
	s.stop()
	for p := range int32(4) {
		s.compareWithLeader(ctx, c, "sessions", p)
	}
	if evs := s.Events(); len(evs) > 0 {
		t.Errorf("events on a cluster that lost nothing: %v", evs)
	}

	all := counter.since(0)
	var incremental, full int
	for _, f := range all {
		if f.Incremental {
			incremental++
		} else if f.Err == nil {
			full++
		}
	}
	t.Logf("%d Fetch requests: %d incremental, %d full", len(all), incremental, full)
	if incremental*10 < len(all)*8 {
		t.Errorf("%d of %d Fetch requests incremental, want at least 80%%", incremental, len(all))
	}
	if full > 3 {
		t.Errorf("%d full Fetch requests, want one per broker (3)", full)
	}
}
