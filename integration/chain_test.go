package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/lostfound"
	"github.com/kfollower/kfollower/storage"
)

// Chaining, with the real binaries: kfollower A follows the cluster and
// serves its copy (--serve); kfollower B follows A's endpoint as if it were
// the cluster. Through a leader kill and an unclean election upstream that
// loses committed records (docs/testing.md §6.8's), A truncates them and
// raises its served epoch; B, fenced by it, reconciles with A (KIP-279
// down the chain) in one OffsetsForLeaderEpoch round trip, truncates the
// same records, and reports exactly the loss A reports (`lost list
// --json`: same offsets, same saved batches). At the end B's segments are
// byte-equal to A's, and A's to the new leader's.
func TestChain(t *testing.T) {
	ctx := context.Background()
	bin := buildKfollower(t)
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic = "chain"
	const n1, n2, n3 = 300, 120, 200
	lossyTopic(ctx, c, topic)
	dirA, dirB := t.TempDir(), t.TempDir()
	serveA := freeLoopback(t)
	kfA := startChainDaemon(t, bin, "A", "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
		"--data-dir", dirA, "--serve", serveA, "--metadata-interval", "500ms")
	kfB := startChainDaemon(t, bin, "B", "--bootstrap-servers", serveA, "--topics", topic,
		"--data-dir", dirB, "--metadata-interval", "500ms")

	produceTo(ctx, t, c, topic, 0, "n1", n1)
	kfA.waitStatus(t, topic, fmt.Sprintf("log end %d", n1), func(s fetcher.Status) bool { return s.LogEndOffset == n1 })
	kfB.waitStatus(t, topic, fmt.Sprintf("log end %d", n1), func(s fetcher.Status) bool { return s.LogEndOffset == n1 })

	isolateLeader(ctx, c, topic)
	lost := produceTo(ctx, t, c, topic, 0, "n2", n2)
	// Committed (ISR [A], min ISR 1): both copy it.
	kfA.waitStatus(t, topic, fmt.Sprintf("log end %d", n1+n2), func(s fetcher.Status) bool { return s.LogEndOffset == n1+n2 })
	kfB.waitStatus(t, topic, fmt.Sprintf("log end %d", n1+n2), func(s fetcher.Status) bool { return s.LogEndOffset == n1+n2 })

	elected := electUnclean(ctx, t, c, topic)
	newer := produceTo(ctx, t, c, topic, 0, "n3", n3)
	if len(newer) != n3 || newer[0].Offset != n1 {
		t.Fatalf("B wrote %d new records from %v, want %d from %d", len(newer), newer, n3, n1)
	}
	stA := kfA.waitStatus(t, topic, "A reconciled and caught up", func(s fetcher.Status) bool {
		return s.LeaderEpoch == elected.LeaderEpoch && s.State == "fetching" && s.LogEndOffset == n1+n3
	})
	stB := kfB.waitStatus(t, topic, "B caught up with A", func(s fetcher.Status) bool {
		return s.State == "fetching" && s.LogEndOffset == n1+n3 && s.LastTruncation != nil
	})
	compareWithLeader(ctx, t, c, dirA, topic, 0)
	if a, b := readSegments(t, storage.PartitionDir(dirA, topic, 0)), readSegments(t, storage.PartitionDir(dirB, topic, 0)); !bytes.Equal(a, b) {
		t.Fatalf("B's segments (%d bytes) differ from A's (%d bytes)", len(b), len(a))
	}

	// One loss each, the same: the records the cluster lost.
	for _, st := range []fetcher.Status{stA, stB} {
		tr := st.LastTruncation
		if tr == nil || tr.From != n1 || tr.To != n1+n2 || tr.Records != n2 || tr.Roundtrips != 1 {
			t.Errorf("truncation %+v; want [%d,%d), %d records, in one OffsetsForLeaderEpoch round trip", tr, n1, n1+n2, n2)
		}
	}
	listA, listB := chainLostList(t, bin, dirA), chainLostList(t, bin, dirB)
	if len(listA.Events) != 1 || len(listB.Events) != 1 {
		t.Fatalf("lost list: A %d events, B %d; want one each", len(listA.Events), len(listB.Events))
	}
	ea, eb := listA.Events[0], listB.Events[0]
	if ea.From != n1 || ea.EndOffset != n1+n2 || ea.Records != n2 || eb.From != ea.From || eb.EndOffset != ea.EndOffset ||
		eb.Records != ea.Records || eb.Batches != ea.Batches || !eb.ClusterLoss || !ea.ClusterLoss {
		t.Fatalf("lost list: A %+v, B %+v; want the same loss [%d,%d), %d records, as cluster loss", ea.Lost, eb.Lost, n1, n1+n2, n2)
	}
	savedA, savedB := chainSaved(t, ea), chainSaved(t, eb)
	if !bytes.Equal(savedA, savedB) {
		t.Fatalf("the batches B saved (%d bytes) differ from A's (%d bytes)", len(savedB), len(savedA))
	}
	checkLostFound(t, dirA, topic, lost)
	checkLostFound(t, dirB, topic, lost)
}

// The unclean election of docs/testing.md §6.8, in steps: lossyTopic has
// brokers 1 (A, the leader) and 2 (B) of an Isolated cluster, min ISR 1;
// isolateLeader pauses B until the ISR is [A] alone, so what is produced
// next is committed on A only; electUnclean kills A and elects B
// uncleanly, which loses it.
const lossA, lossB = int32(1), int32(2)

func lossyTopic(ctx context.Context, c *kafka.Cluster, topic string) {
	c.CreateTopic(ctx, topic, [][]int32{{lossA, lossB}}, map[string]string{
		"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
	})
}

func isolateLeader(ctx context.Context, c *kafka.Cluster, topic string) {
	c.Pause(lossB)
	c.WaitPartition(ctx, topic, 0, "ISR [A]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{lossA}) })
}

func electUnclean(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string) kafka.PartitionState {
	t.Helper()
	c.Kill(lossA)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Resume(lossB)
	elected := c.ElectUnclean(ctx, topic, 0)
	if elected.Leader != lossB {
		t.Fatalf("unclean election chose %v, want leader %d", elected, lossB)
	}
	return elected
}

// chainDaemon is one `kfollower run` process with an HTTP listener, named
// in failures.
type chainDaemon struct {
	*kfollowerProcess
	name, http string
}

// startChainDaemon runs `kfollower run` with args and an HTTP listener
// (startKfollower: the test's cleanup stops it).
func startChainDaemon(t *testing.T, bin, name string, args ...string) *chainDaemon {
	t.Helper()
	addr := freeLoopback(t)
	return &chainDaemon{
		kfollowerProcess: startNamedKfollower(t, bin, "kfollower "+name, append([]string{"--http-listen", addr}, args...)...),
		name:             name,
		http:             "http://" + addr,
	}
}

// waitStatus polls /status until the topic's partition 0 meets cond.
func (d *chainDaemon) waitStatus(t *testing.T, topic, what string, cond func(fetcher.Status) bool) fetcher.Status {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	var last []fetcher.Status
	for {
		var doc struct {
			Partitions []fetcher.Status `json:"partitions"`
		}
		resp, err := http.Get(d.http + "/status")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if json.Unmarshal(body, &doc) == nil {
				last = doc.Partitions
				for _, s := range doc.Partitions {
					if s.Topic == topic && s.Partition == 0 && cond(s) {
						return s
					}
				}
			}
		}
		select {
		case <-d.done:
			t.Fatalf("kfollower %s exited while waiting for %s", d.name, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kfollower %s: waiting for %s; last status %+v", d.name, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chainLostList runs `kfollower lost list --json`.
func chainLostList(t *testing.T, bin, dataDir string) lostfound.ListReport {
	t.Helper()
	out, err := exec.Command(bin, "lost", "list", "--data-dir", dataDir, "--json").Output()
	if err != nil {
		t.Fatalf("kfollower lost list --data-dir %s: %v", dataDir, err)
	}
	var rep lostfound.ListReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("lost list --json: %v\n%s", err, out)
	}
	return rep
}

// chainSaved is an event's saved batches, its segments in order.
func chainSaved(t *testing.T, e lostfound.Event) []byte {
	t.Helper()
	b, err := kafka.ReadSegments(e.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
