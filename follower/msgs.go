package follower

import "errors"

// The inputs: what the driver steps into a Partition.

// Msg is an input to Partition.Step: LeaderChange, EpochReply, FetchReply,
// OffsetsReply, RequestFailed, ActionFailed, Tick, EpochRound or Stop.
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
	// high-watermark isolation (ReplicaManager.fetchOffset).
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
// all be carried out (the driver steps it instead of calling Advance), or
// that the driver's own work on the log between Readies (a flush, local
// retention, reopening it) failed. The partition re-reads its log; the
// rest of the Ready is dropped, its events with it: a truncation that did
// not happen is decided and reported again.
//
// What the partition does depends on what failed, which the driver knows
// and says:
//   - Corrupt: a fetched batch failed validation (CRC, framing); the fetch
//     is retried after a backoff, as Kafka does for CORRUPT_MESSAGE
//     (AbstractFetcherThread.processFetchRequest).
//   - Transient: the local storage failed in a way that may clear on its
//     own (no space left, an I/O error on write or fsync). The partition
//     waits in StateStorageBackoff, bounded and exponential in the
//     consecutive storage failures, while the driver reopens the log
//     (storage refuses a log after a failed write until then), and on the
//     Tick after it reconciles again with its leader, since recovery may
//     have cut a torn tail or finished a truncation.
//   - neither: the partition stops (corruption in our own log, a failure
//     nobody can retry away); Status names the error.
type ActionFailed struct {
	Corrupt   bool
	Transient bool
	Err       error
}

// Tick tells the partition the time has come; it leaves Backoff once
// now >= NextWake().
type Tick struct{}

// EpochRound tells the partition that the driver is about to send broker
// Leader a round of OffsetsForLeaderEpoch requests, batched as one: a
// partition that waits out a Together backoff (UNKNOWN_LEADER_EPOCH or
// NOT_LEADER_OR_FOLLOWER: a broker still taking over) to ask that same
// broker about its epoch ends its wait and joins the round (JoinsEpochRound
// says whether it would). Anything else is nothing to it.
//
// The partitions a broker takes over reach the driver from Metadata at
// different moments, and each batch that broker answered at a different
// moment waits from then: without joining, every batch retried on its own
// timer, several requests per broker per round of a leader move (issue 14:
// in BenchmarkScale's moves a third of a broker's epoch requests split a
// round). They all wait for the same thing, the broker's take-over, so
// a retry pulled earlier asks no sooner than one of them does anyway.
// Kafka's replica fetcher has one round too
// (AbstractFetcherThread.maybeTruncate gathers its truncating partitions,
// fetchTruncatingPartitions, into one request), and a broker is handed the
// partitions it follows at once, from one metadata delta
// (ReplicaManager.applyDelta, addFetcherForPartitions).
type EpochRound struct {
	Leader int32
}

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
func (EpochRound) isMsg()    {}
func (Stop) isMsg()          {}

// ErrStale is returned by Step for a reply to a request that is no longer the
// one in flight: the leader epoch changed, the partition backed off or moved
// on since it was sent. Kafka's fetcher likewise ignores a response whose
// fetch offset or leader epoch no longer matches
// (AbstractFetcherThread.processFetchRequest, docs/kafka.md §4.6). The reply
// was discarded; the driver may count it.
var ErrStale = errors.New("follower: stale reply discarded")

// ErrStopped is returned by Step once the partition has stopped.
var ErrStopped = errors.New("follower: partition stopped")
