package fetcher

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchCounter counts the Fetch responses a worker received, and keeps the
// state machine step count at each (Manager.steps; RequestDone is told at
// the end of a response's receive, after the steps it made).
type fetchCounter struct {
	NopObserver
	m     *Manager
	mu    sync.Mutex
	steps []int64
	named []int
}

func (c *fetchCounter) RequestDone(s RequestStats) {
	if s.Key != kmsg.Fetch || s.Err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, c.m.steps.Load())
	c.named = append(c.named, s.Partitions)
}

// waitPast waits for n more Fetch responses than have come so far and
// returns the step counts at the first and the last of them.
func (c *fetchCounter) waitPast(t *testing.T, n int) (first, last int64) {
	t.Helper()
	c.mu.Lock()
	from := len(c.steps)
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		if len(c.steps) >= from+n+1 {
			first, last = c.steps[from], c.steps[from+n]
			c.mu.Unlock()
			return first, last
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d Fetch responses", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle long poll costs the partitions nothing (issue 14): once every
// partition has copied its record, a Fetch answer that brings nothing new
// (KIP-227 leaves the partitions out; without sessions the broker names
// each with the same high watermark) steps no state machine: each
// partition's Fetch goes out again as it was (part.carry). Metadata
// repeated every 50 ms, naming the same leaders, steps none either. So
// the steps of idle long polls are zero at 4 partitions and at 200, with
// sessions and without; with a session the idle answers are taken whole,
// not partition by partition (worker.quietAgain). Then a record produced
// to one partition is copied: a carried Fetch is answered as any other.
func TestIdleLongPollStepsNothing(t *testing.T) {
	for _, parts := range []int32{4, 200} {
		for _, noSessions := range []bool{false, true} {
			t.Run(fmt.Sprintf("partitions=%d/sessions=%t", parts, !noSessions), func(t *testing.T) {
				c, _ := sessionCluster(t, 1, parts)
				all := make([]int32, parts)
				for i := range all {
					all[i] = int32(i)
				}
				produceTo(t, c, all, 1)
				obs := &fetchCounter{}
				m := kfakeManager(t, c, Config{
					DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "s" },
					NoFetchSessions: noSessions, MetadataInterval: 50 * time.Millisecond,
					Logger: slog.New(slog.DiscardHandler), Observers: []Observer{obs},
				})
				obs.m = m
				startManager(t, m)

				waitCopied(t, m, int(parts), int64(parts), "the copy")
				// Two answers for every partition to be answered once
				// with what it has copied, then three idle ones.
				obs.waitPast(t, 2)
				q0 := m.quiet.Load()
				first, last := obs.waitPast(t, 3)
				if d := last - first; d != 0 {
					t.Errorf("3 idle long polls of %d partitions stepped state machines %d times, want 0", parts, d)
				}
				// With a session, the idle answers after the first that
				// carried them are taken whole (worker.quietAgain);
				// without one, each names every partition.
				switch q := m.quiet.Load() - q0; {
				case !noSessions && q < 2:
					t.Errorf("%d of 3 idle long polls taken whole (quietAgain), want at least 2", q)
				case noSessions && q != 0:
					t.Errorf("%d sessionless long polls taken whole (quietAgain), want 0", q)
				}
				produceTo(t, c, []int32{parts - 1}, 2)
				waitCopied(t, m, int(parts), int64(parts)+2, "the 2 more records")
				if s := status(m, "s", parts-1); s.State != "fetching" || s.LogEndOffset != 3 || s.HighWatermark != 3 {
					t.Errorf("after 2 more records, s-%d: %+v", parts-1, s)
				}
			})
		}
	}
}
