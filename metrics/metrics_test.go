package metrics

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
		LostFoundBytes: func() (int64, error) { return 4096, nil },
		Version:        "v1", GoVersion: "go1.26", FranzGoVersion: "v1.22.3",
		Now: func() time.Time { return now },
	})
	return reg, m, src, &now
}

var p0 = Partition{Topic: "t", Partition: 0, State: "fetching", Leader: 2, LeaderEpoch: 5, LocalEpoch: 4,
	LogStartOffset: 0, LogEndOffset: 90, HighWatermark: 100, Lag: 10, Reconciled: true, SizeBytes: 7000, Segments: 1}

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
kfollower_partition_state{partition="0",state="stopped",topic="t"} 0
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

func TestCounters(t *testing.T) {
	reg, m, src, _ := newTest(t)
	src.set(p0)
	m.Request(2, "fetch", 20*time.Millisecond, nil)
	m.Request(2, "fetch", 0, errors.New("connection refused"))
	m.LeaderChange("t", 5, 6)
	m.LeaderChange("t", 6, 3)
	m.Reconciled(1)
	m.Truncated("t", "offsets-for-leader-epoch", 120, 9000)
	m.Gap("t", 10, 40)
	m.EpochResults(map[string]int{"ok": 2, "undefined": 1})
	m.FetchErrors(map[string]int{"FENCED_LEADER_EPOCH": 3})
	const want = `
# HELP kfollower_committed_records_lost_total Committed records the cluster lost: kfollower held them (it only copies below the high watermark) and the current leader does not.
# TYPE kfollower_committed_records_lost_total counter
kfollower_committed_records_lost_total{topic="t"} 120
# HELP kfollower_fetch_partition_errors_total Partitions of Fetch responses that carried a Kafka error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, OFFSET_OUT_OF_RANGE, ...), by error name.
# TYPE kfollower_fetch_partition_errors_total counter
kfollower_fetch_partition_errors_total{error="FENCED_LEADER_EPOCH"} 3
# HELP kfollower_leader_changes_total Times metadata named another leader or leader epoch for a followed partition.
# TYPE kfollower_leader_changes_total counter
kfollower_leader_changes_total{topic="t"} 2
# HELP kfollower_leader_epoch_regressions_total Times metadata named a lower leader epoch than before for a followed partition.
# TYPE kfollower_leader_epoch_regressions_total counter
kfollower_leader_epoch_regressions_total{topic="t"} 1
# HELP kfollower_offsets_for_leader_epoch_requests_total OffsetsForLeaderEpoch queries, one per partition, by result: ok, undefined (the leader knows no end for the epoch), transport_error, or a Kafka error name.
# TYPE kfollower_offsets_for_leader_epoch_requests_total counter
kfollower_offsets_for_leader_epoch_requests_total{result="ok"} 2
kfollower_offsets_for_leader_epoch_requests_total{result="undefined"} 1
# HELP kfollower_request_errors_total Requests that got no response (connection or timeout errors).
# TYPE kfollower_request_errors_total counter
kfollower_request_errors_total{api="fetch",broker="2"} 1
# HELP kfollower_requests_total Requests sent to leader brokers (api: fetch, offsets_for_leader_epoch, list_offsets).
# TYPE kfollower_requests_total counter
kfollower_requests_total{api="fetch",broker="2"} 2
# HELP kfollower_retention_gap_offsets_total Offsets never copied because the cluster deleted them first.
# TYPE kfollower_retention_gap_offsets_total counter
kfollower_retention_gap_offsets_total{topic="t"} 30
# HELP kfollower_truncations_total Truncations below data kfollower held, by what revealed the divergence.
# TYPE kfollower_truncations_total counter
kfollower_truncations_total{cause="offsets-for-leader-epoch",topic="t"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kfollower_committed_records_lost_total", "kfollower_fetch_partition_errors_total", "kfollower_leader_changes_total", "kfollower_leader_epoch_regressions_total",
		"kfollower_offsets_for_leader_epoch_requests_total", "kfollower_request_errors_total", "kfollower_requests_total",
		"kfollower_retention_gap_offsets_total", "kfollower_truncations_total"); err != nil {
		t.Fatal(err)
	}
	if c := histogramCount(t, reg, "kfollower_reconciliation_roundtrips"); c != 1 {
		t.Fatalf("roundtrip histogram holds %d observations, want 1", c)
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("%s not exported", name)
	return 0
}

// The exposition passes client_golang's lint (naming, units, _total).
func TestLint(t *testing.T) {
	reg, m, src, _ := newTest(t)
	src.set(p0)
	m.Request(1, "fetch", time.Millisecond, nil)
	m.Fetched(1, 100, 3)
	m.Appended(1, 100, 3)
	m.Truncated("t", "diverging-epoch", 1, 1)
	m.Maintained("t", 1, 100, true, time.Millisecond, nil)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
