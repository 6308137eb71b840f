package follower

// The events: what a Ready reports for the driver to log and count.

// Event is something to log and count: *TruncationEvent, *GapEvent,
// *ConformanceEvent or *ReconciledEvent. A driver that meets a kind it does
// not know should ignore it: kinds may be added.
type Event interface{ isEvent() }

// Cause says what revealed a divergence.
type Cause uint8

const (
	// CauseEpochReply: an OffsetsForLeaderEpoch reply (KIP-101/KIP-279).
	CauseEpochReply Cause = iota + 1
	// CauseDivergingEpoch: a Fetch reply's DivergingEpoch (KIP-595's
	// truncate-on-fetch).
	CauseDivergingEpoch
	// CauseOutOfRangeHigh: OFFSET_OUT_OF_RANGE with the leader's log end
	// below ours, and no epoch information to do better
	// (AbstractFetcherThread.fetchOffsetAndTruncate).
	CauseOutOfRangeHigh
)

var causeNames = [...]string{
	CauseEpochReply:     "offsets-for-leader-epoch",
	CauseDivergingEpoch: "diverging-epoch",
	CauseOutOfRangeHigh: "out-of-range-high",
}

func (c Cause) String() string {
	if int(c) < len(causeNames) && causeNames[c] != "" {
		return causeNames[c]
	}
	return "cause(?)"
}

// Causes lists every Cause, for metrics: a counter labelled by cause is
// created at zero for each.
func Causes() []Cause {
	return []Cause{CauseEpochReply, CauseDivergingEpoch, CauseOutOfRangeHigh}
}

// TruncationEvent reports committed data the cluster lost. kfollower holds
// only data that was at or below a leader's high watermark, so every offset
// in [From, To) was committed and the current leader does not have it. The
// batches were moved to lost+found by the MoveToLostFound action of the same
// Ready.
type TruncationEvent struct {
	Topic     string
	Partition int32
	// OldLeaderEpoch is the leader epoch we last fetched under (-1 if none
	// since start); NewLeaderEpoch the one whose leader told us to truncate.
	OldLeaderEpoch, NewLeaderEpoch int32
	// From, To: the removed offsets, [From, To).
	From, To int64
	// LocalEpoch is our latest epoch before the truncation. AgreedEpoch is
	// the epoch of the leader's final answer when we have it too (KIP-279
	// step 4), -1 when the cut came from another row of the table; it can
	// lie below the leader's first epoch, whose start the leader then
	// answered with (LeaderEpochFileCache.endOffsetFor).
	LocalEpoch, AgreedEpoch int32
	// Roundtrips is the number of leader answers it took: the
	// OffsetsForLeaderEpoch replies, plus the Fetch that carried a
	// DivergingEpoch or the ListOffsets answer after OFFSET_OUT_OF_RANGE
	// that started it.
	Roundtrips int
	// HighestHighWatermark is the highest leader high watermark seen from
	// this partition since start, -1 if none.
	HighestHighWatermark int64
	Cause                Cause
	// Records and Bytes are filled in by the driver from storage.
	Records, Bytes int64
}

// GapEvent reports offsets the cluster deleted (retention, DeleteRecords)
// before we copied them: the leader's log start moved past our log end
// (OFFSET_OUT_OF_RANGE, low side). Not a loss: the data was deleted on
// purpose.
type GapEvent struct {
	Topic       string
	Partition   int32
	LeaderEpoch int32
	// From, To: the offsets never copied, [From, To). To is the leader's log
	// start, where fetching continues.
	From, To int64
	// Discarded is set when Config.DiscardOnGap made us drop our own history
	// as Kafka does: DiscardedFrom, DiscardedTo were moved to lost+found.
	Discarded                  bool
	DiscardedFrom, DiscardedTo int64
}

// Check names a conformance check: a broker answer that the protocol or
// the data we hold says cannot be right. kfollower sees every answer about
// leader epochs from the outside, so it can tell when a real broker departs
// from the protocol. A check never changes what kfollower does; it reports
// the evidence (docs/design.md §8).
type Check uint8

const (
	// CheckEpochAnswer: an OffsetsForLeaderEpoch answer names an epoch
	// above the one asked (LeaderEpochFileCache.endOffsetFor returns the
	// largest epoch <= the requested one), or says an epoch we hold
	// batches of ends at or before our first batch of it, which no leader
	// that ever held those batches can say.
	CheckEpochAnswer Check = iota + 1
	// CheckMetadataEpochBackwards: a broker's Metadata names a lower
	// leader epoch for a partition than the same broker named before
	// (KIP-320: epochs only grow). Checked by the driver.
	CheckMetadataEpochBackwards
	// CheckHighWatermarkBackwards: within one leader epoch the leader's
	// high watermark went down (Partition.maybeIncrementLeaderHW only
	// moves it up).
	CheckHighWatermarkBackwards
	// CheckBatchEpochAboveLeader: a fetched batch carries a partition
	// leader epoch above the leader epoch the fetch was fenced with
	// (KIP-320): a leader stamps its own epoch. Checked by the driver.
	CheckBatchEpochAboveLeader
	// CheckUndefinedAnswer: (-1, -1) for an epoch between 0 and the
	// leader's current epoch. A leader records its epoch when elected
	// (Partition.makeLeader), so it always has an answer there.
	CheckUndefinedAnswer
	// CheckDivergingWithoutDivergence: a Fetch reply's DivergingEpoch
	// names an epoch above the fetch's LastFetchedEpoch, or that epoch
	// itself with an end at or past the fetch offset. The leader answers
	// endOffsetFor(LastFetchedEpoch), never above it, and only when that
	// epoch is lower or ends below the fetch offset
	// (Partition.readRecords). Such an answer that cuts nothing is
	// followed by a backoff before the next Fetch.
	CheckDivergingWithoutDivergence
)

var checkNames = [...]string{
	CheckEpochAnswer:                "epoch_answer_contradicts_log",
	CheckMetadataEpochBackwards:     "metadata_epoch_backwards",
	CheckHighWatermarkBackwards:     "high_watermark_backwards",
	CheckBatchEpochAboveLeader:      "batch_epoch_above_leader_epoch",
	CheckUndefinedAnswer:            "undefined_epoch_answer",
	CheckDivergingWithoutDivergence: "diverging_epoch_without_divergence",
}

func (c Check) String() string {
	if int(c) < len(checkNames) && checkNames[c] != "" {
		return checkNames[c]
	}
	return "check(?)"
}

// Checks lists every conformance check, for metrics.
func Checks() []Check {
	return []Check{CheckEpochAnswer, CheckMetadataEpochBackwards, CheckHighWatermarkBackwards, CheckBatchEpochAboveLeader, CheckUndefinedAnswer,
		CheckDivergingWithoutDivergence}
}

// ConformanceEvent reports a failed conformance check with its evidence.
type ConformanceEvent struct {
	Topic       string
	Partition   int32
	Check       Check
	LeaderEpoch int32  // our current leader epoch when it was seen
	Evidence    string // what was asked, answered and held
}

// ReconciledEvent reports that a reconciliation (KIP-101/KIP-279) ended and
// fetching resumes: once the actions of the same Ready are carried out, the
// local log ends at LogEndOffset and agrees with the leader's history as far
// as the leader's answers tell. It follows the TruncationEvent when the
// reconciliation cut the log. Every reconciliation ends with one, whether a
// new leader epoch, a fence, a DivergingEpoch or OFFSET_OUT_OF_RANGE (high
// side) started it, so the driver learns from it, not from State, that the
// partition reconciled.
type ReconciledEvent struct {
	Topic       string
	Partition   int32
	LeaderEpoch int32 // the leader epoch reconciled with
	// Roundtrips is the number of leader answers it took, counted as in
	// TruncationEvent; 0 when we hold no epochs and so had nothing to ask: the
	// first Fetch, with LastFetchedEpoch -1, does the checking.
	Roundtrips int
	// Cause is what the reconciliation acted on: the OffsetsForLeaderEpoch
	// answers, a Fetch's DivergingEpoch, or the leader's log end after
	// OFFSET_OUT_OF_RANGE when the epochs gave no information.
	Cause Cause
	// LogEndOffset is where the local log ends once the Ready's actions are
	// carried out.
	LogEndOffset int64
}

func (*TruncationEvent) isEvent()  {}
func (*GapEvent) isEvent()         {}
func (*ConformanceEvent) isEvent() {}
func (*ReconciledEvent) isEvent()  {}
