package fetcher

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The driver's error paths against kfake, which cannot diverge, so no event
// of any kind may be reported: fetches answered NOT_LEADER_OR_FOLLOWER and
// FENCED_LEADER_EPOCH, epoch queries answered UNKNOWN_LEADER_EPOCH, and a
// partition moved to another broker mid-stream (a hand-off between worker
// goroutines, and a reconciliation with the new leader, as kfake bumps the
// leader epoch). Each fault fires as often as installed and the driver sees
// each one by name; the status names the new leader; every record arrives
// exactly once.
func TestDriverErrorPathsKfake(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(3), kfake.SeedTopics(4, "t"))
	faults := []struct {
		key   kmsg.Key
		err   *kerr.Error
		count int
		h     *kfake.FaultHandle
	}{
		{key: kmsg.Fetch, err: kerr.NotLeaderForPartition, count: 5},
		{key: kmsg.Fetch, err: kerr.FencedLeaderEpoch, count: 2},
		{key: kmsg.OffsetForLeaderEpoch, err: kerr.UnknownLeaderEpoch, count: 3},
	}
	for i, f := range faults {
		faults[i].h = c.Fault(kfake.Fault{Keys: []kmsg.Key{f.key}, Err: f.err, Count: f.count})
	}
	ctx := context.Background()
	produce := func(n int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: int32(i % 4), Value: []byte{byte(i)}})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(2000)

	dir := t.TempDir()
	rec := &recorder{}
	m := kfakeManager(t, c, Config{
		DataDir: dir, Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: 200 * time.Millisecond,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Logger:           slog.New(slog.DiscardHandler),
		Observers:        []Observer{rec},
	})
	stop := startManager(t, m)

	waitEnds := func(what string, want int64, also func(ss []Status) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var sum int64
			ss := m.Statuses()
			for _, s := range ss {
				sum += s.LogEndOffset
			}
			if len(ss) == 4 && sum == want && m.Ready() && also(ss) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: want %d records copied, statuses %+v", what, want, ss)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitEnds("the first records", 2000, func([]Status) bool { return true })
	from := status(m, "t", 0).Leader
	to := (from + 1) % 3
	if err := c.MoveTopicPartition("t", 0, to); err != nil {
		t.Fatal(err)
	}
	produce(400)
	waitEnds("the records after the hand-off", 2400, func(ss []Status) bool { return ss[0].Leader == to })
	if s := status(m, "t", 0); s.Leader != to || s.State != "fetching" || !s.Reconciled {
		t.Fatalf("t-0 moved from broker %d to %d, yet its status says %+v", from, to, s)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for _, e := range rec.Events() {
		// One deviation of kfake's is known and depends on timing: after
		// MoveTopicPartition bumps t-0 to epoch 1, kfake's
		// OffsetForLeaderEpoch (pkg/kfake/23_offset_for_leader_epoch.go)
		// derives epochs from the batches alone and seeds none at the
		// election, so until a batch of epoch 1 is written it answers
		// (-1, -1) for our epoch 0, where Kafka's
		// LeaderEpochFileCache.endOffsetFor answers (0, end of epoch 0).
		// kfollower is right to flag it and must not truncate on it, which
		// the byte checks below prove; any other event fails.
		if c, ok := e.(*follower.ConformanceEvent); ok && c.Check == follower.CheckUndefinedAnswer &&
			c.Topic == "t" && c.Partition == 0 && c.LeaderEpoch == 1 {
			t.Logf("kfake's known answer after the move: %v", e)
			continue
		}
		t.Errorf("kfake cannot diverge, delete or break the protocol's rules, yet: %v", e)
	}
	seen := rec.Results()
	for _, f := range faults {
		name := f.key.Name() + " " + f.err.Message
		if hits := f.h.Hits(); hits != f.count {
			t.Errorf("%s: installed for %d requests, fired on %d", name, f.count, hits)
		}
		// A faulted request answers every partition it carries so.
		if seen[name] < f.count {
			t.Errorf("%s fired %d times, yet the driver counted %d partitions so answered (all: %v)", name, f.count, seen[name], seen)
		}
	}
	t.Logf("answers by error: %v", seen)
	checkRecords(t, dir, "t", map[int32]int64{0: 600, 1: 600, 2: 600, 3: 600})
}

// recorder is an Observer for a Manager that runs its own goroutines: it
// keeps the events, and counts the partitions answered with each result by
// API and result name ("Fetch NOT_LEADER_OR_FOLLOWER").
type recorder struct {
	NopObserver
	mu      sync.Mutex
	events  []follower.Event
	results map[string]int
}

func (r *recorder) Event(e follower.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) RequestDone(s RequestStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.results == nil {
		r.results = map[string]int{}
	}
	for name, n := range s.Results {
		r.results[s.Key.Name()+" "+name] += n
	}
}

func (r *recorder) Events() []follower.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) Results() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.results)
}

// status is the status of topic-p, or a zero Status if there is none.
func status(m *Manager, topic string, p int32) Status {
	for _, s := range m.Statuses() {
		if s.Topic == topic && s.Partition == p {
			return s
		}
	}
	return Status{}
}
