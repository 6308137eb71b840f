package storage

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kfollower/kfollower/wire/batch"
)

// Read returns whole batches starting with the one that holds offset (or
// the first after it, across a compaction gap), at most maxBytes of them
// but always at least one, all from one segment (as LogSegment.read with
// minOneMessage). It returns nil at the log end. Every returned batch has
// passed its CRC check; a batch that fails it is a *CorruptionError.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	leo := l.leoLocked()
	if offset < l.logStart || offset > leo {
		return nil, fmt.Errorf("reading %s at %d (log holds %d..%d): %w", l.tp(), offset, l.logStart, leo, ErrOffsetOutOfRange)
	}
	i, _ := slices.BinarySearchFunc(l.segs, offset, func(s *segment, off int64) int {
		if s.base <= off {
			return -1
		}
		return 1
	})
	for i = max(i-1, 0); i < len(l.segs); i++ {
		s := l.segs[i]
		pos, h, found, err := s.findPosition(offset)
		if err != nil {
			return nil, l.corruption(s, pos, -1, err)
		}
		if !found {
			continue
		}
		n := min(max(int64(maxBytes), int64(h.Size())), s.size()-pos)
		buf := make([]byte, n)
		if _, err := s.log.ReadAt(buf, pos); err != nil {
			return nil, fmt.Errorf("reading %s at %d: %w", s.path(logSuffix), pos, err)
		}
		whole, err := batch.Whole(buf)
		if len(whole) == 0 && err != nil {
			return nil, l.corruption(s, pos, h.BaseOffset, err)
		}
		return whole, nil
	}
	return nil, nil
}

func (l *Log) corruption(s *segment, pos, offset int64, err error) *CorruptionError {
	var be *batch.Error
	if errors.As(err, &be) {
		pos, offset = int64(be.Pos), be.BaseOffset
		if pos < 0 {
			pos = 0
		}
	}
	return &CorruptionError{Topic: l.topic, Partition: l.partition, Segment: s.path(logSuffix), Position: pos, Offset: offset, Err: err}
}
