package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The group forwarding metrics: requests by API and error, failures to
// reach the upstream (at zero from the start), the up gauge following the
// last request, commits above the high watermark; they pass the lint.
func TestGroups(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	g := NewGroups(reg)
	if got := testutil.ToFloat64(g.failures.WithLabelValues("JoinGroup")); got != 0 {
		t.Fatalf("failures before any request: %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "kfollower_groups_upstream_failures_total"); err != nil || n != len(groupAPIs) {
		t.Fatalf("%d failure series (%v), want one per API at zero: %d", n, err, len(groupAPIs))
	}
	g.Forwarded("JoinGroup", "NONE", true, 2*time.Second)
	g.Forwarded("Heartbeat", "COORDINATOR_NOT_AVAILABLE", false, time.Millisecond)
	if got := testutil.ToFloat64(g.up); got != 0 {
		t.Fatalf("up after an unreachable request: %v, want 0", got)
	}
	g.Forwarded("Heartbeat", "REBALANCE_IN_PROGRESS", true, time.Millisecond)
	g.CommitAboveWatermark("orders")
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(g.requests.WithLabelValues("JoinGroup", "NONE")), 1, "JoinGroup NONE"},
		{testutil.ToFloat64(g.requests.WithLabelValues("Heartbeat", "COORDINATOR_NOT_AVAILABLE")), 1, "Heartbeat COORDINATOR_NOT_AVAILABLE"},
		{testutil.ToFloat64(g.failures.WithLabelValues("Heartbeat")), 1, "Heartbeat failures"},
		{testutil.ToFloat64(g.failures.WithLabelValues("JoinGroup")), 0, "JoinGroup failures"},
		{testutil.ToFloat64(g.up), 1, "up after a reached request"},
		{testutil.ToFloat64(g.above.WithLabelValues("orders")), 1, "commits above the high watermark"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "kfollower_groups_request_duration_seconds"); err != nil || n != 2 {
		t.Errorf("%d duration series (%v), want 2 (JoinGroup, Heartbeat)", n, err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
