package fetcher

import (
	"sort"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Status is one partition's state for /status and metrics.
type Status struct {
	Topic          string                    `json:"topic"`
	Partition      int32                     `json:"partition"`
	State          string                    `json:"state"`
	Leader         int32                     `json:"leader"`
	LeaderEpoch    int32                     `json:"leader_epoch"`
	LocalEpoch     int32                     `json:"local_epoch"`
	LogStartOffset int64                     `json:"log_start_offset"`
	LogEndOffset   int64                     `json:"log_end_offset"`
	HighWatermark  int64                     `json:"high_watermark"`
	Lag            int64                     `json:"lag"`
	Reconciled     bool                      `json:"reconciled"`
	Error          string                    `json:"error,omitempty"`
	LastTruncation *follower.TruncationEvent `json:"last_truncation,omitempty"`
	// LastLost is the latest loss reported, with its durable lost+found
	// event id.
	LastLost             *LostReport `json:"last_lost,omitempty"`
	LeaderLogStartOffset int64       `json:"leader_log_start_offset"`
	SizeBytes            int64       `json:"size_bytes"` // the local log's segment bytes
	Segments             int         `json:"segments"`
	// StaleReplies counts the replies the state machine discarded: no
	// longer the request in flight (follower.ErrStale: a new leader epoch,
	// a backoff, a hand-off) or the partition had stopped.
	StaleReplies int64 `json:"stale_replies"`
	// InFlight is the API of the request to the leader now in the air
	// for this partition ("fetch", "offsets_for_leader_epoch",
	// "list_offsets"), sent at InFlightSince; empty and nil when none is.
	// A request far older than the broker's long poll is a stall (a hung
	// leader) that State alone does not show.
	InFlight      string     `json:"in_flight,omitempty"`
	InFlightSince *time.Time `json:"in_flight_since,omitempty"`
}

// inFlight is a partition's request in the air, the worker that sent it
// and its id, so that neither another worker's answer nor the answer to an
// older request of the same partition (stale, still in the air beside its
// next, worker.side) clears it.
type inFlight struct {
	worker int32
	id     uint64
	api    string
	since  time.Time
}

// setInFlight records that worker sent a request of api for tps at since.
func (m *Manager) setInFlight(worker int32, api string, since time.Time, tps map[wire.TopicPartition]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inFlight == nil {
		m.inFlight = map[wire.TopicPartition]inFlight{}
	}
	for tp, id := range tps {
		m.inFlight[tp] = inFlight{worker: worker, id: id, api: api, since: since}
	}
}

// APIName names a request's API in the status snapshot and in the
// metrics' api label: fetch, offsets_for_leader_epoch, list_offsets.
func APIName(k kmsg.Key) string {
	switch k {
	case kmsg.Fetch:
		return "fetch"
	case kmsg.OffsetForLeaderEpoch:
		return "offsets_for_leader_epoch"
	case kmsg.ListOffsets:
		return "list_offsets"
	}
	return k.Name()
}

// clearInFlight forgets worker's requests for tps, by id: answered, failed
// or given up.
func (m *Manager) clearInFlight(worker int32, tps map[wire.TopicPartition]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp, id := range tps {
		if f, ok := m.inFlight[tp]; ok && f.worker == worker && f.id == id {
			delete(m.inFlight, tp)
		}
	}
}

// publish records p's status; called by p's owner.
func (m *Manager) publish(p *part) {
	st := p.sm.Status()
	s := Status{
		Topic: p.tp.Topic, Partition: p.tp.Partition, State: st.State.String(),
		Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, LocalEpoch: -1,
		LogStartOffset: p.log.LogStartOffset(), LogEndOffset: p.log.LogEndOffset(),
		HighWatermark: st.HighWatermark, Reconciled: p.reconciled,
		LastTruncation: p.lastTruncation, LastLost: p.lastLost, LeaderLogStartOffset: st.LeaderLogStartOffset,
		SizeBytes: p.log.Size(), Segments: len(p.log.Segments()), StaleReplies: p.staleReplies,
	}
	if e, ok := p.log.LatestEpoch(); ok {
		s.LocalEpoch = e
	}
	if st.HighWatermark >= 0 {
		s.Lag = max(st.HighWatermark-s.LogEndOffset, 0)
	}
	if st.LastError != nil {
		s.Error = st.LastError.Error()
	}
	m.mu.Lock()
	if old, ok := m.statuses[p.tp]; ok && old == s && !p.force {
		// Nothing a reader or /status sees has changed: at thousands of
		// partitions the catalog updates of every such step were a
		// worker's idle CPU. (Compared with what is published rather than
		// a copy the partition keeps: a copy per partition was a
		// twentieth of the heap.)
		m.mu.Unlock()
		return
	}
	m.statuses[p.tp] = s
	m.mu.Unlock()
	p.force = !m.changed(p, st.LeaderEpoch)
}

func (m *Manager) setStatus(tp wire.TopicPartition, s Status) {
	m.mu.Lock()
	m.statuses[tp] = s
	m.mu.Unlock()
}

// Statuses returns every followed partition's latest status, sorted. Safe to
// call from any goroutine.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	out := make([]Status, 0, len(m.statuses))
	for tp, s := range m.statuses {
		if f, ok := m.inFlight[tp]; ok {
			since := f.since
			s.InFlight, s.InFlightSince = f.api, &since
		}
		out = append(out, s)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Ready reports whether metadata has been read and every followed partition
// has been reconciled with its leader at least once and still follows it: a
// partition stopped (corruption in its log, an error no retry clears),
// failed (its log could not be opened, its topic was recreated) or waiting
// on its storage (a full disk, an I/O error) makes kfollower not ready
// until it recovers.
func (m *Manager) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		return false
	}
	for _, s := range m.statuses {
		if !s.Reconciled || halted(s.State) {
			return false
		}
	}
	return true
}

// halted reports a state in which a partition copies nothing until it, or
// an operator, repairs something.
func halted(state string) bool {
	switch state {
	case follower.StateStopped.String(), follower.StateStorageBackoff.String(), "failed":
		return true
	}
	return false
}
