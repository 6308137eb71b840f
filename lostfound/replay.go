package lostfound

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SourceHeader is the record header Replay adds to every record it
// produces, naming the lost record: "<topic>/<partition>/<offset>" (a
// topic name cannot hold '/'). Replay is idempotent through it: before
// producing, it reads the target topic and skips every lost record whose
// header is already there, so a replay that was interrupted, or run
// twice, never duplicates a record.
const SourceHeader = "kfollower-lost-source"

func sourceValue(topic string, partition int32, offset int64) string {
	return fmt.Sprintf("%s/%d/%d", topic, partition, offset)
}

// ReplayOptions say which lost records go where.
type ReplayOptions struct {
	// Client (required) reads Metadata and the target topic, and is the
	// template of the producer Replay creates (Client.Opts plus a manual
	// partitioner and acks=all; the producer stays idempotent unless Client
	// disabled it). It must not be a consumer (no ConsumeTopics, no group),
	// since the producer inherits its options.
	Client *kgo.Client
	// DataDir is the kfollower data dir (required); it is only read.
	DataDir string
	// Topics and Partitions select the lost+found events; empty means all.
	Topics     []string
	Partitions []int32
	// ToTopic is the topic to produce to (required); it must exist. Each
	// record goes to the partition with the number of its source partition,
	// or that number modulo the partition count when the target has fewer,
	// so each source partition keeps its order.
	ToTopic string
	// DryRun reads and decides everything but produces nothing.
	DryRun bool
	// IncludeUndecided also replays transactional records whose
	// transaction has no commit or abort marker in the lost range (its
	// outcome is unknown: it may never have committed). By default they
	// are left out and counted.
	IncludeUndecided bool
	// IncludeCauses also replays the events of these lost.json causes
	// that are not cluster loss (storage.Lost.ClusterLoss), such as
	// storage.CauseDiscardedOnGap; "all" replays every cause. By default
	// only cluster loss is replayed: the other events are listed, skipped.
	IncludeCauses []string
}

// AllCauses in ReplayOptions.IncludeCauses replays every event, whatever
// its cause.
const AllCauses = "all"

// replays reports whether an event of this cause is replayed.
func (o ReplayOptions) replays(l storage.Lost) bool {
	return l.ClusterLoss() || slices.Contains(o.IncludeCauses, AllCauses) || (l.Cause != "" && slices.Contains(o.IncludeCauses, l.Cause))
}

// ReplayEvent is what Replay did with one lost+found event.
type ReplayEvent struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	FirstOffset int64  `json:"firstOffset"`
	LastOffset  int64  `json:"lastOffset"`
	Dir         string `json:"dir"`
	// Cause is lost.json's (empty in files from before the field).
	Cause string `json:"cause,omitempty"`
	// Skipped is set when the event was not replayed because its cause is
	// not cluster loss (ReplayOptions.IncludeCauses); nothing else is
	// counted then.
	Skipped     bool  `json:"skipped,omitempty"`
	ToPartition int32 `json:"toPartition"`
	// Records is the number of data records in the lost batches (control
	// records excluded).
	Records int `json:"records"`
	// NotLost are records of the first saved batch below lost.json's from:
	// whole batches are saved, and the leader still has those.
	NotLost int `json:"notLost"`
	// Replayed were produced (or, in a dry run, would be).
	Replayed int `json:"replayed"`
	// AlreadyPresent were found on the target (an earlier replay).
	AlreadyPresent int `json:"alreadyPresent"`
	// Aborted belong to a transaction an abort marker in the lost range
	// ends; Undecided to one with no marker there (see IncludeUndecided).
	Aborted   int `json:"aborted"`
	Undecided int `json:"undecided"`
}

// ReplayReport is the result of Replay. Its exported fields are its JSON
// form.
type ReplayReport struct {
	ToTopic        string        `json:"toTopic"`
	DryRun         bool          `json:"dryRun"`
	Events         []ReplayEvent `json:"events"`
	Replayed       int           `json:"replayed"`
	AlreadyPresent int           `json:"alreadyPresent"`
	Aborted        int           `json:"aborted"`
	Undecided      int           `json:"undecided"`
}

// ExitCode is 0, success: a replay that failed returns an error instead.
func (r *ReplayReport) ExitCode() int { return 0 }

// WriteTable renders one line per event and a total.
func (r *ReplayReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	verb := "REPLAYED"
	if r.DryRun {
		verb = "WOULD REPLAY"
	}
	fmt.Fprintf(tw, "PARTITION\tOFFSETS\tCAUSE\tTO\tRECORDS\t%s\tPRESENT\tABORTED\tUNDECIDED\t\n", verb)
	for _, e := range r.Events {
		cause := cmp.Or(e.Cause, "-")
		if e.Skipped {
			fmt.Fprintf(tw, "%s-%d\t[%d..%d]\t%s\tskipped: not cluster loss (--include-cause %s replays it)\t\n",
				e.Topic, e.Partition, e.FirstOffset, e.LastOffset, cause, cause)
			continue
		}
		fmt.Fprintf(tw, "%s-%d\t[%d..%d]\t%s\t%s-%d\t%d\t%d\t%d\t%d\t%d\t\n", e.Topic, e.Partition, e.FirstOffset, e.LastOffset,
			cause, r.ToTopic, e.ToPartition, e.Records, e.Replayed, e.AlreadyPresent, e.Aborted, e.Undecided)
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t%d\t%d\t%d\t%d\t\n", r.Replayed, r.AlreadyPresent, r.Aborted, r.Undecided)
	return tw.Flush()
}

// Replay re-produces the records of the selected lost+found events to
// ToTopic: keys, values, headers and timestamps, plus SourceHeader. It is
// idempotent by reading the target first (see SourceHeader); two replays
// to one topic must not run at the same time. Records of aborted
// transactions and control records are never replayed.
func Replay(ctx context.Context, opts ReplayOptions) (*ReplayReport, error) {
	if opts.Client == nil {
		return nil, errors.New("lost replay: no Kafka client")
	}
	if opts.ToTopic == "" {
		return nil, errors.New("lost replay: no target topic (--to-topic)")
	}
	list, err := List(ListOptions{DataDir: opts.DataDir, Topics: opts.Topics, Partitions: opts.Partitions})
	if err != nil {
		return nil, err
	}
	meta, err := cluster.LoadMetadata(ctx, opts.Client, []string{opts.ToTopic})
	if err != nil {
		return nil, err
	}
	n, ok := meta.Partitions(opts.ToTopic)
	if !ok || n == 0 {
		if err := meta.TopicError(opts.ToTopic); err != nil {
			return nil, fmt.Errorf("lost replay: target topic %s: %w", opts.ToTopic, err)
		}
		return nil, fmt.Errorf("lost replay: target topic %s does not exist; create it first", opts.ToTopic)
	}
	present, err := readMarkers(ctx, opts.Client, opts.ToTopic, n, meta)
	if err != nil {
		return nil, err
	}
	rep := &ReplayReport{ToTopic: opts.ToTopic, DryRun: opts.DryRun}
	var out []*kgo.Record
	for _, ev := range list.Events {
		re := ReplayEvent{Topic: ev.Topic, Partition: ev.Partition, FirstOffset: ev.FirstOffset, LastOffset: ev.LastOffset,
			Dir: ev.Dir, ToPartition: ev.Partition}
		if ev.Partition >= n {
			re.ToPartition = ev.Partition % n
		}
		re.Cause = ev.Cause
		if !opts.replays(ev.Lost) {
			re.Skipped = true
			rep.Events = append(rep.Events, re)
			continue
		}
		recs, err := decodeLost(ev)
		if err != nil {
			return nil, err
		}
		d := decideTransactions(recs)
		re.Records, re.Aborted = d.data, d.aborted
		keep := d.keep
		if opts.IncludeUndecided {
			keep = d.keepWithUndecided
		} else {
			re.Undecided = d.undecided
		}
		keep = lostOnly(keep, ev.From, &re)
		for _, r := range keep {
			src := sourceValue(ev.Topic, ev.Partition, r.Offset)
			if present[src] {
				re.AlreadyPresent++
				continue
			}
			present[src] = true // the same range saved twice: once only
			re.Replayed++
			hs := append(slices.Clone(r.Headers), kgo.RecordHeader{Key: SourceHeader, Value: []byte(src)})
			out = append(out, &kgo.Record{Topic: opts.ToTopic, Partition: re.ToPartition,
				Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp})
		}
		rep.Events = append(rep.Events, re)
		rep.Replayed += re.Replayed
		rep.AlreadyPresent += re.AlreadyPresent
		rep.Aborted += re.Aborted
		rep.Undecided += re.Undecided
	}
	if opts.DryRun || len(out) == 0 {
		return rep, nil
	}
	if err := produceAll(ctx, opts.Client, out); err != nil {
		return rep, err
	}
	return rep, nil
}

// lostOnly drops the records below from, the first offset lost: the cut
// fell inside the first saved batch, and the leader has those records.
// They are counted in re.NotLost (and stay in re.Records: the counts are
// of whole saved batches).
func lostOnly(recs []*kgo.Record, from int64, re *ReplayEvent) []*kgo.Record {
	i := 0
	for i < len(recs) && recs[i].Offset < from {
		i++
	}
	re.NotLost = i
	return recs[i:]
}

// produceAll produces recs in order with a producer derived from cl (acks
// all, idempotent: no duplicates or reordering within a partition on
// retries), a chunk at a time.
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	p, err := kgo.NewClient(append(cl.Opts(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return fmt.Errorf("lost replay: creating a producer: %w", err)
	}
	defer p.Close()
	for start := 0; start < len(recs); start += 1000 {
		chunk := recs[start:min(len(recs), start+1000)]
		if err := p.ProduceSync(ctx, chunk...).FirstErr(); err != nil {
			return fmt.Errorf("lost replay: producing to %s (%d of %d records acknowledged before): %w", chunk[0].Topic, start, len(recs), err)
		}
	}
	return nil
}

// decodeLost decodes the saved segment of an event into records, control
// records included (decideTransactions needs the markers).
func decodeLost(ev Event) ([]*kgo.Record, error) {
	// Every saved segment, in offset order: a range larger than a segment
	// is saved as several (storage.Lost.Segments).
	var raw []byte
	path := filepath.Join(ev.Dir, ev.Segment)
	for _, seg := range ev.Segments {
		path = filepath.Join(ev.Dir, seg)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("lost replay: reading %s: %w", path, err)
		}
		raw = append(raw, b...)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition = ev.Partition
	rp.RecordBatches = raw
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		KeepControlRecords: true, Topic: ev.Topic, Partition: ev.Partition,
	}, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return nil, fmt.Errorf("lost replay: decoding %s: %w", path, fp.Err)
	}
	return fp.Records, nil
}

// readMarkers reads every partition of topic from its log start to its
// high watermark with raw Fetch requests (no consumer state in the
// caller's client) and returns the SourceHeader values found.
func readMarkers(ctx context.Context, cl *kgo.Client, topic string, n int32, meta *cluster.Metadata) (map[string]bool, error) {
	present := map[string]bool{}
	byBroker := map[int32][]cluster.Query{}
	pms := map[int32]cluster.Partition{}
	for p := range n {
		tp := wire.TopicPartition{Topic: topic, Partition: p}
		pm, err := meta.Lookup(tp)
		if err != nil {
			return nil, fmt.Errorf("lost replay: reading target %s: %w", tp, err)
		}
		pms[p] = pm
		byBroker[pm.Leader] = append(byBroker[pm.Leader], cluster.Query{TP: tp, CurrentEpoch: pm.LeaderEpoch})
	}
	starts := cluster.LogStartOffsets(ctx, cl, byBroker)
	for p := range n {
		tp := wire.TopicPartition{Topic: topic, Partition: p}
		a := starts[tp]
		if a.Err != nil {
			return nil, fmt.Errorf("lost replay: reading target: %w", a.Err)
		}
		for off := a.Offset; ; {
			fp, err := cluster.Fetch(ctx, cl, tp, pms[p], off, 16<<20)
			if err != nil {
				return nil, fmt.Errorf("lost replay: reading target: %w", err)
			}
			dec, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: p, Offset: off}, fp, kgo.DefaultDecompressor(), nil)
			if dec.Err != nil {
				return nil, fmt.Errorf("lost replay: reading target %s at %d: %w", tp, off, dec.Err)
			}
			c, err := cluster.ChunkOf(tp, fp, off)
			if err != nil {
				return nil, err
			}
			if len(c.Headers) == 0 {
				break
			}
			for _, r := range dec.Records {
				for _, h := range r.Headers {
					if h.Key == SourceHeader {
						present[string(h.Value)] = true
					}
				}
			}
			off = c.Next
		}
	}
	return present, nil
}
