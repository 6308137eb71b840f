package storage

import (
	"bytes"
	"fmt"
	"strings"
)

const recoveryPointName = "kfollower-recovery-point"

// recoveryPoint says how far the active segment is known durable, so Open
// re-reads only what follows (Kafka's recovery-point-offset-checkpoint,
// but down to the byte, with the indexer state at that byte). File
// kfollower-recovery-point: "0\n<base> <position> <next> <offset entries>
// <time entries> <maxTs> <maxTsOffset> <firstTs> <lastEpoch>\n".
type recoveryPoint struct {
	base, pos, next    int64
	nOff, nTime        int64
	maxTs, maxTsOffset int64
	firstTs            int64
	lastEpoch          int64
}

func (s *segment) recoveryPoint() recoveryPoint {
	return recoveryPoint{s.base, s.ix.size, s.next, int64(len(s.ix.offsets)), int64(len(s.ix.times)), s.ix.maxTs, s.ix.maxTsOffset, s.firstTs, int64(s.lastEpoch)}
}

func formatRecoveryPoint(rp recoveryPoint) []byte {
	return fmt.Appendf(nil, "0\n%d %d %d %d %d %d %d %d %d\n", rp.base, rp.pos, rp.next, rp.nOff, rp.nTime, rp.maxTs, rp.maxTsOffset, rp.firstTs, rp.lastEpoch)
}

func parseRecoveryPoint(data []byte) (recoveryPoint, error) {
	var rp recoveryPoint
	lines := splitLines(string(data))
	if len(lines) != 2 || lines[0] != "0" {
		return rp, fmt.Errorf("recovery point %q: bad framing", data)
	}
	f := strings.Fields(lines[1])
	dst := []*int64{&rp.base, &rp.pos, &rp.next, &rp.nOff, &rp.nTime, &rp.maxTs, &rp.maxTsOffset, &rp.firstTs, &rp.lastEpoch}
	if len(f) != len(dst) {
		return rp, fmt.Errorf("recovery point %q: want %d fields", data, len(dst))
	}
	for i, d := range dst {
		n, err := parseJavaInt(f[i], 64)
		if err != nil {
			return rp, fmt.Errorf("recovery point %q: %w", data, err)
		}
		*d = n
	}
	if rp.pos < 0 || rp.nOff < 0 || rp.nTime < 0 || rp.next < rp.base || rp.lastEpoch < -1 || rp.lastEpoch > 1<<31-1 {
		return rp, fmt.Errorf("recovery point %q: out of range", data)
	}
	return rp, nil
}

// startPoint is the recovery point at the start of an empty segment with
// base offset base whose previous segment's last epoch is floor (-1 for
// none): what Open or settle writes unsynced for a log opened empty (an
// empty segment's recoveryPoint).
func startPoint(base int64, floor int32) recoveryPoint {
	return recoveryPoint{base: base, next: base, maxTs: -1, maxTsOffset: -1, firstTs: -1, lastEpoch: int64(floor)}
}

// segStart names a segment for unsyncedPoint: its base offset and its
// epoch floor.
type segStart struct {
	base  int64
	floor int32
}

// unsyncedPoint says data can only be what an unsynced write of a
// recovery point left after a power loss: every point is written fsynced
// (renamed over the old one, so whole or not there) except the start
// point of a log opened empty (Open, or a new log's first fsync:
// Log.settle), which named the start of one of the segments segs (the active one, or an earlier one it has rolled from
// since). A power loss leaves of such a write an empty file, or one cut
// before its final newline, or with zero-filled sectors, each byte in
// its place: data is that when it is no longer than the start point of
// one of segs and every byte is that point's or zero. Any other bytes
// are damage to a point written whole, not a torn write, and are judged
// as a garbled point (loadRecoveryPoint).
func unsyncedPoint(data []byte, segs []segStart) bool {
	if len(data) > 0 && data[len(data)-1] == '\n' && bytes.IndexByte(data, 0) < 0 {
		return false // whole
	}
	for _, s := range segs {
		for _, floor := range []int32{-1, s.floor} {
			if tornImageOf(data, formatRecoveryPoint(startPoint(s.base, floor))) {
				return true
			}
		}
	}
	return false
}

// tornImageOf says data is what a power loss may leave of an unsynced
// write of want to a new file: a prefix of it, with any bytes zeroed.
func tornImageOf(data, want []byte) bool {
	if len(data) > len(want) {
		return false
	}
	for i, c := range data {
		if c != 0 && c != want[i] {
			return false
		}
	}
	return true
}

// loadRecoveryPoint reads kfollower-recovery-point as read (data, or the
// error reading it; segs the log's segments): the point when it is
// usable, else nil and whether the active segment is to be re-read as torn
// from its start (torn), as the start point of a log opened empty says.
// That holds when the point is torn (unsyncedPoint), and, for a log that
// was never settled (fresh: nothing of it was ever declared durable, so no
// byte of it is known durable), when it is missing or unreadable too.
// Otherwise a missing or garbled point is ignored (warn says why), and the
// bytes before a bad batch are judged without one (validBatchFollows).
func loadRecoveryPoint(data []byte, readErr error, fresh bool, segs []segStart) (rp *recoveryPoint, torn bool, warn error) {
	if readErr != nil {
		return nil, fresh, nil
	}
	if unsyncedPoint(data, segs) {
		// Not parsed: a prefix could pass for another point.
		return nil, true, fmt.Errorf("recovery point %q: torn (a torn write of a segment's start point)", data)
	}
	p, err := parseRecoveryPoint(data)
	if err != nil {
		return nil, fresh, err
	}
	return &p, false, nil
}

// neverSettled says a log whose segments have the base offsets bases
// (sorted) was never settled (Log.settle): it holds at most one segment
// and that one has no .kfollower-txns, which settle writes first, fsynced,
// and every segment created since (a roll, a truncation) has. has says
// whether the partition directory lists a name.
func neverSettled(bases []int64, has func(name string) bool) bool {
	return len(bases) == 0 || len(bases) == 1 && !has(segmentName(bases[0], txnStateSuffix))
}
