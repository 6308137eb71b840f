package storage

import (
	"errors"
	"fmt"

	"github.com/kfollower/kfollower/wire/batch"
)

// TruncateTo removes every batch that holds an offset >= offset and cuts
// the epoch cache to the new end (UnifiedLog.truncateTo). Whole batches
// go: when offset falls inside a batch the log ends before that batch, so
// the new LEO is <= offset. At or past the LEO no batch goes, but the
// cache is still cut at the LEO (KAFKA-10706). Below the log start it is
// TruncateFullyAndStartAt(offset), as in Kafka.
//
// Order of durable steps: the intent file (atomic), then the segments
// (later ones deleted, the one holding offset cut and fsynced, directory
// fsynced), then leader-epoch-checkpoint (atomic), then the intent is
// removed. A crash anywhere in between is finished by Open, so truncated
// batches and epochs never come back. Save them first with SaveLost if
// they must be kept.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	leo := l.leoLocked()
	if offset >= leo {
		if c := l.epochs.TruncateFromEnd(leo); !c.Equal(l.epochs) {
			if err := l.writeEpochs(c); err != nil {
				return l.fail(err)
			}
		}
		return nil
	}
	if offset < l.logStart {
		return l.truncateFullyWithIntent(offset)
	}
	if err := writeFileAtomic(l.fsys, l.dir, intentName, formatIntent(intent{offset: offset})); err != nil {
		return fmt.Errorf("truncating %s to %d: %w", l.tp(), offset, err)
	}
	if err := l.truncateSegments(offset); err != nil {
		return l.fail(fmt.Errorf("truncating %s to %d: %w", l.tp(), offset, err))
	}
	if err := l.finishTruncation(); err != nil {
		return l.fail(fmt.Errorf("truncating %s to %d: %w", l.tp(), offset, err))
	}
	return nil
}

// finishTruncation cuts the epoch cache to the LEO, writes it, and removes
// the intent: the last two durable steps of a truncation.
func (l *Log) finishTruncation() error {
	if c := l.epochs.TruncateFromEnd(l.leoLocked()); !c.Equal(l.epochs) {
		if err := l.writeEpochs(c); err != nil {
			return err
		}
	}
	return removeFileSynced(l.fsys, l.dir, intentName)
}

// truncateSegments drops every batch holding an offset >= offset from the
// segments. It is idempotent, so Open can redo it from the intent.
func (l *Log) truncateSegments(offset int64) error {
	i := 0
	for j, s := range l.segs {
		if s.base < offset {
			i = j
		}
	}
	for _, s := range l.segs[i+1:] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = l.segs[:i+1]
	s := l.segs[i]
	pos, _, found, err := s.findPosition(offset)
	var be *batch.Error
	if err != nil && !errors.As(err, &be) {
		return err
	}
	// A header that does not parse before offset is a torn tail (only
	// possible when Open redoes a truncation): cut there too.
	if found || err != nil || s.sealed {
		if err := s.truncateAt(pos); err != nil {
			return err
		}
	}
	if err := s.sync(); err != nil {
		return err
	}
	l.synced()
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", l.dir, err)
	}
	// Before the intent goes: the old point may lie past the cut, and new
	// bytes written there later are not durable.
	return l.writeRecoveryPoint(s.recoveryPoint())
}

// TruncateFullyAndStartAt deletes every segment and the epoch cache and
// restarts the log empty at offset (UnifiedLog.truncateFullyAndStartAt):
// the answer to a leader whose log starts above our end. Durable steps as
// TruncateTo: intent, segments, log start, checkpoint, intent removed.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.truncateFullyWithIntent(offset)
}

func (l *Log) truncateFullyWithIntent(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncating %s fully: negative start offset %d", l.tp(), offset)
	}
	if err := writeFileAtomic(l.fsys, l.dir, intentName, formatIntent(intent{full: true, offset: offset})); err != nil {
		return fmt.Errorf("truncating %s fully to start at %d: %w", l.tp(), offset, err)
	}
	if err := l.truncateFully(offset); err != nil {
		return l.fail(fmt.Errorf("truncating %s fully to start at %d: %w", l.tp(), offset, err))
	}
	return nil
}

// truncateFully is idempotent; Open redoes it from a "full" intent.
func (l *Log) truncateFully(offset int64) error {
	for _, s := range l.segs {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = nil
	s, err := createSegment(l.fsys, l.dir, offset, l.opts.IndexIntervalBytes, l.opts.Now())
	if err != nil {
		return err
	}
	l.segs = []*segment{s}
	l.synced()
	if err := l.writeRecoveryPoint(s.recoveryPoint()); err != nil {
		return err
	}
	if err := writeFileAtomic(l.fsys, l.dir, LogStartFile, formatLogStart(offset)); err != nil {
		return err
	}
	l.logStart = offset
	if err := l.writeEpochs(Epochs{}); err != nil {
		return err
	}
	return removeFileSynced(l.fsys, l.dir, intentName)
}
