package fetcher

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requester sends one request to one broker (or, for the first Metadata,
// to any): a *kgo.Broker or the *kgo.Client itself, or a fake in tests.
type requester interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Manager follows every partition of the selected topics. Its Run goroutine
// reads Metadata and places each partition with the worker of its leader
// broker; a partition moves between workers only by hand-off (the old
// worker hands it back to Run, Run gives it to the new one), so no
// partition state is ever shared. Run and the workers talk only through
// mailboxes, so neither ever waits for the other.
type Manager struct {
	cfg Config
	// seed answers the first Metadata (any broker); broker names one.
	seed   requester
	broker func(id int32) requester
	// start runs a new worker's goroutine; tests drive workers themselves.
	start func(ctx context.Context, w *worker)
	// openLog opens a partition's log with the options Config.Storage
	// gives (storage.Open); tests wrap the log in a failing double. Called
	// by Run and, to reopen a log after a storage failure, by workers.
	openLog func(dataDir, topic string, partition int32, opts storage.Options) (partLog, error)
	// chaseEvery is chaseInterval; tests shorten it.
	chaseEvery time.Duration
	// aroundRise, in tests, runs each of riseAll's served-epoch rises
	// (served.go), to see how many are under way at once; nil: each runs
	// as it is.
	aroundRise func(rise func())
	// flushTicker is the flusher's clock (flusher.go); nil: a
	// time.Ticker. flusherDone is closed when the flusher ends.
	flushTicker flushTicker
	flusherDone chan struct{}
	// buffers, in tests, is told of every Fetch response buffer a worker
	// takes and releases (worker.releaseHeld); nil outside tests.
	buffers bufferHook

	// Owned by Run.
	workers  map[int32]*worker             // by broker id: those leading a partition of ours
	stopping []*worker                     // retired for leading nothing; waited for at shutdown
	owned    map[int32]int                 // partitions per worker, to retire an idle one
	owner    map[wire.TopicPartition]int32 // worker holding it
	moving   map[wire.TopicPartition]*transit
	parked   map[wire.TopicPartition]*part // no leader yet, held by Run
	failed   map[wire.TopicPartition]string
	retired  map[string]bool // topics recreated under us: no longer followed
	// seen is what Metadata named of each partition: the last leader, for
	// Observer.LeaderChanged, and the highest leader epoch each broker
	// named, for follower.CheckMetadataEpochBackwards. One entry a
	// partition (not one per broker, and another for the leader): at
	// thousands of partitions, asked of every broker in turn, they were
	// a tenth of the heap.
	seen map[wire.TopicPartition]seenMeta
	// handbacks carries released partitions from the workers to Run.
	handbacks *mailbox[handback]

	refresh   chan struct{} // asks Run for early metadata; buffered 1
	metaRound int
	brokers   []int32 // from the last Metadata, asked in turn
	// preopened holds the logs placeAll opens in parallel for place to
	// take (preopen); empty outside placeAll. preopens is the opening,
	// waited for by closePreopened.
	preopened map[wire.TopicPartition]*opened
	preopens  sync.WaitGroup
	// placing is set while placeAll places partitions whose logs it is
	// still opening (preopen): the workers cut their long polls to
	// minCutWait meanwhile (worker.limits), for what they adopt waits for
	// the Fetch in the air to be answered.
	placing atomic.Bool

	mu       sync.Mutex // guards ids, statuses and loaded, read by other goroutines
	ids      map[string]wire.TopicID
	statuses map[wire.TopicPartition]Status
	loaded   bool                             // a Metadata answer has been placed
	inFlight map[wire.TopicPartition]inFlight // requests in the air (status.go)
	addrs    map[int32]string                 // brokers' addresses, for direct.go

	catalog catalog // the open logs, read-only, for a server of the copy

	// steps counts every state machine step of the partitions, for the
	// tests that pin what an idle long poll costs (part.steps).
	steps atomic.Int64
	// quiet counts the Fetch answers taken by worker.quietAgain, for the
	// same tests.
	quiet atomic.Int64
	// stagedAppended counts the bytes appended where they had been staged
	// as they were read (StagedAppended).
	stagedAppended atomic.Int64
}

// StagedAppended is how many record bytes the logs took where they had
// been written as they were read on the own Fetch connections
// (storage.Log.Stage, worker.stageSink), since New: the part of the
// appends whose copy into the page cache was made while the bytes were in
// the CPU's cache.
func (m *Manager) StagedAppended() int64 { return m.stagedAppended.Load() }

// seenMeta is what Metadata named of one partition (Manager.seen).
type seenMeta struct {
	lc     follower.LeaderChange // the last leader named, if hasLC
	hasLC  bool
	epochs []brokerEpoch
}

// brokerEpoch is the highest leader epoch a broker's Metadata named.
type brokerEpoch struct{ broker, epoch int32 }

// transit is a partition its worker was told to release and that has not
// come back to Run yet: it is placed with lc's leader when it does, or
// stopped for good when retire is set.
type transit struct {
	lc     follower.LeaderChange
	retire error
}

// New returns a Manager; Run starts it.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil {
		return nil, errors.New("fetcher: Config.Client is nil")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("fetcher: Config.DataDir is empty")
	}
	cl := cfg.Client
	return newManager(cfg, anyBroker{cl}, func(id int32) requester { return cl.Broker(int(id)) }), nil
}

// anyBroker asks the brokers the client has discovered, then its seeds, in
// turn, until one answers. Each is asked through its *kgo.Broker, never
// through the kgo.Client itself: the client keeps a deep copy of every
// Metadata answer it sends for RequestCachedMetadata, which nothing here
// reads, and at thousands of partitions that copy was a tenth of the heap
// (issue 14).
type anyBroker struct{ cl *kgo.Client }

func (a anyBroker) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	err := errors.New("no broker known")
	for _, b := range append(a.cl.DiscoveredBrokers(), a.cl.SeedBrokers()...) {
		var resp kmsg.Response
		if resp, err = b.Request(ctx, req); err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func newManager(cfg Config, seed requester, broker func(int32) requester) *Manager {
	cfg.withDefaults()
	return &Manager{
		cfg:        cfg,
		catalog:    catalog{notServed: cfg.NotServed},
		seed:       seed,
		broker:     broker,
		start:      func(ctx context.Context, w *worker) { go w.run(ctx) },
		chaseEvery: chaseInterval,
		openLog: func(dataDir, topic string, partition int32, opts storage.Options) (partLog, error) {
			return storage.Open(dataDir, topic, partition, opts)
		},
		workers:   map[int32]*worker{},
		owned:     map[int32]int{},
		owner:     map[wire.TopicPartition]int32{},
		moving:    map[wire.TopicPartition]*transit{},
		parked:    map[wire.TopicPartition]*part{},
		failed:    map[wire.TopicPartition]string{},
		retired:   map[string]bool{},
		seen:      map[wire.TopicPartition]seenMeta{},
		handbacks: newMailbox[handback](),
		refresh:   make(chan struct{}, 1),
		ids:       map[string]wire.TopicID{},
		statuses:  map[wire.TopicPartition]Status{},
	}
}

// Run follows until ctx ends, then stops the flusher and every worker,
// flushes and closes every log, and returns. Metadata errors are logged and retried, never fatal.
func (m *Manager) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer m.shutdown(cancel)
	m.startFlusher(wctx)
	t := time.NewTimer(0)
	defer t.Stop()
	ch := chase{every: m.chaseEvery}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.handbacks.ready:
			m.takeHandbacks(wctx)
			continue
		case <-t.C:
		case <-m.refresh:
		}
		changed, err := m.refreshMetadata(ctx, wctx)
		if err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("metadata refresh failed; retrying", "err", err)
		}
		next := ch.next(changed, m.cfg.MetadataInterval, len(m.brokers))
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// chase decides when Run reads Metadata next: chaseInterval after an
// answer that showed leaders moving (placeAll), again while they keep
// moving and until every broker, asked in turn (refreshMetadata), has
// answered once without a move, up to chaseMax reads in a row;
// MetadataInterval otherwise, or once the chase is spent. One quiet
// answer is not the end of a move: its broker may be behind the others
// (BenchmarkScale's shutdown move: the last partition moved after an
// answer that showed nothing new, and its old leader, no longer serving
// requests, said nothing; it was learnt 5 s later).
//
// Kafka's controller writes a move of many partitions as several batches
// of PartitionChangeRecords, which each broker applies at its own pace
// (QuorumController, BrokerMetadataPublisher), so one answer holds only
// the part of a move its broker had applied. Without a second look the
// rest waited for the old leader to say so in a Fetch answer (KIP-951),
// which at thousands of partitions, in the middle of its own take-over,
// came 1.5 s later (BenchmarkScale's elect move). librdkafka likewise
// reads Metadata again soon while a partition's leader is in doubt
// (topic.metadata.refresh.fast.interval.ms). The bound is for answers that
// never agree (brokers that name a partition differently for good: one
// far behind, or some without leader epochs): they cost chaseMax reads,
// then one every MetadataInterval, as before.
type chase struct {
	every time.Duration // chaseInterval
	n     int           // reads in a row at it
	quiet int           // answers in a row without a move, in a chase
}

const (
	chaseInterval = 200 * time.Millisecond
	chaseMax      = 20 // 4 s: a move of 10,000 partitions took Kafka 2-4 s on 2 cores
)

// next is the wait after an answer that showed a move (changed) or not,
// with brokers the brokers that answer in turn.
func (c *chase) next(changed bool, interval time.Duration, brokers int) time.Duration {
	switch {
	case changed:
		c.quiet = 0
	case c.n > 0 && c.quiet+1 < brokers:
		c.quiet++
	default:
		c.n, c.quiet = 0, 0
		return interval
	}
	if c.n >= chaseMax || interval <= c.every {
		return interval
	}
	c.n++
	return c.every
}

// requestRefresh asks Run for fresh metadata without ever blocking.
func (m *Manager) requestRefresh() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

// shutdown stops the workers and closes every log, wherever its partition
// is: with a worker, in a worker's mailbox, on its way back, or parked.
func (m *Manager) shutdown(cancel context.CancelFunc) {
	cancel()
	m.waitFlusher() // before the logs close; Close fsyncs what it left
	var parts []*part
	ws := m.stopping
	for _, w := range m.workers {
		ws = append(ws, w)
	}
	for _, w := range ws {
		<-w.done
		for _, p := range w.parts {
			parts = append(parts, p)
		}
		for _, o := range w.orders.take() {
			if o.op == opAdopt {
				parts = append(parts, o.p)
			}
		}
	}
	for _, h := range m.handbacks.take() {
		if h.p != nil {
			parts = append(parts, h.p)
		}
	}
	for _, p := range m.parked {
		parts = append(parts, p)
	}
	m.catalog.clear()
	for _, p := range parts {
		if err := p.log.Close(); err != nil {
			m.cfg.Logger.Error("closing log", "partition", p.tp.String(), "err", err)
		}
	}
}

// refreshMetadata reads every topic's leaders and places partitions; it
// reports whether the answer showed a leader move (placeAll).
func (m *Manager) refreshMetadata(ctx, wctx context.Context) (changed bool, err error) {
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
		if r, err := m.broker(id).Request(rctx, req); err == nil {
			resp, from = r.(*kmsg.MetadataResponse), id
		}
	}
	if resp == nil {
		r, err := req.RequestWith(rctx, m.seed)
		if err != nil {
			return false, fmt.Errorf("metadata: %w", err)
		}
		resp = r
	}
	return m.placeAll(wctx, resp, from), nil
}

// placeAll places every followed partition of a Metadata answer from
// broker from (-1: any broker). It reports whether any partition followed
// before was named under another leader or epoch than the last seen
// (place): a move, or a broker that has not yet applied one.
func (m *Manager) placeAll(wctx context.Context, resp *kmsg.MetadataResponse, from int32) (changed bool) {
	m.brokers = m.brokers[:0]
	m.setBrokerAddrs(resp.Brokers) // direct.go
	for _, b := range resp.Brokers {
		m.brokers = append(m.brokers, b.NodeID)
	}
	sort.Slice(m.brokers, func(i, j int) bool { return m.brokers[i] < m.brokers[j] })
	m.preopen(resp)
	defer m.closePreopened()
	if len(m.preopened) > 0 {
		m.placing.Store(true)
		defer m.placing.Store(false)
	}
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
		if t.TopicID == (wire.TopicID{}) {
			// A Fetch from v13 names a topic by id alone, and Kafka fails
			// the whole request on a zero id (UNKNOWN_SERVER_ERROR, from a
			// NullPointerException in its fetch path), so a topic is
			// followed only once Metadata names its id. Nor is a zero id
			// taken for a recreated topic.
			m.cfg.Logger.Warn("metadata names a followed topic without its topic id; waiting for one that does", "topic", topic)
			continue
		}
		old, known := m.knownID(topic)
		if known && old != t.TopicID {
			// The topic was deleted and created again under the same name:
			// its offsets start over and its data is another topic's.
			// Following on would report the new topic as loss of the old
			// one and mix the two in one log, so those partitions stop;
			// their data stays on disk for the operator.
			m.retire(topic, fmt.Errorf("topic %s was recreated (id %s, was %s); its partitions stopped, data kept in %s",
				topic, storage.TopicID(t.TopicID), storage.TopicID(old), m.cfg.DataDir))
			continue
		}
		// Known before any partition of the topic is adopted: a worker's
		// first Fetch (v13+) names the topic by id alone, and a zero id
		// is answered UNKNOWN_TOPIC_ID under an id we cannot match.
		m.mu.Lock()
		m.ids[topic] = t.TopicID
		m.mu.Unlock()
		if !known {
			m.cfg.observe().Followed(topic)
		}
		m.catalog.topic(topic, t.TopicID, len(t.Partitions))
		for _, pm := range t.Partitions {
			tp := wire.TopicPartition{Topic: topic, Partition: pm.Partition}
			leader, epoch := pm.Leader, pm.LeaderEpoch
			if kerr.ErrorForCode(pm.ErrorCode) != nil {
				leader = -1
			}
			m.checkMetadataEpoch(from, tp, epoch)
			if m.place(wctx, tp, t.TopicID, follower.LeaderChange{Leader: leader, LeaderEpoch: epoch}) {
				changed = true
			}
		}
	}
	m.mu.Lock()
	m.loaded = true
	m.mu.Unlock()
	return changed
}

// knownID is the topic id seen in earlier Metadata.
func (m *Manager) knownID(topic string) (wire.TopicID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.ids[topic]
	return id, ok
}

// retire stops every partition of topic for good: a parked one at once, one
// with a worker once the worker has handed it back.
func (m *Manager) retire(topic string, why error) {
	var owned []wire.TopicPartition
	for tp := range m.owner {
		if tp.Topic == topic {
			owned = append(owned, tp)
		}
	}
	for _, tp := range owned {
		m.release(tp, &transit{retire: why})
	}
	for tp, tr := range m.moving {
		if tp.Topic == topic {
			tr.retire = why
		}
	}
	for tp, p := range m.parked {
		if tp.Topic == topic {
			delete(m.parked, tp)
			m.stop(p, why)
		}
	}
	m.retired[topic] = true
	m.catalog.retire(topic)
	m.cfg.Logger.Error("stopped following a topic", "topic", topic, "err", why)
}

// stop stops a partition Run holds for good, closes its log and marks it
// failed.
func (m *Manager) stop(p *part, why error) {
	p.step(m.cfg.Now(), follower.Stop{})
	m.publish(p) // keep what the status says of the log we hold
	m.unserve(p.tp)
	if err := p.log.Close(); err != nil {
		m.cfg.Logger.Error("closing log", "partition", p.tp.String(), "err", err)
	}
	m.failed[p.tp] = why.Error()
	m.mu.Lock()
	st := m.statuses[p.tp]
	st.State, st.Error, st.Reconciled = "failed", why.Error(), false
	m.statuses[p.tp] = st
	m.mu.Unlock()
}

// checkMetadataEpoch reports a broker whose Metadata names a lower leader
// epoch than it named before (follower.CheckMetadataEpochBackwards). Other
// brokers may lag behind each other; one broker must not go back.
//
// This check stays here while the others come from the state machine's
// Ready.Events (and the fetched batches' from the Append that stores them):
// it compares one broker's Metadata answers over time, and only Run knows
// which broker gave an answer: a partition's state machine is handed the
// leader and epoch alone, not who named them.
func (m *Manager) checkMetadataEpoch(broker int32, tp wire.TopicPartition, epoch int32) {
	if broker < 0 || epoch < 0 {
		return
	}
	sm := m.seen[tp]
	i := slices.IndexFunc(sm.epochs, func(b brokerEpoch) bool { return b.broker == broker })
	if i >= 0 && epoch < sm.epochs[i].epoch {
		prev := sm.epochs[i].epoch
		e := &follower.ConformanceEvent{Topic: tp.Topic, Partition: tp.Partition, Check: follower.CheckMetadataEpochBackwards,
			LeaderEpoch: prev, Evidence: fmt.Sprintf("broker %d's Metadata named leader epoch %d after %d", broker, epoch, prev)}
		logConformance(&m.cfg, e)
		m.cfg.observe().Event(e)
		return
	}
	if i < 0 {
		sm.epochs = append(sm.epochs, brokerEpoch{broker: broker, epoch: epoch})
	} else if sm.epochs[i].epoch == epoch {
		return // nothing to record
	} else {
		sm.epochs[i].epoch = epoch
	}
	m.seen[tp] = sm
}

// place gives tp to its leader's worker, opening its log the first time.
// A partition held by another worker is released first and placed when it
// is back (takeHandbacks); Run does not wait for it. It reports whether lc
// is another leader or epoch than the last seen for tp, newer or older:
// a move under way (chase).
func (m *Manager) place(wctx context.Context, tp wire.TopicPartition, id wire.TopicID, lc follower.LeaderChange) (changed bool) {
	if _, bad := m.failed[tp]; bad {
		return false
	}
	sm := m.seen[tp]
	changed = sm.hasLC && sm.lc != lc
	if sm.hasLC && lc.LeaderEpoch >= 0 && lc.LeaderEpoch < sm.lc.LeaderEpoch {
		// Older than an epoch seen: Metadata from a broker that has not
		// yet applied the move (each applies the controller's records at
		// its own pace). The state machine would ignore it, but routing
		// by its leader handed the partition back to the old leader's
		// worker, where its requests waited for the next Metadata (a
		// quarter of the changes of BenchmarkScale at 10,000). The Java
		// client keeps its cached partition on such an answer too
		// (Metadata.updateLatestMetadata, KIP-320).
		return changed
	}
	if old := sm.lc; sm.hasLC && old != lc {
		m.cfg.Logger.Info("leader changed", "partition", tp.String(), "leader", lc.Leader, "leader_epoch", lc.LeaderEpoch,
			"previous_leader", old.Leader, "previous_leader_epoch", old.LeaderEpoch)
		m.cfg.observe().LeaderChanged(tp, old, lc)
	}
	if !sm.hasLC || sm.lc != lc {
		sm.lc, sm.hasLC = lc, true
		m.seen[tp] = sm
	}
	if tr, ok := m.moving[tp]; ok {
		tr.lc = lc // on its way back: placed with the latest leader
		return changed
	}
	owner, owned := m.owner[tp]
	var p *part
	switch {
	case owned && owner == lc.Leader:
		m.workers[owner].orders.post(order{op: opLeader, tp: tp, lc: lc})
		return changed
	case owned:
		m.release(tp, &transit{lc: lc})
		return changed
	case m.parked[tp] != nil:
		p = m.parked[tp]
		delete(m.parked, tp)
	default:
		var err error
		if p, err = m.open(tp, id); err != nil {
			m.setStatus(tp, Status{Topic: tp.Topic, Partition: tp.Partition, State: "failed", Error: err.Error()})
			if transientStorageError(err) {
				// A full or failing disk may recover: the next Metadata
				// tries again.
				m.cfg.Logger.Warn("cannot open the local log; retrying with the next metadata", "partition", tp.String(), "err", err)
				return changed
			}
			m.failed[tp] = err.Error()
			m.cfg.Logger.Error("cannot follow partition", "partition", tp.String(), "err", err)
			return changed
		}
	}
	m.settle(wctx, p, lc)
	return changed
}

// settle places a partition Run holds: parked while it has no leader, else
// adopted by its leader's worker, which is started if there is none.
func (m *Manager) settle(wctx context.Context, p *part, lc follower.LeaderChange) {
	if lc.Leader < 0 {
		p.step(m.cfg.Now(), lc)
		m.parked[p.tp] = p
		m.publish(p)
		return
	}
	w, ok := m.workers[lc.Leader]
	if !ok {
		m.pruneStopping()
		w = newWorker(m, lc.Leader)
		m.workers[lc.Leader] = w
		m.start(wctx, w)
	}
	w.orders.post(order{op: opAdopt, tp: p.tp, p: p, lc: lc})
	m.owner[p.tp] = lc.Leader
	m.owned[lc.Leader]++
}

// release tells tp's worker to hand it back. A worker left leading nothing
// of ours is told to stop: a broker id that leads nothing keeps no
// goroutine, ticker or request in the air.
func (m *Manager) release(tp wire.TopicPartition, tr *transit) {
	id := m.owner[tp]
	w := m.workers[id]
	w.orders.post(order{op: opRelease, tp: tp})
	delete(m.owner, tp)
	m.moving[tp] = tr
	if m.owned[id]--; m.owned[id] > 0 {
		return
	}
	delete(m.owned, id)
	delete(m.workers, id)
	w.orders.post(order{op: opQuit})
	m.stopping = append(m.stopping, w)
}

// pruneStopping forgets the retired workers that have ended.
func (m *Manager) pruneStopping() {
	live := m.stopping[:0]
	for _, w := range m.stopping {
		select {
		case <-w.done:
		default:
			live = append(live, w)
		}
	}
	clear(m.stopping[len(live):])
	m.stopping = live
}

// takeHandbacks places the partitions the workers handed back.
func (m *Manager) takeHandbacks(wctx context.Context) {
	for _, h := range m.handbacks.take() {
		tr := m.moving[h.tp]
		delete(m.moving, h.tp)
		switch {
		case h.p == nil || tr == nil:
			// Run released it, so its worker held it: a broken invariant.
			m.cfg.Logger.Error("a worker handed back a partition it was not asked for or did not hold", "partition", h.tp.String())
		case tr.retire != nil:
			m.stop(h.p, tr.retire)
		default:
			m.settle(wctx, h.p, tr.lc)
		}
	}
}

// openParallel bounds the logs opened at once by preopen: a new log's
// directory and segment fsyncs, or an existing one's recovery, take tens
// of milliseconds, mostly waiting on the disk, so thousands opened one at
// a time took a minute at start-up.
const openParallel = 16

// opened is a log preopen opened, or why it could not, once done is
// closed.
type opened struct {
	l    partLog
	err  error
	done chan struct{}
}

// preopen starts opening, in parallel (at most openParallel at once), the
// logs of the partitions of resp that place will open: followed, not yet
// held, not failed, their topic named with an id. place takes them from
// m.preopened in its own order, each once it is open, so what happens to
// each partition (and what is logged and observed) is as if it had been
// opened there.
func (m *Manager) preopen(resp *kmsg.MetadataResponse) {
	type job struct {
		tp wire.TopicPartition
		id wire.TopicID
	}
	var jobs []job
	for _, t := range resp.Topics {
		if t.Topic == nil || !m.cfg.Follow(*t.Topic) || t.ErrorCode != 0 || m.retired[*t.Topic] || t.TopicID == (wire.TopicID{}) {
			continue
		}
		if old, known := m.knownID(*t.Topic); known && old != t.TopicID {
			continue // recreated: placeAll retires it
		}
		for _, pm := range t.Partitions {
			tp := wire.TopicPartition{Topic: *t.Topic, Partition: pm.Partition}
			_, bad := m.failed[tp]
			_, owned := m.owner[tp]
			_, moving := m.moving[tp]
			if bad || owned || moving || m.parked[tp] != nil {
				continue
			}
			jobs = append(jobs, job{tp, t.TopicID})
		}
	}
	if len(jobs) < 2 {
		return // opened in place, as ever
	}
	// place takes each log as soon as it is open, in its own order, and
	// does not wait for the others: the first partitions are fetching
	// while the last ones open (at thousands of partitions the opens take
	// seconds, and the first appends as many again). The opens start in
	// place's order; closePreopened waits for every one.
	m.preopened = make(map[wire.TopicPartition]*opened, len(jobs))
	slots := make([]*opened, 0, len(jobs))
	unique := jobs[:0]
	for _, j := range jobs {
		if m.preopened[j.tp] != nil {
			continue // named twice: opened once
		}
		o := &opened{done: make(chan struct{})}
		m.preopened[j.tp] = o
		slots, unique = append(slots, o), append(unique, j)
	}
	m.preopens.Add(1)
	go func() {
		defer m.preopens.Done()
		sem := make(chan struct{}, openParallel)
		for i, j := range unique {
			sem <- struct{}{}
			m.preopens.Add(1)
			go func() {
				defer func() { <-sem; m.preopens.Done() }()
				o := slots[i]
				o.l, o.err = m.openPartLog(j.tp, j.id)
				close(o.done)
			}()
		}
	}()
}

// closePreopened closes the preopened logs place did not take (a Metadata
// answer naming a partition twice, or a rule of place's that preopen does
// not repeat), so none is left open unowned.
func (m *Manager) closePreopened() {
	m.preopens.Wait()
	for tp, o := range m.preopened {
		if o.err == nil {
			if err := o.l.Close(); err != nil {
				m.cfg.Logger.Error("closing log", "partition", tp.String(), "err", err)
			}
		}
	}
	m.preopened = nil
}

func (m *Manager) open(tp wire.TopicPartition, id wire.TopicID) (*part, error) {
	var l partLog
	var err error
	if o, ok := m.preopened[tp]; ok {
		delete(m.preopened, tp)
		<-o.done
		l, err = o.l, o.err
	} else {
		l, err = m.openPartLog(tp, id)
	}
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(tp.String()))
	p := &part{tp: tp, log: l, steps: &m.steps, staged: &m.stagedAppended, unsettled: true}
	p.sm = follower.NewPartition(follower.Config{
		Topic: tp.Topic, Partition: tp.Partition,
		DiscardOnGap: m.cfg.DiscardOnGap, Backoff: m.cfg.Backoff, JitterSeed: h.Sum64(),
	}, liveLog{p})
	m.cfg.Logger.Info("following partition", "partition", tp.String(),
		"log_start", l.LogStartOffset(), "log_end", l.LogEndOffset())
	m.catalog.add(tp, l)
	// Before anything else happens to the log: the losses a crash left
	// unreported (lost.go).
	p.settleLosses(&m.cfg)
	return p, nil
}

func (m *Manager) openPartLog(tp wire.TopicPartition, id wire.TopicID) (partLog, error) {
	opts := m.cfg.Storage
	opts.TopicID = storage.TopicID(id)
	// storage names the topic and partition in its own lines (a logger
	// With them per log: another one here was a tenth of a partition's
	// heap, and named the partition twice).
	opts.Logger = m.cfg.Logger
	l, err := m.openLog(m.cfg.DataDir, tp.Topic, tp.Partition, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the local log of %s: %w", tp, err)
	}
	return m.serve(tp, l)
}

// reopen closes p's log and opens it again, after a storage failure: the
// log refuses every call after a failed write or fsync, and Open's
// recovery repairs what the failure left (a torn tail, an unfinished
// truncation; storage/doc.go). If Open fails, p keeps the closed log,
// whose offsets still answer for status. It runs on p's owner.
func (m *Manager) reopen(p *part) error {
	if err := p.log.Close(); err != nil {
		m.cfg.Logger.Debug("closing a failed log", "partition", p.tp.String(), "err", err)
	}
	// The topic's id is the one the log was opened with: Metadata naming
	// another retires the topic instead of recording it (placeAll).
	id, _ := m.knownID(p.tp.Topic)
	l, err := m.openPartLog(p.tp, id)
	if err != nil {
		return err
	}
	p.log, p.unsettled = l, true
	m.catalog.add(p.tp, l)
	m.cfg.Logger.Info("reopened the local log after a storage failure", "partition", p.tp.String(),
		"log_start", l.LogStartOffset(), "log_end", l.LogEndOffset())
	return nil
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
