package fetcher

import "time"

// tickDue steps Tick into the worker's partitions if a backoff has ended,
// before the worker decides its next request (the hook at the top of
// processAll). The wake timer alone is not enough: when a Fetch answer
// and the timer are both ready, run may take the answer first (select
// picks at random) and send the next Fetch, a long poll, before the timer
// case has stepped the partitions whose wait is over; their retries (the
// OffsetsForLeaderEpoch round of every partition a broker answered
// UNKNOWN_LEADER_EPOCH while taking over, follower.Together) then waited
// for one more long poll, every round of a leader move.
func (w *worker) tickDue(now time.Time) {
	if at, ok := w.nextWake(); ok && !now.Before(at) {
		w.tick(now)
	}
}
