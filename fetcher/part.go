package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
)

// part is one followed partition: its state machine and its log. It is
// owned by exactly one goroutine at a time (the Manager while it has no
// leader's worker, else that worker) and moves between them by hand-off.
type part struct {
	tp  wire.TopicPartition
	sm  *follower.Partition
	log *storage.Log
	// pending is the request the state machine handed out and the worker
	// has not sent yet.
	pending follower.Request
	// lastTruncation is the latest truncation event, for status.
	lastTruncation *follower.TruncationEvent
	reconciled     bool // reached StateFetching at least once
	// rounds counts OffsetsForLeaderEpoch answers since the partition last
	// fetched, for Config.OnReconciled.
	rounds int
	// staleReplies counts the replies the state machine discarded, for
	// Status.StaleReplies.
	staleReplies int64
}

// step feeds msg to the state machine and reports whether it was taken. A
// reply it discards (follower.ErrStale: no longer the request in flight;
// follower.ErrStopped: the partition has stopped) is counted. Step fails
// only with those two, and other inputs only with ErrStopped: a stopped
// partition takes no leader change or tick, and loses nothing by it.
func (p *part) step(now time.Time, msg follower.Msg) bool {
	err := p.sm.Step(now, msg)
	if err == nil {
		return true
	}
	switch msg.(type) {
	case follower.EpochReply, follower.FetchReply, follower.OffsetsReply, follower.RequestFailed:
		p.staleReplies++
	}
	return false
}

// process carries out every Ready the state machine has, in the order its
// contract demands: storage actions (each durable before the next), then
// events, then the request is queued; then Advance. It returns the
// appended bytes and records, and whether a metadata refresh was asked for.
func (p *part) process(cfg *Config, now time.Time) (appendedBytes, appendedRecords int64, refresh bool) {
	for p.sm.HasReady() {
		rd := p.sm.Ready()
		lost, b, r, err := p.apply(cfg, rd.Actions)
		appendedBytes += b
		appendedRecords += r
		if err != nil {
			var be *batch.Error
			corrupt := errors.As(err, &be)
			cfg.Logger.Warn("storage action failed", "partition", p.tp.String(), "corrupt", corrupt, "err", err)
			p.step(now, follower.ActionFailed{Corrupt: corrupt, Err: err})
			continue
		}
		for _, e := range rd.Events {
			p.report(cfg, e, lost)
		}
		if rd.Request != nil {
			p.pending = rd.Request
		}
		refresh = refresh || rd.RefreshMetadata
		p.sm.Advance(rd)
	}
	if p.sm.State() == follower.StateFetching {
		p.reconciled = true
		if p.rounds > 0 {
			cfg.OnReconciled(p.tp, p.rounds)
			p.rounds = 0
		}
	}
	return appendedBytes, appendedRecords, refresh
}

// apply carries out storage actions in order. A MoveToLostFound is always
// followed, in the same Ready, by the truncation that removes those batches
// (DESIGN.md: copy to lost+found, make the truncation durable, fetch again).
func (p *part) apply(cfg *Config, actions []follower.Action) (lost []storage.Lost, bytes, records int64, err error) {
	for _, a := range actions {
		switch a := a.(type) {
		case *follower.MoveToLostFound:
			l, err := p.log.SaveLost(a.From)
			if err != nil {
				return lost, bytes, records, fmt.Errorf("saving %s offsets %d..%d to lost+found: %w", p.tp, a.From, a.To, err)
			}
			if l.Batches > 0 {
				lost = append(lost, l)
			}
		case *follower.TruncateTo:
			if err := p.log.TruncateTo(a.Offset); err != nil {
				return lost, bytes, records, err
			}
		case *follower.TruncateFullyAndStartAt:
			if err := p.log.TruncateFullyAndStartAt(a.Offset); err != nil {
				return lost, bytes, records, err
			}
		case *follower.Append:
			// One pass over the headers: drop a partial last batch (a
			// fetch response may cut it; it is fetched again), count
			// records, check epochs. The CRCs are checked once, by
			// storage.Append, which writes nothing of a run with a bad one.
			s := batch.NewFrameScanner(a.Records)
			var n int64
			for s.Next() {
				h := s.Header()
				n += int64(h.RecordCount)
				p.checkBatchEpoch(cfg, h)
			}
			whole := a.Records[:s.Valid()]
			if len(whole) > 0 {
				if err := p.log.Append(whole); err != nil {
					return lost, bytes, records, err
				}
				bytes += int64(len(whole))
				records += n
			}
			if err := s.Err(); err != nil {
				return lost, bytes, records, fmt.Errorf("fetched batch for %s at offset %d: %w", p.tp, a.Offset, err)
			}
		default:
			return lost, bytes, records, fmt.Errorf("%s: unknown storage action %T", p.tp, a)
		}
	}
	return lost, bytes, records, nil
}

// checkBatchEpoch reports a batch stamped with a leader epoch above the one
// the fetch was fenced with (KIP-320): a leader stamps its own epoch, so
// none can be higher (follower.CheckBatchEpochAboveLeader). The current
// epoch can only have grown since the fetch left, so this never misfires.
func (p *part) checkBatchEpoch(cfg *Config, h batch.Header) {
	if epoch := p.sm.Status().LeaderEpoch; h.PartitionLeaderEpoch > epoch {
		p.report(cfg, &follower.ConformanceEvent{
			Topic: p.tp.Topic, Partition: p.tp.Partition, Check: follower.CheckBatchEpochAboveLeader, LeaderEpoch: epoch,
			Evidence: fmt.Sprintf("batch at offset %d carries leader epoch %d; the fetch was fenced at epoch %d", h.BaseOffset, h.PartitionLeaderEpoch, epoch),
		}, nil)
	}
}

// report fills in what storage knows of an event, logs it and hands it on.
func (p *part) report(cfg *Config, e follower.Event, lost []storage.Lost) {
	switch e := e.(type) {
	case *follower.TruncationEvent:
		for _, l := range lost {
			e.Records += l.Records
			e.Bytes += l.Bytes
		}
		p.lastTruncation = e
		lvl := slog.LevelInfo
		if e.From < e.To {
			lvl = slog.LevelError // committed data the cluster lost
		}
		cfg.Logger.Log(context.Background(), lvl, "truncated: committed data lost by the cluster",
			"partition", p.tp.String(), "from", e.From, "to", e.To, "records", e.Records, "bytes", e.Bytes,
			"old_leader_epoch", e.OldLeaderEpoch, "new_leader_epoch", e.NewLeaderEpoch,
			"roundtrips", e.Roundtrips, "cause", e.Cause.String(), "highest_high_watermark", e.HighestHighWatermark,
			"lost_found", lostDirs(lost))
	case *follower.GapEvent:
		cfg.Logger.Warn("retention gap: the leader deleted offsets before we copied them",
			"partition", p.tp.String(), "from", e.From, "to", e.To, "discarded", e.Discarded)
	case *follower.ConformanceEvent:
		logConformance(cfg, e)
	default:
		// A kind this driver does not consume yet (ReconciledEvent: rounds
		// are still counted in the worker). OnEvent's users expect only
		// the kinds above.
		return
	}
	cfg.OnEvent(e)
}

func lostDirs(ls []storage.Lost) []string {
	var ds []string
	for _, l := range ls {
		ds = append(ds, l.Dir)
	}
	return ds
}

func logConformance(cfg *Config, e *follower.ConformanceEvent) {
	cfg.Logger.Warn("conformance check failed: a broker answer the protocol rules out",
		"partition", fmt.Sprintf("%s-%d", e.Topic, e.Partition), "check", e.Check.String(),
		"leader_epoch", e.LeaderEpoch, "evidence", e.Evidence)
}
