package fetcher

import (
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
)

// MaintenanceStats is one partition's periodic maintenance.
type MaintenanceStats struct {
	TP wire.TopicPartition
	// RetentionSegments and RetentionBytes: what local retention deleted.
	RetentionSegments int
	RetentionBytes    int64
	// Flushed is set when the log was flushed, taking FlushLatency.
	Flushed      bool
	FlushLatency time.Duration
	Err          error
}

// maintain enforces local retention and flushes every owned log; it runs on
// the worker goroutine, the logs' one writer.
func (w *worker) maintain() {
	cfg := &w.m.cfg
	flush := cfg.Storage.Flush == storage.FlushInterval
	retain := cfg.Storage.RetentionBytes > 0 || cfg.Storage.RetentionAge > 0
	for _, p := range w.parts {
		if p.sm.State() == follower.StateStorageBackoff {
			continue // its log is reopened when the backoff ends
		}
		st := MaintenanceStats{TP: p.tp}
		if retain {
			before := p.log.Size()
			n, err := p.log.EnforceRetention()
			if err != nil {
				cfg.Logger.Warn("local retention failed", "partition", p.tp.String(), "err", err)
				st.Err = err
			}
			if n > 0 {
				st.RetentionSegments, st.RetentionBytes = n, before-p.log.Size()
				cfg.Logger.Info("local retention deleted segments", "partition", p.tp.String(),
					"segments", n, "bytes", st.RetentionBytes, "log_start", p.log.LogStartOffset())
			}
		}
		// A flush of a log with nothing unsynced is a no-op; skipping it
		// keeps the latencies reported those of real fsyncs.
		if flush && p.log.DurableEnd() < p.log.LogEndOffset() {
			t0 := cfg.Now()
			if err := p.log.Flush(); err != nil {
				cfg.Logger.Warn("flush failed", "partition", p.tp.String(), "err", err)
				st.Err = err
			} else {
				st.Flushed, st.FlushLatency = true, cfg.Now().Sub(t0)
			}
		}
		cfg.observe().Maintained(st)
		if st.Err != nil && transientStorageError(st.Err) {
			// The log now refuses every call until it is reopened: wait
			// for that in storage-backoff rather than fail the next
			// append, which may be long in coming on an idle partition.
			p.actionFailed(cfg, cfg.Now(), st.Err)
		}
		w.m.publish(p)
	}
}
