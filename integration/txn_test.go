package integration

import (
	"context"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/servecat"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions in the served copy, judged by Kafka itself. Two
// transactional producers commit and abort, interleaved with each other
// and with plain records, and the second leaves one transaction open;
// kfollower follows the partition and serves it. Then:
//
//   - Kafka's DumpLogSegments reads our .txnindex files and lists exactly
//     the entries of the leader's (producer, first, last and last stable
//     offsets: ours are computed from the batches as the leader computed
//     its own on append);
//   - the LSO (ListOffsets latest under read_committed) and a
//     read_committed Fetch's aborted transactions are the leader's;
//   - a franz-go read_committed consumer of our server sees exactly the
//     records it sees from the leader: the plain and committed ones, up to
//     the open transaction;
//
// and again once the open transaction is aborted.
func TestTransactionsServed(t *testing.T) {
	ctx := context.Background()
	// The leader's files are read from its data dir: no external cluster.
	c := kafka.Start(t, kafka.Options{NeedsFaults: true})
	const topic = "txns"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)

	type rec struct {
		offset int64
		value  string
	}
	var committed []rec // what a read_committed reader must see
	pending := map[*kgo.Client][]rec{}
	plain := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	txn := func(id string) *kgo.Client {
		return c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionalID(id), kgo.TransactionTimeout(5*time.Minute))
	}
	a, b := txn("kfollower-txn-a"), txn("kfollower-txn-b")
	produce := func(cl *kgo.Client, prefix string, n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("producing %s: %v", prefix, err)
		}
		for _, r := range rs {
			if cl == plain {
				committed = append(committed, rec{r.Offset, string(r.Value)})
			} else {
				pending[cl] = append(pending[cl], rec{r.Offset, string(r.Value)})
			}
		}
	}
	begin := func(cl *kgo.Client) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		t.Helper()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("ending a transaction (commit %v): %v", commit, err)
		}
		if commit {
			committed = append(committed, pending[cl]...)
		}
		delete(pending, cl)
	}
	// Offsets follow the order of the calls; a marker takes an offset.
	produce(plain, "p0", 2)
	begin(a)
	produce(a, "a0", 3)
	produce(plain, "p1", 2)
	begin(b)
	produce(b, "b0", 2)
	produce(a, "a0x", 1)
	end(a, false) // aborted while b's is open: its LSO is b's first offset
	produce(plain, "p2", 1)
	end(b, true)
	begin(a)
	produce(a, "a1", 2)
	begin(b)
	produce(b, "b1", 2)
	end(b, false)
	produce(plain, "p3", 1)
	end(a, true)
	begin(a)
	produce(a, "a2", 2)
	end(a, false) // nothing else open: its LSO is the offset after its marker
	begin(b)
	produce(b, "b2", 3) // left open
	produce(plain, "p4", 1)
	// In offset order, up to the open transaction (p4 is past it).
	values := func(below int64) []string {
		rs := slices.SortedFunc(slices.Values(committed), func(x, y rec) int { return int(x.offset - y.offset) })
		var out []string
		for _, r := range rs {
			if r.offset < below {
				out = append(out, r.value)
			}
		}
		return out
	}
	openAt := pending[b][0].offset

	s := follow(t, c, "", topic)
	s.waitCaughtUp(ctx, c, topic, 1)
	s.compareWithLeader(ctx, c, topic, 0)
	addr := serveCopy(t, s.m)

	check := func(stage string, want []string) {
		t.Helper()
		compareTxnIndexes(ctx, t, c, s.dir, topic)
		leaderLSO := committedEnd(ctx, t, c.Admin(), topic)
		if stage == "a transaction open" && leaderLSO != openAt {
			t.Fatalf("the leader's LSO is %d, the open transaction starts at %d", leaderLSO, openAt)
		}
		ours := kadm.NewClient(newClient(t, addr))
		if got := committedEnd(ctx, t, ours, topic); got != leaderLSO {
			t.Errorf("%s: our LSO %d, the leader's %d", stage, got, leaderLSO)
		}
		leaderAborted, leaderEnd := fetchCommitted(ctx, t, c.Client(), topic)
		got, end := fetchCommitted(ctx, t, newClient(t, addr), topic)
		if !slices.Equal(got, leaderAborted) || len(got) == 0 {
			t.Errorf("%s: read_committed Fetch from 0: our aborted transactions %v, the leader's %v", stage, got, leaderAborted)
		}
		if end != leaderEnd || end != leaderLSO {
			t.Errorf("%s: read_committed Fetch from 0: our batches end at %d, the leader's at %d, its LSO is %d", stage, end, leaderEnd, leaderLSO)
		}
		fromLeader := readCommittedValues(ctx, t, "the leader", c.Client, topic, len(want))
		fromUs := readCommittedValues(ctx, t, "kfollower", func(opts ...kgo.Opt) *kgo.Client { return newClient(t, addr, opts...) }, topic, len(want))
		if !slices.Equal(fromLeader, want) {
			t.Fatalf("%s: the leader gives read_committed %v, want %v", stage, fromLeader, want)
		}
		if !slices.Equal(fromUs, want) {
			t.Errorf("%s: we give read_committed %v, want %v", stage, fromUs, want)
		}
	}
	check("a transaction open", values(openAt))

	end(b, false)
	s.waitCaughtUp(ctx, c, topic, 1)
	s.compareWithLeader(ctx, c, topic, 0)
	check("all decided", values(math.MaxInt64))
	checkWithDumpLogSegments(t, s.dir, topic, 0, false)
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// serveCopy serves what m follows on a loopback port until the test ends
// (cmd/kfollower's --serve, in process).
func serveCopy(t *testing.T, m *fetcher.Manager) string {
	t.Helper()
	srv, err := server.New(server.Config{NodeID: 0, ClusterID: "kfollower-txn-test", Catalog: servecat.New(m)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// committedEnd is partition 0's ListOffsets latest under read_committed:
// the last stable offset.
func committedEnd(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	offs, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("ListOffsets read_committed of %s-0: %v", topic, o.Err)
	}
	return o.Offset
}

// fetchCommitted is a read_committed Fetch of partition 0 from offset 0
// (room for everything): its aborted transactions, as "producer@first",
// and the offset after its last batch.
func fetchCommitted(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) (aborted []string, end int64) {
	t.Helper()
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]
	if td.Err != nil || len(td.Partitions) == 0 {
		t.Fatalf("metadata of %s: %v", topic, td.Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = -1, 1<<20, 1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, td.ID // kgo sends the highest version both speak: by id from v13
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(td.Partitions[0].Leader)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("Fetch of %s-0: %+v", topic, resp)
	}
	p := resp.Topics[0].Partitions[0]
	for _, a := range p.AbortedTransactions {
		aborted = append(aborted, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
	}
	sc := batch.NewScanner(p.RecordBatches)
	for sc.Next() {
		end = sc.Header().NextOffset()
	}
	if sc.Err() != nil {
		t.Fatalf("Fetch of %s-0: %v", topic, sc.Err())
	}
	return aborted, end
}

// readCommittedValues consumes partition 0 from the start under read_committed,
// with a client newCl makes, until it has n values.
func readCommittedValues(ctx context.Context, t *testing.T, from string, newCl func(...kgo.Opt) *kgo.Client, topic string, n int) []string {
	t.Helper()
	c := newCl(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := c.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("read_committed from %s: %d of %d values (%v): %v", from, len(got), n, got, pctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("read_committed from %s: %v", from, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

var reTxnEntry = regexp.MustCompile(`^version: 0 producerId: (-?\d+) firstOffset: (-?\d+) lastOffset: (-?\d+) lastStableOffset: (-?\d+)$`)

// compareTxnIndexes has DumpLogSegments read our .txnindex files of
// partition 0 and the leader's, and wants the same entries in the same
// order, and at least one.
func compareTxnIndexes(ctx context.Context, t *testing.T, c *kafka.Cluster, dataDir, topic string) {
	t.Helper()
	st, err := c.Partition(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	dump := func(dir string) []string {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(dir, "*.txnindex"))
		if len(files) == 0 {
			t.Fatalf("no .txnindex in %s", dir)
		}
		slices.Sort(files)
		out, err := kafka.RunTool(kafka.ToolDumpLogSegments, "--files", strings.Join(files, ","))
		if err != nil {
			t.Fatal(err)
		}
		var entries []string
		for _, l := range lines(out.Stdout) {
			switch {
			case reTxnEntry.MatchString(l):
				entries = append(entries, l)
			case reDumping.MatchString(l):
			default:
				t.Fatalf("%s on %s: a line the test cannot read: %q\n%s", out.Class, dir, l, head(out.Stderr, 20))
			}
		}
		if strings.TrimSpace(out.Stderr) != "" {
			t.Fatalf("%s on %s: %s", out.Class, dir, head(out.Stderr, 20))
		}
		return entries
	}
	ours := dump(storage.PartitionDir(dataDir, topic, 0))
	theirs := dump(filepath.Join(c.Node(st.Leader).DataDir(), topic+"-0"))
	if len(ours) == 0 || !slices.Equal(ours, theirs) {
		t.Fatalf("DumpLogSegments: our .txnindex entries\n%s\nthe leader's\n%s", strings.Join(ours, "\n"), strings.Join(theirs, "\n"))
	}
	t.Logf("%d .txnindex entries agree with the leader's", len(ours))
}
