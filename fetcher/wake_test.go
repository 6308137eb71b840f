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
// to fetch again long-polls no longer than the backoff has left, so the
// retry is not held behind the Fetch in the air; with no backoff, or one
// whose retry is an epoch query (it goes beside the Fetch, on the side
// slot), it waits the whole MaxWait.
func TestLongPollEndsWithBackoff(t *testing.T) {
	e := newDriverEnv(t)
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "wake_test", cmd, args, input) }
	maxWait := func(broker int32) time.Duration {
		t.Helper()
		r, ok := e.inAir[airKey{broker: broker}].req.(*kmsg.FetchRequest)
		if !ok {
			t.Fatalf("broker %d has %T in the air, want a Fetch", broker, e.inAir[airKey{broker: broker}].req)
		}
		return time.Duration(r.MaxWaitMillis) * time.Millisecond
	}
	full := time.Duration(wire.DefaultFetchLimits.MaxWaitMillis) * time.Millisecond
	wakeLeft := func(broker int32) time.Duration {
		t.Helper()
		for _, w := range e.workers() {
			if at, ok := w.nextWake(); ok && w.id == broker {
				return at.Sub(e.now)
			}
		}
		t.Fatalf("no partition of broker %d backs off", broker)
		return 0
	}
	step("metadata", "", "t-0 leader=1 epoch=1\nt-1 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5\nt-1 records=0-4 epoch=1 hw=5")
	if got := maxWait(1); got != full {
		t.Errorf("with no backoff, the long poll waits %v, want MaxWait %v", got, full)
	}
	// t-0's Fetch fails: it backs off to fetch again; t-1 long-polls.
	if out := step("reply", "broker=1", "t-0 error=UNKNOWN_SERVER_ERROR\nt-1 hw=5"); !strings.Contains(out, "broker 1 <- Fetch t-1@5") {
		t.Fatalf("t-1 does not fetch on:\n%s", out)
	}
	left := wakeLeft(1)
	if got := maxWait(1); got < left || got > max(left+2*time.Millisecond, minCutWait) || got >= full {
		t.Errorf("t-1's long poll waits %v while t-0's Fetch retry is %v away: want it to end with the backoff", got, left)
	}

	// An epoch query's backoff does not cut it.
	step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=2 epoch=2")
	if out := step("reply", "broker=2 side", "t-0 error=UNKNOWN_LEADER_EPOCH\nt-1 epoch=1 end=5"); !strings.Contains(out, "broker 2 <- Fetch t-1@5") {
		t.Fatalf("t-1 does not fetch after reconciling:\n%s", out)
	}
	wakeLeft(2) // t-0 backs off
	if got := maxWait(2); got != full {
		t.Errorf("t-1's long poll waits %v while t-0 waits to ask its epoch again beside it: want MaxWait %v", got, full)
	}
}

// TestEpochRetriesJoin: the partitions one broker answered
// UNKNOWN_LEADER_EPOCH at different moments go out in one request. t-0
// and t-2 move to broker 2 first; t-1 follows in a later Metadata answer,
// while their query is in the air. When it lands, t-0, which the broker
// has not yet taken over, joins t-1's first query instead of waiting on
// its own timer to go alone, 100 ms later, and every round after
// (follower.EpochRound); t-2, whose backoff is its own
// (UNKNOWN_SERVER_ERROR, jittered), does not. Then t-0 and t-1, answered
// so together but at their second and first attempt, would wait 200 and
// 100 ms: when t-1's retry falls due, t-0 joins it.
func TestEpochRetriesJoin(t *testing.T) {
	e := newDriverEnv(t)
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "wake_test", cmd, args, input) }
	step("metadata", "", "t-0 leader=1 epoch=1\nt-1 leader=1 epoch=1\nt-2 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5\nt-1 records=0-4 epoch=1 hw=5\nt-2 records=0-4 epoch=1 hw=5")
	if out := step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=1 epoch=1\nt-2 leader=2 epoch=2"); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0 epoch=1 fence=2, t-2 epoch=1 fence=2\n") {
		t.Fatalf("no epoch query of t-0 and t-2 to their new leader:\n%s", out)
	}
	step("metadata", "", "t-0 leader=2 epoch=2\nt-1 leader=2 epoch=2\nt-2 leader=2 epoch=2")
	out := step("reply", "broker=2", "t-0 error=UNKNOWN_LEADER_EPOCH\nt-2 error=UNKNOWN_SERVER_ERROR")
	if !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0 epoch=1 fence=2, t-1 epoch=1 fence=2\n") {
		t.Fatalf("t-0, waiting for broker 2's take-over, does not join t-1's first query (or t-2, waiting for its own reason, does):\n%s", out)
	}
	step("reply", "broker=2", "t-0 error=UNKNOWN_LEADER_EPOCH\nt-1 error=UNKNOWN_LEADER_EPOCH")
	// t-2's jittered wait (at most 100 ms) is over too by then.
	out = step("tick", "advance=100ms", "")
	if !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0 epoch=1 fence=2, t-1 epoch=1 fence=2, t-2 epoch=1 fence=2\n") {
		t.Fatalf("t-1's retry falls due and t-0, with 100 ms of its wait left, does not join it:\n%s", out)
	}
}
