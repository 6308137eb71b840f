package storage

import (
	"errors"
	"fmt"
)

// ErrOffsetOutOfRange is returned (wrapped) by Read for an offset below the
// log start or above the log end.
var ErrOffsetOutOfRange = errors.New("offset out of range")

// ErrClosed is returned by every method of a closed Log.
var ErrClosed = errors.New("log is closed")

// ErrTruncationPending is returned (wrapped) by Append, DeleteBefore and
// EnforceRetention while a truncation whose intent may be on disk has
// neither completed nor been rolled back (TruncateTo says when): an append
// then would be cut by the next Open's redo of the intent. A truncation
// call, or reopening the log, ends it.
var ErrTruncationPending = errors.New("a truncation is pending")

// AppendError is a batch run that Append refused: nothing of that append
// was written. Offset is the base offset of the offending batch (or the
// log end offset when the problem is the run as a whole).
type AppendError struct {
	Topic     string
	Partition int32
	Offset    int64
	Reason    string
	Err       error // the *batch.Error for a malformed batch, else nil
}

func (e *AppendError) Error() string {
	return fmt.Sprintf("appending to %s-%d at offset %d: %s", e.Topic, e.Partition, e.Offset, e.Reason)
}

func (e *AppendError) Unwrap() error { return e.Err }

// CorruptionError is a batch that fails its checks where the log says it
// must be whole: inside a sealed segment, or in the middle of the active
// one with valid batches after it. It is never repaired silently: the
// partition stops until an operator acts, because cutting the log there
// would drop the valid batches after it, and ours may be the only copy
// left of data the cluster lost.
type CorruptionError struct {
	Topic     string
	Partition int32
	Segment   string // path of the .log file
	Position  int64  // byte position of the bad batch in Segment
	Offset    int64  // base offset the bad batch claims, -1 if unreadable
	Err       error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("%s-%d: corrupt record batch in %s at byte %d (offset %d): %v",
		e.Topic, e.Partition, e.Segment, e.Position, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
