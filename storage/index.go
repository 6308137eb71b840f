package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/kfollower/kfollower/wire/batch"
)

// Index entry sizes (OffsetIndex.ENTRY_SIZE, TimeIndex.ENTRY_SIZE).
const (
	offsetEntrySize = 8  // int32 offset relative to the segment base, int32 byte position
	timeEntrySize   = 12 // int64 timestamp, int32 relative offset
)

type offsetEntry struct {
	rel int32 // offset - segment base
	pos int32 // byte position of the batch in the .log
}

type timeEntry struct {
	ts  int64
	rel int32
}

// indexer builds a segment's .index and .timeindex entries batch by batch
// with the rules of Kafka's LogSegment.recover (LogSegment.java):
//
//   - an offset entry (batch.lastOffset, position of the batch) is added
//     for a batch that starts more than indexInterval bytes after the
//     position of the previous entry (strictly greater, like
//     `validBytes - lastIndexEntry > indexIntervalBytes`); the first batch
//     never gets one;
//   - at the same moment the time index gets (maxTimestampSoFar,
//     offsetOfMaxTimestampSoFar) if that timestamp is above its last entry
//     (TimeIndex.maybeAppend; an empty time index's last entry is
//     (NO_TIMESTAMP, base));
//   - when the segment is sealed (roll, close, recovery) the time index gets
//     the segment's max timestamp the same way (onBecomeInactiveSegment).
//
// Kafka's live append path indexes per append call rather than per batch,
// so its entries depend on how the bytes arrived; recovery's per-batch rule
// is deterministic, and it is also what DumpLogSegments --verify-index-only
// checks (each entry's offset is the last offset of the batch at its
// position), so kfollower applies it on every path.
type indexer struct {
	base        int64
	interval    int64
	offsets     []offsetEntry
	times       []timeEntry
	lastEntry   int64 // position of the last offset entry (0 when none)
	size        int64 // bytes indexed so far (position of the next batch)
	maxTs       int64 // max timestamp so far, -1 when none (TimestampOffset.UNKNOWN)
	maxTsOffset int64
}

func newIndexer(base int64, interval int) indexer {
	return indexer{base: base, interval: int64(interval), maxTs: batch.NoTimestamp, maxTsOffset: -1}
}

// add indexes the batch h at position pos (== x.size).
func (x *indexer) add(h batch.Header) {
	if h.MaxTimestamp > x.maxTs {
		x.maxTs, x.maxTsOffset = h.MaxTimestamp, h.LastOffset()
	}
	if x.size-x.lastEntry > x.interval {
		x.offsets = append(x.offsets, offsetEntry{int32(h.LastOffset() - x.base), int32(x.size)})
		x.maybeAppendTime()
		x.lastEntry = x.size
	}
	x.size += int64(h.Size())
}

func (x *indexer) maybeAppendTime() {
	last := int64(batch.NoTimestamp)
	if n := len(x.times); n > 0 {
		last = x.times[n-1].ts
	}
	if x.maxTs > last {
		x.times = append(x.times, timeEntry{x.maxTs, int32(x.maxTsOffset - x.base)})
	}
}

// seal adds the final time-index entry of an inactive segment.
func (x *indexer) seal() { x.maybeAppendTime() }

// lookup returns the position of the batch holding the largest indexed
// offset <= offset (OffsetIndex.lookup), or 0.
func (x *indexer) lookup(offset int64) int64 {
	rel := offset - x.base
	lo, hi := 0, len(x.offsets) // first entry with rel > target
	for lo < hi {
		m := (lo + hi) / 2
		if int64(x.offsets[m].rel) <= rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return int64(x.offsets[lo-1].pos)
}

// largestTimestamp is what retention by time compares: the segment's max
// timestamp (Kafka: the time index's last entry for a sealed segment).
func (x *indexer) largestTimestamp() int64 { return x.maxTs }

func encodeOffsetIndex(es []offsetEntry) []byte {
	b := make([]byte, 0, len(es)*offsetEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, uint32(e.rel))
		b = binary.BigEndian.AppendUint32(b, uint32(e.pos))
	}
	return b
}

func encodeTimeIndex(es []timeEntry) []byte {
	b := make([]byte, 0, len(es)*timeEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, uint32(e.rel))
	}
	return b
}

// decodeOffsetIndex parses and sanity-checks a .index file the way
// OffsetIndex.sanityCheck does, plus ordering: whole entries only,
// relative offsets and positions strictly increasing, positions inside the
// log. A failure means "rebuild from the .log", as Kafka's loader does.
func decodeOffsetIndex(b []byte, logSize int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("index size %d is not a multiple of %d", len(b), offsetEntrySize)
	}
	es := make([]offsetEntry, len(b)/offsetEntrySize)
	for i := range es {
		e := offsetEntry{int32(binary.BigEndian.Uint32(b[i*8:])), int32(binary.BigEndian.Uint32(b[i*8+4:]))}
		if e.rel < 0 || e.pos < 0 || int64(e.pos) >= logSize {
			return nil, fmt.Errorf("index entry %d (%d, %d) out of range", i, e.rel, e.pos)
		}
		if i > 0 && (e.rel <= es[i-1].rel || e.pos <= es[i-1].pos) {
			return nil, fmt.Errorf("index entry %d (%d, %d) not after the previous one", i, e.rel, e.pos)
		}
		es[i] = e
	}
	return es, nil
}

// decodeTimeIndex is the same for .timeindex (TimeIndex.sanityCheck):
// whole entries, timestamps and relative offsets non-decreasing.
func decodeTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("time index size %d is not a multiple of %d", len(b), timeEntrySize)
	}
	es := make([]timeEntry, len(b)/timeEntrySize)
	for i := range es {
		e := timeEntry{int64(binary.BigEndian.Uint64(b[i*12:])), int32(binary.BigEndian.Uint32(b[i*12+8:]))}
		if e.rel < 0 || (i > 0 && (e.ts <= es[i-1].ts || e.rel < es[i-1].rel)) {
			return nil, fmt.Errorf("time index entry %d (%d, %d) out of order", i, e.ts, e.rel)
		}
		es[i] = e
	}
	return es, nil
}
