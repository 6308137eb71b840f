package follower

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Reaction
	}{
		{nil, Proceed},
		{kerr.FencedLeaderEpoch, Fence},
		{kerr.UnknownLeaderEpoch, Retry},
		{kerr.OffsetOutOfRange, OutOfRange},
		{kerr.NotLeaderForPartition, RefreshAndRetry}, // NOT_LEADER_OR_FOLLOWER
		{kerr.LeaderNotAvailable, RefreshAndRetry},
		{kerr.ReplicaNotAvailable, RefreshAndRetry},
		{kerr.UnknownTopicOrPartition, RefreshAndRetry},
		{kerr.UnknownTopicID, RefreshAndRetry},
		{kerr.InconsistentTopicID, RefreshAndRetry},
		{kerr.KafkaStorageError, RefreshAndRetry},
		{kerr.NetworkException, RefreshAndRetry},
		{kerr.RequestTimedOut, RefreshAndRetry},
		{kerr.CorruptMessage, Retry},
		{kerr.OffsetNotAvailable, Retry},
		{kerr.UnknownServerError, Retry},
		{kerr.TopicAuthorizationFailed, Retry},
		{kerr.OffsetMovedToTieredStorage, Retry},
		// Transport failures: lost connection, timeouts, wrapped or not.
		{io.EOF, RefreshAndRetry},
		{errors.New("dial tcp 10.0.0.1:9092: connect: connection refused"), RefreshAndRetry},
		{fmt.Errorf("fetch: %w", kerr.FencedLeaderEpoch), Fence},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for code, want := range map[int16]Reaction{0: Proceed, 74: Fence, 75: Retry, 1: OutOfRange, 6: RefreshAndRetry, 3: RefreshAndRetry, 100: RefreshAndRetry, 2: Retry, 56: RefreshAndRetry, 32767: Retry} {
		if got := ClassifyCode(code); got != want {
			t.Errorf("ClassifyCode(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	b := BackoffPolicy{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	for _, tc := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0, 50 * time.Millisecond},
		{1, 0.5, 75 * time.Millisecond},
		{2, 0, 100 * time.Millisecond},
		{3, 0, 200 * time.Millisecond},
		{4, 0, 400 * time.Millisecond},
		{5, 0, 800 * time.Millisecond}, // d = 1.6s
		{6, 0, time.Second},            // d = 3.2s, capped at 2s: [1s, 2s]
		{1000, 0.999999999, 2 * time.Second},
		{0, 0, 50 * time.Millisecond},   // attempts below 1 count as 1
		{2, -3, 100 * time.Millisecond}, // jitter clamped
		{2, 7, 200 * time.Millisecond},
	} {
		got := b.Delay(tc.attempt, tc.jitter)
		if diff := got - tc.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.attempt, tc.jitter, got, tc.want)
		}
	}
	// Bounded and monotone in its bounds for every attempt and jitter.
	for attempt := 1; attempt < 200; attempt++ {
		for _, j := range []float64{0, 0.3, 0.999} {
			d := b.Delay(attempt, j)
			if d <= 0 || d > b.Max {
				t.Fatalf("Delay(%d, %v) = %v out of (0, %v]", attempt, j, d, b.Max)
			}
		}
	}
	if d := (BackoffPolicy{}).Delay(1, 0); d != DefaultBackoff.Base/2 {
		t.Errorf("zero policy: %v", d)
	}
	for a := range 100 {
		if j := jitterFor(42, a); j < 0 || j >= 1 {
			t.Fatalf("jitterFor = %v", j)
		}
	}
}
