package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Groups holds the metrics of --serve-groups upstream: the group requests
// kfollower's served endpoint forwards to the upstream cluster. It is the
// groups package's Observer; its methods are safe for concurrent use.
type Groups struct {
	requests *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration *prometheus.HistogramVec
	up       prometheus.Gauge
	above    *prometheus.CounterVec
}

// groupAPIs are the requests forwarded, as kmsg names them: their failure
// series exist at zero from the start, so an alert on increase() sees the
// first one.
var groupAPIs = []string{"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
	"OffsetFetch", "DescribeGroups", "ListGroups", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}

// NewGroups registers the group forwarding metrics on reg (nil: none,
// for tests).
func NewGroups(reg prometheus.Registerer) *Groups {
	f := promauto.With(reg)
	g := &Groups{
		requests: f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "groups_requests_total",
			Help: "Consumer-group requests answered through the served endpoint (--serve-groups upstream), by API and the Kafka error the client got (NONE: none); FindCoordinator when kfollower looked the coordinator up upstream (not a cached answer)."},
			[]string{"api", "error"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "groups_upstream_failures_total",
			Help: "Consumer-group requests kfollower answered COORDINATOR_NOT_AVAILABLE itself because the upstream cluster could not be reached."},
			[]string{"api"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "groups_request_duration_seconds",
			Help:    "Time from receiving a consumer-group request to its answer, upstream round trips included; a JoinGroup or SyncGroup includes the coordinator's wait for the rebalance.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"api"}),
		up: f.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "groups_upstream_up",
			Help: "1 if the last consumer-group request reached the upstream cluster, 0 if it could not be reached."}),
		above: f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "groups_commits_above_high_watermark_total",
			Help: "OffsetCommit partitions committing an offset above the high watermark kfollower serves (forwarded unchanged: the cluster owns group state)."},
			[]string{"topic"}),
	}
	for _, api := range groupAPIs {
		g.failures.WithLabelValues(api)
	}
	g.up.Set(1)
	return g
}

// Forwarded counts one request answered.
func (g *Groups) Forwarded(api, errName string, reached bool, d time.Duration) {
	g.requests.WithLabelValues(api, errName).Inc()
	g.duration.WithLabelValues(api).Observe(d.Seconds())
	if reached {
		g.up.Set(1)
		return
	}
	g.up.Set(0)
	g.failures.WithLabelValues(api).Inc()
}

// CommitAboveWatermark counts one OffsetCommit partition above the served
// high watermark.
func (g *Groups) CommitAboveWatermark(topic string) { g.above.WithLabelValues(topic).Inc() }
