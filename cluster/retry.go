package cluster

import (
	"context"
	"time"
)

// Backoff waits d or until ctx ends, for a caller that retries what
// wire.RetryAfterMetadata says a moving leadership explains, before it asks
// Metadata again.
func Backoff(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
