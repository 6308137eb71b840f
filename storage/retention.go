package storage

import (
	"fmt"
	"slices"
)

// DeleteBefore moves the log start offset up to offset (at most the LEO),
// deletes the segments that then lie wholly below it and cuts the epoch
// cache from the start (UnifiedLog.maybeIncrementLogStartOffset +
// deleteOldSegments). The new start is written first, so a crash before
// the deletions only leaves segments Open deletes.
func (l *Log) DeleteBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.unstage(); err != nil { // stage.go
		return err
	}
	return l.deleteBefore(offset)
}

func (l *Log) deleteBefore(offset int64) error {
	if offset <= l.logStart {
		return nil
	}
	if leo := l.leoLocked(); offset > leo {
		return fmt.Errorf("moving the start of %s to %d past its end %d: %w", l.tp(), offset, leo, ErrOffsetOutOfRange)
	}
	if err := l.settle(); err != nil {
		return l.fail(fmt.Errorf("moving the start of %s to %d: %w", l.tp(), offset, err))
	}
	if err := writeFileAtomic(l.fsys, l.dir, LogStartFile, formatLogStart(offset)); err != nil {
		return fmt.Errorf("moving the start of %s to %d: %w", l.tp(), offset, err)
	}
	l.logStart = offset
	if c := l.epochs.TruncateFromStart(offset); !c.Equal(l.epochs) {
		if err := l.writeEpochs(c); err != nil {
			return l.fail(err)
		}
	}
	if err := l.deleteSegmentsBelowStart(); err != nil {
		return l.fail(fmt.Errorf("deleting segments of %s below %d: %w", l.tp(), offset, err))
	}
	return nil
}

// deleteSegmentsBelowStart removes segments whose successor starts at or
// below the log start offset. The active segment always stays.
func (l *Log) deleteSegmentsBelowStart() error {
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= l.logStart {
		n++
	}
	if n == 0 {
		return nil
	}
	for _, s := range l.segs[:n] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = slices.Delete(l.segs, 0, n)
	return l.fsys.SyncDir(l.dir)
}

// EnforceRetention deletes the oldest sealed segments that are over the
// size limit or older than the age limit (UnifiedLog.deleteRetentionSizeBreachedSegments
// and deleteRetentionMsBreachedSegments: a prefix of segments, never the
// active one) and moves the log start to the first remaining segment. It
// returns how many segments went.
func (l *Log) EnforceRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if err := l.unstage(); err != nil { // stage.go
		return 0, err
	}
	var total int64
	for _, s := range l.segs {
		total += s.size()
	}
	nowMs := l.opts.Now().UnixMilli()
	n := 0
	for ; n+1 < len(l.segs); n++ {
		s := l.segs[n]
		bySize := l.opts.RetentionBytes > 0 && total-s.size() >= l.opts.RetentionBytes
		byAge := l.opts.RetentionAge > 0 && nowMs-l.largestTimestamp(s) > l.opts.RetentionAge.Milliseconds()
		if !bySize && !byAge {
			break
		}
		total -= s.size()
	}
	if n == 0 {
		return 0, nil
	}
	return n, l.deleteBefore(l.segs[n].base)
}

// largestTimestamp is LogSegment.largestTimestamp: the max batch
// timestamp, or the file's modification time when no batch has one.
func (l *Log) largestTimestamp(s *segment) int64 {
	if ts := s.ix.largestTimestamp(); ts >= 0 {
		return ts
	}
	if fi, err := s.log.Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return l.opts.Now().UnixMilli()
}
