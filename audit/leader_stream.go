package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// leaderStream fetches a partition's batches from its leader, one request
// ahead of the comparison. It ends at stopAt, at the high watermark (an
// empty answer), on an error, or with its context.
type leaderStream struct {
	v  *verifier
	pm cluster.Partition
	ch chan leaderChunk

	// Owned by the reading goroutine.
	buf []batch.Header
	hw  int64
	eof bool
}

type leaderChunk struct {
	c   cluster.Chunk
	err error
}

// run fetches from offset up to stopAt into s.ch, on its own goroutine,
// and closes s.ch when it ends.
func (s *leaderStream) run(ctx context.Context, offset, stopAt int64) {
	defer close(s.ch)
	send := func(c leaderChunk) bool {
		select {
		case s.ch <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	tp, pm := s.v.tp, s.pm
	retries := 0
	for offset < stopAt {
		p, err := cluster.Fetch(ctx, s.v.opts.Client, tp, pm, offset, s.v.opts.FetchMaxBytes)
		if err == nil {
			err = kerr.ErrorForCode(p.ErrorCode)
			if err != nil {
				err = fmt.Errorf("fetching %s at %d from broker %d: %w", tp, offset, pm.Leader, err)
			}
		}
		if err != nil && wire.RetryAfterMetadata(err) && retries < 5 && ctx.Err() == nil {
			// Leadership moved (wire.RetryAfterMetadata): go on with the
			// leader a fresh Metadata answer names (see retry.go).
			retries++
			if cluster.Backoff(ctx, time.Duration(retries)*200*time.Millisecond) != nil {
				return
			}
			m, merr := cluster.LoadMetadata(ctx, s.v.opts.Client, []string{tp.Topic})
			if merr == nil {
				if npm, lerr := m.Lookup(tp); lerr == nil {
					pm = npm
				}
			}
			continue
		}
		if err != nil {
			send(leaderChunk{err: err})
			return
		}
		c, err := cluster.ChunkOf(tp, p, offset)
		if err != nil {
			send(leaderChunk{err: err})
			return
		}
		if !send(leaderChunk{c: c}) || len(c.Headers) == 0 {
			return
		}
		offset = c.Next
	}
}

// next returns the leader's next batch header; ok is false once the
// leader has no more (high watermark reached).
func (s *leaderStream) next(ctx context.Context) (h batch.Header, ok bool, err error) {
	for len(s.buf) == 0 {
		if s.eof {
			return h, false, nil
		}
		var c leaderChunk
		select {
		case c, ok = <-s.ch:
		case <-ctx.Done():
			return h, false, ctx.Err()
		}
		if !ok {
			s.eof = true
			continue
		}
		if c.err != nil {
			return h, false, c.err
		}
		s.hw = c.c.HighWatermark
		if len(c.c.Headers) == 0 {
			s.eof = true
		}
		s.buf = c.c.Headers
	}
	h, s.buf = s.buf[0], s.buf[1:]
	return h, true, nil
}
