package follower

import (
	"errors"
	"time"
)

// ---- Inputs -----------------------------------------------------------------

// Msg is an input to Partition.Step: LeaderChange, EpochReply, FetchReply,
// OffsetsReply, RequestFailed, ActionFailed, Tick or Stop.
type Msg interface{ isMsg() }

// LeaderChange is the partition's leader and leader epoch from Metadata (or
// from a Fetch reply's CurrentLeader hint). A higher epoch starts a new
// reconciliation; a lower one is stale metadata and ignored.
type LeaderChange struct {
	Leader      int32 // broker id; -1 for no leader
	LeaderEpoch int32
}

// EpochReply is one partition's answer to an OffsetsForLeaderEpoch request.
type EpochReply struct {
	ID        uint64 // the request's ID
	ErrorCode int16
	// Leader is the epoch and end offset the leader answered; both -1 when
	// it had no information.
	Leader EpochEndOffset
}

// FetchReply is one partition's part of a Fetch response. The driver passes
// the record batches unopened; if they are to be kept, Ready hands them back
// in an Append action.
type FetchReply struct {
	ID             uint64 // the request's ID
	ErrorCode      int16
	HighWatermark  int64 // -1 when unknown (error replies carry -1)
	LogStartOffset int64 // the leader's log start; -1 when unknown
	// Diverging is the DivergingEpoch tagged field (Fetch v12+, KIP-595's
	// truncate-on-fetch): Epoch >= 0 means present. kmsg decodes an absent
	// field as {-1, -1}.
	Diverging EpochEndOffset
	// Records are the raw record batches, unchanged.
	Records []byte
}

// OffsetsReply is the leader's log start and log end offsets for a
// ListOffsets request.
type OffsetsReply struct {
	ID        uint64 // the request's ID
	ErrorCode int16
	// LogStartOffset: ListOffsets EARLIEST_TIMESTAMP.
	LogStartOffset int64
	// LogEndOffset: ListOffsets LATEST_TIMESTAMP sent with replica id -2,
	// which returns the leader's log end offset; replica id -1 would apply
	// high-watermark isolation (kafka-internals.md §4.6).
	LogEndOffset int64
}

// RequestFailed reports that request ID got no reply: the connection was
// lost, the request timed out, or it could not be sent. Err is classified
// by Classify.
type RequestFailed struct {
	ID  uint64
	Err error
}

// ActionFailed reports that the storage actions of the last Ready could not
// all be carried out. The driver steps it instead of calling Advance; the
// partition re-reads its log. Corrupt marks a fetched batch that failed
// validation (CRC, framing): the fetch is retried after a backoff, as Kafka
// does for CORRUPT_MESSAGE. Any other failure stops the partition.
type ActionFailed struct {
	Corrupt bool
	Err     error
}

// Tick tells the partition the time has come; it leaves Backoff once
// now >= NextWake().
type Tick struct{}

// Stop stops the partition for good (removed from the follow list, or the
// process shutting down).
type Stop struct{}

func (LeaderChange) isMsg()  {}
func (EpochReply) isMsg()    {}
func (FetchReply) isMsg()    {}
func (OffsetsReply) isMsg()  {}
func (RequestFailed) isMsg() {}
func (ActionFailed) isMsg()  {}
func (Tick) isMsg()          {}
func (Stop) isMsg()          {}

// ErrStale is returned by Step for a reply to a request that is no longer
// the one in flight: the leader epoch changed, the partition backed off or
// moved on since it was sent (kafka-internals.md §10.15). The reply was
// discarded; the driver may count it.
var ErrStale = errors.New("follower: stale reply discarded")

// ErrStopped is returned by Step once the partition has stopped.
var ErrStopped = errors.New("follower: partition stopped")

// ---- Outputs ----------------------------------------------------------------

// Request is the one request a Ready asks the driver to send:
// *OffsetsForLeaderEpoch, *Fetch or *ListOffsets. Each carries an ID that the
// reply must echo.
type Request interface {
	RequestID() uint64
	isRequest()
}

// OffsetsForLeaderEpoch asks the leader where LeaderEpoch ends (KIP-101,
// KIP-279). Send as OffsetForLeaderEpoch v4 with ReplicaID -1.
type OffsetsForLeaderEpoch struct {
	ID                 uint64
	Leader             int32 // broker to send to
	CurrentLeaderEpoch int32 // KIP-320 fence
	LeaderEpoch        int32 // the epoch asked about
}

// Fetch asks for record batches from Offset (Fetch v12+, replica id -1,
// read_uncommitted).
type Fetch struct {
	ID                 uint64
	Leader             int32
	Offset             int64
	CurrentLeaderEpoch int32 // KIP-320 fence
	// LastFetchedEpoch is the epoch of the batch just before Offset, -1 when
	// unknown; the leader answers with DivergingEpoch if it does not match
	// its history (§3.3).
	LastFetchedEpoch int32
	// LogStartOffset is our log start (Fetch v5+ field); a leader ignores it
	// for replica id -1.
	LogStartOffset int64
}

// ListOffsets asks the leader for its log start offset (EARLIEST) and log end
// offset (LATEST, replica id -2), both with CurrentLeaderEpoch set, and is
// answered with one OffsetsReply. It is only sent after
// OFFSET_OUT_OF_RANGE (kafka-internals.md §3.4, §4.6).
type ListOffsets struct {
	ID                 uint64
	Leader             int32
	CurrentLeaderEpoch int32
}

func (r *OffsetsForLeaderEpoch) RequestID() uint64 { return r.ID }
func (r *Fetch) RequestID() uint64                 { return r.ID }
func (r *ListOffsets) RequestID() uint64           { return r.ID }
func (*OffsetsForLeaderEpoch) isRequest()          {}
func (*Fetch) isRequest()                          {}
func (*ListOffsets) isRequest()                    {}

// Action is a storage action: *MoveToLostFound, *TruncateTo,
// *TruncateFullyAndStartAt or *Append. A Ready's actions are carried out in
// order, each durable before the next.
type Action interface{ isAction() }

// MoveToLostFound copies the batches holding offsets [From, To) to
// lost+found before a later action in the same Ready removes them.
type MoveToLostFound struct{ From, To int64 }

// TruncateTo removes every batch at or above Offset and the epoch entries
// starting there (LeaderEpochFileCache.truncateFromEnd, §6.2).
type TruncateTo struct{ Offset int64 }

// TruncateFullyAndStartAt removes every batch and epoch entry and restarts
// the log empty at Offset (UnifiedLog.truncateFullyAndStartAt, §6.4).
type TruncateFullyAndStartAt struct{ Offset int64 }

// Append appends the record batches of fetch reply ID, which was fetched at
// Offset, exactly as received: validate, drop a trailing partial batch,
// assign epochs (kafka-internals.md §10.11, §10.12).
type Append struct {
	ID      uint64
	Offset  int64
	Records []byte
}

func (*MoveToLostFound) isAction()         {}
func (*TruncateTo) isAction()              {}
func (*TruncateFullyAndStartAt) isAction() {}
func (*Append) isAction()                  {}

// Event is something to log and count: *TruncationEvent, *GapEvent or
// *ConformanceEvent.
type Event interface{ isEvent() }

// Cause says what revealed a divergence.
type Cause uint8

const (
	// CauseEpochReply: an OffsetsForLeaderEpoch reply (KIP-101/KIP-279).
	CauseEpochReply Cause = iota + 1
	// CauseDivergingEpoch: a Fetch reply's DivergingEpoch (§3.3).
	CauseDivergingEpoch
	// CauseOutOfRangeHigh: OFFSET_OUT_OF_RANGE with the leader's log end
	// below ours, and no epoch information to do better (§3.4).
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
	// answered with (§1.5).
	LocalEpoch, AgreedEpoch int32
	// Roundtrips is the number of leader answers it took (OffsetsForLeaderEpoch
	// replies, plus the Fetch that carried a DivergingEpoch).
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
// (OFFSET_OUT_OF_RANGE, low side, §3.4). Not a loss: the data was deleted on
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
// the data we hold says cannot be right (issue: "validate leader-epoch
// behaviour of real brokers"). A check never changes what kfollower does;
// it reports the evidence.
type Check uint8

const (
	// CheckEpochAnswer: an OffsetsForLeaderEpoch answer names an epoch
	// above the one asked (endOffsetFor returns the largest epoch <= the
	// requested one, kafka-internals.md §2.1), or says an epoch we hold
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
	// (Partition.makeLeader, §2.5), so it always has an answer there.
	CheckUndefinedAnswer
)

var checkNames = [...]string{
	CheckEpochAnswer:            "epoch_answer_contradicts_log",
	CheckMetadataEpochBackwards: "metadata_epoch_backwards",
	CheckHighWatermarkBackwards: "high_watermark_backwards",
	CheckBatchEpochAboveLeader:  "batch_epoch_above_leader_epoch",
	CheckUndefinedAnswer:        "undefined_epoch_answer",
}

func (c Check) String() string {
	if int(c) < len(checkNames) && checkNames[c] != "" {
		return checkNames[c]
	}
	return "check(?)"
}

// Checks lists every conformance check, for metrics.
func Checks() []Check {
	return []Check{CheckEpochAnswer, CheckMetadataEpochBackwards, CheckHighWatermarkBackwards, CheckBatchEpochAboveLeader, CheckUndefinedAnswer}
}

// ConformanceEvent reports a failed conformance check with its evidence.
type ConformanceEvent struct {
	Topic       string
	Partition   int32
	Check       Check
	LeaderEpoch int32  // our current leader epoch when it was seen
	Evidence    string // what was asked, answered and held
}

func (*TruncationEvent) isEvent()  {}
func (*GapEvent) isEvent()         {}
func (*ConformanceEvent) isEvent() {}

// Ready is the work a partition wants done. The driver carries it out in
// this order and then calls Advance (or steps ActionFailed):
//
//  1. Actions, in order, each durable before the next (a truncation's intent,
//     segments and epoch checkpoint fsynced);
//  2. Events: log them, fill in Records and Bytes, hand them to metrics;
//  3. Request: send it (batched with other partitions' requests to the same
//     broker);
//  4. RefreshMetadata: ask for fresh Metadata soon.
//
// A Ready carries either Actions or a Request, never both, so a request is
// always built from the log as the actions left it: the next Fetch after a
// truncation only comes in the Ready after Advance.
type Ready struct {
	Actions         []Action
	Events          []Event
	Request         Request // nil: nothing to send
	RefreshMetadata bool
}

// Empty reports whether rd asks for nothing.
func (rd Ready) Empty() bool {
	return len(rd.Actions) == 0 && len(rd.Events) == 0 && rd.Request == nil && !rd.RefreshMetadata
}

// State is where a partition is, for status.
type State uint8

const (
	// StateNoLeader: waiting for metadata to name a leader.
	StateNoLeader State = iota
	// StateReconciling: OffsetsForLeaderEpoch rounds (KIP-101/KIP-279).
	StateReconciling
	// StateFetching: fetching from the leader.
	StateFetching
	// StateOutOfRange: asking ListOffsets after OFFSET_OUT_OF_RANGE (§3.4).
	StateOutOfRange
	// StateBackoff: waiting until NextWake() before retrying.
	StateBackoff
	// StateFenced: our leader epoch is stale (KIP-320); waiting for metadata.
	StateFenced
	// StateStopped: stopped for good.
	StateStopped
)

var stateNames = [...]string{
	StateNoLeader:    "no-leader",
	StateReconciling: "reconciling",
	StateFetching:    "fetching",
	StateOutOfRange:  "out-of-range",
	StateBackoff:     "backoff",
	StateFenced:      "fenced",
	StateStopped:     "stopped",
}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(?)"
}

// Status is a snapshot of a partition for /status and metrics.
type Status struct {
	Topic       string
	Partition   int32
	State       State
	Resume      State // in StateBackoff: the state retried after it
	Leader      int32
	LeaderEpoch int32
	// FetchOffset is where the next Fetch starts: our log end, or the
	// leader's log start after a gap.
	FetchOffset          int64
	LogEndOffset         int64
	HighWatermark        int64 // the leader's, from the last Fetch reply; -1 unknown
	HighestHighWatermark int64
	LeaderLogStartOffset int64 // -1 unknown
	Attempts             int   // consecutive failed attempts
	WakeAt               time.Time
	LastError            error // the error that caused the current backoff, fence or stop
}
