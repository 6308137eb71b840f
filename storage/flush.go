package storage

import (
	"fmt"
	"time"
)

// flushTarget is what Flush takes under the lock to fsync without it: the
// active segment's files, the log end they reach, the recovery point at
// that end, and the generation it was taken in.
type flushTarget struct {
	seg   *segment
	files []file
	// opened are the index files takeFlush wrote through (files holds
	// them too), closed after the fsync; idx and tidx the entries they
	// then hold.
	opened    []file
	idx, tidx int
	end       int64
	rp        recoveryPoint
	gen       uint64
	// pointOnly: nothing new to fsync, only the recovery point to catch
	// up with the durable end (catchUpPoint).
	pointOnly bool
}

// Flush fsyncs what was appended since the last fsync and raises
// DurableEnd to the log end it reached. Unlike every other writing call it
// may run on any goroutine, concurrently with the writer (fetcher's
// flusher does, so the fetch path never waits on an fsync), and it holds
// the log's lock only to take and to record, never during the fsync:
//
//  1. under the lock: the index entries not yet in their files written
//     (page cache only, through descriptors opened for it: the segment
//     holds only its .log open), the log end, the recovery point there,
//     and the generation (bumped by every roll and truncation: nextGen);
//  2. without it: fsync the .log and the index files written (Appends go
//     on meanwhile, past the taken end), and close those;
//  3. under the lock again: if the generation is unchanged, DurableEnd
//     rises to the taken end (never past it: bytes appended since may not
//     be on disk) and, at most once a second, the recovery point is
//     rewritten, the lock released during that write too (rewritePoint).
//     If a roll or truncation came between, nothing is recorded: it
//     fsynced and recorded its own state, and the taken end may lie past
//     its cut.
//
// With nothing new to fsync, a Flush only catches the recovery point up
// with the durable end (catchUpPoint says why), through the same steps.
//
// A failed fsync marks the log failed as a failed write does (Failed), so
// the writer's next call returns the error; that holds even after a
// truncation came between (the page cache of the bytes it kept cannot be
// trusted either: an fsync error is reported to one fsync only), unless the
// failed segment was removed meanwhile. Flush calls are serialized.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	t, err := l.takeFlush()
	if err != nil || t == nil {
		return err
	}
	if !t.pointOnly {
		err = syncFiles(t.files)
		if cerr := closeAll(t.opened); err == nil {
			err = cerr
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if t.seg.removed || l.closed {
			return nil // its bytes are gone, or Close synced them
		}
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	if l.closed || l.failed != nil || l.gen != t.gen {
		return nil
	}
	if t.pointOnly {
		if !l.pointDue() {
			return nil
		}
		return l.rewritePoint(t.rp)
	}
	l.raiseDurable(t.end)
	// No roll or truncation came: the files still hold what was written.
	t.seg.idx.synced = max(t.seg.idx.synced, t.idx)
	t.seg.tidx.synced = max(t.seg.tidx.synced, t.tidx)
	if l.opts.Now().Sub(l.lastRecoveryPoint) >= time.Second {
		return l.rewritePoint(t.rp)
	}
	return nil
}

// rewritePoint is Flush's rewrite of the recovery point: called with mu
// held, it returns with mu held, but releases it around the write. That
// write is an fsync and a directory fsync, and behind the other logs'
// fsyncs of hundreds of megabytes each sat in the disk's queue for tens to
// hundreds of milliseconds: under the lock it stalled the log's writer, and
// with it every partition of its worker, once a second (kernel stacks of
// the binary under --flush interval; the doc above promises the lock only
// around taking and recording). pointMu, taken under mu, keeps every
// other point write (a truncation's, Close's: they hold mu and then take
// pointMu) until this one is done, so the point on disk is always the last
// one decided; a crash in between leaves this point, which a truncation's
// intent or a roll's newer segment overrides at Open (tornFrom), as when
// the same Flush had come just before them.
func (l *Log) rewritePoint(rp recoveryPoint) error {
	l.pointMu.Lock()
	l.pointSeq++
	seq := l.pointSeq
	l.lastRecoveryPoint = l.opts.Now()
	l.mu.Unlock()
	err := writeFileAtomic(l.fsys, l.dir, recoveryPointName, formatRecoveryPoint(rp))
	l.pointMu.Unlock()
	l.mu.Lock()
	if err != nil {
		if l.closed {
			return nil // Close waited for this write and made its own state durable, or failed
		}
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	if l.pointSeq == seq {
		l.pointEnd = rp.next
	}
	return nil
}

// PrepareFlush makes durable, holding the log's lock, the small files a
// Flush would sync first: a new log's settling (settle) and the epoch
// checkpoint after an epoch began (syncEpochs), each an fsync or several.
// A flusher calls it on every log it is about to flush before it fsyncs any
// log's data: behind those data fsyncs in the disk's queue (hundreds of
// megabytes during a catch-up) each of these waited as long, the log's
// writer stalled behind the lock all the while (kernel stacks of the
// binary under --flush interval, at the first flush of a copy). With
// nothing to do it costs the lock alone; a failure fails the log, as in
// Flush.
func (l *Log) PrepareFlush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil || l.durable == l.leoLocked() {
		return err
	}
	if err := l.settle(); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	if err := l.syncEpochs(); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	return nil
}

// takeFlush is Flush's first step; nil when there is nothing to fsync.
func (l *Log) takeFlush() (*flushTarget, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	if l.durable == l.leoLocked() {
		if !l.pointDue() {
			return nil, nil
		}
		s := l.active()
		return &flushTarget{seg: s, rp: s.recoveryPoint(), gen: l.gen, pointOnly: true}, nil
	}
	// The epochs of the batches the taken recovery point covers: durable
	// before it is written. Under the lock (it is written by Appends), and
	// only after an Append started an epoch. A log opened empty is settled
	// first, once.
	if err := l.settle(); err != nil {
		return nil, l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	if err := l.syncEpochs(); err != nil {
		return nil, l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	s := l.active()
	opened, err := s.putIndexes(false)
	if err != nil {
		closeAll(opened)
		return nil, l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	return &flushTarget{seg: s, files: append([]file{s.log}, opened...), opened: opened, idx: s.idx.written, tidx: s.tidx.written,
		end: l.leoLocked(), rp: s.recoveryPoint(), gen: l.gen}, nil
}

// catchUpPoint rewrites the recovery point when it is behind the durable
// end and at least a second old, on a flush with nothing new to fsync
// (Flush does the same through rewritePoint, outside the lock).
// The flushes rewrite it at most once a second, and settle writes only the
// segment's start (counted as just written, saving the first fsync two
// more): without this a log that gets its backlog and then goes quiet
// keeps the start point until its next append a second later, or Close,
// and after any unclean stop Open re-reads its whole active segment as
// torn, cutting a bad durable batch there silently where it would report
// it (CorruptionError). Kafka's LogManager checkpoints recovery points on
// a timer (log.flush.offset.checkpoint.interval.ms), whether or not
// anything was appended since. Everything up to durable is fsynced, index
// entries included (the flush that raised it wrote and synced them), so
// the active segment's point now is one at durable.
func (l *Log) catchUpPoint() error {
	if !l.pointDue() {
		return nil
	}
	s := l.active()
	if err := l.writeRecoveryPoint(s.recoveryPoint()); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	return nil
}

// pointDue says catchUpPoint has a point to write; callers hold mu.
func (l *Log) pointDue() bool {
	if l.unsettled || l.closed || l.failed != nil || l.durable <= l.pointEnd || l.opts.Now().Sub(l.lastRecoveryPoint) < time.Second {
		return false
	}
	s := l.active()
	return s.idx.synced >= s.idx.written && s.tidx.synced >= s.tidx.written
}

// FlushDue says a Flush has work to do: appends not yet fsynced, or a
// recovery point behind the durable end to rewrite (catchUpPoint). A
// periodic flusher picks the logs to flush by it; DurableEnd <
// LogEndOffset alone never reaches a log that went quiet.
func (l *Log) FlushDue() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || l.failed != nil {
		return false
	}
	return l.durable < l.leoLocked() || l.pointDue()
}

// AtRest says a flusher has nothing to do for the log until its next
// append: every append fsynced and the recovery point at the durable end.
// Unlike FlushDue it does not wait for the point to be a second old: a
// log flushed just now is not at rest while its point's catch-up is still
// to come.
func (l *Log) AtRest() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durable == l.leoLocked() && l.durable <= l.pointEnd
}

func syncFiles(fs []file) error {
	for _, f := range fs {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", f.Name(), err)
		}
	}
	return nil
}

// raiseDurable records that the log is durable up to end (at most the log
// end): the transactions whose markers are now durable are stable.
func (l *Log) raiseDurable(end int64) {
	if end <= l.durable {
		return
	}
	l.durable = end
	kept := l.recent[:0]
	for _, c := range l.recent {
		if c.last >= end {
			kept = append(kept, c)
		}
	}
	l.recent = kept
}

// nextGen starts a new generation: a roll or a truncation changes the
// active segment or cuts it, so a Flush that took its target before must
// not record it.
func (l *Log) nextGen() { l.gen++ }

// flushLocked fsyncs the active segment holding the lock: Append under
// FlushEveryAppend, which must return durable.
func (l *Log) flushLocked() error {
	if l.durable == l.leoLocked() {
		return l.catchUpPoint()
	}
	if err := l.settle(); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	if err := l.syncEpochs(); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	if err := l.active().sync(); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	l.synced()
	if l.opts.Now().Sub(l.lastRecoveryPoint) >= time.Second {
		if err := l.writeRecoveryPoint(l.active().recoveryPoint()); err != nil {
			return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
		}
	}
	return nil
}
