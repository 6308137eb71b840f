package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/audit"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/lostfound"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The audit and lost+found tools against one real cluster, after the unclean
// election of TestUncleanElectionLoss, with a second topic whose
// partitions change leader several times:
//   - verify on a copy of kfollower's data taken before it reconciled
//     reports the exact first divergent offset (and the epoch sequences
//     parting there); on the live data dir after reconciliation, a full
//     match for every partition, read while the daemon runs;
//   - lineage, walked with OffsetsForLeaderEpoch, gives exactly the
//     (epoch, start offset) pairs of each leader's own
//     leader-epoch-checkpoint;
//   - lost replay puts on a new topic exactly the records the producer had
//     acknowledged and the cluster lost, and a second replay adds nothing.
func TestAuditAfterUncleanElection(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic, moving = "audited", "moving"
	const a, b = int32(1), int32(2)
	const n1, n2, n3 = 300, 120, 200
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{
		"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
	})
	c.CreateTopic(ctx, moving, rf3x4[:3], nil)
	s := follow(t, c, "", topic, moving)

	// moving: data in several epochs, the leader moved by reordering the
	// replicas and electing the preferred one.
	for round := range 3 {
		for p := int32(0); p < 3; p++ {
			produceTo(ctx, t, c, moving, p, fmt.Sprintf("r%d", round), 50+int(p)*10)
		}
		if round < 2 {
			moveLeaders(ctx, t, c, moving, 3)
		}
	}

	// The unclean election of TestUncleanElectionLoss.
	produceTo(ctx, t, c, topic, 0, "n1", n1)
	s.waitLogEnd(t, topic, 0, n1)
	c.Pause(b)
	c.WaitPartition(ctx, topic, 0, "ISR [A]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a}) })
	lost := produceTo(ctx, t, c, topic, 0, "n2", n2)
	s.waitLogEnd(t, topic, 0, n1+n2)
	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	// No leader: kfollower cannot reconcile yet, so this copy holds the
	// records the cluster is about to lose.
	before := t.TempDir()
	copyTree(t, s.dir, before)
	c.Resume(b)
	elected := c.ElectUnclean(ctx, topic, 0)
	if elected.Leader != b {
		t.Fatalf("unclean election chose %v, want leader %d", elected, b)
	}
	s.waitStatus(t, topic, 0, "reconciled with B", func(st fetcherStatus) bool {
		return st.LeaderEpoch == elected.LeaderEpoch && st.State == "fetching"
	})
	if newer := produceTo(ctx, t, c, topic, 0, "n3", n3); len(newer) != n3 || newer[0].Offset != n1 {
		t.Fatalf("B wrote %d new records, want %d from offset %d", len(newer), n3, n1)
	}
	// Once B is back in the ISR, moving-2 returns to its preferred leader
	// B, skipping the epoch B missed while paused, so the lineage walks
	// ask two brokers and B's cache has a gap in its epochs.
	c.WaitPartition(ctx, moving, 2, "B in the ISR", func(st kafka.PartitionState) bool { return slices.Contains(st.ISR, b) })
	if st, err := c.Partition(ctx, moving, 2); err != nil || st.Leader != b {
		c.ElectPreferred(ctx, moving, 2)
		c.WaitPartition(ctx, moving, 2, "leader B", func(st kafka.PartitionState) bool { return st.Leader == b })
	}
	produceTo(ctx, t, c, moving, 2, "after", 30)
	s.waitCaughtUp(ctx, c, topic, 1)
	s.waitCaughtUp(ctx, c, moving, 3)
	if t.Failed() {
		return
	}
	cl := c.Client()

	t.Run("verify before reconciliation", func(t *testing.T) {
		rep, err := audit.Verify(ctx, audit.VerifyOptions{Client: cl, DataDir: before, Topics: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, rep)
		if rep.ExitCode() != audit.ExitMismatch || len(rep.Partitions) != 1 {
			t.Fatalf("exit code %d for %d partitions, want %d for 1", rep.ExitCode(), len(rep.Partitions), audit.ExitMismatch)
		}
		p := rep.Partitions[0]
		d := p.Divergence
		if p.Status != audit.StatusDiverged || d == nil || d.Offset != n1 || p.VerifiedFrom != 0 || p.VerifiedTo != n1 {
			t.Fatalf("want the first divergence at %d after [0, %d) verified; got %+v", n1, n1, p)
		}
		if d.Kind != audit.DivergedBatch || d.Local.Epoch != 0 || d.Leader == nil || d.Leader.Epoch != elected.LeaderEpoch || d.Local.CRC == d.Leader.CRC {
			t.Fatalf("divergence %+v: want local epoch 0 against the leader's epoch %d, different CRCs", d, elected.LeaderEpoch)
		}
		if p.EpochsPrefix || p.EpochsParted == nil || p.EpochsParted.Offset != n1 {
			t.Fatalf("epochs: prefix %v, parted %+v; want them to part at %d", p.EpochsPrefix, p.EpochsParted, n1)
		}
		if p.LocalLogEnd != n1+n2 || p.LeaderHighWatermark != n1+n3 {
			t.Fatalf("local end %d, leader high watermark %d; want %d and %d", p.LocalLogEnd, p.LeaderHighWatermark, n1+n2, n1+n3)
		}
	})

	t.Run("verify after reconciliation", func(t *testing.T) {
		// The daemon is running and appending to moving-0 while verify
		// reads its data dir beside it: no false alarm.
		stop := make(chan struct{})
		var producing sync.WaitGroup
		producing.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				produceTo(ctx, t, c, moving, 0, fmt.Sprintf("during-%d", i), 200, kgo.ProducerLinger(time.Millisecond))
			}
		})
		s.waitLogEnd(t, moving, 0, 150+400) // appends are under way
		rep, err := audit.Verify(ctx, audit.VerifyOptions{Client: cl, DataDir: s.dir})
		close(stop)
		producing.Wait()
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, rep)
		if rep.ExitCode() != audit.ExitOK || len(rep.Partitions) != 4 {
			t.Fatalf("exit code %d for %d partitions, want %d for 4", rep.ExitCode(), len(rep.Partitions), audit.ExitOK)
		}
		for _, p := range rep.Partitions {
			if p.Status != audit.StatusMatch || p.VerifiedFrom != 0 || p.VerifiedTo != p.LocalLogEnd || p.LocalLogEnd == 0 ||
				p.UnverifiedFrom != -1 || !p.EpochsPrefix || p.Divergence != nil {
				t.Fatalf("%s-%d: want a full match, got %+v", p.Topic, p.Partition, p)
			}
		}
	})

	t.Run("lineage", func(t *testing.T) {
		rep, err := audit.Lineage(ctx, audit.LineageOptions{Client: cl, Topics: []string{topic, moving}, DataDir: s.dir})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, rep)
		if rep.ExitCode() != audit.ExitOK || len(rep.Partitions) != 4 {
			t.Fatalf("exit code %d for %d partitions", rep.ExitCode(), len(rep.Partitions))
		}
		for _, p := range rep.Partitions {
			path := filepath.Join(c.Node(p.Leader).DataDir(), fmt.Sprintf("%s-%d", p.Topic, p.Partition), "leader-epoch-checkpoint")
			want := readCheckpoint(t, path)
			var got []string
			for _, e := range p.LeaderEpochs {
				got = append(got, fmt.Sprintf("%d %d", e.Epoch, e.StartOffset))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s-%d: walked %q, leader %d's checkpoint says %q", p.Topic, p.Partition, got, p.Leader, want)
			}
			if p.Parted != nil || !p.HasLocal {
				t.Fatalf("%s-%d: local sequence %v parts from the leader's: %+v", p.Topic, p.Partition, p.LocalEpochs, p.Parted)
			}
		}
		if ms := rep.Partitions[1:]; !slices.ContainsFunc(ms, func(p audit.PartitionLineage) bool { return len(p.LeaderEpochs) >= 3 }) {
			t.Fatalf("the moving topic's partitions should have 3 or more epochs: %+v", ms)
		}
		old, err := audit.Lineage(ctx, audit.LineageOptions{Client: cl, Topics: []string{topic}, DataDir: before})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, old)
		if old.ExitCode() != audit.ExitMismatch || old.Partitions[0].Parted == nil || old.Partitions[0].Parted.Offset != n1 {
			t.Fatalf("before reconciliation: want the sequences to part at %d, got %+v", n1, old.Partitions[0])
		}
	})

	t.Run("lost replay", func(t *testing.T) {
		const restored = "restored"
		c.CreateTopic(ctx, restored, [][]int32{{b, 3}}, nil)
		list, err := lostfound.List(lostfound.ListOptions{DataDir: s.dir})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, list)
		if len(list.Events) != 1 || list.Events[0].FirstOffset != n1 || list.Events[0].Records != n2 {
			t.Fatalf("lost+found events %+v, want one of %d records from %d", list.Events, n2, n1)
		}
		dry, err := lostfound.Replay(ctx, lostfound.ReplayOptions{Client: cl, DataDir: s.dir, ToTopic: restored, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if dry.Replayed != n2 || countRecords(ctx, t, c, restored, 0) != 0 {
			t.Fatalf("dry run: would replay %d (want %d), and must produce nothing", dry.Replayed, n2)
		}
		rep, err := lostfound.Replay(ctx, lostfound.ReplayOptions{Client: cl, DataDir: s.dir, ToTopic: restored})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, rep)
		if rep.Replayed != n2 || rep.AlreadyPresent != 0 || rep.Aborted != 0 || rep.Undecided != 0 {
			t.Fatalf("replay %+v, want %d replayed", rep, n2)
		}
		checkReplayed(ctx, t, c, restored, topic, lost)
		again, err := lostfound.Replay(ctx, lostfound.ReplayOptions{Client: cl, DataDir: s.dir, ToTopic: restored})
		if err != nil {
			t.Fatal(err)
		}
		if again.Replayed != 0 || again.AlreadyPresent != n2 {
			t.Fatalf("second replay %+v, want all %d already present", again, n2)
		}
		if n := countRecords(ctx, t, c, restored, 0); n != n2 {
			t.Fatalf("after the second replay %s holds %d records, want %d", restored, n, n2)
		}
	})
}

// moveLeaders rotates the replica list of each partition of topic and
// elects the new preferred leader: a clean leader change, a new epoch.
func moveLeaders(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, partitions int32) {
	t.Helper()
	req := kadm.AlterPartitionAssignmentsReq{}
	var want [][]int32
	for p := range partitions {
		st, err := c.Partition(ctx, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		r := append(slices.Clone(st.Replicas[1:]), st.Replicas[0])
		req.Assign(topic, p, r)
		want = append(want, r)
	}
	res, err := c.Admin().AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("reordering the replicas of %s: %v", topic, err)
	}
	for p := range partitions {
		c.WaitPartition(ctx, topic, p, fmt.Sprintf("replicas %v", want[p]), func(st kafka.PartitionState) bool {
			return slices.Equal(st.Replicas, want[p]) && kafka.SameSet(st.ISR, want[p])
		})
		if st := c.ElectPreferred(ctx, topic, p); st.Leader != want[p][0] {
			c.WaitPartition(ctx, topic, p, fmt.Sprintf("leader %d", want[p][0]), func(st kafka.PartitionState) bool { return st.Leader == want[p][0] })
		}
	}
}

// checkReplayed reads topic restored and checks it holds exactly want,
// in order: key, value, timestamp, and the source header naming the lost
// offset of source-0.
func checkReplayed(ctx context.Context, t *testing.T, c *kafka.Cluster, restored, source string, want []*kgo.Record) {
	t.Helper()
	got := consumeN(ctx, t, c, restored, len(want))
	if len(got) != len(want) {
		t.Fatalf("%s holds %d records, want %d", restored, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		var src []string
		var other int
		for _, h := range g.Headers {
			if h.Key == lostfound.SourceHeader {
				src = append(src, string(h.Value))
			} else {
				other++
			}
		}
		wantSrc := fmt.Sprintf("%s/0/%d", source, w.Offset)
		gotSrc := ""
		if s, ok := lostfound.ParseSource(strings.Join(src, ",")); ok && !s.Legacy {
			gotSrc = fmt.Sprintf("%s/%d/%d", s.Topic, s.Partition, s.Offset) // the epoch is the lost batch's
		}
		if string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) || g.Timestamp.UnixMilli() != w.Timestamp.UnixMilli() ||
			gotSrc != wantSrc || other != len(w.Headers) {
			t.Fatalf("replayed record %d: %q=%q at %v headers %v; want %q=%q at %v from %s", i,
				g.Key, g.Value, g.Timestamp, g.Headers, w.Key, w.Value, w.Timestamp, wantSrc)
		}
	}
}

// consumeN reads partition 0 of topic from the start until it has n
// records or its end offset is reached.
func consumeN(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	end := countRecords(ctx, t, c, topic, 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Reachable()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for int64(len(out)) < end {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			t.Fatalf("reading %s: %d of %d records: %v", topic, len(out), end, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("reading %s: %v", topic, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// countRecords is the end offset of topic-p (our topics start at 0 and
// are written without transactions, so it is the record count).
func countRecords(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32) int64 {
	t.Helper()
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, p)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s-%d: %v", topic, p, o.Err)
	}
	return o.Offset
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if strings.HasSuffix(path, ".tmp") {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

type tableWriter interface{ WriteTable(io.Writer) error }

// logReport puts a report's table into the test log.
func logReport(t *testing.T, r tableWriter) {
	t.Helper()
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}
