package follower

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config configures one Partition.
type Config struct {
	Topic     string
	Partition int32
	// DiscardOnGap mirrors Kafka when the leader's log start has moved past
	// our log end (OFFSET_OUT_OF_RANGE, low side): drop our whole log and
	// restart it at the leader's log start
	// (AbstractFetcherThread.fetchOffsetAndTruncate). The default keeps the
	// history we hold, reports the gap and continues from the leader's log
	// start.
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
	// storageFails counts storage failures since storage last carried out
	// an action: the backoff of StateStorageBackoff grows with it, and a
	// reconciliation that succeeds between two failures does not reset it.
	storageFails int
	wakeAt       time.Time
	lastErr      error

	out Ready // actions, events and the metadata hint not yet handed out
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
		switch {
		case m.Corrupt:
			p.fail(now, Retry, kerr.CorruptMessage)
		case m.Transient:
			p.storageFail(now, m.Err)
		default:
			p.stop(m.Err)
		}
	case Tick:
		switch {
		case p.state == StateBackoff && !now.Before(p.wakeAt):
			p.state, p.wakeAt = p.resume, time.Time{}
		case p.state == StateFenced && !now.Before(p.wakeAt):
			p.wakeAt = time.Time{}
			p.startReconcile(CauseEpochReply, -1)
		case p.state == StateStorageBackoff && !now.Before(p.wakeAt):
			// The driver has reopened the log: start over from it as it
			// now is, as for a new leader epoch.
			p.wakeAt, p.lastErr = time.Time{}, nil
			if p.leader < 0 {
				p.state = StateNoLeader
				p.out.RefreshMetadata = true
			} else {
				p.startReconcile(CauseEpochReply, -1)
			}
		}
	case EpochRound:
		if p.JoinsEpochRound(m.Leader) {
			// As at the backoff's end (Tick): the same request again,
			// with the attempts so far, so its next wait after a failure
			// is the one it would have had.
			p.state, p.wakeAt = p.resume, time.Time{}
		}
	case Stop:
		p.stop(nil)
	}
	return nil
}

// JoinsEpochRound reports whether stepping EpochRound{Leader: leader}
// would end this partition's wait: it backs off after an error its broker
// gives every partition it has not yet taken over (Together), to ask leader
// about its epoch again. A partition whose leader or leader epoch changed
// since is no longer waiting (a new epoch starts a new reconciliation; a
// new broker under the same epoch is asked by its own round), nor is one
// whose wait has another reason (jittered: an error of its own).
func (p *Partition) JoinsEpochRound(leader int32) bool {
	return p.state == StateBackoff && p.resume == StateReconciling && p.leader == leader && p.leader >= 0 && Together(p.lastErr)
}

func (p *Partition) onLeaderChange(m LeaderChange) {
	if p.state == StateStorageBackoff {
		// Noted, not acted on: the log is being reopened. The
		// reconciliation with this leader starts when the backoff ends.
		if m.LeaderEpoch >= p.epoch || (m.LeaderEpoch < 0 && m.Leader != p.leader) {
			if m.LeaderEpoch != p.epoch {
				p.gapPos = -1 // a new leader may hold history the old one had deleted
			}
			p.epoch, p.leader = m.LeaderEpoch, m.Leader
		}
		return
	}
	if m.LeaderEpoch < 0 && m.Leader >= 0 && m.Leader != p.leader {
		// Metadata without a leader epoch (a broker before Metadata v7, or
		// one that does not report epochs) naming another broker. Every
		// election bumps the epoch (Partition.makeLeader), so another
		// leader is a new epoch we cannot see, not the same-epoch
		// redirect of KAFKA-7164: reconcile with it as with a higher
		// epoch. Our epoch becomes unknown too, so the requests go out
		// unfenced (CurrentLeaderEpoch -1 skips the KIP-320 check,
		// docs/kafka.md §6.1) instead of being fenced by an epoch the new
		// leader may have left behind.
		p.newLeaderEpoch(m)
		return
	}
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
	p.newLeaderEpoch(m)
}

// newLeaderEpoch starts over with the leader of a new epoch: reconcile with
// it (KIP-101) before the first Fetch, or wait for one.
func (p *Partition) newLeaderEpoch(m LeaderChange) {
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

func (p *Partition) takeInflight(id uint64, want State) (Request, bool) {
	if p.state != want || p.inflight == nil || p.inflight.RequestID() != id {
		return nil, false
	}
	r := p.inflight
	p.inflight = nil
	return r, true
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
			// Which side we are on comes from ListOffsets, as in
			// fetchOffsetAndTruncate; the error reply's high watermark and
			// log start are -1.
			p.oorPos = f.Offset
			p.oorStreak++
			if p.oorStreak > 1 {
				// The last OFFSET_OUT_OF_RANGE was dealt with and the
				// next fetch hit it again: back off before asking again,
				// so that a leader whose answers do not add up is not
				// hammered (KAFKA-15608: a leader that cannot place our
				// last fetched epoch answers the same every time;
				// docs/kafka.md §7.3).
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
	if m.Diverging.Epoch >= 0 {
		// Truncate-on-fetch (the leader's Partition.readRecords): the
		// leader's history for our LastFetchedEpoch differs.
		p.checkDiverging(f, m.Diverging)
		if t := Decide(p.log, m.Diverging); t.Complete && t.Offset >= p.log.LogEndOffset() {
			// An answer that cuts nothing leaves the next Fetch the
			// same as this one, which the leader would answer the same
			// at once (it answers a diverging partition without the long
			// poll, docs/kafka.md §5.1): back off first, bounded and
			// exponential, so a broker that answers so is not hammered.
			// Only an answer the protocol rules out gets here (epoch
			// above our last fetched one, or an end at or past our fetch
			// offset), which checkDiverging reported.
			p.fail(now, Retry, errNoDivergence)
			return nil
		}
		p.attempts, p.lastErr, p.oorStreak = 0, nil, 0
		// Records, high watermark and log start of this reply are not
		// applied (KAFKA-14704: a high watermark applied before truncating
		// exposed uncommitted data). The same table as for
		// OffsetsForLeaderEpoch decides; where Kafka would keep fetching
		// with a smaller LastFetchedEpoch while the answer names an epoch
		// we lack, we continue with OffsetsForLeaderEpoch rounds, which the
		// leader answers from the same endOffsetFor, so that the whole
		// truncation is one cut and one event.
		p.rc = recon{cause: CauseDivergingEpoch, rounds: 1, capEnd: p.log.LogEndOffset(), oorEnd: -1}
		p.state = StateReconciling
		p.decide(m.Diverging)
		return nil
	}
	p.attempts, p.lastErr, p.oorStreak = 0, nil, 0
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
		p.out.Actions = append(p.out.Actions, &Append{ID: m.ID, Offset: f.Offset, CurrentLeaderEpoch: f.CurrentLeaderEpoch, Records: m.Records})
	}
	return nil
}

// Unchanged reports whether stepping m would change nothing but answer
// the Fetch in flight: m is that Fetch's reply, a success with no records,
// no DivergingEpoch, and the high watermark and log start already known in
// this leader epoch, after a success (no retry, error or
// OFFSET_OUT_OF_RANGE streak pending). The Fetch the partition would then
// hand out asks for exactly what the one in flight asked for, from the log
// as it is, so a driver may keep that Fetch in flight, sending it again
// under the same ID, instead of stepping m: an idle long poll then costs
// the partition nothing (issue 14: at thousands of partitions, stepping
// every idle answer was most of the idle CPU). What the broker left out of
// an incremental KIP-227 answer is such a reply. A driver that keeps it
// must step it before anything else it steps into the partition, so that
// the partition sees every input in order.
func (p *Partition) Unchanged(m FetchReply) bool {
	if p.state != StateFetching || p.inflight == nil || p.inflight.RequestID() != m.ID {
		return false
	}
	if m.ErrorCode != 0 || m.Diverging.Epoch >= 0 || len(m.Records) > 0 {
		return false
	}
	if p.attempts != 0 || p.lastErr != nil || p.oorStreak != 0 || p.fetchedEpoch != p.epoch {
		return false
	}
	if m.HighWatermark != p.hw || (m.HighWatermark >= 0 && p.hwEpoch != p.epoch) || m.HighWatermark > p.highestHW {
		return false
	}
	return m.LogStartOffset < 0 || m.LogStartOffset == p.leaderLogStart
}

// errNoDivergence is the error of a backoff after a DivergingEpoch answer
// that cut nothing.
var errNoDivergence = errors.New("DivergingEpoch answer that diverges from nothing we hold: fetching again after a backoff")

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
		p.wakeAt = now.Add(p.retryDelay(err))
	}
}

// retryDelay is the wait before retry number p.attempts after err: the
// same for every partition for an error a broker gives them together
// (Together), else spread by this partition's jitter.
func (p *Partition) retryDelay(err error) time.Duration {
	if Together(err) {
		return p.cfg.Backoff.TogetherDelay(p.attempts)
	}
	return p.cfg.Backoff.Delay(p.attempts, jitterFor(p.cfg.JitterSeed, p.attempts))
}

// storageFail waits in StateStorageBackoff after a storage failure that
// may clear on its own (ActionFailed.Transient).
func (p *Partition) storageFail(now time.Time, err error) {
	p.inflight = nil
	p.lastErr = err
	p.storageFails++
	p.state = StateStorageBackoff
	p.wakeAt = now.Add(p.cfg.Backoff.Delay(p.storageFails, jitterFor(p.cfg.JitterSeed, p.storageFails)))
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

// Advance confirms that rd, the last Ready, was carried out: its actions are
// durable, its events delivered and its request sent.
func (p *Partition) Advance(rd Ready) {
	if len(rd.Actions) > 0 {
		p.storageFails = 0 // storage carried them out
	}
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
	if p.state == StateBackoff || p.state == StateFenced || p.state == StateStorageBackoff {
		return p.wakeAt
	}
	return time.Time{}
}

// RetriesFetch reports whether the partition waits out a backoff after
// which it fetches again (a Fetch error of its own); every other wait ends
// in an OffsetsForLeaderEpoch or a ListOffsets.
func (p *Partition) RetriesFetch() bool {
	return p.state == StateBackoff && p.resume == StateFetching
}

// InFlight returns the request handed out by the last Advance and not yet
// answered, or nil.
func (p *Partition) InFlight() Request { return p.inflight }

// Leader returns the leader and leader epoch the partition follows. A
// LeaderChange naming both is a no-op (KAFKA-7164: the same epoch keeps
// the current state), so a driver need not step the same Metadata again.
func (p *Partition) Leader() (leader, epoch int32) { return p.leader, p.epoch }

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
		StorageFailures:      p.storageFails,
		WakeAt:               p.NextWake(),
		LastError:            p.lastErr,
	}
	if p.state == StateBackoff {
		s.Resume = p.resume
	}
	return s
}
