package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scriptedMetadata answers every Metadata request with answer(n), n the
// request's number from 0, and tells at of each request as it comes.
type scriptedMetadata struct {
	answer func(n int) *kmsg.MetadataResponse
	mu     sync.Mutex
	n      int
	at     chan int
}

func (s *scriptedMetadata) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*kmsg.MetadataRequest); !ok {
		return nil, fmt.Errorf("scriptedMetadata: a %T", req)
	}
	s.mu.Lock()
	n := s.n
	s.n++
	s.mu.Unlock()
	s.at <- n
	return s.answer(n), nil
}

// metadataAnswer names brokers 1 and 2 and topic t's partitions, partition
// i led by leaders[i] at epochs[i].
func metadataAnswer(leaders, epochs []int32) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	for _, id := range []int32{1, 2} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "localhost", 9090+id
		resp.Brokers = append(resp.Brokers, b)
	}
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic, rt.TopicID = kmsg.StringPtr("t"), wire.TopicID{1}
	for i := range leaders {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition, rp.Leader, rp.LeaderEpoch = int32(i), leaders[i], epochs[i]
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// runScripted runs a Manager whose every broker is s, with no worker
// running (no Fetch can ask for a refresh: only Run's timer and the test
// do), MetadataInterval an hour and the chase every 5 ms, until the test
// ends.
func runScripted(t *testing.T, s *scriptedMetadata) *Manager {
	t.Helper()
	m := newManager(Config{
		DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: time.Hour,
		Logger:           slog.New(slog.DiscardHandler),
	}, s, func(int32) requester { return s })
	m.start = func(_ context.Context, w *worker) { close(w.done) }
	m.chaseEvery = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

// waitRequest waits for Metadata request n, failing after a deadline.
func waitRequest(t *testing.T, s *scriptedMetadata, n int, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-s.at:
			if got == n {
				return
			}
		case <-deadline:
			t.Fatalf("no Metadata request %d (%s) within 10 s", n, what)
		}
	}
}

// noRequest fails if a Metadata request comes within 60 chase intervals.
// It can only fail for a request that should not come: on a slow machine
// one might come too late to be seen, never too early.
func noRequest(t *testing.T, s *scriptedMetadata, what string) {
	t.Helper()
	select {
	case n := <-s.at:
		t.Fatalf("Metadata request %d: %s", n, what)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestRunChasesMoves: after an answer that shows a leader move, Run reads
// Metadata again after the chase interval, not MetadataInterval (an hour
// here), until both brokers have answered once without a move; then it
// waits MetadataInterval again. Checked that it can fail: a chase that
// waits MetadataInterval never sends request 2; one that ends at the
// first quiet answer never sends request 3; one on every answer sends
// request 1 unasked; placeAll keeping only its last partition's report
// misses t-0's move.
func TestRunChasesMoves(t *testing.T) {
	s := &scriptedMetadata{at: make(chan int, 100), answer: func(n int) *kmsg.MetadataResponse {
		if n == 0 {
			return metadataAnswer([]int32{1, 1}, []int32{1, 1})
		}
		return metadataAnswer([]int32{2, 1}, []int32{2, 1}) // t-0 moved to broker 2
	}}
	m := runScripted(t, s)
	waitRequest(t, s, 0, "Run's first")
	noRequest(t, s, "after the first answer, which shows no move, Run should wait MetadataInterval")
	m.requestRefresh() // as a worker does when a Fetch answer names another leader
	waitRequest(t, s, 1, "asked for")
	waitRequest(t, s, 2, "the chase after the answer that showed t-0 moved")
	waitRequest(t, s, 3, "the chase after one quiet answer of two brokers")
	noRequest(t, s, "after both brokers answered without a move, Run should wait MetadataInterval")
}

// TestRunChaseBounded: answers that never agree (t-0 named under broker 1
// and broker 2 in turn) are chased chaseMax times, then read every
// MetadataInterval. Checked that it can fail: without the bound (in chase
// or in Run), request chaseMax+2 comes.
func TestRunChaseBounded(t *testing.T) {
	s := &scriptedMetadata{at: make(chan int, 100), answer: func(n int) *kmsg.MetadataResponse {
		return metadataAnswer([]int32{1 + int32(n%2)}, []int32{1})
	}}
	m := runScripted(t, s)
	waitRequest(t, s, 0, "Run's first")
	m.requestRefresh()
	// Answer 1 names broker 2, the first move; each one after it another,
	// and requests 2 to chaseMax+1 are the chase.
	waitRequest(t, s, chaseMax+1, "the last chase")
	noRequest(t, s, fmt.Sprintf("the chase should end after %d reads in a row", chaseMax))
}

// TestChaseNext: the chase's decisions one by one: an answer that shows a
// move starts or goes on with the chase, up to chaseMax reads in a row;
// in a chase, answers without a move go on with it until every broker has
// given one in a row, then it ends and the count starts again; an
// interval shorter than the chase's is kept.
func TestChaseNext(t *testing.T) {
	c := chase{every: chaseInterval}
	const interval, brokers = 5 * time.Second, 3
	want := func(what string, changed bool, d time.Duration) {
		t.Helper()
		if got := c.next(changed, interval, brokers); got != d {
			t.Fatalf("%s: next in %v, want %v", what, got, d)
		}
	}
	want("no move, no chase", false, interval)
	want("a move", true, chaseInterval)
	want("quiet 1 of 3", false, chaseInterval)
	want("quiet 2 of 3", false, chaseInterval)
	want("quiet 3 of 3: the chase ends", false, interval)
	want("no move after the chase", false, interval)
	for i := range chaseMax {
		want(fmt.Sprintf("move %d in a row", i+1), true, chaseInterval)
	}
	want("a move beyond chaseMax: the chase spent", true, interval)
	for i := range brokers {
		want(fmt.Sprintf("quiet %d after the spent chase", i+1), false, interval)
	}
	want("a move after the chase ended: a new one", true, chaseInterval)
	want("a quiet answer between moves", false, chaseInterval)
	want("a move again: the quiet count starts over", true, chaseInterval)
	want("quiet 1 of 3 again", false, chaseInterval)
	want("quiet 2 of 3 again", false, chaseInterval)
	if d := c.next(true, 100*time.Millisecond, brokers); d != 100*time.Millisecond {
		t.Fatalf("MetadataInterval 100 ms: next in %v, want 100ms", d)
	}
}

// TestPlaceAllReportsMoves: placeAll reports a move when an answer names
// another leader or epoch than the last seen for a partition followed
// before, newer (a move) or older (a broker that has not yet applied it),
// whichever partition of the answer it is, and not for the first sight of
// a partition or the same leaders again.
func TestPlaceAllReportsMoves(t *testing.T) {
	e := newDriverEnvAt(t, t.TempDir(), slog.New(slog.DiscardHandler))
	defer e.close()
	for _, c := range []struct {
		what            string
		leaders, epochs []int32
		want            bool
	}{
		{"first sight", []int32{1, 1}, []int32{3, 3}, false},
		{"the same again", []int32{1, 1}, []int32{3, 3}, false},
		{"t-0 moved to broker 2, t-1 not", []int32{2, 1}, []int32{4, 3}, true},
		{"a broker not yet at the move", []int32{1, 1}, []int32{3, 3}, true},
		{"the move again", []int32{2, 1}, []int32{4, 3}, false},
		{"t-1 moved, the last in the answer", []int32{2, 2}, []int32{4, 4}, true},
	} {
		if got := e.m.placeAll(e.ctx, metadataAnswer(c.leaders, c.epochs), -1); got != c.want {
			t.Errorf("%s (leaders %v, epochs %v): placeAll reports a move %v, want %v", c.what, c.leaders, c.epochs, got, c.want)
		}
	}
}
