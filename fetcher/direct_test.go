package fetcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/internal/testcert"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// poisonPool counts the direct connections' buffers the workers take and
// release, and overwrites each one as it is released: a record appended
// from a released buffer would be that pattern, which fails the batch's
// CRC (storage.Log.Append) and is logged as a fetched batch that failed
// validation. It also keeps the most buffers out at once: a worker holds
// at most two (the response whose records it is appending, the one that
// has just come in), so a worker that kept its buffers until it exits
// (memory growing for its whole life, nothing reused) shows there, where
// the counts at the end still balance.
type poisonPool struct {
	taken, released atomic.Int64
	mu              sync.Mutex
	out             map[*wire.FetchBuffer]bool
	peak            int // most buffers out at once
	double          int // released twice, or never taken
}

func (p *poisonPool) take(b *wire.FetchBuffer) {
	p.taken.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out == nil {
		p.out = map[*wire.FetchBuffer]bool{}
	}
	p.out[b] = true
	p.peak = max(p.peak, len(p.out))
}

func (p *poisonPool) release(b *wire.FetchBuffer) {
	p.released.Add(1)
	p.mu.Lock()
	if !p.out[b] {
		p.double++
	}
	delete(p.out, b)
	p.mu.Unlock()
	poison := b.Bytes()
	for i := range poison {
		poison[i] = 0xA5
	}
}

// poolHook adapts a poisonPool to bufferHook.
type poolHook struct{ p *poisonPool }

func (h poolHook) taken(b *wire.FetchBuffer)    { h.p.take(b) }
func (h poolHook) released(b *wire.FetchBuffer) { h.p.release(b) }

// check fails t unless every buffer taken was released once, and no more
// than two per worker (workers: at most that many at once, one a broker)
// were ever out together.
func (p *poisonPool) check(t *testing.T, what string, workers int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, r := p.taken.Load(), p.released.Load(); n != r || len(p.out) != 0 || p.double != 0 {
		t.Errorf("%s: %d buffers taken, %d released, %d never released, %d released twice or not taken", what, n, r, len(p.out), p.double)
	}
	if p.peak > 2*workers {
		t.Errorf("%s: %d buffers out at once, want at most 2 for each of %d workers: buffers kept past their records' appends", what, p.peak, workers)
	}
}

// warnings keeps the lines a Manager logs.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	w.mu.Lock()
	w.lines = append(w.lines, b.String())
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// count is the number of lines containing s.
func (w *warnings) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// connCounter counts Fetch requests by the connection that carried them.
type connCounter struct {
	NopObserver
	direct, viaClient, directFailed, respBytes, staged atomic.Int64
}

func (c *connCounter) RequestDone(s RequestStats) {
	if s.Key != kmsg.Fetch {
		return
	}
	switch {
	case s.Direct && s.Err != nil:
		c.directFailed.Add(1)
	case s.Direct:
		c.direct.Add(1)
		c.respBytes.Add(s.ResponseBytes)
		c.staged.Add(s.StagedBytes)
	case s.Err == nil:
		c.viaClient.Add(1)
	}
}

// conns records the direct connections a Dial hook made, so a test can
// break them, and fails the first failFirst dials.
type conns struct {
	mu        sync.Mutex
	all       []net.Conn
	dials     int
	failFirst int
}

func (c *conns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	c.dials++
	fail := c.dials <= c.failFirst
	c.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("dial %s: refused by the test", addr)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		c.mu.Lock()
		c.all = append(c.all, conn)
		c.mu.Unlock()
	}
	return conn, err
}

// breakAll closes every connection dialled so far, as a broker restart
// would.
func (c *conns) breakAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.all {
		conn.Close()
	}
	c.all = nil
}

// produceValues writes n records to each partition of topic, with
// values that say where they belong.
func produceValues(t *testing.T, c *kfake.Cluster, topic string, parts int32, from, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(64 << 10),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p := range parts {
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d-%s", topic, p, i, bytes.Repeat([]byte{'x'}, 200))})
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// sameAsBroker checks that each partition's copy holds, byte for byte,
// the batches the cluster answers a consumer's Fetch with from offset 0.
func sameAsBroker(t *testing.T, cl *kgo.Client, dir, topic string, parts int32, want int64) {
	t.Helper()
	ctx := context.Background()
	for p := range parts {
		var broker []byte
		for off := int64(0); off < want; {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 10
			rt := kmsg.NewFetchRequestTopic()
			leader, id := leaderOf(t, cl, topic, p)
			rt.Topic, rt.TopicID = topic, id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			kresp, err := cl.Broker(int(leader)).Request(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			resp := kresp.(*kmsg.FetchResponse)
			rp0 := resp.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(rp0.ErrorCode); err != nil {
				t.Fatalf("fetching %s-%d at %d to compare: %v", topic, p, off, err)
			}
			s := batch.NewFrameScanner(rp0.RecordBatches)
			for s.Next() {
				broker = append(broker, s.Batch()...)
				off = s.Header().NextOffset()
			}
		}
		ours, _, end := copyOf(t, dir, topic, p)
		if end != want || !bytes.Equal(ours, broker) {
			t.Errorf("%s-%d: the copy ends at %d (want %d) and holds %d bytes; the broker sent %d bytes; equal: %v",
				topic, p, end, want, len(ours), len(broker), bytes.Equal(ours, broker))
		}
	}
}

// leaderOf is the leader of topic-p and the topic's id.
func leaderOf(t *testing.T, cl *kgo.Client, topic string, p int32) (int32, [16]byte) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, pm := range resp.Topics[0].Partitions {
		if pm.Partition == p {
			return pm.Leader, resp.Topics[0].TopicID
		}
	}
	t.Fatalf("no metadata for %s-%d", topic, p)
	return -1, [16]byte{}
}

// runDirect runs a Manager with Config.DirectFetch following topic of c
// until stop, which returns Run's error once every worker has ended.
func runDirect(t *testing.T, c *kfake.Cluster, dir, topic string, df *DirectFetch, pool *poisonPool, logs *warnings,
	obs Observer, opts ...kgo.Opt) (m *Manager, stop func() error) {
	t.Helper()
	m = kfakeManager(t, c, Config{
		DataDir: dir, Follow: func(tp string) bool { return tp == topic },
		DirectFetch:      df,
		MetadataInterval: 200 * time.Millisecond,
		// Small responses: many Fetches, so many buffers, per partition.
		Limits:    wire.FetchLimits{MaxWaitMillis: 100, MinBytes: 1, MaxBytes: 64 << 10, PartitionMaxBytes: 16 << 10},
		Backoff:   follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Logger:    slog.New(logs),
		Observers: []Observer{obs},
	}, opts...)
	if pool != nil {
		m.buffers = poolHook{pool}
	}
	return m, startManager(t, m)
}

// Fetches on the workers' own connections, against kfake, through every
// path that drops a flight or a response: Fetches answered
// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH, partitions moved to
// another broker mid-copy (hand-offs, reconciliations), every direct
// connection broken mid-copy (a failed flight, a re-dial), and Run ended
// while responses were coming (a second Manager finishes the copy). Every
// buffer taken is released once, by the time Run returns; each one is
// overwritten as it is released, and still the copy is byte for byte what
// the broker sent and no fetched batch ever failed its CRC: no record was
// appended from a released buffer.
func TestDirectFetchBuffersKfake(t *testing.T) {
	const parts = 6
	c := newKfake(t, kfake.NumBrokers(3), kfake.SeedTopics(parts, "d"))
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: 3})
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.FencedLeaderEpoch, Count: 2})
	const each = 3000 // ~700 KiB a partition: dozens of 16 KiB answers
	produceValues(t, c, "d", parts, 0, each)
	dir := t.TempDir()
	pool, logs, obs, dialed := &poisonPool{}, &warnings{}, &connCounter{}, &conns{}
	df := &DirectFetch{Dial: dialed.dial, ClientID: "kfollower-test"}

	m, stop := runDirect(t, c, dir, "d", df, pool, logs, obs)
	// Part of the way: the direct connections carry records.
	deadline := time.Now().Add(60 * time.Second)
	for obs.direct.Load() < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("no 20 Fetches on the direct connections: %d direct, %d through the client", obs.direct.Load(), obs.viaClient.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for p := range int32(2) {
		if err := c.MoveTopicPartition("d", p, (c.LeaderFor("d", p)+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	dialed.breakAll()
	failedBefore := obs.directFailed.Load()
	produceValues(t, c, "d", parts, each, each)
	// Ended while the copy is under way (it has 2*each a partition to go
	// through at 16 KiB an answer).
	for obs.direct.Load() < 60 {
		if time.Now().After(deadline) {
			t.Fatalf("no 60 direct Fetches: %d", obs.direct.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var copied int64
	for _, st := range m.Statuses() {
		copied += st.LogEndOffset
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stagedTaken := m.StagedAppended()
	t.Logf("the first Run ended with %d of %d records copied, %d KiB read on its direct connections", copied, parts*2*each, obs.respBytes.Load()>>10)
	pool.check(t, "after the first Run", 3)
	if obs.directFailed.Load() == 0 {
		t.Errorf("breaking the direct connections failed no Fetch (%d failed before the break)", failedBefore)
	}

	m, stop = runDirect(t, c, dir, "d", df, pool, logs, obs)
	waitCopied(t, m, parts, parts*2*each, "the second Run")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stagedTaken += m.StagedAppended()
	pool.check(t, "after the second Run", 3)
	if n := logs.count("failed validation"); n != 0 {
		t.Errorf("%d fetched batches failed validation: a record was read from a released buffer", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sameAsBroker(t, cl, dir, "d", parts, 2*each)
	t.Logf("%d Fetches direct (%d MiB read, %d KiB staged as read, %d KiB appended where staged), %d through the client, %d direct failed; %d buffers; %d dials",
		obs.direct.Load(), obs.respBytes.Load()>>20, obs.staged.Load()>>10, stagedTaken>>10, obs.viaClient.Load(), obs.directFailed.Load(), pool.taken.Load(), dialed.dials)
	// Most records are written as they are read (storage.Log.Stage), and
	// still the copy is the broker's, through leader moves and broken
	// connections, from buffers overwritten as they were released.
	if st, rb := obs.staged.Load(), obs.respBytes.Load(); st < rb/4 {
		t.Errorf("%d bytes staged as read of %d read on the direct connections: want most", st, rb)
	}
	// And taken where they lay: the Appends got the very bytes staged.
	if taken, st := stagedTaken, obs.staged.Load(); taken < st/2 {
		t.Errorf("%d of the %d bytes staged were appended where they lay: want most", taken, st)
	}
	// A buffer per direct answer, and one per answer dropped as a Run
	// ended (worker.land: at most one per worker, 3 workers, 2 Runs).
	if d, n := obs.direct.Load(), pool.taken.Load(); d == 0 || n < d || n > d+6 {
		t.Errorf("%d direct Fetches answered, %d buffers taken: want one each, and at most 6 more", d, n)
	}
}

// A cluster that wants SASL: the direct connection's first Fetch is
// refused (kfake, as Kafka, drops a connection that has not
// authenticated), and every Fetch goes through the client's SASL
// connections instead; the copy is whole.
func TestDirectFetchSASLFallsBackKfake(t *testing.T) {
	const parts = 2
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "s"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "secret"))
	auth := kgo.SASL(plain.Auth{User: "admin", Pass: "secret"}.AsMechanism())
	produceValues(t, c, "s", parts, 0, 500, auth)
	pool, logs, obs := &poisonPool{}, &warnings{}, &connCounter{}
	dir := t.TempDir()
	m, stop := runDirect(t, c, dir, "s", &DirectFetch{}, pool, logs, obs, auth)
	waitCopied(t, m, parts, parts*500, "the copy under SASL")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	pool.check(t, "under SASL", 1)
	if obs.direct.Load() != 0 || obs.viaClient.Load() == 0 {
		t.Errorf("%d Fetches answered on the direct connection, %d through the client: want none and some", obs.direct.Load(), obs.viaClient.Load())
	}
	if logs.count("cannot fetch on a connection of its own") == 0 {
		t.Error("the refused direct connection was not logged")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), auth)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sameAsBroker(t, cl, dir, "s", parts, 500)
}

// Dials that fail: the Fetches go through the client meanwhile, and once
// a dial succeeds they go on the direct connection. Backoff is zero, so
// each Fetch dials until one succeeds: counted, not timed.
func TestDirectFetchDialFailureRecoversKfake(t *testing.T) {
	const parts = 2
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "r"))
	produceValues(t, c, "r", parts, 0, 2000)
	dialed := &conns{failFirst: 3}
	pool, logs, obs := &poisonPool{}, &warnings{}, &connCounter{}
	dir := t.TempDir()
	df := &DirectFetch{Dial: dialed.dial, Backoff: func(int) time.Duration { return 0 }}
	m, stop := runDirect(t, c, dir, "r", df, pool, logs, obs)
	waitCopied(t, m, parts, parts*2000, "the copy")
	// The long polls go on; once the dials have failed three times a
	// Fetch goes direct, which these records then come on.
	deadline := time.Now().Add(30 * time.Second)
	for obs.direct.Load() == 0 {
		if logs.count("cannot fetch on a connection of its own") > 3 || time.Now().After(deadline) {
			t.Fatalf("no direct Fetch after %d failed dials", logs.count("cannot fetch on a connection of its own"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	produceValues(t, c, "r", parts, 2000, 1000)
	waitCopied(t, m, parts, parts*3000, "the copy")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	pool.check(t, "after dial failures", 1)
	if via, direct := obs.viaClient.Load(), obs.direct.Load(); via < 3 || direct == 0 {
		t.Errorf("%d Fetches through the client, %d direct: want at least the 3 whose dials failed, then direct ones", via, direct)
	}
	if n := logs.count("cannot fetch on a connection of its own"); n != 3 {
		t.Errorf("%d failed dials logged, want 3", n)
	}
	if n := logs.count("fetching on a connection of its own"); n != 1 {
		t.Errorf("the direct connection was logged open %d times, want 1", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sameAsBroker(t, cl, dir, "r", parts, 3000)
}

// failingRequester fails every request: the fallback that must not be
// taken.
type failingRequester struct{ n atomic.Int64 }

func (f *failingRequester) Request(context.Context, kmsg.Request) (kmsg.Response, error) {
	f.n.Add(1)
	return nil, fmt.Errorf("fallback used")
}

// directFetch alone, against one kfake broker: a changed address in
// Metadata closes the connection and dials the new one; a connection that
// breaks after it answered fails the Fetch in the air (as franz-go's
// would) and the next one dials again at once, without backoff; nothing
// goes through the fallback.
func TestDirectFetchRedials(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a"))
	real := c.ListenAddrs()[0]
	var mu sync.Mutex
	var asked []string
	dialed := &conns{}
	addr := "first.example:9092"
	fallback := &failingRequester{}
	d := &directFetch{
		broker: 0, fallback: fallback, now: time.Now,
		cfg: &DirectFetch{
			Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
				mu.Lock()
				asked = append(asked, a)
				mu.Unlock()
				return dialed.dial(ctx, network, real) // every name is this broker
			},
			Backoff: func(int) time.Duration { return time.Hour }, // a backoff would fail the test
		},
		addr: func() (string, bool) { mu.Lock(); defer mu.Unlock(); return addr, true },
		log:  func(slog.Level, string, ...any) {},
	}
	defer d.close()
	fetch := func() fetchResult { return fetchOnce(d) }
	for i := range 2 {
		if r := fetch(); r.err != nil || !r.direct {
			t.Fatalf("Fetch %d: direct %v, err %v", i, r.direct, r.err)
		}
	}
	mu.Lock()
	addr = "second.example:9092"
	mu.Unlock()
	if r := fetch(); r.err != nil || !r.direct {
		t.Fatalf("Fetch after the address changed: direct %v, err %v", r.direct, r.err)
	}
	dialed.breakAll()
	if r := fetch(); r.err == nil || !r.direct {
		t.Fatalf("Fetch on a broken connection: direct %v, err %v; want the error", r.direct, r.err)
	}
	if r := fetch(); r.err != nil || !r.direct {
		t.Fatalf("Fetch after the break: direct %v, err %v", r.direct, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"first.example:9092", "second.example:9092", "second.example:9092"}
	if strings.Join(asked, " ") != strings.Join(want, " ") {
		t.Errorf("dialled %v, want %v", asked, want)
	}
	if n := fallback.n.Load(); n != 0 {
		t.Errorf("%d requests went through the fallback", n)
	}
}

// A direct connection unused for longer than connIdle is closed and
// dialled again before the next Fetch, as kgo does to its idle ones: a
// broker closes a connection idle past connections.max.idle.ms, which the
// client sees only when it writes on it. Here the connection is broken
// (as the broker's close) after each gap: one within connIdle is the
// connection's, and its Fetch fails; past connIdle the Fetch goes on a
// new connection.
func TestDirectFetchIdleRedials(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a"))
	dialed := &conns{}
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	fallback := &failingRequester{}
	d := &directFetch{
		broker: 0, fallback: fallback,
		now:  func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		cfg:  &DirectFetch{Dial: dialed.dial, Backoff: func(int) time.Duration { return time.Hour }},
		addr: func() (string, bool) { return c.ListenAddrs()[0], true },
		log:  func(slog.Level, string, ...any) {},
	}
	defer d.close()
	fetch := func() fetchResult { return fetchOnce(d) }
	idle := func(gap time.Duration) {
		mu.Lock()
		now = now.Add(gap)
		mu.Unlock()
		dialed.breakAll()
	}
	if r := fetch(); r.err != nil || !r.direct {
		t.Fatalf("first Fetch: direct %v, err %v", r.direct, r.err)
	}
	idle(connIdle)
	if r := fetch(); r.err == nil {
		t.Fatal("a Fetch on a connection idle for connIdle, then broken, did not fail: it was dialled again too early")
	}
	if r := fetch(); r.err != nil || !r.direct { // dialled again at once, the break
		t.Fatalf("Fetch after the break: direct %v, err %v", r.direct, r.err)
	}
	idle(connIdle + time.Second)
	if r := fetch(); r.err != nil || !r.direct {
		t.Fatalf("Fetch after %v idle: direct %v, err %v; want it on a new connection", connIdle+time.Second, r.direct, r.err)
	}
	dialed.mu.Lock()
	defer dialed.mu.Unlock()
	if dialed.dials != 3 {
		t.Errorf("%d dials, want 3: the first, after the break, after the idle gap", dialed.dials)
	}
	if n := fallback.n.Load(); n != 0 {
		t.Errorf("%d requests went through the fallback", n)
	}
}

// Under TLS, with the client's TLS settings: every Fetch goes on the
// direct connections (none through the client) and the copy is the
// broker's.
func TestDirectFetchTLSKfake(t *testing.T) {
	const parts = 3
	ca := testcert.NewCA(t, "test CA")
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "tls"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}}))
	clientTLS := &tls.Config{RootCAs: ca.Pool}
	withTLS := kgo.DialTLSConfig(clientTLS)
	produceValues(t, c, "tls", parts, 0, 1000, withTLS)
	p, logs, obs := &poisonPool{}, &warnings{}, &connCounter{}
	dir := t.TempDir()
	m, stop := runDirect(t, c, dir, "tls", &DirectFetch{TLS: clientTLS}, p, logs, obs, withTLS)
	waitCopied(t, m, parts, parts*1000, "the copy over TLS")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	p.check(t, "over TLS", 1)
	if obs.direct.Load() == 0 || obs.viaClient.Load() != 0 {
		t.Errorf("%d Fetches on the direct connection, %d through the client: want all direct", obs.direct.Load(), obs.viaClient.Load())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), withTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sameAsBroker(t, cl, dir, "tls", parts, 1000)
}

// fetchOnce sends one small Fetch on d, as a consumer (replica id -1),
// and releases its buffer at once: the tests look at how it went, not at
// its records.
func fetchOnce(d *directFetch) fetchResult {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 1, 1<<20
	r := d.fetch(context.Background(), req, nil)
	r.buf.Release()
	return r
}
