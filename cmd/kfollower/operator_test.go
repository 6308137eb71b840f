package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What an operator meets (issue 15), each with the real binary.

// Item 1: while no bootstrap server answers, the HTTP listener is up:
// /healthz passes, /readyz is 503 with the reason, /status says
// connecting and why, /metrics exports the connection state and
// kfollower_ready 0, and "kfollower started" is logged.
func TestHTTPBeforeCluster(t *testing.T) {
	bin := binary(t)
	addr := freeAddr(t)
	data := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, bin, nil, "--bootstrap-servers", addr, "--topics", "a", "--data-dir", data)
	d.waitLog(t, `msg="kfollower started"`, 20*time.Second)
	d.waitHTTP(t, "/healthz", "alive", 10*time.Second, func(code int, _ string) bool { return code == 200 })
	d.waitHTTP(t, "/readyz", "not ready, connecting", 10*time.Second, func(code int, body string) bool {
		return code == 503 && strings.Contains(body, "not connected to the cluster yet") && strings.Contains(body, addr)
	})
	d.waitHTTP(t, "/status", "connecting, with the reason", 10*time.Second, func(code int, body string) bool {
		var doc statusDoc
		return code == 200 && json.Unmarshal([]byte(body), &doc) == nil && !doc.Ready && doc.Cluster == "connecting" &&
			strings.Contains(doc.NotReady, addr+": connect: connection refused") && doc.Partitions != nil
	})
	d.waitHTTP(t, "/metrics", "the connection state", 10*time.Second, func(code int, body string) bool {
		return code == 200 && strings.Contains(body, `kfollower_cluster_connection_state{state="connecting"} 1`) &&
			strings.Contains(body, `kfollower_cluster_connection_state{state="connected"} 0`) && strings.Contains(body, "kfollower_ready 0")
	})
	if code, took := d.stop(t, syscall.SIGTERM); code != 0 || took > 10*time.Second {
		t.Fatalf("SIGTERM while connecting: exit %d after %v", code, took)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created before the cluster answered (%v)", err)
	}
}

// Item 2: a bootstrap server that accepts TCP but is an HTTP server, which
// waits for a request line as a real one does (httptest, not a fake that
// writes first), is found out within seconds: exit 1, naming the address
// and what was seen.
func TestNotKafkaHTTPServer(t *testing.T) {
	bin := binary(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello\n")) }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	start := time.Now()
	r := runBinary(t, bin, nil, 30*time.Second, "run", "--bootstrap-servers", addr, "--topics", "a", "--data-dir", filepath.Join(t.TempDir(), "data"), "--http-listen", freeAddr(t))
	took := time.Since(start)
	want := "bootstrap server " + addr + " does not answer as a Kafka broker"
	if r.code != 1 || !strings.Contains(r.stderr, want) || took > 15*time.Second {
		t.Fatalf("exit %d after %v, stderr:\n%s\nwant exit 1 within 15 s and %q", r.code, took, r.stderr, want)
	}
	// What was seen: silence to ApiVersions, or an HTTP answer to it
	// (net/http answers 400 to a request line it cannot parse).
	if !strings.Contains(r.stderr, "sent no reply to ApiVersions") && !strings.Contains(r.stderr, "HTTP") {
		t.Fatalf("the message does not say what was seen:\n%s", r.stderr)
	}
}

// Item 2: a host name that does not resolve is named as such, and
// retried (DNS may not be ready yet when a pod starts).
func TestNoSuchHostRetried(t *testing.T) {
	bin := binary(t)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", "no-such-host.invalid:9092", "--topics", "a", "--data-dir", filepath.Join(t.TempDir(), "data"))
	d.waitLog(t, `no such host \"no-such-host.invalid\"`, 30*time.Second)
	d.waitLog(t, "attempt=2", 30*time.Second)
	if code, _ := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM while retrying: exit %d", code)
	}
}

// Item 3: Kafka's spellings, help on stdout for every command, the
// version as a flag, double dashes in help.
func TestKafkaHabits(t *testing.T) {
	bin := binary(t)
	// --bootstrap-server and --topic are run's too; the daemon starts
	// (and waits for the cluster) rather than refusing its flags.
	d := startDaemon(t, bin, nil, "--bootstrap-server", freeAddr(t), "--topic", "a", "--data-dir", filepath.Join(t.TempDir(), "data"))
	d.waitLog(t, "topics=a", 20*time.Second)
	d.stop(t, syscall.SIGTERM)
	// --topics is the audit commands' too.
	dir := t.TempDir()
	r := runBinary(t, bin, nil, 10*time.Second, "lost", "list", "--data-dir", dir, "--topics", "a,b")
	if r.code != 0 || !strings.Contains(r.stdout, "no lost+found events") {
		t.Fatalf("lost list --topics: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args := []string{n, "--help"}
		if n == "lost" {
			args = []string{"lost", "list", "--help"}
		}
		r := runBinary(t, bin, nil, 10*time.Second, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: kfollower "+n) || r.stderr != "" {
			t.Errorf("%q: exit %d, want 0 and the help on stdout only; stdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
		if singleDash.MatchString(r.stdout) {
			t.Errorf("%q lists single-dash flags:\n%s", args, r.stdout)
		}
	}
	for _, v := range []string{"--version", "version"} {
		r := runBinary(t, bin, nil, 10*time.Second, v)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "kfollower ") {
			t.Errorf("%s: exit %d, stdout %q", v, r.code, r.stdout)
		}
	}
	r = runBinary(t, bin, nil, 10*time.Second, "verify", "--bootstrap-servers", "h:1", "--toppic", "a")
	if r.code != 2 || !strings.Contains(r.stderr, "unknown flag --toppic; did you mean --topic?") || strings.Count(r.stderr, "\n") > 4 {
		t.Errorf("typo: exit %d, want 2 and a short message with the nearest flag:\n%s", r.code, r.stderr)
	}
	r = runBinary(t, bin, nil, 10*time.Second, "stauts")
	if r.code != 2 || !strings.Contains(r.stderr, `did you mean "status"?`) {
		t.Errorf("command typo: exit %d:\n%s", r.code, r.stderr)
	}
}

// singleDash finds a flag listed as -name.
var singleDash = regexp.MustCompile(`\n\s+-[a-z]`)

// Item 4: exits that do not reassure falsely.
func TestHonestExits(t *testing.T) {
	bin := binary(t)
	empty := t.TempDir()
	r := runBinary(t, bin, nil, 60*time.Second, "verify", "--bootstrap-servers", freeAddr(t), "--data-dir", empty)
	if r.code == 0 || !strings.Contains(r.stderr, "unreachable") {
		t.Errorf("verify against an unreachable cluster: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	missing := filepath.Join(empty, "no", "such", "dir")
	r = runBinary(t, bin, nil, 10*time.Second, "lost", "list", "--data-dir", missing)
	if r.code == 0 || !strings.Contains(r.stderr, missing) || strings.Contains(r.stdout, "no lost+found events") {
		t.Errorf("lost list on a missing dir: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, bin, nil, 10*time.Second, "lost", "list", "--data-dir", empty, "--json")
	var doc map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("lost list --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if ev, ok := doc["events"].([]any); !ok || len(ev) != 0 {
		t.Errorf("lost list --json on nothing: events %#v, want []", doc["events"])
	}
	r = runBinary(t, bin, nil, 10*time.Second, "lineage", "--help")
	if !strings.Contains(r.stdout, "--topic, --topics topics\n    \tcomma-separated topics whose leaders to walk (required)") {
		t.Errorf("lineage --help does not say --topic is required:\n%s", r.stdout)
	}
}

// Item 7: JSON logs print durations as strings and several errors in one
// line.
func TestJSONLogFields(t *testing.T) {
	bin := binary(t)
	a, b := freeAddr(t), freeAddr(t)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", a+","+b, "--topics", "a", "--data-dir", filepath.Join(t.TempDir(), "data"), "--log-format", "json")
	d.waitLog(t, `"attempt":2`, 20*time.Second)
	d.stop(t, syscall.SIGTERM)
	var seen bool
	for _, line := range strings.Split(strings.TrimSpace(d.stderr()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if m["msg"] != "no bootstrap server reachable; retrying" {
			continue
		}
		seen = true
		if s, ok := m["retry_in"].(string); !ok || (s != "500ms" && s != "1s" && s != "2s") {
			t.Errorf("retry_in %#v, want a duration string", m["retry_in"])
		}
		e, _ := m["err"].(string)
		if !strings.Contains(e, a+": ") || !strings.Contains(e, "; "+b+": ") || strings.Contains(e, "\n") {
			t.Errorf("err %q: want both servers on one line", e)
		}
	}
	if !seen {
		t.Fatal("no retry line")
	}
}

// kfakeCluster is an in-process Kafka (franz-go's kfake) with one topic
// of three records per partition; fetches hang while frozen is set, as
// they do from a SIGSTOPped leader.
func kfakeCluster(t *testing.T, topic string, partitions int) (addrs []string, frozen *atomic.Bool) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic))
	if err != nil {
		t.Fatal(err)
	}
	frozen = &atomic.Bool{}
	thaw := make(chan struct{})
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if frozen.Load() {
			c.SleepControl(func() { <-thaw })
		}
		return nil, nil, false
	})
	t.Cleanup(func() { close(thaw); c.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p := range partitions {
		for i := range 3 {
			rs = append(rs, &kgo.Record{Partition: int32(p), Value: []byte{byte(i)}})
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c.ListenAddrs(), frozen
}

// Items 5 and 6: a leader that stops answering shows as stalled, with the
// age of the request in flight, in /status, in the state gauge, in
// 'kfollower status' and in the progress line; and 'kfollower status'
// shows the partitions by state, lag and loss, as a table and as JSON.
func TestStallAndStatusCommand(t *testing.T) {
	bin := binary(t)
	addrs, frozen := kfakeCluster(t, "orders", 2)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(addrs, ","), "--topics", "orders",
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--stall-after", "1s", "--metadata-interval", "500ms", "--log-format", "json")
	d.waitHTTP(t, "/readyz", "ready", 60*time.Second, func(code int, _ string) bool { return code == 200 })
	waitPartitions(t, d, "both copied", func(ss []partitionStatus) bool {
		return len(ss) == 2 && ss[0].LogEndOffset == 3 && ss[1].LogEndOffset == 3 && ss[0].State == "fetching" && ss[1].State == "fetching"
	})
	host := strings.TrimPrefix(d.http, "http://")
	r := runBinary(t, bin, nil, 10*time.Second, "status", "--http", host)
	for _, want := range []string{"ready\n", "cluster: connected", "partitions: 2 (2 fetching), 2 caught up", "lag: 0 records", "loss: none since start", "orders-0", "orders-1", "LAST LOSS"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kfollower status lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 0 {
		t.Errorf("kfollower status on a ready daemon: exit %d\n%s", r.code, r.stderr)
	}
	r = runBinary(t, bin, nil, 10*time.Second, "status", "--http", d.http, "--json")
	var doc statusDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Totals.Partitions != 2 || doc.Totals.CaughtUp != 2 || doc.Totals.ByState["fetching"] != 2 {
		t.Errorf("kfollower status --json: %v, totals %+v", err, doc.Totals)
	}

	frozen.Store(true)
	waitPartitions(t, d, "stalled", func(ss []partitionStatus) bool {
		for _, s := range ss {
			if s.State != "stalled" || s.InFlight != "fetch" || s.InFlightAgeSeconds < 1 {
				return false
			}
		}
		return len(ss) == 2
	})
	d.waitHTTP(t, "/metrics", "the stalled state", 10*time.Second, func(code int, body string) bool {
		return strings.Contains(body, `kfollower_partition_state{partition="0",state="stalled",topic="orders"} 1`) &&
			strings.Contains(body, `kfollower_partition_state{partition="0",state="fetching",topic="orders"} 0`)
	})
	r = runBinary(t, bin, nil, 10*time.Second, "status", "--http", host)
	if r.code != 1 || !strings.Contains(r.stdout, "2 stalled") || !strings.Contains(r.stdout, "fetch ") {
		t.Errorf("kfollower status while stalled: exit %d\n%s", r.code, r.stdout)
	}
	d.waitLog(t, `"stalled":2`, 30*time.Second) // the progress line counts them, not as caught up

	frozen.Store(false)
	waitPartitions(t, d, "fetching again", func(ss []partitionStatus) bool {
		return len(ss) == 2 && ss[0].State != "stalled" && ss[1].State != "stalled"
	})
	for _, line := range strings.Split(d.stderr(), "\n") {
		if strings.Contains(line, `"mb_per_s":"`) {
			t.Errorf("mb_per_s is a string: %s", line)
		}
	}
}

// waitPartitions polls /status until its partitions, as /status shows
// them (stalled state, in-flight age), meet cond.
func waitPartitions(t *testing.T, d *daemon, what string, cond func([]partitionStatus) bool) {
	t.Helper()
	d.waitHTTP(t, "/status", what, 60*time.Second, func(code int, body string) bool {
		var doc statusDoc
		return code == 200 && json.Unmarshal([]byte(body), &doc) == nil && cond(doc.Partitions)
	})
}
