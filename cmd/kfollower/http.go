package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// dropPrefix gathers g without the families whose names start with prefix.
type dropPrefix struct {
	g      prometheus.Gatherer
	prefix string
}

func (d dropPrefix) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := d.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), d.prefix) {
			out = append(out, mf)
		}
	}
	return out, err
}

// daemonState is what the HTTP endpoints read. The listener is up before any
// broker has answered, so a liveness probe passes, a readiness probe and
// the not-ready alert see why, and Prometheus scrapes from the first
// second; the fetcher's Manager exists only once the cluster answered.
type daemonState struct {
	stallAfter time.Duration
	now        func() time.Time

	mu      sync.Mutex
	mgr     *fetcher.Manager
	serve   func() *serveStatus // the --serve endpoint now, nil without one
	waiting string              // while connecting: why no bootstrap server has answered yet
}

func newDaemonState(stallAfter time.Duration) *daemonState {
	return &daemonState{stallAfter: stallAfter, now: time.Now, waiting: "connecting to the bootstrap servers"}
}

// setManager makes m and the --serve endpoint, if any, what the
// endpoints show: the cluster has answered.
func (d *daemonState) setManager(m *fetcher.Manager, serve func() *serveStatus) {
	d.mu.Lock()
	d.mgr, d.serve, d.waiting = m, serve, ""
	d.mu.Unlock()
}

// setWaiting records why the cluster has not answered yet.
func (d *daemonState) setWaiting(reason string) {
	d.mu.Lock()
	d.waiting = reason
	d.mu.Unlock()
}

func (d *daemonState) manager() (*fetcher.Manager, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mgr, d.waiting
}

// connection is the kfollower_cluster_connection_state value.
func (d *daemonState) connection() string {
	if m, _ := d.manager(); m != nil {
		return "connected"
	}
	return "connecting"
}

// ready is /readyz, with the reason when not.
func (d *daemonState) ready() (bool, string) {
	m, waiting := d.manager()
	switch {
	case m == nil:
		return false, "not connected to the cluster yet: " + waiting
	case !m.Ready():
		return false, "metadata not loaded yet, a followed partition has not reconciled with its leader yet, or one is stopped, failed or waiting on its storage"
	}
	return true, ""
}

// partitionStatus is fetcher.Status as /status shows it: State is
// "stalled" when the request in flight is older than --stall-after.
type partitionStatus struct {
	fetcher.Status
	State string `json:"state"`
	// InFlightAgeSeconds is how long the request in flight has been in
	// the air.
	InFlightAgeSeconds float64 `json:"in_flight_age_seconds,omitempty"`
}

// statuses is every partition's status now, nil before the cluster
// answered.
func (d *daemonState) statuses() []partitionStatus {
	m, _ := d.manager()
	if m == nil {
		return nil
	}
	now := d.now()
	ss := m.Statuses()
	out := make([]partitionStatus, len(ss))
	for i, s := range ss {
		out[i] = partitionStatus{Status: s, State: s.State}
		if s.InFlightSince != nil {
			age := now.Sub(*s.InFlightSince)
			out[i].InFlightAgeSeconds = max(age.Seconds(), 0)
			// A hung leader (SIGSTOP, a full GC pause, a dead network
			// path with no RST) leaves the state machine waiting in
			// whatever state sent the request; only the request's age
			// tells.
			if age > d.stallAfter {
				out[i].State = "stalled"
			}
		}
	}
	return out
}

// totals sums /status's partitions: what 'kfollower status' and an
// operator want at a glance.
type totals struct {
	Partitions  int            `json:"partitions"`
	ByState     map[string]int `json:"by_state"`
	CaughtUp    int            `json:"caught_up"` // fetching with no lag
	LagRecords  int64          `json:"lag_records"`
	Truncations int            `json:"partitions_truncated"` // partitions with a last truncation since start
	LostRecords int64          `json:"lost_records"`         // of the partitions' last losses since start
	LastLoss    *lossRef       `json:"last_loss,omitempty"`
}

// lossRef names one loss.
type lossRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	Records   int64  `json:"records"`
}

func sumTotals(ps []partitionStatus) totals {
	t := totals{Partitions: len(ps), ByState: map[string]int{}}
	for _, p := range ps {
		t.ByState[p.State]++
		t.LagRecords += p.Lag
		if p.State == "fetching" && p.HighWatermark >= 0 && p.Lag == 0 {
			t.CaughtUp++
		}
		if p.LastTruncation != nil {
			t.Truncations++
		}
		if l := p.LastLost; l != nil {
			t.LostRecords += l.Records
			t.LastLoss = &lossRef{Topic: p.Topic, Partition: p.Partition, From: l.From, To: l.To, Records: l.Records}
		}
	}
	return t
}

// statusDoc is the /status document.
type statusDoc struct {
	Time  time.Time `json:"time"`
	Ready bool      `json:"ready"`
	// NotReady says why Ready is false.
	NotReady string `json:"not_ready,omitempty"`
	// Cluster is the connection: connecting or connected.
	Cluster    string            `json:"cluster"`
	Totals     totals            `json:"totals"`
	Partitions []partitionStatus `json:"partitions"`
	// Serve is the --serve endpoint, if any.
	Serve *serveStatus `json:"serve,omitempty"`
}

func newMux(g prometheus.Gatherer, d *daemonState) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := d.ready(); !ok {
			http.Error(w, "not ready: "+why+" (see /status)\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		ps := d.statuses()
		if ps == nil {
			ps = []partitionStatus{}
		}
		ready, why := d.ready()
		d.mu.Lock()
		serveNow := d.serve
		d.mu.Unlock()
		var serve *serveStatus
		if serveNow != nil {
			serve = serveNow() // open connections and ACL state as of this request
		}
		doc := statusDoc{Time: d.now().UTC(), Ready: ready, NotReady: why, Cluster: d.connection(),
			Totals: sumTotals(ps), Partitions: ps, Serve: serve}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
	})
	return mux
}

// metricsPartitions is what the collector reads: /status's partitions,
// stalled state included.
func (d *daemonState) metricsPartitions() []metrics.Partition {
	ss := d.statuses()
	out := make([]metrics.Partition, len(ss))
	for i, s := range ss {
		out[i] = metrics.Partition{
			Topic: s.Topic, Partition: s.Partition, State: s.State,
			Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, LocalEpoch: s.LocalEpoch,
			LogStartOffset: s.LogStartOffset, LogEndOffset: s.LogEndOffset,
			HighWatermark: s.HighWatermark, Lag: s.Lag, Reconciled: s.Reconciled,
			SizeBytes: s.SizeBytes, Segments: s.Segments,
		}
	}
	return out
}
