package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testCatalog is an in-memory Catalog over logs a test builds.
type testCatalog struct {
	mu     sync.Mutex
	topics map[string]*testTopic
}

type testTopic struct {
	id    [16]byte
	parts []testPart // index = partition; a nil log is not served
}

type testPart struct {
	log   Log
	epoch int32
}

func newCatalog() *testCatalog { return &testCatalog{topics: map[string]*testTopic{}} }

// add declares topic with n partitions, none served yet.
func (c *testCatalog) add(topic string, id byte, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topics[topic] = &testTopic{id: [16]byte{id, 0xf0, 15: id}, parts: make([]testPart, n)}
}

// serve serves partition p of topic from l at the served epoch.
func (c *testCatalog) serve(topic string, p int32, l Log, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topics[topic].parts[p] = testPart{l, epoch}
}

func (c *testCatalog) id(topic string) [16]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topics[topic].id
}

func (c *testCatalog) Topics() []Topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ts []Topic
	for name, t := range c.topics {
		ts = append(ts, Topic{Name: name, ID: t.id, Partitions: int32(len(t.parts))})
	}
	return ts
}

func (c *testCatalog) Partition(topic string, p int32) (Log, int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[topic]
	if !ok || p < 0 || int(p) >= len(t.parts) || t.parts[p].log == nil {
		return nil, 0, false
	}
	return t.parts[p].log, t.parts[p].epoch, true
}

// openLog opens a storage.Log in a temporary directory, flushed on every
// append (DurableEnd = LogEndOffset) unless lazy, and appends runs to it.
func openLog(t testing.TB, topic string, p int32, lazy bool, runs ...[]byte) *storage.Log {
	t.Helper()
	opts := storage.Options{Flush: storage.FlushEveryAppend, SegmentBytes: 4 << 10, Logger: quiet}
	if lazy {
		// A clock that never moves: the interval never elapses, so only
		// rolls and Flush make anything durable.
		at := time.Unix(1_700_000_000, 0)
		opts.Flush, opts.FlushInterval, opts.Now = storage.FlushInterval, time.Hour, func() time.Time { return at }
	}
	l, err := storage.Open(t.TempDir(), topic, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, r := range runs {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// run is count batches of per records each from base in epoch.
func run(base int64, epoch int32, count, per int) []byte {
	return batch.BuildRun(base, epoch, count, per)
}

// testServer serves cat on a loopback port until the test ends, and checks
// that Serve returned nil.
func testServer(t testing.TB, cat Catalog, mod ...func(*Config)) (*Server, string) {
	t.Helper()
	s, addr, stop := startServer(t, cat, mod...)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, addr
}

// startServer serves cat on a loopback port (node 7 of cluster
// "kfollower-test", as mod changes it) until stop, which ends Serve's
// context and returns what Serve returned.
func startServer(t testing.TB, cat Catalog, mod ...func(*Config)) (s *Server, addr string, stop func() error) {
	t.Helper()
	cfg := Config{NodeID: 7, ClusterID: "kfollower-test", Catalog: cat}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	return s, ln.Addr().String(), func() error {
		cancel()
		return <-done
	}
}

// client speaks the protocol raw, one request at a time, at the version
// each request carries.
type client struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// frame encodes req with a request header v1 (v2 when flexible).
func frame(corr int32, req kmsg.Request) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func (c *client) write(b []byte) {
	c.t.Helper()
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	c.write(frame(c.corr, req))
	return c.corr
}

// readFrame reads one response frame; io.EOF when the server closed.
func (c *client) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.r, b)
	return b, err
}

// recv reads the answer to req, sent with correlation id corr.
func (c *client) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	b, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading the answer to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	resp := req.ResponseKind()
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		if b, err = skipTags(b); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("decoding %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (c *client) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// closed reports whether the server closed the connection (reading gets
// EOF or a reset), failing the test if an answer arrives instead.
func (c *client) closed() bool {
	c.t.Helper()
	b, err := c.readFrame()
	if err == nil {
		c.t.Errorf("got a %d-byte answer, want the connection closed", len(b))
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Errorf("connection still open: %v", err)
		return false
	}
	return true
}

// versions is every version of key this server serves.
func versions(key int16) []int16 {
	a := apis[key]
	var vs []int16
	for v := a.min; v <= a.max; v++ {
		vs = append(vs, v)
	}
	return vs
}

// at returns req with its version set.
func at[R kmsg.Request](req R, v int16) R {
	req.SetVersion(v)
	return req
}

// waiting is the number of Fetch requests waiting, for tests.
func (s *Server) waiting() int {
	s.waits.mu.Lock()
	defer s.waits.mu.Unlock()
	ws := map[*waiter]bool{}
	for _, set := range s.waits.m {
		for w := range set {
			ws[w] = true
		}
	}
	return len(ws)
}
