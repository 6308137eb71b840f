package storage

import "fmt"

// EpochEntry is one line of the leader-epoch sequence: the first offset a
// leader epoch wrote (KIP-101's "leader epoch sequence").
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// Epochs is Kafka's leader-epoch cache (LeaderEpochFileCache.java) as a pure
// value: no file, no lock, no clock. Every method leaves its receiver
// unchanged and returns a new value, so a copy can be handed to readers
// while the single writer moves on.
//
// Invariant: epochs and start offsets both increase strictly along the
// entries (KIP-101's leader epoch sequence); Assign keeps it the way Kafka
// does, by dropping conflicting tail entries first.
type Epochs struct {
	entries []EpochEntry // never mutated once the value is built
}

// NewEpochs builds a cache by assigning entries in order, exactly as
// Kafka's LeaderEpochFileCache constructor replays a checkpoint through
// assign. It fails on a negative epoch or offset (assign's
// IllegalArgumentException).
func NewEpochs(entries ...EpochEntry) (Epochs, error) {
	var c Epochs
	for _, e := range entries {
		var err error
		if c, _, err = c.Assign(e.Epoch, e.StartOffset); err != nil {
			return Epochs{}, err
		}
	}
	return c, nil
}

// Entries returns a copy of the entries, oldest first.
func (c Epochs) Entries() []EpochEntry { return append([]EpochEntry(nil), c.entries...) }

// Len is the number of entries.
func (c Epochs) Len() int { return len(c.entries) }

// Latest is the newest entry; ok is false when the cache is empty.
func (c Epochs) Latest() (e EpochEntry, ok bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// Earliest is the oldest entry; ok is false when the cache is empty.
func (c Epochs) Earliest() (e EpochEntry, ok bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[0], true
}

// Equal reports whether both caches hold the same entries.
func (c Epochs) Equal(o Epochs) bool {
	if len(c.entries) != len(o.entries) {
		return false
	}
	for i := range c.entries {
		if c.entries[i] != o.entries[i] {
			return false
		}
	}
	return true
}

func (c Epochs) String() string { return fmt.Sprint(c.entries) }

// Assign records that epoch starts at startOffset, with the exact rules of
// LeaderEpochFileCache.assign:
//   - negative epoch or offset is an error;
//   - nothing changes unless the cache is empty, the epoch differs from the
//     latest, or the offset is below the latest entry's start (isUpdateNeeded),
//     so every later batch of the current epoch is a no-op;
//   - before adding, entries with epoch >= epoch or start >= startOffset are
//     removed from the newest end (maybeTruncateNonMonotonicEntries,
//     KAFKA-7415), which also replaces an empty epoch at the same offset.
//
// changed reports whether the result differs from c (the caller must then
// rewrite the checkpoint; Kafka writes it synchronously on assign).
func (c Epochs) Assign(epoch int32, startOffset int64) (next Epochs, changed bool, err error) {
	if epoch < 0 || startOffset < 0 {
		return c, false, fmt.Errorf("assigning leader epoch %d at offset %d: negative epoch or offset", epoch, startOffset)
	}
	if l, ok := c.Latest(); ok && l.Epoch == epoch && startOffset >= l.StartOffset {
		return c, false, nil
	}
	keep := len(c.entries)
	for keep > 0 {
		e := c.entries[keep-1]
		if e.Epoch < epoch && e.StartOffset < startOffset {
			break
		}
		keep--
	}
	out := make([]EpochEntry, keep, keep+1)
	copy(out, c.entries[:keep])
	return Epochs{entries: append(out, EpochEntry{epoch, startOffset})}, true, nil
}

// TruncateFromEnd removes every entry whose start offset is >= endOffset
// (LeaderEpochFileCache.truncateFromEnd). A negative endOffset, or
// one above the newest start, changes nothing. Kafka calls it on every
// truncation with the target, or with the LEO when the target is at or past
// it (KAFKA-10706), and after recovery with the recovered LEO.
func (c Epochs) TruncateFromEnd(endOffset int64) Epochs {
	l, ok := c.Latest()
	if endOffset < 0 || !ok || l.StartOffset < endOffset {
		return c
	}
	keep := len(c.entries)
	for keep > 0 && c.entries[keep-1].StartOffset >= endOffset {
		keep--
	}
	return Epochs{entries: append([]EpochEntry(nil), c.entries[:keep]...)}
}

// TruncateFromStart drops every entry that starts at or before startOffset
// and, if any were dropped, re-inserts the last of them starting at
// startOffset (LeaderEpochFileCache.truncateFromStart): the epoch that
// covers the new log start offset keeps covering it. An entry that starts
// exactly at startOffset is thus kept as it is. Negative: no change.
func (c Epochs) TruncateFromStart(startOffset int64) Epochs {
	if startOffset < 0 || len(c.entries) == 0 || c.entries[0].StartOffset > startOffset {
		return c
	}
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= startOffset {
		i++
	}
	last := c.entries[i-1]
	out := make([]EpochEntry, 0, len(c.entries)-i+1)
	out = append(out, EpochEntry{last.Epoch, startOffset})
	return Epochs{entries: append(out, c.entries[i:]...)}
}

// EndOffsetFor answers as LeaderEpochFileCache.endOffsetFor(epoch, leo)
// (docs/kafka.md), in this order:
//  1. epoch -1 (UNDEFINED_EPOCH): (-1, -1);
//  2. epoch is the latest: (epoch, leo) — the LEO, not a high watermark;
//  3. no entry above epoch (empty cache, or epoch above the latest): (-1, -1);
//  4. otherwise end = start of the first entry above epoch, paired with the
//     largest entry <= epoch, or with epoch itself when it is below every
//     entry (the KAFKA-7415 change; Kafka's Javadoc still describes the old
//     (-1, -1) answer).
func (c Epochs) EndOffsetFor(epoch int32, leo int64) (found int32, end int64) {
	if epoch == -1 {
		return -1, -1
	}
	if l, ok := c.Latest(); ok && l.Epoch == epoch {
		return epoch, leo
	}
	// higherEntry: the first entry with Epoch > epoch.
	hi := -1
	for i, e := range c.entries {
		if e.Epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// EpochForOffset returns the epoch whose range holds offset
// (LeaderEpochFileCache.epochForOffset): the last entry starting at or
// before it. ok is false below the first entry or on an empty cache.
func (c Epochs) EpochForOffset(offset int64) (epoch int32, ok bool) {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].StartOffset <= offset {
			return c.entries[i].Epoch, true
		}
	}
	return 0, false
}
