package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/judges"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The serving tests' topics: judged has every kind of record a client must
// read back (four codecs, headers, null and empty keys and values,
// committed and aborted transactions), judged-compacted the gaps a log
// cleaner leaves.
const (
	judgedTopic    = "judged"
	compactedTopic = "judged-compacted"
)

// TestServeJudges runs the kfollower binary with --serve over a copy of
// both topics and has clients that no one here wrote read every partition
// from it: each must get what the cluster holds (offsets, keys, values,
// headers, timestamps, in offset order) under read_uncommitted; Kafka's
// GetOffsetShell must get the cluster's offsets and BrokerApiVersionsCommand
// every API kfollower advertises; a write by each client must fail at once
// with an authorization error and leave the data dir byte-unchanged.
//
// Its read_committed judges run here too, on the same cluster (starting
// Kafka and following it is most of the time), but their verdicts are
// TestServeJudgesReadCommitted's to give.
func TestServeJudges(t *testing.T) {
	start := time.Now()
	// Until the read_committed judges have run here, a failure of this
	// test is TestServeJudgesReadCommitted's too: it does not start a
	// second cluster after this one failed.
	rcVerdicts.Lock()
	rcVerdicts.failures, rcVerdicts.ran = []string{"TestServeJudges failed before its read_committed judges ran"}, true
	rcVerdicts.Unlock()
	f := startJudgesFixture(t)
	ctx := context.Background()
	for _, j := range readJudges {
		t.Run(j.name, func(t *testing.T) {
			begin := time.Now()
			got, err := j.read(ctx, f, readUncommitted)
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range f.verdicts(j.name, readUncommitted, got) {
				t.Error(msg)
			}
			t.Logf("%s read %d partitions in %v", j.name, len(got), time.Since(begin).Round(time.Millisecond))
		})
	}
	t.Run("GetOffsetShell", func(t *testing.T) { judgeGetOffsetShell(t, f) })
	t.Run("BrokerApiVersionsCommand", func(t *testing.T) { judgeBrokerAPIVersions(ctx, t, f) })
	t.Run("writes refused", func(t *testing.T) { judgeWrites(ctx, t, f) })

	// Recorded, not asserted: TestServeJudgesReadCommitted reports them.
	failures := f.readCommittedVerdicts(ctx)
	rcVerdicts.Lock()
	rcVerdicts.failures = failures
	rcVerdicts.Unlock()
	t.Logf("TestServeJudges took %v", time.Since(start).Round(time.Second))
}

// TestServeJudgesReadCommitted: every judge reading under read_committed
// (librdkafka's default) gets exactly the cluster's committed records, the
// aborted ones skipped, and ListOffsets latest under read_committed is the
// cluster's last stable offset. It reports what TestServeJudges's run of
// these judges found, or, run alone, starts the cluster and kfollower
// itself.
func TestServeJudgesReadCommitted(t *testing.T) {
	rcVerdicts.Lock()
	failures, ran := rcVerdicts.failures, rcVerdicts.ran
	rcVerdicts.failures, rcVerdicts.ran = nil, false
	rcVerdicts.Unlock()
	if !ran {
		failures = startJudgesFixture(t).readCommittedVerdicts(context.Background())
	}
	for _, msg := range failures {
		t.Error(msg)
	}
}

// rcVerdicts hands TestServeJudges's read_committed verdicts to
// TestServeJudgesReadCommitted, which runs after it (tests run in source
// order) and reports them.
var rcVerdicts struct {
	sync.Mutex
	ran      bool
	failures []string
}

// isolation is a consumer's isolation level as the judges name it.
type isolation string

const (
	readUncommitted isolation = "read_uncommitted"
	readCommitted   isolation = "read_committed"
)

// tp names a partition of the fixture.
type tp struct {
	topic string
	p     int32
}

func (x tp) String() string { return fmt.Sprintf("%s-%d", x.topic, x.p) }

// rec is a record as a consumer sees it; nil is null.
type rec struct {
	Offset     int64
	Timestamp  int64 // milliseconds
	Key, Value *string
	Headers    []hdr
}

type hdr struct {
	Key   string
	Value *string
}

func str(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func recOf(r *kgo.Record) rec {
	out := rec{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: str(r.Key), Value: str(r.Value)}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, hdr{h.Key, str(h.Value)})
	}
	return out
}

func (r rec) equal(o rec) bool {
	same := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return r.Offset == o.Offset && r.Timestamp == o.Timestamp && same(r.Key, o.Key) && same(r.Value, o.Value) &&
		slices.EqualFunc(r.Headers, o.Headers, func(a, b hdr) bool { return a.Key == b.Key && same(a.Value, b.Value) })
}

func (r rec) String() string {
	q := func(s *string) string {
		if s == nil {
			return "null"
		}
		return strconv.Quote(*s)
	}
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+q(h.Value))
	}
	return fmt.Sprintf("offset %d ts %d key %s value %s headers [%s]", r.Offset, r.Timestamp, q(r.Key), q(r.Value), strings.Join(hs, " "))
}

// firstDifference describes where got (from kfollower) first departs
// from want (from the cluster), or is "" when they are the same.
func firstDifference(got, want []rec) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("first difference at offset %d: kfollower gave no record after its %d, the cluster\n  %v", want[i].Offset, len(got), want[i])
		case i >= len(want):
			return fmt.Sprintf("first difference at offset %d: kfollower gave\n  %v\nafter the cluster's last record (%d)", got[i].Offset, got[i], len(want))
		case !got[i].equal(want[i]):
			return fmt.Sprintf("first difference at offset %d: kfollower gave\n  %v\nthe cluster\n  %v", min(got[i].Offset, want[i].Offset), got[i], want[i])
		}
	}
	return ""
}

// judgesFixture is one cluster, the records written to it, and a
// kfollower process serving its copy of them.
type judgesFixture struct {
	c     *kafka.Cluster
	addr  string // kfollower's --serve endpoint
	data  string // its data dir
	kf    *kfollowerProcess
	parts []tp
	// ends are the cluster's high watermarks, which no record is written
	// past once the fixture is up.
	ends map[tp]int64
	// want is what a franz-go consumer read from the cluster, by isolation.
	want map[isolation]map[tp][]rec
	// times are timestamps worth asking ListOffsets for.
	times []int64
	// future is where the record with the largest timestamp is, which is
	// neither the first nor the last record of its partition.
	future tp
	// futureOffset is its offset.
	futureOffset int64
}

// startJudgesFixture starts a cluster, writes both topics, compacts
// judged-compacted, starts kfollower with --serve on them and waits until
// it serves every partition up to the cluster's high watermark.
func startJudgesFixture(t *testing.T) *judgesFixture {
	t.Helper()
	ctx := context.Background()
	bin := buildKfollower(t)
	if _, err := judges.Ensure(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	c := kafka.Start(t, kafka.Options{Config: map[string]string{"log.cleaner.backoff.ms": "200"}})
	f := &judgesFixture{c: c, ends: map[tp]int64{}, want: map[isolation]map[tp][]rec{}}
	c.CreateTopic(ctx, judgedTopic, rf3x4[:3], nil)
	// As TestFollowWhileProducing: segments roll by size only, so after
	// compactBeforeFollowing nothing is left for the cleaner to clean.
	c.CreateTopic(ctx, compactedTopic, rf3x4[:1], map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "0", "delete.retention.ms": "100",
	})
	for p := range int32(3) {
		f.parts = append(f.parts, tp{judgedTopic, p})
	}
	f.parts = append(f.parts, tp{compactedTopic, 0})
	compactBeforeFollowing(ctx, t, c, compactedTopic, 0)
	t.Logf("judges fixture: cluster up and %s compacted in %v", compactedTopic, time.Since(begin).Round(time.Second))
	written, aborted := f.produce(ctx, t)
	t.Logf("judges fixture: cluster up and written in %v", time.Since(begin).Round(time.Second))

	ends, err := c.Admin().ListEndOffsets(ctx, judgedTopic, compactedTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range f.parts {
		o, ok := ends.Lookup(x.topic, x.p)
		if !ok || o.Err != nil {
			t.Fatalf("the cluster's end offset of %v: %v", x, o.Err)
		}
		f.ends[x] = o.Offset
	}
	for _, iso := range []isolation{readUncommitted, readCommitted} {
		got, err := franzRead(ctx, c.Bootstrap(), f, iso)
		if err != nil {
			t.Fatalf("reading the cluster: %v", err)
		}
		f.want[iso] = got
	}
	// The reference is what was written, and read_committed skips exactly
	// the aborted records: otherwise the judges would be held to a wrong
	// answer.
	for x, rs := range written {
		if d := firstDifference(f.want[readUncommitted][x], rs); d != "" {
			t.Fatalf("%v: franz-go read from the cluster other than what was written: %s", x, d)
		}
		var committed []rec
		for _, r := range rs {
			if !aborted[x][r.Offset] {
				committed = append(committed, r)
			}
		}
		if len(aborted[x]) == 0 || len(committed) == len(rs) {
			t.Fatalf("%v: no aborted records to skip", x)
		}
		if d := firstDifference(f.want[readCommitted][x], committed); d != "" {
			t.Fatalf("%v: franz-go read_committed from the cluster other than the committed records: %s", x, d)
		}
	}
	gaps := false
	for i, r := range f.want[readUncommitted][tp{compactedTopic, 0}] {
		gaps = gaps || r.Offset != int64(i)
	}
	if !gaps {
		t.Fatalf("%s-0: the cluster serves no compacted gaps", compactedTopic)
	}

	f.data = t.TempDir()
	f.addr = freeLoopback(t)
	f.kf = startKfollower(t, bin, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","),
		"--topics", judgedTopic+","+compactedTopic, "--data-dir", f.data, "--serve", f.addr,
		"--http-listen", freeLoopback(t))
	f.waitServed(ctx, t)
	t.Logf("judges fixture: up in %v", time.Since(begin).Round(time.Second))
	return f
}

// produce writes judged's records, each with its own timestamp, and a few
// more to judged-compacted after its cleaning, and returns judged's
// records by partition, in offset order, and the offsets written in
// aborted transactions.
func (f *judgesFixture) produce(ctx context.Context, t *testing.T) (map[tp][]rec, map[tp]map[int64]bool) {
	t.Helper()
	// Half an hour back, two milliseconds apart: ListOffsets by timestamp
	// has timestamps no record carries to look between; the broker takes
	// CreateTime up to an hour in the future and any time in the past.
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	seq := int64(0)
	// mk is record i of a batch: null and empty keys and values, headers
	// with null and empty values, none at all; nothing a client's text
	// output could confuse (tabs, commas, colons, the word null).
	mk := func(p int32, tag string, i int) *kgo.Record {
		seq++
		r := &kgo.Record{Partition: p, Timestamp: time.UnixMilli(base + 2*seq),
			Key:     fmt.Appendf(nil, "k-%s-%d", tag, i),
			Value:   fmt.Appendf(nil, "value %s %d of partition %d compressible compressible compressible", tag, i, p),
			Headers: []kgo.RecordHeader{{Key: "tag", Value: []byte(tag)}, {Key: "i", Value: fmt.Appendf(nil, "%d", i)}}}
		switch i % 6 {
		case 0:
			r.Headers = nil
		case 1:
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "nil"}, kgo.RecordHeader{Key: "empty", Value: []byte{}})
		case 2:
			r.Key = nil
		case 3:
			r.Value = nil
		case 4:
			r.Value = []byte{}
		case 5:
			r.Key = []byte{}
		}
		return r
	}
	produceSync := func(cl *kgo.Client, rs []*kgo.Record) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil {
			t.Fatalf("producing to %s: %v", judgedTopic, err)
		}
	}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl := f.c.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(judgedTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
		t.Cleanup(cl.Close)
		return cl
	}
	var all []*kgo.Record
	aborted := map[tp]map[int64]bool{}

	// One batch per codec per partition (kgo makes one batch of what one
	// ProduceSync gives a partition while nothing else is in flight).
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for ci, codec := range codecs {
		cl := client(kgo.ProducerBatchCompression(codec))
		var rs []*kgo.Record
		for p := range int32(3) {
			for i := range 12 {
				r := mk(p, fmt.Sprintf("codec%d", ci), i)
				if ci == 1 && p == 1 && i == 5 {
					// The largest timestamp, inside a gzip batch in the
					// middle of the log: ListOffsets -3 must find it there.
					// Later than the transaction markers' broker time.
					r.Timestamp = time.Now().Add(10 * time.Minute)
				}
				rs = append(rs, r)
			}
		}
		produceSync(cl, rs)
		all = append(all, rs...)
	}

	// Transactions over all three partitions, committed and aborted in
	// turn, zstd; while the second one (aborted) is open, plain records
	// land between its records, which read_committed keeps.
	plain := client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	tx := client(kgo.TransactionalID("kfollower-judges"), kgo.TransactionTimeout(30*time.Second),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	for n, commit := range []bool{true, false, true, false} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatalf("transaction %d: %v", n, err)
		}
		var inTx []*kgo.Record
		send := func(part string) {
			t.Helper()
			var rs []*kgo.Record
			for p := range int32(3) {
				for i := range 5 {
					rs = append(rs, mk(p, fmt.Sprintf("txn%d%s", n, part), i))
				}
			}
			produceSync(tx, rs)
			inTx = append(inTx, rs...)
			all = append(all, rs...)
		}
		send("a")
		if n == 1 {
			var rs []*kgo.Record
			for p := range int32(3) {
				for i := range 4 {
					rs = append(rs, mk(p, "between", i))
				}
			}
			produceSync(plain, rs)
			all = append(all, rs...)
		}
		send("b")
		ectx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := tx.EndTransaction(ectx, kgo.TransactionEndTry(commit))
		cancel()
		if err != nil {
			t.Fatalf("ending transaction %d (commit %v): %v", n, commit, err)
		}
		// The coordinator writes the markers after EndTxn has returned
		// (TransactionMarkerChannelManager): wait for them, so the
		// records written next come after them.
		f.waitStable(ctx, t)
		if !commit {
			for _, r := range inTx {
				x := tp{judgedTopic, r.Partition}
				if aborted[x] == nil {
					aborted[x] = map[int64]bool{}
				}
				aborted[x][r.Offset] = true
			}
		}
	}
	// Plain records last, so every partition's last offset is a record's
	// (its high watermark minus one), under either isolation level.
	var rs []*kgo.Record
	for p := range int32(3) {
		for i := range 6 {
			rs = append(rs, mk(p, "last", i))
		}
	}
	produceSync(plain, rs)
	all = append(all, rs...)

	// After judged-compacted's cleaning: tombstones and headers, in the
	// active segment, which the cleaner leaves alone; keys never null on a
	// compacted topic.
	var crs []*kgo.Record
	for i := range 12 {
		r := mk(0, "compacted", i)
		r.Topic = compactedTopic
		if r.Key == nil {
			r.Key = []byte("k-tombstone")
			r.Value = nil
		}
		crs = append(crs, r)
	}
	produceSync(client(kgo.ProducerBatchCompression(kgo.Lz4Compression())), crs)

	written := map[tp][]rec{}
	for _, r := range all {
		x := tp{judgedTopic, r.Partition}
		written[x] = append(written[x], recOf(r))
	}
	for x := range written {
		slices.SortFunc(written[x], func(a, b rec) int { return int(a.Offset - b.Offset) })
	}
	f.future = tp{judgedTopic, 1}
	for _, r := range all {
		if r.Partition == 1 && r.Timestamp.UnixMilli() > base+2*seq {
			f.futureOffset = r.Offset
		}
	}
	// Between two records of the first batch; the one of judged-0's first
	// aborted record; past every record written here with base's clock,
	// so that only the future record, the transaction markers (broker
	// time) and compactBeforeFollowing's records (client time) are at or
	// after it; past every record.
	ab := slices.Sorted(func(yield func(int64) bool) {
		for o := range aborted[tp{judgedTopic, 0}] {
			if !yield(o) {
				return
			}
		}
	})
	var abortedTS int64
	for _, r := range written[tp{judgedTopic, 0}] {
		if r.Offset == ab[0] {
			abortedTS = r.Timestamp
		}
	}
	f.times = []int64{base + 2*5 + 1, abortedTS, base + 2*seq + 1, time.Now().Add(20 * time.Minute).UnixMilli()}
	return written, aborted
}

// waitStable waits until no transaction is open on judged: its last
// stable offsets are its high watermarks.
func (f *judgesFixture) waitStable(ctx context.Context, t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		hw, err1 := f.c.Admin().ListEndOffsets(ctx, judgedTopic)
		lso, err2 := f.c.Admin().ListCommittedOffsets(ctx, judgedTopic)
		last := fmt.Sprint(errors.Join(err1, err2))
		if err1 == nil && err2 == nil {
			stable := true
			hw.Each(func(o kadm.ListedOffset) {
				l, ok := lso.Lookup(o.Topic, o.Partition)
				stable = stable && ok && o.Err == nil && l.Err == nil && l.Offset == o.Offset
			})
			if stable {
				return
			}
			last = fmt.Sprintf("high watermarks %v, last stable offsets %v", hw.Offsets(), lso.Offsets())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: a transaction still open 60 s after it ended: %s", judgedTopic, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServed waits until kfollower's ListOffsets latest is the cluster's
// high watermark on every partition: the copy is whole and durable.
func (f *judgesFixture) waitServed(ctx context.Context, t *testing.T) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(120 * time.Second)
	var last string
	for {
		ends, err := adm.ListEndOffsets(ctx, judgedTopic, compactedTopic)
		done := err == nil
		last = fmt.Sprint(err)
		if err == nil {
			var at []string
			for _, x := range f.parts {
				o, ok := ends.Lookup(x.topic, x.p)
				done = done && ok && o.Err == nil && o.Offset == f.ends[x]
				at = append(at, fmt.Sprintf("%v at %d (%v) of %d", x, o.Offset, o.Err, f.ends[x]))
			}
			last = strings.Join(at, ", ")
		}
		if done {
			return
		}
		if f.kf.exited() {
			t.Fatalf("kfollower exited before serving the copy:\n%s", tail(f.kf.output(), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("kfollower does not serve the cluster's high watermarks within 120 s: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// verdicts compares what a judge read from kfollower with what the
// cluster holds, one message per partition that differs.
func (f *judgesFixture) verdicts(judge string, iso isolation, got map[tp][]rec) []string {
	var out []string
	for _, x := range f.parts {
		if d := firstDifference(got[x], f.want[iso][x]); d != "" {
			out = append(out, fmt.Sprintf("%s (%s), %v: %s", judge, iso, x, d))
		}
	}
	return out
}

// readCommittedVerdicts runs every reading judge under read_committed,
// and ListOffsets latest under it, and returns what differs from the
// cluster.
func (f *judgesFixture) readCommittedVerdicts(ctx context.Context) []string {
	var out []string
	for _, j := range readJudges {
		got, err := j.read(ctx, f, readCommitted)
		if err != nil {
			out = append(out, fmt.Sprintf("%s (read_committed): %v", j.name, err))
			continue
		}
		out = append(out, f.verdicts(j.name, readCommitted, got)...)
	}
	// librdkafka's own default is read_committed: the Python client as
	// most non-Java clients run it.
	got, err := confluentRead(ctx, f, "default")
	if err != nil {
		out = append(out, fmt.Sprintf("confluent-kafka, isolation.level unset: %v", err))
	} else {
		out = append(out, f.verdicts("confluent-kafka, isolation.level unset", readCommitted, got)...)
	}
	// kadm's ListCommittedOffsets is ListOffsets latest, read_committed:
	// the last stable offset.
	lso := func(addr string) (kadm.ListedOffsets, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return kadm.NewClient(cl).ListCommittedOffsets(ctx, judgedTopic, compactedTopic)
	}
	fromKf, err := lso(f.addr)
	if err != nil {
		return append(out, fmt.Sprintf("ListOffsets latest read_committed from kfollower: %v", err))
	}
	fromCluster, err := lso(f.c.Bootstrap()[0])
	if err != nil {
		return append(out, fmt.Sprintf("ListOffsets latest read_committed from the cluster: %v", err))
	}
	for _, x := range f.parts {
		k, _ := fromKf.Lookup(x.topic, x.p)
		c, _ := fromCluster.Lookup(x.topic, x.p)
		if k.Err != nil || c.Err != nil || k.Offset != c.Offset {
			out = append(out, fmt.Sprintf("ListOffsets latest read_committed, %v: kfollower %d (%v), the cluster %d (%v)", x, k.Offset, k.Err, c.Offset, c.Err))
		}
	}
	return out
}

// A reading judge reads every partition of the fixture from kfollower
// from the earliest offset to the end.
type readJudge struct {
	name string
	read func(ctx context.Context, f *judgesFixture, iso isolation) (map[tp][]rec, error)
}

var readJudges = []readJudge{
	{"franz-go", func(ctx context.Context, f *judgesFixture, iso isolation) (map[tp][]rec, error) {
		return franzRead(ctx, []string{f.addr}, f, iso)
	}},
	{"console consumer", consoleRead},
	{"kcat", kcatRead},
	{"confluent-kafka", func(ctx context.Context, f *judgesFixture, iso isolation) (map[tp][]rec, error) {
		return confluentRead(ctx, f, string(iso))
	}},
}

// franzRead reads every partition of f with franz-go's assign-mode
// consumer (no group) until each has given its record at the cluster's
// high watermark minus one, the last one.
func franzRead(ctx context.Context, seeds []string, f *judgesFixture, iso isolation) (map[tp][]rec, error) {
	level := kgo.ReadUncommitted()
	if iso == readCommitted {
		level = kgo.ReadCommitted()
	}
	assign := map[string]map[int32]kgo.Offset{}
	for _, x := range f.parts {
		if assign[x.topic] == nil {
			assign[x.topic] = map[int32]kgo.Offset{}
		}
		assign[x.topic][x.p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(assign), kgo.FetchIsolationLevel(level))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	got := map[tp][]rec{}
	done := func() bool {
		for _, x := range f.parts {
			if rs := got[x]; len(rs) == 0 || rs[len(rs)-1].Offset < f.ends[x]-1 {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			var at []string
			for _, x := range f.parts {
				last := int64(-1)
				if rs := got[x]; len(rs) > 0 {
					last = rs[len(rs)-1].Offset
				}
				at = append(at, fmt.Sprintf("%v: %d records, the last at %d of the end %d", x, len(got[x]), last, f.ends[x]))
			}
			return got, fmt.Errorf("not at the end of every partition within 60 s (%s)", strings.Join(at, ", "))
		}
		var errs []error
		fs.EachError(func(topic string, p int32, err error) { errs = append(errs, fmt.Errorf("%s-%d: %w", topic, p, err)) })
		if len(errs) > 0 {
			return got, errors.Join(errs...)
		}
		for _, r := range fs.Records() {
			x := tp{r.Topic, r.Partition}
			got[x] = append(got[x], recOf(r))
		}
	}
	return got, nil
}

// consoleRead runs Kafka's console consumer on each partition, with
// --partition, so that it assigns instead of joining a group. Its
// formatter prints timestamp, offset, headers, key and value,
// tab-separated; headers as key:value joined by commas, NO_HEADERS
// without any; "null" for a null key, value or header value
// (DefaultMessageFormatter).
func consoleRead(_ context.Context, f *judgesFixture, iso isolation) (map[tp][]rec, error) {
	// The formatter's options are --formatter-property from 4.1 on
	// (KIP-1147, which deprecates --property); 3.9 and 4.0 know only
	// --property.
	prop := "--formatter-property"
	if v := kafka.Version(); strings.HasPrefix(v, "3.") || strings.HasPrefix(v, "4.0.") {
		prop = "--property"
	}
	got := map[tp][]rec{}
	for _, x := range f.parts {
		n := len(f.want[iso][x])
		out, err := kafka.RunTool(kafka.ToolConsoleConsumer,
			"--bootstrap-server", f.addr, "--topic", x.topic, "--partition", fmt.Sprint(x.p), "--offset", "earliest",
			"--isolation-level", string(iso), "--max-messages", fmt.Sprint(n), "--timeout-ms", "30000",
			prop, "print.timestamp=true", prop, "print.offset=true", prop, "print.headers=true", prop, "print.key=true")
		if err != nil {
			return got, fmt.Errorf("%v: %w", x, err)
		}
		for _, line := range strings.Split(out.Stdout, "\n") {
			if !strings.HasPrefix(line, "CreateTime:") {
				continue
			}
			r, err := parseConsoleLine(line)
			if err != nil {
				return got, fmt.Errorf("%v: %w", x, err)
			}
			got[x] = append(got[x], r)
		}
		if want := fmt.Sprintf("Processed a total of %d messages", n); !strings.Contains(out.Stdout+out.Stderr, want) {
			return got, fmt.Errorf("%v: the console consumer did not say %q:\n%s", x, want, tail(out.Stderr, 10))
		}
	}
	return got, nil
}

func parseConsoleLine(line string) (rec, error) {
	fs := strings.Split(line, "\t")
	if len(fs) != 5 {
		return rec{}, fmt.Errorf("console consumer line %q: want 5 tab-separated fields", line)
	}
	orNull := func(s string) *string {
		if s == "null" {
			return nil
		}
		return &s
	}
	ts, err1 := strconv.ParseInt(strings.TrimPrefix(fs[0], "CreateTime:"), 10, 64)
	off, err2 := strconv.ParseInt(strings.TrimPrefix(fs[1], "Offset:"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return rec{}, fmt.Errorf("console consumer line %q: %w", line, err)
	}
	r := rec{Offset: off, Timestamp: ts, Key: orNull(fs[3]), Value: orNull(fs[4])}
	if fs[2] != "NO_HEADERS" {
		for _, h := range strings.Split(fs[2], ",") {
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return rec{}, fmt.Errorf("console consumer line %q: header %q has no ':'", line, h)
			}
			r.Headers = append(r.Headers, hdr{k, orNull(v)})
		}
	}
	return r, nil
}

// kcatRead runs kcat -C on each partition from the beginning to its end
// (-e), printing JSON envelopes (-J).
func kcatRead(ctx context.Context, f *judgesFixture, iso isolation) (map[tp][]rec, error) {
	j, err := judges.Ensure()
	if err != nil {
		return nil, err
	}
	got := map[tp][]rec{}
	for _, x := range f.parts {
		stdout, stderr, err := runJudge(ctx, nil, j.Kcat, "-C", "-b", f.addr, "-t", x.topic, "-p", fmt.Sprint(x.p),
			"-o", "beginning", "-e", "-J", "-q", "-X", "isolation.level="+string(iso))
		if err != nil {
			return got, fmt.Errorf("%v: kcat: %w\n%s", x, err, tail(stderr, 20))
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if line == "" {
				continue
			}
			r, err := parseKcatLine(line)
			if err != nil {
				return got, fmt.Errorf("%v: %w", x, err)
			}
			got[x] = append(got[x], r)
		}
	}
	return got, nil
}

// parseKcatLine reads kcat's JSON envelope; its headers are a flat array
// of names and values.
func parseKcatLine(line string) (rec, error) {
	var m struct {
		Offset  int64     `json:"offset"`
		TS      int64     `json:"ts"`
		TSType  string    `json:"tstype"`
		Key     *string   `json:"key"`
		Payload *string   `json:"payload"`
		Headers []*string `json:"headers"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return rec{}, fmt.Errorf("kcat line %q: %w", line, err)
	}
	if len(m.Headers)%2 != 0 || m.TSType != "create" {
		return rec{}, fmt.Errorf("kcat line %q: want CreateTime and header name, value pairs", line)
	}
	r := rec{Offset: m.Offset, Timestamp: m.TS, Key: m.Key, Value: m.Payload}
	for i := 0; i < len(m.Headers); i += 2 {
		if m.Headers[i] == nil {
			return rec{}, fmt.Errorf("kcat line %q: a null header name", line)
		}
		r.Headers = append(r.Headers, hdr{*m.Headers[i], m.Headers[i+1]})
	}
	return r, nil
}

// confluentRead runs testdata/judges/confluent_judge.py over every
// partition at once.
func confluentRead(ctx context.Context, f *judgesFixture, iso string) (map[tp][]rec, error) {
	j, err := judges.Ensure()
	if err != nil {
		return nil, err
	}
	args := []string{confluentScript(), "consume", f.addr, iso}
	for _, x := range f.parts {
		args = append(args, fmt.Sprintf("%s:%d", x.topic, x.p))
	}
	stdout, stderr, err := runJudge(ctx, nil, j.Python, args...)
	if err != nil {
		return nil, fmt.Errorf("confluent_judge.py: %w\n%s", err, tail(stderr, 20))
	}
	got := map[tp][]rec{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m struct {
			Topic     string     `json:"topic"`
			Partition int32      `json:"partition"`
			Offset    int64      `json:"offset"`
			TS        int64      `json:"ts"`
			TSType    int        `json:"ts_type"`
			Key       *string    `json:"key"`
			Value     *string    `json:"value"`
			Headers   [][]string `json:"headers"`
		}
		// A null header value decodes as "" in a []string: read them apart.
		var raw struct {
			Headers [][]*string `json:"headers"`
		}
		if err := errors.Join(json.Unmarshal([]byte(line), &m), json.Unmarshal([]byte(line), &raw)); err != nil {
			return got, fmt.Errorf("confluent_judge.py line %q: %w", line, err)
		}
		if m.TSType != 1 { // TIMESTAMP_CREATE_TIME
			return got, fmt.Errorf("confluent_judge.py line %q: timestamp type %d, want CreateTime (1)", line, m.TSType)
		}
		dec := func(s *string) (*string, error) {
			if s == nil {
				return nil, nil
			}
			b, err := base64.StdEncoding.DecodeString(*s)
			return str(b), err
		}
		r := rec{Offset: m.Offset, Timestamp: m.TS}
		var errK, errV error
		r.Key, errK = dec(m.Key)
		r.Value, errV = dec(m.Value)
		for _, h := range raw.Headers {
			if len(h) != 2 || h[0] == nil {
				return got, fmt.Errorf("confluent_judge.py line %q: a header is not [name, value]", line)
			}
			v, err := dec(h[1])
			errV = errors.Join(errV, err)
			r.Headers = append(r.Headers, hdr{*h[0], v})
		}
		if err := errors.Join(errK, errV); err != nil {
			return got, fmt.Errorf("confluent_judge.py line %q: %w", line, err)
		}
		x := tp{m.Topic, m.Partition}
		got[x] = append(got[x], r)
	}
	return got, nil
}

// judgeGetOffsetShell asks Kafka's GetOffsetShell, of kfollower and of the
// cluster, for earliest (-2), latest (-1), max timestamp (-3) and offsets
// by timestamp of both topics, and wants the same answers.
func judgeGetOffsetShell(t *testing.T, f *judgesFixture) {
	shell := func(bootstrap, at string) []string {
		t.Helper()
		out, err := kafka.RunTool(kafka.ToolGetOffsetShell, "--bootstrap-server", bootstrap,
			"--topic", regexp.QuoteMeta(judgedTopic)+".*", "--time", at)
		if err != nil {
			t.Fatalf("GetOffsetShell --time %s against %s: %v", at, bootstrap, err)
		}
		lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
		slices.Sort(lines)
		return lines
	}
	times := []string{"-2", "-1", "-3"}
	for _, ts := range f.times {
		times = append(times, fmt.Sprint(ts))
	}
	for _, at := range times {
		fromKf, fromCluster := shell(f.addr, at), shell(f.c.Bootstrap()[0], at)
		if ts, _ := strconv.ParseInt(at, 10, 64); ts >= 0 {
			// By timestamp, the compacted partition is held to the
			// rule, not to the cluster: Kafka searches only the first
			// segment whose largest timestamp is at or above the target
			// (UnifiedLog.fetchOffsetByTimestamp), and the empty segment
			// its cleaner leaves at the log's base offset has for largest
			// timestamp its file's modification time
			// (LogSegment.largestTimestamp), so the leader answers no
			// offset for a target before that time although later
			// records carry later timestamps. The copy has no empty
			// segment; the rule is the first record at or after the
			// target.
			prefix := compactedTopic + ":0:"
			want, got := "no offset", "no offset"
			for _, r := range f.want[readUncommitted][tp{compactedTopic, 0}] {
				if r.Timestamp >= ts {
					want = prefix + fmt.Sprint(r.Offset)
					break
				}
			}
			fromKf = slices.DeleteFunc(fromKf, func(l string) bool {
				if strings.HasPrefix(l, prefix) {
					got = l
					return true
				}
				return false
			})
			if got != want {
				t.Errorf("GetOffsetShell --time %s: kfollower answers %s, want %s, the first record at or after the timestamp", at, got, want)
			}
			fromCluster = slices.DeleteFunc(fromCluster, func(l string) bool { return strings.HasPrefix(l, prefix) })
		}
		if !slices.Equal(fromKf, fromCluster) {
			t.Errorf("GetOffsetShell --time %s: kfollower answers\n  %s\nthe cluster\n  %s%s", at, strings.Join(fromKf, "\n  "), strings.Join(fromCluster, "\n  "), f.listOffsetsDetail(at))
		}
		// The answers that make the comparison mean something.
		switch at {
		case "-1":
			for _, x := range f.parts {
				if w := fmt.Sprintf("%s:%d:%d", x.topic, x.p, f.ends[x]); !slices.Contains(fromCluster, w) {
					t.Errorf("GetOffsetShell --time -1 of the cluster has no %q: %v", w, fromCluster)
				}
			}
		case "-3":
			if w := fmt.Sprintf("%s:%d:%d", f.future.topic, f.future.p, f.futureOffset); !slices.Contains(fromCluster, w) {
				t.Errorf("GetOffsetShell --time -3 of the cluster has no %q: %v", w, fromCluster)
			}
		}
	}
}

// listOffsetsDetail is franz-go's ListOffsets answer for timestamp at from
// kfollower and from the cluster, every partition, for a failure message.
func (f *judgesFixture) listOffsetsDetail(at string) string {
	ts, err := strconv.ParseInt(at, 10, 64)
	if err != nil || ts < 0 {
		return ""
	}
	var b strings.Builder
	for _, from := range []struct{ name, addr string }{{"kfollower", f.addr}, {"the cluster", f.c.Bootstrap()[0]}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(from.addr))
		if err != nil {
			return err.Error()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		los, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, ts, judgedTopic, compactedTopic)
		cancel()
		cl.Close()
		fmt.Fprintf(&b, "\nListOffsets %d from %s (%v):", ts, from.name, err)
		for _, x := range f.parts {
			o, _ := los.Lookup(x.topic, x.p)
			fmt.Fprintf(&b, "\n  %v: offset %d timestamp %d epoch %d error %v", x, o.Offset, o.Timestamp, o.LeaderEpoch, o.Err)
		}
	}
	// Kafka searches only the first segment whose largest timestamp is
	// at or above the target (UnifiedLog.fetchOffsetByTimestamp): the
	// leader's segments tell which one that was.
	if st, err := f.c.Partition(context.Background(), compactedTopic, 0); err == nil && st.Leader >= 0 {
		dir := filepath.Join(f.c.Node(st.Leader).DataDir(), compactedTopic+"-0")
		fmt.Fprintf(&b, "\nthe leader's %s:", dir)
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil {
				fmt.Fprintf(&b, " %s(%d, modified %d)", filepath.Base(n), fi.Size(), fi.ModTime().UnixMilli())
			}
		}
	}
	return b.String()
}

// apiLine is one API in BrokerApiVersionsCommand's listing (NodeApiVersions
// .toString): "Name(key): min to max [usable: v]", "min" alone when min is
// max, "UNSUPPORTED" for a key the client knows and the broker does not.
var apiLine = regexp.MustCompile(`^\s*(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[|UNSUPPORTED)`)

// judgeBrokerAPIVersions runs Kafka's BrokerApiVersionsCommand against
// kfollower and wants it to list exactly the APIs and version ranges that
// kfollower's ApiVersions answer advertises.
func judgeBrokerAPIVersions(ctx context.Context, t *testing.T, f *judgesFixture) {
	out, err := kafka.RunTool(kafka.ToolBrokerAPIVersions, "--bootstrap-server", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kfollower-judges", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("ApiVersions from kfollower: %v", err)
	}
	want := map[int16]string{}
	for _, k := range resp.ApiKeys {
		want[k.ApiKey] = fmt.Sprintf("%d to %d", k.MinVersion, k.MaxVersion)
	}
	got := map[int16]string{}
	for _, line := range strings.Split(out.Stdout, "\n") {
		m := apiLine.FindStringSubmatch(line)
		if m == nil || m[3] == "" {
			continue // the header, ")", or UNSUPPORTED
		}
		key, _ := strconv.ParseInt(m[2], 10, 16)
		hi := m[4]
		if hi == "" {
			hi = m[3]
		}
		got[int16(key)] = m[3] + " to " + hi
	}
	if !strings.Contains(out.Stdout, f.addr+" (id: 0") {
		t.Errorf("BrokerApiVersionsCommand does not list broker 0 at %s:\n%s", f.addr, out.Stdout)
	}
	for _, k := range slices.Sorted(func(yield func(int16) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		if got[k] != want[k] {
			t.Errorf("BrokerApiVersionsCommand lists API %d (%s) as %q, kfollower advertises %s", k, kmsg.NameForKey(k), got[k], want[k])
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("BrokerApiVersionsCommand lists API %d (%s) %s, which kfollower does not advertise", k, kmsg.NameForKey(k), v)
		}
	}
	if t.Failed() {
		t.Logf("BrokerApiVersionsCommand printed:\n%s", out.Stdout)
	}
}

// judgeWrites has each client try to write to judged-0 through kfollower:
// each must fail at once (well within its own retry timeout) with the
// authorization error Kafka gives a principal that may only read, and the
// data dir must be byte-unchanged.
func judgeWrites(ctx context.Context, t *testing.T, f *judgesFixture) {
	j, err := judges.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, f.data)
	// Every client below would retry a retriable error for minutes (their
	// delivery timeouts are 120 s and more): an answer within this bound
	// is the refusal itself.
	const atOnce = 60 * time.Second
	type attempt struct {
		judge string
		want  string // in what the client reported
		run   func() (string, error)
	}
	java := func(extra ...string) func() (string, error) {
		return func() (string, error) {
			out, err := kafka.RunToolInput("must not land\n", kafka.ToolConsoleProducer,
				append([]string{"--bootstrap-server", f.addr, "--topic", judgedTopic}, extra...)...)
			// The producer logs the refusal and may still exit 0.
			_ = err
			return out.Stdout + out.Stderr, nil
		}
	}
	kcat := func(extra ...string) func() (string, error) {
		return func() (string, error) {
			stdout, stderr, _ := runJudge(ctx, strings.NewReader("must not land\n"), j.Kcat,
				append([]string{"-P", "-b", f.addr, "-t", judgedTopic, "-p", "0"}, extra...)...)
			// kcat reports the refusal; after librdkafka's fatal error (an
			// idempotent producer refused its producer id) its exit status
			// races its shutdown and is sometimes 0, so what it reported
			// and the unchanged data dir below are the verdict.
			return stdout + stderr, nil
		}
	}
	python := func(mode string) func() (string, error) {
		return func() (string, error) {
			stdout, stderr, err := runJudge(ctx, nil, j.Python, confluentScript(), "produce", f.addr, mode, judgedTopic)
			return stdout + stderr, err
		}
	}
	franz := func(transactional bool, opts ...kgo.Opt) func() (string, error) {
		return func() (string, error) {
			if transactional {
				opts = append(opts, kgo.TransactionalID("kfollower-judge"))
			}
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.addr), kgo.DefaultProduceTopic(judgedTopic),
				kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
			if err != nil {
				return "", err
			}
			defer cl.Close()
			pctx, cancel := context.WithTimeout(ctx, 2*atOnce)
			defer cancel()
			if transactional {
				if err := cl.BeginTransaction(); err != nil {
					return err.Error(), nil
				}
			}
			err = cl.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte("must not land")}).FirstErr()
			if err == nil {
				return "", errors.New("the write succeeded")
			}
			return err.Error(), nil
		}
	}
	for _, a := range []attempt{
		// The Java producer is idempotent by default: InitProducerId is
		// refused as Kafka refuses a principal without IDEMPOTENT_WRITE.
		{"console producer", "ClusterAuthorizationException", java()},
		{"console producer, not idempotent", "TopicAuthorizationException", java("--producer-property", "enable.idempotence=false")},
		{"kcat -P", "Topic authorization failed", kcat()},
		{"kcat -P, idempotent", "Cluster authorization failed", kcat("-X", "enable.idempotence=true")},
		{"kcat -P, transactional", "Transactional Id authorization failed", kcat("-X", "transactional.id=kfollower-judge")},
		{"confluent-kafka", "TOPIC_AUTHORIZATION_FAILED", python("plain")},
		{"confluent-kafka, idempotent", "CLUSTER_AUTHORIZATION_FAILED", python("idempotent")},
		{"confluent-kafka, transactional", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", python("transactional")},
		{"franz-go, idempotent", kerr.ClusterAuthorizationFailed.Message, franz(false)},
		{"franz-go, not idempotent", kerr.TopicAuthorizationFailed.Message, franz(false, kgo.DisableIdempotentWrite())},
		{"franz-go, transactional", kerr.TransactionalIDAuthorizationFailed.Message, franz(true)},
	} {
		begin := time.Now()
		out, err := a.run()
		took := time.Since(begin)
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", a.judge, err, tail(out, 20))
		case !strings.Contains(out, a.want):
			t.Errorf("%s: no %q in what it reported:\n%s", a.judge, a.want, tail(out, 20))
		case took > atOnce:
			t.Errorf("%s: refused after %v, not at once", a.judge, took.Round(time.Millisecond))
		default:
			t.Logf("%s: refused in %v", a.judge, took.Round(time.Millisecond))
		}
	}
	if after := snapshotDir(t, f.data); !sameSnapshot(before, after) {
		t.Fatalf("refused writes changed the data dir:\nbefore %v\nafter  %v", before.summary(), after.summary())
	}
}

// dirSnapshot maps every file under a directory to its bytes.
type dirSnapshot map[string]string

func snapshotDir(t *testing.T, dir string) dirSnapshot {
	t.Helper()
	out := dirSnapshot{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(a, b dirSnapshot) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (s dirSnapshot) summary() []string {
	var out []string
	for k, v := range s {
		out = append(out, fmt.Sprintf("%s(%d)", filepath.Base(k), len(v)))
	}
	slices.Sort(out)
	return out
}

// runJudge runs an outside client with stdin (none if nil) and at most 90 s.
func runJudge(ctx context.Context, stdin *strings.Reader, bin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test binary
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not end within 90 s: %w", filepath.Base(bin), ctx.Err())
	}
	return stdout.String(), stderr.String(), err
}

// confluentScript is the Python judge, found from this file's path.
func confluentScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "judges", "confluent_judge.py")
}

// buildKfollower builds the kfollower binary into the test's temp dir;
// the build cache makes every build after the first a link.
func buildKfollower(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kfollower")
	if b, err := exec.Command("go", "build", "-o", out, "github.com/kfollower/kfollower/cmd/kfollower").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// kfollowerProcess is a running `kfollower run`.
type kfollowerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex // guards out
	out  bytes.Buffer
}

func (k *kfollowerProcess) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.Write(p)
}

func (k *kfollowerProcess) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

func (k *kfollowerProcess) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// startKfollower runs `kfollower run args...` without the test's
// KFOLLOWER_* environment, which would configure it; the test's cleanup
// stops it with SIGTERM (SIGKILL after 30 s).
func startKfollower(t *testing.T, bin string, args ...string) *kfollowerProcess {
	t.Helper()
	return startNamedKfollower(t, bin, "kfollower", args...)
}

// startNamedKfollower is startKfollower with the name its output is
// logged under when the test fails.
func startNamedKfollower(t *testing.T, bin, name string, args ...string) *kfollowerProcess {
	t.Helper()
	k := &kfollowerProcess{done: make(chan struct{})}
	k.cmd = exec.Command(bin, append([]string{"run"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KFOLLOWER_") {
			k.cmd.Env = append(k.cmd.Env, kv)
		}
	}
	k.cmd.Stdout, k.cmd.Stderr = k, k
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			k.cmd.Process.Kill()
			<-k.done
		}
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", name, tail(k.output(), 60))
		}
	})
	return k
}

// freeLoopback is a loopback address with a port nothing listens on now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
