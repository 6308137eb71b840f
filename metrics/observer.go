package metrics

import (
	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetcherObserver feeds m from what the fetcher reports, as franz-go's
// plugin/kprom feeds its metrics from kgo's hooks.
type fetcherObserver struct{ m *Metrics }

// NewFetcherObserver returns the fetcher.Observer that feeds m. It creates
// every conformance check's series at zero first, so a dashboard or an
// alert on increase() reads "none failed" rather than "no data".
func NewFetcherObserver(m *Metrics) fetcher.Observer {
	for _, c := range follower.Checks() {
		m.conformance.WithLabelValues(c.String())
	}
	return fetcherObserver{m}
}

// Followed creates topic's counters at zero: the counters of truncations
// (each cause), records and bytes truncated, records lost, gaps, leader
// changes and local retention. An alert on increase() of a series that
// first appears at its first event sees no rise, so without this the first
// loss of a topic would raise no KafkaCommittedDataLost
// (deploy/kfollower-rules.yml).
func (o fetcherObserver) Followed(topic string) { o.m.followed(topic) }

func (o fetcherObserver) RequestDone(s fetcher.RequestStats) {
	o.m.request(s.Broker, fetcher.APIName(s.Key), s.Latency, s.Err)
	switch s.Key {
	case kmsg.Fetch:
		o.m.fetchConnection(s.Broker, s.Direct, s.ResponseBytes, s.StagedBytes)
		if s.Err == nil {
			o.m.fetched(s.Broker, s.FetchedBytes, s.FetchedRecords)
			o.m.addFetchErrors(s.Results)
		}
	case kmsg.OffsetForLeaderEpoch:
		if s.Err != nil {
			// No partition got an answer.
			o.m.addEpochResults(map[string]int{"transport_error": s.Partitions})
		} else {
			o.m.addEpochResults(s.Results)
		}
	}
}

func (o fetcherObserver) Appended(broker int32, _ wire.TopicPartition, bytes, records int64) {
	o.m.appended(broker, bytes, records)
}

func (o fetcherObserver) Event(e follower.Event) {
	switch e := e.(type) {
	case *follower.TruncationEvent:
		o.m.truncated(e.Topic, e.Cause.String(), e.Records, e.Bytes)
	case *follower.GapEvent:
		o.m.gap(e.Topic, e.From, e.To)
	case *follower.ConformanceEvent:
		o.m.conformance.WithLabelValues(e.Check.String()).Inc()
	}
}

// Reconciled observes the round trips of a reconciliation that asked the
// leader anything: one with nothing to ask about (no local epochs) took
// none and is left out, so the histogram holds the KIP-279 walks alone.
func (o fetcherObserver) Reconciled(e *follower.ReconciledEvent) {
	if e.Roundtrips > 0 {
		o.m.roundtrips.Observe(float64(e.Roundtrips))
	}
}

func (o fetcherObserver) LeaderChanged(tp wire.TopicPartition, old, new follower.LeaderChange) {
	o.m.leaderChange(tp.Topic, old.LeaderEpoch, new.LeaderEpoch)
}

func (o fetcherObserver) Maintained(s fetcher.MaintenanceStats) {
	o.m.maintained(s.TP.Topic, s.RetentionSegments, s.RetentionBytes, s.Flushed, s.FlushLatency, s.Err)
}
