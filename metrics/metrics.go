package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Namespace prefixes every kfollower metric.
const Namespace = "kfollower"

// Partition is one followed partition as the collector sees it at scrape
// time. Offsets are -1 when unknown.
type Partition struct {
	Topic          string
	Partition      int32
	State          string
	Leader         int32
	LeaderEpoch    int32
	LocalEpoch     int32
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	Lag            int64
	Reconciled     bool
	SizeBytes      int64
	Segments       int
}

// States are the values of the state label of kfollower_partition_state,
// the follower's states plus "failed" (the local log could not be opened,
// or its topic was recreated) and "stalled" (a request to the leader in
// the air for longer than kfollower run's --stall-after: a hung leader). One series per state is exported for each
// partition (the state-set pattern), so a query never depends on which
// states have been seen. "stopped", "failed" and "storage-backoff" copy
// nothing until something is repaired, and make kfollower_ready 0.
var States = []string{"no-leader", "reconciling", "fetching", "stalled", "out-of-range", "backoff", "fenced", "storage-backoff", "stopped", "failed"}

// ConnectionStates are the values of the state label of
// kfollower_cluster_connection_state: "connecting" until a bootstrap
// server has answered ApiVersions, "connected" after.
var ConnectionStates = []string{"connecting", "connected"}

// Options are what the scrape-time collector reads.
type Options struct {
	// Partitions returns a snapshot of every followed partition.
	Partitions func() []Partition
	// Ready mirrors /readyz.
	Ready func() bool
	// Connection, if set, returns one of ConnectionStates.
	Connection func() string
	// LostFoundBytes, if set, sizes lost+found (walked at scrape time).
	LostFoundBytes func() (int64, error)
	// Version, GoVersion, FranzGoVersion label kfollower_build_info.
	Version, GoVersion, FranzGoVersion string
	// Now is the clock for lag in seconds; default time.Now.
	Now func() time.Time
}

// Metrics holds the counters and histograms that the fetcher's observer
// (NewFetcherObserver) and storage's fsync hook (Fsync) feed. Its methods
// are safe for concurrent use.
type Metrics struct {
	requests        *prometheus.CounterVec
	requestErrors   *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	fetchedBytes    *prometheus.CounterVec
	fetchedRecords  *prometheus.CounterVec
	fetchConnReqs   *prometheus.CounterVec
	fetchConnBytes  *prometheus.CounterVec
	stagedBytes     *prometheus.CounterVec
	appendedBytes   *prometheus.CounterVec
	appendedRecords *prometheus.CounterVec
	epochResults    *prometheus.CounterVec
	fetchErrors     *prometheus.CounterVec
	leaderChanges   *prometheus.CounterVec
	epochRegress    *prometheus.CounterVec
	roundtrips      prometheus.Histogram
	truncations     *prometheus.CounterVec
	truncRecords    *prometheus.CounterVec
	truncBytes      *prometheus.CounterVec
	lostRecords     *prometheus.CounterVec
	gaps            *prometheus.CounterVec
	gapOffsets      *prometheus.CounterVec
	retSegments     *prometheus.CounterVec
	retBytes        *prometheus.CounterVec
	flushDuration   prometheus.Histogram
	flushErrors     prometheus.Counter
	fsyncDuration   prometheus.Histogram
	conformance     *prometheus.CounterVec
	c               *collector
}

// New registers kfollower's metrics on reg: the counters the returned
// Metrics feeds and a collector that builds per-partition series from
// opts.Partitions at every scrape. A nil reg registers nothing (tests).
func New(reg prometheus.Registerer, opts Options) *Metrics {
	f := promauto.With(reg)
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	// The broker a series is about is its node_id label, as on
	// franz-go's own kfollower_kgo_* series (plugin/kprom), so one
	// query joins or groups both.
	m := &Metrics{
		requests:      counter("requests_total", "Requests sent to leader brokers (api: fetch, offsets_for_leader_epoch, list_offsets).", "node_id", "api"),
		requestErrors: counter("request_errors_total", "Requests that got no response (connection or timeout errors).", "node_id", "api"),
		requestDuration: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "request_duration_seconds",
			Help:    "Time from sending a request to a leader broker to its response; a fetch includes the broker's long poll.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"node_id", "api"}),
		fetchedBytes:   counter("fetched_bytes_total", "Record batch bytes received in Fetch responses.", "node_id"),
		fetchedRecords: counter("fetched_records_total", "Records received in Fetch responses, counted from batch headers.", "node_id"),
		// kfollower's own Fetch connections (fetcher.Config.DirectFetch)
		// bypass kgo, so kprom's kfollower_kgo_read_bytes_total no longer
		// sees the bulk of what is read; these two put it back.
		fetchConnReqs: counter("fetch_connection_requests_total",
			"Fetch requests by the connection that carried them: direct (kfollower's own, whose bytes kprom does not see) or client (franz-go's).", "node_id", "connection"),
		fetchConnBytes: counter("fetch_connection_read_bytes_total",
			"Bytes of Fetch responses read on kfollower's own Fetch connections (franz-go's are in kfollower_kgo_read_bytes_total).", "node_id"),
		stagedBytes: counter("fetch_staged_bytes_total",
			"Record batch bytes written into local logs as they were read on kfollower's own Fetch connections, ahead of their append.", "node_id"),
		appendedBytes:   counter("appended_bytes_total", "Record batch bytes appended to local logs.", "node_id"),
		appendedRecords: counter("appended_records_total", "Records appended to local logs.", "node_id"),
		epochResults: counter("offsets_for_leader_epoch_requests_total",
			"OffsetsForLeaderEpoch queries, one per partition, by result: ok, undefined (the leader knows no end for the epoch), transport_error, or a Kafka error name.", "result"),
		fetchErrors: counter("fetch_partition_errors_total",
			"Partitions of Fetch responses that carried a Kafka error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, OFFSET_OUT_OF_RANGE, ...), by error name.", "error"),
		leaderChanges: counter("leader_changes_total", "Times metadata named another leader or leader epoch for a followed partition.", "topic"),
		epochRegress:  counter("leader_epoch_regressions_total", "Times metadata named a lower leader epoch than before for a followed partition.", "topic"),
		roundtrips: f.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "reconciliation_roundtrips",
			Help:    "Leader answers one reconciliation took before fetching again: OffsetsForLeaderEpoch answers (KIP-279 rounds), plus the DivergingEpoch Fetch or ListOffsets answer that started it.",
			Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16}}),
		truncations:  counter("truncations_total", "Truncations below data kfollower held, by what revealed the divergence.", "topic", "cause"),
		truncRecords: counter("truncated_records_total", "Records removed from local logs by truncation (kept in lost+found).", "topic"),
		truncBytes:   counter("truncated_bytes_total", "Record batch bytes removed from local logs by truncation (kept in lost+found).", "topic"),
		lostRecords: counter("committed_records_lost_total",
			"Committed records the cluster lost: kfollower held them (it only copies below the high watermark) and the current leader does not.", "topic"),
		gaps:        counter("retention_gaps_total", "Times the leader's log start passed our log end: offsets deleted by the cluster before we copied them.", "topic"),
		gapOffsets:  counter("retention_gap_offsets_total", "Offsets never copied because the cluster deleted them first.", "topic"),
		retSegments: counter("local_retention_deleted_segments_total", "Segments deleted by kfollower's own local retention.", "topic"),
		retBytes:    counter("local_retention_deleted_bytes_total", "Bytes deleted by kfollower's own local retention.", "topic"),
		flushDuration: f.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "flush_duration_seconds",
			Help:    "Time of each periodic flush (fsync) of a local log.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
		flushErrors: f.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "flush_errors_total", Help: "Failed periodic flushes and local retention runs."}),
		fsyncDuration: f.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "fsync_duration_seconds",
			Help:    "Time of each fsync of a local log file or directory (segments, indexes, checkpoints), whatever the flush policy.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
		conformance: counter("conformance_violations_total",
			"Broker answers the protocol rules out, by check (see the README); each is also logged with its evidence.", "check"),
	}
	m.c = newCollector(opts)
	if reg != nil {
		reg.MustRegister(m.c)
	}
	return m
}

// Observe samples the partitions between scrapes, so lag in seconds has the
// resolution of the caller's ticker rather than of the scrape interval.
func (m *Metrics) Observe() {
	if m.c.opts.Partitions != nil {
		m.c.observe(m.c.opts.Partitions())
	}
}

func broker(id int32) string { return strconv.Itoa(int(id)) }

// request counts one request to broker; err is a transport error.
func (m *Metrics) request(brokerID int32, api string, d time.Duration, err error) {
	b := broker(brokerID)
	m.requests.WithLabelValues(b, api).Inc()
	if err != nil {
		m.requestErrors.WithLabelValues(b, api).Inc()
		return
	}
	m.requestDuration.WithLabelValues(b, api).Observe(d.Seconds())
}

// fetched counts what a Fetch response carried.
func (m *Metrics) fetched(brokerID int32, bytes, records int64) {
	b := broker(brokerID)
	m.fetchedBytes.WithLabelValues(b).Add(float64(bytes))
	m.fetchedRecords.WithLabelValues(b).Add(float64(records))
}

// fetchConnection counts a Fetch by the connection that carried it, and
// the response bytes read on a direct one (on a transport error, what was
// read before it) and the record bytes staged as they were read.
func (m *Metrics) fetchConnection(brokerID int32, direct bool, responseBytes, stagedBytes int64) {
	b := broker(brokerID)
	conn := "client"
	if direct {
		conn = "direct"
		m.fetchConnBytes.WithLabelValues(b).Add(float64(responseBytes))
		m.stagedBytes.WithLabelValues(b).Add(float64(stagedBytes))
	}
	m.fetchConnReqs.WithLabelValues(b, conn).Inc()
}

// appended counts what was appended to local logs.
func (m *Metrics) appended(brokerID int32, bytes, records int64) {
	b := broker(brokerID)
	m.appendedBytes.WithLabelValues(b).Add(float64(bytes))
	m.appendedRecords.WithLabelValues(b).Add(float64(records))
}

// addEpochResults counts OffsetsForLeaderEpoch queries by result.
func (m *Metrics) addEpochResults(results map[string]int) {
	for r, n := range results {
		m.epochResults.WithLabelValues(r).Add(float64(n))
	}
}

// addFetchErrors counts Fetch response partitions by Kafka error name.
func (m *Metrics) addFetchErrors(errs map[string]int) {
	for e, n := range errs {
		m.fetchErrors.WithLabelValues(e).Add(float64(n))
	}
}

// leaderChange counts a new leader or epoch for a partition of topic.
func (m *Metrics) leaderChange(topic string, oldEpoch, newEpoch int32) {
	m.leaderChanges.WithLabelValues(topic).Inc()
	if newEpoch < oldEpoch {
		m.epochRegress.WithLabelValues(topic).Inc()
	}
}

// followed creates every per-topic counter of topic at zero.
func (m *Metrics) followed(topic string) {
	for _, c := range follower.Causes() {
		m.truncations.WithLabelValues(topic, c.String())
	}
	for _, v := range []*prometheus.CounterVec{m.truncRecords, m.truncBytes, m.lostRecords, m.gaps, m.gapOffsets,
		m.leaderChanges, m.epochRegress, m.retSegments, m.retBytes} {
		v.WithLabelValues(topic)
	}
}

// truncated counts a truncation event. Every truncated record was committed
// (kfollower fetches as a consumer, only below the high watermark), so each
// is also counted as lost by the cluster.
func (m *Metrics) truncated(topic, cause string, records, bytes int64) {
	m.truncations.WithLabelValues(topic, cause).Inc()
	m.truncRecords.WithLabelValues(topic).Add(float64(records))
	m.truncBytes.WithLabelValues(topic).Add(float64(bytes))
	m.lostRecords.WithLabelValues(topic).Add(float64(records))
}

// gap counts offsets [from, to) the cluster deleted before we copied them.
func (m *Metrics) gap(topic string, from, to int64) {
	m.gaps.WithLabelValues(topic).Inc()
	if to > from {
		m.gapOffsets.WithLabelValues(topic).Add(float64(to - from))
	}
}

// Fsync records one fsync's duration (storage.Options.OnSync).
func (m *Metrics) Fsync(d time.Duration) { m.fsyncDuration.Observe(d.Seconds()) }

// maintained records one partition's periodic retention and flush.
func (m *Metrics) maintained(topic string, segments int, bytes int64, flushed bool, flush time.Duration, err error) {
	if segments > 0 {
		m.retSegments.WithLabelValues(topic).Add(float64(segments))
		m.retBytes.WithLabelValues(topic).Add(float64(bytes))
	}
	if flushed {
		m.flushDuration.Observe(flush.Seconds())
	}
	if err != nil {
		m.flushErrors.Inc()
	}
}

// collector builds the scrape-time series.
type collector struct {
	opts Options

	mu       sync.Mutex           // guards caughtUp
	caughtUp map[string]time.Time // partition key → when its lag was last seen at 0, or first seen

	buildInfo, ready, lostFound, connection              *prometheus.Desc
	logStart, logEnd, hw, lag, lagSeconds                *prometheus.Desc
	leaderEpoch, localEpoch, leaderID, state, reconciled *prometheus.Desc
	storeBytes, storeSegments                            *prometheus.Desc
}

func newCollector(opts Options) *collector {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	tp := []string{"topic", "partition"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &collector{
		opts:          opts,
		caughtUp:      map[string]time.Time{},
		buildInfo:     d("build_info", "Always 1; labels name the build.", "version", "go_version", "franz_go_version"),
		ready:         d("ready", "1 when /readyz is: metadata loaded and every followed partition reconciled at least once."),
		connection:    d("cluster_connection_state", "1 for the state of the connection to the cluster (connecting: no bootstrap server has answered yet; connected), 0 for the other.", "state"),
		lostFound:     d("lost_found_bytes", "Bytes kept in lost+found: batches truncated away, kept for inspection."),
		logStart:      d("partition_log_start_offset", "First offset of the local copy.", tp...),
		logEnd:        d("partition_log_end_offset", "Next offset the local copy will hold (log end offset).", tp...),
		hw:            d("partition_leader_high_watermark", "The leader's high watermark from its last Fetch response.", tp...),
		lag:           d("partition_lag_records", "Leader high watermark minus local log end: how far the copy is behind (replica lag, not consumer lag).", tp...),
		lagSeconds:    d("partition_lag_seconds", "Seconds since the local log end was last seen at the leader's high watermark (0 when caught up).", tp...),
		leaderEpoch:   d("partition_leader_epoch", "The current leader epoch as kfollower knows it.", tp...),
		localEpoch:    d("partition_local_epoch", "The latest leader epoch in the local epoch cache; -1 if none.", tp...),
		leaderID:      d("partition_leader_id", "The node id of the leader kfollower follows; -1 if none.", tp...),
		state:         d("partition_state", "1 for the partition's current state, 0 for the others.", "topic", "partition", "state"),
		reconciled:    d("partition_reconciled", "1 once the partition has reconciled with a leader since start.", tp...),
		storeBytes:    d("partition_store_bytes", "Bytes of the local copy's segments.", tp...),
		storeSegments: d("partition_store_segments", "Segments of the local copy.", tp...),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.ready, c.connection, c.lostFound, c.logStart, c.logEnd, c.hw, c.lag, c.lagSeconds,
		c.leaderEpoch, c.localEpoch, c.leaderID, c.state, c.reconciled, c.storeBytes, c.storeSegments} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.buildInfo, 1, c.opts.Version, c.opts.GoVersion, c.opts.FranzGoVersion)
	if c.opts.Ready != nil {
		gauge(c.ready, b2f(c.opts.Ready()))
	}
	if c.opts.Connection != nil {
		cur := c.opts.Connection()
		for _, s := range ConnectionStates {
			gauge(c.connection, b2f(s == cur), s)
		}
	}
	if c.opts.LostFoundBytes != nil {
		if n, err := c.opts.LostFoundBytes(); err == nil {
			gauge(c.lostFound, float64(n))
		} else {
			ch <- prometheus.NewInvalidMetric(c.lostFound, err)
		}
	}
	if c.opts.Partitions == nil {
		return
	}
	ps := c.opts.Partitions()
	lagSeconds := c.observe(ps)
	for i, p := range ps {
		t, n := p.Topic, strconv.Itoa(int(p.Partition))
		gauge(c.logStart, float64(p.LogStartOffset), t, n)
		gauge(c.logEnd, float64(p.LogEndOffset), t, n)
		if p.HighWatermark >= 0 {
			gauge(c.hw, float64(p.HighWatermark), t, n)
			gauge(c.lag, float64(p.Lag), t, n)
			gauge(c.lagSeconds, lagSeconds[i], t, n)
		}
		gauge(c.leaderEpoch, float64(p.LeaderEpoch), t, n)
		gauge(c.localEpoch, float64(p.LocalEpoch), t, n)
		gauge(c.leaderID, float64(p.Leader), t, n)
		gauge(c.reconciled, b2f(p.Reconciled), t, n)
		gauge(c.storeBytes, float64(p.SizeBytes), t, n)
		gauge(c.storeSegments, float64(p.Segments), t, n)
		known := false
		for _, s := range States {
			known = known || s == p.State
			gauge(c.state, b2f(s == p.State), t, n, s)
		}
		if !known {
			gauge(c.state, 1, t, n, p.State)
		}
	}
}

// observe updates when each partition was last caught up and returns each
// one's lag in seconds; partitions no longer listed are forgotten, so they
// leave no series and no memory behind.
func (c *collector) observe(ps []Partition) []float64 {
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]float64, len(ps))
	seen := make(map[string]bool, len(ps))
	for i, p := range ps {
		k := p.Topic + "\x00" + strconv.Itoa(int(p.Partition))
		seen[k] = true
		at, ok := c.caughtUp[k]
		if !ok || (p.HighWatermark >= 0 && p.Lag == 0) {
			at = now
			c.caughtUp[k] = now
		}
		out[i] = now.Sub(at).Seconds()
	}
	for k := range c.caughtUp {
		if !seen[k] {
			delete(c.caughtUp, k)
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
