package lostfound

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SourceHeader is the record header Replay adds to every record it
// produces, naming the lost record as a Source:
// "<topic>/<partition>/<epoch>/<offset>", the partition leader epoch of the
// record's batch and its offset (a topic name cannot hold '/'). Replay is
// idempotent through it: before producing, it reads the target topic and
// skips every lost record whose header is already there, so a replay that
// was interrupted, or run twice, never duplicates a record.
//
// The epoch is there because an offset alone does not name a record: after
// an unclean election the new leader writes other records at the offsets
// it lost, in a higher epoch, and those can be lost in turn, so
// lost+found can hold two different records at one offset. A record is
// written in one epoch only, so the epoch and offset name it, and a range
// saved twice (the same batches, after a crash) names the same records and
// is replayed once.
const SourceHeader = "kfollower-lost-source"

// Source names a lost record: its partition, the leader epoch of its batch
// and its offset. Its String form is SourceHeader's value.
type Source struct {
	Topic     string
	Partition int32
	Epoch     int32
	Offset    int64
	// Legacy marks a value written before the epoch was part of it,
	// "<topic>/<partition>/<offset>" (Epoch is then -1). Such a marker
	// stands for the one record it was replayed from, which Replay finds
	// by its content (see legacyMarkers).
	Legacy bool
}

func (s Source) String() string {
	if s.Legacy {
		return fmt.Sprintf("%s/%d/%d", s.Topic, s.Partition, s.Offset)
	}
	return fmt.Sprintf("%s/%d/%d/%d", s.Topic, s.Partition, s.Epoch, s.Offset)
}

// ParseSource reads a SourceHeader value, in either form.
func ParseSource(v string) (Source, bool) {
	f := strings.Split(v, "/")
	if len(f) != 3 && len(f) != 4 || f[0] == "" {
		return Source{}, false
	}
	s := Source{Topic: f[0], Epoch: -1, Legacy: len(f) == 3}
	p, err := strconv.ParseInt(f[1], 10, 32)
	if err != nil {
		return Source{}, false
	}
	s.Partition = int32(p)
	if !s.Legacy {
		e, err := strconv.ParseInt(f[2], 10, 32)
		if err != nil {
			return Source{}, false
		}
		s.Epoch = int32(e)
	}
	if s.Offset, err = strconv.ParseInt(f[len(f)-1], 10, 64); err != nil {
		return Source{}, false
	}
	return s, true
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
	mk, err := readMarkersSettled(ctx, opts.Client, opts.ToTopic, n, meta)
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
			src := Source{Topic: ev.Topic, Partition: ev.Partition, Epoch: r.LeaderEpoch, Offset: r.Offset}.String()
			if mk.present[src] || mk.takeLegacy(ev.Topic, ev.Partition, r) {
				mk.present[src] = true
				re.AlreadyPresent++
				continue
			}
			mk.present[src] = true // the same range saved twice: once only
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

// markers are the SourceHeader values found on the target topic.
type markers struct {
	// present holds the values naming an epoch.
	present map[string]bool
	// legacy counts the records that carry a value without an epoch, by
	// that value and a digest of their content (contentDigest). A replay
	// before the epoch was named replayed, of the records lost at one
	// offset, only the first one it met and took the others for replayed
	// already; the digest tells which one a marker stands for.
	legacy map[string]map[[sha256.Size]byte]int
}

// takeLegacy reports whether r, lost from topic-partition, is the record an
// old-form marker stands for, and if so uses that marker up: it stands for
// one record only, so another record lost at the same offset (in another
// epoch) is still replayed.
func (m *markers) takeLegacy(topic string, partition int32, r *kgo.Record) bool {
	byDigest := m.legacy[Source{Topic: topic, Partition: partition, Offset: r.Offset, Legacy: true}.String()]
	d := contentDigest(r)
	if byDigest[d] == 0 {
		return false
	}
	byDigest[d]--
	return true
}

// contentDigest digests what a replay copies of a record: key, value and
// headers, SourceHeader left out. Not the timestamp, which a target topic
// with LogAppendTime rewrites.
func contentDigest(r *kgo.Record) [sha256.Size]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [9]byte
		if b != nil {
			n[0] = 1
		}
		binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(r.Key)
	field(r.Value)
	for _, hd := range r.Headers {
		if hd.Key != SourceHeader {
			field([]byte(hd.Key))
			field(hd.Value)
		}
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// readMarkersSettled is readMarkers, tried again with fresh metadata while
// the target answers a retriable error, for up to markersSettle. A topic
// just created is in the Metadata of one broker before its leader has
// applied it (KRaft brokers apply the metadata log each at its own pace),
// and the leader answers NOT_LEADER_OR_FOLLOWER until then: `lost replay`
// run right after `kafka-topics --create` met it.
func readMarkersSettled(ctx context.Context, cl *kgo.Client, topic string, n int32, meta *cluster.Metadata) (*markers, error) {
	ctx, cancel := context.WithTimeout(ctx, markersSettle)
	defer cancel()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		mk, err := readMarkers(ctx, cl, topic, n, meta)
		if err == nil || !kerr.IsRetriable(err) {
			return mk, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		if m, merr := cluster.LoadMetadata(ctx, cl, []string{topic}); merr == nil {
			meta = m
		}
	}
}

// markersSettle is how long readMarkersSettled waits for the target.
const markersSettle = 30 * time.Second

// readMarkers reads every partition of topic from its log start to its
// high watermark with raw Fetch requests (no consumer state in the
// caller's client) and returns the SourceHeader values found.
func readMarkers(ctx context.Context, cl *kgo.Client, topic string, n int32, meta *cluster.Metadata) (*markers, error) {
	mk := &markers{present: map[string]bool{}, legacy: map[string]map[[sha256.Size]byte]int{}}
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
					if h.Key != SourceHeader {
						continue
					}
					src, ok := ParseSource(string(h.Value))
					switch {
					case !ok:
						// Not ours to interpret: it names no lost record.
					case src.Legacy:
						v := src.String()
						if mk.legacy[v] == nil {
							mk.legacy[v] = map[[sha256.Size]byte]int{}
						}
						mk.legacy[v][contentDigest(r)]++
					default:
						mk.present[src.String()] = true
					}
				}
			}
			off = c.Next
		}
	}
	return mk, nil
}
