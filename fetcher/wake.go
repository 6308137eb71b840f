package fetcher

import (
	"time"

	"github.com/kfollower/kfollower/wire"
)

// tickDue steps Tick into the worker's partitions if a backoff has ended,
// before the worker decides its next request (the hook at the top of
// processAll). The wake timer alone is not enough: when a Fetch answer
// and the timer are both ready, run may take the answer first (select
// picks at random) and send the next Fetch, a long poll, before the timer
// case has stepped the partitions whose wait is over; their retries then
// waited for the next pass, and a Fetch retry for one more long poll.
//
// Then, if epoch queries to this broker are about to go out, the
// partitions waiting for its take-over join them (joinEpochRound); with
// nobody waiting there is nothing to join, so an idle worker skips it.
func (w *worker) tickDue(now time.Time) {
	at, ok := w.nextWake()
	if !ok {
		return
	}
	if !now.Before(at) {
		w.tick(now)
	}
	w.joinEpochRound(now)
}

// limits is the Fetch limits with the long poll cut to end when the
// worker's next Fetch retry is due (nextFetchRetry). A worker has one
// Fetch in the air, so a Fetch retry that falls due during a long poll
// waits for its answer. A broker answers a Fetch at MaxWait with what it
// has (FetchRequest max_wait_ms), so a shorter one costs one more round
// trip and loses nothing. Kafka's replica fetcher waits the whole
// replica.fetch.wait.max.ms instead, the delayed partitions left out of
// its Fetch (AbstractFetcherThread). An epoch query's or a ListOffsets'
// retry goes out beside the Fetch (worker.side), so its backoff does not
// cut the long poll: in BenchmarkScale's leader moves, thousands of
// partitions wait for their new leader's take-over, and each cut Fetch
// was answered empty and every partition stepped again. Never below
// minCutWait: partitions in long, jittered backoffs (a failing leader)
// wake every few milliseconds between them, and each wake would cost a
// Fetch.
//
// While the Manager places partitions it is still opening (start-up, or
// a Metadata answer naming many new ones) the long poll is minCutWait
// too: a partition the worker adopts waits for the Fetch in the air, and
// at 10,000 new partitions the opens go on for seconds, each batch of
// adopted partitions behind a long poll of caught-up ones answered empty
// (about half of BenchmarkScale's start-up). Kafka's replica fetcher has
// the same wait (AbstractFetcherThread.addPartitions wakes only a thread
// backing off), but it is handed a broker's partitions at once.
func (w *worker) limits(now time.Time) wire.FetchLimits {
	lim := w.m.cfg.Limits
	if w.m.placing.Load() {
		lim.MaxWaitMillis = min(lim.MaxWaitMillis, int32(minCutWait/time.Millisecond))
	}
	if at, ok := w.nextFetchRetry(); ok {
		// Rounded up: a long poll that ends before the backoff would be
		// answered and followed by another before the retry.
		d := max(at.Sub(now).Round(time.Millisecond)+time.Millisecond, minCutWait)
		if ms := d / time.Millisecond; ms < time.Duration(lim.MaxWaitMillis) {
			lim.MaxWaitMillis = int32(ms)
		}
	}
	return lim
}

// minCutWait is the shortest long poll limits cuts to: a retry goes out at
// most this late, and a worker long-polls at most 10 times a second while
// backoffs are pending.
const minCutWait = 100 * time.Millisecond
