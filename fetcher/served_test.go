package fetcher

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"testing/quick"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testCatalog serves m's catalog, as cmd/kfollower's serveCatalog does.
type testCatalog struct{ m *Manager }

func (c testCatalog) Topics() []server.Topic {
	var out []server.Topic
	for _, t := range c.m.CatalogTopics() {
		out = append(out, server.Topic{Name: t.Name, ID: t.ID, Partitions: t.Partitions})
	}
	return out
}

func (c testCatalog) Partition(topic string, p int32) (server.Log, int32, bool) {
	l, e, ok := c.m.CatalogPartition(topic, p)
	return l, e, ok
}

// chainCase is one random history of a cluster (its leader's log, as a
// list of batches, and its leader epoch), of kfollower A copying it (a
// storage.Log behind the catalog and the served-epoch rules, served by
// wire/server), and of a downstream reader D of A's endpoint.
type chainCase struct {
	t   *testing.T
	rng *rand.Rand
	m   *Manager
	tp  wire.TopicPartition
	id  wire.TopicID
	// up is the upstream leader's log, upEpoch its epoch; used holds
	// every epoch a batch was ever written at, truncated or not: one
	// leader per epoch, so no other batch is ever written at one of them.
	up      [][]byte
	upEpoch int32
	used    map[int32]bool
	al      partLog // A's log, as the driver holds it
	// aEpoch is the upstream epoch A has reconciled with.
	aEpoch int32
	// served is the highest served epoch seen so far.
	served int32
	// unserved: A runs without serving (Config.NotServed) since its last
	// restart; D cannot read it.
	unserved bool
	next     int // unique batch values
	cl       *kgo.Client
	d        downstream
}

// downstream is D, a kfollower reading A: the batches it holds, the served
// epoch it knows, and whether it sends LastFetchedEpoch (and so learns of
// a divergence from Fetch, KIP-595's DivergingEpoch) or only reconciles
// when fenced by a new epoch (OffsetsForLeaderEpoch, KIP-320 and KIP-279).
type downstream struct {
	batches  [][]byte
	epoch    int32
	lastSent bool
}

func end(bs [][]byte) int64 {
	if len(bs) == 0 {
		return 0
	}
	h, _ := batch.ParseHeader(bs[len(bs)-1])
	return h.NextOffset()
}

func epochOf(b []byte) int32 {
	h, _ := batch.ParseHeader(b)
	return h.PartitionLeaderEpoch
}

func (d *downstream) leo() int64 { return end(d.batches) }

func (d *downstream) lastEpoch() int32 {
	if len(d.batches) == 0 {
		return -1
	}
	return epochOf(d.batches[len(d.batches)-1])
}

// endOffsetFor is LeaderEpochFileCache.endOffsetFor over D's own batches,
// for KIP-279's second step.
func (d *downstream) endOffsetFor(epoch int32) int64 {
	for _, b := range d.batches {
		if epochOf(b) > epoch {
			h, _ := batch.ParseHeader(b)
			return h.BaseOffset
		}
	}
	return d.leo()
}

// The served epoch, property-tested over random histories of a cluster
// (appends, clean and unclean elections, a new leader holding batches of
// an epoch the old lineage skipped, as in KIP-279), of kfollower A copying
// it (reconciling with each new epoch, truncating, restarting) and of a
// kfollower D reading A: the served epoch never goes down, restarts
// included; it is at least 0, the log's latest epoch and the upstream
// epoch A reconciled with; every truncation that removes data raises it.
// And D, which reconciles only through A's answers (fenced by the served
// epoch, then OffsetsForLeaderEpoch, or DivergingEpoch on Fetch, by
// endOffsetFor's rules), never keeps a batch A lost (caught up, it holds
// exactly A's batches), never truncates one A kept, and never meets
// OFFSET_OUT_OF_RANGE.
func TestServedEpochChainProperty(t *testing.T) {
	prop := func(seed uint64) bool {
		runChainCase(t, seed)
		return !t.Failed()
	}
	// 15 histories by default (each fsyncs a few hundred times);
	// -quickchecks=1000 runs 150.
	if err := quick.Check(prop, &quick.Config{MaxCountScale: 0.15}); err != nil {
		t.Fatal(err)
	}
}

func runChainCase(t *testing.T, seed uint64) {
	dir := t.TempDir()
	c := &chainCase{
		t: t, rng: rand.New(rand.NewPCG(seed, 11)),
		m:  &Manager{cfg: Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)}},
		tp: wire.TopicPartition{Topic: "t", Partition: 0}, id: wire.TopicID{1, 2, 3},
		served: -1,
	}
	c.d.lastSent = c.rng.IntN(2) == 0
	c.m.catalog.topic("t", c.id, 1)
	c.open()
	srv, err := server.New(server.Config{NodeID: 1, ClusterID: "chain", Catalog: testCatalog{c.m}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	c.cl, err = kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.cl.Close()
	defer func() { c.al.Close() }()

	var story []string
	defer func() {
		if t.Failed() {
			t.Logf("seed %d, LastFetchedEpoch %v; the history:\n%s", seed, c.d.lastSent, fmt.Sprint(story))
		}
	}()
	c.d.epoch = c.metadataEpoch()
	for range 40 + c.rng.IntN(40) {
		var what string
		switch r := c.rng.IntN(12); {
		case r < 3:
			what = c.produce()
		case r == 3:
			c.upEpoch += 1 + int32(c.rng.IntN(2))
			what = fmt.Sprintf("clean election: epoch %d", c.upEpoch)
		case r == 4:
			what = c.unclean()
		case r < 8:
			what = c.copy()
		case r == 8:
			c.restart(c.rng.IntN(3) == 0)
			what = "A restarts"
			if c.unserved {
				what += ", serving nothing"
			}
		case c.unserved:
			what = "D cannot reach A"
		default:
			what = c.sync()
		}
		c.checkEpoch(what)
		story = append(story, what+"\n")
		if t.Failed() {
			return
		}
	}
	if c.unserved {
		c.restart(false)
		story = append(story, "A restarts\n")
	}
	for c.aEpoch != c.upEpoch || end(c.up) != c.al.LogEndOffset() {
		story = append(story, c.copy()+"\n")
	}
	story = append(story, c.sync()+"\n")
}

func (c *chainCase) produce() string {
	n := 1 + c.rng.IntN(3)
	from := end(c.up)
	c.appendUp(n, c.upEpoch)
	return fmt.Sprintf("produce %d batches at epoch %d from %d", n, c.upEpoch, from)
}

func (c *chainCase) appendUp(n int, epoch int32) {
	if c.used == nil {
		c.used = map[int32]bool{}
	}
	c.used[epoch] = true
	for range n {
		c.next++
		c.up = append(c.up, batch.Build(batch.Spec{BaseOffset: end(c.up), Epoch: epoch, Records: 1 + c.rng.IntN(3), Value: fmt.Appendf(nil, "b%d", c.next)}))
	}
}

// unclean elects a leader that holds a prefix of the log, and perhaps
// batches of an epoch the old leader's lineage skipped (its leader wrote
// them before it lost its leadership to a replica without them).
func (c *chainCase) unclean() string {
	c.upEpoch += 1 + int32(c.rng.IntN(2))
	keep := c.rng.IntN(len(c.up) + 1)
	what := fmt.Sprintf("unclean election: epoch %d, the leader has %d..%d", c.upEpoch, end(c.up[:keep]), end(c.up))
	lo, hi := int32(-1), c.upEpoch
	if keep > 0 {
		lo = epochOf(c.up[keep-1])
	}
	if keep < len(c.up) {
		hi = epochOf(c.up[keep])
	}
	c.up = c.up[:keep]
	var skipped []int32 // epochs between lo and hi no batch was ever written at
	for e := lo + 1; e < hi; e++ {
		if !c.used[e] {
			skipped = append(skipped, e)
		}
	}
	if len(skipped) > 0 && c.rng.IntN(2) == 0 {
		e := skipped[c.rng.IntN(len(skipped))]
		n := 1 + c.rng.IntN(2)
		c.appendUp(n, e)
		what += fmt.Sprintf(" and %d batches of epoch %d", n, e)
	}
	return what
}

// copy is A's next step: reconcile with a new upstream epoch (truncate to
// where A and the leader agree, KIP-101/279 done right), or copy some
// batches.
func (c *chainCase) copy() string {
	a := c.batches()
	if c.aEpoch != c.upEpoch {
		agree := 0
		for agree < len(a) && agree < len(c.up) && bytes.Equal(a[agree], c.up[agree]) {
			agree++
		}
		what := fmt.Sprintf("A reconciles at epoch %d", c.upEpoch)
		if agree < len(a) {
			before := c.epochNow()
			if err := c.al.TruncateTo(end(a[:agree])); err != nil {
				c.t.Fatal(err)
			}
			if e := c.epochNow(); e <= before {
				c.t.Errorf("A truncated %d..%d: served epoch %d, not above %d", end(a[:agree]), end(a), e, before)
			}
			what += fmt.Sprintf(", truncates %d..%d", end(a[:agree]), end(a))
		}
		c.aEpoch = c.upEpoch
		c.reconciled()
		return what
	}
	n := c.rng.IntN(len(c.up) - len(a) + 1)
	for _, b := range c.up[len(a) : len(a)+n] {
		if err := c.al.Append(b); err != nil {
			c.t.Fatal(err)
		}
	}
	c.reconciled()
	return fmt.Sprintf("A copies %d..%d", end(a), c.al.LogEndOffset())
}

// open (re)opens A's log as Manager.open does, and serves it.
func (c *chainCase) open() {
	l, err := storage.Open(c.m.cfg.DataDir, c.tp.Topic, c.tp.Partition, storage.Options{Logger: c.m.cfg.Logger, Flush: storage.FlushEveryAppend})
	if err != nil {
		c.t.Fatal(err)
	}
	if c.al, err = c.m.serve(c.tp, l); err != nil {
		c.t.Fatal(err)
	}
	c.m.catalog.add(c.tp, c.al)
}

// restart reopens A, serving nothing in the new run if unserved.
func (c *chainCase) restart(unserved bool) {
	c.m.catalog.remove(c.tp)
	if err := c.al.Close(); err != nil {
		c.t.Fatal(err)
	}
	c.unserved, c.m.catalog.notServed = unserved, unserved
	c.open()
	// Before the first Metadata: only the file and the log's epochs.
}

// reconciled is A fetching at the upstream epoch: its publish raises the
// served epoch (Manager.changed); serving nothing, it writes nothing.
func (c *chainCase) reconciled() {
	before := c.epochNow()
	if err := c.m.catalog.rise(c.store(), c.al, c.aEpoch); err != nil {
		c.t.Fatal(err)
	}
	if c.unserved {
		if e := c.epochNow(); e != before {
			c.t.Errorf("serving nothing, reconciled with upstream epoch %d: the served epoch moved %d -> %d", c.aEpoch, before, e)
		}
		return
	}
	if e := c.servedEpoch(); e < c.aEpoch {
		c.t.Errorf("reconciled with upstream epoch %d, serving epoch %d", c.aEpoch, e)
	}
}

func (c *chainCase) store() *servedEpoch {
	c.m.catalog.mu.Lock()
	defer c.m.catalog.mu.Unlock()
	return c.m.catalog.epochs[c.tp]
}

// epochNow is the served epoch as kept, served or not.
func (c *chainCase) epochNow() int32 {
	if c.unserved {
		if _, _, ok := c.m.CatalogPartition(c.tp.Topic, c.tp.Partition); ok {
			c.t.Fatal("serving nothing, the catalog serves the partition")
		}
		return c.store().store.Epoch()
	}
	return c.servedEpoch()
}

func (c *chainCase) servedEpoch() int32 {
	_, e, ok := c.m.CatalogPartition(c.tp.Topic, c.tp.Partition)
	if !ok {
		c.t.Fatal("the partition is not served")
	}
	return e
}

func (c *chainCase) checkEpoch(what string) {
	if c.unserved {
		return // checked at the next serving open
	}
	e := c.servedEpoch()
	if e < c.served {
		c.t.Errorf("after %s: served epoch %d, below %d served before", what, e, c.served)
	}
	c.served = max(c.served, e)
	if latest, ok := c.al.LatestEpoch(); ok && e < latest {
		c.t.Errorf("after %s: served epoch %d below the log's latest %d", what, e, latest)
	}
}

// batches are A's batches, in offset order.
func (c *chainCase) batches() [][]byte {
	var out [][]byte
	for off := c.al.LogStartOffset(); off < c.al.LogEndOffset(); {
		b, err := c.al.Read(off, 1<<20)
		if err != nil {
			c.t.Fatal(err)
		}
		s := batch.NewFrameScanner(b)
		for s.Next() {
			out = append(out, append([]byte(nil), s.Batch()...))
			off = s.Header().NextOffset()
		}
	}
	return out
}

func (c *chainCase) request(req kmsg.Request) kmsg.Response {
	resp, err := c.cl.SeedBrokers()[0].Request(context.Background(), req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func (c *chainCase) metadataEpoch() int32 {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(c.tp.Topic)
	req.Topics = append(req.Topics, rt)
	resp := c.request(req).(*kmsg.MetadataResponse)
	return resp.Topics[0].Partitions[0].LeaderEpoch
}

// sync has D fetch from A until it has caught up, reconciling as it is
// told to, then checks that it holds exactly A's batches.
func (c *chainCase) sync() string {
	d := &c.d
	var story bytes.Buffer
	fmt.Fprintf(&story, "sync from %d at epoch %d:", d.leo(), d.epoch)
	for range 100 {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = c.tp.Topic, c.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = c.tp.Partition, d.leo(), 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = d.epoch, -1
		if d.lastSent {
			rp.LastFetchedEpoch = d.lastEpoch()
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.request(req).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		switch err := kerr.ErrorForCode(p.ErrorCode); {
		case err == kerr.FencedLeaderEpoch || err == kerr.UnknownLeaderEpoch || err == kerr.NotLeaderForPartition:
			d.epoch = c.metadataEpoch()
			fmt.Fprintf(&story, " %v: epoch %d;", err, d.epoch)
			c.validate(&story)
		case err != nil:
			c.t.Errorf("fetching at %d (epoch %d, last fetched %d): %v", d.leo(), d.epoch, rp.LastFetchedEpoch, err)
			return story.String()
		case p.DivergingEpoch.Epoch >= 0 || p.DivergingEpoch.EndOffset >= 0:
			// As the replica fetcher: truncate to the end offset, or to
			// our own end of the answered epoch if that is earlier.
			fmt.Fprintf(&story, " diverging (%d, %d);", p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset)
			c.truncateD(min(p.DivergingEpoch.EndOffset, d.endOffsetFor(p.DivergingEpoch.Epoch)), &story)
		case len(p.RecordBatches) == 0:
			c.caughtUp()
			return story.String()
		default:
			s := batch.NewFrameScanner(p.RecordBatches)
			for s.Next() {
				d.batches = append(d.batches, append([]byte(nil), s.Batch()...))
			}
			fmt.Fprintf(&story, " read to %d;", d.leo())
		}
	}
	c.t.Errorf("D did not catch up in 100 fetches")
	return story.String()
}

// validate is D's answer to a new epoch, KIP-279: OffsetsForLeaderEpoch
// for the epoch of its last batch; it truncates to the end offset, or to
// its own end of the answered epoch when the leader answers an older one,
// and asks again for its new last epoch until nothing more is cut.
func (c *chainCase) validate(story *bytes.Buffer) {
	d := &c.d
	for d.leo() > 0 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = c.tp.Topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = c.tp.Partition, d.epoch, d.lastEpoch()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := c.request(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			c.t.Errorf("OffsetsForLeaderEpoch(%d) at epoch %d: %v", rp.LeaderEpoch, d.epoch, err)
			return
		}
		fmt.Fprintf(story, " epoch %d ends at (%d, %d);", rp.LeaderEpoch, p.LeaderEpoch, p.EndOffset)
		if p.EndOffset < 0 {
			c.t.Errorf("OffsetsForLeaderEpoch(%d): undefined (%d, %d) for an epoch the copy served", rp.LeaderEpoch, p.LeaderEpoch, p.EndOffset)
			return
		}
		to := p.EndOffset
		if p.LeaderEpoch < rp.LeaderEpoch {
			to = min(to, d.endOffsetFor(p.LeaderEpoch))
		}
		if to >= d.leo() {
			return
		}
		c.truncateD(to, story)
	}
}

// truncateD cuts D at offset (within the batch holding it, as the
// follower does to a batch boundary) and checks that every batch cut is
// one the copy no longer holds.
func (c *chainCase) truncateD(offset int64, story *bytes.Buffer) {
	d := &c.d
	a := map[int64][]byte{}
	for _, b := range c.batches() {
		h, _ := batch.ParseHeader(b)
		a[h.BaseOffset] = b
	}
	keep := 0
	for keep < len(d.batches) {
		h, _ := batch.ParseHeader(d.batches[keep])
		if h.NextOffset() > offset {
			break
		}
		keep++
	}
	for _, b := range d.batches[keep:] {
		h, _ := batch.ParseHeader(b)
		if bytes.Equal(a[h.BaseOffset], b) {
			c.t.Errorf("D truncates at %d the batch at %d, which the copy still holds", offset, h.BaseOffset)
		}
	}
	fmt.Fprintf(story, " D truncates to %d;", offset)
	d.batches = d.batches[:keep]
}

func (c *chainCase) caughtUp() {
	a := c.batches()
	if len(a) != len(c.d.batches) {
		c.t.Errorf("caught up, D holds %d batches to %d, the copy %d to %d", len(c.d.batches), c.d.leo(), len(a), c.al.LogEndOffset())
		return
	}
	for i := range a {
		if !bytes.Equal(a[i], c.d.batches[i]) {
			h, _ := batch.ParseHeader(a[i])
			c.t.Errorf("caught up, D's batch %d differs from the copy's at offset %d:\n%x\n%x", i, h.BaseOffset, c.d.batches[i], a[i])
			return
		}
	}
}

// spyLog reports whether the catalog served the partition while the log
// truncated.
type spyLog struct {
	*storage.Log
	during func()
}

func (l spyLog) TruncateTo(offset int64) error {
	l.during()
	return l.Log.TruncateTo(offset)
}

// While a truncation runs the partition is not served (a reader would see
// the shorter log under the old epoch, and a consumer past the new end
// would get OFFSET_OUT_OF_RANGE instead of being fenced); after it, it is
// served at a higher epoch, kept by a restart. A truncation that removes
// nothing changes nothing.
func TestServedEpochTruncation(t *testing.T) {
	dir := t.TempDir()
	m := &Manager{cfg: Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)}}
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	open := func() (*storage.Log, partLog, *bool) {
		l, err := storage.Open(dir, tp.Topic, tp.Partition, storage.Options{Logger: m.cfg.Logger})
		if err != nil {
			t.Fatal(err)
		}
		var servedDuring bool
		pl, err := m.serve(tp, spyLog{l, func() { _, _, servedDuring = m.CatalogPartition(tp.Topic, tp.Partition) }})
		if err != nil {
			t.Fatal(err)
		}
		m.catalog.add(tp, pl)
		return l, pl, &servedDuring
	}
	l, pl, servedDuring := open()
	epoch := func() int32 {
		t.Helper()
		_, e, ok := m.CatalogPartition(tp.Topic, tp.Partition)
		if !ok {
			t.Fatal("not served")
		}
		return e
	}
	if e := epoch(); e != 0 {
		t.Fatalf("a new partition serves epoch %d, want 0", e)
	}
	if err := pl.Append(batch.BuildRun(0, 3, 4, 2)); err != nil {
		t.Fatal(err)
	}
	m.catalog.mu.Lock()
	s := m.catalog.epochs[tp]
	m.catalog.mu.Unlock()
	if err := m.catalog.rise(s, pl, 3); err != nil {
		t.Fatal(err)
	}
	if e := epoch(); e != 3 {
		t.Fatalf("after batches of epoch 3: serving %d", e)
	}
	if err := pl.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	if e := epoch(); e != 3 || !*servedDuring {
		t.Fatalf("a truncation at the log end: serving %d (served during it: %v), want 3, served", e, *servedDuring)
	}
	if err := pl.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if *servedDuring {
		t.Error("the partition was served while it truncated")
	}
	if e := epoch(); e != 4 {
		t.Fatalf("after truncating 4..8: serving %d, want 4", e)
	}
	m.catalog.remove(tp)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _, _ = open()
	defer l.Close()
	if e := epoch(); e != 4 {
		t.Fatalf("reopened: serving %d, want 4", e)
	}
}

// A run that serves nothing (Config.NotServed) writes no served epoch for
// a reconciliation or for its log's epochs, and serves nothing; but a
// truncation raises the file past the 0 an earlier serving run served
// without writing it, so the next serving run fences that run's readers;
// and that run's open raises it to the log's latest epoch.
func TestServedEpochUnservedRun(t *testing.T) {
	dir := t.TempDir()
	m := &Manager{cfg: Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)}}
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	file := filepath.Join(storage.PartitionDir(dir, tp.Topic, tp.Partition), storage.ServedEpochFile)
	var l *storage.Log
	open := func(unserved bool) partLog {
		t.Helper()
		m.catalog.notServed = unserved
		var err error
		if l, err = storage.Open(dir, tp.Topic, tp.Partition, storage.Options{Logger: m.cfg.Logger}); err != nil {
			t.Fatal(err)
		}
		pl, err := m.serve(tp, l)
		if err != nil {
			t.Fatal(err)
		}
		m.catalog.add(tp, pl)
		return pl
	}
	restart := func(unserved bool) partLog {
		t.Helper()
		m.catalog.remove(tp)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return open(unserved)
	}
	onDisk := func() int32 {
		t.Helper()
		b, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		e, err := storage.ParseServedEpoch(b)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	rise := func(pl partLog, upstream int32) {
		t.Helper()
		m.catalog.mu.Lock()
		s := m.catalog.epochs[tp]
		m.catalog.mu.Unlock()
		if err := m.catalog.rise(s, pl, upstream); err != nil {
			t.Fatal(err)
		}
	}

	// Served at epoch 0, which is not written.
	pl := open(false)
	if err := pl.Append(batch.BuildRun(0, 0, 4, 2)); err != nil {
		t.Fatal(err)
	}
	rise(pl, 0)
	if _, e, ok := m.CatalogPartition(tp.Topic, tp.Partition); !ok || e != 0 || onDisk() != -1 {
		t.Fatalf("serving: epoch %d (served %v), on disk %d; want 0, served, none", e, ok, onDisk())
	}

	pl = restart(true)
	if _, _, ok := m.CatalogPartition(tp.Topic, tp.Partition); ok {
		t.Fatal("serving nothing, the catalog serves the partition")
	}
	if err := pl.Append(batch.BuildRun(8, 3, 4, 2)); err != nil {
		t.Fatal(err)
	}
	rise(pl, 7)
	if e := onDisk(); e != -1 {
		t.Fatalf("serving nothing, a reconciliation with epoch 7 over batches of epoch 3 wrote served epoch %d", e)
	}
	if err := pl.TruncateTo(4); err != nil { // removes 4..16: the batches of epoch 0 from 4 too
		t.Fatal(err)
	}
	if e := onDisk(); e != 1 {
		t.Fatalf("serving nothing, a truncation left served epoch %d on disk, want 1 (past the 0 served before)", e)
	}
	rise(pl, 9)
	if e := onDisk(); e != 1 {
		t.Fatalf("serving nothing, a reconciliation after the truncation wrote served epoch %d, want 1 kept", e)
	}
	if err := pl.Append(batch.BuildRun(4, 9, 4, 2)); err != nil {
		t.Fatal(err)
	}

	restart(false)
	defer l.Close()
	if _, e, ok := m.CatalogPartition(tp.Topic, tp.Partition); !ok || e != 9 || onDisk() != 9 {
		t.Fatalf("serving again: epoch %d (served %v), on disk %d; want the log's latest 9, served and written", e, ok, onDisk())
	}
}
