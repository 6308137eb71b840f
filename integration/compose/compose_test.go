//go:build compose

package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

// The compose project's addresses on the host (docker-compose.yml's ports).
var (
	hostBrokers  = []string{"127.0.0.1:29092", "127.0.0.1:39092", "127.0.0.1:49092"}
	kfollowerURL = "http://127.0.0.1:9644"
	promURL      = "http://127.0.0.1:9090"
)

// composeCmd is the compose command integration/compose/run uses ("docker
// compose" or "docker-compose"); it exports COMPOSE_PROJECT_NAME and
// COMPOSE_FILE, so the commands here name the same project.
var composeCmd []string

// kfollowerBin is kfollower built on the host, for `verify`.
var kfollowerBin string

func TestMain(m *testing.M) {
	composeCmd = strings.Fields(os.Getenv("KFOLLOWER_COMPOSE"))
	if len(composeCmd) == 0 || os.Getenv("COMPOSE_PROJECT_NAME") == "" {
		fmt.Fprintln(os.Stderr, "these tests need the compose project that integration/compose/run (make test-compose) brings up: KFOLLOWER_COMPOSE and COMPOSE_PROJECT_NAME are not set")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "kfollower-compose-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kfollowerBin = filepath.Join(dir, "kfollower")
	build := exec.Command("go", "build", "-o", kfollowerBin, "../../cmd/kfollower")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building kfollower: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	http.DefaultClient.CloseIdleConnections() // keep-alive readers are not leaks
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestCompose runs in order, each step on what the one before left: the
// project is one long-lived cluster, as a user's would be.
func TestCompose(t *testing.T) {
	cl := newClient(t)
	adm := kadm.NewClient(cl)
	waitHTTP(t, kfollowerURL+"/healthz", 2*time.Minute)
	nothing := alertExpr(t, "KfollowerFollowsNothing")

	// Before any topic exists: ready with zero partitions (README,
	// "/readyz"), and the alert for a --topics that matches nothing sees it.
	t.Run("ZeroPartitions", func(t *testing.T) {
		if st := getStatus(t); !st.Ready || len(st.Partitions) != 0 {
			t.Fatalf("/status before any topic: ready %v, %d partitions; want ready with none", st.Ready, len(st.Partitions))
		}
		waitHTTP(t, kfollowerURL+"/readyz", time.Second)
		waitProm(t, nothing, 2*time.Minute, func(v []promSample) error {
			if len(v) != 1 {
				return fmt.Errorf("%d series, want 1", len(v))
			}
			return nil
		})
	})

	produced := map[string]int{}
	t.Run("FollowAndVerify", func(t *testing.T) {
		// The in-network listener, as docker-compose.yml and the README show.
		compose(t, "exec", "-T", "kafka-1", "/opt/kafka/bin/kafka-topics.sh", "--bootstrap-server", "kafka-1:19092",
			"--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "3")
		// And the host listener.
		res, err := adm.CreateTopic(ctxT(t, time.Minute), 1, 3, nil, "audit")
		if err != nil || res.Err != nil {
			t.Fatalf("creating topic audit: %v %v", err, res.Err)
		}
		produce(t, cl, "orders", 6000)
		produce(t, cl, "audit", 500)
		produced["orders"], produced["audit"] = 6000, 500
		st := waitCaughtUp(t, adm, []string{"orders", "audit"})
		var total int64
		for _, p := range st.Partitions {
			total += p.LogEndOffset
		}
		if total != 6500 {
			t.Fatalf("kfollower holds %d records of orders and audit, want 6500: %+v", total, st.Partitions)
		}
		verifyAll(t, 4)
	})

	t.Run("Prometheus", func(t *testing.T) {
		waitProm(t, `kfollower_ready`, 2*time.Minute, func(v []promSample) error {
			if len(v) != 1 || v[0].Value != 1 {
				return fmt.Errorf("kfollower_ready = %v, want one series at 1", v)
			}
			return nil
		})
		waitProm(t, `up{job="kfollower"}`, time.Minute, func(v []promSample) error {
			if len(v) != 1 || v[0].Value != 1 {
				return fmt.Errorf("up = %v, want 1", v)
			}
			return nil
		})
		checkRulesLoaded(t)
		waitProm(t, nothing, time.Minute, func(v []promSample) error {
			if len(v) != 0 {
				return fmt.Errorf("%v, want no series now that partitions are followed", v)
			}
			return nil
		})
	})

	t.Run("LeaderKilled", func(t *testing.T) {
		before := scrape(t)
		leader := mustLeaderOf(t, adm, "orders", 0)
		service := fmt.Sprintf("kafka-%d", leader)
		ctr := containerID(t, service)
		t.Logf("orders-0's leader is node %d (%s, container %.12s)", leader, service, ctr)

		// Produce with acks=all while the leader's container is killed:
		// every acknowledged record must end up in the copy, and nothing is
		// truncated (a clean election: the new leader was in the ISR).
		ctx, cancel := context.WithCancel(context.Background())
		acked := make(chan int, 1)
		go func() { acked <- produceUntil(ctx, cl, "orders") }()
		waitFor(t, "records produced before the kill", time.Minute, func() error {
			end, err := leaderEnd(adm, "orders")
			if n := end - int64(produced["orders"]); err != nil || n < 1000 {
				return fmt.Errorf("%d new records so far (%v)", n, err)
			}
			return nil
		})
		docker(t, "kill", ctr)
		var atFailover int64
		waitFor(t, "orders-0 led by another node", time.Minute, func() error {
			l, err := leaderOf(adm, "orders", 0)
			if err != nil || l == leader || l < 0 {
				return fmt.Errorf("leader %d (%v)", l, err)
			}
			atFailover, err = leaderEnd(adm, "orders")
			return err
		})
		waitFor(t, "records produced after the failover", time.Minute, func() error {
			end, err := leaderEnd(adm, "orders")
			if n := end - atFailover; err != nil || n < 1000 {
				return fmt.Errorf("%d new records so far (%v)", n, err)
			}
			return nil
		})
		cancel()
		n := <-acked
		if n < 2000 {
			t.Fatalf("only %d records acknowledged around the failover", n)
		}
		produced["orders"] += n
		t.Logf("%d records acknowledged around the kill", n)

		st := waitCaughtUp(t, adm, []string{"orders", "audit"})
		var held int64
		for _, p := range st.Partitions {
			if p.Topic == "orders" {
				held += p.LogEndOffset
			}
			if p.LastTruncation != nil {
				t.Errorf("%s-%d truncated: %s", p.Topic, p.Partition, p.LastTruncation)
			}
		}
		// The idempotent producer writes each acknowledged record once;
		// records whose produce the cancel cut short may be written too, so
		// the copy may hold more than was acknowledged, never fewer.
		if held < int64(produced["orders"]) {
			t.Errorf("kfollower holds %d records of orders, %d were acknowledged", held, produced["orders"])
		}
		after := scrape(t)
		if d := after.sum("kfollower_committed_records_lost_total") - before.sum("kfollower_committed_records_lost_total"); d != 0 {
			t.Errorf("kfollower_committed_records_lost_total rose by %v through a clean failover", d)
		}
		if d := after.sum("kfollower_truncations_total") - before.sum("kfollower_truncations_total"); d != 0 {
			t.Errorf("kfollower_truncations_total rose by %v through a clean failover", d)
		}
		if v := after.sum("kfollower_conformance_violations_total"); v != 0 {
			t.Errorf("kfollower_conformance_violations_total = %v, want 0: %s", v, after.series("kfollower_conformance_violations_total"))
		}
		if d := after.sum("kfollower_leader_changes_total") - before.sum("kfollower_leader_changes_total"); d < 1 {
			t.Errorf("kfollower_leader_changes_total rose by %v, want at least 1 (node %d led orders-0)", d, leader)
		}
		for p := int32(0); p < 3; p++ {
			sameBytes(t, adm, "orders", p, st)
		}

		// The killed container comes back and rejoins every ISR. Docker
		// does not restart a container that `docker kill` stopped, whatever
		// its restart policy (it counts as stopped by hand).
		t.Logf("%s after the kill: %s", service, docker(t, "inspect", "-f", "{{.State.Status}}, {{.RestartCount}} restarts", ctr))
		compose(t, "start", service)
		waitFor(t, service+" healthy", 3*time.Minute, func() error {
			if h := docker(t, "inspect", "-f", "{{.State.Health.Status}}", ctr); h != "healthy" {
				return fmt.Errorf("health %s", h)
			}
			return nil
		})
		waitFor(t, fmt.Sprintf("node %d back in every ISR", leader), 2*time.Minute, func() error {
			return inAllISRs(adm, leader, "orders", "audit")
		})
		waitCaughtUp(t, adm, []string{"orders", "audit"})
		verifyAll(t, 4)
	})

	t.Run("Dashboard", func(t *testing.T) {
		checkDashboard(t)
	})

	t.Run("StopStart", func(t *testing.T) {
		before := waitCaughtUp(t, adm, []string{"orders", "audit"})
		ctr := containerID(t, "kfollower")
		compose(t, "stop", "kfollower")
		if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", ctr); code != "0" {
			t.Fatalf("kfollower exited with %s on stop, want 0", code)
		}
		// kfollower logs on stderr; run keeps both streams.
		if logs := docker(t, "logs", "--tail", "5", ctr); !strings.Contains(logs, "logs flushed and closed") {
			t.Errorf("kfollower's last log lines do not say the logs were flushed and closed:\n%s", logs)
		}
		compose(t, "start", "kfollower")
		waitHTTP(t, kfollowerURL+"/readyz", 2*time.Minute)
		st := getStatus(t)
		if !samePartitions(before, st) {
			t.Fatalf("after a restart kfollower holds\n%+v\nbefore it held\n%+v", st.Partitions, before.Partitions)
		}
		m := scrape(t)
		if n := m.sum("kfollower_appended_records_total"); n != 0 {
			t.Errorf("kfollower appended %v records after a restart with nothing new: it copied again what its volume held", n)
		}
		// New records are appended after what the volume held.
		produce(t, cl, "audit", 100)
		st = waitCaughtUp(t, adm, []string{"orders", "audit"})
		if got, want := logEnd(st, "audit", 0), logEnd(before, "audit", 0)+100; got != want {
			t.Errorf("audit-0 log end %d after 100 more records, want %d", got, want)
		}
		if n := scrape(t).sum("kfollower_appended_records_total"); n != 100 {
			t.Errorf("kfollower appended %v records since the restart, want the 100 new ones", n)
		}
		verifyAll(t, 4)
	})
}

// --- the compose project and docker ---

func compose(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, 3*time.Minute, append(append([]string{}, composeCmd...), args...)...)
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, 2*time.Minute, append([]string{"docker"}, args...)...)
}

func run(t *testing.T, timeout time.Duration, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func containerID(t *testing.T, service string) string {
	t.Helper()
	id := compose(t, "ps", "-q", service)
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("compose ps -q %s: %q, want one container", service, id)
	}
	return id
}

// dataDir is where kfollower's named volume is on the host.
func dataDir(t *testing.T) string {
	t.Helper()
	return docker(t, "inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/var/lib/kfollower"}}{{.Source}}{{end}}{{end}}`,
		containerID(t, "kfollower"))
}

// --- Kafka, from the host ---

func newClient(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(hostBrokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func record(topic string, i int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 200)}
}

// produce writes n records to topic with acks=all (kgo's default).
func produce(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = record(topic, i)
	}
	if err := cl.ProduceSync(ctxT(t, 2*time.Minute), rs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records to %s: %v", n, topic, err)
	}
}

// produceUntil produces batches of 100 until ctx ends and returns how many
// records were acknowledged.
func produceUntil(ctx context.Context, cl *kgo.Client, topic string) int {
	acked := 0
	for i := 0; ctx.Err() == nil; i++ {
		rs := make([]*kgo.Record, 100)
		for j := range rs {
			rs[j] = record(topic, i*100+j)
		}
		for _, r := range cl.ProduceSync(ctx, rs...) {
			if r.Err == nil {
				acked++
			}
		}
	}
	return acked
}

// leaderOf is topic-p's leader; errors (a broker just killed) are for
// waitFor to retry.
func leaderOf(adm *kadm.Client, topic string, p int32) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok {
		return -1, fmt.Errorf("metadata names no %s-%d", topic, p)
	}
	if pd.Err != nil {
		return -1, fmt.Errorf("metadata of %s-%d: %w", topic, p, pd.Err)
	}
	return pd.Leader, nil
}

func mustLeaderOf(t *testing.T, adm *kadm.Client, topic string, p int32) int32 {
	t.Helper()
	l, err := leaderOf(adm, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func inAllISRs(adm *kadm.Client, node int32, topics ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return err
	}
	for _, td := range md.Topics {
		for _, pd := range td.Partitions {
			found := false
			for _, id := range pd.ISR {
				found = found || id == node
			}
			if !found {
				return fmt.Errorf("%s-%d ISR %v", td.Topic, pd.Partition, pd.ISR)
			}
		}
	}
	return nil
}

// leaderEnds are the leaders' high watermarks (ListOffsets latest, as a
// consumer sees them); errors (around a failover) are for waitFor to retry.
func leaderEnds(adm *kadm.Client, topics ...string) (map[string]map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %v: %w", topics, err)
	}
	out := map[string]map[int32]int64{}
	for _, ps := range ends {
		for _, o := range ps {
			if o.Err != nil {
				return nil, fmt.Errorf("end offset of %s-%d: %w", o.Topic, o.Partition, o.Err)
			}
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]int64{}
			}
			out[o.Topic][o.Partition] = o.Offset
		}
	}
	return out, nil
}

// leaderEnd is the sum of topic's high watermarks.
func leaderEnd(adm *kadm.Client, topic string) (int64, error) {
	ends, err := leaderEnds(adm, topic)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, o := range ends[topic] {
		sum += o
	}
	return sum, nil
}

// sameBytes compares kfollower's copy of topic-p with its leader's log
// directory, copied out of the leader's container: the record batches
// (every segment's bytes, in offset order) must be equal.
func sameBytes(t *testing.T, adm *kadm.Client, topic string, p int32, st status) {
	t.Helper()
	leader := mustLeaderOf(t, adm, topic, p)
	ctr := containerID(t, fmt.Sprintf("kafka-%d", leader))
	dir := t.TempDir()
	name := fmt.Sprintf("%s-%d", topic, p)
	docker(t, "cp", ctr+":/tmp/kraft-combined-logs/"+name, dir)
	theirs, err := kafka.ReadSegments(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := kafka.ReadSegments(filepath.Join(dataDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) == 0 || !bytes.Equal(ours, theirs) {
		t.Errorf("%s: kfollower's copy (%d bytes, log end %d) differs from leader %d's log (%d bytes)",
			name, len(ours), logEnd(st, topic, p), leader, len(theirs))
	}
}

// --- kfollower's HTTP ---

// partitionStatus is the part of /status's per-partition document the tests
// read (README, "HTTP").
type partitionStatus struct {
	Topic          string          `json:"topic"`
	Partition      int32           `json:"partition"`
	State          string          `json:"state"`
	Leader         int32           `json:"leader"`
	LogStartOffset int64           `json:"log_start_offset"`
	LogEndOffset   int64           `json:"log_end_offset"`
	HighWatermark  int64           `json:"high_watermark"`
	Lag            int64           `json:"lag"`
	Reconciled     bool            `json:"reconciled"`
	Error          string          `json:"error"`
	LastTruncation json.RawMessage `json:"last_truncation"`
}

type status struct {
	Ready      bool              `json:"ready"`
	Partitions []partitionStatus `json:"partitions"`
}

func getStatus(t *testing.T) status {
	t.Helper()
	body, err := get(kfollowerURL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("parsing /status: %v\n%s", err, body)
	}
	return st
}

func logEnd(st status, topic string, p int32) int64 {
	for _, ps := range st.Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return ps.LogEndOffset
		}
	}
	return -1
}

func samePartitions(a, b status) bool {
	if len(a.Partitions) != len(b.Partitions) {
		return false
	}
	for _, pa := range a.Partitions {
		found := false
		for _, pb := range b.Partitions {
			found = found || (pa.Topic == pb.Topic && pa.Partition == pb.Partition &&
				pa.LogStartOffset == pb.LogStartOffset && pa.LogEndOffset == pb.LogEndOffset)
		}
		if !found {
			return false
		}
	}
	return true
}

// waitCaughtUp waits until /status is ready and every partition of topics is
// followed, reconciled, fetching, and at its leader's high watermark.
func waitCaughtUp(t *testing.T, adm *kadm.Client, topics []string) status {
	t.Helper()
	var st status
	waitFor(t, fmt.Sprintf("kfollower caught up with %v", topics), 3*time.Minute, func() error {
		ends, err := leaderEnds(adm, topics...)
		if err != nil {
			return err
		}
		st = getStatus(t)
		if !st.Ready {
			return errors.New("/status not ready")
		}
		for topic, ps := range ends {
			for p, end := range ps {
				got := int64(-1)
				for _, s := range st.Partitions {
					if s.Topic == topic && s.Partition == p {
						if !s.Reconciled || s.State != "fetching" {
							return fmt.Errorf("%s-%d state %s reconciled %v", topic, p, s.State, s.Reconciled)
						}
						got = s.LogEndOffset
					}
				}
				if got != end {
					return fmt.Errorf("%s-%d log end %d, leader's high watermark %d", topic, p, got, end)
				}
			}
		}
		return nil
	})
	return st
}

func get(u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

func waitHTTP(t *testing.T, u string, timeout time.Duration) {
	t.Helper()
	waitFor(t, "GET "+u, timeout, func() error { _, err := get(u); return err })
}

// metrics is one scrape of kfollower's /metrics.
type metrics map[string][]model.Sample

func scrape(t *testing.T) metrics {
	t.Helper()
	body, err := get(kfollowerURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	m := metrics{}
	for name, mf := range mfs {
		for _, s := range mf.GetMetric() {
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue()
			labels := model.Metric{}
			for _, l := range s.GetLabel() {
				labels[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
			}
			m[name] = append(m[name], model.Sample{Metric: labels, Value: model.SampleValue(v)})
		}
	}
	return m
}

// sum adds a counter's or gauge's series (0 when it has none yet: a labelled
// counter has no series until first counted).
func (m metrics) sum(name string) float64 {
	var s float64
	for _, x := range m[name] {
		s += float64(x.Value)
	}
	return s
}

func (m metrics) series(name string) string {
	var b strings.Builder
	for _, x := range m[name] {
		fmt.Fprintf(&b, "%v=%v ", x.Metric, x.Value)
	}
	return b.String()
}

// --- verify, from the host ---

type verifyReport struct {
	Partitions []struct {
		Topic        string `json:"topic"`
		Partition    int32  `json:"partition"`
		Status       string `json:"status"`
		LocalLogEnd  int64  `json:"localLogEnd"`
		VerifiedFrom int64  `json:"verifiedFrom"`
		VerifiedTo   int64  `json:"verifiedTo"`
		Batches      int64  `json:"batches"`
	} `json:"partitions"`
}

// verifyAll runs `kfollower verify` on the host against the host listeners
// and the volume's directory: every partition must match in full.
func verifyAll(t *testing.T, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kfollowerBin, "verify", "--json",
		"--bootstrap-servers", strings.Join(hostBrokers, ","), "--data-dir", dataDir(t))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kfollower verify: %v\n%s%s", err, out.String(), stderr.String())
	}
	var r verifyReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("parsing verify's report: %v\n%s", err, out.String())
	}
	if len(r.Partitions) != partitions {
		t.Errorf("verify checked %d partitions, want %d", len(r.Partitions), partitions)
	}
	for _, p := range r.Partitions {
		if p.Status != "match" || p.VerifiedTo != p.LocalLogEnd || p.VerifiedFrom != 0 || p.Batches == 0 {
			t.Errorf("verify %s-%d: %s, verified [%d, %d) of [0, %d) in %d batches, want a full match",
				p.Topic, p.Partition, p.Status, p.VerifiedFrom, p.VerifiedTo, p.LocalLogEnd, p.Batches)
		}
	}
}

// --- Prometheus ---

type promSample struct {
	Labels map[string]string
	Value  float64
}

func (s promSample) String() string { return fmt.Sprintf("%v %v", s.Labels, s.Value) }

// promQuery runs an instant query on the compose Prometheus.
func promQuery(q string) ([]promSample, error) {
	body, err := get(promURL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("parsing the answer to %s: %w", q, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", q, r.Data.ResultType)
	}
	var out []promSample
	for _, x := range r.Data.Result {
		s, _ := x.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", q, x.Value[1], err)
		}
		out = append(out, promSample{Labels: x.Metric, Value: v})
	}
	return out, nil
}

func waitProm(t *testing.T, q string, timeout time.Duration, check func([]promSample) error) []promSample {
	t.Helper()
	var v []promSample
	waitFor(t, "Prometheus: "+q, timeout, func() error {
		var err error
		if v, err = promQuery(q); err != nil {
			return err
		}
		return check(v)
	})
	return v
}

// alerts are deploy/kfollower-rules.yml's alerts: name to expression.
func alerts(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kfollower-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("parsing deploy/kfollower-rules.yml: %v", err)
	}
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	if len(out) == 0 {
		t.Fatal("deploy/kfollower-rules.yml has no alert")
	}
	return out
}

func alertExpr(t *testing.T, name string) string {
	t.Helper()
	e, ok := alerts(t)[name]
	if !ok {
		t.Fatalf("deploy/kfollower-rules.yml has no alert %s", name)
	}
	return e
}

// checkRulesLoaded: every alert of deploy/kfollower-rules.yml is loaded and
// healthy in the compose Prometheus.
func checkRulesLoaded(t *testing.T) {
	t.Helper()
	want := alerts(t)
	waitFor(t, "Prometheus rules loaded and evaluated", time.Minute, func() error {
		body, err := get(promURL + "/api/v1/rules?type=alert")
		if err != nil {
			return err
		}
		var r struct {
			Data struct {
				Groups []struct {
					File  string `json:"file"`
					Rules []struct {
						Name   string `json:"name"`
						Health string `json:"health"`
						Error  string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		health := map[string]string{}
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				health[rule.Name] = rule.Health + rule.Error
			}
		}
		for a := range want {
			if health[a] != "ok" {
				return fmt.Errorf("alert %s: %q (loaded: %v)", a, health[a], health)
			}
		}
		return nil
	})
}

// Metrics that have no series until the cluster loses data; the dashboard
// shows 0 per followed topic for them, and the compose tests make no loss.
var untilLoss = map[string]bool{
	"kfollower_committed_records_lost_total":   true,
	"kfollower_truncations_total":              true,
	"kfollower_leader_epoch_regressions_total": true,
}

// checkDashboard runs every query of the Grafana dashboard on the compose
// Prometheus, with Grafana's variables set as the dashboard's defaults
// would (all topics) and a 5-minute rate interval: each must return at
// least one series, and each kfollower metric it names must exist (so a
// fallback to 0 cannot hide a misspelt name).
func checkDashboard(t *testing.T) {
	t.Helper()
	d := readDashboard(t)
	vars := strings.NewReplacer("$topic", ".*", "$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m")
	checked := map[string]bool{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			expr := vars.Replace(q.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q %s: unknown variable in %q", p.Title, q.RefID, expr)
				continue
			}
			v := waitProm(t, expr, 90*time.Second, func(v []promSample) error {
				if len(v) == 0 {
					return errors.New("no series")
				}
				return nil
			})
			t.Logf("panel %q %s: %d series, first %v", p.Title, q.RefID, len(v), v[0])
			for _, name := range metricRE.FindAllString(expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if checked[name] || untilLoss[base] {
					continue
				}
				checked[name] = true
				waitProm(t, fmt.Sprintf("count({__name__=%q})", name), time.Minute, func(v []promSample) error {
					if len(v) != 1 || v[0].Value < 1 || math.IsNaN(v[0].Value) {
						return fmt.Errorf("%s has no series", name)
					}
					return nil
				})
			}
		}
	}
}

// --- waiting ---

// waitFor polls cond until it returns nil or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %s: %v", timeout, what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
