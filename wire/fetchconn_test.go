package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/internal/testcert"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// fetchCluster is a one-broker kfake cluster holding n records of 1 KiB in
// partition 0 of topic "t", with a kgo client on it and the topic's id.
func fetchCluster(t *testing.T, n int) (*kfake.Cluster, *kgo.Client, TopicID) {
	return fetchClusterTLS(t, n, nil, nil)
}

// fetchClusterTLS is fetchCluster with the broker serving TLS (server)
// and the client trusting it (client); both nil for plaintext.
func fetchClusterTLS(t *testing.T, n int, server, client *tls.Config) (*kfake.Cluster, *kgo.Client, TopicID) {
	t.Helper()
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t")}
	copts := []kgo.Opt{kgo.DefaultProduceTopic("t"), kgo.ProducerBatchMaxBytes(64 << 10), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if server != nil {
		kopts = append(kopts, kfake.TLS(server))
		copts = append(copts, kgo.DialTLSConfig(client))
	}
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append(copts, kgo.SeedBrokers(c.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := context.Background()
	val := bytes.Repeat([]byte{'v'}, 1<<10)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: append([]byte{byte(i)}, val...)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	meta.Topics = append(meta.Topics, mt)
	resp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("metadata: %v %+v", err, resp)
	}
	return c, cl, resp.Topics[0].TopicID
}

// fetchFrom is a sessionless Fetch of t-0 from offset.
func fetchFrom(id TopicID, offset int64, maxWait int32) *kmsg.FetchRequest {
	tp := TopicPartition{"t", 0}
	return FetchRequest(map[TopicPartition]FetchPartition{tp: {Offset: offset, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1}},
		map[string]TopicID{"t": id}, FetchLimits{MaxWaitMillis: maxWait, MinBytes: 1, MaxBytes: 1 << 20, PartitionMaxBytes: 256 << 10})
}

func recordsOf(t *testing.T, resp *kmsg.FetchResponse) []byte {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("Fetch response: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].RecordBatches
}

// A Fetch through a FetchConn, at the highest version both sides speak,
// is answered with the same records and high watermark as the same
// Fetch through franz-go.
func TestFetchConnMatchesKgo(t *testing.T) {
	c, cl, id := fetchCluster(t, 500)
	ctx := context.Background()
	fc, err := DialFetchConn(ctx, c.ListenAddrs()[0], FetchConnConfig{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if want := (*kmsg.FetchRequest)(nil).MaxVersion(); fc.Version() != want {
		t.Fatalf("Fetch v%d, want v%d (kfake and kmsg both speak it)", fc.Version(), want)
	}
	for _, off := range []int64{0, 100, 499} {
		resp, buf, err := fc.Fetch(ctx, fetchFrom(id, off, 100))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := cl.Request(ctx, fetchFrom(id, off, 100))
		if err != nil {
			t.Fatal(err)
		}
		got, want := recordsOf(t, resp), recordsOf(t, ref.(*kmsg.FetchResponse))
		if len(got) == 0 || !bytes.Equal(got, want) {
			t.Fatalf("offset %d: %d bytes of records, franz-go got %d (equal: %v)", off, len(got), len(want), bytes.Equal(got, want))
		}
		if hw := resp.Topics[0].Partitions[0].HighWatermark; hw != 500 {
			t.Fatalf("offset %d: high watermark %d, want 500", off, hw)
		}
		buf.Release()
		buf.Release() // a second release does nothing
	}
	if err := fc.Err(); err != nil {
		t.Fatalf("after good fetches: %v", err)
	}
}

// A response's buffer is never read into again while it is held: two
// held responses keep their records intact through a third fetch; once
// released, it is what the next response is read into.
func TestFetchConnBufferReuse(t *testing.T) {
	c, _, id := fetchCluster(t, 500)
	ctx := context.Background()
	fc, err := DialFetchConn(ctx, c.ListenAddrs()[0], FetchConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fetch := func(off int64) (*kmsg.FetchResponse, *FetchBuffer) {
		t.Helper()
		resp, buf, err := fc.Fetch(ctx, fetchFrom(id, off, 100))
		if err != nil {
			t.Fatal(err)
		}
		return resp, buf
	}
	r1, b1 := fetch(0)
	r2, b2 := fetch(200)
	want1, want2 := bytes.Clone(recordsOf(t, r1)), bytes.Clone(recordsOf(t, r2))
	if bytes.Equal(want1, want2) {
		t.Fatal("two offsets answered alike")
	}
	r3, b3 := fetch(0) // neither held buffer may be used
	if &b3.whole[0] == &b1.whole[0] || &b3.whole[0] == &b2.whole[0] {
		t.Fatal("a held buffer was read into")
	}
	if !bytes.Equal(recordsOf(t, r1), want1) || !bytes.Equal(recordsOf(t, r2), want2) {
		t.Fatal("a held response's records changed")
	}
	if !bytes.Equal(recordsOf(t, r3), want1) {
		t.Fatal("the same fetch answered differently")
	}
	first := &b1.whole[0]
	b1.Release()
	b3.Release()
	b2.Release()
	_, b4 := fetch(0)
	if &b4.whole[0] != first {
		t.Fatal("the next response was not read into the buffer released first")
	}
	b4.Release()
}

// A released buffer far larger than the response to be read is let go,
// not kept: the catch-up's buffers do not outlive it. One of about the
// size needed is reused.
func TestFetchConnBufferShrinks(t *testing.T) {
	c := &FetchConn{}
	big := make([]byte, 4<<20)
	c.free = [][]byte{big}
	if b := c.buffer(1 << 20); &b[0] != &big[0] {
		t.Fatal("a buffer 4 times the size needed was not reused")
	}
	c.free = [][]byte{big}
	if b := c.buffer(4 << 10); cap(b) != 4<<10 || len(c.free) != 0 {
		t.Fatalf("a 4 MiB buffer kept for a 4 KiB response: got cap %d, %d kept", cap(b), len(c.free))
	}
	small := make([]byte, 64<<10)
	c.free = [][]byte{small}
	if b := c.buffer(4 << 10); &b[0] != &small[0] {
		t.Fatal("a small buffer was not reused")
	}
	// A far-too-big buffer met first is let go, and the search goes on
	// to the one that fits, which is reused.
	huge := make([]byte, 64<<20)
	c.free = [][]byte{huge, small}
	if b := c.buffer(4 << 10); &b[0] != &small[0] || len(c.free) != 0 {
		t.Fatalf("kept 64 MiB and 64 KiB, a 4 KiB response: the 64 KiB one not reused (%d kept)", len(c.free))
	}
	// Neither a buffer let go as far too big nor one let go as too
	// small stays referenced by the free list's array, out of the GC's
	// reach.
	tiny := make([]byte, 32<<10)
	arr := [][]byte{tiny, huge}
	c.free = arr
	if b := c.buffer(100 << 10); cap(b) != 100<<10 || len(c.free) != 1 {
		t.Fatalf("32 KiB and 64 MiB kept, a 100 KiB response: got cap %d, %d kept, want a new one and 1 kept", cap(b), len(c.free))
	}
	for _, b := range arr {
		if cap(b) > 0 && &b[:1][0] == &huge[0] {
			t.Fatal("the 64 MiB buffer let go is still referenced by the free list's array")
		}
	}
	arr = [][]byte{small, tiny}
	c.free = arr
	if b := c.buffer(1 << 20); cap(b) != 1<<20 || len(c.free) != 1 {
		t.Fatalf("two too small for a 1 MiB response: got cap %d, %d kept, want a new one and 1 kept", cap(b), len(c.free))
	}
	for _, b := range arr {
		if cap(b) > 0 && &b[:1][0] == &small[0] {
			t.Fatal("the buffer let go as too small is still referenced by the free list's array")
		}
	}
}

// silentListener accepts connections and never writes to them: a broker
// whose listen backlog completes the TCP connect but that is hung.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A TLS dial to a broker that accepts the connection and never answers the
// ClientHello ends with DialTimeout, under a context without a deadline,
// with the default dialer and with one of the caller's: the handshake
// does not hold the dial for good.
func TestFetchConnDialTimeout(t *testing.T) {
	addr := silentListener(t)
	for _, own := range []bool{false, true} {
		cfg := FetchConnConfig{DialTimeout: 100 * time.Millisecond, TLS: &tls.Config{InsecureSkipVerify: true}}
		if own {
			cfg.Dial = (&net.Dialer{}).DialContext
		}
		done := make(chan error, 1)
		go func() {
			fc, err := DialFetchConn(context.Background(), addr, cfg)
			if fc != nil {
				fc.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "TLS handshake") {
				t.Errorf("own dialer %v: %v, want the handshake's deadline exceeded", own, err)
			}
		case <-time.After(60 * time.Second): // a hang, not a slow machine
			t.Fatalf("own dialer %v: the TLS handshake with a silent broker has not ended in 60 s (DialTimeout 100 ms)", own)
		}
	}
}

// The throttle a Fetch response carries is waited out before the next
// request only from Fetch v8, when the broker answers first and then
// mutes the connection (KIP-219); an older broker delayed the response
// itself.
func TestFetchConnThrottleV8(t *testing.T) {
	for _, c := range []struct {
		fetch int16
		wait  bool
	}{{7, false}, {8, true}, {12, true}} {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(1, c.fetch)
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(vs))
		if err != nil {
			t.Fatal(err)
		}
		kc.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ThrottleMillis = 60_000
			return resp, nil, true
		})
		fc, err := DialFetchConn(context.Background(), kc.ListenAddrs()[0], FetchConnConfig{})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 1, 1<<20
		_, buf, err := fc.Fetch(context.Background(), req)
		if err != nil {
			t.Fatalf("Fetch v%d: %v", c.fetch, err)
		}
		buf.Release()
		if waits := !fc.throttle.IsZero(); waits != c.wait {
			t.Errorf("Fetch v%d answered with a 60 s throttle: waits it out %v, want %v", c.fetch, waits, c.wait)
		}
		fc.Close()
		kc.Close()
	}
}

// The client software name and version are made what KIP-511 allows.
func TestSoftwareField(t *testing.T) {
	for in, want := range map[string]string{
		"": "unknown", "v1.2.3": "v1.2.3", "(devel)": "devel", "1.0+dirty": "1.0-dirty",
		"-.-": "unknown", "été": "t", "go1.26-x": "go1.26-x",
	} {
		if got := softwareField(in, "unknown"); got != want {
			t.Errorf("softwareField(%q) = %q, want %q", in, got, want)
		}
	}
}

// watchConn signals on written each time a request has been written.
type watchConn struct {
	net.Conn
	written chan struct{}
}

func (w *watchConn) Write(b []byte) (int, error) {
	n, err := w.Conn.Write(b)
	select {
	case w.written <- struct{}{}:
	default:
	}
	return n, err
}

// A context that ends while the broker holds a long poll ends the Fetch
// with the context's error, and the connection is failed for good (its
// response would still come on it); until then Err says it works, without
// waiting for the poll.
func TestFetchConnCancel(t *testing.T) {
	c, _, id := fetchCluster(t, 10)
	written := make(chan struct{}, 1)
	cfg := FetchConnConfig{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchConn{Conn: conn, written: written}, nil
	}}
	fc, err := DialFetchConn(context.Background(), c.ListenAddrs()[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	<-written // ApiVersions
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// At the log end, kfake holds it for MaxWait: 60 s, far past
		// the deadline below.
		_, _, err := fc.Fetch(ctx, fetchFrom(id, 10, 60_000))
		done <- err
	}()
	<-written
	// Err answers while the long poll holds the connection.
	if err := fc.Err(); err != nil {
		t.Fatalf("Err during a long poll: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Fetch ended with %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Fetch did not end with its context")
	}
	if _, _, err := fc.Fetch(context.Background(), fetchFrom(id, 0, 100)); !errors.Is(err, errFetchConnClosed) {
		t.Fatalf("a Fetch after the cancel: %v, want the connection closed", err)
	}
}

// A response larger than MaxResponseBytes is refused before it is read,
// and fails the connection.
func TestFetchConnTooLarge(t *testing.T) {
	c, _, id := fetchCluster(t, 100)
	ctx := context.Background()
	fc, err := DialFetchConn(ctx, c.ListenAddrs()[0], FetchConnConfig{MaxResponseBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if _, _, err := fc.Fetch(ctx, fetchFrom(id, 0, 100)); err == nil || !strings.Contains(err.Error(), c.ListenAddrs()[0]) {
		t.Fatalf("a 256 KiB response under a 4 KiB limit: %v, want an error naming the broker", err)
	}
	if fc.Err() == nil {
		t.Fatal("the connection still works after a refused response")
	}
}

// Dialing something that is not there fails with the address.
func TestFetchConnDialFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := DialFetchConn(context.Background(), addr, FetchConnConfig{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte(addr)) {
		t.Fatalf("dialing a closed port: %v", err)
	}
}

// A flexible response header's tagged fields are skipped; a malformed one
// is an error.
func TestSkipHeader(t *testing.T) {
	body := []byte{9, 9}
	corr := []byte{0, 0, 0, 1}
	for _, c := range []struct {
		name     string
		in       []byte
		flexible bool
		want     []byte
	}{
		{"v0", append(append([]byte{}, corr...), body...), false, body},
		{"no tags", append(append(append([]byte{}, corr...), 0), body...), true, body},
		{"two tags", append(append(append([]byte{}, corr...), 2, 0, 1, 7, 5, 2, 1, 1), body...), true, body},
	} {
		got, err := skipHeader(c.in, c.flexible)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Fatalf("%s: %v %v", c.name, got, err)
		}
	}
	if _, err := skipHeader(append(append([]byte{}, corr...), 1, 0, 9), true); err == nil {
		t.Fatal("a tag longer than the header was skipped")
	}
}

// Over TLS, the server name taken from the address, a Fetch is answered;
// a client that does not trust the broker's certificate fails to dial.
func TestFetchConnTLS(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	c, _, id := fetchClusterTLS(t, 10, &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}}, &tls.Config{RootCAs: ca.Pool})
	ctx := context.Background()
	addr := c.ListenAddrs()[0]
	if _, err := DialFetchConn(ctx, addr, FetchConnConfig{TLS: &tls.Config{}}); err == nil {
		t.Fatal("dialled a broker whose certificate is not trusted")
	}
	fc, err := DialFetchConn(ctx, addr, FetchConnConfig{TLS: &tls.Config{RootCAs: ca.Pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	resp, buf, err := fc.Fetch(ctx, fetchFrom(id, 0, 100))
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	if _, b := scanBatches(recordsOf(t, resp)); b.Records != 10 {
		t.Fatalf("Fetch over TLS: %d records, want 10", b.Records)
	}
}

// A broker that speaks ApiVersions only up to v2 answers v3 with
// UNSUPPORTED_VERSION (KIP-511): the connection asks again at v0 and
// fetches at the highest version both sides speak; one whose Fetch
// versions end below kfollower's oldest is refused.
func TestFetchConnVersions(t *testing.T) {
	for _, c := range []struct {
		apiVersions, fetch int16
		ok                 bool
	}{{2, 12, true}, {3, 11, true}, {2, 3, false}} {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(18, c.apiVersions)
		vs.SetMaxKeyVersion(1, c.fetch)
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(vs))
		if err != nil {
			t.Fatal(err)
		}
		fc, err := DialFetchConn(context.Background(), kc.ListenAddrs()[0], FetchConnConfig{})
		switch {
		case c.ok && err != nil:
			t.Fatalf("ApiVersions ≤ v%d, Fetch ≤ v%d: %v", c.apiVersions, c.fetch, err)
		case c.ok && fc.Version() != c.fetch:
			t.Fatalf("ApiVersions ≤ v%d, Fetch ≤ v%d: Fetch v%d", c.apiVersions, c.fetch, fc.Version())
		case !c.ok && err == nil:
			t.Fatalf("Fetch ≤ v%d: dialled", c.fetch)
		}
		if fc != nil {
			fc.Close()
		}
		kc.Close()
	}
}
