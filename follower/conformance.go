package follower

import "fmt"

// Conformance checks on the leader's OffsetsForLeaderEpoch answers: they
// report what the protocol rules out and never change a decision.

// checkEpochAnswer runs the conformance checks on an OffsetsForLeaderEpoch
// answer. They only report; the decision is the same either way.
func (p *Partition) checkEpochAnswer(q *OffsetsForLeaderEpoch, a EpochEndOffset) {
	asked := fmt.Sprintf("asked epoch %d with current leader epoch %d, leader %d answered (%d, %d)",
		q.LeaderEpoch, q.CurrentLeaderEpoch, q.Leader, a.Epoch, a.EndOffset)
	if a.Epoch == UndefinedEpoch && a.EndOffset == UndefinedOffset {
		if q.LeaderEpoch >= 0 && q.LeaderEpoch <= q.CurrentLeaderEpoch {
			p.conform(CheckUndefinedAnswer, asked)
		}
		return
	}
	if a.Epoch > q.LeaderEpoch {
		p.conform(CheckEpochAnswer, asked+": an epoch above the one asked")
		return
	}
	// An answer (R, first start) for R below the leader's first epoch names an
	// epoch the leader does not hold (LeaderEpochFileCache.endOffsetFor), so
	// only a floor entry (below R) or the leader's current epoch, answered
	// with its log end, is evidence about that epoch.
	if a.Epoch == q.LeaderEpoch && a.Epoch != q.CurrentLeaderEpoch {
		return
	}
	// Our first batch of the answered epoch, when our log still starts
	// before it (retention moves a cache entry's start to the log start).
	view := p.view()
	if found, _ := view.EndOffsetForEpoch(a.Epoch); found != a.Epoch {
		return
	}
	if start, ok := p.epochStart(a.Epoch); ok && start > view.LogStartOffset() && a.EndOffset <= start {
		p.conform(CheckEpochAnswer, fmt.Sprintf("%s, but we hold committed batches of epoch %d from offset %d", asked, a.Epoch, start))
	}
}

// epochStart finds where the local cache says epoch starts: the end of
// the largest epoch below it, probed through LocalLog, or the log start.
func (p *Partition) epochStart(epoch int32) (int64, bool) {
	view := p.view()
	if epoch == 0 {
		return view.LogStartOffset(), true
	}
	// endOffsetFor(epoch-1) is the start of the next higher entry, which
	// is epoch itself when it is in the cache.
	found, end := view.EndOffsetForEpoch(epoch - 1)
	if end < 0 {
		return 0, false
	}
	if found == epoch-1 || found < epoch {
		return end, true
	}
	return 0, false
}

// conform reports a failed conformance check.
func (p *Partition) conform(c Check, evidence string) {
	p.out.Events = append(p.out.Events, &ConformanceEvent{
		Topic: p.cfg.Topic, Partition: p.cfg.Partition, Check: c, LeaderEpoch: p.epoch, Evidence: evidence,
	})
}

// checkDiverging checks a Fetch reply's DivergingEpoch against the fetch f
// it answers. The leader computes it as endOffsetFor(LastFetchedEpoch),
// which never names an epoch above the one asked, and sends it only when
// its epoch is below LastFetchedEpoch or its end below the fetch offset
// (Partition.readRecords, docs/kafka.md §5.1); any other answer diverges
// from nothing (CheckDivergingWithoutDivergence).
func (p *Partition) checkDiverging(f *Fetch, a EpochEndOffset) {
	if a.Epoch > f.LastFetchedEpoch || (a.Epoch == f.LastFetchedEpoch && a.EndOffset >= f.Offset) {
		p.conform(CheckDivergingWithoutDivergence, fmt.Sprintf(
			"fetched offset %d with last fetched epoch %d and current leader epoch %d, leader %d answered DivergingEpoch (%d, %d)",
			f.Offset, f.LastFetchedEpoch, f.CurrentLeaderEpoch, f.Leader, a.Epoch, a.EndOffset))
	}
}
