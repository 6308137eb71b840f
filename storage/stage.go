package storage

import (
	"fmt"
	"slices"

	"github.com/kfollower/kfollower/wire/batch"
)

// Staging: a Fetch response's records written into the segment while
// they are read off the connection, before the fetcher's state machine
// has accepted them.
//
// A catch-up is bound by the CPU on a small machine, and most of it goes
// to two copies of each byte: from the socket into the Fetch buffer, and
// from the buffer into the page cache (write). When the second runs after
// the whole response is in (16-24 MiB), it reads its source from memory,
// long out of the CPU's cache; run on each chunk as it arrives it reads
// the source from the cache, at several times the speed, and so does the
// CRC (docs/design.md §11). Stage is that early write; Append, given the
// very same bytes later, then writes almost nothing.
//
// What is staged is not appended: it lies past the segment's end, which
// readers, the indexes, the flusher's durable end and the recovery point
// all stop at. So that a crash cannot make it part of the log either,
// Stage holds back the first 12 bytes of the first staged batch (its base
// offset and length): until Append writes them, the file has a hole
// there, which reads as a batch of length 0, and recovery cuts the staged
// bytes as a torn tail (recoverActive). Every other change to the log
// first drops what is staged (unstage), cutting the file back to the
// segment's end.

// staged is what Stage has written past the active segment's end.
type staged struct {
	seg   *segment
	pos   int64 // seg.size() when staging began: the first staged byte's place
	field *byte // the first byte of the records field staged from
	n     int   // bytes of the field staged, whole batches
	end   int64 // past the last byte a write may have reached
	hs    []batch.Header
	next  int64 // the offset after the last staged batch
	epoch int32 // the last staged batch's leader epoch
}

// Stage writes the whole batches of field, a partition's records as a
// Fetch response is read (from its first byte up to the last whole batch
// in so far; a partial batch at its end is left for the next call), into
// the active segment past its end, when they continue the log: the Fetch
// asked from offset at, where the log ends. first says field is new; any
// later call passes the same field, grown. Each batch is validated as
// Append validates it, CRC included, while it is still in the CPU's
// cache; staging stops at a read whose new batches do not all pass, that
// a roll would have to take, or that do not follow. It returns how many bytes of field are
// staged, and never fails the log: a staged batch that Append is not
// given is dropped, and whatever stopped staging is Append's to find
// again.
func (l *Log) Stage(field []byte, first bool, at int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(field) == 0 || l.writable() != nil {
		return 0
	}
	st := l.stg
	if first {
		// Not where the log ends: the Append of the response before is
		// still to come (the fetcher sends a Fetch ahead of it), and
		// what that one staged must stay.
		if l.leoLocked() != at || l.unstage() != nil {
			return 0
		}
		s := l.active()
		prev := int32(-1)
		if e, ok := l.epochs.Latest(); ok {
			prev = e.Epoch
		}
		st = &staged{seg: s, pos: s.size(), field: &field[0], next: l.leoLocked(), epoch: prev}
	} else if st == nil || st.field != &field[0] || st.seg != l.active() || len(field) <= st.n {
		return stagedLen(st, field)
	}
	more := field[st.n:]
	whole := 0 // a partial batch at the end waits for its bytes
	for sc := batch.NewFrameScanner(more); sc.Next(); {
		whole += sc.Header().Size()
	}
	more = more[:whole]
	hs, _, err := l.validateRun(more, st.next, st.epoch, false, batch.NewScanner(more))
	if err != nil || len(hs) == 0 {
		return stagedLen(st, field) // Append finds it again, and says what is wrong
	}
	all := append(slices.Clip(st.hs), hs...)
	last := hs[len(hs)-1]
	if l.rollDue(st.n+len(more), all) || !st.seg.canHold(last.LastOffset()) || all[0].BaseOffset < st.seg.base {
		return stagedLen(st, field)
	}
	pos, b := st.pos+int64(st.n), more
	if st.n == 0 {
		pos, b = pos+batch.LogOverhead, more[batch.LogOverhead:] // held back: see above
	}
	st.end = pos + int64(len(b))
	l.stg = st
	if _, err := st.seg.log.WriteAt(b, pos); err != nil {
		_ = l.unstage() // cuts what the write may have left
		return 0
	}
	st.n += len(more)
	st.hs, st.next, st.epoch = all, last.NextOffset(), last.PartitionLeaderEpoch
	return st.n
}

// stagedLen is how much of field st holds staged.
func stagedLen(st *staged, field []byte) int {
	if st == nil || len(field) == 0 || st.field != &field[0] {
		return 0
	}
	return st.n
}

// takeStaged returns raw's batch headers when raw is what Stage wrote
// past the end (the same bytes, all of them) and can be appended where it
// lies, with no roll before it; else it drops what is staged and
// returns false, for Append to write raw as any other. Taken, l.stg stays
// until Append has written the held-back bytes: whatever fails before
// that, the next change to the log still cuts the staged bytes.
func (l *Log) takeStaged(raw []byte) ([]batch.Header, bool, error) {
	st := l.stg
	if st == nil {
		return nil, false, nil
	}
	// All of what is staged, no less: with a prefix taken, the batches
	// after it would be whole and valid on disk, and a crash before the
	// cut would make them part of the log.
	s := l.active()
	ok := st.field == &raw[0] && len(raw) == st.n && st.seg == s && s.size() == st.pos
	var hs []batch.Header
	if ok {
		prev := int32(-1)
		if e, found := l.epochs.Latest(); found {
			prev = e.Epoch
		}
		var err error
		hs, _, err = l.validateRun(raw, l.leoLocked(), prev, false, batch.NewFrameScanner(raw))
		// The headers, CRCs among them, are the staged ones: the bytes
		// are those that were checked and written, not others read
		// since into the same buffer.
		ok = err == nil && len(hs) <= len(st.hs) && slices.Equal(hs, st.hs[:len(hs)]) && !l.rollDue(len(raw), hs)
	}
	if !ok {
		return nil, false, l.unstage()
	}
	return hs, true, nil
}

// StagedAppended is how many bytes Append has taken where Stage had
// written them, since Open.
func (l *Log) StagedAppended() int64 { return l.stagedAppended.Load() }

// unstage drops what Stage wrote past the active segment's end: the file
// is cut back to the segment's end, as if nothing had been staged.
func (l *Log) unstage() error {
	st := l.stg
	l.stg = nil
	if st == nil || st.seg.size() >= st.end {
		return nil // nothing written, or all of it appended
	}
	if err := st.seg.log.Truncate(st.seg.size()); err != nil {
		return l.fail(fmt.Errorf("cutting the bytes staged past the end of %s: %w", st.seg.path(logSuffix), err))
	}
	return nil
}
