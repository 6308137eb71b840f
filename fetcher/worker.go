package fetcher

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// worker is the one goroutine that talks to one leader broker. It owns the
// partitions that broker leads (their state machines and their logs), and
// batches their requests: one OffsetsForLeaderEpoch, ListOffsets or Fetch
// request at a time for all of them, as Kafka's replica fetcher thread does.
type worker struct {
	id     int32
	broker requester
	m      *Manager
	orders *mailbox[order] // from the Manager only, carried out in order

	parts map[wire.TopicPartition]*part // owned by run
	// rank orders the partitions in a Fetch, lowest first: a partition
	// that got records is given the next rank, moving it to the end
	// (fairness: a broker fills its response in request order).
	rank     map[wire.TopicPartition]uint64
	nextRank uint64

	flight  *flight      // the request in the air, nil if none
	flights chan *flight // its completion; buffered so the sender never blocks
	done    chan struct{}

	// session is the KIP-227 fetch session with this broker: every Fetch
	// is built by it, and its answer or failure is given back to it.
	session *wire.FetchSession
}

// order is what the Manager tells a worker.
type order struct {
	op op
	tp wire.TopicPartition
	p  *part                 // opAdopt
	lc follower.LeaderChange // opAdopt, opLeader
}

type op uint8

const (
	opAdopt   op = iota + 1 // take p over and step lc into it
	opLeader                // step lc into tp: new metadata for a partition it holds
	opRelease               // hand tp back to the Manager (Manager.handbacks)
	opQuit                  // the broker leads nothing of ours: stop
)

// handback is a partition a worker released, on its way back to Run; p is
// nil if the worker did not hold it.
type handback struct {
	tp wire.TopicPartition
	p  *part
}

// flight is one batched request and, once back, its response. Only one of
// epochQs, lists and fetches is set, as key says.
type flight struct {
	key      kmsg.Key                       // kmsg.OffsetForLeaderEpoch, kmsg.ListOffsets or kmsg.Fetch
	reqIDs   map[wire.TopicPartition]uint64 // each partition's request id, for its reply
	epochQs  map[wire.TopicPartition]wire.EpochQuery
	lists    map[wire.TopicPartition]wire.ListOffsetsQuery
	fetches  map[wire.TopicPartition]wire.FetchPartition
	order    []wire.TopicPartition   // the fetches' order in the request
	topicIDs map[string]wire.TopicID // the fetch's, to read a v13+ answer
	session  wire.SessionFetch       // how the fetch used the session
	sent     time.Time
	resp     kmsg.Response
	resp2    kmsg.Response // ListOffsets: the LATEST half
	err      error
}

// idFor returns the id of tp's request in f, if f carries one.
func (f *flight) idFor(tp wire.TopicPartition) (uint64, bool) {
	if f == nil {
		return 0, false
	}
	id, ok := f.reqIDs[tp]
	return id, ok
}

func newWorker(m *Manager, id int32) *worker {
	return &worker{
		id: id, m: m, broker: m.broker(id),
		orders:  newMailbox[order](),
		parts:   map[wire.TopicPartition]*part{},
		rank:    map[wire.TopicPartition]uint64{},
		session: wire.NewFetchSession(!m.cfg.NoFetchSessions),
		flights: make(chan *flight, 1),
		done:    make(chan struct{}),
	}
}

// run is the worker's loop; it ends with ctx or an opQuit, after its
// request in the air (which uses its ctx) has come back. The Manager closes
// the logs after ctx ends.
func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wake *time.Timer
	var maintC <-chan time.Time
	if d := w.m.cfg.MaintenanceInterval; d > 0 {
		tick := time.NewTicker(d)
		defer tick.Stop()
		maintC = tick.C
	}
	for {
		now := w.m.cfg.Now()
		w.processAll(now)
		if w.flight == nil {
			w.send(ctx)
		}
		var wakeC <-chan time.Time
		if at, ok := w.nextWake(); ok {
			d := max(at.Sub(now), 0)
			if wake == nil {
				wake = time.NewTimer(d)
			} else {
				wake.Reset(d)
			}
			wakeC = wake.C
		}
		select {
		case <-ctx.Done():
			w.land()
			return
		case <-w.orders.ready:
			if w.handleAll(now) {
				cancel() // what is in the air is nobody's now
				w.land()
				return
			}
		case f := <-w.flights:
			w.flight = nil
			w.m.clearInFlight(w.id, f.reqIDs)
			w.receive(f)
		case <-maintC:
			w.maintain()
		case <-wakeC:
			w.tick(w.m.cfg.Now())
		}
		if wake != nil && !wake.Stop() {
			select {
			case <-wake.C:
			default:
			}
		}
	}
}

// land waits for the request in the air, if any, and drops its answer.
func (w *worker) land() {
	if w.flight != nil {
		<-w.flights
		w.m.clearInFlight(w.id, w.flight.reqIDs)
		w.session.Failed(w.flight.session) // its answer is dropped
		w.flight = nil
	}
}

// tick steps Tick into every partition, for those whose backoff is over.
func (w *worker) tick(now time.Time) {
	for _, p := range w.parts {
		p.tick(w.m, now)
	}
}

// handleAll carries out the orders posted since last time; it reports an
// opQuit.
func (w *worker) handleAll(now time.Time) (quit bool) {
	for _, o := range w.orders.take() {
		if w.handle(o, now) {
			quit = true
		}
	}
	return quit
}

func (w *worker) handle(o order, now time.Time) (quit bool) {
	switch o.op {
	case opAdopt:
		w.parts[o.tp] = o.p
		w.toEnd(o.tp)
		o.p.step(now, o.lc)
	case opLeader:
		if p, ok := w.parts[o.tp]; ok {
			p.step(now, o.lc)
		}
	case opRelease:
		p := w.parts[o.tp]
		delete(w.parts, o.tp)
		delete(w.rank, o.tp)
		if p != nil {
			// A request of its still in the air is given up, so its state
			// machine does not wait for a reply this worker will drop.
			if id, ok := w.flight.idFor(o.tp); ok {
				p.step(now, follower.RequestFailed{ID: id, Err: fmt.Errorf("%s moved away from broker %d", o.tp, w.id)})
				w.m.clearInFlight(w.id, map[wire.TopicPartition]uint64{o.tp: id})
			}
			// A request not yet sent travels with the partition: it may
			// be addressed to the new leader already (a KIP-951 hint got
			// here before the metadata did).
			w.m.publish(p)
		}
		w.m.handbacks.post(handback{tp: o.tp, p: p})
	case opQuit:
		return true
	}
	return false
}

// processAll carries out every partition's Ready and publishes status.
func (w *worker) processAll(now time.Time) {
	var refresh bool
	for _, p := range w.parts {
		b, r, rf := p.process(&w.m.cfg, now)
		refresh = refresh || rf
		if b > 0 {
			w.m.cfg.observe().Appended(w.id, p.tp, b, r)
		}
		w.m.publish(p)
	}
	if refresh {
		w.m.requestRefresh()
	}
}

func (w *worker) nextWake() (time.Time, bool) {
	var at time.Time
	for _, p := range w.parts {
		if t := p.sm.NextWake(); !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at, !at.IsZero()
}

// send starts the next batched request: epoch queries first (reconciliation
// comes before any fetch from a new leader, KIP-101), then ListOffsets, then
// fetches. Requests addressed to another broker wait for the hand-off that
// metadata will bring.
func (w *worker) send(ctx context.Context) {
	var (
		epochs  map[wire.TopicPartition]*follower.OffsetsForLeaderEpoch
		lists   map[wire.TopicPartition]*follower.ListOffsets
		fetches map[wire.TopicPartition]*follower.Fetch
	)
	for tp, p := range w.parts {
		switch r := p.pending.(type) {
		case *follower.OffsetsForLeaderEpoch:
			if r.Leader == w.id {
				addTo(&epochs, tp, r)
			}
		case *follower.ListOffsets:
			if r.Leader == w.id {
				addTo(&lists, tp, r)
			}
		case *follower.Fetch:
			if r.Leader == w.id {
				addTo(&fetches, tp, r)
			}
		}
	}
	var ids map[string]wire.TopicID
	if len(epochs) == 0 && len(lists) == 0 && len(fetches) > 0 {
		ids = w.m.topicIDs()
		if withoutID(fetches, ids) {
			w.m.requestRefresh()
		}
	}
	f := &flight{}
	var reqs []kmsg.Request
	switch {
	case len(epochs) > 0:
		f.key, f.reqIDs, f.epochQs = kmsg.OffsetForLeaderEpoch, requestIDs(epochs), epochQueries(epochs)
		reqs = []kmsg.Request{wire.OffsetsForLeaderEpochRequest(f.epochQs)}
	case len(lists) > 0:
		f.key, f.reqIDs, f.lists = kmsg.ListOffsets, requestIDs(lists), listQueries(lists)
		earliest, latest := wire.ListOffsetsRequests(f.lists)
		reqs = []kmsg.Request{earliest, latest}
	case len(fetches) > 0:
		f.key, f.reqIDs, f.fetches = kmsg.Fetch, requestIDs(fetches), fetchPartitions(fetches)
		f.topicIDs, f.order = ids, w.fetchOrder(fetches)
		req, sf := w.session.Request(f.order, f.fetches, f.topicIDs, w.m.cfg.Limits)
		f.session, reqs = sf, []kmsg.Request{req}
	default:
		return
	}
	for tp := range f.reqIDs {
		w.parts[tp].pending = nil // sent
	}
	f.sent = w.m.cfg.Now()
	w.flight = f
	w.m.setInFlight(w.id, APIName(f.key), f.sent, f.reqIDs)
	// The request goroutine is owned by this worker: run waits for it
	// before returning, and it ends with ctx.
	go func() {
		f.resp, f.err = w.broker.Request(ctx, reqs[0])
		if f.err == nil && len(reqs) > 1 {
			f.resp2, f.err = w.broker.Request(ctx, reqs[1])
		}
		w.flights <- f
	}()
}

// withoutID removes from fetches the partitions of a topic with no known
// id and reports whether there were any: they stay pending until Metadata
// names the id. A Fetch from v13 names topics by id alone, and Kafka
// fails the whole request on a zero id (Manager.placeAll).
func withoutID(fetches map[wire.TopicPartition]*follower.Fetch, ids map[string]wire.TopicID) bool {
	var held bool
	for tp := range fetches {
		if ids[tp.Topic] == (wire.TopicID{}) {
			delete(fetches, tp)
			held = true
		}
	}
	return held
}

// toEnd moves tp to the end of the fetch order.
func (w *worker) toEnd(tp wire.TopicPartition) {
	w.rank[tp] = w.nextRank
	w.nextRank++
}

// fetchOrder is the order of a Fetch's partitions: by rank, so those that
// got records last come last, as Kafka's replica fetcher orders its
// partitions (AbstractFetcherThread's partitionStates.updateAndMoveToEnd).
func (w *worker) fetchOrder(fetches map[wire.TopicPartition]*follower.Fetch) []wire.TopicPartition {
	order := make([]wire.TopicPartition, 0, len(fetches))
	for tp := range fetches {
		order = append(order, tp)
	}
	slices.SortFunc(order, func(a, b wire.TopicPartition) int { return cmp.Compare(w.rank[a], w.rank[b]) })
	return order
}

// addTo adds k: v to *m, making the map on first use.
func addTo[V any](m *map[wire.TopicPartition]V, k wire.TopicPartition, v V) {
	if *m == nil {
		*m = map[wire.TopicPartition]V{}
	}
	(*m)[k] = v
}

// receive feeds a response back into the partitions that are still here.
func (w *worker) receive(f *flight) {
	now := w.m.cfg.Now()
	cfg := &w.m.cfg
	stats := RequestStats{Broker: w.id, Key: f.key, Partitions: len(f.reqIDs), Named: len(f.reqIDs), Latency: now.Sub(f.sent), Err: f.err}
	defer func() { cfg.observe().RequestDone(stats) }()
	step := func(tp wire.TopicPartition, msg follower.Msg) {
		p, ok := w.parts[tp]
		if !ok || !p.step(now, msg) {
			// Handed off while the request was in the air, or no longer
			// the request in flight (follower.ErrStale): dropped, counted.
			stats.Stale++
		}
	}
	fail := func(tp wire.TopicPartition, err error) {
		step(tp, follower.RequestFailed{ID: f.reqIDs[tp], Err: err})
	}
	if f.err != nil {
		cfg.Logger.Debug("request failed", "broker", w.id, "api", f.key.Name(), "err", f.err)
		if f.key == kmsg.Fetch {
			w.session.Failed(f.session)
		}
		for tp := range f.reqIDs {
			fail(tp, f.err)
		}
		return
	}
	missing := func(tps []wire.TopicPartition) {
		for _, tp := range tps {
			fail(tp, fmt.Errorf("broker %d left %s out of its %s response", w.id, tp, f.key.Name()))
		}
	}
	switch f.key {
	case kmsg.OffsetForLeaderEpoch:
		answers, miss := wire.OffsetsForLeaderEpochReplies(f.resp.(*kmsg.OffsetForLeaderEpochResponse), f.epochQs)
		stats.Results = map[string]int{}
		for tp, a := range answers {
			r := epochReply(f.reqIDs[tp], a)
			stats.Results[epochResult(r)]++
			step(tp, r)
		}
		missing(miss)
	case kmsg.ListOffsets:
		answers, miss := wire.ListOffsetsReplies(f.resp.(*kmsg.ListOffsetsResponse), f.resp2.(*kmsg.ListOffsetsResponse), f.lists)
		for tp, a := range answers {
			step(tp, offsetsReply(f.reqIDs[tp], a))
		}
		missing(miss)
	case kmsg.Fetch:
		// A partition an incremental response left out is answered from
		// the session (nothing new), not missing.
		answers, miss := w.session.Replies(f.resp.(*kmsg.FetchResponse), f.session, f.fetches, f.topicIDs)
		stats.Incremental, stats.Named = f.session.Incremental(), f.session.Named()
		for _, a := range answers {
			stats.FetchedBytes += int64(len(a.Records) + a.Batches.Tail)
			stats.FetchedRecords += a.Batches.Records
			if a.ErrorCode != 0 {
				if stats.Results == nil {
					stats.Results = map[string]int{}
				}
				stats.Results[wire.ErrorName(a.ErrorCode)]++
			}
		}
		for _, tp := range f.order {
			a, ok := answers[tp]
			if !ok {
				continue
			}
			if len(a.Records) > 0 {
				if _, held := w.parts[tp]; held {
					w.toEnd(tp) // served: the others come first next time
				}
			}
			if a.Leader != nil {
				// KIP-951: the broker names the leader it knows of; a
				// higher epoch than ours starts reconciliation with it.
				if p, ok := w.parts[tp]; ok {
					p.step(now, leaderHint(*a.Leader))
				}
				if a.Leader.Leader != w.id {
					w.m.requestRefresh()
				}
			}
			r := fetchReply(f.reqIDs[tp], a)
			if p, ok := w.parts[tp]; ok {
				p.fetched = fetchedBatches{id: r.ID, Batches: a.Batches} // for the Append r may lead to
			}
			step(tp, r)
		}
		missing(miss)
	}
}
