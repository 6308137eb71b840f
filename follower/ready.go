package follower

// The outputs: what a Ready hands the driver to do, the one request to send
// and the storage actions to carry out.

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
	// its history (Partition.readRecords).
	LastFetchedEpoch int32
	// LogStartOffset is our log start (Fetch v5+ field); a leader ignores it
	// for replica id -1.
	LogStartOffset int64
}

// ListOffsets asks the leader for its log start offset (EARLIEST) and log end
// offset (LATEST, replica id -2), both with CurrentLeaderEpoch set, and is
// answered with one OffsetsReply. It is only sent after
// OFFSET_OUT_OF_RANGE, as AbstractFetcherThread.fetchOffsetAndTruncate asks.
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
// starting there (LeaderEpochFileCache.truncateFromEnd).
type TruncateTo struct{ Offset int64 }

// TruncateFullyAndStartAt removes every batch and epoch entry and restarts
// the log empty at Offset (UnifiedLog.truncateFullyAndStartAt).
type TruncateFullyAndStartAt struct{ Offset int64 }

// Append appends the record batches of fetch reply ID, which was fetched at
// Offset, exactly as received: validate, drop a trailing partial batch,
// assign epochs (as UnifiedLog.appendAsFollower, with
// LeaderEpochFileCache.assign per batch).
type Append struct {
	ID     uint64
	Offset int64
	// CurrentLeaderEpoch is the leader epoch the Fetch was fenced with
	// (KIP-320). A leader stamps its batches with its own epoch, so no batch
	// may carry a higher one (CheckBatchEpochAboveLeader, checked by the
	// driver against the batch epochs wire read when it converted the
	// Fetch reply).
	CurrentLeaderEpoch int32
	Records            []byte
}

func (*MoveToLostFound) isAction()         {}
func (*TruncateTo) isAction()              {}
func (*TruncateFullyAndStartAt) isAction() {}
func (*Append) isAction()                  {}

// Ready is the work a partition wants done. The driver carries it out in
// this order and then calls Advance (or steps ActionFailed):
//
//  1. Actions, in order, each durable before the next (a truncation's intent,
//     segments and epoch checkpoint fsynced);
//  2. Events: log them, fill in Records and Bytes (TruncationEvent), hand
//     them to metrics;
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
