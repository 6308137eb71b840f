package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// Append validates raw — one or more whole v2 batches as fetched — and
// appends it unchanged. Validation comes first and covers the whole run
// (UnifiedLog.appendAsFollower): magic 2, lengths, CRC, no partial tail,
// base offset >= LEO, offsets increasing (gaps are legal: compaction),
// leader epochs >= 0 and non-decreasing, also against the cache. On any
// violation it returns an *AppendError and writes nothing.
//
// The one exception to base >= LEO is Kafka's for an empty log: a first
// batch that starts below the LEO but covers it restarts the log at its
// base offset (Partition.appendRecordsToFollowerOrFutureReplica).
//
// Then: roll if due, write the bytes and index entries, assign each
// batch's epoch to the cache (rewriting leader-epoch-checkpoint
// atomically when it changes), and fsync under FlushEveryAppend.
func (l *Log) Append(raw []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if len(raw) == 0 {
		return nil
	}
	// Bytes Stage wrote past the end as they were read are appended
	// where they lie, validated then (stage.go).
	hs, wasStaged, err := l.takeStaged(raw)
	if err != nil {
		return err
	}
	var restart bool
	if !wasStaged {
		if hs, restart, err = l.validate(raw); err != nil {
			return err
		}
	}
	first, last := hs[0], hs[len(hs)-1]
	if restart {
		if err := l.runTruncation(intent{full: true, offset: first.BaseOffset}, Lost{}); err != nil {
			return err
		}
	}
	// Staged bytes were taken with no roll due (takeStaged); deciding
	// again could roll, by the clock, into a segment that lacks them.
	if !wasStaged {
		if err := l.maybeRoll(len(raw), hs); err != nil {
			return err
		}
	}
	s := l.active()
	if !s.canHold(last.LastOffset()) || first.BaseOffset < s.base {
		return &AppendError{Topic: l.topic, Partition: l.partition, Offset: first.BaseOffset,
			Reason: fmt.Sprintf("offsets %d..%d do not fit one segment based at %d", first.BaseOffset, last.LastOffset(), s.base)}
	}
	if wasStaged {
		if err = s.appendStaged(raw, hs); err == nil {
			l.stg = nil
			l.stagedAppended.Add(int64(len(raw)))
		}
	} else {
		err = s.append(raw, hs)
	}
	if err != nil {
		return l.fail(fmt.Errorf("appending to %s: %w", l.tp(), err))
	}
	if err := l.appendTxns(s, raw, hs); err != nil {
		return l.fail(fmt.Errorf("appending to %s: %w", l.tp(), err))
	}
	// The checkpoint is written (unsynced: writeEpochsUnsynced) before the
	// flush, and made durable before any recovery point covers these
	// batches (syncEpochs): from there Open no longer reads their epochs
	// back.
	cache := l.epochs
	changed := false
	for _, h := range hs {
		var ch bool
		cache, ch, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset) // validated: no error
		changed = changed || ch
	}
	if changed {
		if err := l.writeEpochsUnsynced(cache); err != nil {
			return l.fail(err)
		}
	}
	return l.maybeFlush()
}

// appendTxns moves the open transactions past the appended batches, one
// batch at a time as a leader appends each marker on its own
// (KafkaApis.handleWriteTxnMarkersRequest), so the entries' last stable
// offsets are the leader's (UnifiedLog.append: updateTxnIndex with
// ProducerStateManager.lastStableOffset), and writes the ABORT markers'
// entries to the .txnindex.
func (l *Log) appendTxns(s *segment, raw []byte, hs []batch.Header) error {
	if l.txns == nil {
		l.txns = txnState{}
	}
	added := false
	pos := 0
	for _, h := range hs {
		b := raw[pos : pos+h.Size()]
		pos += h.Size()
		ctrl := int16(-1)
		if h.Size() <= maxMarkerSize { // as Open's walk reads them (scanTxns)
			ctrl = markerType(h, b)
		}
		c, lso, ok := l.txns.apply(h, ctrl)
		if !ok {
			continue
		}
		l.recent = append(l.recent, c)
		if c.aborted {
			s.addTxn(abortedTxn{c.pid, c.first, c.last, lso})
			added = true
		}
	}
	if !added {
		return nil
	}
	return s.writeTxnIndex()
}

// validate checks a whole run before anything is written. restart is the
// empty-log case of Append's doc.
func (l *Log) validate(raw []byte) (hs []batch.Header, restart bool, err error) {
	leo := l.leoLocked()
	prevEpoch := int32(-1)
	if e, ok := l.epochs.Latest(); ok {
		prevEpoch = e.Epoch
	}
	return l.validateRun(raw, leo, prevEpoch, leo == l.logStart && l.active().empty(), batch.NewScanner(raw))
}

// validateRun is validate for a run that follows offset next and leader
// epoch prevEpoch (staged batches may lie between the log end and it:
// stage.go), scanned by sc; empty allows the empty-log restart.
func (l *Log) validateRun(raw []byte, next int64, prevEpoch int32, empty bool, sc *batch.Scanner) (hs []batch.Header, restart bool, err error) {
	leo := next
	reject := func(off int64, err error, format string, args ...any) ([]batch.Header, bool, error) {
		return nil, false, &AppendError{Topic: l.topic, Partition: l.partition, Offset: off, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	for sc.Next() {
		h := sc.Header()
		switch {
		case h.PartitionLeaderEpoch < 0:
			return reject(h.BaseOffset, nil, "batch has no partition leader epoch (%d)", h.PartitionLeaderEpoch)
		case h.PartitionLeaderEpoch < prevEpoch:
			return reject(h.BaseOffset, nil, "leader epoch %d below the previous epoch %d", h.PartitionLeaderEpoch, prevEpoch)
		case h.BaseOffset < next && len(hs) == 0 && empty && h.LastOffset() >= next:
			restart = true
		case h.BaseOffset < next && len(hs) == 0:
			return reject(h.BaseOffset, nil, "base offset %d below the log end offset %d", h.BaseOffset, leo)
		case h.BaseOffset < next:
			return reject(h.BaseOffset, nil, "base offset %d overlaps the previous batch, which ends at %d", h.BaseOffset, next-1)
		}
		hs = append(hs, h)
		next, prevEpoch = h.NextOffset(), h.PartitionLeaderEpoch
	}
	if err := sc.Err(); err != nil {
		var be *batch.Error
		off := next
		if errors.As(err, &be) && be.BaseOffset >= 0 {
			off = be.BaseOffset
		}
		return reject(off, err, "invalid batch: %v", err)
	}
	if sc.Tail() > 0 {
		return reject(next, nil, "%d bytes of a partial batch at the end", sc.Tail())
	}
	return hs, restart, nil
}

// maybeRoll starts a new segment when the active one is due
// (LogSegment.shouldRoll: size, age by batch timestamps, relative offset
// overflow). The new base is max(first incoming offset, LEO), as
// UnifiedLog.maybeRoll gives a follower.
func (l *Log) maybeRoll(size int, hs []batch.Header) error {
	if !l.rollDue(size, hs) {
		return nil
	}
	s := l.active()
	first := hs[0]
	l.nextGen()
	// Before the seal makes the old segment's batches durable: Open reads
	// no epoch back from a sealed segment, and a log opened empty is
	// settled.
	if err := l.settle(); err != nil {
		return l.fail(fmt.Errorf("rolling %s: %w", l.tp(), err))
	}
	if err := l.syncEpochs(); err != nil {
		return l.fail(fmt.Errorf("rolling %s: %w", l.tp(), err))
	}
	base := max(first.BaseOffset, l.leoLocked())
	if s.empty() {
		if s.base == base {
			return nil
		}
		// An empty active segment whose base cannot index the batch:
		// replace it rather than leave an empty sealed segment behind.
		if err := s.remove(); err != nil {
			return l.fail(err)
		}
		l.segs = l.segs[:len(l.segs)-1]
	} else if err := s.seal(); err != nil {
		return l.fail(fmt.Errorf("rolling %s: %w", l.tp(), err))
	}
	floor := s.lastEpoch
	if s.empty() {
		floor = s.epochFloor
	}
	ns, err := l.createSegment(base)
	if err != nil {
		return l.fail(fmt.Errorf("rolling %s: %w", l.tp(), err))
	}
	ns.epochFloor, ns.lastEpoch = floor, floor
	l.segs = append(l.segs, ns)
	l.synced() // the old segment was sealed, the new one is empty
	return nil
}

// rollDue says whether appending size bytes of the batches hs needs a
// new segment first (maybeRoll).
func (l *Log) rollDue(size int, hs []batch.Header) bool {
	s := l.active()
	last := hs[len(hs)-1]
	var maxTs int64 = batch.NoTimestamp
	for _, h := range hs {
		maxTs = max(maxTs, h.MaxTimestamp)
	}
	waited := l.opts.Now().Sub(s.created)
	if s.firstTs >= 0 {
		waited = time.Duration(maxTs-s.firstTs) * time.Millisecond
	}
	return s.size() > l.opts.SegmentBytes-int64(size) ||
		(!s.empty() && waited > l.opts.SegmentAge) ||
		!s.canHold(last.LastOffset())
}

// maybeFlush fsyncs before Append returns under FlushEveryAppend. Under
// FlushInterval the owner's Flush, off the writer's goroutine, does it
// (flush.go); under FlushOS nobody does.
func (l *Log) maybeFlush() error {
	if l.opts.Flush == FlushEveryAppend {
		return l.flushLocked()
	}
	return nil
}
