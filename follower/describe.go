package follower

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Stable one-line renderings of everything a partition hands out, for logs
// and the golden output of the testdata scripts. Changing a format changes
// the golden files: rewrite them with
// `go test ./follower -run TestStories -rewrite` and read the diff.

func (r *OffsetsForLeaderEpoch) String() string {
	return fmt.Sprintf("offsets-for-leader-epoch id=%d leader=%d current-leader-epoch=%d leader-epoch=%d",
		r.ID, r.Leader, r.CurrentLeaderEpoch, r.LeaderEpoch)
}

func (r *Fetch) String() string {
	return fmt.Sprintf("fetch id=%d leader=%d offset=%d current-leader-epoch=%d last-fetched-epoch=%d log-start=%d",
		r.ID, r.Leader, r.Offset, r.CurrentLeaderEpoch, r.LastFetchedEpoch, r.LogStartOffset)
}

func (r *ListOffsets) String() string {
	return fmt.Sprintf("list-offsets id=%d leader=%d current-leader-epoch=%d (earliest, latest)",
		r.ID, r.Leader, r.CurrentLeaderEpoch)
}

func (a *MoveToLostFound) String() string {
	return fmt.Sprintf("move-to-lost+found [%d,%d)", a.From, a.To)
}

func (a *TruncateTo) String() string { return fmt.Sprintf("truncate-to %d", a.Offset) }

func (a *TruncateFullyAndStartAt) String() string {
	return fmt.Sprintf("truncate-fully-and-start-at %d", a.Offset)
}

func (a *Append) String() string {
	return fmt.Sprintf("append id=%d offset=%d current-leader-epoch=%d bytes=%d", a.ID, a.Offset, a.CurrentLeaderEpoch, len(a.Records))
}

func (e *TruncationEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "truncation %s/%d lost [%d,%d) leader-epoch %d->%d local-epoch=%d agreed-epoch=%d roundtrips=%d highest-hw=%d cause=%s",
		e.Topic, e.Partition, e.From, e.To, e.OldLeaderEpoch, e.NewLeaderEpoch,
		e.LocalEpoch, e.AgreedEpoch, e.Roundtrips, e.HighestHighWatermark, e.Cause)
	if e.Records != 0 || e.Bytes != 0 {
		fmt.Fprintf(&b, " records=%d bytes=%d", e.Records, e.Bytes)
	}
	return b.String()
}

func (e *GapEvent) String() string {
	s := fmt.Sprintf("gap %s/%d never-copied [%d,%d) leader-epoch=%d", e.Topic, e.Partition, e.From, e.To, e.LeaderEpoch)
	if e.Discarded {
		return s + fmt.Sprintf(" discarded [%d,%d)", e.DiscardedFrom, e.DiscardedTo)
	}
	return s + " history-kept"
}

func (e *ReconciledEvent) String() string {
	return fmt.Sprintf("reconciled %s/%d leader-epoch=%d log-end=%d roundtrips=%d cause=%s",
		e.Topic, e.Partition, e.LeaderEpoch, e.LogEndOffset, e.Roundtrips, e.Cause)
}

func (e *ConformanceEvent) String() string {
	return fmt.Sprintf("conformance %s/%d %s leader-epoch=%d: %s", e.Topic, e.Partition, e.Check, e.LeaderEpoch, e.Evidence)
}

// String renders rd one item a line, in the order the driver carries it
// out.
func (rd Ready) String() string {
	if rd.Empty() {
		return "(nothing)"
	}
	var b strings.Builder
	for _, a := range rd.Actions {
		fmt.Fprintf(&b, "action: %v\n", a)
	}
	for _, e := range rd.Events {
		fmt.Fprintf(&b, "event: %v\n", e)
	}
	if rd.Request != nil {
		fmt.Fprintf(&b, "send: %v\n", rd.Request)
	}
	if rd.RefreshMetadata {
		b.WriteString("refresh-metadata\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// String renders s on one line; the wake time is shown as a clock time
// (UTC) with milliseconds.
func (s Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d state=%s", s.Topic, s.Partition, s.State)
	if s.State == StateBackoff {
		fmt.Fprintf(&b, " resume=%s wake=%s", s.Resume, s.WakeAt.UTC().Format("15:04:05.000"))
	}
	if s.State == StateStorageBackoff {
		fmt.Fprintf(&b, " wake=%s storage-failures=%d", s.WakeAt.UTC().Format("15:04:05.000"), s.StorageFailures)
	}
	fmt.Fprintf(&b, " leader=%d leader-epoch=%d fetch-offset=%d leo=%d hw=%d highest-hw=%d leader-log-start=%d attempts=%d",
		s.Leader, s.LeaderEpoch, s.FetchOffset, s.LogEndOffset, s.HighWatermark, s.HighestHighWatermark,
		s.LeaderLogStartOffset, s.Attempts)
	if s.LastError != nil {
		fmt.Fprintf(&b, " err=%q", errName(s.LastError))
	}
	return b.String()
}

// errName is a Kafka error's code name, or the error text.
func errName(err error) string {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Message
	}
	return err.Error()
}
