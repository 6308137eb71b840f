package fetcher

import (
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
)

// Observer is told what the driver does, for metrics and progress logs.
// The fetcher never imports metrics: metrics implements Observer, as
// franz-go's plugin/kprom implements kgo's hooks (docs/design.md §8).
//
// Its methods are called from the Manager's and the workers' goroutines,
// concurrently, so they must be safe for concurrent use; a worker waits
// for them, so they must not block for long. Embed NopObserver to
// implement only some of them.
type Observer interface {
	// Followed: Metadata named a topic that Config.Follow selects, for the
	// first time since start. An observer creates the topic's counters
	// here, at zero, so that an alert on increase() sees their first rise
	// (docs/design.md §8).
	Followed(topic string)
	// RequestDone: one batched request to a leader broker got its
	// response, or failed.
	RequestDone(RequestStats)
	// Appended: record batches of tp, fetched from broker, were appended
	// to its local log.
	Appended(broker int32, tp wire.TopicPartition, bytes, records int64)
	// Event: a *follower.TruncationEvent (with Records and Bytes filled
	// in), *follower.GapEvent or *follower.ConformanceEvent, once the
	// storage actions that came with it are durable.
	Event(follower.Event)
	// Reconciled: a reconciliation (KIP-101/KIP-279) ended and the
	// partition fetches again, once the storage actions that came with it
	// are durable. Every reconciliation ends with one, with no round trip
	// at all when there was nothing to ask about.
	Reconciled(*follower.ReconciledEvent)
	// LeaderChanged: Metadata named another leader or leader epoch for a
	// partition already followed.
	LeaderChanged(tp wire.TopicPartition, old, new follower.LeaderChange)
	// Maintained: one partition's periodic retention and flush.
	Maintained(MaintenanceStats)
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) Followed(string)                                                                 {}
func (NopObserver) RequestDone(RequestStats)                                                        {}
func (NopObserver) Appended(int32, wire.TopicPartition, int64, int64)                               {}
func (NopObserver) Event(follower.Event)                                                            {}
func (NopObserver) Reconciled(*follower.ReconciledEvent)                                            {}
func (NopObserver) LeaderChanged(wire.TopicPartition, follower.LeaderChange, follower.LeaderChange) {}
func (NopObserver) Maintained(MaintenanceStats)                                                     {}

// observers tells each of Config.Observers everything, in order.
type observers []Observer

func (obs observers) Followed(topic string) {
	for _, o := range obs {
		o.Followed(topic)
	}
}

func (obs observers) RequestDone(s RequestStats) {
	for _, o := range obs {
		o.RequestDone(s)
	}
}

func (obs observers) Appended(broker int32, tp wire.TopicPartition, bytes, records int64) {
	for _, o := range obs {
		o.Appended(broker, tp, bytes, records)
	}
}

func (obs observers) Event(e follower.Event) {
	for _, o := range obs {
		o.Event(e)
	}
}

func (obs observers) Reconciled(e *follower.ReconciledEvent) {
	for _, o := range obs {
		o.Reconciled(e)
	}
}

func (obs observers) LeaderChanged(tp wire.TopicPartition, old, new follower.LeaderChange) {
	for _, o := range obs {
		o.LeaderChanged(tp, old, new)
	}
}

func (obs observers) Maintained(s MaintenanceStats) {
	for _, o := range obs {
		o.Maintained(s)
	}
}
