package audit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kgo"
)

// VerifyOptions select what Verify compares.
type VerifyOptions struct {
	// Client sends Metadata, ListOffsets, OffsetForLeaderEpoch and Fetch
	// requests; any kgo client of the cluster will do (Verify only sends
	// raw requests through it; no consumer options needed).
	Client *kgo.Client
	// DataDir is the kfollower data dir; it is only read.
	DataDir string
	// Topics narrows the check; empty means every partition directory
	// found in DataDir.
	Topics []string
	// Partitions narrows it further; empty means every partition.
	Partitions []int32
	// FetchMaxBytes bounds each Fetch (default 32 MiB; brokers cap it at
	// fetch.max.bytes, 55 MiB by default).
	FetchMaxBytes int32
	// Parallel is how many partitions are verified at once (default 4).
	Parallel int
	// Progress, if set, is called after each compared chunk, from the
	// goroutine verifying that partition (so from several at once).
	Progress func(VerifyProgress)
}

// VerifyProgress reports how far one partition's comparison got.
type VerifyProgress struct {
	Topic     string
	Partition int32
	// Offset is the end of the range verified so far; End the local log
	// end (the comparison stops there).
	Offset, End int64
	// Bytes is how many local batch bytes were compared so far.
	Bytes int64
}

// BatchInfo is what Verify compares of a batch.
type BatchInfo struct {
	BaseOffset int64  `json:"baseOffset"`
	LastOffset int64  `json:"lastOffset"`
	Epoch      int32  `json:"epoch"`
	CRC        uint32 `json:"crc"`
}

func batchInfo(h batch.Header) *BatchInfo {
	return &BatchInfo{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Epoch: h.PartitionLeaderEpoch, CRC: h.CRC}
}

func (b *BatchInfo) String() string {
	if b == nil {
		return "none"
	}
	return fmt.Sprintf("[%d..%d] epoch %d crc %#08x", b.BaseOffset, b.LastOffset, b.Epoch, b.CRC)
}

// Kinds of divergence.
const (
	// DivergedBatch: the leader's batch at this offset differs in its
	// offsets, leader epoch or CRC. Same offsets and epoch with another
	// CRC can also be the leader's log cleaner rewriting a compacted
	// topic's batch after we copied it.
	DivergedBatch = "batch"
	// DivergedEpoch: above the leader's high watermark (so not fetchable
	// yet), the leader's epoch sequence names another epoch for these
	// offsets, or ends before them (KIP-101: the same epoch at the same
	// offset means the same batch).
	DivergedEpoch = "epoch"
	// DivergedMissing: the leader's log ends before this offset.
	DivergedMissing = "missing"
	// DivergedCorrupt: the local batch fails its own checks (CRC, length).
	DivergedCorrupt = "corrupt"
	// DivergedTopicID: partition.metadata names another topic id than the
	// cluster's: the topic was deleted and created again.
	DivergedTopicID = "topic-id"
)

// Divergence is the first place the local copy and the leader disagree.
type Divergence struct {
	Offset int64      `json:"offset"`
	Kind   string     `json:"kind"`
	Local  *BatchInfo `json:"local,omitempty"`
	Leader *BatchInfo `json:"leader,omitempty"`
	Detail string     `json:"detail"`
}

// Partition statuses.
const (
	StatusMatch    = "match"
	StatusDiverged = "diverged"
	StatusError    = "error"
)

// PartitionVerify is one partition's result. Offset ranges are half-open,
// [from, to).
type PartitionVerify struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Status is StatusMatch, StatusDiverged (Divergence or EpochsParted
	// set) or StatusError.
	Status      string `json:"status"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leaderEpoch"`

	LocalLogStart       int64 `json:"localLogStart"`
	LocalLogEnd         int64 `json:"localLogEnd"`
	LeaderLogStart      int64 `json:"leaderLogStart"`
	LeaderHighWatermark int64 `json:"leaderHighWatermark"`
	LeaderLogEnd        int64 `json:"leaderLogEnd"`

	// VerifiedFrom..VerifiedTo were compared batch by batch and match:
	// Batches batches, Bytes bytes.
	VerifiedFrom int64 `json:"verifiedFrom"`
	VerifiedTo   int64 `json:"verifiedTo"`
	Batches      int64 `json:"batches"`
	Bytes        int64 `json:"bytes"`
	// SkippedTo: local batches in LocalLogStart..SkippedTo lie below the
	// leader's log start (retention) and cannot be compared.
	SkippedTo int64 `json:"skippedTo,omitempty"`
	// UnverifiedFrom: local batches from here to LocalLogEnd lie above the
	// leader's high watermark (a consumer cannot fetch them yet, e.g. just
	// after a clean leader change); the leader's epoch sequence names the
	// same epochs for them, which KIP-101 makes enough for the same data,
	// but their bytes were not compared. -1 when there are none.
	UnverifiedFrom int64 `json:"unverifiedFrom"`

	Divergence *Divergence `json:"divergence,omitempty"`
	// EpochsPrefix says whether the local leader-epoch-checkpoint is a
	// prefix of the leader's sequence (see Lineage); EpochsParted says
	// where it is not.
	EpochsPrefix bool     `json:"epochsPrefix"`
	EpochsParted *Parting `json:"epochsParted,omitempty"`
	LocalEpochs  []Epoch  `json:"localEpochs"`
	LeaderEpochs []Epoch  `json:"leaderEpochs"`

	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// VerifyReport is the result of Verify. Its exported fields are its JSON
// form.
type VerifyReport struct {
	Partitions []PartitionVerify `json:"partitions"`
	Seconds    float64           `json:"seconds"`
}

// ExitCode is ExitMismatch if any partition diverged, else ExitError if
// any could not be checked, else ExitOK. A divergence wins over an error:
// it is a proven finding, the error only a missing one.
func (r *VerifyReport) ExitCode() int {
	code := ExitOK
	for _, p := range r.Partitions {
		switch p.Status {
		case StatusDiverged:
			return ExitMismatch
		case StatusError:
			code = ExitError
		}
	}
	return code
}

// WriteTable renders one line per partition and, below it, the first
// divergence, the epoch parting, or the error.
func (r *VerifyReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATUS\tLOCAL\tVERIFIED\tBATCHES\tBYTES\tLEADER\tHW\tEPOCHS\t")
	for _, p := range r.Partitions {
		epochs := "prefix"
		if p.EpochsParted != nil {
			epochs = fmt.Sprintf("part at %d", p.EpochsParted.Offset)
		} else if p.Status == StatusError {
			epochs = "-"
		}
		verified := "-"
		if p.VerifiedTo > p.VerifiedFrom && p.VerifiedFrom >= 0 {
			verified = fmt.Sprintf("[%d, %d)", p.VerifiedFrom, p.VerifiedTo)
		}
		fmt.Fprintf(tw, "%s-%d\t%s\t[%d, %d)\t%s\t%d\t%d\t%d (epoch %d)\t%d\t%s\t\n", p.Topic, p.Partition, p.Status,
			p.LocalLogStart, p.LocalLogEnd, verified, p.Batches, p.Bytes, p.Leader, p.LeaderEpoch, p.LeaderHighWatermark, epochs)
		if p.SkippedTo > 0 {
			fmt.Fprintf(tw, "  [%d, %d) below the leader's log start %d: not compared\n", p.LocalLogStart, p.SkippedTo, p.LeaderLogStart)
		}
		if p.UnverifiedFrom >= 0 {
			to := p.LocalLogEnd
			if p.Divergence != nil {
				to = p.Divergence.Offset
			}
			fmt.Fprintf(tw, "  [%d, %d) above the leader's high watermark: epochs agree, bytes not compared\n", p.UnverifiedFrom, to)
		}
		if d := p.Divergence; d != nil {
			fmt.Fprintf(tw, "  first divergence at offset %d (%s): local %s, leader %s; %s\n", d.Offset, d.Kind, d.Local, d.Leader, d.Detail)
		}
		if pt := p.EpochsParted; pt != nil {
			fmt.Fprintf(tw, "  epochs part at offset %d: %s (local %v, leader %v)\n", pt.Offset, pt.Reason, fmtEpochs(p.LocalEpochs), fmtEpochs(p.LeaderEpochs))
		}
		if p.Error != "" {
			fmt.Fprintf(tw, "  error: %s\n", p.Error)
		}
	}
	return tw.Flush()
}

func fmtEpochs(es []Epoch) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "(%d,%d)", e.Epoch, e.StartOffset)
	}
	return b.String()
}
