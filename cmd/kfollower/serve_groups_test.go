package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/judges"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupTopic is what the group tests read: three partitions, every record
// value unique, so that each consumer's output says which records it read.
type groupTopic struct {
	name   string
	parts  int32
	values map[string]bool // every value produced
	ends   map[int32]int64 // the cluster's end offsets
}

// newGroupTopic creates topic with parts partitions (RF 3) and n records on
// each.
func newGroupTopic(ctx context.Context, t *testing.T, c *kafka.Cluster, name string, parts int32, n int) *groupTopic {
	t.Helper()
	var assign [][]int32
	for range parts {
		assign = append(assign, []int32{1, 2, 3})
	}
	c.CreateTopic(ctx, name, assign, nil)
	g := &groupTopic{name: name, parts: parts, values: map[string]bool{}, ends: map[int32]int64{}}
	g.produce(ctx, t, c, n)
	return g
}

// produce appends n records to each partition.
func (g *groupTopic) produce(ctx context.Context, t *testing.T, c *kafka.Cluster, n int) {
	t.Helper()
	for p := range g.parts {
		prefix := fmt.Sprintf("%s-p%d-from%d", g.name, p, g.ends[p])
		produce(ctx, t, c, g.name, p, prefix, n)
		for i := range n {
			g.values[fmt.Sprintf("%s-%06d", prefix, i)] = true
		}
		g.ends[p] += int64(n)
	}
}

// waitCopied waits until kfollower serves every record of the topic.
func (g *groupTopic) waitCopied(t *testing.T, d *daemon) {
	t.Helper()
	for p := range g.parts {
		end := g.ends[p]
		waitStatus(t, d, g.name, p, fmt.Sprintf("log end %d", end), func(s fetcher.Status) bool { return s.LogEndOffset == end })
	}
}

// exactlyOnce fails unless got holds every value of the topic once.
func (g *groupTopic) exactlyOnce(t *testing.T, who string, got []string) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	var dup, missing, stray []string
	for v, n := range seen {
		switch {
		case !g.values[v]:
			stray = append(stray, v)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s×%d", v, n))
		}
	}
	for v := range g.values {
		if seen[v] == 0 {
			missing = append(missing, v)
		}
	}
	if len(dup)+len(missing)+len(stray) > 0 {
		slices.Sort(dup)
		slices.Sort(missing)
		t.Fatalf("%s read %d records, want each of %d once: %d twice or more %v, %d missing %v, %d not produced %v", who, len(got), len(g.values),
			len(dup), head(dup), len(missing), head(missing), len(stray), head(stray))
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// committedAtEnd waits until group's committed offsets in the cluster are
// the topic's end offsets, every partition.
func (g *groupTopic) committedAtEnd(ctx context.Context, t *testing.T, c *kafka.Cluster, group string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		os, err := c.Admin().FetchOffsets(ctx, group)
		ok := err == nil
		var got []string
		for p := range g.parts {
			o, found := os.Lookup(g.name, p)
			got = append(got, fmt.Sprintf("%d:%d", p, o.At))
			ok = ok && found && o.At == g.ends[p]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s's offsets in the cluster: %v (%v), want the end offsets %v", group, got, err, g.ends)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// consoleGroup runs Kafka's console consumer in group against addr until it
// has printed every record of the topic, and returns the values printed.
func consoleGroup(t *testing.T, addr string, g *groupTopic, group string, props ...string) []string {
	t.Helper()
	// --consumer-property is --command-property from 4.1 on (KIP-1147).
	prop := "--command-property"
	if v := kafka.Version(); strings.HasPrefix(v, "3.") || strings.HasPrefix(v, "4.0.") {
		prop = "--consumer-property"
	}
	args := []string{"--bootstrap-server", addr, "--topic", g.name, "--group", group, "--from-beginning",
		"--max-messages", fmt.Sprint(len(g.values)), "--timeout-ms", "90000"}
	for _, p := range props {
		args = append(args, prop, p)
	}
	out, err := kafka.RunTool(kafka.ToolConsoleConsumer, args...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(out.Stdout, "\n") {
		if strings.HasPrefix(line, g.name+"-") {
			got = append(got, line)
		}
	}
	return got
}

// pythonConsumer is a confluent-kafka (librdkafka) group consumer: it reads
// until it has n records or 90 s pass, commits synchronously, closes
// (leaving the group) and prints each value on a line.
const pythonConsumer = `
import sys, time
from confluent_kafka import Consumer
addr, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": addr, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False})
c.subscribe([topic])
got, deadline = [], time.time() + 90
while len(got) < n and time.time() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        print("error:", m.error(), file=sys.stderr)
        continue
    got.append(m.value().decode())
if got:
    c.commit(asynchronous=False)
c.close()
for v in got:
    print(v)
`

// confluentGroup runs the confluent-kafka consumer against addr.
func confluentGroup(t *testing.T, addr string, g *groupTopic, group string) []string {
	t.Helper()
	j, err := judges.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "consume.py")
	if err := os.WriteFile(script, []byte(pythonConsumer), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Python, script, addr, g.name, group, fmt.Sprint(len(g.values)))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent-kafka consumer: %v\n%s", err, tail(stderr.String(), 20))
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			got = append(got, line)
		}
	}
	if len(got) != len(g.values) {
		t.Logf("confluent-kafka's stderr:\n%s", tail(stderr.String(), 20))
	}
	return got
}

// kgoGroup is a franz-go group consumer of the topic on seeds that commits
// exactly the records it returns.
func kgoGroup(t *testing.T, seeds []string, g *groupTopic, group string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(g.name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// readCommit polls cl for n records, commits them and closes cl (leaving
// the group); it returns their values.
func readCommit(ctx context.Context, t *testing.T, cl *kgo.Client, n int, who string) []string {
	t.Helper()
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var got []string
	var rs []*kgo.Record
	for len(got) < n {
		fs := cl.PollRecords(cctx, n-len(got))
		if cctx.Err() != nil {
			t.Fatalf("%s: %d of %d records within 60 s", who, len(got), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s: %s-%d: %v", who, topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			rs = append(rs, r)
		})
	}
	if err := cl.CommitRecords(cctx, rs...); err != nil {
		t.Fatalf("%s: committing: %v", who, err)
	}
	return got
}

// TestServeGroups runs the kfollower binary with --serve --serve-groups
// upstream against a real cluster (issue 12's acceptance): Kafka's console
// consumer in a classic group and in a KIP-848 group, and a
// confluent-kafka group consumer, each read every record once from
// kfollower and their commits are the cluster's; a group moves cluster →
// kfollower → cluster with no duplicate and no gap; a group with members
// on both balances and reads every record once.
func TestServeGroups(t *testing.T) {
	ctx := context.Background()
	bin := binary(t)
	c := kafka.Start(t, kafka.Options{})
	const perPartition = 60
	topics := map[string]*groupTopic{}
	for _, name := range []string{"g-classic", "g-848", "g-confluent", "g-move"} {
		topics[name] = newGroupTopic(ctx, t, c, name, 3, perPartition)
	}
	// The mixed group's topic starts empty: its records are produced
	// once both members hold their partitions.
	mixed := newGroupTopic(ctx, t, c, "g-mixed", 4, 0)

	addr := freeAddr(t)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", "g-.*",
		"--data-dir", t.TempDir(), "--flush", "always", "--serve", addr, "--serve-groups", "upstream")
	for _, g := range topics {
		g.waitCopied(t, d)
	}

	t.Run("console consumer, classic group", func(t *testing.T) {
		g := topics["g-classic"]
		got := consoleGroup(t, addr, g, "console-classic")
		g.exactlyOnce(t, "the console consumer (classic)", got)
		g.committedAtEnd(ctx, t, c, "console-classic")
		desc, err := c.Admin().DescribeGroups(ctx, "console-classic")
		if err != nil || desc["console-classic"].Err != nil || desc["console-classic"].ProtocolType != "consumer" {
			t.Fatalf("the cluster's DescribeGroups: %+v %v, want the classic consumer group", desc["console-classic"], err)
		}
	})

	t.Run("console consumer, KIP-848 group", func(t *testing.T) {
		g := topics["g-848"]
		got := consoleGroup(t, addr, g, "console-848", "group.protocol=consumer")
		g.exactlyOnce(t, "the console consumer (group.protocol=consumer)", got)
		g.committedAtEnd(ctx, t, c, "console-848")
		lg, err := c.Admin().ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lg["console-848"].GroupType != "consumer" {
			t.Fatalf("the cluster lists console-848 as %+v", lg["console-848"])
		}
		desc, err := c.Admin().DescribeConsumerGroups(ctx, "console-848")
		if err != nil || desc.Error() != nil {
			t.Fatalf("ConsumerGroupDescribe of console-848 in the cluster: %v %v", err, desc.Error())
		}
	})

	t.Run("confluent-kafka group", func(t *testing.T) {
		g := topics["g-confluent"]
		got := confluentGroup(t, addr, g, "confluent")
		g.exactlyOnce(t, "the confluent-kafka consumer", got)
		g.committedAtEnd(ctx, t, c, "confluent")
	})

	t.Run("move a group", func(t *testing.T) {
		// A third on the cluster, a third on kfollower, the rest on the
		// cluster again: each member continues from the commit of the
		// one before it.
		g := topics["g-move"]
		third := len(g.values) / 3
		var got []string
		got = append(got, readCommit(ctx, t, kgoGroup(t, c.Bootstrap(), g, "mover"), third, "on the cluster")...)
		got = append(got, readCommit(ctx, t, kgoGroup(t, []string{addr}, g, "mover"), third, "on kfollower")...)
		got = append(got, readCommit(ctx, t, kgoGroup(t, c.Bootstrap(), g, "mover"), len(g.values)-2*third, "on the cluster again")...)
		g.exactlyOnce(t, "the group moved cluster → kfollower → cluster", got)
		g.committedAtEnd(ctx, t, c, "mover")
	})

	t.Run("members on both", func(t *testing.T) {
		// Two members, one on the cluster, one on kfollower: the
		// upstream coordinator gives each two of the four partitions
		// (cooperative-sticky, kgo's default); the records are
		// produced once it has, and are read once between them.
		var mu sync.Mutex
		owned := map[string]map[int32]bool{}
		track := func(who string) kgo.Opt {
			owned[who] = map[int32]bool{}
			return kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range m[mixed.name] {
					owned[who][p] = true
				}
			})
		}
		revoked := func(who string) kgo.Opt {
			drop := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range m[mixed.name] {
					delete(owned[who], p)
				}
			}
			return kgo.OnPartitionsRevoked(drop)
		}
		onCluster := kgoGroup(t, c.Bootstrap(), mixed, "mixed", track("cluster"), revoked("cluster"))
		onKf := kgoGroup(t, []string{addr}, mixed, "mixed", track("kfollower"), revoked("kfollower"))
		defer onCluster.Close()
		defer onKf.Close()
		var wg sync.WaitGroup
		var gotMu sync.Mutex
		var got []string
		per := map[string]int{}
		cctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		for who, cl := range map[string]*kgo.Client{"cluster": onCluster, "kfollower": onKf} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for cctx.Err() == nil {
					fs := cl.PollFetches(cctx)
					gotMu.Lock()
					fs.EachRecord(func(r *kgo.Record) {
						got = append(got, string(r.Value))
						per[who]++
					})
					gotMu.Unlock()
				}
			}()
		}
		balanced := func() bool {
			mu.Lock()
			defer mu.Unlock()
			a, b := owned["cluster"], owned["kfollower"]
			if len(a) != 2 || len(b) != 2 {
				return false
			}
			for p := range a {
				if b[p] {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(60 * time.Second)
		for !balanced() {
			if time.Now().After(deadline) {
				mu.Lock()
				t.Fatalf("the group did not balance within 60 s: %v", owned)
			}
			time.Sleep(100 * time.Millisecond)
		}
		mixed.produce(ctx, t, c, perPartition)
		for {
			gotMu.Lock()
			n := len(got)
			gotMu.Unlock()
			if n >= len(mixed.values) || cctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		mixed.exactlyOnce(t, "the members on the cluster and on kfollower", got)
		if per["cluster"] != 2*perPartition || per["kfollower"] != 2*perPartition {
			t.Fatalf("records read per member %v, want %d each (two partitions each)", per, 2*perPartition)
		}
	})

	// Every group request went through kfollower's forwarding, and none
	// failed to reach the cluster.
	mfs := scrape(t, d)
	if n := value(mfs, "kfollower_groups_requests_total", map[string]string{"api": "JoinGroup", "error": "NONE"}); n == 0 {
		t.Errorf("kfollower_groups_requests_total{api=JoinGroup,error=NONE} is 0")
	}
	if n := value(mfs, "kfollower_groups_requests_total", map[string]string{"api": "ConsumerGroupHeartbeat", "error": "NONE"}); n == 0 {
		t.Errorf("kfollower_groups_requests_total{api=ConsumerGroupHeartbeat,error=NONE} is 0")
	}
	if n := value(mfs, "kfollower_groups_upstream_failures_total", nil); n != 0 {
		t.Errorf("kfollower_groups_upstream_failures_total = %v, want 0", n)
	}
	if n := value(mfs, "kfollower_groups_commits_above_high_watermark_total", nil); n != 0 {
		t.Errorf("kfollower_groups_commits_above_high_watermark_total = %v, want 0", n)
	}
}
