package metrics

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeSource struct {
	mu sync.Mutex
	ps []Partition
}

func (f *fakeSource) get() []Partition { f.mu.Lock(); defer f.mu.Unlock(); return f.ps }
func (f *fakeSource) set(ps ...Partition) {
	f.mu.Lock()
	f.ps = ps
	f.mu.Unlock()
}

func newTest(t *testing.T) (*prometheus.Registry, *Metrics, *fakeSource, *time.Time) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	src := &fakeSource{}
	now := time.Unix(1000, 0)
	m := New(reg, Options{
		Partitions:     src.get,
		Ready:          func() bool { return true },
		Connection:     func() string { return "connected" },
		LostFoundBytes: func() (int64, error) { return 4096, nil },
		Version:        "v1", GoVersion: "go1.26", FranzGoVersion: "v1.22.3",
		Now: func() time.Time { return now },
	})
	return reg, m, src, &now
}

var p0 = Partition{Topic: "t", Partition: 0, State: "fetching", Leader: 2, LeaderEpoch: 5, LocalEpoch: 4,
	LogStartOffset: 0, LogEndOffset: 90, HighWatermark: 100, Lag: 10, Reconciled: true, SizeBytes: 7000, Segments: 1}

// The connection state is a state set: one series per state, 1 for the
// current one.
func TestConnectionState(t *testing.T) {
	reg, _, _, _ := newTest(t)
	const want = `
# HELP kfollower_cluster_connection_state 1 for the state of the connection to the cluster (connecting: no bootstrap server has answered yet; connected), 0 for the other.
# TYPE kfollower_cluster_connection_state gauge
kfollower_cluster_connection_state{state="connected"} 1
kfollower_cluster_connection_state{state="connecting"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kfollower_cluster_connection_state"); err != nil {
		t.Fatal(err)
	}
}

// Per-partition series come from the snapshot at scrape time: a partition
// that is no longer followed leaves no series behind.
func TestPartitionSeries(t *testing.T) {
	reg, _, src, now := newTest(t)
	src.set(p0)
	const want = `
# HELP kfollower_partition_lag_records Leader high watermark minus local log end: how far the copy is behind (replica lag, not consumer lag).
# TYPE kfollower_partition_lag_records gauge
kfollower_partition_lag_records{partition="0",topic="t"} 10
# HELP kfollower_partition_lag_seconds Seconds since the local log end was last seen at the leader's high watermark (0 when caught up).
# TYPE kfollower_partition_lag_seconds gauge
kfollower_partition_lag_seconds{partition="0",topic="t"} 30
# HELP kfollower_partition_log_end_offset Next offset the local copy will hold (log end offset).
# TYPE kfollower_partition_log_end_offset gauge
kfollower_partition_log_end_offset{partition="0",topic="t"} 90
# HELP kfollower_partition_state 1 for the partition's current state, 0 for the others.
# TYPE kfollower_partition_state gauge
kfollower_partition_state{partition="0",state="backoff",topic="t"} 0
kfollower_partition_state{partition="0",state="failed",topic="t"} 0
kfollower_partition_state{partition="0",state="fenced",topic="t"} 0
kfollower_partition_state{partition="0",state="fetching",topic="t"} 1
kfollower_partition_state{partition="0",state="no-leader",topic="t"} 0
kfollower_partition_state{partition="0",state="out-of-range",topic="t"} 0
kfollower_partition_state{partition="0",state="reconciling",topic="t"} 0
kfollower_partition_state{partition="0",state="stalled",topic="t"} 0
kfollower_partition_state{partition="0",state="stopped",topic="t"} 0
kfollower_partition_state{partition="0",state="storage-backoff",topic="t"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kfollower_partition_lag_records", "kfollower_partition_log_end_offset", "kfollower_partition_state"); err != nil {
		t.Fatal(err)
	}
	// First seen lagging at t=1000; 30 s later, still lagging.
	*now = now.Add(30 * time.Second)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kfollower_partition_lag_seconds"); err != nil {
		t.Fatal(err)
	}
	caught := p0
	caught.LogEndOffset, caught.Lag = 100, 0
	src.set(caught)
	if n := gatherValue(t, reg, "kfollower_partition_lag_seconds"); n != 0 {
		t.Fatalf("lag seconds %v once caught up, want 0", n)
	}
	src.set()
	if n, err := testutil.GatherAndCount(reg, "kfollower_partition_log_end_offset", "kfollower_partition_state"); err != nil || n != 0 {
		t.Fatalf("a partition no longer followed left %d series (%v)", n, err)
	}
}

func gatherValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not exported", name)
	return 0
}

// The fetcher's observer feeds every counter and histogram with the names,
// labels and meaning the README's metric table gives them.
func TestFetcherObserver(t *testing.T) {
	reg, m, src, _ := newTest(t)
	src.set(p0)
	o := NewFetcherObserver(m)
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	o.RequestDone(fetcher.RequestStats{Broker: 2, Key: kmsg.Fetch, Partitions: 3, Latency: 20 * time.Millisecond,
		FetchedBytes: 900, FetchedRecords: 30, Results: map[string]int{"FENCED_LEADER_EPOCH": 2},
		Direct: true, ResponseBytes: 1200, StagedBytes: 800}) // on kfollower's own connection: its bytes are counted here, not by kprom
	o.RequestDone(fetcher.RequestStats{Broker: 2, Key: kmsg.Fetch, Partitions: 3, Err: errors.New("connection refused"),
		FetchedBytes: 1, FetchedRecords: 1}) // no response: nothing fetched is counted
	o.RequestDone(fetcher.RequestStats{Broker: 1, Key: kmsg.Fetch, Partitions: 1, Latency: time.Millisecond,
		FetchedBytes: 50, FetchedRecords: 2, ResponseBytes: 77}) // through franz-go (whose hooks count its bytes): the request only
	o.RequestDone(fetcher.RequestStats{Broker: 1, Key: kmsg.OffsetForLeaderEpoch, Partitions: 3, Latency: time.Millisecond,
		Results: map[string]int{"ok": 2, "undefined": 1}})
	o.RequestDone(fetcher.RequestStats{Broker: 1, Key: kmsg.OffsetForLeaderEpoch, Partitions: 4, Err: errors.New("timeout")})
	o.RequestDone(fetcher.RequestStats{Broker: 1, Key: kmsg.ListOffsets, Partitions: 1, Latency: time.Millisecond})
	o.Appended(2, tp, 700, 25)
	o.Appended(2, tp, 100, 5)
	o.LeaderChanged(tp, follower.LeaderChange{Leader: 1, LeaderEpoch: 5}, follower.LeaderChange{Leader: 2, LeaderEpoch: 6})
	o.LeaderChanged(tp, follower.LeaderChange{Leader: 2, LeaderEpoch: 6}, follower.LeaderChange{Leader: 3, LeaderEpoch: 3})
	o.Event(&follower.TruncationEvent{Topic: "t", From: 300, To: 420, Cause: follower.CauseEpochReply, Records: 120, Bytes: 9000})
	o.Event(&follower.GapEvent{Topic: "t", From: 10, To: 40})
	o.Event(&follower.ConformanceEvent{Topic: "t", Check: follower.CheckHighWatermarkBackwards})
	o.Event(&follower.ReconciledEvent{Topic: "t", Roundtrips: 7})      // reported through Reconciled, not Event
	o.Reconciled(&follower.ReconciledEvent{Topic: "t", Roundtrips: 0}) // nothing asked: not a KIP-279 walk
	o.Reconciled(&follower.ReconciledEvent{Topic: "t", Roundtrips: 2})
	o.Maintained(fetcher.MaintenanceStats{TP: tp, RetentionSegments: 2, RetentionBytes: 4096, Flushed: true, FlushLatency: time.Millisecond})
	o.Maintained(fetcher.MaintenanceStats{TP: tp, Err: errors.New("disk full")})
	const want = `
# HELP kfollower_appended_bytes_total Record batch bytes appended to local logs.
# TYPE kfollower_appended_bytes_total counter
kfollower_appended_bytes_total{node_id="2"} 800
# HELP kfollower_appended_records_total Records appended to local logs.
# TYPE kfollower_appended_records_total counter
kfollower_appended_records_total{node_id="2"} 30
# HELP kfollower_committed_records_lost_total Committed records the cluster lost: kfollower held them (it only copies below the high watermark) and the current leader does not.
# TYPE kfollower_committed_records_lost_total counter
kfollower_committed_records_lost_total{topic="t"} 120
# HELP kfollower_conformance_violations_total Broker answers the protocol rules out, by check (see the README); each is also logged with its evidence.
# TYPE kfollower_conformance_violations_total counter
kfollower_conformance_violations_total{check="batch_epoch_above_leader_epoch"} 0
kfollower_conformance_violations_total{check="diverging_epoch_without_divergence"} 0
kfollower_conformance_violations_total{check="epoch_answer_contradicts_log"} 0
kfollower_conformance_violations_total{check="high_watermark_backwards"} 1
kfollower_conformance_violations_total{check="metadata_epoch_backwards"} 0
kfollower_conformance_violations_total{check="undefined_epoch_answer"} 0
# HELP kfollower_fetch_connection_read_bytes_total Bytes of Fetch responses read on kfollower's own Fetch connections (franz-go's are in kfollower_kgo_read_bytes_total).
# TYPE kfollower_fetch_connection_read_bytes_total counter
kfollower_fetch_connection_read_bytes_total{node_id="2"} 1200
# HELP kfollower_fetch_connection_requests_total Fetch requests by the connection that carried them: direct (kfollower's own, whose bytes kprom does not see) or client (franz-go's).
# TYPE kfollower_fetch_connection_requests_total counter
kfollower_fetch_connection_requests_total{connection="client",node_id="1"} 1
kfollower_fetch_connection_requests_total{connection="client",node_id="2"} 1
kfollower_fetch_connection_requests_total{connection="direct",node_id="2"} 1
# HELP kfollower_fetch_staged_bytes_total Record batch bytes written into local logs as they were read on kfollower's own Fetch connections, ahead of their append.
# TYPE kfollower_fetch_staged_bytes_total counter
kfollower_fetch_staged_bytes_total{node_id="2"} 800
# HELP kfollower_fetch_partition_errors_total Partitions of Fetch responses that carried a Kafka error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, OFFSET_OUT_OF_RANGE, ...), by error name.
# TYPE kfollower_fetch_partition_errors_total counter
kfollower_fetch_partition_errors_total{error="FENCED_LEADER_EPOCH"} 2
# HELP kfollower_fetched_bytes_total Record batch bytes received in Fetch responses.
# TYPE kfollower_fetched_bytes_total counter
kfollower_fetched_bytes_total{node_id="1"} 50
kfollower_fetched_bytes_total{node_id="2"} 900
# HELP kfollower_fetched_records_total Records received in Fetch responses, counted from batch headers.
# TYPE kfollower_fetched_records_total counter
kfollower_fetched_records_total{node_id="1"} 2
kfollower_fetched_records_total{node_id="2"} 30
# HELP kfollower_flush_errors_total Failed periodic flushes and local retention runs.
# TYPE kfollower_flush_errors_total counter
kfollower_flush_errors_total 1
# HELP kfollower_leader_changes_total Times metadata named another leader or leader epoch for a followed partition.
# TYPE kfollower_leader_changes_total counter
kfollower_leader_changes_total{topic="t"} 2
# HELP kfollower_leader_epoch_regressions_total Times metadata named a lower leader epoch than before for a followed partition.
# TYPE kfollower_leader_epoch_regressions_total counter
kfollower_leader_epoch_regressions_total{topic="t"} 1
# HELP kfollower_local_retention_deleted_bytes_total Bytes deleted by kfollower's own local retention.
# TYPE kfollower_local_retention_deleted_bytes_total counter
kfollower_local_retention_deleted_bytes_total{topic="t"} 4096
# HELP kfollower_local_retention_deleted_segments_total Segments deleted by kfollower's own local retention.
# TYPE kfollower_local_retention_deleted_segments_total counter
kfollower_local_retention_deleted_segments_total{topic="t"} 2
# HELP kfollower_offsets_for_leader_epoch_requests_total OffsetsForLeaderEpoch queries, one per partition, by result: ok, undefined (the leader knows no end for the epoch), transport_error, or a Kafka error name.
# TYPE kfollower_offsets_for_leader_epoch_requests_total counter
kfollower_offsets_for_leader_epoch_requests_total{result="ok"} 2
kfollower_offsets_for_leader_epoch_requests_total{result="transport_error"} 4
kfollower_offsets_for_leader_epoch_requests_total{result="undefined"} 1
# HELP kfollower_request_errors_total Requests that got no response (connection or timeout errors).
# TYPE kfollower_request_errors_total counter
kfollower_request_errors_total{api="fetch",node_id="2"} 1
kfollower_request_errors_total{api="offsets_for_leader_epoch",node_id="1"} 1
# HELP kfollower_requests_total Requests sent to leader brokers (api: fetch, offsets_for_leader_epoch, list_offsets).
# TYPE kfollower_requests_total counter
kfollower_requests_total{api="fetch",node_id="1"} 1
kfollower_requests_total{api="fetch",node_id="2"} 2
kfollower_requests_total{api="list_offsets",node_id="1"} 1
kfollower_requests_total{api="offsets_for_leader_epoch",node_id="1"} 2
# HELP kfollower_retention_gap_offsets_total Offsets never copied because the cluster deleted them first.
# TYPE kfollower_retention_gap_offsets_total counter
kfollower_retention_gap_offsets_total{topic="t"} 30
# HELP kfollower_retention_gaps_total Times the leader's log start passed our log end: offsets deleted by the cluster before we copied them.
# TYPE kfollower_retention_gaps_total counter
kfollower_retention_gaps_total{topic="t"} 1
# HELP kfollower_truncated_bytes_total Record batch bytes removed from local logs by truncation (kept in lost+found).
# TYPE kfollower_truncated_bytes_total counter
kfollower_truncated_bytes_total{topic="t"} 9000
# HELP kfollower_truncated_records_total Records removed from local logs by truncation (kept in lost+found).
# TYPE kfollower_truncated_records_total counter
kfollower_truncated_records_total{topic="t"} 120
# HELP kfollower_truncations_total Truncations below data kfollower held, by what revealed the divergence.
# TYPE kfollower_truncations_total counter
kfollower_truncations_total{cause="offsets-for-leader-epoch",topic="t"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kfollower_appended_bytes_total", "kfollower_appended_records_total", "kfollower_committed_records_lost_total",
		"kfollower_conformance_violations_total", "kfollower_fetch_connection_read_bytes_total",
		"kfollower_fetch_connection_requests_total", "kfollower_fetch_partition_errors_total", "kfollower_fetch_staged_bytes_total", "kfollower_fetched_bytes_total",
		"kfollower_fetched_records_total", "kfollower_flush_errors_total", "kfollower_leader_changes_total",
		"kfollower_leader_epoch_regressions_total", "kfollower_local_retention_deleted_bytes_total",
		"kfollower_local_retention_deleted_segments_total", "kfollower_offsets_for_leader_epoch_requests_total",
		"kfollower_request_errors_total", "kfollower_requests_total", "kfollower_retention_gap_offsets_total",
		"kfollower_retention_gaps_total", "kfollower_truncated_bytes_total", "kfollower_truncated_records_total",
		"kfollower_truncations_total"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		name  string
		count uint64
		sum   float64
	}{
		{"kfollower_reconciliation_roundtrips", 1, 2},
		{"kfollower_request_duration_seconds", 4, 0.023}, // answered requests only
		{"kfollower_flush_duration_seconds", 1, 0.001},
	} {
		if c, s := histogram(t, reg, h.name); c != h.count || math.Abs(s-h.sum) > 1e-9 {
			t.Errorf("%s: %d observations summing to %v, want %d summing to %v", h.name, c, s, h.count, h.sum)
		}
	}
}

// histogram is the sample count and sum of name, summed over its series.
func histogram(t *testing.T, reg *prometheus.Registry, name string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
			return count, sum
		}
	}
	t.Fatalf("%s not exported", name)
	return 0, 0
}

// The exposition passes client_golang's lint (naming, units, _total).
func TestLint(t *testing.T) {
	reg, m, src, _ := newTest(t)
	src.set(p0)
	o := NewFetcherObserver(m)
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	o.RequestDone(fetcher.RequestStats{Broker: 1, Key: kmsg.Fetch, Latency: time.Millisecond, FetchedBytes: 100, FetchedRecords: 3, Direct: true, ResponseBytes: 160})
	o.RequestDone(fetcher.RequestStats{Broker: 1, Key: kmsg.OffsetForLeaderEpoch, Latency: time.Millisecond, Results: map[string]int{"ok": 1}})
	o.Appended(1, tp, 100, 3)
	o.Event(&follower.TruncationEvent{Topic: "t", Cause: follower.CauseDivergingEpoch, Records: 1, Bytes: 1})
	o.Event(&follower.GapEvent{Topic: "t", From: 1, To: 2})
	o.Reconciled(&follower.ReconciledEvent{Topic: "t", Roundtrips: 1})
	o.LeaderChanged(tp, follower.LeaderChange{LeaderEpoch: 1}, follower.LeaderChange{LeaderEpoch: 0})
	o.Maintained(fetcher.MaintenanceStats{TP: tp, RetentionSegments: 1, RetentionBytes: 100, Flushed: true, FlushLatency: time.Millisecond})
	m.Fsync(time.Millisecond)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// A followed topic's counters are in the scrape at 0 from the moment the
// fetcher reports the topic followed, before any event: an alert on
// increase() then sees the first loss as a rise from 0 (the shipped rules'
// unit test, deploy/kfollower-rules.test.yml, plays the same series).
func TestFollowedTopicStartsAtZero(t *testing.T) {
	reg, m, _, _ := newTest(t)
	o := NewFetcherObserver(m)
	perTopic := []string{
		"kfollower_committed_records_lost_total", "kfollower_truncations_total", "kfollower_truncated_records_total",
		"kfollower_truncated_bytes_total", "kfollower_retention_gaps_total", "kfollower_retention_gap_offsets_total",
		"kfollower_leader_changes_total", "kfollower_leader_epoch_regressions_total",
		"kfollower_local_retention_deleted_segments_total", "kfollower_local_retention_deleted_bytes_total",
	}
	if n, err := testutil.GatherAndCount(reg, perTopic...); err != nil || n != 0 {
		t.Fatalf("%d per-topic series before any topic is followed (%v)", n, err)
	}
	o.Followed("orders")
	series := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			series[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = mt.GetCounter().GetValue()
		}
	}
	want := []string{
		"kfollower_committed_records_lost_total{topic=orders}",
		"kfollower_truncations_total{cause=diverging-epoch,topic=orders}",
		"kfollower_truncations_total{cause=offsets-for-leader-epoch,topic=orders}",
		"kfollower_truncations_total{cause=out-of-range-high,topic=orders}",
	}
	for _, name := range perTopic[2:] {
		want = append(want, name+"{topic=orders}")
	}
	for _, s := range want {
		v, ok := series[s]
		if !ok || v != 0 {
			t.Errorf("%s: exported %v, value %v; want 0 before any event", s, ok, v)
		}
	}
	o.Event(&follower.TruncationEvent{Topic: "orders", Cause: follower.CauseEpochReply, From: 100, To: 150, Records: 50, Bytes: 5000})
	if v := testutil.ToFloat64(m.lostRecords.WithLabelValues("orders")); v != 50 {
		t.Fatalf("records lost %v after the first loss, want 50", v)
	}
	// Following it again (a restart of the Manager is a new process; here
	// the same observer told twice) keeps what was counted.
	o.Followed("orders")
	if v := testutil.ToFloat64(m.lostRecords.WithLabelValues("orders")); v != 50 {
		t.Fatalf("records lost %v after Followed again, want 50", v)
	}
}
