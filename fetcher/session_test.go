package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchSeen is one Fetch request as kfake received it.
type fetchSeen struct {
	node             int32
	sessionID, epoch int32
	named, forgotten int
	partitions       []int32 // named, of the one topic
	forgot           []int32
}

// fetchLog keeps the Fetch requests a kfake cluster receives.
type fetchLog struct {
	mu   sync.Mutex
	seen []fetchSeen
}

func (l *fetchLog) watch(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		s := fetchSeen{node: c.CurrentNode(), sessionID: req.SessionID, epoch: req.SessionEpoch}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				s.named++
				s.partitions = append(s.partitions, p.Partition)
			}
		}
		for _, t := range req.ForgottenTopics {
			s.forgotten += len(t.Partitions)
			s.forgot = append(s.forgot, t.Partitions...)
		}
		l.mu.Lock()
		l.seen = append(l.seen, s)
		l.mu.Unlock()
		return nil, nil, false // kfake answers it
	})
}

func (l *fetchLog) since(n int) []fetchSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fetchSeen(nil), l.seen[min(n, len(l.seen)):]...)
}

// sessionCluster is a kfake cluster of brokers brokers with topic "s" of
// parts partitions, its Fetch requests logged.
func sessionCluster(t *testing.T, brokers int, parts int32) (*kfake.Cluster, *fetchLog) {
	t.Helper()
	c := newKfake(t, kfake.NumBrokers(brokers), kfake.SeedTopics(parts, "s"))
	l := &fetchLog{}
	l.watch(c)
	return c, l
}

// followWithKfake follows topic "s" of c (one broker, parts partitions)
// until stop is called, which returns Run's error.
func followWithKfake(t *testing.T, c *kfake.Cluster, dir string, noSessions bool) (m *Manager, stop func() error) {
	t.Helper()
	m = kfakeManager(t, c, Config{
		DataDir: dir, Follow: func(topic string) bool { return topic == "s" },
		NoFetchSessions: noSessions,
		Logger:          slog.New(slog.DiscardHandler),
	})
	return m, startManager(t, m)
}

func produceTo(t *testing.T, c *kfake.Cluster, parts []int32, each int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("s"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for _, p := range parts {
		for i := range each {
			rs = append(rs, &kgo.Record{Partition: p, Value: []byte{byte(p), byte(i)}})
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// waitFetches waits for a Fetch request after the first n that ok accepts,
// and returns the requests after the first n up to it.
func waitFetches(t *testing.T, l *fetchLog, n int, what string, ok func(fetchSeen) bool) []fetchSeen {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := l.since(n)
		for i, s := range seen {
			if ok(s) {
				return seen[:i+1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Fetch request %s in %d requests: %+v", what, len(seen), seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkRecords checks that each partition's copy of topic holds the
// records want says.
func checkRecords(t *testing.T, dir, topic string, want map[int32]int64) {
	t.Helper()
	for p, n := range want {
		if _, records, _ := copyOf(t, dir, topic, p); records != n {
			t.Errorf("partition %d holds %d records, want %d", p, records, n)
		}
	}
}

// copyOf reads the copy of topic-p in dir: its batches, byte for byte,
// the records they hold, and its log end.
func copyOf(t *testing.T, dir, topic string, p int32) (batches []byte, records, end int64) {
	t.Helper()
	l, err := storage.Open(dir, topic, p, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		s := batch.NewScanner(b)
		for s.Next() {
			batches = append(batches, s.Batch()...)
			records += int64(s.Header().RecordCount)
			off = s.Header().NextOffset()
		}
	}
	return batches, records, l.LogEndOffset()
}

// Against kfake, which keeps KIP-227 sessions and leaves unchanged
// partitions out of an incremental answer: the first Fetch is full and
// creates a session; once caught up, each long poll names no partition
// (the worker's 40 partitions are answered from the session, not failed as
// missing, which would back them off), and records produced to one
// partition bring an incremental Fetch naming that partition alone, at its
// new offset. Every record arrives once.
func TestFetchSessionKfake(t *testing.T) {
	const parts = 40
	c, l := sessionCluster(t, 1, parts)
	all := make([]int32, parts)
	want := map[int32]int64{}
	for i := range all {
		all[i] = int32(i)
		want[int32(i)] = 5
	}
	produceTo(t, c, all, 5)

	dir := t.TempDir()
	m, stop := followWithKfake(t, c, dir, false)
	waitCopied(t, m, parts, parts*5, "the first records")
	if first := l.since(0)[0]; first.sessionID != 0 || first.epoch != 0 || first.named == 0 {
		t.Fatalf("first Fetch %+v, want a full one creating a session (session 0, epoch 0)", first)
	}
	// Idle: once the new offsets of the last records are sent, the long
	// polls name nothing and forget nothing.
	n := len(l.since(0))
	n += len(waitFetches(t, l, n, "naming nothing", func(s fetchSeen) bool { return s.named == 0 }))
	idle := waitFetches(t, l, n, "after catching up", func(fetchSeen) bool { return true })
	idle = append(idle, waitFetches(t, l, n+1, "after catching up", func(fetchSeen) bool { return true })...)
	for _, s := range idle {
		if s.sessionID == 0 || s.epoch <= 0 || s.named != 0 || s.forgotten != 0 {
			t.Fatalf("idle Fetch %+v, want an incremental one naming nothing", s)
		}
	}
	if st := status(m, "s", 0); st.State != "fetching" {
		t.Fatalf("a partition left out of an incremental answer is %q, want fetching", st.State)
	}

	n = len(l.since(0))
	produceTo(t, c, []int32{7}, 3)
	want[7] += 3
	waitCopied(t, m, parts, parts*5+3, "the records for partition 7")
	// The Fetch that got the records names 7 (or none, if it was already
	// in the air); the next names 7 alone, at its new offset.
	moved := waitFetches(t, l, n, "naming partition 7", func(s fetchSeen) bool { return s.named > 0 })
	last := moved[len(moved)-1]
	if last.epoch <= 0 || last.named != 1 || last.partitions[0] != 7 {
		t.Fatalf("Fetch after records for partition 7: %+v, want an incremental one naming 7 alone", last)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, dir, "s", want)
	var full int
	for _, s := range l.since(0) {
		if s.epoch == 0 {
			full++
		}
	}
	if full != 1 {
		t.Errorf("%d full Fetch requests, want 1 (the one that made the session): %+v", full, l.since(0))
	}
}

// With NoFetchSessions every Fetch is full and sessionless.
func TestFetchSessionKfakeDisabled(t *testing.T) {
	const parts = 4
	c, l := sessionCluster(t, 1, parts)
	produceTo(t, c, []int32{0, 1, 2, 3}, 2)
	dir := t.TempDir()
	m, stop := followWithKfake(t, c, dir, true)
	waitCopied(t, m, parts, parts*2, "the copy")
	waitFetches(t, l, 1, "after the first", func(fetchSeen) bool { return true })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Not every Fetch names all four partitions: those not ready to
	// fetch (still reconciling, or waiting to be bound to a Fetch sent
	// ahead of the appends) are left to the next one.
	for _, s := range l.since(0) {
		if s.sessionID != 0 || s.epoch != -1 || s.forgotten != 0 {
			t.Fatalf("Fetch %+v, want a sessionless full one (session 0, epoch -1, nothing forgotten)", s)
		}
	}
	checkRecords(t, dir, "s", map[int32]int64{0: 2, 1: 2, 2: 2, 3: 2})
}

// A partition handed off to another broker leaves the old broker's session
// (ForgottenTopics) and joins the new one's (named in an incremental
// Fetch), neither session starting over; its records keep arriving, once.
func TestFetchSessionKfakeHandOff(t *testing.T) {
	const parts = 4
	c, l := sessionCluster(t, 2, parts)
	all := []int32{0, 1, 2, 3}
	produceTo(t, c, all, 5)
	// Each broker leads a partition from the start.
	from := c.LeaderFor("s", 0)
	to := 1 - from // kfake numbers its brokers from 0
	if err := c.MoveTopicPartition("s", 1, to); err != nil {
		t.Fatal(err)
	}
	// from keeps partition 2 after 0 moves, so its worker goes on (a
	// broker left leading nothing is not fetched from, and forgets nothing).
	if err := c.MoveTopicPartition("s", 2, from); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m, stop := followWithKfake(t, c, dir, false)
	waitCopied(t, m, parts, parts*5, "the first records")
	// Both brokers' sessions are made and idle.
	n := len(l.since(0))
	for _, node := range []int32{from, to} {
		waitFetches(t, l, n, fmt.Sprintf("to broker %d naming nothing", node), func(s fetchSeen) bool { return s.node == node && s.epoch > 0 && s.named == 0 })
	}
	n = len(l.since(0))
	if err := c.MoveTopicPartition("s", 0, to); err != nil {
		t.Fatal(err)
	}
	waitFetches(t, l, n, fmt.Sprintf("to broker %d forgetting 0", from), func(s fetchSeen) bool {
		return s.node == from && s.epoch > 0 && slices.Contains(s.forgot, 0)
	})
	waitFetches(t, l, n, fmt.Sprintf("to broker %d naming 0", to), func(s fetchSeen) bool {
		return s.node == to && s.epoch > 0 && slices.Contains(s.partitions, 0)
	})
	produceTo(t, c, all, 2)
	waitCopied(t, m, parts, parts*7, "the records after the hand-off")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.since(n) {
		if s.epoch == 0 {
			t.Fatalf("a full Fetch after the hand-off: %+v", s)
		}
	}
	checkRecords(t, dir, "s", map[int32]int64{0: 7, 1: 7, 2: 7, 3: 7})
}

// refuseSessions makes c's brokers grant no KIP-227 session, logging each
// Fetch in l as sent. Kafka's FetchManager.newContext answers so when its
// cache has no slot for us (max.incremental.fetch.session.cache.slots
// taken by others): a full Fetch (epoch 0) gets a FullFetchContext whose
// cache.maybeCreateSession returns INVALID_SESSION_ID, an answer of every
// partition with SessionID 0; an incremental one names a session the
// cache does not hold and gets SessionErrorContext's
// FETCH_SESSION_ID_NOT_FOUND. kfake makes a session for every full Fetch
// (it evicts the oldest when full), so a full one is handed to it as the
// sessionless Fetch it then is (SessionID 0, epoch -1:
// SessionlessFetchContext, the same answer); an incremental one reaches it
// as sent, and kfake, holding no session, answers FETCH_SESSION_ID_NOT_FOUND.
func (l *fetchLog) refuseSessions(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		s := fetchSeen{node: c.CurrentNode(), sessionID: req.SessionID, epoch: req.SessionEpoch}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				s.named++
				s.partitions = append(s.partitions, p.Partition)
			}
		}
		for _, t := range req.ForgottenTopics {
			s.forgotten += len(t.Partitions)
			s.forgot = append(s.forgot, t.Partitions...)
		}
		l.mu.Lock()
		l.seen = append(l.seen, s)
		l.mu.Unlock()
		if req.SessionEpoch <= 0 { // full: 0 (INITIAL) or -1 (FINAL)
			req.SessionID, req.SessionEpoch = 0, -1
		}
		return nil, nil, false // kfake answers it
	})
}

// notFull is the first Fetch of seen that is not full and sessionless on
// the broker's side (SessionID 0, epoch 0 or -1, nothing forgotten), as
// every Fetch to a broker that granted no session must be; nil if none.
func notFull(seen []fetchSeen) error {
	for i, s := range seen {
		if s.sessionID != 0 || s.epoch > 0 || s.epoch < -1 || s.forgotten != 0 {
			return fmt.Errorf("Fetch %d of %d: %+v, want a full one (session 0, epoch 0 or -1, nothing forgotten): the broker granted no session", i+1, len(seen), s)
		}
	}
	return nil
}

// waitCopiedFull is waitCopied, failing at once on a Fetch notFull finds.
func waitCopiedFull(t *testing.T, m *Manager, l *fetchLog, parts int, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := notFull(l.since(0)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var sum int64
		ss := m.Statuses()
		for _, s := range ss {
			sum += s.LogEndOffset
		}
		if len(ss) == parts && sum == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d records copied, statuses %+v", what, want, ss)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Against a broker that grants no fetch session (its cache full), the
// follower falls back to full Fetches (wire.FetchSession): records keep
// being copied, every Fetch is full and sessionless on the broker's side
// (SessionID 0; epoch 0, asking again for a session as Kafka's client does,
// FetchMetadata.INITIAL, so a slot freed later is taken, or -1 beside a
// Fetch in the air), none incremental, none naming a session the broker
// never granted, none forgetting partitions. Checked that it can fail:
// FetchSession.Replies taking a full answer of SessionID 0 as a session
// made (id 0, next epoch 1) fails at the second Fetch, incremental at
// epoch 1; turning sessions off after a refusal (every later Fetch epoch
// -1) fails as never asking again.
func TestFetchSessionKfakeRefused(t *testing.T) {
	const parts = 8
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "s"))
	l := &fetchLog{}
	l.refuseSessions(c)
	all := make([]int32, parts)
	want := map[int32]int64{}
	for i := range all {
		all[i] = int32(i)
		want[int32(i)] = 5
	}
	produceTo(t, c, all, 5)

	dir := t.TempDir()
	m, stop := followWithKfake(t, c, dir, false)
	waitCopiedFull(t, m, l, parts, parts*5, "the first records")
	// Long polls once caught up, then records produced later: still
	// copied, with no session to carry them.
	n := len(l.since(0))
	waitFetches(t, l, n+1, "after catching up", func(fetchSeen) bool { return true })
	produceTo(t, c, []int32{3}, 4)
	want[3] += 4
	waitCopiedFull(t, m, l, parts, parts*5+4, "the records produced later")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	seen := l.since(0)
	if err := notFull(seen); err != nil {
		t.Fatal(err)
	}
	if seen[0].epoch != 0 {
		t.Errorf("first Fetch %+v, want one asking for a session (epoch 0)", seen[0])
	}
	var askedAgain int
	for _, s := range seen[1:] {
		if s.epoch == 0 {
			askedAgain++
		}
	}
	if askedAgain == 0 {
		t.Errorf("no Fetch after the refused one asked for a session again (epoch 0): %+v", seen)
	}
	checkRecords(t, dir, "s", want)
}
