package fetcher

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
)

// The flusher: under storage.FlushInterval one goroutine per Manager
// fsyncs, every Storage.FlushInterval, each open log with unsynced
// appends (up to flushParallel of them at once), so the fetch path never waits on an fsync (issue 14: under the
// old scheme the worker fsynced between two Fetches and copied 1.5×
// slower than under FlushOS). storage.Log.Flush holds the log's lock only
// around its fsync, so it runs beside the log's writer, the worker, and
// records nothing if a roll or truncation came meanwhile (storage's
// flush.go). When a log's DurableEnd moves the flusher tells
// Config.Changed, which wakes the served Fetches waiting on it (a served
// high watermark is the durable end).
//
// A failed fsync fails the log (storage refuses every call after it); the
// worker finds that at its next append, or at its next maintenance pass
// (maintain), and waits in storage-backoff for the log's reopening, as
// after any failed write.

// flushTicker makes the flusher's clock: its ticks, and how to stop them.
// time.NewTicker outside tests.
type flushTicker func(d time.Duration) (ticks <-chan time.Time, stop func())

func newFlushTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// startFlusher starts the flusher when the flush policy wants one; it
// ends with ctx, and shutdown waits for it before closing the logs.
func (m *Manager) startFlusher(ctx context.Context) {
	st := m.cfg.Storage
	if st.Flush != storage.FlushInterval || st.FlushInterval <= 0 {
		return
	}
	ticker := m.flushTicker
	if ticker == nil {
		ticker = newFlushTicker
	}
	ticks, stop := ticker(st.FlushInterval)
	m.flusherDone = make(chan struct{})
	go func() {
		defer close(m.flusherDone)
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				m.flushAll(ctx)
			}
		}
	}()
}

// waitFlusher waits for the flusher to end, after its ctx ended.
func (m *Manager) waitFlusher() {
	if m.flusherDone != nil {
		<-m.flusherDone
	}
}

// flushable is what the flusher needs of a served log (every partLog).
type flushable interface {
	storage.Reader
	PrepareFlush() error
	Flush() error
	FlushDue() bool
	AtRest() bool
}

// flushParallel bounds the logs one flusher pass fsyncs at once. A disk
// completes concurrent fsyncs together (one journal commit on ext4 and XFS
// covers them), so 16 in flight take about a third of the time of 16 in a
// row (the measurement behind applyAhead's parallelApplies), and a new
// log's first flush is several of them (storage settles it). At 10,000
// new partitions a serial pass made every record durable only about 19 s
// after the last was appended (BenchmarkScale's start-up trace).
const flushParallel = 16

// flushAll fsyncs every open log with unsynced appends, flushParallel at a
// time, taken in partition order, until ctx ends (shutdown waits for it,
// and Close fsyncs the rest). It returns once each fsync it began is done:
// its goroutines are its own. storage.Log.Flush is safe beside the log's
// writer and beside other logs' Flush. A log its owner closes meanwhile
// answers ErrClosed, which is nobody's concern: Close fsyncs.
func (m *Manager) flushAll(ctx context.Context) {
	// A slice, not a map: at 10,000 logs at rest, building a map of them
	// every second and looking each up again was most of the flusher's
	// share of an idle kfollower's CPU (BenchmarkScale's idle profile).
	m.catalog.mu.Lock()
	logs := make([]flushEntry, 0, len(m.catalog.logs))
	for tp, l := range m.catalog.logs {
		if f, ok := l.(flushable); ok {
			logs = append(logs, flushEntry{tp, f})
		}
	}
	m.catalog.mu.Unlock()
	dirty := logs[:0]
	for _, e := range logs {
		// Unsynced appends, or a quiet log's recovery point behind its
		// durable end (storage.Log.FlushDue): a log that went quiet
		// after its first flush would otherwise keep the point at its
		// segment's start until Close, and Open after a crash re-read
		// (and, on a bad batch, cut) what was long durable. Nothing due,
		// or a failed log, whose owner acts on it: skipped, so the
		// latencies reported are those of real fsyncs.
		if e.l.FlushDue() {
			dirty = append(dirty, e)
		}
	}
	slices.SortFunc(dirty, func(a, b flushEntry) int {
		return cmp.Or(cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition))
	})
	// The small files first, every log's, then the data: behind the data
	// fsyncs each small one waited for them, its log's writer stalled
	// (storage.Log.PrepareFlush). A failure fails the log, and its Flush
	// reports it.
	eachParallel(ctx, dirty, func(e flushEntry) { _ = e.l.PrepareFlush() })
	eachParallel(ctx, dirty, func(e flushEntry) { m.flushLog(e.tp, e.l) })
}

// flushEntry is one log of flushAll's pass.
type flushEntry struct {
	tp wire.TopicPartition
	l  flushable
}

// eachParallel runs fn for each of items, flushParallel at a time, in
// order, until ctx ends, and returns once every call it began is done.
func eachParallel[T any](ctx context.Context, items []T, fn func(T)) {
	next := make(chan T)
	var wg sync.WaitGroup
	for range min(flushParallel, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				fn(it)
			}
		}()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		next <- it
	}
	close(next)
	wg.Wait()
}

// flushLog fsyncs one log for flushAll, reports it and tells
// Config.Changed when its durable end moved.
func (m *Manager) flushLog(tp wire.TopicPartition, l flushable) {
	before := l.DurableEnd()
	st := MaintenanceStats{TP: tp}
	t0 := m.cfg.Now()
	if err := l.Flush(); errors.Is(err, storage.ErrClosed) {
		return
	} else if err != nil {
		m.cfg.Logger.Warn("flush failed", "partition", tp.String(), "err", err)
		st.Err = err
	} else {
		st.Flushed, st.FlushLatency = true, m.cfg.Now().Sub(t0)
		st.AtRest = l.AtRest()
	}
	m.cfg.observe().Maintained(st)
	if l.DurableEnd() != before && m.cfg.Changed != nil {
		m.cfg.Changed(tp)
	}
}
