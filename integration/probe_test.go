package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/probe"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `kfollower probe` against real Kafka (KAFKA_VERSION) after a
// history with several leader changes and an unclean election, every
// check passes on every partition:
//
//   - moving: three partitions, RF 3, written in three rounds with the
//     leaders moved between them (reordered replicas, preferred
//     elections), and moving-0 written to in the middle of its probe;
//   - probed: RF 2, A leads epoch 0; B paused, A writes alone; A killed, B
//     resumed and elected uncleanly (B lacks A's last records); A
//     restarted, truncated by the protocol, and made leader again by a
//     preferred election; written in each leadership.
//
// Then the failover scenario, on a scratch topic it creates and deletes:
// every check of every step passes, each move gives a higher epoch, and
// the topic is gone afterwards.
func TestProbeAfterUncleanElection(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic, moving = "probed", "moving"
	const a, b = int32(1), int32(2)
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{
		"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
	})
	c.CreateTopic(ctx, moving, rf3x4[:3], nil)
	for round := range 3 {
		for p := int32(0); p < 3; p++ {
			produceTo(ctx, t, c, moving, p, fmt.Sprintf("r%d", round), 40+int(p)*10)
		}
		if round < 2 {
			moveLeaders(ctx, t, c, moving, 3)
		}
	}

	produceTo(ctx, t, c, topic, 0, "n1", 300)
	c.Pause(b)
	c.WaitPartition(ctx, topic, 0, "ISR [A]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a}) })
	produceTo(ctx, t, c, topic, 0, "n2", 120)
	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Resume(b)
	unclean := c.ElectUnclean(ctx, topic, 0)
	if unclean.Leader != b {
		t.Fatalf("unclean election chose %v, want leader %d", unclean, b)
	}
	if newer := produceTo(ctx, t, c, topic, 0, "n3", 200); len(newer) != 200 || newer[0].Offset != 300 {
		t.Fatalf("B wrote %d records from %d, want 200 from 300 (it lacks A's last 120)", len(newer), newer[0].Offset)
	}
	c.Restart(ctx, a)
	c.WaitPartition(ctx, topic, 0, "A back in the ISR", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a, b}) })
	back := c.ElectPreferred(ctx, topic, 0)
	if back.Leader != a || back.LeaderEpoch <= unclean.LeaderEpoch {
		t.Fatalf("preferred election gave %v, want A above epoch %d", back, unclean.LeaderEpoch)
	}
	produceTo(ctx, t, c, topic, 0, "n4", 80)
	if t.Failed() {
		return
	}

	// Records arrive on moving-0 in the middle of its probe (written
	// before the probe's first and fifth Fetch go out): answers that
	// change as the log grows must not fail a check.
	cl := c.Client()
	var fetches int
	during := clusterFunc(func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
		if f, ok := req.(*kmsg.FetchRequest); ok && f.Topics[0].Topic == moving && f.Topics[0].Partitions[0].Partition == 0 {
			if fetches++; fetches == 1 || fetches == 5 {
				produceTo(ctx, t, c, moving, 0, fmt.Sprintf("during-%d", fetches), 30)
			}
		}
		return probe.KgoCluster(cl).Request(ctx, broker, req)
	})
	rep, err := probe.Run(ctx, probe.Options{Cluster: during, Topics: []string{topic, moving}})
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, rep)
	if rep.ExitCode() != probe.ExitOK || len(rep.Partitions) != 4 {
		t.Fatalf("exit code %d for %d partitions, want %d for 4", rep.ExitCode(), len(rep.Partitions), probe.ExitOK)
	}
	for _, p := range rep.Partitions {
		checkAllPass(t, p, 5)
		if len(p.Lineage) < 3 {
			t.Errorf("%s-%d: lineage %v, want 3 or more epochs", p.Topic, p.Partition, p.Lineage)
		}
	}
	// moving-0: 120 records before, 60 during; the walk saw the first 120.
	if m := rep.Partitions[0]; m.Topic != moving || m.Partition != 0 || m.LogEnd != 180 || m.HighWatermark != 180 {
		t.Errorf("%s-%d: log end %d, high watermark %d; want 180 after the writes during the probe", m.Topic, m.Partition, m.LogEnd, m.HighWatermark)
	}
	if p := rep.Partitions[3]; p.Topic != topic || p.LeaderEpoch != back.LeaderEpoch || len(p.Lineage) != 3 ||
		p.Lineage[1].Epoch != unclean.LeaderEpoch || p.Lineage[1].StartOffset != 300 || p.Lineage[2].StartOffset != 500 {
		t.Errorf("%s-%d: epoch %d lineage %v; want epoch %d, the unclean epoch %d from 300 and epoch %d from 500",
			p.Topic, p.Partition, p.LeaderEpoch, p.Lineage, back.LeaderEpoch, unclean.LeaderEpoch, back.LeaderEpoch)
	}

	t.Run("failover scenario", func(t *testing.T) {
		const scratch = "probe-scratch"
		var log strings.Builder
		rep, err := probe.Failover(ctx, probe.FailoverOptions{Client: cl, Topic: scratch, Log: &log})
		t.Logf("scenario log:\n%s", log.String())
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, rep)
		if !strings.Contains(log.String(), "this scenario WRITES") || !strings.Contains(log.String(), "deleting topic "+scratch) {
			t.Errorf("the scenario did not say what it writes, or that it deletes the topic")
		}
		if rep.ExitCode() != probe.ExitOK || len(rep.Partitions) != 5 {
			t.Fatalf("exit code %d for %d steps, want %d for 5", rep.ExitCode(), len(rep.Partitions), probe.ExitOK)
		}
		last := int32(-1)
		for i, p := range rep.Partitions {
			want := 6 // checks 1–5 and the epoch start
			if i > 0 {
				want = 7 // and the epoch increase
			}
			checkAllPass(t, p, want)
			if p.LeaderEpoch <= last {
				t.Errorf("step %q: epoch %d, not above %d", p.Step, p.LeaderEpoch, last)
			}
			last = p.LeaderEpoch
		}
		if !strings.Contains(rep.Partitions[2].Step, "reassignment") || !strings.Contains(rep.Partitions[1].Step, "preferred election") {
			t.Errorf("steps %q, %q: want a preferred election, then a reassignment", rep.Partitions[1].Step, rep.Partitions[2].Step)
		}
		// Deletion completes asynchronously.
		deadline := time.Now().Add(60 * time.Second)
		for {
			td, err := c.Admin().ListTopics(ctx, scratch)
			if d, ok := td[scratch]; err == nil && (!ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("topic %s still exists after the scenario", scratch)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := probe.Failover(ctx, probe.FailoverOptions{Client: cl, Topic: moving}); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("failover on an existing topic: %v, want a refusal", err)
		}
	})
}

// clusterFunc is a probe.Cluster from a function.
type clusterFunc func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)

func (f clusterFunc) Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	return f(ctx, broker, req)
}

// checkAllPass fails t unless p was probed and every one of its want
// checks passed (none failed, none inapplicable).
func checkAllPass(t *testing.T, p probe.PartitionReport, want int) {
	t.Helper()
	if p.Error != "" {
		t.Errorf("%s-%d (%s): %s", p.Topic, p.Partition, p.Step, p.Error)
		return
	}
	if len(p.Checks) != want {
		t.Errorf("%s-%d (%s): %d checks, want %d", p.Topic, p.Partition, p.Step, len(p.Checks), want)
	}
	for _, ch := range p.Checks {
		if ch.Status != probe.Pass {
			t.Errorf("%s-%d (%s): %s %s: %s", p.Topic, p.Partition, p.Step, ch.Check, ch.Status, ch.Reason)
			for _, o := range ch.Evidence {
				if o.Status == probe.Fail {
					t.Errorf("  %s: answered %s; expected %s", o.Request, o.Answer, o.Expected)
				}
			}
		}
	}
}
