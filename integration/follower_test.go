package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shadow is a kfollower Manager running in the test process, and its
// observer.
type shadow struct {
	fetcher.NopObserver
	t      *testing.T
	dir    string
	m      *fetcher.Manager
	mu     sync.Mutex
	events []follower.Event
	// appended counts the bytes and records the fetcher appended to our
	// logs (its Appended reports): every one, not a sample.
	appendedBytes, appendedRecords atomic.Int64
	cancel                         context.CancelFunc
	done                           chan error
	stopped                        bool
	// direct: the Manager fetches on its own connections, as the binary
	// does (fetcher.Config.DirectFetch); directFetches and clientFetches
	// count the Fetch answers by the connection that carried them, and
	// staged the record bytes the direct ones staged as they were read
	// (storage.Log.Stage).
	direct                       bool
	directFetches, clientFetches atomic.Int64
	staged                       atomic.Int64
}

// testDirectFetch is the fetcher's own Fetch connections as `kfollower
// run` configures them against a plaintext cluster (cmd/kfollower
// directFetch), so the tests exercise the path the binary takes.
func testDirectFetch() *fetcher.DirectFetch {
	return &fetcher.DirectFetch{ClientID: "kfollower-test"}
}

// follow starts following the named topics into dir (a new temp dir if "").
func follow(t *testing.T, c *kafka.Cluster, dir string, topics ...string) *shadow {
	t.Helper()
	return followWith(t, fetcher.Config{
		Client:           c.Client(kgo.MetadataMinAge(100 * time.Millisecond)),
		DataDir:          dir,
		DirectFetch:      testDirectFetch(),
		Follow:           func(topic string) bool { return slices.Contains(topics, topic) },
		MetadataInterval: time.Second,
		Backoff:          follower.BackoffPolicy{Base: 50 * time.Millisecond, Max: time.Second},
	})
}

// followWith runs a Manager on cfg in the background until the test ends:
// the shadow observes it beside cfg's own observers, in cfg.DataDir (a new
// temp dir if ""), and with cfg.DirectFetch its stop fails the test if no
// Fetch went on the fetcher's own connections.
func followWith(t *testing.T, cfg fetcher.Config) *shadow {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s := &shadow{t: t, dir: cfg.DataDir, done: make(chan error, 1), direct: cfg.DirectFetch != nil}
	cfg.Observers = append([]fetcher.Observer{s}, cfg.Observers...)
	m, err := fetcher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.m = m
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- m.Run(ctx) }()
	t.Cleanup(s.stop)
	return s
}

func (s *shadow) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	if err := <-s.done; err != nil {
		s.t.Errorf("fetcher: %v", err)
	}
	// A direct connection failing is logged and falls back to the
	// client's; every Fetch falling back means the direct path was never
	// tested, which should not pass unseen.
	if d, c := s.directFetches.Load(), s.clientFetches.Load(); s.direct && c > 0 && d == 0 {
		s.t.Errorf("all %d Fetches went through the franz-go client, none on the fetcher's own connections", c)
	}
}

// RequestDone is fetcher.Observer's: the shadow counts the answered
// Fetches by connection.
func (s *shadow) RequestDone(r fetcher.RequestStats) {
	if r.Key != kmsg.Fetch || r.Err != nil {
		return
	}
	if r.Direct {
		s.directFetches.Add(1)
		s.staged.Add(r.StagedBytes)
	} else {
		s.clientFetches.Add(1)
	}
}

// Event is fetcher.Observer's: the shadow keeps every event.
// Appended counts what the fetcher appended (fetcher.Observer).
func (s *shadow) Appended(_ int32, _ wire.TopicPartition, bytes, records int64) {
	s.appendedBytes.Add(bytes)
	s.appendedRecords.Add(records)
}

func (s *shadow) Event(e follower.Event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

func (s *shadow) Events() []follower.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

func (s *shadow) status(topic string, p int32) (fetcher.Status, bool) {
	for _, st := range s.m.Statuses() {
		if st.Topic == topic && st.Partition == p {
			return st, true
		}
	}
	return fetcher.Status{}, false
}

// waitCaughtUp waits until our log end equals the leader's high watermark
// for every partition of topic (producers must have stopped).
func (s *shadow) waitCaughtUp(ctx context.Context, c *kafka.Cluster, topic string, partitions int32) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for p := int32(0); p < partitions; p++ {
		for {
			ends, err := c.Admin().ListEndOffsets(ctx, topic)
			var hw int64 = -1
			if err == nil {
				if o, ok := ends.Lookup(topic, p); ok && o.Err == nil {
					hw = o.Offset
				}
			}
			st, ok := s.status(topic, p)
			if ok && hw >= 0 && st.LogEndOffset == hw && st.State == "fetching" {
				break
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("%s-%d not caught up: leader high watermark %d, ours %+v", topic, p, hw, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// compareWithLeader asserts that our copy of topic-p is a byte-exact prefix
// of the leader's log as the broker holds it on disk (docs/design.md promise 1),
// and that our leader-epoch-checkpoint holds exactly the leader's entries
// below our log end. It returns our log's size in bytes.
func (s *shadow) compareWithLeader(ctx context.Context, c *kafka.Cluster, topic string, p int32) int {
	s.t.Helper()
	return compareWithLeader(ctx, s.t, c, s.dir, topic, p)
}

// compareWithLeader is shadow.compareWithLeader for any data dir.
func compareWithLeader(ctx context.Context, t *testing.T, c *kafka.Cluster, dataDir, topic string, p int32) int {
	t.Helper()
	st, err := c.Partition(ctx, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	leaderDir := filepath.Join(c.Node(st.Leader).DataDir(), fmt.Sprintf("%s-%d", topic, p))
	ourDir := storage.PartitionDir(dataDir, topic, p)
	ours, theirs := readSegments(t, ourDir), readSegments(t, leaderDir)
	if len(ours) > len(theirs) || !bytes.Equal(ours, theirs[:len(ours)]) {
		at := 0
		for at < len(ours) && at < len(theirs) && ours[at] == theirs[at] {
			at++
		}
		t.Fatalf("%s-%d: our %d log bytes are not a prefix of leader %d's %d bytes; first difference at byte %d",
			topic, p, len(ours), st.Leader, len(theirs), at)
	}
	// Our epochs are what a Kafka follower copying these batches records
	// (LeaderEpochFileCache.assign per batch): derived from the leader's
	// batches below our log end. The leader's own cache names each of those
	// epochs at or before where its first batch starts (it assigns an epoch
	// when elected, and compaction may remove its first batches).
	var want []string
	sc := batch.NewScanner(theirs[:len(ours)])
	latest := int32(-1)
	for sc.Next() {
		if h := sc.Header(); h.PartitionLeaderEpoch > latest {
			latest = h.PartitionLeaderEpoch
			want = append(want, fmt.Sprintf("%d %d", h.PartitionLeaderEpoch, h.BaseOffset))
		}
	}
	got := readCheckpoint(t, filepath.Join(ourDir, "leader-epoch-checkpoint"))
	if !slices.Equal(got, want) {
		t.Fatalf("%s-%d: our epochs %q, want %q as derived from the leader's batches", topic, p, got, want)
	}
	leaderEpochs := map[int32]int64{}
	for _, e := range readCheckpoint(t, filepath.Join(leaderDir, "leader-epoch-checkpoint")) {
		var epoch int32
		var start int64
		fmt.Sscanf(e, "%d %d", &epoch, &start)
		leaderEpochs[epoch] = start
	}
	for _, e := range want {
		var epoch int32
		var start int64
		fmt.Sscanf(e, "%d %d", &epoch, &start)
		if ls, ok := leaderEpochs[epoch]; !ok || ls > start {
			t.Fatalf("%s-%d: leader %d's epoch cache %v does not name epoch %d at or before %d", topic, p, st.Leader, leaderEpochs, epoch, start)
		}
	}
	return len(ours)
}

// readSegments concatenates a partition directory's .log files in offset
// order: the batches, byte for byte.
func readSegments(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := kafka.ReadSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readCheckpoint returns the "epoch offset" lines of a leader-epoch-checkpoint.
func readCheckpoint(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading epoch checkpoint: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		t.Fatalf("%s: not a version-0 checkpoint: %q", path, b)
	}
	return lines[2:]
}

// produceTo writes n records "<prefix>-<i>" to topic-p with acks=all.
func produceTo(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32, prefix string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := c.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	defer cl.Close()
	var acked []*kgo.Record
	for start := 0; start < n; start += 500 {
		var rs []*kgo.Record
		for i := start; i < min(n, start+500); i++ {
			rs = append(rs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "%s-%06d", prefix, i)})
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		res := cl.ProduceSync(pctx, rs...)
		cancel()
		if err := res.FirstErr(); err != nil {
			t.Errorf("producing %s to %s-%d: %v", prefix, topic, p, err)
			return acked
		}
		acked = append(acked, rs...)
	}
	return acked
}

type fetcherStatus = fetcher.Status

// waitStatus waits for our status of topic-p to meet cond.
func (s *shadow) waitStatus(t *testing.T, topic string, p int32, what string, cond func(fetcher.Status) bool) fetcher.Status {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, ok := s.status(topic, p)
		if ok && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-%d: waiting for %s; last status %+v", topic, p, what, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogEnd waits until we hold at least end offsets of topic-p.
func (s *shadow) waitLogEnd(t *testing.T, topic string, p int32, end int64) {
	t.Helper()
	s.waitStatus(t, topic, p, fmt.Sprintf("log end >= %d", end), func(st fetcher.Status) bool { return st.LogEndOffset >= end })
}
