package groups_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/groups"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const topic = "t"

// catalog serves one log as partition 0 of topic, under the upstream id.
type catalog struct {
	id  [16]byte
	log *storage.Log
}

func (c catalog) Topics() []server.Topic {
	return []server.Topic{{Name: topic, ID: c.id, Partitions: 1}}
}

func (c catalog) Partition(t string, p int32) (server.Log, int32, bool) {
	if t != topic || p != 0 {
		return nil, 0, false
	}
	return c.log, 0, true
}

func (c catalog) HighWatermark(t string, p int32) (int64, bool) {
	if t != topic || p != 0 {
		return 0, false
	}
	return c.log.DurableEnd(), true
}

func (c catalog) TopicName(id [16]byte) (string, bool) { return topic, id == c.id }

// observer records what the forwarder reports.
type observer struct {
	mu        sync.Mutex
	forwarded map[string]int // "api error reached"
	above     int
}

func (o *observer) Forwarded(api, errName string, reached bool, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forwarded[fmt.Sprintf("%s %s %v", api, errName, reached)]++
}

func (o *observer) CommitAboveWatermark(string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.above++
}

func (o *observer) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.forwarded[key]
}

// setup is a kfake cluster holding topic (one partition) and a server over
// a local log of n records of it, forwarding groups to the cluster.
type setup struct {
	fake *kfake.Cluster
	logs *syncBuffer // the forwarder's log
	addr string      // the server's
	obs  *observer
	fwd  *groups.Forwarder
}

func start(t *testing.T, n int, fakeOpts ...kfake.Opt) *setup {
	t.Helper()
	fake, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, topic)}, fakeOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return startOver(t, fake, fake.ListenAddrs(), n)
}

func startOver(t *testing.T, fake *kfake.Cluster, seeds []string, n int) *setup {
	t.Helper()
	var id [16]byte
	if fake != nil {
		adm := kadm.NewClient(newClient(t, fake.ListenAddrs()))
		td, err := adm.ListTopics(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		id = td[topic].ID
	}
	l, err := storage.Open(t.TempDir(), topic, 0, storage.Options{Flush: storage.FlushEveryAppend, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if n > 0 {
		if err := l.Append(batch.BuildRun(0, 0, n/10, 10)); err != nil {
			t.Fatal(err)
		}
	}
	obs := &observer{forwarded: map[string]int{}}
	logs := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fwd, err := groups.New(ctx, groups.Config{
		Client:   []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTimeout(time.Second)},
		Catalog:  catalog{id, l},
		Observer: obs,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		// A short lookup keeps the unreachable cases quick.
		LookupTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Catalog: catalog{id, l}, ClusterID: "kf", Groups: fwd, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	// Cleanups run last-in first-out: the server stops before the
	// forwarder closes, and both before the log and the fake close.
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		fwd.Close()
	})
	return &setup{fake: fake, logs: logs, addr: ln.Addr().String(), obs: obs, fwd: fwd}
}

// syncBuffer is a log the forwarder writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeGroup reads n records of topic through kfollower in group g,
// commits them and leaves; it returns the offsets read.
func consumeGroup(t *testing.T, addr, g string, n int, opts ...kgo.Opt) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []int64
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s: %d of %d records within 30 s", g, len(got), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("group %s: %v", g, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s: committing through kfollower: %v", g, err)
	}
	return got
}

// committed is group g's committed offset of topic-0 in the cluster.
func committed(t *testing.T, fake *kfake.Cluster, g string) int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, fake.ListenAddrs()))
	os, err := adm.FetchOffsets(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := os.Lookup(topic, 0)
	if !ok {
		return -1
	}
	return o.At
}

// A classic group consumer and a KIP-848 one (kgo's server-side balancer)
// read every record once through kfollower; their commits land in the
// cluster, and the cluster's DescribeGroups and kfollower's agree.
func TestGroupConsumers(t *testing.T) {
	const n = 100
	s := start(t, n)
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic", nil},
		{"KIP-848", []kgo.Opt{kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := "g-" + tc.name
			got := consumeGroup(t, s.addr, g, n, tc.opts...)
			for i, o := range got {
				if o != int64(i) {
					t.Fatalf("record %d has offset %d: want each offset once, in order", i, o)
				}
			}
			if c := committed(t, s.fake, g); c != n {
				t.Fatalf("the cluster holds group %s's commit %d, want %d", g, c, n)
			}
			// The cluster's ListGroups and DescribeGroups, asked
			// through kfollower.
			adm := kadm.NewClient(newClient(t, []string{s.addr}))
			ctx := context.Background()
			lg, err := adm.ListGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := lg[g]; !ok {
				t.Fatalf("ListGroups through kfollower: %v, want %s among them", lg.Groups(), g)
			}
			offs, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := offs.Lookup(topic, 0); o.At != n {
				t.Fatalf("OffsetFetch through kfollower: %+v, want %d", o, n)
			}
		})
	}
	if got := s.obs.count("JoinGroup NONE true") + s.obs.count("ConsumerGroupHeartbeat NONE true"); got == 0 {
		t.Errorf("the observer saw no JoinGroup nor ConsumerGroupHeartbeat forwarded: %v", s.obs.forwarded)
	}
	if s.obs.above != 0 {
		t.Errorf("%d commits counted above the high watermark, want none", s.obs.above)
	}
}

// A group moves from the cluster to kfollower and back: each continues
// from the other's commit, no record twice, none skipped.
func TestMoveGroup(t *testing.T) {
	const n = 100
	s := start(t, n)
	// The cluster holds the same offsets (its own records).
	p := newClient(t, s.fake.ListenAddrs(), kgo.DefaultProduceTopic(topic))
	for i := range n {
		if err := p.ProduceSync(context.Background(), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(addr string, at int64) {
		adm := kadm.NewClient(newClient(t, []string{addr}))
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(context.Background(), "mover", os); err != nil {
			t.Fatal(err)
		}
	}
	commit(s.fake.ListenAddrs()[0], 40) // half read on the cluster
	cl := newClient(t, []string{s.addr}, kgo.ConsumerGroup("mover"), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []int64
	for len(got) < 30 {
		fs := cl.PollRecords(ctx, 30-len(got))
		if ctx.Err() != nil {
			t.Fatalf("%d of 30 records", len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	if got[0] != 40 || got[len(got)-1] != 69 {
		t.Fatalf("through kfollower the group read offsets %d-%d, want 40-69", got[0], got[len(got)-1])
	}
	if err := cl.CommitRecords(ctx, lastRecord(got)); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if c := committed(t, s.fake, "mover"); c != 70 {
		t.Fatalf("the cluster holds %d, want 70", c)
	}
}

func lastRecord(offsets []int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: 0, Offset: offsets[len(offsets)-1], LeaderEpoch: 0}
}

// An OffsetCommit above the served high watermark is forwarded unchanged
// and counted.
func TestCommitAboveHighWatermark(t *testing.T) {
	s := start(t, 10)
	adm := kadm.NewClient(newClient(t, []string{s.addr}))
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 500, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(context.Background(), "ahead", os); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, s.fake, "ahead"); c != 500 {
		t.Fatalf("the cluster holds %d, want 500 (forwarded unchanged)", c)
	}
	if s.obs.above != 1 {
		t.Fatalf("%d commits counted above the high watermark, want 1", s.obs.above)
	}
}

// ApiVersions advertises for the group keys only what both kmsg and the
// upstream take; a version the upstream does not take is refused with
// UNSUPPORTED_VERSION, not sent at another.
func TestVersions(t *testing.T) {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.JoinGroup), 7)
	v.SetMaxKeyVersion(int16(kmsg.ConsumerGroupDescribe), -1)
	s := start(t, 0, kfake.MaxVersions(v))
	cl := newClient(t, []string{s.addr})
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if r := got[int16(kmsg.JoinGroup)]; r[1] != 7 {
		t.Errorf("JoinGroup advertised v%d-v%d, want up to v7 (the upstream's max)", r[0], r[1])
	}
	if r, ok := got[int16(kmsg.ConsumerGroupDescribe)]; ok {
		t.Errorf("ConsumerGroupDescribe advertised v%d-v%d, which the upstream does not take", r[0], r[1])
	}
	if r := got[int16(kmsg.Heartbeat)]; r[1] != kmsg.NewPtrHeartbeatRequest().MaxVersion() {
		t.Errorf("Heartbeat advertised v%d-v%d, want kmsg's max %d", r[0], r[1], kmsg.NewPtrHeartbeatRequest().MaxVersion())
	}
	// A JoinGroup v9 (above the advertised v7, as from a client that
	// ignores ApiVersions) is refused, not downgraded.
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 9, "g", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jresp := sendRaw(t, s.addr, jg).(*kmsg.JoinGroupResponse)
	if jresp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("JoinGroup v9: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(jresp.ErrorCode))
	}
}

// An upstream that cannot be reached: FindCoordinator and the group
// requests get COORDINATOR_NOT_AVAILABLE with a message, assigned reads
// keep working, and the observer counts the requests as not reached.
func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	s := startOver(t, nil, []string{dead}, 20)
	c := rawConn(t, s.addr)
	for _, v := range []int16{3, 4} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKey, fc.CoordinatorKeys = v, "g", []string{"g"}
		resp := c.do(t, fc).(*kmsg.FindCoordinatorResponse)
		code, msg := resp.ErrorCode, resp.ErrorMessage
		if v >= 4 {
			code, msg = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].ErrorMessage
		}
		if code != kerr.CoordinatorNotAvailable.Code || msg == nil || !strings.Contains(*msg, "cannot reach the upstream cluster") {
			t.Errorf("FindCoordinator v%d: %v %v, want COORDINATOR_NOT_AVAILABLE with a message", v, kerr.ErrorForCode(code), msg)
		}
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "m", 1
	if resp := c.do(t, hb).(*kmsg.HeartbeatResponse); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("Heartbeat: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(resp.ErrorCode))
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group = 8, "g"
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	if resp := c.do(t, oc).(*kmsg.OffsetCommitResponse); len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("OffsetCommit: %+v, want COORDINATOR_NOT_AVAILABLE for the partition", resp.Topics)
	}
	if s.obs.count("Heartbeat COORDINATOR_NOT_AVAILABLE false") != 1 || s.obs.count("FindCoordinator COORDINATOR_NOT_AVAILABLE false") != 2 {
		t.Errorf("observed %v, want the requests counted as not reached", s.obs.forwarded)
	}
	// Four failures, one warning (the rate limit is 30 s).
	if n := strings.Count(s.logs.String(), "cannot reach the upstream cluster for consumer groups"); n != 1 {
		t.Errorf("%d warnings for four failures within the rate limit, want 1:\n%s", n, s.logs.String())
	}
	// Assigned reads do not need the upstream.
	cl := newClient(t, []string{s.addr}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n := 0; n < 20; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("assigned read: %d of 20 records", n)
		}
		n += len(fs.Records())
	}
}

// sendRaw sends req at its version on a connection of its own, without
// asking ApiVersions first, and reads the answer.
func sendRaw(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 7)      // correlation id
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading the answer to %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	body = body[4:] // correlation id
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		body = body[1:] // no header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawConn sends requests one at a time on one connection, as a client's
// coordinator connection does.
type raw struct {
	cl *kgo.Client
}

func rawConn(t *testing.T, addr string) raw {
	return raw{newClient(t, []string{addr})}
}

// do sends req at its version to the seed broker (kfollower).
func (r raw) do(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := r.cl.SeedBrokers()[0].Request(ctx, &atVersion{req})
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// atVersion pins a request's version (kgo sends its highest otherwise).
type atVersion struct{ kmsg.Request }

func (a *atVersion) MaxVersion() int16 { return a.Request.GetVersion() }

// The upstream's NOT_COORDINATOR is passed back and forgets the cached
// coordinator: the client's next FindCoordinator looks it up upstream
// again, and the requests after it reach the coordinator.
func TestNotCoordinatorRefinds(t *testing.T) {
	s := start(t, 0)
	var mu sync.Mutex
	lookups := 0
	s.fake.ControlKey(int16(kmsg.FindCoordinator), func(kmsg.Request) (kmsg.Response, error, bool) {
		s.fake.KeepControl()
		mu.Lock()
		lookups++
		mu.Unlock()
		return nil, nil, false // kfake answers
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return lookups }
	c := rawConn(t, s.addr)
	find := func() {
		t.Helper()
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 4, []string{"g"}
		if co := c.do(t, fc).(*kmsg.FindCoordinatorResponse).Coordinators[0]; co.ErrorCode != 0 {
			t.Fatalf("FindCoordinator: %v", kerr.ErrorForCode(co.ErrorCode))
		}
	}
	heartbeat := func() int16 {
		t.Helper()
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "m", 1
		return c.do(t, hb).(*kmsg.HeartbeatResponse).ErrorCode
	}
	find()
	find() // cached
	if n := count(); n != 1 {
		t.Fatalf("%d lookups upstream for two FindCoordinator, want 1 (cached)", n)
	}
	s.fake.ControlKey(int16(kmsg.Heartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil, true // once
	})
	if code := heartbeat(); code != kerr.NotCoordinator.Code {
		t.Fatalf("Heartbeat: %v, want the upstream's NOT_COORDINATOR passed back", kerr.ErrorForCode(code))
	}
	find()
	if n := count(); n != 2 {
		t.Fatalf("%d lookups upstream, want 2: NOT_COORDINATOR must forget the coordinator", n)
	}
	if code := heartbeat(); code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("Heartbeat after finding the coordinator again: %v", kerr.ErrorForCode(code))
	}
	// A lost upstream connection: COORDINATOR_NOT_AVAILABLE with a
	// message, the coordinator forgotten, and the next request on a new
	// connection reaches it.
	s.fake.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, errors.New("drop the connection"), true
	})
	if code := heartbeat(); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("Heartbeat over a lost connection: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	find()
	if n := count(); n != 3 {
		t.Fatalf("%d lookups upstream, want 3: a lost connection must forget the coordinator", n)
	}
	if code := heartbeat(); code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("Heartbeat after the connection was lost and the coordinator found again: %v", kerr.ErrorForCode(code))
	}
	if n := s.obs.count("Heartbeat COORDINATOR_NOT_AVAILABLE false"); n != 1 {
		t.Errorf("observed %v, want one Heartbeat not reached", s.obs.forwarded)
	}
}

// DescribeGroups and OffsetFetch v8+ naming groups of several upstream
// coordinators: each coordinator gets its own groups and the answers come
// back merged, in the request's order.
func TestShardedAcrossCoordinators(t *testing.T) {
	s := start(t, 0, kfake.NumBrokers(3))
	ctx := context.Background()
	direct := kadm.NewClient(newClient(t, s.fake.ListenAddrs()))
	var names []string
	coordinators := map[int32]bool{}
	for i := range 8 {
		g := fmt.Sprintf("sharded-%d", i)
		names = append(names, g)
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: int64(i), LeaderEpoch: -1})
		if err := direct.CommitAllOffsets(ctx, g, os); err != nil {
			t.Fatal(err)
		}
		cs := direct.FindGroupCoordinators(ctx, g)
		if err := cs[g].Err; err != nil {
			t.Fatal(err)
		}
		coordinators[cs[g].NodeID] = true
	}
	if len(coordinators) < 2 {
		t.Fatalf("the groups have coordinators %v: the test needs groups on several", coordinators)
	}
	cl := newClient(t, []string{s.addr})
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = names
	dresp, err := dg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range names {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		of.Groups = append(of.Groups, rg)
	}
	oresp, err := of.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Groups) != len(names) || len(oresp.Groups) != len(names) {
		t.Fatalf("%d described and %d fetched, want %d each", len(dresp.Groups), len(oresp.Groups), len(names))
	}
	for i, g := range names {
		if d := dresp.Groups[i]; d.Group != g || d.ErrorCode != 0 {
			t.Errorf("described %d: %s %v, want %s", i, d.Group, kerr.ErrorForCode(d.ErrorCode), g)
		}
		o := oresp.Groups[i]
		if o.Group != g || o.ErrorCode != 0 || len(o.Topics) != 1 || o.Topics[0].Partitions[0].Offset != int64(i) {
			t.Errorf("fetched %d: %+v, want %s at offset %d", i, o, g, i)
		}
	}
}
