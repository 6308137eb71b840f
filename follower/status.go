package follower

import "time"

// A partition as status pages and metrics see it.

// State is where a partition is, for status.
type State uint8

const (
	// StateNoLeader: waiting for metadata to name a leader.
	StateNoLeader State = iota
	// StateReconciling: OffsetsForLeaderEpoch rounds (KIP-101/KIP-279).
	StateReconciling
	// StateFetching: fetching from the leader.
	StateFetching
	// StateOutOfRange: asking ListOffsets after OFFSET_OUT_OF_RANGE.
	StateOutOfRange
	// StateBackoff: waiting until NextWake() before retrying.
	StateBackoff
	// StateFenced: our leader epoch is stale (KIP-320); waiting for metadata.
	StateFenced
	// StateStopped: stopped for good.
	StateStopped
	// StateStorageBackoff: a storage action failed in a way that may
	// clear on its own (a full disk, an I/O error); waiting until
	// NextWake(), while the driver reopens the log, then reconciling
	// again from the log as it then is.
	StateStorageBackoff
)

var stateNames = [...]string{
	StateNoLeader:       "no-leader",
	StateReconciling:    "reconciling",
	StateFetching:       "fetching",
	StateOutOfRange:     "out-of-range",
	StateBackoff:        "backoff",
	StateFenced:         "fenced",
	StateStopped:        "stopped",
	StateStorageBackoff: "storage-backoff",
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
	StorageFailures      int   // consecutive storage failures, whose backoff grows apart from Attempts
	WakeAt               time.Time
	LastError            error // the error that caused the current backoff, fence or stop
}
