package fetcher

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// worker is the one goroutine that talks to one leader broker. It owns the
// partitions that broker leads (their state machines and their logs), and
// batches their requests, as Kafka's replica fetcher thread does: one Fetch
// at a time for all of them and, beside it, one OffsetsForLeaderEpoch or
// ListOffsets at a time (worker.side).
//
// Fetches are pipelined: when a Fetch response lands, the next Fetch goes
// out before its batches are appended (sendAhead), asking each partition
// that got a plain answer for what follows it, so that the network and the
// disk overlap. The state machines are not told: once the appends are done
// and each has decided its own next Fetch, a partition whose Fetch is the
// one already in the air is bound to it (bindAhead) and the answer is
// stepped with its id; any other partition's part of that answer is
// dropped. So a reply is only ever stepped for the position its state
// machine asked for, and at most two Fetch responses per broker are in
// memory: the one being appended and the one in the air (beside them, an
// epoch query's or ListOffsets' answer, worker.side). With Config.DirectFetch
// the Fetches go on a connection of the worker's own (direct.go), whose
// response buffers the worker releases once their records are appended
// (worker.held).
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

	flight *flight // the Fetch in the air, nil if none; never more than one
	// side is the OffsetsForLeaderEpoch or ListOffsets in the air beside
	// the Fetch, nil if none. Kafka's replica fetcher thread sends them in
	// turn, so a partition a broker takes over waits for the long poll in
	// the air before its epoch query goes out, and again at every round of
	// the walk (KIP-279): at 10,000 partitions most of kfollower's own
	// share of a leader move was spent so (BenchmarkScale, issue 14). A
	// partition's own requests stay one at a time (its state machine hands
	// out one), so KIP-101's order, reconcile before fetching from a new
	// leader, holds per partition; only different partitions' requests go
	// side by side. franz-go sends them on another connection than Fetch
	// (kgo's cxnNormal against cxnFetch, or the direct Fetch connection),
	// so the broker answers them while the Fetch waits.
	side    *flight
	flights chan *flight // completions of both; buffered so a sender never blocks
	done    chan struct{}

	// session is the KIP-227 fetch session with this broker: every Fetch
	// is built by it, and its answer or failure is given back to it.
	session *wire.FetchSession

	// direct is the Fetch path of Config.DirectFetch (direct.go), nil
	// without it: every request then goes through broker.
	direct *directFetch
	// held are the buffers of the Fetch responses that landed on the
	// direct connection and whose records the state machines may still
	// hand out in an Append: the run loop releases them once processAll
	// has carried out every Ready (releaseHeld), so a buffer goes back to
	// the connection, to be read into again, only after the records that
	// point into it were appended or dropped. At most one: the response
	// in the air has its own buffer until it lands.
	held []*wire.FetchBuffer
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
// epochQs, lists and fetches is set, as key says: a Fetch is w.flight, the
// others w.side.
type flight struct {
	key      kmsg.Key                       // kmsg.OffsetForLeaderEpoch, kmsg.ListOffsets or kmsg.Fetch
	reqIDs   map[wire.TopicPartition]uint64 // each partition's request id, for its reply
	epochQs  map[wire.TopicPartition]wire.EpochQuery
	lists    map[wire.TopicPartition]wire.ListOffsetsQuery
	fetches  map[wire.TopicPartition]wire.FetchPartition
	order    []wire.TopicPartition   // the fetches' order in the request
	topicIDs map[string]wire.TopicID // the fetch's, to read a v13+ answer
	// ahead marks a Fetch sent ahead of the appends of the response
	// before it (sendAhead) whose partitions bindAhead has not yet bound:
	// until then reqIDs holds only the requests the state machines had
	// already handed out.
	ahead   bool
	session wire.SessionFetch // how the fetch used the session
	sent    time.Time
	// buf is the buffer a response read on the direct connection points
	// into (direct.go); the worker releases it (worker.held), nil through
	// franz-go. direct says which connection carried the Fetch.
	buf    *wire.FetchBuffer
	direct bool
	// staged is how many bytes of its records the direct connection's
	// read staged into the logs (stageSink); set by the request
	// goroutine, read once the flight has landed.
	staged int64
	resp   kmsg.Response
	resp2  kmsg.Response // ListOffsets: the LATEST half
	err    error
}

// idFor returns the id of tp's request in f, if f carries one.
func (f *flight) idFor(tp wire.TopicPartition) (uint64, bool) {
	if f == nil {
		return 0, false
	}
	id, ok := f.reqIDs[tp]
	return id, ok
}

// inAir returns the worker's requests in the air: the Fetch, the side
// request, both or none.
func (w *worker) inAir() []*flight {
	var fs []*flight
	for _, f := range []*flight{w.flight, w.side} {
		if f != nil {
			fs = append(fs, f)
		}
	}
	return fs
}

func newWorker(m *Manager, id int32) *worker {
	broker := m.broker(id)
	return &worker{
		id: id, m: m, broker: broker, direct: m.newDirectFetch(id, broker),
		orders:  newMailbox[order](),
		parts:   map[wire.TopicPartition]*part{},
		rank:    map[wire.TopicPartition]uint64{},
		session: wire.NewFetchSession(!m.cfg.NoFetchSessions),
		flights: make(chan *flight, 2),
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
	// Every return is after land: nothing is in the air, so the buffers
	// and the connection are the worker's alone.
	defer w.direct.close()
	defer w.releaseHeld()
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
		w.releaseHeld() // every Ready carried out: no Append points into them
		w.bindAhead()
		w.send(ctx)
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
			w.landed(ctx, f)
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

// landed takes the answer of a request in the air: it is stepped into the
// partitions, and, for a Fetch, the next Fetch is sent ahead of the appends
// it decided.
func (w *worker) landed(ctx context.Context, f *flight) {
	if f == w.side {
		w.side = nil
	} else {
		w.flight = nil
	}
	w.m.clearInFlight(w.id, f.reqIDs)
	// A partition with a request in the other slot too (one of the two
	// stale, a new leader came between them) shows that one again: it is
	// still in the air. Only a partition still here: one handed off since
	// is another worker's to show.
	for _, o := range w.inAir() {
		both := map[wire.TopicPartition]uint64{}
		for tp := range f.reqIDs {
			if id, ok := o.reqIDs[tp]; ok && w.parts[tp] != nil {
				both[tp] = id
			}
		}
		if len(both) > 0 {
			w.m.setInFlight(w.id, APIName(o.key), o.sent, both)
		}
	}
	if f.buf != nil {
		w.held = append(w.held, f.buf) // its records are appended by the next processAll
	}
	if w.quietAgain(ctx, f) {
		return
	}
	ahead, carried := w.receive(f)
	w.sendAhead(ctx, ahead, carried)
}

// quietAgain takes the answer to the Fetch f when it is an idle long
// poll's, and sends the same Fetch again, as receive and sendAhead would
// but without taking it partition by partition: an incremental answer
// naming no partition (wire.FetchSession.Quiet), to a Fetch of every
// partition the worker holds, each still fetching as f asked, its answer
// already carried as it was (part.carry, follower.Partition.Unchanged),
// with nothing else to send and no backoff due. Then every partition's
// answer is the one it carries, and the next Fetch is f again. At 10,000
// idle partitions the answers built, checked and carried one by one, and
// the Fetch rebuilt, were most of kfollower's CPU (issue 14). Anything
// else, or any doubt, is for receive; it reports whether it took f.
func (w *worker) quietAgain(ctx context.Context, f *flight) bool {
	if f.key != kmsg.Fetch || f.err != nil || len(f.order) != len(w.parts) || !f.session.Incremental() {
		return false
	}
	resp, ok := f.resp.(*kmsg.FetchResponse)
	if !ok || len(resp.Topics) > 0 {
		return false
	}
	now := w.m.cfg.Now()
	if at, ok := w.nextWake(); ok && !now.Before(at) {
		return false
	}
	if !maps.Equal(w.m.topicIDs(), f.topicIDs) {
		return false
	}
	// Every partition held is in f (as many, and each of f held).
	for _, tp := range f.order {
		p := w.parts[tp]
		if p == nil || p.carrying || p.pending != nil || p.carry.id != f.reqIDs[tp] || p.carry.fetch != f.fetches[tp] ||
			p.sm.HasReady() || !p.sm.Unchanged(p.carry.reply()) {
			return false
		}
	}
	if !w.session.Quiet(resp, f.session, len(f.fetches)) {
		return false
	}
	w.m.quiet.Add(1)
	stats := w.requestStats(f, now)
	stats.Incremental, stats.Named = true, f.session.Named()
	w.m.cfg.observe().RequestDone(stats)
	req, sf := w.session.Again(w.limits(now))
	w.start(ctx, &flight{key: kmsg.Fetch, reqIDs: f.reqIDs, fetches: f.fetches, order: f.order, topicIDs: f.topicIDs, session: sf},
		[]kmsg.Request{req})
	return true
}

// land waits for the requests in the air, if any, and drops their answers.
func (w *worker) land() {
	fs := w.inAir()
	for range fs {
		<-w.flights
	}
	for _, f := range fs {
		w.m.clearInFlight(w.id, f.reqIDs)
		if f.key == kmsg.Fetch {
			w.session.Failed(f.session) // its answer is dropped
		}
		w.release(f.buf) // and nothing was stepped from it
	}
	w.flight, w.side = nil, nil
}

// releaseHeld releases the buffers of the responses whose records have
// been appended (or dropped): see worker.held.
func (w *worker) releaseHeld() {
	for i, b := range w.held {
		w.release(b)
		w.held[i] = nil
	}
	w.held = w.held[:0]
}

// release gives a direct connection's buffer back; nil is nothing.
func (w *worker) release(b *wire.FetchBuffer) {
	if b == nil {
		return
	}
	if h := w.m.buffers; h != nil {
		h.released(b)
	}
	b.Release()
}

// tick steps Tick into the partitions whose backoff is over; to any
// other, Tick is nothing.
func (w *worker) tick(now time.Time) {
	for _, p := range w.parts {
		if at := p.sm.NextWake(); !at.IsZero() && !now.Before(at) {
			p.tick(w.m, now)
		}
	}
}

// joinEpochRound steps follower.EpochRound into the partitions that wait
// out a backoff to ask this broker about their epoch again after it
// answered them UNKNOWN_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER
// (follower.Together), when epoch queries to it are about to go out (a
// retry that fell due, or a partition's first query): theirs go in the
// same request, which is one round. The partitions a broker takes over
// come to this worker from Metadata and hand-offs over seconds; each
// batch it answered at another moment waited from then, and a batch
// whose wait ended while another's request was in the air went alone
// after it, so on their own timers they never merged: a third of a
// broker's epoch requests in BenchmarkScale's moves split a round
// (issue 14). Joining before every send, not only at a tick, also takes
// in a batch answered between the tick and the send. Only the state
// machines that say they join (JoinsEpochRound) are stepped: an idle
// partition stays idle.
func (w *worker) joinEpochRound(now time.Time) {
	var joiners []*part
	asks := false
	for _, p := range w.parts {
		switch {
		case p.sm.JoinsEpochRound(w.id):
			joiners = append(joiners, p)
		case !asks:
			asks = w.asksEpoch(p)
		}
	}
	if !asks {
		return
	}
	for _, p := range joiners {
		p.step(now, follower.EpochRound{Leader: w.id})
	}
}

// asksEpoch reports whether p has an epoch query for this broker to send:
// handed out and not yet sent, or to be handed out by its next Ready.
func (w *worker) asksEpoch(p *part) bool {
	if r, ok := p.pending.(*follower.OffsetsForLeaderEpoch); ok {
		return r.Leader == w.id
	}
	leader, _ := p.sm.Leader()
	return leader == w.id && p.sm.State() == follower.StateReconciling && p.sm.InFlight() == nil
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
		// The same leader and epoch again (every Metadata names them) is
		// nothing to the state machine: not stepped, so an idle partition
		// stays idle (its carried answer stays carried).
		if p, ok := w.parts[o.tp]; ok && !sameLeader(p.sm, o.lc) {
			p.step(now, o.lc)
		}
	case opRelease:
		p := w.parts[o.tp]
		delete(w.parts, o.tp)
		delete(w.rank, o.tp)
		if p != nil {
			// An answer it carries is stepped: its Fetch will not go out
			// again from here.
			p.uncarry(now)
			// A request of its still in the air is given up, so its state
			// machine does not wait for a reply this worker will drop; in
			// the other slot there may be a stale one of it, not stepped
			// (it would count as a stale reply).
			for _, f := range w.inAir() {
				if id, ok := f.idFor(o.tp); ok {
					if r := p.sm.InFlight(); r != nil && r.RequestID() == id {
						p.step(now, follower.RequestFailed{ID: id, Err: fmt.Errorf("%s moved away from broker %d", o.tp, w.id)})
					}
					w.m.clearInFlight(w.id, map[wire.TopicPartition]uint64{o.tp: id})
				}
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
	w.tickDue(now) // fetcher/wake.go: a backoff that ended is stepped before the next request
	pre := w.applyAhead()
	var refresh bool
	var touched []*part
	for _, p := range w.parts {
		b, r, rf := p.process(&w.m.cfg, now, pre[p])
		refresh = refresh || rf
		if b > 0 {
			w.m.cfg.observe().Appended(w.id, p.tp, b, r)
		}
		// force: a publish that failed (the served epoch's rise, status.go)
		// is retried at every pass, as an idle partition is not stepped.
		if p.dirty || p.force {
			touched = append(touched, p)
		}
	}
	w.m.riseAll(touched) // served.go: the served epochs' fsyncs side by side
	for _, p := range touched {
		p.dirty = false
		w.m.publish(p)
	}
	if refresh {
		w.m.requestRefresh()
	}
}

// applyAhead carries out side by side, at most parallelApplies at once,
// the appends of the partitions whose next Ready has appends alone, when
// there are several, and returns each one's Ready with what its appends
// did, for process to take. A log's first append writes its
// leader-epoch-checkpoint and recovery point, each fsynced: one partition
// after the other, the first Fetch of thousands took most of the
// start-up (issue 14). Each partition's appends are still carried out in
// order, by one goroutine, which the worker waits for, so a log has one
// writer at a time; everything else (events, reports, Advance) stays in
// process, in its order. A truncation is carried out by process: its
// lost+found save and loss report keep their order.
func (w *worker) applyAhead() map[*part]*preApplied {
	var todo []*part
	for _, p := range w.parts {
		if !p.unsettled && p.sm.HasReady() {
			todo = append(todo, p)
		}
	}
	if len(todo) < 2 {
		return nil
	}
	pre := make(map[*part]*preApplied, len(todo))
	for _, p := range todo {
		if rd := p.sm.Ready(); len(rd.Actions) > 0 && appendsOnly(rd) {
			pre[p] = &preApplied{rd: rd}
		}
	}
	if len(pre) < 2 {
		return nil // process builds the Ready again: Ready changes nothing
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelApplies)
	for p, a := range pre {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			a.done, a.err = p.apply(a.rd)
		}()
	}
	wg.Wait()
	return pre
}

// parallelApplies bounds applyAhead's partitions in flight, as
// openParallel does the opens at start-up: measured on the bench's disk,
// 16 first appends side by side took a third of the time of one after
// the other.
const parallelApplies = 16

// sameLeader reports whether lc names the leader and epoch sm follows.
func sameLeader(sm *follower.Partition, lc follower.LeaderChange) bool {
	leader, epoch := sm.Leader()
	return leader == lc.Leader && epoch == lc.LeaderEpoch
}

func (w *worker) nextWake() (time.Time, bool) {
	return w.firstWake(func(*follower.Partition) bool { return true })
}

// firstWake is the earliest wake of the partitions that only accepts.
func (w *worker) firstWake(only func(*follower.Partition) bool) (time.Time, bool) {
	var at time.Time
	for _, p := range w.parts {
		if !only(p.sm) {
			continue
		}
		if t := p.sm.NextWake(); !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at, !at.IsZero()
}

// nextFetchRetry is when the first backoff ends whose retry is a Fetch
// (follower.Partition.RetriesFetch), which must wait for the Fetch in the
// air; any other retry goes on the side slot (worker.side) when its timer
// fires, whatever the Fetch.
func (w *worker) nextFetchRetry() (time.Time, bool) {
	return w.firstWake((*follower.Partition).RetriesFetch)
}

// send starts the next batched requests into the free slots: on the side,
// epoch queries first (reconciliation comes before any fetch from a new
// leader, KIP-101), then ListOffsets; and the Fetch. Requests addressed to
// another broker wait for the hand-off that metadata will bring.
func (w *worker) send(ctx context.Context) {
	var (
		epochs  map[wire.TopicPartition]*follower.OffsetsForLeaderEpoch
		lists   map[wire.TopicPartition]*follower.ListOffsets
		fetches map[wire.TopicPartition]*follower.Fetch
		carried []wire.TopicPartition
	)
	sideFree, fetchFree := w.side == nil, w.flight == nil
	if !sideFree && !fetchFree {
		return
	}
	for tp, p := range w.parts {
		if p.carrying {
			carried = append(carried, tp)
			continue
		}
		switch r := p.pending.(type) {
		case *follower.OffsetsForLeaderEpoch:
			if sideFree && r.Leader == w.id {
				addTo(&epochs, tp, r)
			}
		case *follower.ListOffsets:
			if sideFree && r.Leader == w.id {
				addTo(&lists, tp, r)
			}
		case *follower.Fetch:
			if fetchFree && r.Leader == w.id {
				addTo(&fetches, tp, r)
			}
		}
	}
	switch {
	case len(epochs) > 0:
		f := &flight{key: kmsg.OffsetForLeaderEpoch, reqIDs: requestIDs(epochs, 0), epochQs: epochQueries(epochs)}
		w.start(ctx, f, []kmsg.Request{wire.OffsetsForLeaderEpochRequest(f.epochQs)})
	case len(lists) > 0:
		f := &flight{key: kmsg.ListOffsets, reqIDs: requestIDs(lists, 0), lists: listQueries(lists)}
		earliest, latest := wire.ListOffsetsRequests(f.lists)
		w.start(ctx, f, []kmsg.Request{earliest, latest})
	}
	if !fetchFree || len(fetches)+len(carried) == 0 {
		return
	}
	ids := w.m.topicIDs()
	if withoutID(fetches, ids) {
		w.m.requestRefresh()
	}
	n := len(fetches) + len(carried)
	f := &flight{key: kmsg.Fetch, reqIDs: requestIDs(fetches, n), fetches: fetchPartitions(fetches, n)}
	w.addCarried(f, carried, ids)
	if len(f.fetches) == 0 {
		return
	}
	f.topicIDs, f.order = ids, w.fetchOrder(f.fetches)
	req, sf := w.session.Request(f.order, f.fetches, f.topicIDs, w.limits(w.m.cfg.Now()))
	f.session = sf
	w.start(ctx, f, []kmsg.Request{req})
}

// start sends f's requests, one after the other, on a goroutine of its
// own that reports to w.flights, into f's slot (a Fetch is w.flight, any
// other w.side); the partitions whose requests f carries have them sent.
func (w *worker) start(ctx context.Context, f *flight, reqs []kmsg.Request) {
	for tp := range f.reqIDs {
		p := w.parts[tp]
		p.pending, p.carrying = nil, false // sent
	}
	f.sent = w.m.cfg.Now()
	if f.key == kmsg.Fetch {
		w.flight = f
	} else {
		w.side = f
	}
	w.m.setInFlight(w.id, APIName(f.key), f.sent, f.reqIDs)
	// The request goroutine is owned by this worker: run waits for it
	// before returning, and it ends with ctx.
	var sink wire.RecordsSink
	var staged map[stageKey]int
	if f.key == kmsg.Fetch && w.direct != nil {
		sink, staged = w.stageSink(f)
	}
	go func() {
		if fr, ok := reqs[0].(*kmsg.FetchRequest); ok && w.direct != nil {
			r := w.direct.fetch(ctx, fr, sink)
			for _, n := range staged {
				f.staged += int64(n)
			}
			f.resp, f.buf, f.direct, f.err = r.resp, r.buf, r.direct, r.err
			if h := w.m.buffers; h != nil && f.buf != nil {
				h.taken(f.buf)
			}
			w.flights <- f
			return
		}
		f.resp, f.err = w.broker.Request(ctx, reqs[0])
		if f.err == nil && len(reqs) > 1 {
			f.resp2, f.err = w.broker.Request(ctx, reqs[1])
		}
		w.flights <- f
	}()
}

// stageKey names a partition as a Fetch v13+ response does.
type stageKey struct {
	topic     wire.TopicID
	partition int32
}

// stageSink is the wire.RecordsSink of the Fetch f on the direct
// connection: each partition's batches are staged into its log
// (storage.Log.Stage) as they are read, while they are in the CPU's
// cache, where the log still ends at the offset f asked from. The Append
// the state machine decides later, of the same bytes, then writes almost
// nothing; what it does not take is dropped, and a crash before it keeps
// none (storage's stage.go). The logs are taken here, on the worker's
// goroutine; a log handed off or closed while f is in the air only
// refuses or drops the staging, as Stage takes the log's own lock. The
// map it returns counts each partition's staged bytes, for f.staged.
func (w *worker) stageSink(f *flight) (wire.RecordsSink, map[stageKey]int) {
	type target struct {
		log stager
		at  int64
	}
	logs := make(map[stageKey]target, len(f.fetches))
	for tp, fp := range f.fetches {
		id, ok := f.topicIDs[tp.Topic]
		p := w.parts[tp]
		if !ok || p == nil {
			continue
		}
		if s, ok := p.log.(stager); ok {
			logs[stageKey{id, tp.Partition}] = target{s, fp.Offset}
		}
	}
	if len(logs) == 0 {
		return nil, nil
	}
	staged := make(map[stageKey]int, len(logs))
	return func(topic wire.TopicID, partition int32, records []byte, first bool) {
		k := stageKey{topic, partition}
		if t, ok := logs[k]; ok {
			staged[k] = t.log.Stage(records, first, t.at)
		}
	}, staged
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

// addCarried adds to the Fetch f the carried Fetches of the partitions
// carried (part.carry), as they were sent, under their state machines'
// ids: in the air again, so their answers are stepped as any other. One
// whose topic has no id (which Manager.ids never forgets, so a broken
// invariant) has its answer stepped instead, and its next Fetch waits for
// Metadata as any other (withoutID).
func (w *worker) addCarried(f *flight, carried []wire.TopicPartition, ids map[string]wire.TopicID) {
	for _, tp := range carried {
		p := w.parts[tp]
		if p == nil || !p.carrying {
			continue
		}
		if ids[tp.Topic] == (wire.TopicID{}) {
			p.uncarry(w.m.cfg.Now())
			continue
		}
		f.reqIDs[tp], f.fetches[tp] = p.carry.id, p.carry.fetch
	}
}

// toEnd moves tp to the end of the fetch order.
func (w *worker) toEnd(tp wire.TopicPartition) {
	w.rank[tp] = w.nextRank
	w.nextRank++
}

// fetchOrder is the order of a Fetch's partitions: by rank, so those that
// got records last come last, as Kafka's replica fetcher orders its
// partitions (AbstractFetcherThread's partitionStates.updateAndMoveToEnd).
func (w *worker) fetchOrder(fetches map[wire.TopicPartition]wire.FetchPartition) []wire.TopicPartition {
	// Each rank looked up once, not at every comparison: thousands of
	// partitions are sorted for every Fetch.
	type ranked struct {
		rank uint64
		tp   wire.TopicPartition
	}
	rs := make([]ranked, 0, len(fetches))
	for tp := range fetches {
		rs = append(rs, ranked{w.rank[tp], tp})
	}
	slices.SortFunc(rs, func(a, b ranked) int { return cmp.Compare(a.rank, b.rank) })
	order := make([]wire.TopicPartition, len(rs))
	for i, r := range rs {
		order[i] = r.tp
	}
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
// For a Fetch it returns where each partition whose answer was a plain
// success will fetch next once its batches are appended (sendAhead), or
// nil when the answer asks for something to come first.
func (w *worker) receive(f *flight) (ahead map[wire.TopicPartition]wire.FetchPartition, carried []wire.TopicPartition) {
	now := w.m.cfg.Now()
	cfg := &w.m.cfg
	stats := w.requestStats(f, now)
	defer func() { cfg.observe().RequestDone(stats) }()
	step := func(tp wire.TopicPartition, msg follower.Msg) bool {
		p, ok := w.parts[tp]
		if !ok || !p.step(now, msg) {
			// Handed off while the request was in the air, or no longer
			// the request in flight (follower.ErrStale): dropped, counted.
			stats.Stale++
			return false
		}
		return true
	}
	// unasked drops the answer for a partition of a Fetch ahead that no
	// state machine was bound to (bindAhead): counted as stale, as the
	// state machine would have counted it.
	unasked := func(tp wire.TopicPartition) bool {
		if _, ok := f.reqIDs[tp]; ok {
			return false
		}
		stats.Stale++
		if p, ok := w.parts[tp]; ok {
			p.staleReplies++
			p.dirty = true
		}
		return true
	}
	fail := func(tp wire.TopicPartition, err error) {
		if !unasked(tp) {
			step(tp, follower.RequestFailed{ID: f.reqIDs[tp], Err: err})
		}
	}
	if f.err != nil {
		cfg.Logger.Debug("request failed", "broker", w.id, "api", f.key.Name(), "err", f.err)
		if f.key == kmsg.Fetch {
			w.session.Failed(f.session)
		}
		for tp := range f.reqIDs {
			fail(tp, f.err)
		}
		for _, tp := range f.order {
			unasked(tp)
		}
		return nil, nil
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
		ahead = map[wire.TopicPartition]wire.FetchPartition{}
		for _, a := range answers {
			stats.FetchedBytes += int64(len(a.Records) + a.Batches.Tail)
			stats.FetchedRecords += a.Batches.Records
			if a.ErrorCode != 0 {
				if stats.Results == nil {
					stats.Results = map[string]int{}
				}
				stats.Results[wire.ErrorName(a.ErrorCode)]++
			}
			if !plainAnswer(a) {
				// A reconciliation, a ListOffsets or a new leader
				// comes before any fetch (send's order, KIP-101): no
				// Fetch goes ahead of it.
				ahead = nil
			}
		}
		for _, tp := range f.order {
			a, ok := answers[tp]
			if !ok {
				continue
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
			if unasked(tp) {
				continue
			}
			if len(a.Records) > 0 {
				if _, held := w.parts[tp]; held {
					w.toEnd(tp) // served: the others come first next time
				}
			}
			r := fetchReply(f.reqIDs[tp], a)
			if p, ok := w.parts[tp]; ok && a.Leader == nil && p.sm.Unchanged(r) {
				// Nothing new (an idle long poll; a partition an
				// incremental answer left out): the Fetch goes out again
				// as it was, the answer kept unstepped (part.carry).
				p.carry, p.carrying = carriedFetch{id: r.ID, hw: r.HighWatermark, logStart: r.LogStartOffset, fetch: f.fetches[tp]}, true
				carried = append(carried, tp)
				continue
			}
			if p, ok := w.parts[tp]; ok {
				p.fetched = fetchedBatches{id: r.ID, Batches: a.Batches} // for the Append r may lead to
			}
			if step(tp, r) && ahead != nil && a.ErrorCode == 0 && a.Batches.Err == nil {
				ahead[tp] = nextFetch(f.fetches[tp], a)
			}
		}
		missing(miss)
	}
	return ahead, carried
}

// requestStats is what the observer is told of f, landed at now, before
// its answers are taken.
func (w *worker) requestStats(f *flight, now time.Time) RequestStats {
	stats := RequestStats{Broker: w.id, Key: f.key, Partitions: len(f.reqIDs), Named: len(f.reqIDs), Latency: now.Sub(f.sent), Err: f.err,
		Direct: f.direct, ResponseBytes: int64(len(f.buf.Bytes())), StagedBytes: f.staged}
	switch f.key {
	case kmsg.Fetch:
		stats.Partitions = len(f.order) // with those of a Fetch ahead that none was bound to
	case kmsg.OffsetForLeaderEpoch:
		stats.Asked = slices.Collect(maps.Keys(f.reqIDs))
	}
	return stats
}

// plainAnswer reports whether a Fetch answer leaves its partition fetching
// from the same leader, whatever its error: no diverging epoch, no
// OFFSET_OUT_OF_RANGE and no KIP-951 leader hint.
func plainAnswer(a wire.FetchAnswer) bool {
	return a.Diverging.Epoch < 0 && a.Leader == nil && a.ErrorCode != kerr.OffsetOutOfRange.Code
}

// nextFetch is where a partition fetches next once the whole batches of
// its answer a to sent are appended: from the offset after the last one,
// with that batch's epoch as the last fetched (its log's latest epoch
// then), or where it was if there were none.
func nextFetch(sent wire.FetchPartition, a wire.FetchAnswer) wire.FetchPartition {
	next := sent
	s := batch.NewFrameScanner(a.Records[:a.Batches.Whole])
	for s.Next() {
		h := s.Header()
		next.Offset, next.LastFetchedEpoch = h.NextOffset(), h.PartitionLeaderEpoch
	}
	return next
}

// sendAhead sends the next Fetch before the appends of the response that
// just landed are carried out: for each partition in ahead, the position
// it will fetch from next if its append succeeds, and with them the
// Fetches the state machines have handed out and not sent yet. It sends
// nothing if a Fetch is in the air already. An OffsetsForLeaderEpoch or
// ListOffsets that waits goes beside it, in the next send.
func (w *worker) sendAhead(ctx context.Context, ahead map[wire.TopicPartition]wire.FetchPartition, carried []wire.TopicPartition) {
	if ahead == nil || len(ahead)+len(carried) == 0 || w.flight != nil {
		return
	}
	if at, ok := w.nextFetchRetry(); ok && !w.m.cfg.Now().Before(at) {
		// A Fetch retry is due (fetcher/wake.go): it goes in the next
		// send, not behind a long poll. Any other retry goes beside.
		return
	}
	var fetches map[wire.TopicPartition]*follower.Fetch
	for tp, p := range w.parts {
		if r, ok := p.pending.(*follower.Fetch); ok {
			if _, ok := ahead[tp]; !ok && r.Leader == w.id && !p.sm.HasReady() {
				addTo(&fetches, tp, r)
			}
		}
	}
	ids := w.m.topicIDs()
	if withoutID(fetches, ids) {
		w.m.requestRefresh()
	}
	n := len(fetches) + len(ahead) + len(carried)
	f := &flight{key: kmsg.Fetch, ahead: len(ahead) > 0, reqIDs: requestIDs(fetches, n), fetches: fetchPartitions(fetches, n), topicIDs: ids}
	for tp, fp := range ahead {
		if ids[tp.Topic] == (wire.TopicID{}) {
			continue // its id was dropped since (withoutID)
		}
		f.fetches[tp] = fp
	}
	w.addCarried(f, carried, ids)
	if len(f.fetches) == 0 {
		return
	}
	f.order = w.fetchOrder(f.fetches)
	req, sf := w.session.Request(f.order, f.fetches, f.topicIDs, w.limits(w.m.cfg.Now()))
	f.session = sf
	w.start(ctx, f, []kmsg.Request{req})
}

// bindAhead binds each partition of the Fetch sent ahead, now that its
// appends are carried out, to its state machine's next Fetch if that asks
// for exactly what was sent: same leader, offset, fence (KIP-320) and last
// fetched epoch (KIP-595). The log start offset may differ (retention ran):
// a leader ignores it from a consumer (replica id -1). The answer is then
// stepped with the state machine's id. Any other partition (its append
// failed, it truncates, reconciles, backs off or has a new leader) is not
// bound: its part of the answer is dropped when it lands and its own
// request waits for the next send. It returns the partitions bound and
// those not, in the Fetch's order.
func (w *worker) bindAhead() (bound, unbound []wire.TopicPartition) {
	f := w.flight
	if f == nil || !f.ahead {
		return nil, nil
	}
	f.ahead = false
	ids := map[wire.TopicPartition]uint64{}
	for _, tp := range f.order {
		if _, ok := f.reqIDs[tp]; ok {
			continue // the state machine's own request
		}
		if p, ok := w.parts[tp]; ok {
			if r, ok := p.pending.(*follower.Fetch); ok && sameFetch(r, w.id, f.fetches[tp]) {
				f.reqIDs[tp], ids[tp] = r.ID, r.ID
				p.pending = nil // sent: it is in the air
				bound = append(bound, tp)
				continue
			}
		}
		unbound = append(unbound, tp)
	}
	w.m.setInFlight(w.id, APIName(f.key), f.sent, ids)
	return bound, unbound
}

// sameFetch reports whether r asks broker leader for what fp asked.
func sameFetch(r *follower.Fetch, leader int32, fp wire.FetchPartition) bool {
	return r.Leader == leader && r.Offset == fp.Offset && r.CurrentLeaderEpoch == fp.CurrentLeaderEpoch &&
		r.LastFetchedEpoch == fp.LastFetchedEpoch
}
