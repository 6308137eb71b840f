package fetcher

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDriverStories runs the scripts in testdata/, in the style of
// etcd-io/raft's interaction tests: a Manager and its workers over real
// logs in a temporary directory, with every broker a fake requester that
// the script answers. No worker goroutine runs: the story plays each
// worker's loop itself (orders, Ready, send, receive), so the requests the
// workers send, the orders they get and the statuses they publish come out
// in one deterministic order. Regenerate the expected output with
//
//	go test ./fetcher -run TestDriverStories -rewrite
//
// and read the diff before committing it: it is the behaviour.
//
// Commands (see testdata/*.txt for use):
//
//	metadata [from=N]                  a Metadata answer, placed by the Manager
//	  T-P leader=N epoch=N [id=none]   (one line a partition; leader -1: none; id=none: the
//	                                   answer lacks the topic id, set on the topic's first line)
//	reply broker=N [error=TEXT]        answer broker N's request in the air
//	  T-P ...                          (one line a partition; a partition left out is missing)
//	    Fetch:                 [error=NAME] [records=FIRST-LAST [partial=BYTES]] [epoch=N] [hw=N]
//	                           [log-start=N] [leader=ID/EPOCH] [diverging=EPOCH@END] [crc=bad]
//	                           (partial: that many bytes of the next batch follow, cut;
//	                           crc=bad: the batch's last byte flipped, so that storage
//	                           refuses it and wire, which only frames it, does not)
//	    OffsetsForLeaderEpoch: [error=NAME] epoch=N end=N
//	    ListOffsets:           [error=NAME] start=N end=N
//	tick advance=DURATION              move the clock and step Tick everywhere
//	disk fail=ENOSPC|EIO|none [open]   from now on every write to a log fails so (open: opening
//	                                   one too), until fail=none
//	disk corrupt                       the next save to lost+found finds a corrupt batch in our log
//	maintain                           the flusher's flush, then every worker's retention run (Flush: interval)
//	corrupt T-P offset=N               flip a byte of our own batch holding N, on disk (the real
//	                                   log, not the double)
//	status                             every partition's published status, and /readyz's answer
//	ready                              what /readyz says (Manager.Ready)
//	lost-found                         the event directories under lost+found
//	shutdown                           end the run: every log must be closed
//	restart                            shutdown, then a new Manager over the
//	                                   same data dir, as a process restart
//
// After every command but status, the story runs the Manager and the
// workers until nothing moves and prints what happened: the orders each
// worker carried out, the partitions handed back to Run, the requests sent
// (broker N <- ...), and what the observer is told: round trips, appends,
// leader changes, events and reconciliations.
func TestDriverStories(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := newDriverEnv(t)
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

// driverBase is the fixed start of story time.
var driverBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// call is one request a worker sent, waiting for the script's answer.
type call struct {
	broker int32
	req    kmsg.Request
	answer chan answer
}

type answer struct {
	resp kmsg.Response
	err  error
}

// fakeBroker is the requester of one broker: it hands each request to the
// story and waits for the story's answer, or for its context to end.
type fakeBroker struct {
	id    int32
	calls chan<- call
}

func (b fakeBroker) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c := call{broker: b.id, req: req, answer: make(chan answer, 1)}
	b.calls <- c
	select {
	case a := <-c.answer:
		return a.resp, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type driverEnv struct {
	m      *Manager
	disk   *disk
	ctx    context.Context
	cancel context.CancelFunc
	now    time.Time
	calls  chan call
	inAir  map[airKey]call // by broker and slot: the requests its worker waits on
	out    strings.Builder // what the Manager's observer is told
	// appended sums one worker's appends, reported one partition at a
	// time in no fixed order.
	appended appendSum
	// pass holds what the observer is told of single partitions until
	// something else is printed, for the same reason.
	pass []passLine
	done bool
}

type passLine struct{ tp, line string }

// airKey names one of a worker's two slots (worker.flight, worker.side).
type airKey struct {
	broker int32
	side   bool // an OffsetsForLeaderEpoch or ListOffsets, not a Fetch
}

func keyOf(c call) airKey {
	return airKey{broker: c.broker, side: c.req.Key() != kmsg.Fetch.Int16()}
}

func newDriverEnv(t *testing.T) *driverEnv {
	return newDriverEnvAt(t, t.TempDir(), slog.New(slog.DiscardHandler))
}

// newDriverEnvAt is a story's environment over the data dir dir, logging
// to lg.
func newDriverEnvAt(t *testing.T, dir string, lg *slog.Logger) *driverEnv {
	e := &driverEnv{now: driverBase, disk: &disk{}}
	e.start(Config{
		DataDir:   dir,
		Follow:    func(topic string) bool { return !strings.HasPrefix(topic, "ignored") },
		Backoff:   follower.BackoffPolicy{Base: 100 * time.Millisecond, Max: time.Second},
		Logger:    lg,
		Now:       func() time.Time { return e.now },
		Observers: []Observer{e},
		// Flushed by the maintain command only (the flusher's pass), as
		// under --flush interval.
		Storage: storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Hour},
	})
	return e
}

// start makes a new Manager with cfg, as a process (re)start does.
func (e *driverEnv) start(cfg Config) {
	e.calls, e.inAir, e.done = make(chan call, 4), map[airKey]call{}, false
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.m = newManager(cfg, nil, func(id int32) requester { return fakeBroker{id: id, calls: e.calls} })
	e.m.openLog = e.disk.openLog
	e.m.start = func(context.Context, *worker) {} // the story plays each worker's loop
}

func (e *driverEnv) close() {
	if !e.done {
		e.shutdown(nil)
	}
}

// The story is the Manager's observer: it prints what it is told.

func (e *driverEnv) Followed(topic string) { e.printf("run: following topic %s\n", topic) }

func (e *driverEnv) RequestDone(s RequestStats) {
	e.printf("broker %d answered %s for %d partitions", s.Broker, s.Key.Name(), s.Partitions)
	if s.Err != nil {
		e.printf(": %v", s.Err)
	}
	if s.FetchedBytes > 0 {
		e.printf("; fetched %d records (%d bytes)", s.FetchedRecords, s.FetchedBytes)
	}
	if len(s.Results) > 0 {
		var rs []string
		for k, v := range s.Results {
			rs = append(rs, fmt.Sprintf("%s=%d", k, v))
		}
		slices.Sort(rs)
		e.printf("; %s", strings.Join(rs, " "))
	}
	if s.Stale > 0 {
		e.printf("; %d stale", s.Stale)
	}
	e.printf("\n")
}

// Appended sums one worker's appends: the worker visits its partitions in
// no fixed order.
func (e *driverEnv) Appended(broker int32, _ wire.TopicPartition, bytes, records int64) {
	if a := &e.appended; a.records > 0 && a.broker != broker {
		e.printf("")
	}
	e.appended.broker = broker
	e.appended.records += records
	e.appended.bytes += bytes
}

// partPrintf adds to the story's output a line about tp, printed with the
// others of the same worker pass sorted by partition.
func (e *driverEnv) partPrintf(tp string, format string, args ...any) {
	e.pass = append(e.pass, passLine{tp: tp, line: fmt.Sprintf(format, args...)})
}

func (e *driverEnv) Event(ev follower.Event) {
	var tp string
	switch ev := ev.(type) {
	case *follower.TruncationEvent:
		tp = fmt.Sprintf("%s-%d", ev.Topic, ev.Partition)
	case *follower.GapEvent:
		tp = fmt.Sprintf("%s-%d", ev.Topic, ev.Partition)
	case *follower.ConformanceEvent:
		tp = fmt.Sprintf("%s-%d", ev.Topic, ev.Partition)
	}
	e.partPrintf(tp, "event: %v\n", ev)
}

func (e *driverEnv) Reconciled(ev *follower.ReconciledEvent) {
	e.partPrintf(fmt.Sprintf("%s-%d", ev.Topic, ev.Partition), "%v\n", ev)
}

func (e *driverEnv) LeaderChanged(tp wire.TopicPartition, old, new follower.LeaderChange) {
	e.printf("run: %s leader changed from %d (epoch %d) to %d (epoch %d)\n", tp, old.Leader, old.LeaderEpoch, new.Leader, new.LeaderEpoch)
}

func (e *driverEnv) Maintained(s MaintenanceStats) { e.printf("%s maintained: %+v\n", s.TP, s) }

type appendSum struct {
	broker         int32
	records, bytes int64
}

// printf adds to the story's output, after the appends summed so far.
func (e *driverEnv) printf(format string, args ...any) {
	slices.SortStableFunc(e.pass, func(a, b passLine) int { return strings.Compare(a.tp, b.tp) })
	for _, l := range e.pass {
		e.out.WriteString(l.line)
	}
	e.pass = e.pass[:0]
	if a := &e.appended; a.records > 0 || a.bytes > 0 {
		fmt.Fprintf(&e.out, "broker %d appended %d records (%d bytes)\n", a.broker, a.records, a.bytes)
		*a = struct {
			broker         int32
			records, bytes int64
		}{}
	}
	fmt.Fprintf(&e.out, format, args...)
}

func (e *driverEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if e.done && d.Cmd != "status" {
		d.Fatalf(t, "%s after shutdown", d.Cmd)
	}
	switch d.Cmd {
	case "metadata":
		from := int32(-1)
		if d.HasArg("from") {
			var n int
			d.ScanArgs(t, "from", &n)
			from = int32(n)
		}
		e.m.placeAll(e.ctx, e.metadata(t, d), from)
	case "reply":
		e.reply(t, d)
	case "tick":
		var s string
		d.ScanArgs(t, "advance", &s)
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.Fatalf(t, "advance=%q: %v", s, err)
		}
		e.now = e.now.Add(dur)
		for _, w := range e.workers() {
			w.tick(e.now)
		}
	case "disk":
		if d.HasArg("corrupt") {
			e.disk.corrupt = true
			break
		}
		var name string
		d.ScanArgs(t, "fail", &name)
		err, ok := diskErrors[name]
		if !ok {
			d.Fatalf(t, "fail=%q: want ENOSPC, EIO or none", name)
		}
		e.disk.fail, e.disk.failOpen = err, d.HasArg("open")
	case "corrupt":
		e.corrupt(t, d)
	case "maintain":
		e.m.flushAll(e.ctx) // the flusher's pass, then the workers'
		for _, w := range e.workers() {
			w.maintain()
		}
	case "status":
		return e.status()
	case "ready":
		return fmt.Sprintf("ready=%t\n", e.m.Ready())
	case "lost-found":
		return e.lostFound(t)
	case "shutdown":
		e.shutdown(t)
		return e.flush()
	case "restart":
		e.shutdown(t)
		e.printf("restart\n")
		e.start(e.m.cfg)
		return e.flush()
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	e.settle(t)
	return e.flush()
}

func (e *driverEnv) flush() string {
	e.printf("")
	s := e.out.String()
	e.out.Reset()
	if s == "" {
		return "(nothing)\n"
	}
	return s
}

// metadata builds a Metadata answer from the input lines; every topic gets
// a fixed id from its name, and every broker named is listed.
func (e *driverEnv) metadata(t *testing.T, d *datadriven.TestData) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	topics := map[string]int{}
	brokers := map[int32]bool{}
	for _, line := range lines(d) {
		tp, args := parseLine(t, d, line)
		leader, epoch := int32(args.int(t, d, "leader", -1)), int32(args.int(t, d, "epoch", 0))
		if leader >= 0 {
			brokers[leader] = true
		}
		i, ok := topics[tp.Topic]
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(tp.Topic)
			if args["id"] != "none" { // id=none: an answer that lacks the topic's id
				copy(mt.TopicID[:], tp.Topic)
			}
			i = len(resp.Topics)
			topics[tp.Topic] = i
			resp.Topics = append(resp.Topics, mt)
		}
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = tp.Partition, leader, epoch
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, mp)
	}
	for _, id := range sortedKeys(brokers) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = id
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}

// workers are the Manager's workers that have not ended, by broker id.
func (e *driverEnv) workers() []*worker {
	var ws []*worker
	for _, w := range e.m.workers {
		ws = append(ws, w)
	}
	for _, w := range e.m.stopping {
		select {
		case <-w.done:
		default:
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *worker) int { return int(a.id - b.id) })
	return ws
}

// settle plays Run and every worker's loop until nothing moves: Run takes
// the partitions handed back; each worker carries out its orders, its
// partitions' Ready, and sends its next request.
func (e *driverEnv) settle(t *testing.T) {
	for {
		moved := false
		if hs := peek(e.m.handbacks); len(hs) > 0 {
			for _, h := range hs {
				e.printf("run <- %s handed back\n", h.tp)
			}
			e.m.takeHandbacks(e.ctx)
			moved = true
		}
		for _, w := range e.workers() {
			for _, o := range w.orders.take() {
				moved = true
				e.printf("broker %d <- %s\n", w.id, describeOrder(o))
				if w.handle(o, e.now) {
					e.stop(t, w)
					break
				}
			}
			if e.stopped(w) {
				continue
			}
			w.processAll(e.now)
			bound, unbound := w.bindAhead()
			if len(bound) > 0 {
				e.printf("broker %d: Fetch ahead bound to %s\n", w.id, joinTPs(bound))
			}
			if len(unbound) > 0 {
				e.printf("broker %d: Fetch ahead not bound to %s\n", w.id, joinTPs(unbound))
			}
			before := len(w.inAir())
			w.send(e.ctx)
			if n := len(w.inAir()) - before; n > 0 {
				e.sent(t, n, "")
				moved = true
			}
		}
		select {
		case <-e.m.refresh:
			e.printf("run: metadata refresh asked for\n")
		default:
		}
		if !moved {
			e.checkInFlight(t)
			return
		}
	}
}

// checkInFlight checks, once things have settled, that every state
// machine waiting on a request has it in the air or still to send (none
// waits for an answer nobody will give), and that /status shows a request
// in flight for exactly the partitions that have one in the air (bound to
// a Fetch ahead, sent as asked, or stale: a new leader epoch came since).
func (e *driverEnv) checkInFlight(t *testing.T) {
	shown := map[wire.TopicPartition]string{}
	for _, s := range e.m.Statuses() {
		shown[wire.TopicPartition{Topic: s.Topic, Partition: s.Partition}] = s.InFlight
	}
	for _, w := range e.workers() {
		for tp, p := range w.parts {
			r := p.sm.InFlight()
			inAir, itsOwn := false, false
			for _, f := range w.inAir() {
				if id, ok := f.idFor(tp); ok {
					inAir = true
					itsOwn = itsOwn || (r != nil && r.RequestID() == id)
				}
			}
			if r != nil && r != p.pending && !itsOwn {
				t.Errorf("broker %d: %s's state machine waits on %v, neither in the air nor to send", w.id, tp, r)
			}
			if inAir != (shown[tp] != "") {
				t.Errorf("broker %d: %s in the air %t, but /status shows in flight %q", w.id, tp, inAir, shown[tp])
			}
		}
	}
}

func (e *driverEnv) stopped(w *worker) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// stop ends a worker as run does on opQuit or at the end: its requests in
// the air are cancelled and come back, then done closes.
func (e *driverEnv) stop(t *testing.T, w *worker) {
	e.giveUp(w.id, true)
	e.landOrFail(t, w)
	close(w.done)
	e.printf("broker %d: worker ended\n", w.id)
}

// giveUp forgets broker's requests in the air, side request first, and
// with cancel answers each as its cancelled context would.
func (e *driverEnv) giveUp(broker int32, cancel bool) {
	for _, side := range []bool{true, false} {
		k := airKey{broker, side}
		if c, ok := e.inAir[k]; ok {
			if cancel {
				c.answer <- answer{err: context.Canceled}
			}
			delete(e.inAir, k)
			e.printf("broker %d: %s in the air given up\n", broker, kmsg.NameForKey(c.req.Key()))
		}
	}
}

func (e *driverEnv) landOrFail(t *testing.T, w *worker) {
	for range w.inAir() {
		select {
		case <-w.flights:
		case <-time.After(10 * time.Second):
			if t != nil {
				t.Fatalf("broker %d: a request in the air never came back", w.id)
			}
			return
		}
	}
	w.flight, w.side = nil, nil
}

// sent takes the n requests a worker just sent, each into its slot: a
// worker never has two in one. They reach their broker in either order
// (each on its own goroutine), so they are printed in send's: the side
// request, then the Fetch.
func (e *driverEnv) sent(t *testing.T, n int, note string) {
	var cs []call
	for range n {
		cs = append(cs, e.await(t))
	}
	fetchLast := func(c call) int {
		if keyOf(c).side {
			return 0
		}
		return 1
	}
	slices.SortFunc(cs, func(a, b call) int { return cmp.Compare(fetchLast(a), fetchLast(b)) })
	for _, c := range cs {
		k := keyOf(c)
		if prev, ok := e.inAir[k]; ok {
			t.Errorf("broker %d was sent %s while %s was in the air", c.broker, describeRequest(c.req), describeRequest(prev.req))
		}
		e.inAir[k] = c
		e.printf("broker %d <- %s%s\n", c.broker, describeRequest(c.req), note)
	}
}

func joinTPs(tps []wire.TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tp.String()
	}
	return strings.Join(s, ", ")
}

// step runs one story command from Go, as a datadriven file would: args
// as "key=value" fields, pos naming the test in failures.
func (e *driverEnv) step(t *testing.T, pos, cmd, args, input string) string {
	d := &datadriven.TestData{Pos: pos, Cmd: cmd, Input: input}
	for _, a := range strings.Fields(args) {
		k, v, _ := strings.Cut(a, "=")
		d.CmdArgs = append(d.CmdArgs, datadriven.CmdArg{Key: k, Vals: []string{v}})
	}
	return e.handle(t, d)
}

// await returns the request a worker just sent.
func (e *driverEnv) await(t *testing.T) call {
	select {
	case c := <-e.calls:
		if r, ok := c.req.(*kmsg.FetchRequest); ok {
			for _, tt := range r.Topics {
				if tt.TopicID == (wire.TopicID{}) {
					// Kafka 4.4 fails the whole request (a v13+ Fetch
					// names topics by id alone).
					t.Errorf("broker %d was sent a Fetch naming topic %q without its topic id", c.broker, tt.Topic)
				}
			}
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("a worker started a request that never reached its broker")
		return call{}
	}
}

// reply answers broker N's request in the air and lets its worker receive
// the answer, as run does when its flight lands. With both slots in the
// air, the story says which: fetch or side.
func (e *driverEnv) reply(t *testing.T, d *datadriven.TestData) {
	var id int
	d.ScanArgs(t, "broker", &id)
	fetch, side := e.inAir[airKey{int32(id), false}], e.inAir[airKey{int32(id), true}]
	var k airKey
	switch {
	case fetch.req == nil && side.req == nil:
		d.Fatalf(t, "broker %d has no request in the air", id)
	case fetch.req != nil && side.req != nil && d.HasArg("fetch") == d.HasArg("side"):
		d.Fatalf(t, "broker %d has a Fetch and a %s in the air: say fetch or side", id, kmsg.NameForKey(side.req.Key()))
	case side.req != nil && !d.HasArg("fetch"):
		k = airKey{int32(id), true}
	default:
		k = airKey{int32(id), false}
	}
	c, ok := e.inAir[k]
	if !ok {
		d.Fatalf(t, "broker %d has no such request in the air", id)
	}
	delete(e.inAir, k)
	var w *worker
	for _, x := range e.workers() {
		if x.id == int32(id) && len(x.inAir()) > 0 {
			w = x
		}
	}
	if w == nil {
		d.Fatalf(t, "no worker of broker %d waits for an answer", id)
	}
	if d.HasArg("error") {
		var s string
		d.ScanArgs(t, "error", &s)
		c.answer <- answer{err: errors.New(s)}
	} else {
		switch req := c.req.(type) {
		case *kmsg.FetchRequest:
			c.answer <- answer{resp: fetchResponse(t, d)}
		case *kmsg.OffsetForLeaderEpochRequest:
			c.answer <- answer{resp: epochResponse(t, d)}
		case *kmsg.ListOffsetsRequest:
			// Two requests in a row, EARLIEST then LATEST.
			c.answer <- answer{resp: listResponse(t, d, "start")}
			next := e.await(t)
			if _, ok := next.req.(*kmsg.ListOffsetsRequest); !ok || next.broker != c.broker {
				d.Fatalf(t, "after ListOffsets EARLIEST, broker %d got %s", next.broker, describeRequest(next.req))
			}
			next.answer <- answer{resp: listResponse(t, d, "end")}
		default:
			d.Fatalf(t, "cannot answer %T", req)
		}
	}
	select {
	case f := <-w.flights:
		w.landed(e.ctx, f)
		if f.key == kmsg.Fetch && w.flight != nil {
			e.sent(t, 1, " (ahead of the appends)")
			// A partition whose answer changed nothing goes out again
			// under the same id, its answer not stepped (part.carry).
			var carried []wire.TopicPartition
			for tp, id := range w.flight.reqIDs {
				if old, ok := f.reqIDs[tp]; ok && old == id {
					carried = append(carried, tp)
				}
			}
			if len(carried) > 0 {
				slices.SortFunc(carried, cmpTP)
				e.printf("broker %d: Fetch ahead carries %s (answered unchanged, not stepped)\n", w.id, joinTPs(carried))
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("broker %d: the answer never reached the worker", id)
	}
}

// shutdown ends the run as Run does when its context ends: every worker
// stops after its request in the air comes back, then Manager.shutdown
// closes the logs. Every partition opened must be closed, wherever it was.
func (e *driverEnv) shutdown(t *testing.T) {
	e.done = true
	held := map[*part]string{}
	for _, w := range e.workers() {
		for _, p := range w.parts {
			held[p] = fmt.Sprintf("with broker %d", w.id)
		}
		for _, o := range peek(w.orders) {
			if o.op == opAdopt {
				held[o.p] = fmt.Sprintf("in broker %d's mailbox", w.id)
			}
		}
	}
	for _, h := range peek(e.m.handbacks) {
		if h.p != nil {
			held[h.p] = "handed back to run"
		}
	}
	for _, p := range e.m.parked {
		held[p] = "parked"
	}
	e.cancel()
	for _, w := range e.workers() {
		e.giveUp(w.id, false) // the context's end answers them
		e.landOrFail(t, w)
		close(w.done)
	}
	e.m.shutdown(func() {})
	var lines []string
	for p, where := range held {
		state := "closed"
		if err := p.log.Flush(); !errors.Is(err, storage.ErrClosed) {
			state = "NOT CLOSED"
			if t != nil {
				t.Errorf("%s (%s) was not closed at shutdown", p.tp, where)
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s (%s)\n", p.tp, state, where))
	}
	if n := len(e.m.Statuses()); len(held) != n && t != nil {
		t.Errorf("found %d partitions to close, but %d are followed", len(held), n)
	}
	slices.Sort(lines)
	for _, l := range lines {
		e.printf("%s", l)
	}
}

func (e *driverEnv) status() string {
	var b strings.Builder
	for _, s := range e.m.Statuses() {
		fmt.Fprintf(&b, "%s-%d %s leader=%d epoch=%d log=%d..%d hw=%d", s.Topic, s.Partition, s.State, s.Leader, s.LeaderEpoch,
			s.LogStartOffset, s.LogEndOffset, s.HighWatermark)
		if s.Reconciled {
			b.WriteString(" reconciled")
		}
		if s.StaleReplies > 0 {
			fmt.Fprintf(&b, " stale=%d", s.StaleReplies)
		}
		if l := s.LastLost; l != nil {
			fmt.Fprintf(&b, " last-lost=%s [%d,%d) cause=%s records=%d recovered=%t", l.ID, l.From, l.To, l.Cause, l.Records, l.Recovered)
		}
		if s.Error != "" {
			// Paths are printed from the data dir, a temporary one.
			fmt.Fprintf(&b, " error=%q", strings.ReplaceAll(s.Error, e.m.cfg.DataDir+string(filepath.Separator), ""))
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		b.WriteString("(none)\n")
	}
	fmt.Fprintf(&b, "ready=%t\n", e.m.Ready())
	return b.String()
}

func describeOrder(o order) string {
	switch o.op {
	case opAdopt:
		return fmt.Sprintf("adopt %s (leader %d, epoch %d)", o.tp, o.lc.Leader, o.lc.LeaderEpoch)
	case opLeader:
		return fmt.Sprintf("leader %s (leader %d, epoch %d)", o.tp, o.lc.Leader, o.lc.LeaderEpoch)
	case opRelease:
		return fmt.Sprintf("release %s", o.tp)
	case opQuit:
		return "quit"
	}
	return fmt.Sprintf("order %d", o.op)
}

// describeRequest prints a request as the broker would read it.
func describeRequest(r kmsg.Request) string {
	var parts []string
	switch r := r.(type) {
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s-%d@%d fence=%d last=%d", t.Topic, p.Partition, p.FetchOffset, p.CurrentLeaderEpoch, p.LastFetchedEpoch))
			}
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s-%d epoch=%d fence=%d", t.Topic, p.Partition, p.LeaderEpoch, p.CurrentLeaderEpoch))
			}
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s-%d ts=%d fence=%d", t.Topic, p.Partition, p.Timestamp, p.CurrentLeaderEpoch))
			}
		}
	}
	return kmsg.NameForKey(r.Key()) + " " + strings.Join(parts, ", ")
}

func fetchResponse(t *testing.T, d *datadriven.TestData) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	for _, line := range lines(d) {
		tp, args := parseLine(t, d, line)
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = tp.Partition
		p.ErrorCode = args.code(t, d)
		unknown := int64(0)
		if p.ErrorCode != 0 {
			unknown = -1 // as a broker answers an error (createLogReadResult)
		}
		p.HighWatermark = args.int(t, d, "hw", unknown)
		p.LogStartOffset = args.int(t, d, "log-start", unknown)
		if s, ok := args["records"]; ok {
			first, last, ok := strings.Cut(s, "-")
			f, err1 := strconv.ParseInt(first, 10, 64)
			l, err2 := strconv.ParseInt(last, 10, 64)
			if !ok || err1 != nil || err2 != nil || l < f {
				d.Fatalf(t, "records=%q: want FIRST-LAST", s)
			}
			epoch := int32(args.int(t, d, "epoch", 0))
			p.RecordBatches = batch.BuildRun(f, epoch, 1, int(l-f+1))
			if args["crc"] == "bad" {
				p.RecordBatches[len(p.RecordBatches)-1] ^= 0xff
			}
			if n := args.int(t, d, "partial", 0); n > 0 {
				// The first n bytes of the next batch: a broker may cut
				// the last batch to fit the size limits.
				p.RecordBatches = append(p.RecordBatches, batch.Build(batch.Spec{BaseOffset: l + 1, Epoch: epoch, Records: 1})[:n]...)
			}
		}
		if s, ok := args["leader"]; ok {
			id, ep, ok := strings.Cut(s, "/")
			i, err1 := strconv.Atoi(id)
			e, err2 := strconv.Atoi(ep)
			if !ok || err1 != nil || err2 != nil {
				d.Fatalf(t, "leader=%q: want ID/EPOCH", s)
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = int32(i), int32(e)
		}
		if s, ok := args["diverging"]; ok {
			ep, end, ok := strings.Cut(s, "@")
			e, err1 := strconv.Atoi(ep)
			o, err2 := strconv.ParseInt(end, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				d.Fatalf(t, "diverging=%q: want EPOCH@END", s)
			}
			p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = int32(e), o
		}
		addTopic(&resp.Topics, tp.Topic, func(rt *kmsg.FetchResponseTopic) { rt.Partitions = append(rt.Partitions, p) },
			func(name string) kmsg.FetchResponseTopic {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = name
				return rt
			}, func(rt kmsg.FetchResponseTopic) string { return rt.Topic })
	}
	return resp
}

func epochResponse(t *testing.T, d *datadriven.TestData) *kmsg.OffsetForLeaderEpochResponse {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for _, line := range lines(d) {
		tp, args := parseLine(t, d, line)
		p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		p.Partition = tp.Partition
		p.ErrorCode = args.code(t, d)
		p.LeaderEpoch = int32(args.int(t, d, "epoch", -1))
		p.EndOffset = args.int(t, d, "end", -1)
		addTopic(&resp.Topics, tp.Topic, func(rt *kmsg.OffsetForLeaderEpochResponseTopic) { rt.Partitions = append(rt.Partitions, p) },
			func(name string) kmsg.OffsetForLeaderEpochResponseTopic {
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = name
				return rt
			}, func(rt kmsg.OffsetForLeaderEpochResponseTopic) string { return rt.Topic })
	}
	return resp
}

// listResponse answers one ListOffsets half with each line's key (start
// for EARLIEST, end for LATEST).
func listResponse(t *testing.T, d *datadriven.TestData, key string) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, line := range lines(d) {
		tp, args := parseLine(t, d, line)
		p := kmsg.NewListOffsetsResponseTopicPartition()
		p.Partition = tp.Partition
		p.ErrorCode = args.code(t, d)
		p.Offset = args.int(t, d, key, -1)
		addTopic(&resp.Topics, tp.Topic, func(rt *kmsg.ListOffsetsResponseTopic) { rt.Partitions = append(rt.Partitions, p) },
			func(name string) kmsg.ListOffsetsResponseTopic {
				rt := kmsg.NewListOffsetsResponseTopic()
				rt.Topic = name
				return rt
			}, func(rt kmsg.ListOffsetsResponseTopic) string { return rt.Topic })
	}
	return resp
}

// addTopic runs add on topic's entry of *topics, making it first if needed.
func addTopic[T any](topics *[]T, topic string, add func(*T), mk func(string) T, name func(T) string) {
	for i := range *topics {
		if name((*topics)[i]) == topic {
			add(&(*topics)[i])
			return
		}
	}
	*topics = append(*topics, mk(topic))
	add(&(*topics)[len(*topics)-1])
}

func lines(d *datadriven.TestData) []string {
	var out []string
	for line := range strings.SplitSeq(d.Input, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

type lineArgs map[string]string

// parseLine reads "TOPIC-PARTITION key=value ...".
func parseLine(t *testing.T, d *datadriven.TestData, line string) (wire.TopicPartition, lineArgs) {
	fields := strings.Fields(line)
	i := strings.LastIndex(fields[0], "-")
	p, err := strconv.Atoi(fields[0][i+1:])
	if i <= 0 || err != nil {
		d.Fatalf(t, "%q: want TOPIC-PARTITION first", line)
	}
	args := lineArgs{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			d.Fatalf(t, "%q: want key=value, got %q", line, f)
		}
		args[k] = v
	}
	return wire.TopicPartition{Topic: fields[0][:i], Partition: int32(p)}, args
}

func (a lineArgs) int(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	s, ok := a[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return n
}

// code is the error=NAME of a line as a Kafka error code, 0 if none.
func (a lineArgs) code(t *testing.T, d *datadriven.TestData) int16 {
	name, ok := a["error"]
	if !ok {
		return 0
	}
	for c := int16(-1); c < 200; c++ {
		if ke, ok := kerr.ErrorForCode(c).(*kerr.Error); ok && ke.Message == name {
			return c
		}
	}
	d.Fatalf(t, "error=%q: no such Kafka error", name)
	return 0
}

// peek returns what b holds without taking it.
func peek[T any](b *mailbox[T]) []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.items)
}

func sortedKeys(m map[int32]bool) []int32 {
	var ks []int32
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// lostFound lists every directory under lost+found/<tp>/, with whether it
// holds a lost.json, relative to the data dir.
func (e *driverEnv) lostFound(t *testing.T) string {
	root := filepath.Join(e.m.cfg.DataDir, "lost+found")
	parts, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return "(none)\n"
	}
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range parts {
		evs, err := os.ReadDir(filepath.Join(root, p.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			_, err := os.Stat(filepath.Join(root, p.Name(), ev.Name(), "lost.json"))
			fmt.Fprintf(&b, "%s/%s lost.json=%t\n", p.Name(), ev.Name(), err == nil)
		}
	}
	if b.Len() == 0 {
		return "(none)\n"
	}
	return b.String()
}

// corrupt flips the last byte of the batch of T-P's local log that holds
// offset N, which its CRC covers: our own copy is damaged, not the
// broker's answer.
func (e *driverEnv) corrupt(t *testing.T, d *datadriven.TestData) {
	if len(d.CmdArgs) != 2 {
		d.Fatalf(t, "want corrupt T-P offset=N")
	}
	tp, _ := parseLine(t, d, d.CmdArgs[0].Key)
	var off int64
	d.ScanArgs(t, "offset", &off)
	seg := filepath.Join(storage.PartitionDir(e.m.cfg.DataDir, tp.Topic, tp.Partition), fmt.Sprintf("%020d.log", 0))
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for pos := 0; pos+12 <= len(raw); {
		base := int64(binary.BigEndian.Uint64(raw[pos:]))
		end := pos + 12 + int(binary.BigEndian.Uint32(raw[pos+8:]))
		h, err := batch.ParseHeader(raw[pos:end])
		if err != nil {
			t.Fatal(err)
		}
		if base <= off && off <= h.LastOffset() {
			f, err := os.OpenFile(seg, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{raw[end-1] ^ 0xff}, int64(end-1)); err != nil {
				t.Fatal(err)
			}
			return
		}
		pos = end
	}
	d.Fatalf(t, "no batch of %s holds offset %d", tp, off)
}

// cmpTP orders partitions by topic, then partition.
func cmpTP(a, b wire.TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition - b.Partition)
}
