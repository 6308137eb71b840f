package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// syncCounter counts the fsyncs storage reports (Options.OnSync) by the
// goroutine they ran on: under an Append (the worker's fetch path) or
// under the flusher's pass.
type syncCounter struct{ append, flusher atomic.Int64 }

func (c *syncCounter) onSync(time.Duration) {
	buf := make([]byte, 64<<10)
	st := string(buf[:runtime.Stack(buf, false)])
	switch {
	case strings.Contains(st, "storage.(*Log).Append("):
		c.append.Add(1)
	case strings.Contains(st, "fetcher.(*Manager).flushLog("):
		c.flusher.Add(1)
	}
}

// ticks is a flushTicker the test drives: a send is a tick, and a second
// send returns only once the pass of the first is over (the channel is
// unbuffered and the flusher receives only between passes).
func ticks() (chan time.Time, flushTicker) {
	c := make(chan time.Time)
	return c, func(time.Duration) (<-chan time.Time, func()) { return c, func() {} }
}

// Under FlushInterval the workers never fsync: records keep arriving while
// the flusher's clock stands still, and DurableEnd stays put; one tick of
// it then makes every log durable to its end, fsyncing on the flusher.
//
// Checked that it can fail: with Append fsyncing under FlushInterval once
// the interval (1 ns here) has passed, as before the flusher, the appends
// fsync.
func TestFlusherOffTheFetchPath(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "t"))
	ctx := context.Background()
	produce := func(n int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(20)
	var syncs syncCounter
	m := kfakeManager(t, c, Config{
		DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: 200 * time.Millisecond,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Logger:           slog.New(slog.DiscardHandler),
		Storage:          storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Nanosecond, OnSync: syncs.onSync},
	})
	tick, ticker := ticks()
	m.flushTicker = ticker
	stop := startManager(t, m)

	logs := func() []storage.Reader {
		var out []storage.Reader
		for p := range int32(2) {
			if l, _, ok := m.CatalogPartition("t", p); ok {
				out = append(out, l)
			}
		}
		return out
	}
	waitEnds := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var sum int64
			ls := logs()
			for _, l := range ls {
				sum += l.LogEndOffset()
			}
			if len(ls) == 2 && sum == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %d records copied: %d", want, sum)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// From the first appends on: they write each log's
	// leader-epoch-checkpoint too, which the log's next fsync, the
	// flusher's, makes durable (storage/doc.go).
	waitEnds(20)
	produce(100)
	waitEnds(120)
	if n := syncs.append.Load(); n != 0 {
		t.Errorf("%d fsyncs under Append while 120 records were copied: the fetch path waits on them", n)
	}
	for _, l := range logs() {
		if d := l.DurableEnd(); d != 0 {
			t.Errorf("durable end %d before the flusher ticked: something else fsyncs", d)
		}
	}
	tick <- time.Now()
	tick <- time.Now() // the first pass is over
	for p, l := range logs() {
		if d, e := l.DurableEnd(), l.LogEndOffset(); d != e {
			t.Errorf("t-%d: one flusher tick left the durable end at %d, the log end at %d", p, d, e)
		}
	}
	if syncs.flusher.Load() == 0 {
		t.Errorf("the flusher made no fsync")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// changedRecorder records Config.Changed and the maintenance reports.
type changedRecorder struct {
	NopObserver
	mu      sync.Mutex
	changed []wire.TopicPartition
	stats   []MaintenanceStats
}

func (r *changedRecorder) tell(tp wire.TopicPartition) {
	r.mu.Lock()
	r.changed = append(r.changed, tp)
	r.mu.Unlock()
}

func (r *changedRecorder) Maintained(s MaintenanceStats) {
	r.mu.Lock()
	r.stats = append(r.stats, s)
	r.mu.Unlock()
}

func (r *changedRecorder) take() ([]wire.TopicPartition, []MaintenanceStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, s := r.changed, r.stats
	r.changed, r.stats = nil, nil
	return c, s
}

// The flusher flushes only the served logs with unsynced appends, tells
// Config.Changed of each whose DurableEnd moved (a served long poll waits
// on it) and reports the flush; a log closed by its owner is passed over;
// it ends with its context.
func TestFlusherChanged(t *testing.T) {
	rec := &changedRecorder{}
	m := newManager(Config{
		DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Observers: []Observer{rec}, Changed: rec.tell,
		Storage: storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Hour},
	}, nil, nil)
	tick, ticker := ticks()
	m.flushTicker = ticker
	tps := []wire.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 2}}
	var logs []*storage.Log
	for _, tp := range tps {
		l, err := storage.Open(m.cfg.DataDir, tp.Topic, tp.Partition, m.cfg.Storage)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs = append(logs, l)
		m.catalog.add(tp, l)
	}
	for _, i := range []int{0, 2} {
		if err := logs[i].Append(batch.BuildRun(0, 0, 2, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := logs[2].Close(); err != nil { // its owner closed it: Close fsyncs
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.startFlusher(ctx)
	tick <- time.Now()
	tick <- time.Now()
	changed, stats := rec.take()
	if !slices.Equal(changed, tps[:1]) {
		t.Errorf("Config.Changed told of %v, want %v", changed, tps[:1])
	}
	if len(stats) != 1 || stats[0].TP != tps[0] || !stats[0].Flushed || stats[0].Err != nil {
		t.Errorf("maintenance reports %+v, want one flush of %v", stats, tps[0])
	}
	if d, e := logs[0].DurableEnd(), logs[0].LogEndOffset(); d != e || e != 6 {
		t.Errorf("t-0: durable end %d, log end %d; want both 6", d, e)
	}
	// Nothing new: the next pass flushes nothing and tells nobody.
	tick <- time.Now()
	tick <- time.Now()
	if changed, stats := rec.take(); len(changed) != 0 || len(stats) != 0 {
		t.Errorf("a pass with nothing unsynced told %v and reported %+v", changed, stats)
	}
	cancel()
	m.waitFlusher()
}

// A flusher pass fsyncs up to flushParallel logs at once: with more dirty
// logs than that, flushParallel fsyncs are in flight together (each
// waits, in storage's OnSync, until they all are). A serial pass never
// gets a second one in flight and fails at the deadline.
func TestFlusherInParallel(t *testing.T) {
	var (
		armed    atomic.Bool
		mu       sync.Mutex
		inFlight int
		opened   = make(chan struct{})
		openOnce sync.Once
	)
	onSync := func(time.Duration) {
		if !armed.Load() {
			return
		}
		mu.Lock()
		inFlight++
		if inFlight >= flushParallel {
			openOnce.Do(func() { close(opened) })
		}
		mu.Unlock()
		select {
		case <-opened:
		case <-time.After(time.Minute):
			mu.Lock()
			t.Errorf("waited a minute for %d fsyncs in flight at once: %d were", flushParallel, inFlight)
			mu.Unlock()
			openOnce.Do(func() { close(opened) })
		}
	}
	rec := &changedRecorder{}
	m := newManager(Config{
		DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Observers: []Observer{rec}, Changed: rec.tell,
		Storage: storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Hour, OnSync: onSync},
	}, nil, nil)
	tick, ticker := ticks()
	m.flushTicker = ticker
	const n = flushParallel + 4
	logs := dirtyLogs(t, m, n, func(l *storage.Log, _ int32) storage.Reader { return l })
	armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	m.startFlusher(ctx)
	tick <- time.Now()
	tick <- time.Now() // the first pass is over
	cancel()
	m.waitFlusher()
	armed.Store(false)
	for p, l := range logs {
		if d, e := l.DurableEnd(), l.LogEndOffset(); d != e {
			t.Errorf("t-%d: durable end %d after the pass, log end %d", p, d, e)
		}
	}
	changed, stats := rec.take()
	if len(changed) != n || len(stats) != n {
		t.Errorf("the pass told Config.Changed of %d logs and reported %d flushes, want %d of each", len(changed), len(stats), n)
	}
}

// A log that went quiet after its first flush has its recovery point
// caught up with its durable end by a later pass of the flusher
// (storage.Log.FlushDue), once the point is a second old: before, a pass
// flushed only logs with unsynced appends, and the point stayed at the
// segment's start until Close.
func TestFlusherCatchesUpQuietPoint(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	rec := &changedRecorder{}
	m := newManager(Config{
		DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Observers: []Observer{rec},
		Storage: storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Hour, Now: clock},
	}, nil, nil)
	tick, ticker := ticks()
	m.flushTicker = ticker
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	l, err := storage.Open(m.cfg.DataDir, tp.Topic, tp.Partition, m.cfg.Storage)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m.catalog.add(tp, l)
	if err := l.Append(batch.BuildRun(0, 0, 2, 3)); err != nil {
		t.Fatal(err)
	}
	point := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(m.cfg.DataDir, "t-0", "kfollower-recovery-point"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.startFlusher(ctx)
	pass := func() []MaintenanceStats {
		tick <- time.Now()
		tick <- time.Now() // that pass is over
		_, stats := rec.take()
		return stats
	}
	if stats := pass(); len(stats) != 1 || !stats[0].Flushed || stats[0].AtRest {
		t.Fatalf("the first pass reported %+v, want one flush, the point's catch-up still to come", stats)
	}
	first := point()
	if stats := pass(); len(stats) != 0 {
		t.Errorf("a pass within the second reported %+v, want none", stats)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if stats := pass(); len(stats) != 1 || !stats[0].Flushed || !stats[0].AtRest {
		t.Errorf("a pass after the second reported %+v, want the quiet log flushed and at rest", stats)
	}
	if p := point(); p == first {
		t.Errorf("the recovery point is still %q after the quiet log's pass", p)
	}
	if stats := pass(); len(stats) != 0 {
		t.Errorf("a pass after the point caught up reported %+v, want none", stats)
	}
	cancel()
	m.waitFlusher()
}

// orderLog records, in one list for every log, when each was prepared
// (PrepareFlush) and when its data was flushed.
type orderLog struct {
	*storage.Log
	name  string
	mu    *sync.Mutex
	calls *[]string
}

func (l orderLog) record(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.calls = append(*l.calls, what+" "+l.name)
}

func (l orderLog) PrepareFlush() error { l.record("prepare"); return l.Log.PrepareFlush() }
func (l orderLog) Flush() error        { l.record("flush"); return l.Log.Flush() }

// A pass prepares every log it flushes (a new log's settling, the epoch
// checkpoint: small fsyncs under the log's lock) before it fsyncs any
// log's data, so that none of them waits behind the data fsyncs in the
// disk's queue with its writer stalled. More logs than flushParallel, so
// that a pass that prepared each log just before its own flush would
// interleave them.
func TestFlusherPreparesBeforeData(t *testing.T) {
	still := time.UnixMilli(1_700_000_000_000) // no recovery point falls due in the second pass
	m := newManager(Config{
		DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Storage: storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Hour, Now: func() time.Time { return still }},
	}, nil, nil)
	tick, ticker := ticks()
	m.flushTicker = ticker
	var mu sync.Mutex
	var calls []string
	const n = flushParallel + 4
	logs := dirtyLogs(t, m, n, func(l *storage.Log, p int32) storage.Reader {
		return orderLog{Log: l, name: fmt.Sprint(p), mu: &mu, calls: &calls}
	})
	ctx, cancel := context.WithCancel(context.Background())
	m.startFlusher(ctx)
	tick <- time.Now()
	tick <- time.Now() // the first pass is over
	cancel()
	m.waitFlusher()
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2*n {
		t.Fatalf("the pass made %d calls, want a prepare and a flush of each of %d logs: %v", len(calls), n, calls)
	}
	for i, c := range calls {
		if want := i < n; strings.HasPrefix(c, "prepare") != want {
			t.Fatalf("call %d is %q: every prepare must come before every flush: %v", i, c, calls)
		}
	}
	for p, l := range logs {
		if d, e := l.DurableEnd(), l.LogEndOffset(); d != e {
			t.Errorf("t-%d: durable end %d after the pass, log end %d", p, d, e)
		}
	}
}

// dirtyLogs opens n logs t-0 ... t-(n-1) under m's storage options, each
// with 3 unsynced records, and puts each into m's catalog as wrap makes it;
// they are closed when the test ends.
func dirtyLogs(t *testing.T, m *Manager, n int32, wrap func(l *storage.Log, p int32) storage.Reader) []*storage.Log {
	t.Helper()
	var logs []*storage.Log
	for p := range n {
		l, err := storage.Open(m.cfg.DataDir, "t", p, m.cfg.Storage)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if err := l.Append(batch.BuildRun(0, 0, 2, 3)); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
		m.catalog.add(wire.TopicPartition{Topic: "t", Partition: p}, wrap(l, p))
	}
	return logs
}
