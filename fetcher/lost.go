package fetcher

import (
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
)

// Reporting a loss exactly once. storage.Log.TruncateWithLost saves the
// batches, makes the truncation durable and lists the loss as unreported,
// as one crash-atomic unit; the driver reports it (log line, Observer.Event
// for the metrics, /status) and then confirms with MarkReported. After every
// Open the log may list losses a crash left unreported: the previous
// process died after the truncation was durable and before MarkReported, or
// Open itself completed a truncation from its intent. Those are reported
// from lost.json before anything else happens to the log. A crash between a
// report and its MarkReported repeats that one report after the restart,
// with the same id (Lost.ID): at least once, never lost, and a repeat is
// recognisable (docs/storage-format.md §9).

// LostReport is the latest loss a partition reported, for /status.
type LostReport struct {
	// ID is the lost+found event's name (storage.Lost.ID): unique within
	// the partition and the same across restarts, so a report repeated
	// after a crash carries the same one.
	ID string `json:"id"`
	// Dir holds the saved batches and lost.json.
	Dir   string `json:"dir"`
	Cause string `json:"cause"`
	// From, To: the offsets lost, [From, To).
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Recovered is set for a loss reported after a restart from the log's
	// list of unreported losses, rather than as it happened.
	Recovered bool `json:"recovered"`
}

// settleLosses reports every loss the log lists as unreported that this
// process has not reported yet, then marks each one reported. It runs
// after Open, before the partition does anything else, and again whenever
// the log still lists a loss (a MarkReported that failed, or a log that
// was reopened).
func (p *part) settleLosses(cfg *Config) {
	if p.log.Failed() != nil {
		return // refuses everything until reopened
	}
	for _, l := range p.log.UnreportedLosses() {
		if !p.reported[l.ID] {
			switch e := recoveredEvent(l).(type) {
			case *follower.TruncationEvent:
				p.reportTruncation(cfg, e, l, true)
			case *follower.GapEvent:
				p.reportGap(cfg, e, &l, true)
			}
		}
		p.markReported(cfg, l.ID)
	}
}

// markReported confirms a reported loss to the log. If that fails the loss
// stays listed: settleLosses tries again without reporting it twice, and a
// restart before it succeeds reports it once more with the same id.
func (p *part) markReported(cfg *Config, id string) {
	err := p.log.MarkReported(id)
	if err == nil {
		delete(p.reported, id)
		return
	}
	if !p.markFailed[id] {
		cfg.Logger.Warn("recording that a loss was reported failed; retrying (a restart before then reports it again, same id)",
			"partition", p.tp.String(), "lost_id", id, "err", err)
		if p.markFailed == nil {
			p.markFailed = map[string]bool{}
		}
		p.markFailed[id] = true
	}
}

// reportTruncation reports committed data the cluster lost: e filled in
// from lost, logged, counted and kept for status.
func (p *part) reportTruncation(cfg *Config, e *follower.TruncationEvent, lost storage.Lost, recovered bool) {
	e.From, e.To, e.Records, e.Bytes = lost.From, lost.EndOffset, lost.Records, lost.Bytes
	p.lastTruncation = e
	p.noteReported(lost, recovered)
	cfg.Logger.Error("truncated: committed data lost by the cluster",
		"partition", p.tp.String(), "from", e.From, "to", e.To, "records", e.Records, "bytes", e.Bytes,
		"old_leader_epoch", e.OldLeaderEpoch, "new_leader_epoch", e.NewLeaderEpoch,
		"roundtrips", e.Roundtrips, "cause", e.Cause.String(), "highest_high_watermark", e.HighestHighWatermark,
		"lost_id", lost.ID, "lost_found", lost.Dir, "recovered", recovered)
	cfg.observe().Event(e)
}

// reportGap reports offsets the leader deleted before we copied them, and
// with lost the history --discard-on-gap dropped to lost+found.
func (p *part) reportGap(cfg *Config, e *follower.GapEvent, lost *storage.Lost, recovered bool) {
	args := []any{"partition", p.tp.String(), "from", e.From, "to", e.To, "discarded", e.Discarded}
	if lost != nil {
		p.noteReported(*lost, recovered)
		args = append(args, "discarded_from", e.DiscardedFrom, "discarded_to", e.DiscardedTo, "records", lost.Records,
			"bytes", lost.Bytes, "cause", lost.Cause, "lost_id", lost.ID, "lost_found", lost.Dir, "recovered", recovered)
	}
	cfg.Logger.Warn("retention gap: the leader deleted offsets before we copied them", args...)
	cfg.observe().Event(e)
}

func (p *part) noteReported(lost storage.Lost, recovered bool) {
	if p.reported == nil {
		p.reported = map[string]bool{}
	}
	p.reported[lost.ID] = true
	p.lastLost = &LostReport{ID: lost.ID, Dir: lost.Dir, Cause: lost.Cause, From: lost.From, To: lost.EndOffset,
		Records: lost.Records, Bytes: lost.Bytes, Recovered: recovered}
}

// recoveredEvent rebuilds the event of a loss from its lost.json: what the
// state machine said of it is gone with the process that truncated. The
// round trips and the high watermark are not recorded (0 and -1).
func recoveredEvent(l storage.Lost) follower.Event {
	oldEpoch, newEpoch, offset := int32(-1), int32(-1), l.EndOffset
	if t := l.Truncation; t != nil {
		oldEpoch, newEpoch, offset = t.OldLeaderEpoch, t.NewLeaderEpoch, t.Offset
	}
	if l.Cause == storage.CauseDiscardedOnGap {
		// The log restarted at the leader's log start, the truncation's
		// offset; we were fetching at our log end.
		return &follower.GapEvent{Topic: l.Topic, Partition: l.Partition, LeaderEpoch: newEpoch,
			From: l.EndOffset, To: offset, Discarded: true, DiscardedFrom: l.From, DiscardedTo: l.EndOffset}
	}
	local := follower.UndefinedEpoch
	if n := len(l.Epochs); n > 0 {
		local = l.Epochs[n-1].Epoch
	}
	return &follower.TruncationEvent{Topic: l.Topic, Partition: l.Partition, OldLeaderEpoch: oldEpoch, NewLeaderEpoch: newEpoch,
		From: l.From, To: l.EndOffset, LocalEpoch: local, AgreedEpoch: follower.UndefinedEpoch,
		HighestHighWatermark: -1, Cause: causeNamed(l.Cause)}
}

// causeNamed is the follower.Cause whose name lost.json holds, 0 for none.
func causeNamed(name string) follower.Cause {
	for _, c := range []follower.Cause{follower.CauseEpochReply, follower.CauseDivergingEpoch, follower.CauseOutOfRangeHigh} {
		if c.String() == name {
			return c
		}
	}
	return 0
}
