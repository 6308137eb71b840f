package fetcher

import (
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRetryBeforeNextFetch: a backoff that ended while a Fetch was in the
// air is stepped before the worker sends its next request, so the epoch
// query it was waiting for goes out at once instead of after one more
// long poll. The story driver steps a worker as run does after an answer
// (processAll, then send); the clock moves past the backoff without a
// tick, as when run takes the Fetch answer before the timer case.
func TestRetryBeforeNextFetch(t *testing.T) {
	e := newDriverEnv(t)
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "wake_test", cmd, args, input) }
	step("metadata", "", "t-0 leader=1 epoch=1\nt-1 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5\nt-1 records=0-4 epoch=1 hw=5")
	if out := step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=2 epoch=2"); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0") {
		t.Fatalf("no epoch query to the new leader:\n%s", out)
	}
	// Broker 2 has not yet made itself leader of t-0: t-0 backs off,
	// t-1 reconciles and long-polls.
	if out := step("reply", "broker=2", "t-0 error=UNKNOWN_LEADER_EPOCH\nt-1 epoch=1 end=5"); !strings.Contains(out, "broker 2 <- Fetch t-1@5") {
		t.Fatalf("t-1 does not fetch after reconciling:\n%s", out)
	}
	e.now = e.now.Add(time.Second) // t-0's backoff is over; no tick
	out := step("reply", "broker=2", "t-1 hw=5")
	if !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0") {
		t.Fatalf("after the Fetch answer, t-0's retry did not go next:\n%s", out)
	}
}

// TestLongPollEndsWithBackoff: a Fetch sent while a partition backs off
// long-polls no longer than the backoff has left, so the retry is not
// held behind the Fetch in the air; with no backoff it waits the whole
// MaxWait.
func TestLongPollEndsWithBackoff(t *testing.T) {
	e := newDriverEnv(t)
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "wake_test", cmd, args, input) }
	maxWait := func(broker int32) int32 {
		t.Helper()
		r, ok := e.inAir[broker].req.(*kmsg.FetchRequest)
		if !ok {
			t.Fatalf("broker %d has %T in the air, want a Fetch", broker, e.inAir[broker].req)
		}
		return r.MaxWaitMillis
	}
	step("metadata", "", "t-0 leader=1 epoch=1\nt-1 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5\nt-1 records=0-4 epoch=1 hw=5")
	if got, want := maxWait(1), wire.DefaultFetchLimits.MaxWaitMillis; got != want {
		t.Errorf("with no backoff, the long poll waits %d ms, want MaxWait %d", got, want)
	}
	step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=2 epoch=2")
	if out := step("reply", "broker=2", "t-0 error=UNKNOWN_LEADER_EPOCH\nt-1 epoch=1 end=5"); !strings.Contains(out, "broker 2 <- Fetch t-1@5") {
		t.Fatalf("t-1 does not fetch after reconciling:\n%s", out)
	}
	var at time.Time
	for _, w := range e.workers() {
		if w.id == 2 {
			at, _ = w.nextWake()
		}
	}
	if at.IsZero() {
		t.Fatal("t-0 does not back off after UNKNOWN_LEADER_EPOCH")
	}
	left := at.Sub(e.now)
	got := time.Duration(maxWait(2)) * time.Millisecond
	if got < left || got > max(left+2*time.Millisecond, minCutWait) || got >= time.Duration(wire.DefaultFetchLimits.MaxWaitMillis)*time.Millisecond {
		t.Errorf("t-1's long poll waits %v while t-0's backoff has %v left: want it to end with the backoff", got, left)
	}
}

// TestEpochRetriesJoin: partitions one broker answered
// UNKNOWN_LEADER_EPOCH at different moments retry in one request. t-0 and
// then t-1 and t-2 move to broker 2 in two Metadata answers, so they are
// asked in two requests, each answered on its own: on their own backoff
// timers (follower.Together) t-0 and t-1 would retry 60 ms apart, in two
// requests again, every round of the take-over. When t-0's retry falls
// due, t-1, waiting for the same broker, joins it (follower.EpochRound);
// t-2, whose backoff is its own (UNKNOWN_SERVER_ERROR, jittered, at least
// 50 ms from 60 ms), does not.
func TestEpochRetriesJoin(t *testing.T) {
	e := newDriverEnv(t)
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "wake_test", cmd, args, input) }
	step("metadata", "", "t-0 leader=1 epoch=1\nt-1 leader=1 epoch=1\nt-2 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5\nt-1 records=0-4 epoch=1 hw=5\nt-2 records=0-4 epoch=1 hw=5")
	if out := step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=1 epoch=1\nt-2 leader=1 epoch=1"); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0 epoch=1 fence=2\n") {
		t.Fatalf("no epoch query of t-0 to its new leader:\n%s", out)
	}
	// t-1 and t-2 are handed to broker 2 while t-0's query is in the air.
	step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=2 epoch=2\nt-2 leader=2 epoch=2")
	if out := step("reply", "broker=2", "t-0 error=UNKNOWN_LEADER_EPOCH"); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-1 epoch=1 fence=2, t-2 epoch=1 fence=2\n") {
		t.Fatalf("the first epoch query of t-1 and t-2 does not go next:\n%s", out)
	}
	step("tick", "advance=60ms", "")
	step("reply", "broker=2", "t-1 error=UNKNOWN_LEADER_EPOCH\nt-2 error=UNKNOWN_SERVER_ERROR")
	// t-0's 100 ms are over; t-1 has 60 ms left, t-2 at least 10.
	out := step("tick", "advance=40ms", "")
	if !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0 epoch=1 fence=2, t-1 epoch=1 fence=2\n") {
		t.Fatalf("t-0's retry and t-1's, both waiting for broker 2's take-over, are not one request:\n%s", out)
	}
}
