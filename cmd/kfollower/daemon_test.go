package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDaemon runs the kfollower binary against one real cluster (one
// controller, three brokers, with SSL and SASL listeners besides PLAINTEXT)
// through TLS, SASL, SIGTERM under load with a restart, and an unclean
// election, in that order: the election leaves the cluster degraded.
func TestDaemon(t *testing.T) {
	ctx := context.Background()
	began := time.Now()
	phase := func(name string) { t.Logf("%v: %s", time.Since(began).Round(100*time.Millisecond), name) }
	bin := binary(t)
	pki := newTestPKI(t)
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true, Security: &kafka.Security{
		TLS:  &kafka.TLSListener{CertPEM: pki.ServerCertPEM, KeyPEM: pki.ServerKeyPEM, ClientCAPEM: pki.CAPEM},
		SASL: &kafka.SASLListener{PlainUsers: map[string]string{"plainuser": "plain-secret"}},
	}})
	phase("cluster started")
	c.CreateTopic(ctx, "sec", [][]int32{{1, 2, 3}}, nil)
	produce(ctx, t, c, "sec", 0, "sec", 100)

	t.Run("TLS", func(t *testing.T) { testTLS(t, bin, c, pki) })
	t.Run("SASL", func(t *testing.T) { testSASL(ctx, t, bin, c) })
	t.Run("local retention", func(t *testing.T) { testRetention(ctx, t, bin, c) })
	phase("TLS and SASL done")
	if t.Failed() {
		return
	}
	// Not subtests: the daemon testSIGTERM leaves running belongs to t.
	data := t.TempDir()
	d := testSIGTERM(ctx, t, bin, c, data)
	phase("SIGTERM and restart done")
	testUnclean(ctx, t, c, d, data)
	phase("unclean election done")
}

// followOnce runs kfollower until it holds n records of sec-0, then stops it
// with SIGTERM and expects exit 0.
func followOnce(t *testing.T, bin string, env []string, n int64, args ...string) {
	t.Helper()
	d := startDaemon(t, bin, env, append([]string{"--topics", "sec", "--data-dir", t.TempDir()}, args...)...)
	waitStatus(t, d, "sec", 0, fmt.Sprintf("log end %d", n), func(s fetcher.Status) bool { return s.LogEndOffset == n })
	// --flush interval (the default): the flusher fsyncs what arrived
	// within a second, and times it.
	d.waitHTTP(t, "/metrics", "a timed flush", 10*time.Second, func(code int, body string) bool {
		return code == 200 && !strings.Contains(body, "kfollower_flush_duration_seconds_count 0")
	})
	if code, took := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after %v", code, took)
	}
}

func testTLS(t *testing.T, bin string, c *kafka.Cluster, pki *testPKI) {
	boot := strings.Join(c.SSLBootstrap(), ",")
	// Mutual TLS: our CA, our client certificate.
	followOnce(t, bin, nil, 100, "--bootstrap-servers", boot, "--tls-ca", pki.CAFile, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey)
	// The same from the environment.
	followOnce(t, bin, []string{"KFOLLOWER_BOOTSTRAP_SERVERS=" + boot, "KFOLLOWER_TLS_CA=" + pki.CAFile,
		"KFOLLOWER_TLS_CERT=" + pki.ClientCert, "KFOLLOWER_TLS_KEY=" + pki.ClientKey}, 100)

	// A CA that did not sign the broker's certificate: refused, nothing written.
	data := filepath.Join(t.TempDir(), "data")
	r := runBinary(t, bin, nil, 60*time.Second, "run", "--bootstrap-servers", boot, "--topics", "sec", "--data-dir", data,
		"--tls-ca", pki.OtherCAFile, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey, "--http-listen", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "does not answer as a Kafka broker") || !strings.Contains(r.stderr, "certificate signed by unknown authority") {
		t.Fatalf("wrong CA: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a refused TLS handshake left the data dir behind (%v)", err)
	}
}

func testSASL(ctx context.Context, t *testing.T, bin string, c *kafka.Cluster) {
	boot := strings.Join(c.SASLBootstrap(), ",")
	c.AddSCRAMUser(ctx, "SCRAM-SHA-256", "kf256", "secret-256")
	c.AddSCRAMUser(ctx, "SCRAM-SHA-512", "kf512", "secret-512")
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("secret-512\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plainFile := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plainFile, []byte("plain-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Password from the environment, then from files.
	followOnce(t, bin, []string{"KFOLLOWER_SASL_PASSWORD=secret-256"}, 100,
		"--bootstrap-servers", boot, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "kf256")
	followOnce(t, bin, nil, 100, "--bootstrap-servers", boot, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "kf512", "--sasl-password-file", pwFile)
	followOnce(t, bin, nil, 100, "--bootstrap-servers", boot, "--sasl-mechanism", "PLAIN", "--sasl-username", "plainuser", "--sasl-password-file", plainFile)

	data := filepath.Join(t.TempDir(), "data")
	r := runBinary(t, bin, []string{"KFOLLOWER_SASL_PASSWORD=wrong"}, 60*time.Second, "run", "--bootstrap-servers", boot, "--topics", "sec",
		"--data-dir", data, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "kf512", "--http-listen", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("wrong password: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a refused login left the data dir behind (%v)", err)
	}
}

// Local retention deletes the oldest segments past --retention-bytes on the
// maintenance tick, moves the log start, and counts what it deleted.
func testRetention(ctx context.Context, t *testing.T, bin string, c *kafka.Cluster) {
	const topic = "ret"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
		"--data-dir", t.TempDir(), "--segment-bytes", "1KiB", "--retention-bytes", "3KiB", "--flush-interval", "200ms")
	// Ten batches of about 1 KiB, each copied before the next is written:
	// a segment rolls between appends, and one fetch is one append.
	for i := range 10 {
		produce(ctx, t, c, topic, 0, fmt.Sprintf("batch%d", i), 50)
		waitStatus(t, d, topic, 0, "the batch copied", func(s fetcher.Status) bool { return s.LogEndOffset == int64(50*(i+1)) })
	}
	st := waitStatus(t, d, topic, 0, "all copied, oldest segments deleted", func(s fetcher.Status) bool {
		return s.LogEndOffset == 500 && s.LogStartOffset > 0 && s.SizeBytes <= 3<<10+2<<10
	})
	mfs := scrape(t, d)
	segs := value(mfs, "kfollower_local_retention_deleted_segments_total", map[string]string{"topic": topic})
	bytesDeleted := value(mfs, "kfollower_local_retention_deleted_bytes_total", map[string]string{"topic": topic})
	t.Logf("log start %d, %d bytes in %d segments kept; %v segments, %v bytes deleted", st.LogStartOffset, st.SizeBytes, st.Segments, segs, bytesDeleted)
	if segs < 1 || bytesDeleted < 1 {
		t.Fatalf("retention moved the log start to %d but the metrics count %v segments, %v bytes", st.LogStartOffset, segs, bytesDeleted)
	}
	if code, _ := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// SIGTERM while fetching under a steady produce load exits 0 within 10 s;
// a restart on the same data dir resumes, and once the producers stop the
// copy is byte-identical to each leader's log: no gap, no duplicate.
func testSIGTERM(ctx context.Context, t *testing.T, bin string, c *kafka.Cluster, data string) *daemon {
	const topic = "heavy"
	c.CreateTopic(ctx, topic, [][]int32{{3, 1}, {1, 3}, {3, 1}, {1, 3}}, nil)
	stopProducing := make(chan struct{})
	var wg sync.WaitGroup
	var produced atomic.Int64
	for p := int32(0); p < 4; p++ {
		wg.Go(func() { produceUntil(ctx, t, c, topic, p, stopProducing, &produced) })
	}
	defer func() {
		select {
		case <-stopProducing:
		default:
			close(stopProducing)
		}
		wg.Wait()
	}()

	// A backlog first, so that kfollower is catching up, fsyncing every
	// append, when it gets SIGTERM.
	began := time.Now()
	deadline := began.Add(120 * time.Second)
	for produced.Load() < 32<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("produced only %d bytes in 120 s", produced.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("backlog: %d MB produced in %v", produced.Load()>>20, time.Since(began).Round(time.Millisecond))
	args := []string{"--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", "heavy,uncl.*", "--data-dir", data,
		"--flush", "always", "--segment-bytes", "4MiB", "--metadata-interval", "1s"}
	d := startDaemon(t, bin, nil, args...)
	var lag int64
	waitStatuses(t, d, "4 MB copied, still behind", func(ss []fetcher.Status) bool {
		lag = 0
		var size int64
		for _, s := range ss {
			lag += s.Lag
			size += s.SizeBytes
		}
		return size > 4<<20 && lag > 0
	})
	t.Logf("SIGTERM with %d records to catch up", lag)
	code, took := d.stop(t, syscall.SIGTERM)
	t.Logf("SIGTERM during fetching: exit %d after %v", code, took)
	if code != 0 || took > 10*time.Second {
		t.Fatalf("SIGTERM: exit %d after %v, want 0 within 10 s", code, took)
	}
	if !strings.Contains(d.stderr(), "logs flushed and closed") {
		t.Fatalf("no clean-shutdown line:\n%s", tail(d.stderr(), 20))
	}

	began = time.Now()
	d = startDaemon(t, bin, nil, args...)
	waitStatus(t, d, topic, 0, "resumed fetching", func(s fetcher.Status) bool { return s.Reconciled && s.State == "fetching" })
	close(stopProducing)
	wg.Wait()
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		o, _ := ends.Lookup(topic, p)
		waitStatus(t, d, topic, p, fmt.Sprintf("caught up to %d", o.Offset), func(s fetcher.Status) bool { return s.LogEndOffset == o.Offset })
		st, err := c.Partition(ctx, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		ours := readSegments(t, filepath.Join(data, fmt.Sprintf("%s-%d", topic, p)))
		theirs := readSegments(t, filepath.Join(c.Node(st.Leader).DataDir(), fmt.Sprintf("%s-%d", topic, p)))
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("%s-%d: our %d log bytes differ from leader %d's %d bytes", topic, p, len(ours), st.Leader, len(theirs))
		}
		t.Logf("%s-%d: %d records, %d bytes, identical to leader %d", topic, p, o.Offset, len(ours), st.Leader)
	}
	t.Logf("restarted, producers stopped, caught up and compared in %v", time.Since(began).Round(time.Millisecond))
	mfs := scrape(t, d)
	if v := value(mfs, "kfollower_committed_records_lost_total", map[string]string{"topic": topic}); v != 0 {
		t.Fatalf("a restart reported %v lost records", v)
	}
	return d // left running: it follows uncl.* too
}

// The recipe of integration.TestUncleanElectionLoss through the binary:
// A (broker 1) holds committed records B (broker 2) never got; B is elected
// uncleanly. The metrics move as documented and /readyz is ready again.
func testUnclean(ctx context.Context, t *testing.T, c *kafka.Cluster, d *daemon, data string) {
	const topic = "unclean"
	const a, b = int32(1), int32(2)
	const n1, n2, n3 = 300, 120, 200
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "false"})
	// Created after the daemon started: --topics names it by a regexp.
	waitStatus(t, d, topic, 0, "picked up and reconciled", func(s fetcher.Status) bool { return s.Reconciled })
	d.waitHTTP(t, "/readyz", "ready", 60*time.Second, func(code int, _ string) bool { return code == 200 })
	before := scrape(t, d)
	tl := map[string]string{"topic": topic}
	// The topic's counters are in the scrape at 0 before its first loss,
	// so the shipped alert, increase(...) > 0, sees that loss as a rise.
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"kfollower_committed_records_lost_total", tl},
		{"kfollower_truncated_records_total", tl},
		{"kfollower_truncations_total", map[string]string{"topic": topic, "cause": "offsets-for-leader-epoch"}},
		{"kfollower_retention_gaps_total", tl},
	} {
		if v, ok := lookup(before, s.name, s.labels); !ok || v != 0 {
			t.Errorf("before any loss: %s%v exported %v, value %v; want 0", s.name, s.labels, ok, v)
		}
	}

	produce(ctx, t, c, topic, 0, "n1", n1)
	waitStatus(t, d, topic, 0, "n1 copied", func(s fetcher.Status) bool { return s.LogEndOffset == n1 })
	c.Pause(b)
	c.WaitPartition(ctx, topic, 0, "ISR [A]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a}) })
	produce(ctx, t, c, topic, 0, "n2", n2)
	waitStatus(t, d, topic, 0, "n2 copied", func(s fetcher.Status) bool { return s.LogEndOffset == n1+n2 })
	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Resume(b)
	elected := c.ElectUnclean(ctx, topic, 0)
	if elected.Leader != b {
		t.Fatalf("unclean election chose %v, want leader %d", elected, b)
	}
	st := waitStatus(t, d, topic, 0, "reconciled with B", func(s fetcher.Status) bool {
		return s.LeaderEpoch == elected.LeaderEpoch && s.State == "fetching" && s.LastTruncation != nil
	})
	if lt := st.LastTruncation; lt.From != n1 || lt.To != n1+n2 || lt.Records != n2 {
		t.Fatalf("/status last truncation %+v, want [%d,%d) %d records", lt, n1, n1+n2, n2)
	}
	produce(ctx, t, c, topic, 0, "n3", n3)
	waitStatus(t, d, topic, 0, "n3 copied", func(s fetcher.Status) bool { return s.LogEndOffset == n1+n3 })
	d.waitHTTP(t, "/readyz", "ready after the election", 60*time.Second, func(code int, _ string) bool { return code == 200 })

	after := scrape(t, d)
	moved := func(name string, labels map[string]string, min float64) {
		t.Helper()
		delta := value(after, name, labels) - value(before, name, labels)
		t.Logf("%s%v moved by %v", name, labels, delta)
		if delta < min {
			t.Errorf("%s%v moved by %v, want at least %v", name, labels, delta, min)
		}
	}
	exactly := func(name string, labels map[string]string, want float64) {
		t.Helper()
		if v := value(after, name, labels); v != want {
			t.Errorf("%s%v = %v, want %v", name, labels, v, want)
		}
	}
	moved("kfollower_leader_changes_total", tl, 1)
	moved("kfollower_reconciliation_roundtrips_count", nil, 1)
	moved("kfollower_offsets_for_leader_epoch_requests_total", map[string]string{"result": "ok"}, 1)
	exactly("kfollower_truncations_total", map[string]string{"topic": topic, "cause": "offsets-for-leader-epoch"}, 1)
	exactly("kfollower_committed_records_lost_total", tl, n2)
	exactly("kfollower_truncated_records_total", tl, n2)
	exactly("kfollower_partition_log_end_offset", map[string]string{"topic": topic, "partition": "0"}, n1+n3)
	exactly("kfollower_partition_leader_epoch", map[string]string{"topic": topic, "partition": "0"}, float64(elected.LeaderEpoch))
	exactly("kfollower_partition_state", map[string]string{"topic": topic, "partition": "0", "state": "fetching"}, 1)
	exactly("kfollower_ready", nil, 1)
	// A real broker's answers pass every conformance check, through the
	// leader kill and the unclean election; each check's series exists.
	if mf, n := after["kfollower_conformance_violations_total"], len(follower.Checks()); mf == nil || len(mf.GetMetric()) != n {
		t.Errorf("want a kfollower_conformance_violations_total series per check (%d), got %v", n, mf)
	}
	exactly("kfollower_conformance_violations_total", nil, 0)
	if value(after, "kfollower_fsync_duration_seconds_count", nil) <= 0 {
		t.Errorf("kfollower_fsync_duration_seconds counted no fsync")
	}
	if v := value(after, "kfollower_lost_found_bytes", nil); v <= 0 {
		t.Errorf("kfollower_lost_found_bytes = %v after a loss", v)
	}
	// One roundtrip: the bucket le=1 took this reconciliation.
	if v := bucket(after, "kfollower_reconciliation_roundtrips", 1) - bucket(before, "kfollower_reconciliation_roundtrips", 1); v < 1 {
		t.Errorf("no reconciliation of one roundtrip recorded")
	}
	lostDirs, _ := filepath.Glob(filepath.Join(data, "lost+found", topic+"-0", "*"))
	if len(lostDirs) != 1 {
		t.Errorf("lost+found of %s-0 holds %v, want one saved range", topic, lostDirs)
	}
}

// scrape fetches /metrics, lints it with client_golang's promlint and
// parses it.
func scrape(t *testing.T, d *daemon) map[string]*dto.MetricFamily {
	t.Helper()
	code, body, err := d.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("linting /metrics: %v", err)
	}
	for _, p := range problems {
		t.Errorf("/metrics lint: %s: %s", p.Metric, p.Text)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// value is the sample of name whose labels include want (0 if none). A
// histogram's _count and _sum are addressed by those suffixes.
// lookup is the value of the series of name with labels want, if exported.
func lookup(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		if hasLabels(m, want) {
			return value(mfs, name, want), true
		}
	}
	return 0, false
}

func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	base, suffix := name, ""
	for _, s := range []string{"_count", "_sum"} {
		if strings.HasSuffix(name, s) && mfs[name] == nil {
			base, suffix = strings.TrimSuffix(name, s), s
		}
	}
	mf := mfs[base]
	if mf == nil {
		return 0
	}
	var total float64
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case suffix == "_count":
			total += float64(m.GetHistogram().GetSampleCount())
		case suffix == "_sum":
			total += m.GetHistogram().GetSampleSum()
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

func bucket(mfs map[string]*dto.MetricFamily, name string, le float64) float64 {
	mf := mfs[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0
	}
	for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
		if b.GetUpperBound() == le {
			return float64(b.GetCumulativeCount())
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitStatuses polls /status until its partitions meet cond.
func waitStatuses(t *testing.T, d *daemon, what string, cond func([]fetcher.Status) bool) {
	t.Helper()
	d.waitHTTP(t, "/status", what, 120*time.Second, func(code int, body string) bool {
		var doc statusDoc
		return code == 200 && json.Unmarshal([]byte(body), &doc) == nil && cond(fetcherStatuses(doc.Partitions))
	})
}

// fetcherStatuses is /status's partitions as fetcher.Status, with the
// state /status shows (stalled included).
func fetcherStatuses(ps []partitionStatus) []fetcher.Status {
	out := make([]fetcher.Status, len(ps))
	for i, p := range ps {
		out[i] = p.Status
		out[i].State = p.State
	}
	return out
}

// waitStatus polls /status until topic-p meets cond.
func waitStatus(t *testing.T, d *daemon, topic string, p int32, what string, cond func(fetcher.Status) bool) fetcher.Status {
	t.Helper()
	var got fetcher.Status
	d.waitHTTP(t, "/status", fmt.Sprintf("%s-%d: %s", topic, p, what), 120*time.Second, func(code int, body string) bool {
		var doc statusDoc
		if code != 200 || json.Unmarshal([]byte(body), &doc) != nil {
			return false
		}
		for _, s := range fetcherStatuses(doc.Partitions) {
			if s.Topic == topic && s.Partition == p && cond(s) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// produce writes n records "<prefix>-<i>" to topic-p with acks=all.
func produce(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32, prefix string, n int) {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "%s-%06d", prefix, i)})
	}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing %s to %s-%d: %v", prefix, topic, p, err)
	}
}

// produceUntil writes uncompressed 1 KiB records to topic-p until stop is
// closed, as fast as the cluster takes them (asynchronously, kgo's buffer
// full), adding the value bytes acknowledged to n.
func produceUntil(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32, stop <-chan struct{}, n *atomic.Int64) {
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(2000))
	defer cl.Close()
	value := make([]byte, 1024)
	var failed atomic.Value
	for i := 0; ; i++ {
		select {
		case <-stop:
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("flushing the producer of %s-%d: %v", topic, p, err)
			}
			if err, _ := failed.Load().(error); err != nil {
				t.Errorf("producing to %s-%d: %v", topic, p, err)
			}
			return
		default:
		}
		r := &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "%d", i), Value: value}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
				return
			}
			n.Add(int64(len(r.Value)))
		})
	}
}

// readSegments concatenates a partition directory's .log files in offset
// order: its batches, byte for byte.
func readSegments(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := kafka.ReadSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
