package follower

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var errBadOffsets = errors.New("ListOffsets answer without a usable log start and end")

// Config configures one Partition.
type Config struct {
	Topic     string
	Partition int32
	// DiscardOnGap mirrors Kafka when the leader's log start has moved past
	// our log end (OFFSET_OUT_OF_RANGE, low side): drop our whole log and
	// restart it at the leader's log start (fetchOffsetAndTruncate,
	// kafka-internals.md §3.4). The default keeps the history we hold,
	// reports the gap and continues from the leader's log start.
	DiscardOnGap bool
	// Backoff bounds the waits between retries; zero means DefaultBackoff.
	Backoff BackoffPolicy
	// JitterSeed seeds the backoff jitter; give each partition its own.
	JitterSeed uint64
}

// Partition is the state machine of one followed partition. It is not safe
// for concurrent use: one goroutine (the fetcher that owns the partition)
// calls Step, Ready and Advance. It reads the local log through LocalLog
// and never writes it; storage changes come out as Actions.
//
// The loop, as etcd-io/raft's RawNode:
//
//	p.Step(now, follower.LeaderChange{Leader: 2, LeaderEpoch: 7})
//	for p.HasReady() {
//		rd := p.Ready()
//		// carry out rd.Actions in order (durably), then rd.Events,
//		// then send rd.Request; then:
//		p.Advance(rd)
//	}
//	// ... a reply arrives:
//	p.Step(now, follower.EpochReply{ID: id, Leader: follower.EpochEndOffset{Epoch: 5, EndOffset: 120}})
type Partition struct {
	cfg Config
	log LocalLog

	state  State
	resume State // the state StateBackoff returns to
	leader int32
	epoch  int32 // current leader epoch from metadata, -1 before any
	// fetchedEpoch is the leader epoch of the last successful Fetch reply:
	// the "old" epoch of a TruncationEvent.
	fetchedEpoch int32

	nextID   uint64  // ID of the next request handed out
	inflight Request // the request sent and not yet answered, or nil

	rc recon

	// gapPos is the leader's log start we jumped to after a retention gap
	// while keeping our history; fetches start there (LastFetchedEpoch -1)
	// until the log end passes it. -1: no gap pending.
	gapPos  int64
	lastGap [2]int64 // last reported gap, so a repeat is not reported twice

	oorPos    int64 // the fetch offset that got OFFSET_OUT_OF_RANGE
	oorStreak int   // OFFSET_OUT_OF_RANGE replies since the last good fetch

	hw, highestHW, leaderLogStart int64
	hwEpoch                       int32 // the leader epoch hw was answered in

	attempts int
	wakeAt   time.Time
	lastErr  error

	out Ready // actions, events and the metadata hint not yet handed out
}

// recon is the state of one reconciliation (KIP-101/KIP-279 loop).
type recon struct {
	cause  Cause
	rounds int
	// cap/capEpoch/capped: the virtual truncation so far (see cappedLog).
	cap      int64
	capEpoch int32
	capped   bool
	// oorEnd is the leader's log end from ListOffsets when the
	// reconciliation was started by OFFSET_OUT_OF_RANGE (high side), else -1.
	oorEnd int64
}

// NewPartition returns a partition that waits for a LeaderChange. log is the
// partition's local log; the driver applies the partition's Actions to it.
func NewPartition(cfg Config, log LocalLog) *Partition {
	if cfg.Backoff == (BackoffPolicy{}) {
		cfg.Backoff = DefaultBackoff
	}
	return &Partition{
		cfg:            cfg,
		log:            log,
		state:          StateNoLeader,
		leader:         -1,
		epoch:          -1,
		fetchedEpoch:   -1,
		nextID:         1,
		gapPos:         -1,
		lastGap:        [2]int64{-1, -1},
		oorPos:         -1,
		hw:             -1,
		highestHW:      -1,
		leaderLogStart: -1,
	}
}

// Step feeds one input in. now is the current time, used for backoff only.
// It returns ErrStale for a reply that no longer matches the request in
// flight (discarded) and ErrStopped once the partition has stopped.
func (p *Partition) Step(now time.Time, m Msg) error {
	if p.state == StateStopped {
		return ErrStopped
	}
	switch m := m.(type) {
	case LeaderChange:
		p.onLeaderChange(m)
	case EpochReply:
		return p.onEpochReply(now, m)
	case FetchReply:
		return p.onFetchReply(now, m)
	case OffsetsReply:
		return p.onOffsetsReply(now, m)
	case RequestFailed:
		if p.inflight == nil || p.inflight.RequestID() != m.ID {
			return ErrStale
		}
		p.inflight = nil
		r := Classify(m.Err)
		if r == Proceed || r == OutOfRange {
			r = RefreshAndRetry
		}
		p.fail(now, r, m.Err)
	case ActionFailed:
		// The Ready is abandoned; whatever was done is visible in the log.
		p.out = Ready{}
		if m.Corrupt {
			p.fail(now, Retry, kerr.CorruptMessage)
		} else {
			p.stop(m.Err)
		}
	case Tick:
		switch {
		case p.state == StateBackoff && !now.Before(p.wakeAt):
			p.state, p.wakeAt = p.resume, time.Time{}
		case p.state == StateFenced && !now.Before(p.wakeAt):
			p.wakeAt = time.Time{}
			p.startReconcile(CauseEpochReply, -1)
		}
	case Stop:
		p.stop(nil)
	}
	return nil
}

func (p *Partition) onLeaderChange(m LeaderChange) {
	switch {
	case m.LeaderEpoch < p.epoch:
		return // older metadata than we have
	case m.LeaderEpoch == p.epoch:
		// KAFKA-7164: the same epoch keeps the current state; no second
		// reconciliation. A new broker id under the same epoch only
		// redirects the next request.
		if m.Leader == p.leader {
			return
		}
		p.leader = m.Leader
		p.inflight = nil
		if m.Leader < 0 {
			p.state = StateNoLeader
		} else if p.state == StateNoLeader {
			p.startReconcile(CauseEpochReply, -1)
		}
		return
	}
	p.epoch, p.leader = m.LeaderEpoch, m.Leader
	p.inflight = nil
	p.attempts, p.wakeAt, p.lastErr, p.oorStreak = 0, time.Time{}, nil, 0
	// A new leader may hold history the old one had deleted.
	p.gapPos = -1
	if m.Leader < 0 {
		p.state = StateNoLeader
		p.out.RefreshMetadata = true
		return
	}
	// KIP-101: reconcile with every new leader epoch before the first Fetch.
	p.startReconcile(CauseEpochReply, -1)
}

// startReconcile enters the OffsetsForLeaderEpoch loop. With no local epochs
// there is nothing to ask about: Kafka then truncates to the high watermark
// (truncateToHighWatermark, §3.2), which for us would only drop committed
// data; we fetch from the log end with LastFetchedEpoch -1 instead.
func (p *Partition) startReconcile(cause Cause, oorEnd int64) {
	p.rc = recon{cause: cause, cap: p.log.LogEndOffset(), oorEnd: oorEnd}
	if oorEnd >= 0 {
		p.rc.rounds = 1 // the ListOffsets answer
	}
	if _, ok := p.log.LatestEpoch(); !ok {
		if oorEnd >= 0 {
			// OFFSET_OUT_OF_RANGE high without epochs: Kafka's blind
			// truncation to the leader's end is all there is (§3.4).
			p.finishReconcile(min(oorEnd, p.log.LogEndOffset()), CauseOutOfRangeHigh, UndefinedEpoch)
			return
		}
		p.state = StateFetching
		return
	}
	p.state = StateReconciling
}

// view is the local log as the reconciliation in progress sees it.
func (p *Partition) view() LocalLog {
	if p.state == StateReconciling && p.rc.capped {
		return capLog(p.log, p.rc.cap, p.rc.capEpoch, true)
	}
	return p.log
}

func (p *Partition) takeInflight(id uint64, want State) (Request, bool) {
	if p.state != want || p.inflight == nil || p.inflight.RequestID() != id {
		return nil, false
	}
	r := p.inflight
	p.inflight = nil
	return r, true
}

func (p *Partition) onEpochReply(now time.Time, m EpochReply) error {
	req, ok := p.takeInflight(m.ID, StateReconciling)
	if !ok {
		return ErrStale
	}
	if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
		r := Classify(err)
		if r == OutOfRange {
			r = Retry // not an answer OffsetsForLeaderEpoch gives
		}
		p.fail(now, r, err)
		return nil
	}
	p.attempts, p.lastErr = 0, nil
	p.checkEpochAnswer(req.(*OffsetsForLeaderEpoch), m.Leader)
	p.rc.rounds++
	p.decide(m.Leader)
	return nil
}

// checkEpochAnswer runs the conformance checks on an OffsetsForLeaderEpoch
// answer. They only report; the decision is the same either way.
func (p *Partition) checkEpochAnswer(q *OffsetsForLeaderEpoch, a EpochEndOffset) {
	asked := fmt.Sprintf("asked epoch %d with current leader epoch %d, leader %d answered (%d, %d)",
		q.LeaderEpoch, q.CurrentLeaderEpoch, q.Leader, a.Epoch, a.EndOffset)
	if a.Epoch == UndefinedEpoch && a.EndOffset == UndefinedOffset {
		if q.LeaderEpoch >= 0 && q.LeaderEpoch <= q.CurrentLeaderEpoch {
			p.conform(CheckUndefinedAnswer, asked)
		}
		return
	}
	if a.Epoch > q.LeaderEpoch {
		p.conform(CheckEpochAnswer, asked+": an epoch above the one asked")
		return
	}
	// An answer (R, first start) for R below the leader's first epoch names
	// an epoch the leader does not hold (§1.5), so only a floor entry
	// (below R) or the leader's current epoch, answered with its log end,
	// is evidence about that epoch.
	if a.Epoch == q.LeaderEpoch && a.Epoch != q.CurrentLeaderEpoch {
		return
	}
	// Our first batch of the answered epoch, when our log still starts
	// before it (retention moves a cache entry's start to the log start).
	view := p.view()
	if found, _ := view.EndOffsetForEpoch(a.Epoch); found != a.Epoch {
		return
	}
	if start, ok := p.epochStart(a.Epoch); ok && start > view.LogStartOffset() && a.EndOffset <= start {
		p.conform(CheckEpochAnswer, fmt.Sprintf("%s, but we hold committed batches of epoch %d from offset %d", asked, a.Epoch, start))
	}
}

// epochStart finds where the local cache says epoch starts: the end of
// the largest epoch below it, probed through LocalLog, or the log start.
func (p *Partition) epochStart(epoch int32) (int64, bool) {
	view := p.view()
	if epoch == 0 {
		return view.LogStartOffset(), true
	}
	// endOffsetFor(epoch-1) is the start of the next higher entry, which
	// is epoch itself when it is in the cache.
	found, end := view.EndOffsetForEpoch(epoch - 1)
	if end < 0 {
		return 0, false
	}
	if found == epoch-1 || found < epoch {
		return end, true
	}
	return 0, false
}

// conform reports a failed conformance check.
func (p *Partition) conform(c Check, evidence string) {
	p.out.Events = append(p.out.Events, &ConformanceEvent{
		Topic: p.cfg.Topic, Partition: p.cfg.Partition, Check: c, LeaderEpoch: p.epoch, Evidence: evidence,
	})
}

// decide applies one leader answer to the reconciliation in progress.
func (p *Partition) decide(leader EpochEndOffset) {
	t := Decide(p.view(), leader)
	if !t.Complete {
		// KIP-279 step 3: truncate to the end of our largest epoch below
		// the one named (virtually: storage is touched once, at the end)
		// and ask about that epoch next.
		p.rc.cap, p.rc.capEpoch, p.rc.capped = t.Offset, t.NextEpoch, true
		p.state = StateReconciling
		return
	}
	cause, agreed := p.rc.cause, UndefinedEpoch
	switch t.Rule {
	case RuleEpochAgreed:
		agreed = leader.Epoch
	case RuleNoInformation:
		if p.rc.oorEnd >= 0 {
			// We were here because the leader's log ends below our fetch
			// offset and the leader cannot say where our epochs end:
			// Kafka's truncation to the leader's end (§3.4) is the best
			// there is.
			t.Offset = min(t.Offset, p.rc.oorEnd)
			cause = CauseOutOfRangeHigh
		}
	}
	p.finishReconcile(t.Offset, cause, agreed)
}

// finishReconcile truncates to target if that removes anything, reports it
// as loss, and goes on fetching.
func (p *Partition) finishReconcile(target int64, cause Cause, agreed int32) {
	leo, start := p.log.LogEndOffset(), p.log.LogStartOffset()
	if target < leo {
		// Everything we hold was at or below a leader's high watermark, so
		// [target, leo) is committed data the current leader does not
		// have: keep it in lost+found, then cut (DESIGN.md promise 2).
		from := max(target, start)
		local, ok := p.log.LatestEpoch()
		if !ok {
			local = UndefinedEpoch
		}
		if from < leo {
			p.out.Actions = append(p.out.Actions, &MoveToLostFound{From: from, To: leo})
		}
		if target < start {
			// UnifiedLog.truncateTo: below the first segment it becomes
			// truncateFullyAndStartAt(target).
			p.out.Actions = append(p.out.Actions, &TruncateFullyAndStartAt{Offset: target})
		} else {
			p.out.Actions = append(p.out.Actions, &TruncateTo{Offset: target})
		}
		if from < leo {
			p.out.Events = append(p.out.Events, &TruncationEvent{
				Topic:                p.cfg.Topic,
				Partition:            p.cfg.Partition,
				OldLeaderEpoch:       p.fetchedEpoch,
				NewLeaderEpoch:       p.epoch,
				From:                 from,
				To:                   leo,
				LocalEpoch:           local,
				AgreedEpoch:          agreed,
				Roundtrips:           p.rc.rounds,
				HighestHighWatermark: p.highestHW,
				Cause:                cause,
			})
		}
	}
	p.rc = recon{}
	p.state = StateFetching
}

func (p *Partition) onFetchReply(now time.Time, m FetchReply) error {
	req, ok := p.takeInflight(m.ID, StateFetching)
	if !ok {
		return ErrStale
	}
	f := req.(*Fetch)
	if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
		r := Classify(err)
		if r == OutOfRange {
			// §3.4: which side we are on comes from ListOffsets; the
			// error reply's high watermark and log start are -1.
			p.oorPos = f.Offset
			p.oorStreak++
			if p.oorStreak > 1 {
				// The last OFFSET_OUT_OF_RANGE was dealt with and the
				// next fetch hit it again: back off before asking again,
				// so that a leader whose answers do not add up is not
				// hammered (kafka-internals.md §10.9).
				p.fail(now, Retry, err)
				p.resume = StateOutOfRange
				return nil
			}
			p.state = StateOutOfRange
			return nil
		}
		p.fail(now, r, err)
		return nil
	}
	p.attempts, p.lastErr, p.oorStreak = 0, nil, 0
	if m.Diverging.Epoch >= 0 {
		// §3.3: the leader's history for our LastFetchedEpoch differs.
		// Records, high watermark and log start of this reply are not
		// applied (KAFKA-14704: a high watermark applied before truncating
		// exposed uncommitted data). The same table as for
		// OffsetsForLeaderEpoch decides; where Kafka would keep fetching
		// with a smaller LastFetchedEpoch while the answer names an epoch
		// we lack, we continue with OffsetsForLeaderEpoch rounds, which the
		// leader answers from the same endOffsetFor, so that the whole
		// truncation is one cut and one event.
		p.rc = recon{cause: CauseDivergingEpoch, rounds: 1, cap: p.log.LogEndOffset(), oorEnd: -1}
		p.state = StateReconciling
		p.decide(m.Diverging)
		return nil
	}
	if m.HighWatermark >= 0 && p.hw >= 0 && p.hwEpoch == p.epoch && m.HighWatermark < p.hw {
		p.conform(CheckHighWatermarkBackwards, fmt.Sprintf("leader %d in epoch %d answered high watermark %d after %d",
			f.Leader, p.epoch, m.HighWatermark, p.hw))
	}
	p.fetchedEpoch = p.epoch
	if m.HighWatermark >= 0 {
		p.hw, p.hwEpoch = m.HighWatermark, p.epoch
		p.highestHW = max(p.highestHW, m.HighWatermark)
	}
	if m.LogStartOffset >= 0 {
		p.leaderLogStart = m.LogStartOffset
	}
	if len(m.Records) > 0 {
		p.out.Actions = append(p.out.Actions, &Append{ID: m.ID, Offset: f.Offset, Records: m.Records})
	}
	return nil
}

func (p *Partition) onOffsetsReply(now time.Time, m OffsetsReply) error {
	if _, ok := p.takeInflight(m.ID, StateOutOfRange); !ok {
		return ErrStale
	}
	if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
		r := Classify(err)
		if r == OutOfRange {
			r = Retry
		}
		p.fail(now, r, err)
		return nil
	}
	if m.LogStartOffset < 0 || m.LogEndOffset < m.LogStartOffset {
		// Validate at the gateway: an answer we cannot place is retried
		// rather than acted on.
		p.fail(now, Retry, errBadOffsets)
		return nil
	}
	pos := p.oorPos
	p.leaderLogStart = m.LogStartOffset
	switch {
	case m.LogStartOffset > pos:
		// Low: the leader deleted [pos, start) before we copied it
		// (retention or DeleteRecords while we were away).
		p.attempts, p.lastErr = 0, nil
		p.onGap(pos, m.LogStartOffset)
		p.state = StateFetching
	case m.LogEndOffset < pos:
		// High: the leader's log ends below our fetch offset. Kafka
		// truncates straight to the leader's end, admitting this "can
		// leave mismatched logs" (§3.4). We reconcile by epochs instead,
		// which finds the exact divergence, and fall back to the leader's
		// end only when the epochs give no information.
		p.attempts, p.lastErr = 0, nil
		p.gapPos = -1
		p.startReconcile(CauseEpochReply, m.LogEndOffset)
	default:
		// In range: the leader could not place our LastFetchedEpoch
		// (Partition.readRecords step 2, §3.3; KAFKA-15608) or the log
		// moved meanwhile. Kafka refetches from max(start, LEO) at once;
		// we back off first so a leader that stays confused is not
		// hammered.
		p.fail(now, Retry, kerr.OffsetOutOfRange)
		p.resume = StateFetching
	}
	return nil
}

// onGap handles the leader's log start moving past our fetch position pos.
func (p *Partition) onGap(pos, start int64) {
	ev := &GapEvent{
		Topic:       p.cfg.Topic,
		Partition:   p.cfg.Partition,
		LeaderEpoch: p.epoch,
		From:        pos,
		To:          start,
	}
	leo, logStart := p.log.LogEndOffset(), p.log.LogStartOffset()
	switch {
	case p.cfg.DiscardOnGap:
		// Kafka's truncateFullyAndStartAt(leaderStartOffset). What we drop
		// was committed, so it still goes to lost+found first.
		if leo > logStart {
			p.out.Actions = append(p.out.Actions, &MoveToLostFound{From: logStart, To: leo})
			ev.Discarded, ev.DiscardedFrom, ev.DiscardedTo = true, logStart, leo
		}
		p.out.Actions = append(p.out.Actions, &TruncateFullyAndStartAt{Offset: start})
		p.gapPos = -1
	case leo == logStart:
		// Nothing held: simply start the empty log where the leader's
		// starts.
		p.out.Actions = append(p.out.Actions, &TruncateFullyAndStartAt{Offset: start})
		p.gapPos = -1
	default:
		// Keep our history; the next batches land after a hole, as they do
		// after compaction.
		p.gapPos = start
	}
	if p.lastGap != [2]int64{pos, start} || ev.Discarded {
		p.out.Events = append(p.out.Events, ev)
		p.lastGap = [2]int64{pos, start}
	}
}

// fail reacts to an error reply or a failed request.
func (p *Partition) fail(now time.Time, r Reaction, err error) {
	p.inflight = nil
	p.lastErr = err
	switch r {
	case Fence:
		// KIP-320 / Kafka's onPartitionFenced: the broker knows a newer
		// epoch than ours, so new metadata should bring it. Unlike a broker
		// follower, which the controller tells of every new epoch, we only
		// learn it from Metadata, which may come from a lagging broker or
		// the fence may have come from a stale one: after a backoff we
		// reconcile again with the epoch we have rather than wait forever.
		p.state = StateFenced
		p.out.RefreshMetadata = true
		p.attempts++
		p.wakeAt = now.Add(p.cfg.Backoff.Delay(p.attempts, jitterFor(p.cfg.JitterSeed, p.attempts)))
	default:
		if r == RefreshAndRetry {
			p.out.RefreshMetadata = true
		}
		p.attempts++
		if p.state != StateBackoff {
			p.resume = p.state
		}
		p.state = StateBackoff
		p.wakeAt = now.Add(p.cfg.Backoff.Delay(p.attempts, jitterFor(p.cfg.JitterSeed, p.attempts)))
	}
}

func (p *Partition) stop(err error) {
	p.state = StateStopped
	p.inflight = nil
	p.lastErr = err
	p.out = Ready{}
	p.wakeAt = time.Time{}
}

// HasReady reports whether Ready has something to hand out.
func (p *Partition) HasReady() bool {
	return !p.out.Empty() || p.wantRequest()
}

func (p *Partition) wantRequest() bool {
	if p.inflight != nil || p.leader < 0 || len(p.out.Actions) > 0 {
		return false
	}
	switch p.state {
	case StateReconciling, StateFetching, StateOutOfRange:
		return true
	}
	return false
}

// Ready returns the work to do now. It changes nothing; Advance confirms it.
// Between Ready and Advance the driver must not call Step.
func (p *Partition) Ready() Ready {
	rd := p.out
	rd.Actions = append([]Action(nil), p.out.Actions...)
	rd.Events = append([]Event(nil), p.out.Events...)
	if p.wantRequest() {
		rd.Request = p.request(p.nextID)
	}
	return rd
}

// request builds the request for the current state from the log as it is.
func (p *Partition) request(id uint64) Request {
	switch p.state {
	case StateReconciling:
		epoch, _ := p.view().LatestEpoch()
		return &OffsetsForLeaderEpoch{ID: id, Leader: p.leader, CurrentLeaderEpoch: p.epoch, LeaderEpoch: epoch}
	case StateOutOfRange:
		return &ListOffsets{ID: id, Leader: p.leader, CurrentLeaderEpoch: p.epoch}
	default:
		off, last := p.fetchPosition()
		return &Fetch{
			ID:                 id,
			Leader:             p.leader,
			Offset:             off,
			CurrentLeaderEpoch: p.epoch,
			LastFetchedEpoch:   last,
			LogStartOffset:     p.log.LogStartOffset(),
		}
	}
}

// fetchPosition is where the next Fetch starts and the epoch of the batch
// before it: our log end and latest epoch (as Kafka sets lastFetchedEpoch
// after truncation and append, §3.3), or after a kept gap the leader's log
// start and -1, since no batch of ours precedes it.
func (p *Partition) fetchPosition() (int64, int32) {
	leo := p.log.LogEndOffset()
	if p.gapPos > leo {
		return p.gapPos, UndefinedEpoch
	}
	e, ok := p.log.LatestEpoch()
	if !ok {
		e = UndefinedEpoch
	}
	return leo, e
}

// Advance confirms that rd, the last Ready, was carried out: its actions are
// durable, its events delivered and its request sent.
func (p *Partition) Advance(rd Ready) {
	p.out.Actions = p.out.Actions[min(len(rd.Actions), len(p.out.Actions)):]
	p.out.Events = p.out.Events[min(len(rd.Events), len(p.out.Events)):]
	if rd.RefreshMetadata {
		p.out.RefreshMetadata = false
	}
	if len(p.out.Actions) == 0 {
		p.out.Actions = nil
	}
	if len(p.out.Events) == 0 {
		p.out.Events = nil
	}
	if p.gapPos >= 0 && p.log.LogEndOffset() >= p.gapPos {
		p.gapPos = -1 // the first batches after the gap are in
	}
	if rd.Request != nil && rd.Request.RequestID() == p.nextID && p.state != StateStopped {
		p.inflight = rd.Request
		p.nextID++
	}
}

// NextWake returns when the partition wants a Tick (zero: no timer needed).
func (p *Partition) NextWake() time.Time {
	if p.state == StateBackoff || p.state == StateFenced {
		return p.wakeAt
	}
	return time.Time{}
}

// InFlight returns the request handed out by the last Advance and not yet
// answered, or nil.
func (p *Partition) InFlight() Request { return p.inflight }

// State returns the current state.
func (p *Partition) State() State { return p.state }

// Status returns a snapshot for status pages and metrics.
func (p *Partition) Status() Status {
	off, _ := p.fetchPosition()
	s := Status{
		Topic:                p.cfg.Topic,
		Partition:            p.cfg.Partition,
		State:                p.state,
		Leader:               p.leader,
		LeaderEpoch:          p.epoch,
		FetchOffset:          off,
		LogEndOffset:         p.log.LogEndOffset(),
		HighWatermark:        p.hw,
		HighestHighWatermark: p.highestHW,
		LeaderLogStartOffset: p.leaderLogStart,
		Attempts:             p.attempts,
		WakeAt:               p.NextWake(),
		LastError:            p.lastErr,
	}
	if p.state == StateBackoff {
		s.Resume = p.resume
	}
	return s
}
