package storage

import (
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
