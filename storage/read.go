package storage

import (
	"errors"
	"fmt"
	"io"
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
	return readSegments(l.ident, l.segs, l.logStart, l.leoLocked(), offset, maxBytes)
}

// readSegments is Read over segs, which hold the offsets [start, end).
// It reads no further than a segment's size: bytes a writer adds after it
// are not seen, and a file cut shorter since then ends the read early.
func readSegments(id ident, segs []*segment, start, end, offset int64, maxBytes int) ([]byte, error) {
	if offset < start || offset > end {
		return nil, fmt.Errorf("reading %s at %d (log holds %d..%d): %w", id.tp(), offset, start, end, ErrOffsetOutOfRange)
	}
	i, _ := slices.BinarySearchFunc(segs, offset, func(s *segment, off int64) int {
		if s.base <= off {
			return -1
		}
		return 1
	})
	for i = max(i-1, 0); i < len(segs); i++ {
		s := segs[i]
		pos, h, found, err := s.findPosition(offset)
		if err != nil {
			return nil, id.corruption(s, pos, -1, err)
		}
		if !found {
			continue
		}
		buf := make([]byte, min(max(int64(maxBytes), int64(h.Size())), s.size()-pos))
		n, err := s.log.ReadAt(buf, pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s at %d: %w", s.path(logSuffix), pos, err)
		}
		whole, err := batch.Whole(buf[:n])
		if len(whole) == 0 && err != nil {
			var be *batch.Error
			if errors.As(err, &be) {
				err = shiftErr(err, pos+int64(be.Pos)) // a position in the file, not in buf
			}
			return nil, id.corruption(s, pos, h.BaseOffset, err)
		}
		if len(whole) == 0 {
			return nil, nil
		}
		return whole, nil
	}
	return nil, nil
}
