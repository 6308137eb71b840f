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

// TestRetryTogether: partitions a broker answered UNKNOWN_LEADER_EPOCH (or
// NOT_LEADER_OR_FOLLOWER) in one reply, in the middle of taking over their
// leadership, wake at the same moment on every retry, so the worker asks
// about them all again in one request; their waits grow from Base but
// never past Kafka's replica.fetch.backoff.ms (1 s), so a broker that
// takes seconds to make itself leader is asked again within a second of
// being done. Other errors keep each partition's own jitter.
func TestRetryTogether(t *testing.T) {
	b := BackoffPolicy{Base: 100 * time.Millisecond, Max: 10 * time.Second}
	for _, tc := range []struct {
		name     string
		code     int16
		together bool
	}{
		{"UNKNOWN_LEADER_EPOCH", kerr.UnknownLeaderEpoch.Code, true},
		{"NOT_LEADER_OR_FOLLOWER", kerr.NotLeaderForPartition.Code, true},
		{"UNKNOWN_SERVER_ERROR", kerr.UnknownServerError.Code, false},
		{"FENCED_LEADER_EPOCH", kerr.FencedLeaderEpoch.Code, false}, // a fence waits for metadata instead
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			var ps []*Partition
			for seed := range uint64(8) {
				p := NewPartition(Config{Topic: "t", Partition: int32(seed), Backoff: b, JitterSeed: seed * 7919}, &memLog{leo: 50, epochs: []epochEntry{{1, 0}}})
				if err := p.Step(now, LeaderChange{Leader: 2, LeaderEpoch: 5}); err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			var waits []time.Duration
			for attempt := 1; attempt <= 8; attempt++ {
				wakes := map[time.Time]int{}
				for _, p := range ps {
					var id uint64
					for p.HasReady() {
						rd := p.Ready()
						if r, ok := rd.Request.(*OffsetsForLeaderEpoch); ok {
							id = r.ID
						}
						p.Advance(rd)
					}
					if id == 0 {
						t.Fatalf("attempt %d: no OffsetsForLeaderEpoch sent", attempt)
					}
					if err := p.Step(now, EpochReply{ID: id, ErrorCode: tc.code}); err != nil {
						t.Fatal(err)
					}
					wakes[p.NextWake()]++
				}
				if !tc.together {
					if len(wakes) == 1 {
						t.Fatalf("attempt %d: every partition wakes at once; want each its own jitter", attempt)
					}
					return
				}
				if len(wakes) != 1 {
					t.Fatalf("attempt %d: %d partitions wake at %d different times, want one", attempt, len(ps), len(wakes))
				}
				var at time.Time
				for w := range wakes {
					at = w
				}
				waits = append(waits, at.Sub(now))
				now = at
				for _, p := range ps {
					if err := p.Step(now, Tick{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
				time.Second, time.Second, time.Second, time.Second}
			if fmt.Sprint(waits) != fmt.Sprint(want) {
				t.Fatalf("waits %v, want %v", waits, want)
			}
		})
	}
}
