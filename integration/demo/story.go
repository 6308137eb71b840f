package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The story's records on demo-payments: n1 on both replicas, n2 acked
// while only broker 1 was in the ISR (committed, and lost when broker 2 is
// elected uncleanly), n3 written under the new leader.
const n1, n2, n3 = 300, 120, 200

// Steps, each announced with its number so that the test (and a reader)
// can follow.
const steps = 7

// story is the walk through, step by step; every wait is on an event
// (kfollower's /status, the cluster's metadata), with a deadline.
type story struct {
	o          options
	sa         *kafka.Standalone
	c          *kafka.Cluster
	k          *kfollower
	boot, data string
}

// status is the part of kfollower's /status the story reads.
type status struct {
	Ready      bool              `json:"ready"`
	Partitions []partitionStatus `json:"partitions"`
	Serve      *struct {
		Advertised string `json:"advertised"`
	} `json:"serve"`
}

func (s *story) status() (*status, error) {
	resp, err := http.Get(s.k.base + "/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// waitPartition waits until kfollower's status of topic-0 meets cond.
func (s *story) waitPartition(ctx context.Context, topic, what string, cond func(p partitionStatus) bool) (partitionStatus, error) {
	var got partitionStatus
	err := s.k.wait(ctx, topic+"-0: "+what, 120*time.Second, func() bool {
		st, err := s.status()
		if err != nil {
			return false
		}
		for _, p := range st.Partitions {
			if p.Topic == topic && p.Partition == 0 && cond(p) {
				got = p
				return true
			}
		}
		return false
	})
	return got, err
}

// partitionStatus is one partition of /status, as far as the story reads it.
type partitionStatus struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	State          string `json:"state"`
	Leader         int32  `json:"leader"`
	LeaderEpoch    int32  `json:"leader_epoch"`
	LogEndOffset   int64  `json:"log_end_offset"`
	Reconciled     bool   `json:"reconciled"`
	LastTruncation *struct {
		From, To int64
	} `json:"last_truncation"`
	LastLost *struct {
		From    int64  `json:"from"`
		To      int64  `json:"to"`
		Records int64  `json:"records"`
		Cause   string `json:"cause"`
	} `json:"last_lost"`
}

// step announces step i; outside --fast it gives the reader a moment
// first.
func (s *story) step(ctx context.Context, i int, format string, args ...any) {
	if !s.o.fast && i > 1 {
		select {
		case <-ctx.Done():
		case <-time.After(4 * time.Second):
		}
	}
	fmt.Println()
	say("step %d/%d: "+format, append([]any{i, steps}, args...)...)
}

// harness runs f, which may fail the way a test does (the harness's
// Fatal), as an error.
func (s *story) harness(f func()) error { return s.sa.Do(f) }

func (s *story) tell(ctx context.Context) error {
	for _, f := range []func(context.Context) error{s.cleanKill, s.uncleanElection, s.metric, s.lostList, s.verify, s.consume, s.statusTable} {
		if err := f(ctx); err != nil || ctx.Err() != nil {
			return err
		}
	}
	fmt.Println()
	say("the story is told: a clean failover raised nothing; the unclean one lost %d committed records at offsets [%d..%d] of demo-payments-0, and kfollower said so, counted them and kept them in lost+found", n2, n1, n1+n2-1)
	return nil
}

// Step 1: kill the leader of demo-orders. A replica in the ISR has every
// committed record, so the new leader's log extends kfollower's copy: it
// reconciles (KIP-101: OffsetsForLeaderEpoch) and truncates nothing.
func (s *story) cleanKill(ctx context.Context) error {
	var before, after kafka.PartitionState
	if err := s.harness(func() {
		before = s.c.WaitPartition(ctx, "demo-orders", 0, "a leader", func(st kafka.PartitionState) bool { return st.Leader > 0 })
	}); err != nil {
		return err
	}
	copied, err := s.waitPartition(ctx, "demo-orders", "records copied", func(p partitionStatus) bool { return p.LogEndOffset >= 200 })
	if err != nil || ctx.Err() != nil {
		return err
	}
	s.step(ctx, 1, "a clean leader kill: SIGKILL broker %d, the leader of demo-orders-0, while the producer writes (kfollower holds %d records of it)", before.Leader, copied.LogEndOffset)
	if err := s.harness(func() {
		s.c.Kill(before.Leader)
		after = s.c.WaitPartition(ctx, "demo-orders", 0, "a new leader", func(st kafka.PartitionState) bool {
			return st.Leader > 0 && st.Leader != before.Leader
		})
	}); err != nil {
		return err
	}
	say("the controller elected broker %d (leader epoch %d) from the ISR", after.Leader, after.LeaderEpoch)
	p, err := s.waitPartition(ctx, "demo-orders", "following the new leader", func(p partitionStatus) bool {
		return p.LeaderEpoch >= after.LeaderEpoch && p.State == "fetching" && p.Reconciled && p.LogEndOffset > copied.LogEndOffset
	})
	if err != nil || ctx.Err() != nil {
		return err
	}
	if p.LastTruncation != nil || p.LastLost != nil {
		return fmt.Errorf("a clean failover truncated demo-orders-0: %+v", p)
	}
	say("no alarm: kfollower reconciled with broker %d at epoch %d, truncated nothing and copies on (log end %d); the ISR had every committed record", p.Leader, p.LeaderEpoch, p.LogEndOffset)
	say("restarting broker %d", before.Leader)
	return s.harness(func() { s.c.Restart(ctx, before.Leader) })
}

// Step 2: KIP-101's lost-data case, for real. Broker 2 falls out of the
// ISR (SIGSTOP); records acked by broker 1 alone are committed and
// kfollower copies them; broker 1 dies; broker 2 comes back and is elected
// uncleanly. Its log lacks those records: kfollower's reconciliation finds
// where the logs part and reports the loss.
func (s *story) uncleanElection(ctx context.Context) error {
	const a, b = int32(1), int32(2)
	s.step(ctx, 2, "an unclean election: demo-payments-0 on brokers %d and %d, records that only broker %d has, then broker %d elected", a, b, a, b)
	if err := s.harness(func() {
		s.c.CreateTopic(ctx, "demo-payments", [][]int32{{a, b}}, map[string]string{"min.insync.replicas": "1"})
	}); err != nil {
		return err
	}
	if err := s.produce(ctx, "demo-payments", "n1", n1); err != nil {
		return err
	}
	if _, err := s.waitPartition(ctx, "demo-payments", fmt.Sprintf("%d records copied", n1), func(p partitionStatus) bool { return p.LogEndOffset == n1 }); err != nil || ctx.Err() != nil {
		return err
	}
	say("%d records on both replicas, and in kfollower's copy; pausing broker %d (SIGSTOP) until it leaves the ISR", n1, b)
	if err := s.harness(func() {
		s.c.Pause(b)
		s.c.WaitPartition(ctx, "demo-payments", 0, "ISR [1]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a}) })
	}); err != nil {
		return err
	}
	if err := s.produce(ctx, "demo-payments", "n2", n2); err != nil {
		return err
	}
	if _, err := s.waitPartition(ctx, "demo-payments", fmt.Sprintf("%d records copied", n1+n2), func(p partitionStatus) bool { return p.LogEndOffset == n1+n2 }); err != nil || ctx.Err() != nil {
		return err
	}
	say("%d more records acked by broker %d alone (acks=all, ISR [%d]): committed, and copied by kfollower (log end %d)", n2, a, a, n1+n2)
	var elected kafka.PartitionState
	if err := s.harness(func() {
		s.c.Kill(a)
		s.c.WaitPartition(ctx, "demo-payments", 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
		s.c.Resume(b)
		elected = s.c.ElectUnclean(ctx, "demo-payments", 0)
	}); err != nil {
		return err
	}
	say("broker %d killed; broker %d resumed and elected uncleanly (ElectLeaders UNCLEAN): leader %d, epoch %d; its log ends at %d", a, b, elected.Leader, elected.LeaderEpoch, n1)
	p, err := s.waitPartition(ctx, "demo-payments", "the loss reported", func(p partitionStatus) bool { return p.LastLost != nil && p.State == "fetching" })
	if err != nil || ctx.Err() != nil {
		return err
	}
	for _, line := range strings.Split(s.k.logged(), "\n") {
		if strings.Contains(line, "committed data lost") && strings.Contains(line, "demo-payments-0") {
			say("kfollower's loss line:\n    %s", line)
		}
	}
	say("kfollower truncated its copy to the new leader's log and reports %d committed records lost at offsets [%d..%d] (cause %s); they are kept in lost+found",
		p.LastLost.Records, p.LastLost.From, p.LastLost.To-1, p.LastLost.Cause)
	if p.LastLost.From != n1 || p.LastLost.To != n1+n2 {
		return fmt.Errorf("kfollower reported the loss of [%d, %d), want [%d, %d)", p.LastLost.From, p.LastLost.To, n1, n1+n2)
	}
	if err := s.produce(ctx, "demo-payments", "n3", n3); err != nil {
		return err
	}
	_, err = s.waitPartition(ctx, "demo-payments", fmt.Sprintf("%d records copied", n1+n3), func(p partitionStatus) bool { return p.LogEndOffset == n1+n3 })
	if err == nil {
		say("%d new records under broker %d copied: kfollower follows the new history (log end %d)", n3, b, n1+n3)
	}
	return err
}

// Step 3: the metric the shipped alert (deploy/kfollower-rules.yml,
// KafkaCommittedDataLost) fires on.
func (s *story) metric(ctx context.Context) error {
	s.step(ctx, 3, "the metric: %s/metrics", s.k.base)
	resp, err := http.Get(s.k.base + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	found := false
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "kfollower_committed_records_lost_total{") || strings.HasPrefix(l, `kfollower_truncations_total{cause="offsets-for-leader-epoch"`) {
			fmt.Println("    " + l)
			found = found || l == fmt.Sprintf(`kfollower_committed_records_lost_total{topic="demo-payments"} %d`, n2)
		}
	}
	if !found {
		return fmt.Errorf("no kfollower_committed_records_lost_total{topic=\"demo-payments\"} %d in /metrics", n2)
	}
	say("an alert on increase(kfollower_committed_records_lost_total[...]) > 0 fires for demo-payments, and not for demo-orders")
	return sc.Err()
}

// Step 4: lost+found, from the command line.
func (s *story) lostList(ctx context.Context) error {
	s.step(ctx, 4, "what was lost, from lost+found: kfollower lost list")
	_, err := s.kfollowerCmd(ctx, 0, "lost", "list", "--data-dir", s.data)
	return err
}

// Step 5: the copy agrees with the cluster again, batch by batch.
func (s *story) verify(ctx context.Context) error {
	s.step(ctx, 5, "the copy matches the cluster again after the reconciliation: kfollower verify")
	_, err := s.kfollowerCmd(ctx, 0, "verify", "--bootstrap-server", s.boot, "--data-dir", s.data, "--topic", "demo-payments")
	return err
}

// Step 6: Kafka's own console consumer reads kfollower's copy, served
// as a read-only broker (--serve).
func (s *story) consume(ctx context.Context) error {
	st, err := s.status()
	if err != nil {
		return err
	}
	if st.Serve == nil {
		return errors.New("kfollower's /status shows no --serve endpoint")
	}
	addr := st.Serve.Advertised
	s.step(ctx, 6, "Kafka's console consumer reads demo-payments from kfollower itself (--serve %s)", addr)
	out, err := kafka.RunTool(kafka.ToolConsoleConsumer, "--bootstrap-server", addr, "--topic", "demo-payments",
		"--partition", "0", "--offset", "earliest", "--max-messages", fmt.Sprint(n1+n3), "--timeout-ms", "60000")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	for i, l := range lines {
		if i < 3 || i >= len(lines)-3 {
			fmt.Println("    " + l)
		} else if i == 3 {
			fmt.Printf("    ... (%d more)\n", len(lines)-6)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out.Stderr), "\n") {
		if strings.Contains(l, "Processed a total of") {
			fmt.Println("    " + l)
		}
	}
	say("%d records: the %d from before the loss and the %d after; the %d lost ones are in lost+found, not in the copy", len(lines), n1, n3, n2)
	if len(lines) != n1+n3 {
		return fmt.Errorf("the console consumer printed %d records, want %d", len(lines), n1+n3)
	}
	return nil
}

// Step 7: all of it at a glance.
func (s *story) statusTable(ctx context.Context) error {
	s.step(ctx, 7, "at a glance: kfollower status")
	_, err := s.kfollowerCmd(ctx, 1, "status", "--http", strings.TrimPrefix(s.k.base, "http://"))
	return err
}

// kfollowerCmd runs the kfollower binary with args, prints what it
// printed, and fails unless it exits with want.
func (s *story) kfollowerCmd(ctx context.Context, want int, args ...string) (string, error) {
	fmt.Printf("    $ kfollower %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, s.o.bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return "", err
	}
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		fmt.Println("    " + l)
	}
	fmt.Printf("    (exit status %d)\n", code)
	if code != want && ctx.Err() == nil {
		return out.String(), fmt.Errorf("kfollower %s: exit status %d, want %d", args[0], code, want)
	}
	return out.String(), nil
}

// produce writes n records "<prefix>-<i>" to topic-0 with acks=all.
func (s *story) produce(ctx context.Context, topic, prefix string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.c.Reachable()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Partition: 0, Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("producing %d records to %s: %w", n, topic, err)
	}
	return nil
}
