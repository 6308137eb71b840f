package follower

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reconciliation (KIP-101, KIP-279): from a new leader epoch, a fence, a
// DivergingEpoch or OFFSET_OUT_OF_RANGE (high side), through
// OffsetsForLeaderEpoch rounds, to one cut and a ReconciledEvent.

// recon is the state of one reconciliation (KIP-101/KIP-279 loop).
type recon struct {
	cause  Cause
	rounds int
	// capEnd, capEpoch, capped: the virtual truncation so far, the log end
	// and latest epoch once it is carried out (see cappedLog).
	capEnd   int64
	capEpoch int32
	capped   bool
	// oorEnd is the leader's log end from ListOffsets when the
	// reconciliation was started by OFFSET_OUT_OF_RANGE (high side), else -1.
	oorEnd int64
}

// startReconcile enters the OffsetsForLeaderEpoch loop. With no local epochs
// there is nothing to ask about: Kafka then truncates to the high watermark
// (AbstractFetcherThread.truncateToHighWatermark), which for us would only
// drop committed data; we fetch from the log end with LastFetchedEpoch -1
// instead.
func (p *Partition) startReconcile(cause Cause, oorEnd int64) {
	p.rc = recon{cause: cause, capEnd: p.log.LogEndOffset(), oorEnd: oorEnd}
	if oorEnd >= 0 {
		p.rc.rounds = 1 // the ListOffsets answer
	}
	if _, ok := p.log.LatestEpoch(); !ok {
		if oorEnd >= 0 {
			// OFFSET_OUT_OF_RANGE high without epochs: Kafka's blind
			// truncation to the leader's end is all there is
			// (fetchOffsetAndTruncate).
			p.finishReconcile(min(oorEnd, p.log.LogEndOffset()), CauseOutOfRangeHigh, UndefinedEpoch)
			return
		}
		// Nothing to ask about: reconciled as it is.
		p.finishReconcile(p.log.LogEndOffset(), cause, UndefinedEpoch)
		return
	}
	p.state = StateReconciling
}

// view is the local log as the reconciliation in progress sees it.
func (p *Partition) view() LocalLog {
	if p.state == StateReconciling && p.rc.capped {
		return capLog(p.log, p.rc.capEnd, p.rc.capEpoch, true)
	}
	return p.log
}

func (p *Partition) onEpochReply(now time.Time, m EpochReply) error {
	req, ok := p.takeInflight(m.ID, StateReconciling)
	if !ok {
		return ErrStale
	}
	if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
		r := Classify(err)
		if r == OutOfRange {
			r = Retry // not an answer OffsetsForLeaderEpoch gives
		}
		p.fail(now, r, err)
		return nil
	}
	p.attempts, p.lastErr = 0, nil
	p.checkEpochAnswer(req.(*OffsetsForLeaderEpoch), m.Leader)
	p.rc.rounds++
	p.decide(m.Leader)
	return nil
}

// decide applies one leader answer to the reconciliation in progress.
func (p *Partition) decide(leader EpochEndOffset) {
	t := Decide(p.view(), leader)
	if !t.Complete {
		// KIP-279 step 3: truncate to the end of our largest epoch below
		// the one named (virtually: storage is touched once, at the end)
		// and ask about that epoch next.
		p.rc.capEnd, p.rc.capEpoch, p.rc.capped = t.Offset, t.NextEpoch, true
		p.state = StateReconciling
		return
	}
	cause, agreed := p.rc.cause, UndefinedEpoch
	switch t.Rule {
	case RuleEpochAgreed:
		agreed = leader.Epoch
	case RuleNoInformation:
		if p.rc.oorEnd >= 0 {
			// We were here because the leader's log ends below our fetch
			// offset and the leader cannot say where our epochs end:
			// Kafka's truncation to the leader's end
			// (fetchOffsetAndTruncate) is the best there is.
			t.Offset = min(t.Offset, p.rc.oorEnd)
			cause = CauseOutOfRangeHigh
		}
	}
	p.finishReconcile(t.Offset, cause, agreed)
}

// finishReconcile truncates to target if that removes anything, reports it
// as loss, reports the reconciliation done, and goes on fetching.
func (p *Partition) finishReconcile(target int64, cause Cause, agreed int32) {
	leo, start := p.log.LogEndOffset(), p.log.LogStartOffset()
	done := &ReconciledEvent{
		Topic:        p.cfg.Topic,
		Partition:    p.cfg.Partition,
		LeaderEpoch:  p.epoch,
		Roundtrips:   p.rc.rounds,
		Cause:        cause,
		LogEndOffset: min(target, leo),
	}
	if target < leo {
		// Everything we hold was at or below a leader's high watermark, so
		// [target, leo) is committed data the current leader does not
		// have: keep it in lost+found, then cut, so that nothing is
		// silently lost (docs/design.md promise 2).
		from := max(target, start)
		local, ok := p.log.LatestEpoch()
		if !ok {
			local = UndefinedEpoch
		}
		if from < leo {
			p.out.Actions = append(p.out.Actions, &MoveToLostFound{From: from, To: leo})
		}
		if target < start {
			// UnifiedLog.truncateTo: below the first segment it becomes
			// truncateFullyAndStartAt(target).
			p.out.Actions = append(p.out.Actions, &TruncateFullyAndStartAt{Offset: target})
		} else {
			p.out.Actions = append(p.out.Actions, &TruncateTo{Offset: target})
		}
		if from < leo {
			p.out.Events = append(p.out.Events, &TruncationEvent{
				Topic:                p.cfg.Topic,
				Partition:            p.cfg.Partition,
				OldLeaderEpoch:       p.fetchedEpoch,
				NewLeaderEpoch:       p.epoch,
				From:                 from,
				To:                   leo,
				LocalEpoch:           local,
				AgreedEpoch:          agreed,
				Roundtrips:           p.rc.rounds,
				HighestHighWatermark: p.highestHW,
				Cause:                cause,
			})
		}
	}
	p.out.Events = append(p.out.Events, done)
	p.rc = recon{}
	p.state = StateFetching
}
