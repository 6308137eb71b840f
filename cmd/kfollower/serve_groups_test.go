package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test binary
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
	var doc struct {
		Serve *serveStatus `json:"serve"`
	}
	if _, body, err := d.get("/status"); err != nil || json.Unmarshal([]byte(body), &doc) != nil || doc.Serve == nil || doc.Serve.Groups != "upstream" {
		t.Fatalf("/status serve = %+v (%v), want groups upstream", doc.Serve, err)
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

// TestServeGroupsUpstreamDown stops every broker of the cluster while group
// consumers (franz-go and Kafka's console consumer) run against kfollower:
// kfollower does not crash, logs and counts the unreachable upstream,
// answers group requests COORDINATOR_NOT_AVAILABLE and keeps serving
// assigned reads; once the brokers are back both groups resume, read
// every record at least once, and no committed offset is lost.
func TestServeGroupsUpstreamDown(t *testing.T) {
	ctx := context.Background()
	bin := binary(t)
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const perPartition = 40
	g := newGroupTopic(ctx, t, c, "down", 3, perPartition)
	addr := freeAddr(t)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", g.name,
		"--data-dir", t.TempDir(), "--flush", "always", "--serve", addr, "--serve-groups", "upstream")
	g.waitCopied(t, d)

	// The console consumer reads until it has printed every record of
	// both rounds, its patience longer than the outage.
	total := 2 * perPartition * int(g.parts)
	type javaResult struct {
		out kafka.ToolOutput
		err error
	}
	java := make(chan javaResult, 1)
	go func() {
		prop := "--command-property"
		if v := kafka.Version(); strings.HasPrefix(v, "3.") || strings.HasPrefix(v, "4.0.") {
			prop = "--consumer-property"
		}
		out, err := kafka.RunTool(kafka.ToolConsoleConsumer, "--bootstrap-server", addr, "--topic", g.name,
			"--group", "down-java", "--from-beginning", "--max-messages", fmt.Sprint(total), "--timeout-ms", "240000",
			prop, "auto.commit.interval.ms=1000")
		java <- javaResult{out, err}
	}()

	// franz-go's group consumer, committing every second.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("down-kgo"), kgo.ConsumeTopics(g.name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var pollErrs []string
	pctx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			fs := cl.PollFetches(pctx)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			fs.EachError(func(_ string, _ int32, err error) {
				if pctx.Err() == nil {
					pollErrs = append(pollErrs, err.Error())
				}
			})
			mu.Unlock()
		}
	}()
	defer func() {
		stopPoll()
		<-polled
		cl.Close()
	}()
	kgoHas := func(values map[string]bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for v := range values {
			if seen[v] == 0 {
				return false
			}
		}
		return true
	}
	waitFor(t, d, "the franz-go member read the first round", 60*time.Second, func() bool { return kgoHas(g.values) })
	// Both groups commit the first round before the cluster goes away.
	g.committedAtEnd(ctx, t, c, "down-kgo")
	g.committedAtEnd(ctx, t, c, "down-java")
	before := map[string]kadmOffsets{}
	for _, group := range []string{"down-kgo", "down-java"} {
		before[group] = fetchOffsets(ctx, t, c, group, g)
	}

	stopped := time.Now()
	for _, b := range c.Brokers() {
		c.Stop(b.ID)
	}
	// While every broker is down: the warning in the log, the failures
	// in the metrics, assigned reads through kfollower still whole; and
	// at least 30 s of it for the members to notice.
	d.waitLog(t, "cannot reach the upstream cluster for consumer groups", 90*time.Second)
	waitFor(t, d, "kfollower_groups_upstream_up 0 and failures counted", 90*time.Second, func() bool {
		mfs := scrape(t, d)
		return value(mfs, "kfollower_groups_upstream_up", nil) == 0 && value(mfs, "kfollower_groups_upstream_failures_total", nil) > 0 &&
			value(mfs, "kfollower_groups_requests_total", map[string]string{"error": "COORDINATOR_NOT_AVAILABLE"}) > 0
	})
	for p := range g.parts {
		if rs := consumePartition(ctx, t, addr, g.name, p, int(g.ends[p])); len(rs) != int(g.ends[p]) {
			t.Fatalf("assigned read of %s-%d during the outage: %d records, want %d", g.name, p, len(rs), g.ends[p])
		}
	}
	waitFor(t, d, "30 s of outage", 60*time.Second, func() bool { return time.Since(stopped) >= 30*time.Second })
	for _, b := range c.Brokers() {
		c.Restart(ctx, b.ID)
	}
	// No commit was lost: the cluster holds what it held before.
	for group, want := range before {
		if got := fetchOffsets(ctx, t, c, group, g); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("group %s's offsets after the outage: %v, before it: %v", group, got, want)
		}
	}

	g.produce(ctx, t, c, perPartition)
	g.waitCopied(t, d)
	waitFor(t, d, "the franz-go member read the second round", 120*time.Second, func() bool { return kgoHas(g.values) })
	g.committedAtEnd(ctx, t, c, "down-kgo")
	var jr javaResult
	select {
	case jr = <-java:
	case <-time.After(240 * time.Second):
		t.Fatal("the console consumer did not end within 240 s of the cluster's return")
	}
	if jr.err != nil {
		t.Fatalf("the console consumer: %v", jr.err)
	}
	var got []string
	for _, line := range strings.Split(jr.out.Stdout, "\n") {
		if strings.HasPrefix(line, g.name+"-") {
			got = append(got, line)
		}
	}
	// At least once: every record printed; the console consumer stops
	// at total lines, so a duplicate would show as a missing record.
	g.exactlyOnce(t, "the console consumer across the outage", got)
	g.committedAtEnd(ctx, t, c, "down-java")
	if d.exited() {
		t.Fatalf("kfollower exited: %v", d.err)
	}
	mfs := scrape(t, d)
	if v := value(mfs, "kfollower_groups_upstream_up", nil); v != 1 {
		t.Errorf("kfollower_groups_upstream_up = %v after the cluster's return, want 1", v)
	}
	if !strings.Contains(d.stderr(), "the upstream cluster answers group requests again") {
		t.Errorf("kfollower did not log the upstream's return")
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("franz-go's poll errors while the coordinator was away: %d %v", len(pollErrs), head(pollErrs))
	t.Logf("kfollower's group log lines:\n%s", tail(grepLines(d.stderr(), "component=groups"), 10))
	t.Logf("the console consumer's stderr:\n%s", tail(jr.out.Stderr, 10))
}

// kadmOffsets is a group's committed offsets by partition.
type kadmOffsets map[int32]int64

func fetchOffsets(ctx context.Context, t *testing.T, c *kafka.Cluster, group string, g *groupTopic) kadmOffsets {
	t.Helper()
	os, err := c.Admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetching %s's offsets: %v", group, err)
	}
	out := kadmOffsets{}
	for p := range g.parts {
		if o, ok := os.Lookup(g.name, p); ok {
			out[p] = o.At
		}
	}
	return out
}

// waitFor polls cond until it holds, failing after timeout or if kfollower
// exits.
func waitFor(t *testing.T, d *daemon, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if d.exited() {
			t.Fatalf("kfollower exited (%v) while waiting for %s:\n%s", d.err, what, tail(d.stderr(), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// consumePartition reads n records of topic-p from addr in assign mode.
func consumePartition(ctx context.Context, t *testing.T, addr, topic string, p int32, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n && cctx.Err() == nil {
		fs := cl.PollFetches(cctx)
		got = append(got, fs.Records()...)
	}
	return got
}
