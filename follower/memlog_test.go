package follower

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// memLog is the in-memory LocalLog the tests use: a log start, a log end and a
// leader-epoch cache with exactly Kafka's LeaderEpochFileCache rules
// (endOffsetFor, assign, truncateFromEnd). It holds no records: a batch is an
// epoch and a record count.
type memLog struct {
	start, leo int64
	epochs     []epochEntry // strictly increasing in epoch and start offset
	lostFound  [][2]int64   // ranges moved to lost+found, in order
}

type epochEntry struct {
	epoch int32
	start int64
}

// memBatch is a fake record batch: count records of one epoch.
type memBatch struct {
	epoch int32
	count int64
}

func (l *memLog) LogStartOffset() int64 { return l.start }
func (l *memLog) LogEndOffset() int64   { return l.leo }

func (l *memLog) LatestEpoch() (int32, bool) {
	if len(l.epochs) == 0 {
		return 0, false
	}
	return l.epochs[len(l.epochs)-1].epoch, true
}

// EndOffsetForEpoch is LeaderEpochFileCache.endOffsetFor(epoch, LEO),
// pinned to Kafka's answers by TestMemLogEndOffsetFor.
func (l *memLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	if epoch == UndefinedEpoch {
		return UndefinedEpoch, UndefinedOffset
	}
	if latest, ok := l.LatestEpoch(); ok && latest == epoch {
		return epoch, l.leo
	}
	// higherEntry: the smallest entry with a larger epoch.
	hi := -1
	for i, e := range l.epochs {
		if e.epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if hi == 0 {
		// floorEntry is null: below the first epoch.
		return epoch, l.epochs[0].start
	}
	return l.epochs[hi-1].epoch, l.epochs[hi].start
}

// assign is LeaderEpochFileCache.assign.
func (l *memLog) assign(epoch int32, start int64) {
	if n := len(l.epochs); n > 0 {
		last := l.epochs[n-1]
		if epoch == last.epoch && start >= last.start {
			return
		}
	}
	for n := len(l.epochs); n > 0; n = len(l.epochs) {
		last := l.epochs[n-1]
		if last.epoch < epoch && last.start < start {
			break
		}
		l.epochs = l.epochs[:n-1]
	}
	l.epochs = append(l.epochs, epochEntry{epoch, start})
}

// truncateTo is UnifiedLog.truncateTo with truncateFromEnd on the cache:
// below the log start it becomes truncateFully.
func (l *memLog) truncateTo(off int64) {
	if off >= l.leo {
		return
	}
	if off < l.start {
		l.truncateFully(off)
		return
	}
	l.leo = off
	for n := len(l.epochs); n > 0 && l.epochs[n-1].start >= off; n = len(l.epochs) {
		l.epochs = l.epochs[:n-1]
	}
}

func (l *memLog) truncateFully(off int64) {
	l.start, l.leo, l.epochs = off, off, nil
}

// appendBatches appends batches starting at base (>= LEO: a hole after a
// kept retention gap is allowed, as after compaction).
func (l *memLog) appendBatches(base int64, bs []memBatch) error {
	if base < l.leo {
		return fmt.Errorf("append at %d below log end %d", base, l.leo)
	}
	if l.leo == l.start && len(l.epochs) == 0 {
		l.start = base
	}
	off := base
	for _, b := range bs {
		l.assign(b.epoch, off)
		off += b.count
	}
	l.leo = off
	return nil
}

func (l *memLog) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log start=%d leo=%d epochs=", l.start, l.leo)
	if len(l.epochs) == 0 {
		b.WriteString("none")
	}
	for i, e := range l.epochs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d", e.epoch, e.start)
	}
	for _, r := range l.lostFound {
		fmt.Fprintf(&b, " lost+found=[%d,%d)", r[0], r[1])
	}
	return b.String()
}

// encodeBatches and decodeBatches turn fake batches into the opaque Records
// bytes a FetchReply carries: "5x3,6x2" is a batch of 3 records in epoch 5
// then 2 in epoch 6.
func encodeBatches(bs []memBatch) []byte {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%dx%d", b.epoch, b.count)
	}
	return []byte(strings.Join(parts, ","))
}

func decodeBatches(s string) ([]memBatch, error) {
	var bs []memBatch
	for part := range strings.SplitSeq(s, ",") {
		e, c, ok := strings.Cut(strings.TrimSpace(part), "x")
		if !ok {
			return nil, fmt.Errorf("batch %q: want EPOCHxCOUNT", part)
		}
		ep, err := strconv.ParseInt(e, 10, 32)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("batch %q: bad count", part)
		}
		bs = append(bs, memBatch{int32(ep), n})
	}
	return bs, nil
}

// endOffsetForTable holds Kafka's endOffsetFor answers. storage's
// TestEndOffsetForTable reads the same file for storage.Epochs.
const endOffsetForTable = "testdata/end_offset_for.txt"

// TestMemLogEndOffsetFor pins memLog, which every story and the oracle's
// leader answer through, to Kafka's LeaderEpochFileCache: assign replays
// each case's history, EndOffsetForEpoch must give Kafka's answer. With
// storage's test over the same file, memLog and storage.Epochs cannot
// disagree without one of them failing.
func TestMemLogEndOffsetFor(t *testing.T) {
	datadriven.RunTest(t, endOffsetForTable, func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "end-offset-for" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		if d.Rewrite {
			d.Fatalf(t, "%s holds Kafka's answers; it is not rewritten from an implementation", endOffsetForTable)
		}
		l := &memLog{leo: argInt(t, d, "leo")}
		for _, e := range epochLines(t, d) {
			l.assign(e.epoch, e.start)
		}
		found, end := l.EndOffsetForEpoch(int32(argInt(t, d, "epoch")))
		return fmt.Sprintf("(%d, %d)", found, end)
	})
}
