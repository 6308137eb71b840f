package fetcher

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"time"
)

// Manager follows every partition of the selected topics. Its Run goroutine
// reads Metadata and places each partition with the worker of its leader
// broker; a partition moves between workers only by hand-off (release, then
// adopt), so no partition state is ever shared.
type Manager struct {
	cfg Config

	// Owned by Run.
	workers map[int32]*worker
	owner   map[wire.TopicPartition]int32 // worker holding it; absent: parked
	parked  map[wire.TopicPartition]*part // no leader yet, held by Run
	failed  map[wire.TopicPartition]string
	retired map[string]bool                               // topics recreated under us: no longer followed
	seen    map[wire.TopicPartition]follower.LeaderChange // last leader metadata named, for OnLeaderChange

	refresh chan struct{} // asks Run for early metadata; buffered 1
	// metaEpochs is the highest leader epoch each broker's Metadata named
	// per partition, for follower.CheckMetadataEpochBackwards. Owned by Run.
	metaEpochs map[int32]map[wire.TopicPartition]int32
	metaRound  int
	brokers    []int32 // from the last Metadata, asked in turn

	mu       sync.Mutex // guards ids, statuses and metaLoaded, read by other goroutines
	ids      map[string]wire.TopicID
	statuses map[wire.TopicPartition]Status
	loaded   bool
}

// New returns a Manager; Run starts it.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil {
		return nil, errors.New("fetcher: Config.Client is nil")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("fetcher: Config.DataDir is empty")
	}
	cfg.withDefaults()
	return &Manager{
		cfg:        cfg,
		workers:    map[int32]*worker{},
		owner:      map[wire.TopicPartition]int32{},
		parked:     map[wire.TopicPartition]*part{},
		failed:     map[wire.TopicPartition]string{},
		retired:    map[string]bool{},
		seen:       map[wire.TopicPartition]follower.LeaderChange{},
		refresh:    make(chan struct{}, 1),
		metaEpochs: map[int32]map[wire.TopicPartition]int32{},
		ids:        map[string]wire.TopicID{},
		statuses:   map[wire.TopicPartition]Status{},
	}, nil
}

// Run follows until ctx ends, then stops every worker, flushes and closes
// every log, and returns. Metadata errors are logged and retried, never fatal.
func (m *Manager) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer m.shutdown(cancel)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.refresh:
		}
		if err := m.refreshMetadata(ctx, wctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("metadata refresh failed; retrying", "err", err)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(m.cfg.MetadataInterval)
	}
}

// requestRefresh asks Run for fresh metadata without ever blocking.
func (m *Manager) requestRefresh() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

func (m *Manager) shutdown(cancel context.CancelFunc) {
	cancel()
	var logs []*part
	for _, w := range m.workers {
		<-w.done
		for _, p := range w.parts {
			logs = append(logs, p)
		}
	}
	for _, p := range m.parked {
		logs = append(logs, p)
	}
	for _, p := range logs {
		if err := p.log.Close(); err != nil {
			m.cfg.Logger.Error("closing log", "partition", p.tp.String(), "err", err)
		}
	}
}

// refreshMetadata reads every topic's leaders and places partitions.
func (m *Manager) refreshMetadata(ctx, wctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all topics, so a topic created later and selected by Follow is picked up
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// Ask the known brokers in turn, so each one's answers can be checked
	// against its own earlier ones; before any is known, any broker.
	from := int32(-1)
	var resp *kmsg.MetadataResponse
	if len(m.brokers) > 0 {
		id := m.brokers[m.metaRound%len(m.brokers)]
		m.metaRound++
		if r, err := m.cfg.Client.Broker(int(id)).Request(rctx, req); err == nil {
			resp, from = r.(*kmsg.MetadataResponse), id
		}
	}
	if resp == nil {
		r, err := req.RequestWith(rctx, m.cfg.Client)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		resp = r
	}
	m.brokers = m.brokers[:0]
	for _, b := range resp.Brokers {
		m.brokers = append(m.brokers, b.NodeID)
	}
	sort.Slice(m.brokers, func(i, j int) bool { return m.brokers[i] < m.brokers[j] })
	ids := map[string]wire.TopicID{}
	for _, t := range resp.Topics {
		if t.Topic == nil || !m.cfg.Follow(*t.Topic) {
			continue
		}
		topic := *t.Topic
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			m.cfg.Logger.Warn("metadata names an error for a followed topic", "topic", topic, "err", err)
			continue
		}
		if m.retired[topic] {
			continue
		}
		if old, ok := m.knownID(topic); ok && old != t.TopicID {
			// The topic was deleted and created again under the same name:
			// its offsets start over and its data is another topic's.
			// Following on would report the new topic as loss of the old
			// one and mix the two in one log, so those partitions stop;
			// their data stays on disk for the operator.
			m.retire(wctx, topic, fmt.Errorf("topic %s was recreated (id %s, was %s); its partitions stopped, data kept in %s",
				topic, storage.TopicID(t.TopicID), storage.TopicID(old), m.cfg.DataDir))
			continue
		}
		ids[topic] = t.TopicID
		for _, pm := range t.Partitions {
			tp := wire.TopicPartition{Topic: topic, Partition: pm.Partition}
			leader, epoch := pm.Leader, pm.LeaderEpoch
			if kerr.ErrorForCode(pm.ErrorCode) != nil {
				leader = -1
			}
			m.checkMetadataEpoch(from, tp, epoch)
			m.place(wctx, tp, t.TopicID, follower.LeaderChange{Leader: leader, LeaderEpoch: epoch})
		}
	}
	m.mu.Lock()
	for k, v := range ids {
		m.ids[k] = v
	}
	m.loaded = true
	m.mu.Unlock()
	return nil
}

// knownID is the topic id seen in earlier Metadata.
func (m *Manager) knownID(topic string) (wire.TopicID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.ids[topic]
	return id, ok
}

// retire stops every partition of topic for good: each is taken back from
// its worker (or the parked set), stopped, closed and marked failed.
func (m *Manager) retire(wctx context.Context, topic string, why error) {
	var tps []wire.TopicPartition
	for tp := range m.owner {
		if tp.Topic == topic {
			tps = append(tps, tp)
		}
	}
	for tp := range m.parked {
		if tp.Topic == topic {
			tps = append(tps, tp)
		}
	}
	for _, tp := range tps {
		var p *part
		if owner, ok := m.owner[tp]; ok {
			reply := make(chan *part, 1)
			if !m.send(wctx, m.workers[owner], release{tp, reply}) {
				return
			}
			p = <-reply
			delete(m.owner, tp)
		} else {
			p = m.parked[tp]
			delete(m.parked, tp)
		}
		if p == nil {
			continue
		}
		_ = p.sm.Step(m.cfg.Now(), follower.Stop{})
		m.publish(p) // keep what the status says of the log we hold
		if err := p.log.Close(); err != nil {
			m.cfg.Logger.Error("closing log", "partition", tp.String(), "err", err)
		}
		m.failed[tp] = why.Error()
		m.mu.Lock()
		st := m.statuses[tp]
		st.State, st.Error, st.Reconciled = "failed", why.Error(), false
		m.statuses[tp] = st
		m.mu.Unlock()
	}
	m.retired[topic] = true
	m.cfg.Logger.Error("stopped following a topic", "topic", topic, "err", why)
}

// checkMetadataEpoch reports a broker whose Metadata names a lower leader
// epoch than it named before (follower.CheckMetadataEpochBackwards). Other
// brokers may lag behind each other; one broker must not go back.
func (m *Manager) checkMetadataEpoch(broker int32, tp wire.TopicPartition, epoch int32) {
	if broker < 0 || epoch < 0 {
		return
	}
	seen := m.metaEpochs[broker]
	if seen == nil {
		seen = map[wire.TopicPartition]int32{}
		m.metaEpochs[broker] = seen
	}
	if prev, ok := seen[tp]; ok && epoch < prev {
		e := &follower.ConformanceEvent{Topic: tp.Topic, Partition: tp.Partition, Check: follower.CheckMetadataEpochBackwards,
			LeaderEpoch: prev, Evidence: fmt.Sprintf("broker %d's Metadata named leader epoch %d after %d", broker, epoch, prev)}
		logConformance(&m.cfg, e)
		m.cfg.OnEvent(e)
		return
	}
	seen[tp] = epoch
}

// place gives tp to its leader's worker, opening its log the first time.
func (m *Manager) place(wctx context.Context, tp wire.TopicPartition, id wire.TopicID, lc follower.LeaderChange) {
	if _, bad := m.failed[tp]; bad {
		return
	}
	if old, ok := m.seen[tp]; ok && old != lc {
		m.cfg.OnLeaderChange(tp, old, lc)
	}
	m.seen[tp] = lc
	owner, owned := m.owner[tp]
	var p *part
	switch {
	case owned && owner == lc.Leader:
		m.send(wctx, m.workers[owner], leaderChange{tp, lc})
		return
	case owned:
		reply := make(chan *part, 1)
		if !m.send(wctx, m.workers[owner], release{tp, reply}) {
			return
		}
		p = <-reply // the worker answers a release at once
		delete(m.owner, tp)
	case m.parked[tp] != nil:
		p = m.parked[tp]
		delete(m.parked, tp)
	default:
		var err error
		if p, err = m.open(tp, id); err != nil {
			m.failed[tp] = err.Error()
			m.cfg.Logger.Error("cannot follow partition", "partition", tp.String(), "err", err)
			m.setStatus(tp, Status{Topic: tp.Topic, Partition: tp.Partition, State: "failed", Error: err.Error()})
			return
		}
	}
	if lc.Leader < 0 {
		_ = p.sm.Step(m.cfg.Now(), lc)
		m.parked[tp] = p
		m.publish(p)
		return
	}
	w, ok := m.workers[lc.Leader]
	if !ok {
		w = newWorker(m, lc.Leader)
		m.workers[lc.Leader] = w
		go w.run(wctx)
	}
	if !m.send(wctx, w, adopt{p, lc}) {
		m.parked[tp] = p // shutting down: closed with the parked ones
		return
	}
	m.owner[tp] = lc.Leader
}

// send hands msg to w unless the workers are shutting down.
func (m *Manager) send(wctx context.Context, w *worker, msg any) bool {
	select {
	case w.in <- msg:
		return true
	case <-wctx.Done():
		return false
	}
}

func (m *Manager) open(tp wire.TopicPartition, id wire.TopicID) (*part, error) {
	opts := m.cfg.Storage
	opts.TopicID = storage.TopicID(id)
	opts.Logger = m.cfg.Logger.With("partition", tp.String())
	l, err := storage.Open(m.cfg.DataDir, tp.Topic, tp.Partition, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the local log of %s: %w", tp, err)
	}
	h := fnv.New64a()
	h.Write([]byte(tp.String()))
	sm := follower.NewPartition(follower.Config{
		Topic: tp.Topic, Partition: tp.Partition,
		DiscardOnGap: m.cfg.DiscardOnGap, Backoff: m.cfg.Backoff, JitterSeed: h.Sum64(),
	}, l)
	m.cfg.Logger.Info("following partition", "partition", tp.String(),
		"log_start", l.LogStartOffset(), "log_end", l.LogEndOffset())
	return &part{tp: tp, sm: sm, log: l, flushedEnd: l.LogEndOffset()}, nil
}

func (m *Manager) topicIDs() map[string]wire.TopicID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]wire.TopicID, len(m.ids))
	for k, v := range m.ids {
		out[k] = v
	}
	return out
}

// Status is one partition's state for /status and metrics.
type Status struct {
	Topic                string                    `json:"topic"`
	Partition            int32                     `json:"partition"`
	State                string                    `json:"state"`
	Leader               int32                     `json:"leader"`
	LeaderEpoch          int32                     `json:"leader_epoch"`
	LocalEpoch           int32                     `json:"local_epoch"`
	LogStartOffset       int64                     `json:"log_start_offset"`
	LogEndOffset         int64                     `json:"log_end_offset"`
	HighWatermark        int64                     `json:"high_watermark"`
	Lag                  int64                     `json:"lag"`
	Reconciled           bool                      `json:"reconciled"`
	Error                string                    `json:"error,omitempty"`
	LastTruncation       *follower.TruncationEvent `json:"last_truncation,omitempty"`
	LeaderLogStartOffset int64                     `json:"leader_log_start_offset"`
	SizeBytes            int64                     `json:"size_bytes"` // the local log's segment bytes
	Segments             int                       `json:"segments"`
}

// publish records p's status; called by p's owner.
func (m *Manager) publish(p *part) {
	st := p.sm.Status()
	s := Status{
		Topic: p.tp.Topic, Partition: p.tp.Partition, State: st.State.String(),
		Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, LocalEpoch: -1,
		LogStartOffset: p.log.LogStartOffset(), LogEndOffset: p.log.LogEndOffset(),
		HighWatermark: st.HighWatermark, Reconciled: p.reconciled,
		LastTruncation: p.lastTruncation, LeaderLogStartOffset: st.LeaderLogStartOffset,
		SizeBytes: p.log.Size(), Segments: len(p.log.Segments()),
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
	m.setStatus(p.tp, s)
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
	for _, s := range m.statuses {
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
// has been reconciled with its leader at least once.
func (m *Manager) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		return false
	}
	for _, s := range m.statuses {
		if !s.Reconciled {
			return false
		}
	}
	return true
}
