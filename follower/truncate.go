package follower

// This file is the truncation decision: a port of Kafka's
// AbstractFetcherThread.getOffsetTruncationState (core/src/main/scala/kafka/
// server/AbstractFetcherThread.scala) as a pure function of a LocalLog and one
// leader answer, plus the one place where kfollower deliberately differs from
// Kafka: the (-1, -1) answer.

// UndefinedEpoch and UndefinedOffset are Kafka's "no information" sentinels
// (OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET,
// both RecordBatch.NO_PARTITION_LEADER_EPOCH).
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// EpochEndOffset is a leader's answer about one epoch, from an
// OffsetsForLeaderEpoch reply or a Fetch reply's DivergingEpoch: the largest
// epoch the leader knows that is <= the epoch asked about, and the offset
// where that epoch ends on the leader (KIP-279). Both are -1 when the leader
// has no information.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// Rule names the row of getOffsetTruncationState's table that decided a
// Truncation. It is there for status, describe output and tests; callers act
// on Offset and Complete only.
type Rule uint8

const (
	// RuleNoInformation: the leader answered EndOffset -1. Kafka truncates
	// to the follower's high watermark; kfollower keeps everything (see
	// Decide).
	RuleNoInformation Rule = iota + 1
	// RuleNoLeaderEpoch: EndOffset set but Epoch -1, the pre-KIP-279 (v0)
	// answer: truncate to min(EndOffset, LEO), done.
	RuleNoLeaderEpoch
	// RuleEpochUnknownLocally: the leader named an epoch we do not have.
	// KIP-279 step 3: truncate to the end of our largest epoch below it and
	// ask again about that epoch.
	RuleEpochUnknownLocally
	// RuleEpochAgreed: we have the epoch the leader named. KIP-279 step 4:
	// truncate to min(leader's end, our end of that epoch, LEO), done.
	RuleEpochAgreed
	// RuleNoLocalEpochs: our epoch cache has nothing at or below the epoch
	// named (empty cache). As Kafka: min(EndOffset, LEO), done.
	RuleNoLocalEpochs
)

var ruleNames = [...]string{
	RuleNoInformation:       "no-information",
	RuleNoLeaderEpoch:       "no-leader-epoch",
	RuleEpochUnknownLocally: "epoch-unknown-locally",
	RuleEpochAgreed:         "epoch-agreed",
	RuleNoLocalEpochs:       "no-local-epochs",
}

func (r Rule) String() string {
	if int(r) < len(ruleNames) && ruleNames[r] != "" {
		return ruleNames[r]
	}
	return "rule(?)"
}

// Truncation is the decision on one leader answer.
type Truncation struct {
	// Offset is where the local log must end: everything at or above it is
	// removed. An Offset >= the log end offset removes nothing.
	Offset int64
	// Complete is false when the leader named an epoch we lack (KIP-279):
	// the loop must ask again about NextEpoch before fetching.
	Complete bool
	// NextEpoch is the epoch to ask about next when !Complete: our largest
	// epoch below the one the leader named, which is our latest epoch once
	// the log ends at Offset.
	NextEpoch int32
	// Rule is the table row that applied.
	Rule Rule
}

// Decide returns how far to truncate log given the leader's answer, following
// Kafka's getOffsetTruncationState row by row (AbstractFetcherThread.scala),
// except for the (-1, -1) row.
//
// (-1, -1) is "no information": the leader's epoch cache is empty, or we asked
// about an epoch above everything it knows
// (LeaderEpochFileCache.endOffsetFor). Kafka then truncates to the follower's
// high watermark, because a broker follower may hold uncommitted data above
// it. kfollower fetches as a consumer (replica id -1) and so only ever holds
// data that was at or below a leader's high watermark: truncating it on no
// information would discard committed data and report it as lost, a false
// alarm (docs/design.md promise 3). So Decide keeps everything (Offset = LEO,
// Complete). The prefix stays protected: every Fetch carries LastFetchedEpoch,
// so a real divergence still comes back as a DivergingEpoch answer (KIP-595
// truncate-on-fetch), or as OFFSET_OUT_OF_RANGE when the leader cannot place
// our last epoch.
//
// The answer is never trusted beyond our own log: every offset returned is at
// most log.LogEndOffset().
func Decide(log LocalLog, leader EpochEndOffset) Truncation {
	leo := log.LogEndOffset()
	if leader.EndOffset < 0 {
		// Any negative end is the UNDEFINED_EPOCH_OFFSET sentinel as far as
		// we are concerned: there is no offset to truncate to.
		return Truncation{Offset: leo, Complete: true, Rule: RuleNoInformation}
	}
	if leader.Epoch < 0 {
		// Pre-KIP-279 answer (OffsetsForLeaderEpoch v0 semantics, KIP-101):
		// an end offset without the epoch it belongs to.
		return Truncation{Offset: min(leader.EndOffset, leo), Complete: true, Rule: RuleNoLeaderEpoch}
	}
	found, end := log.EndOffsetForEpoch(leader.Epoch)
	switch {
	case end < 0:
		// endOffsetForEpoch = None: we track no epoch at or below the one
		// named. Kafka: "safe to truncate to leader's offset (this is the
		// same behavior as post-KIP-101 and pre-KIP-279)".
		return Truncation{Offset: min(leader.EndOffset, leo), Complete: true, Rule: RuleNoLocalEpochs}
	case found != leader.Epoch:
		// KIP-279 step 3: the leader's largest epoch <= ours is one we never
		// had, so everything we hold after our largest epoch below it
		// (found) was written in epochs the leader does not have. Truncate
		// to the end of found and ask about found.
		return Truncation{Offset: min(end, leo), NextEpoch: found, Rule: RuleEpochUnknownLocally}
	default:
		// KIP-279 step 4: both have the epoch; the logs agree up to where the
		// shorter of the two copies of it ends.
		return Truncation{Offset: min(end, leader.EndOffset, leo), Complete: true, Rule: RuleEpochAgreed}
	}
}

// cappedLog is log as it will be once truncated to end: the KIP-279 loop
// truncates "in its head" between rounds and touches storage once, at the end,
// so that a multi-round reconciliation moves one contiguous range to
// lost+found and reports one event, and an interrupted loop leaves the log
// untouched. Answers are exactly those of LeaderEpochFileCache.endOffsetFor on
// the truncated cache, given latest, the largest epoch that starts below end.
type cappedLog struct {
	LocalLog
	end       int64
	latest    int32
	hasLatest bool
}

// capLog returns log as it will be once truncated to end. latest must be the
// largest local epoch that starts below end (ok false: none).
func capLog(log LocalLog, end int64, latest int32, ok bool) LocalLog {
	if end >= log.LogEndOffset() {
		return log
	}
	return cappedLog{LocalLog: log, end: end, latest: latest, hasLatest: ok}
}

func (c cappedLog) LogEndOffset() int64 { return c.end }

func (c cappedLog) LatestEpoch() (int32, bool) { return c.latest, c.hasLatest }

func (c cappedLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	switch {
	case epoch == UndefinedEpoch || !c.hasLatest || epoch > c.latest:
		return UndefinedEpoch, UndefinedOffset
	case epoch == c.latest:
		return epoch, c.end
	default:
		// Below the latest epoch the answer depends only on entries up to
		// and including latest, which truncation to end keeps unchanged.
		return c.LocalLog.EndOffsetForEpoch(epoch)
	}
}
