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
	// Flushed is set when the log was flushed, taking FlushLatency (the
	// flusher's reports: flusher.go).
	Flushed      bool
	FlushLatency time.Duration
	// AtRest says the flusher has nothing more for the log until its
	// next append (storage.Log.AtRest): every append durable and its
	// recovery point caught up with its durable end.
	AtRest bool
	Err    error
}

// maintain enforces local retention on every owned log and, under
// storage.FlushInterval, acts on a failed fsync of the flusher's (which
// flushes beside the worker: flusher.go); it runs on the worker
// goroutine, the logs' one writer.
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
		cfg.observe().Maintained(st)
		failed := st.Err
		if flush && failed == nil {
			// The flusher's fsync failed (flusher.go; it reported the
			// error): the log refuses every call after it.
			failed = p.log.Failed()
		}
		if failed != nil && transientStorageError(failed) {
			// The log now refuses every call until it is reopened: wait
			// for that in storage-backoff rather than fail the next
			// append, which may be long in coming on an idle partition.
			p.actionFailed(cfg, cfg.Now(), failed)
		}
		w.m.publish(p)
	}
}
