package fetcher

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
)

// partLog is what the driver does with a partition's local log: the
// *storage.Log Manager.open opened, or in tests a double over one that
// fails as a full or failing disk does.
type partLog interface {
	follower.LocalLog
	storage.Reader // what a server of the copy reads (catalog.go)
	Append(raw []byte) error
	TruncateWithLost(t storage.Truncation) (storage.Lost, error)
	UnreportedLosses() []storage.Lost
	MarkReported(id string) error
	Failed() error
	TruncateTo(offset int64) error
	TruncateFullyAndStartAt(offset int64) error
	EnforceRetention() (int, error)
	PrepareFlush() error
	Flush() error
	FlushDue() bool
	AtRest() bool
	DurableEnd() int64
	Size() int64
	Segments() []int64
	Close() error
}

// stager is a partLog that can write a Fetch response's batches as they
// are read, ahead of their Append (storage.Log.Stage). The tests' doubles
// of a partLog are not one: every append reaches their Append whole.
type stager interface {
	Stage(field []byte, first bool, at int64) int
	StagedAppended() int64
}

// part is one followed partition: its state machine and its log. It is
// owned by exactly one goroutine at a time (the Manager while it has no
// leader's worker, else that worker) and moves between them by hand-off.
type part struct {
	tp wire.TopicPartition
	sm *follower.Partition
	// log is the partition's log; the state machine reads it through
	// liveLog, so a log reopened after a storage failure replaces it for
	// both.
	log partLog
	// pending is the request the state machine handed out and the worker
	// has not sent yet.
	pending follower.Request
	// fetched is what wire read of the record batches of the last Fetch
	// reply stepped in, for the Append that hands them back: they are
	// counted and checked without a second scan.
	fetched fetchedBatches
	// lastTruncation is the latest truncation event, and lastLost the
	// latest loss reported, for status.
	lastTruncation *follower.TruncationEvent
	lastLost       *LostReport
	// reported holds the losses this process reported whose MarkReported
	// has not succeeded yet, so a retry does not report them twice;
	// markFailed those whose failure was logged (lost.go).
	reported, markFailed map[string]bool
	// reconciled is set by the first follower.ReconciledEvent.
	reconciled bool
	// staleReplies counts the replies the state machine discarded, for
	// Status.StaleReplies.
	staleReplies int64
	// dirty: stepped since processAll last published the partition's
	// status. An untouched partition's status cannot have changed, and
	// publishing thousands of idle ones after every answer was most of a
	// worker's idle CPU.
	dirty bool
	// force makes the next publish go out even if the status is the
	// same: storage actions ran (a truncation that changed nothing a
	// status shows still holds the partition unserved until changed
	// serves it again), or the served epoch could not be made durable.
	force bool
	// unsettled: the log may list losses not yet reported (settleLosses):
	// it was opened, or reopened, or a truncation ran since the list
	// was last found empty. Asking the log after every step of every
	// partition was a twentieth of the idle CPU.
	unsettled bool
	// carry is the answer of an idle long poll that was not stepped
	// (follower.Partition.Unchanged): the state machine's Fetch stays in
	// flight and goes out again as it was, under the same id, in the
	// worker's next Fetch (worker.addCarried). Anything stepped into the
	// partition steps carry first (step), so the state machine sees every
	// input, in order, as if it had been stepped when it came.
	carry    carriedFetch
	carrying bool
	// steps counts the state machine's steps, for the tests that pin what
	// an idle long poll costs (Manager.steps); nil in tests that build a
	// part alone.
	steps *atomic.Int64
	// staged counts the bytes its appends took where they had been staged
	// (Manager.stagedAppended); nil in tests that build a part alone.
	staged *atomic.Int64
}

// carriedFetch is an answer kept instead of stepped (a success with no
// records: follower.Partition.Unchanged), and the Fetch it answered.
type carriedFetch struct {
	id           uint64
	hw, logStart int64
	fetch        wire.FetchPartition
}

// reply is the answer carried, as it came.
func (c carriedFetch) reply() follower.FetchReply {
	return follower.FetchReply{ID: c.id, HighWatermark: c.hw, LogStartOffset: c.logStart, Diverging: follower.EpochEndOffset{Epoch: -1, EndOffset: -1}}
}

// liveLog is the state machine's view of whichever log p holds.
type liveLog struct{ p *part }

func (l liveLog) LogStartOffset() int64                    { return l.p.log.LogStartOffset() }
func (l liveLog) LogEndOffset() int64                      { return l.p.log.LogEndOffset() }
func (l liveLog) LatestEpoch() (int32, bool)               { return l.p.log.LatestEpoch() }
func (l liveLog) EndOffsetForEpoch(e int32) (int32, int64) { return l.p.log.EndOffsetForEpoch(e) }

// fetchedBatches is wire's account of the batches of fetch reply id.
type fetchedBatches struct {
	id uint64
	wire.Batches
}

// step feeds msg to the state machine and reports whether it was taken. A
// reply it discards (follower.ErrStale: no longer the request in flight;
// follower.ErrStopped: the partition has stopped) is counted. Step fails
// only with those two, and other inputs only with ErrStopped: a stopped
// partition takes no leader change or tick, and loses nothing by it.
func (p *part) step(now time.Time, msg follower.Msg) bool {
	p.uncarry(now)
	return p.stepOne(now, msg)
}

func (p *part) stepOne(now time.Time, msg follower.Msg) bool {
	p.dirty = true
	if p.steps != nil {
		p.steps.Add(1)
	}
	err := p.sm.Step(now, msg)
	if err == nil {
		return true
	}
	switch msg.(type) {
	case follower.EpochReply, follower.FetchReply, follower.OffsetsReply, follower.RequestFailed:
		p.staleReplies++
	}
	return false
}

// uncarry steps the answer p carries, if any: its Fetch is no longer to
// go out again as it was.
func (p *part) uncarry(now time.Time) {
	if p.carrying {
		p.carrying = false
		p.stepOne(now, p.carry.reply())
	}
}

// process carries out every Ready the state machine has, in the order its
// contract demands: storage actions (each durable before the next), then
// events, then the request is queued; then Advance. It returns the
// appended bytes and records, and whether a metadata refresh was asked for.
//
// pre, if not nil, is the state machine's next Ready with its actions
// already carried out (worker.applyAhead): taken as if applied here.
func (p *part) process(cfg *Config, now time.Time, pre *preApplied) (appendedBytes, appendedRecords int64, refresh bool) {
	if p.unsettled {
		if len(p.log.UnreportedLosses()) > 0 {
			p.dirty = true
			p.settleLosses(cfg)
		} else {
			p.unsettled = false
		}
	}
	for p.sm.HasReady() {
		var rd follower.Ready
		var done applied
		var err error
		if pre != nil {
			rd, done, err = pre.rd, pre.done, pre.err
			pre = nil
		} else {
			rd = p.sm.Ready()
			if !appendsOnly(rd) {
				p.unsettled = true // a truncation may list a loss to report
			}
			done, err = p.apply(rd)
		}
		appendedBytes += done.bytes
		appendedRecords += done.records
		// What the fetched batches break is the broker's answer, so it is
		// reported whether or not they could be stored.
		for _, e := range done.checks {
			p.report(cfg, e, nil)
		}
		if err != nil {
			p.actionFailed(cfg, now, err)
			continue
		}
		for _, e := range rd.Events {
			p.report(cfg, e, done.lost)
		}
		if done.lost != nil {
			p.markReported(cfg, done.lost.ID)
		}
		if len(rd.Actions) > 0 {
			p.force = true
		}
		if rd.Request != nil {
			p.pending = rd.Request
		}
		refresh = refresh || rd.RefreshMetadata
		p.sm.Advance(rd)
	}
	return appendedBytes, appendedRecords, refresh
}

// preApplied is a Ready whose storage actions worker.applyAhead carried
// out, and what they did.
type preApplied struct {
	rd   follower.Ready
	done applied
	err  error
}

// appendsOnly reports whether rd's actions are appends alone (no
// truncation, so no loss to report).
func appendsOnly(rd follower.Ready) bool {
	for _, a := range rd.Actions {
		if _, ok := a.(*follower.Append); !ok {
			return false
		}
	}
	return true
}

// actionFailed logs a failed storage action and steps it into the state
// machine, classified (see storageFailure).
func (p *part) actionFailed(cfg *Config, now time.Time, err error) {
	f := storageFailure(err)
	switch {
	case f.Corrupt:
		cfg.Logger.Warn("fetched batch failed validation; fetching again after a backoff", "partition", p.tp.String(), "err", err)
	case f.Transient:
		cfg.Logger.Warn("storage failed; reopening the log and retrying after a backoff", "partition", p.tp.String(), "err", err)
	default:
		cfg.Logger.Error("storage failed; partition stopped", "partition", p.tp.String(), "err", err)
	}
	p.step(now, f)
}

// storageFailure classifies a storage error for the state machine
// (follower.ActionFailed):
//
//   - a *storage.CorruptionError is a bad batch in our own files (found
//     while saving a range to lost+found, or reading): stop, with the error,
//     which names the file, byte position and offset. It is never repaired
//     silently (storage/doc.go): ours may be the only copy left.
//   - a *batch.Error otherwise is a fetched batch that failed validation:
//     Corrupt, fetched again after a backoff as Kafka does.
//   - no space left (ENOSPC, EDQUOT) or an I/O error (EIO) on a write or
//     fsync: Transient. The disk may be freed or recover; storage refuses
//     the log after such a failure until it is reopened, and reopening
//     repairs what the failure left (storage/doc.go, Recovery).
//   - anything else (permissions, a read-only file system, our own
//     invariants): stop; retrying cannot help and the error says why.
func storageFailure(err error) follower.ActionFailed {
	var ce *storage.CorruptionError
	var be *batch.Error
	switch {
	case errors.As(err, &ce):
		return follower.ActionFailed{Err: err}
	case errors.As(err, &be):
		return follower.ActionFailed{Corrupt: true, Err: err}
	case transientStorageError(err):
		return follower.ActionFailed{Transient: true, Err: err}
	}
	return follower.ActionFailed{Err: err}
}

// transientStorageError reports a storage error that may clear on its own:
// a full disk or quota, or an I/O error.
func transientStorageError(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO)
}

// tick steps Tick into p once its backoff is over. A partition waiting on
// its storage gets its log reopened first (storage refuses a log after a
// failed write until then); if that fails too it waits again, longer.
func (p *part) tick(m *Manager, now time.Time) {
	if p.sm.State() == follower.StateStorageBackoff && !now.Before(p.sm.NextWake()) {
		if err := m.reopen(p); err != nil {
			p.actionFailed(&m.cfg, now, err)
			return
		}
	}
	p.step(now, follower.Tick{})
}

// applied is what a Ready's storage actions did.
type applied struct {
	// lost is the lost+found event of the Ready's truncation, nil when it
	// removed nothing (or there was none).
	lost           *storage.Lost
	bytes, records int64
	// checks are the conformance events of the appended batches.
	checks []follower.Event
}

// apply carries out rd's storage actions in order. A MoveToLostFound is
// always followed, in the same Ready, by the truncation that removes those
// batches: the two are one storage.Log.TruncateWithLost, the crash-atomic
// unit of docs/design.md promise 2 (save to lost+found, make the
// truncation durable, record the loss to report), with the cause and
// epochs of the Ready's event.
func (p *part) apply(rd follower.Ready) (done applied, err error) {
	var move *follower.MoveToLostFound
	for _, a := range rd.Actions {
		switch a := a.(type) {
		case *follower.MoveToLostFound:
			move = a // carried out by the truncation after it
		case *follower.TruncateTo:
			if move != nil {
				err = p.truncateWithLost(rd.Events, storage.Truncation{Offset: a.Offset}, move, &done)
				move = nil
			} else {
				err = p.log.TruncateTo(a.Offset)
			}
			if err != nil {
				return done, err
			}
		case *follower.TruncateFullyAndStartAt:
			if move != nil {
				err = p.truncateWithLost(rd.Events, storage.Truncation{Offset: a.Offset, Full: true}, move, &done)
				move = nil
			} else {
				err = p.log.TruncateFullyAndStartAt(a.Offset)
			}
			if err != nil {
				return done, err
			}
		case *follower.Append:
			if err := p.append(a, &done); err != nil {
				return done, err
			}
		default:
			return done, fmt.Errorf("%s: unknown storage action %T", p.tp, a)
		}
	}
	if move != nil {
		return done, fmt.Errorf("%s: %v without the truncation that removes those batches", p.tp, move)
	}
	return done, nil
}

// truncateWithLost carries out a MoveToLostFound and the truncation after
// it. What the log removes is [Lost.From, Lost.EndOffset), which is the
// state machine's [move.From, move.To): it decided on the log as it is,
// and nothing writes it between.
func (p *part) truncateWithLost(events []follower.Event, t storage.Truncation, move *follower.MoveToLostFound, done *applied) error {
	t.Cause, t.OldLeaderEpoch, t.NewLeaderEpoch = lossCause(events)
	l, err := p.log.TruncateWithLost(t)
	if err != nil {
		return fmt.Errorf("saving %s offsets %d..%d to lost+found and truncating: %w", p.tp, move.From, move.To, err)
	}
	if l.Batches > 0 {
		done.lost = &l
	}
	return nil
}

// lossCause is the cause and leader epochs lost.json records for the loss
// a Ready's events report: its TruncationEvent's, or a GapEvent's that
// discarded our history (storage.CauseDiscardedOnGap).
func lossCause(events []follower.Event) (cause string, oldEpoch, newEpoch int32) {
	for _, e := range events {
		switch e := e.(type) {
		case *follower.TruncationEvent:
			return e.Cause.String(), e.OldLeaderEpoch, e.NewLeaderEpoch
		case *follower.GapEvent:
			if e.Discarded {
				return storage.CauseDiscardedOnGap, -1, e.LeaderEpoch
			}
		}
	}
	// No event names the loss: a state machine that broke its contract.
	// The batches are kept all the same, under a cause no replay takes
	// for cluster loss.
	return "unknown", -1, -1
}

// append appends the whole batches of a fetch reply, which wire framed
// when it converted the reply (partial tail dropped, records counted, epochs
// read). Their CRCs are checked once, by storage.Log.Append, which writes
// nothing of a run with a bad one.
func (p *part) append(a *follower.Append, done *applied) error {
	b := p.fetched
	if b.id != a.ID {
		return fmt.Errorf("%s: the batches of fetch reply %d reached storage without wire's account of them (it has reply %d's)", p.tp, a.ID, b.id)
	}
	p.fetched = fetchedBatches{}
	done.checks = append(done.checks, batchEpochChecks(p.tp, a.CurrentLeaderEpoch, b.Epochs)...)
	if whole := a.Records[:b.Whole]; len(whole) > 0 {
		st, staging := p.log.(stager)
		var before int64
		if staging {
			before = st.StagedAppended()
		}
		if err := p.log.Append(whole); err != nil {
			return err
		}
		if staging && p.staged != nil {
			p.staged.Add(st.StagedAppended() - before)
		}
		done.bytes += int64(len(whole))
		done.records += b.Records
	}
	if b.Err != nil {
		return fmt.Errorf("fetched batch for %s at offset %d: %w", p.tp, a.Offset, b.Err)
	}
	return nil
}

// batchEpochChecks reports the batches stamped with a leader epoch above
// fence, the epoch the fetch was fenced with (KIP-320): a leader stamps its
// own epoch, so none can be higher (follower.CheckBatchEpochAboveLeader).
// One event per run of batches of one epoch.
func batchEpochChecks(tp wire.TopicPartition, fence int32, runs []wire.EpochRun) []follower.Event {
	var es []follower.Event
	for _, r := range runs {
		if r.Epoch <= fence {
			continue
		}
		what := fmt.Sprintf("batch at offset %d carries", r.BaseOffset)
		if r.Batches > 1 {
			what = fmt.Sprintf("%d batches from offset %d carry", r.Batches, r.BaseOffset)
		}
		es = append(es, &follower.ConformanceEvent{
			Topic: tp.Topic, Partition: tp.Partition, Check: follower.CheckBatchEpochAboveLeader, LeaderEpoch: fence,
			Evidence: fmt.Sprintf("%s leader epoch %d; the fetch was fenced at epoch %d", what, r.Epoch, fence),
		})
	}
	return es
}

// report fills in what storage knows of an event, logs it and hands it on.
// lost is the lost+found event of the loss the event reports, if the
// Ready's truncation removed anything: the loss is reported with its
// durable id (Lost.ID), and a TruncationEvent whose truncation removed
// nothing is not reported at all.
func (p *part) report(cfg *Config, e follower.Event, lost *storage.Lost) {
	switch e := e.(type) {
	case *follower.TruncationEvent:
		if lost == nil {
			return
		}
		p.reportTruncation(cfg, e, *lost, false)
	case *follower.GapEvent:
		if e.Discarded && lost != nil {
			e.DiscardedFrom, e.DiscardedTo = lost.From, lost.EndOffset
		} else {
			lost = nil
		}
		p.reportGap(cfg, e, lost, false)
	case *follower.ConformanceEvent:
		logConformance(cfg, e)
		cfg.observe().Event(e)
	case *follower.ReconciledEvent:
		p.reconciled = true
		cfg.Logger.Debug("reconciled", "partition", p.tp.String(), "leader_epoch", e.LeaderEpoch,
			"log_end", e.LogEndOffset, "roundtrips", e.Roundtrips, "cause", e.Cause.String())
		cfg.observe().Reconciled(e)
	default:
		// A kind this driver does not know yet (follower may add kinds):
		// Observer.Event's users expect only the kinds above.
	}
}

func logConformance(cfg *Config, e *follower.ConformanceEvent) {
	cfg.Logger.Warn("conformance check failed: a broker answer the protocol rules out",
		"partition", fmt.Sprintf("%s-%d", e.Topic, e.Partition), "check", e.Check.String(),
		"leader_epoch", e.LeaderEpoch, "evidence", e.Evidence)
}
