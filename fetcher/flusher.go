package fetcher

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
)

// The flusher: under storage.FlushInterval one goroutine per Manager
// fsyncs, every Storage.FlushInterval, each open log with unsynced
// appends, so the fetch path never waits on an fsync (issue 14: under the
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
	Flush() error
	Failed() error
}

// flushAll fsyncs every open log with unsynced appends, in partition
// order, until ctx ends (shutdown waits for it, and Close fsyncs the rest).
// A log its owner closes meanwhile answers ErrClosed, which is nobody's
// concern: Close fsyncs.
func (m *Manager) flushAll(ctx context.Context) {
	m.catalog.mu.Lock()
	logs := make(map[wire.TopicPartition]flushable, len(m.catalog.logs))
	for tp, l := range m.catalog.logs {
		if f, ok := l.(flushable); ok {
			logs[tp] = f
		}
	}
	m.catalog.mu.Unlock()
	tps := make([]wire.TopicPartition, 0, len(logs))
	for tp := range logs {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		a, b := tps[i], tps[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	for _, tp := range tps {
		if ctx.Err() != nil {
			return
		}
		l := logs[tp]
		before := l.DurableEnd()
		// Nothing unsynced (or a failed log, whose owner acts on it):
		// skipping keeps the latencies reported those of real fsyncs.
		if before >= l.LogEndOffset() || l.Failed() != nil {
			continue
		}
		st := MaintenanceStats{TP: tp}
		t0 := m.cfg.Now()
		if err := l.Flush(); errors.Is(err, storage.ErrClosed) {
			continue
		} else if err != nil {
			m.cfg.Logger.Warn("flush failed", "partition", tp.String(), "err", err)
			st.Err = err
		} else {
			st.Flushed, st.FlushLatency = true, m.cfg.Now().Sub(t0)
		}
		m.cfg.observe().Maintained(st)
		if l.DurableEnd() != before && m.cfg.Changed != nil {
			m.cfg.Changed(tp)
		}
	}
}
