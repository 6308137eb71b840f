package storage

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kfollower/kfollower/wire/batch"
)

// Truncation is a truncation that removes committed data, with what the
// loss's report needs: TruncateWithLost's argument, and in lost.json the
// record of the truncation that removed the batches.
type Truncation struct {
	// Offset is TruncateTo's offset, or with Full TruncateFullyAndStartAt's.
	// An Offset below the log start is a full truncation, as in TruncateTo.
	Offset int64 `json:"offset"`
	Full   bool  `json:"full"`
	// Cause says what revealed the loss: one of the Cause constants (any
	// token of [a-z0-9-] is kept as given). lost.json has it at the top.
	Cause string `json:"-"`
	// OldLeaderEpoch and NewLeaderEpoch are the leader epochs the loss
	// event names (follower's TruncationEvent), -1 when not known.
	OldLeaderEpoch int32 `json:"oldLeaderEpoch"`
	NewLeaderEpoch int32 `json:"newLeaderEpoch"`
}

// TruncateWithLost is the one crash-atomic unit for a truncation that
// removes committed data: it saves the batches the truncation removes to
// lost+found, makes the truncation durable and records the loss for
// reporting (docs/design.md promise 2). Whatever instant the process or
// the machine dies, a restart finds either the log untouched and no event,
// or the truncation done and exactly one complete event, listed by
// UnreportedLosses until MarkReported.
//
// The removed batches are those holding an offset >= the truncation point
// (all of them for a full truncation); Lost.From is the first offset lost
// and FirstOffset the first saved batch's base offset (see Lost). When
// nothing is removed no event is made: Batches == 0 (the epoch cache is
// still cut, as TruncateTo does).
//
// Order of durable steps (docs/storage-format.md §11): the event directory
// under its temporary name, complete (segments, lost.json) and fsynced
// with its parent; the intent, naming the event; the directory renamed
// into place and its parent fsynced; the truncation's own steps; the loss
// added to kfollower-unreported-losses; the intent removed. Open completes
// an intent it finds, the rename included, and never copies twice: an
// interrupted save that never reached its intent is deleted (the batches
// are still in the log).
//
// A batch of our own log that fails its checks during the save is a
// *CorruptionError (segment, position, offset), with no copy left behind
// and the log unchanged: the caller must stop the partition, not retry.
// After an error once the intent is on disk, the log refuses further calls
// until it is reopened, and Open completes the truncation and lists the
// loss. When writing the intent itself fails, see TruncateTo.
func (l *Log) TruncateWithLost(t Truncation) (Lost, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.truncatable(); err != nil {
		return Lost{}, err
	}
	if err := l.unstage(); err != nil { // stage.go
		return Lost{}, err
	}
	if !validCause(t.Cause) {
		return Lost{}, fmt.Errorf("truncating %s: cause %q is not a token of [a-z0-9-]", l.tp(), t.Cause)
	}
	if t.Offset < 0 {
		return Lost{}, fmt.Errorf("truncating %s: negative offset %d", l.tp(), t.Offset)
	}
	leo := l.leoLocked()
	t.Full = t.Full || t.Offset < l.logStart
	if !t.Full && t.Offset >= leo {
		lost := Lost{Topic: l.topic, Partition: l.partition, Cause: t.Cause, From: leo, FirstOffset: -1, LastOffset: -1, EndOffset: leo}
		return lost, l.truncateToLocked(t.Offset)
	}
	from := t.Offset
	if t.Full {
		from = l.logStart
	}
	lost, err := l.saveLost(from, &t)
	if err != nil {
		return Lost{}, err
	}
	in := intent{full: t.Full, offset: t.Offset, lost: lost.ID}
	if err := l.runTruncation(in, lost); err != nil {
		return Lost{}, err
	}
	return lost, nil
}

// TruncateTo removes every batch that holds an offset >= offset and cuts
// the epoch cache to the new end (UnifiedLog.truncateTo). Whole batches
// go: when offset falls inside a batch the log ends before that batch, so
// the new LEO is <= offset. At or past the LEO no batch goes, but the
// cache is still cut at the LEO (KAFKA-10706). Below the log start it is
// TruncateFullyAndStartAt(offset), as in Kafka.
//
// Order of durable steps: the active segment fsynced if it has unsynced
// bytes (so that everything before the cut is durable before the intent,
// and recovery can tell damage there from a torn tail), the intent file
// (atomic), then the segments (later ones deleted, the one holding offset
// cut and fsynced, directory fsynced), then leader-epoch-checkpoint
// (atomic), then the intent is removed. A crash anywhere in between is
// finished by Open, so truncated batches and epochs never come back. To
// keep what it removes, call TruncateWithLost instead.
//
// If writing the intent fails, it may be on disk all the same (its rename
// done, the directory fsync failed), and an append after it would be cut
// by the next Open's redo: the intent is rolled back (removed, the
// directory fsynced). If that fails too the truncation is pending: Append,
// DeleteBefore and EnforceRetention refuse with ErrTruncationPending until
// a truncation call (this one again, or another) first rolls the pending
// one back and then succeeds, or until the log is reopened, which
// completes it; nothing can have been appended in between.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.truncatable(); err != nil {
		return err
	}
	if err := l.unstage(); err != nil { // stage.go
		return err
	}
	return l.truncateToLocked(offset)
}

func (l *Log) truncateToLocked(offset int64) error {
	leo := l.leoLocked()
	if offset >= leo {
		if c := l.epochs.TruncateFromEnd(leo); !c.Equal(l.epochs) {
			if err := l.writeEpochs(c); err != nil {
				return l.fail(err)
			}
		}
		return nil
	}
	if offset < 0 {
		return fmt.Errorf("truncating %s: negative offset %d", l.tp(), offset)
	}
	return l.runTruncation(intent{full: offset < l.logStart, offset: offset}, Lost{})
}

// TruncateFullyAndStartAt deletes every segment and the epoch cache and
// restarts the log empty at offset (UnifiedLog.truncateFullyAndStartAt):
// the answer to a leader whose log starts above our end. Durable steps as
// TruncateTo: intent, segments, log start, checkpoint, intent removed
// (nothing is flushed first: nothing stays).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.truncatable(); err != nil {
		return err
	}
	if err := l.unstage(); err != nil { // stage.go
		return err
	}
	if offset < 0 {
		return fmt.Errorf("truncating %s fully: negative start offset %d", l.tp(), offset)
	}
	return l.runTruncation(intent{full: true, offset: offset}, Lost{})
}

// runTruncation carries out in, whose lost+found copy (lost, when in.lost
// is set) is complete under its temporary name (docs/storage-format.md
// §11).
func (l *Log) runTruncation(in intent, lost Lost) error {
	// Before any byte is changed or removed: a Section taken before this
	// point is Stale from here on (section.go).
	l.truncations.Add(1)
	what := func(err error) error { return fmt.Errorf("truncating %s (%s): %w", l.tp(), in, err) }
	l.nextGen()
	// What the truncation makes durable must not sit in a directory a
	// crash can still take (a log opened empty).
	if err := l.settle(); err != nil {
		return l.fail(what(err))
	}
	// The truncation writes a recovery point before it rewrites the
	// checkpoint (truncateSegments): the epochs it keeps must be durable.
	if err := l.syncEpochs(); err != nil {
		return l.fail(what(err))
	}
	if !in.full && l.durable < l.leoLocked() {
		// With an intent on disk, recovery trusts no recovery point and
		// re-reads the active segment whole; bytes a power loss could have
		// torn before the cut would look like corruption there.
		if err := l.active().sync(); err != nil {
			return l.fail(what(err))
		}
		l.synced()
	}
	if err := l.writeIntent(in); err != nil {
		return what(err)
	}
	if in.lost != "" {
		if err := l.commitLost(in.lost); err != nil {
			return l.fail(what(err))
		}
	}
	var err error
	if in.full {
		err = l.truncateFully(in.offset)
	} else {
		err = l.truncateSegments(in.offset)
	}
	if err == nil {
		err = l.finishTruncation(in, lost)
	}
	if err != nil {
		return l.fail(what(err))
	}
	return nil
}

// writeIntent writes the intent file, and rolls it back when that fails:
// see TruncateTo.
func (l *Log) writeIntent(in intent) error {
	err := writeFileAtomic(l.fsys, l.dir, intentName, formatIntent(in))
	if err == nil {
		return nil
	}
	if rerr := l.rollBack(in); rerr != nil {
		l.pending = &in
		return fmt.Errorf("%w; rolling the intent back failed too (%v): appends are refused until a truncation completes", err, rerr)
	}
	return err
}

// rollBack undoes an intent that was written (or may have been) but not
// acted on: the file removed and the directory fsynced, and its event's
// temporary directory removed (an orphan Open would delete anyway).
func (l *Log) rollBack(in intent) error {
	if err := removeFileSynced(l.fsys, l.dir, intentName); err != nil {
		return err
	}
	if in.lost != "" {
		tmp := filepath.Join(LostFoundDir(l.dataDir, l.topic, l.partition), in.lost+tmpSuffix)
		if err := removeDirAll(l.fsys, tmp); err != nil {
			l.lg.Warn("removing a rolled-back lost+found save", "dir", tmp, "err", err)
		}
	}
	return nil
}

// truncatable is usable for a truncation call: a pending truncation is
// rolled back first, so the call starts from the log as it is.
func (l *Log) truncatable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.pending != nil {
		if err := l.rollBack(*l.pending); err != nil {
			return fmt.Errorf("%s: rolling back the pending truncation (%s): %w", l.tp(), *l.pending, err)
		}
		l.pending = nil
	}
	return nil
}

// finishTruncation cuts the epoch cache to the LEO and writes it, lists
// the loss as unreported, and removes the intent: the last durable steps
// of a truncation.
func (l *Log) finishTruncation(in intent, lost Lost) error {
	if c := l.epochs.TruncateFromEnd(l.leoLocked()); !c.Equal(l.epochs) {
		if err := l.writeEpochs(c); err != nil {
			return err
		}
	}
	if in.lost != "" {
		if err := l.addUnreported(lost); err != nil {
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
	if err := l.reloadActiveTxns(); err != nil {
		return err
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

// truncateFully is idempotent; Open redoes it from a "full" intent. The
// caller removes the intent.
func (l *Log) truncateFully(offset int64) error {
	for _, s := range l.segs {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = nil
	l.txns, l.recent = txnState{}, nil
	s, err := l.createSegment(offset)
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
	return l.writeEpochs(Epochs{})
}
