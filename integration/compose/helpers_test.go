//go:build compose

package compose

// Helpers of TestCompose: the compose project and docker, Kafka from the
// host, kfollower's HTTP and metrics, verify, Prometheus, waiting.

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
	"go.yaml.in/yaml/v3"
)

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
