package follower

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// OFFSET_OUT_OF_RANGE: which side of the leader's log we are on
// (ListOffsets), what to do below its log start, and where the next Fetch
// starts.

var errBadOffsets = errors.New("ListOffsets answer without a usable log start and end")

func (p *Partition) onOffsetsReply(now time.Time, m OffsetsReply) error {
	if _, ok := p.takeInflight(m.ID, StateOutOfRange); !ok {
		return ErrStale
	}
	if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
		r := Classify(err)
		if r == OutOfRange {
			r = Retry
		}
		p.fail(now, r, err)
		return nil
	}
	if m.LogStartOffset < 0 || m.LogEndOffset < m.LogStartOffset {
		// Validate at the gateway: an answer we cannot place is retried
		// rather than acted on.
		p.fail(now, Retry, errBadOffsets)
		return nil
	}
	pos := p.oorPos
	p.leaderLogStart = m.LogStartOffset
	switch {
	case m.LogStartOffset > pos:
		// Low: the leader deleted [pos, start) before we copied it
		// (retention or DeleteRecords while we were away).
		p.attempts, p.lastErr = 0, nil
		p.onGap(pos, m.LogStartOffset)
		p.state = StateFetching
	case m.LogEndOffset < pos:
		// High: the leader's log ends below our fetch offset. Kafka truncates
		// straight to the leader's end, admitting this "can leave mismatched
		// logs" (fetchOffsetAndTruncate). We reconcile by epochs instead,
		// which finds the exact divergence, and fall back to the leader's end
		// only when the epochs give no information.
		p.attempts, p.lastErr = 0, nil
		p.gapPos = -1
		p.startReconcile(CauseEpochReply, m.LogEndOffset)
	default:
		// In range: the leader could not place our LastFetchedEpoch
		// (Partition.readRecords answers OFFSET_OUT_OF_RANGE when it
		// cannot find the end of that epoch; KAFKA-15608) or the log
		// moved meanwhile. Kafka refetches from max(start, LEO) at once;
		// we back off first so a leader that stays confused is not
		// hammered.
		p.fail(now, Retry, kerr.OffsetOutOfRange)
		p.resume = StateFetching
	}
	return nil
}

// onGap handles the leader's log start moving past our fetch position pos.
func (p *Partition) onGap(pos, start int64) {
	ev := &GapEvent{
		Topic:       p.cfg.Topic,
		Partition:   p.cfg.Partition,
		LeaderEpoch: p.epoch,
		From:        pos,
		To:          start,
	}
	leo, logStart := p.log.LogEndOffset(), p.log.LogStartOffset()
	switch {
	case p.cfg.DiscardOnGap:
		// Kafka's truncateFullyAndStartAt(leaderStartOffset). What we drop
		// was committed, so it still goes to lost+found first.
		if leo > logStart {
			p.out.Actions = append(p.out.Actions, &MoveToLostFound{From: logStart, To: leo})
			ev.Discarded, ev.DiscardedFrom, ev.DiscardedTo = true, logStart, leo
		}
		p.out.Actions = append(p.out.Actions, &TruncateFullyAndStartAt{Offset: start})
		p.gapPos = -1
	case leo == logStart:
		// Nothing held: simply start the empty log where the leader's
		// starts.
		p.out.Actions = append(p.out.Actions, &TruncateFullyAndStartAt{Offset: start})
		p.gapPos = -1
	default:
		// Keep our history; the next batches land after a hole, as they do
		// after compaction.
		p.gapPos = start
	}
	if p.lastGap != [2]int64{pos, start} || ev.Discarded {
		p.out.Events = append(p.out.Events, ev)
		p.lastGap = [2]int64{pos, start}
	}
}

// fetchPosition is where the next Fetch starts and the epoch of the batch
// before it: our log end and latest epoch (as AbstractFetcherThread sets
// lastFetchedEpoch after truncation and append), or after a kept gap the
// leader's log start and -1, since no batch of ours precedes it.
func (p *Partition) fetchPosition() (int64, int32) {
	leo := p.log.LogEndOffset()
	if p.gapPos > leo {
		return p.gapPos, UndefinedEpoch
	}
	e, ok := p.log.LatestEpoch()
	if !ok {
		e = UndefinedEpoch
	}
	return leo, e
}
