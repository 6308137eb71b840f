package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFrame is a size prefix and body as given, the header included.
func rawFrame(size int32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(size)), body...)
}

// header is a request header v1 (with tags appended when flexible).
func header(key, version int16, flexible bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'c')
	if flexible {
		b = append(b, 0)
	}
	return b
}

func sized(body []byte) []byte { return rawFrame(int32(len(body)), body) }

func apiVersions(t *testing.T, c *client) {
	t.Helper()
	resp := c.do(at(kmsg.NewPtrApiVersionsRequest(), 0)).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(advertisedKeys(nil)) {
		t.Fatalf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// Input that is not a request this server takes closes that connection,
// as Kafka's SocketServer does, and nothing else: a connection opened
// before keeps working, and so does a new one.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	cat.serve("t", 0, openLog(t, "t", 0, false, run(0, 0, 1, 1)), 0)
	_, addr := testServer(t, cat, func(c *Config) { c.MaxRequestBytes = 1 << 10 })
	bystander := dial(t, addr)
	apiVersions(t, bystander)

	metaV1 := at(kmsg.NewPtrMetadataRequest(), 1)
	metaV1.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	metaBody := append(header(3, 1, false), metaV1.AppendTo(nil)...)
	produce0 := at(kmsg.NewPtrProduceRequest(), 9)
	produce0.Acks = 0
	produce0.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: run(0, 0, 1, 1)}}}}

	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"negative size", rawFrame(-1, nil)},
		{"size below a header", rawFrame(3, []byte{0, 3, 0})},
		{"size above the limit", rawFrame(1<<10+1, header(3, 1, false))},
		{"huge size", rawFrame(1<<31-1, nil)},
		{"unknown key", sized(header(1000, 0, false))},
		{"key not served (CreateTopics)", sized(append(header(19, 7, true), 0, 0, 0, 0, 0, 0, 0))},
		{"Fetch v3, below Kafka 4's minimum", sized(append(header(1, 3, false), make([]byte, 40)...))},
		{"Metadata above kmsg's max", sized(header(3, 14, true))},
		{"negative version", sized(header(3, -1, false))},
		{"truncated body", sized(metaBody[:len(metaBody)-2])},
		{"client id past the frame", sized([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'x'})},
		{"bad header tags", sized(append(header(3, 12, false), 5, 0))},
		{"frame cut short", rawFrame(100, header(3, 1, false))},
		{"acks=0 produce", frame(1, produce0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			c.write(tc.send)
			if tc.name == "frame cut short" {
				c.c.(*net.TCPConn).CloseWrite()
			}
			c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if !c.closed() {
				return
			}
			apiVersions(t, bystander)
			apiVersions(t, dial(t, addr))
		})
	}
}

// Requests sent back to back on one connection are answered in order.
func TestPipelined(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	cat.serve("t", 0, openLog(t, "t", 0, false, run(0, 0, 3, 2)), 0)
	_, addr := testServer(t, cat)
	c := dial(t, addr)
	meta := at(kmsg.NewPtrMetadataRequest(), 12)
	lo := at(kmsg.NewPtrListOffsetsRequest(), 9)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	av := at(kmsg.NewPtrApiVersionsRequest(), 0)
	var out []byte
	for i, r := range []kmsg.Request{meta, lo, av} {
		out = append(out, frame(int32(i+1), r)...)
	}
	c.write(out)
	if m := c.recv(meta, 1).(*kmsg.MetadataResponse); len(m.Topics) != 1 {
		t.Errorf("Metadata: %d topics", len(m.Topics))
	}
	if l := c.recv(lo, 2).(*kmsg.ListOffsetsResponse); l.Topics[0].Partitions[0].Offset != 6 {
		t.Errorf("ListOffsets latest: %d, want 6", l.Topics[0].Partitions[0].Offset)
	}
	c.recv(av, 3)
}

// Serve returns once ctx ends, with connections open and one of them in a
// long poll; goleak (TestMain) checks that no goroutine is left.
func TestServeReturnsWhenCtxEnds(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	cat.serve("t", 0, openLog(t, "t", 0, false), 0)
	s, addr, stop := startServer(t, cat)
	idle := dial(t, addr)
	apiVersions(t, idle)
	polling := dial(t, addr)
	f := fetchOne(13, "t", cat.id("t"), 0, 0)
	f.MaxWaitMillis, f.MinBytes = int32(time.Hour/time.Millisecond), 1
	polling.send(f)
	waitFor(t, func() bool { return s.waiting() == 1 })

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after its context ended")
	}
	if !idle.closed() || !polling.closed() {
		t.Error("connections left open")
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("the listener still accepts")
	}
}

// A connection that sends nothing for IdleTimeout is closed.
func TestIdleTimeout(t *testing.T) {
	_, addr := testServer(t, newCatalog(), func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
	c := dial(t, addr)
	apiVersions(t, c)
	c.closed()
}

// panicking panics on its first Topics call.
type panicking struct {
	*testCatalog
	calls atomic.Int32
}

func (p *panicking) Topics() []Topic {
	if p.calls.Add(1) == 1 {
		panic("catalog bug")
	}
	return p.testCatalog.Topics()
}

// A handler that panics closes its connection; the server goes on.
func TestPanicClosesOnlyThatConnection(t *testing.T) {
	cat := &panicking{testCatalog: newCatalog()}
	cat.add("t", 1, 1)
	_, addr := testServer(t, cat)
	c := dial(t, addr)
	c.send(at(kmsg.NewPtrMetadataRequest(), 12))
	c.closed()
	resp := dial(t, addr).do(at(kmsg.NewPtrMetadataRequest(), 12)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("after the panic: %+v", resp.Topics)
	}
}

func TestNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no catalog", Config{}},
		{"negative node", Config{Catalog: newCatalog(), NodeID: -1}},
		{"advertise without port", Config{Catalog: newCatalog(), Advertise: "host"}},
		{"advertise port 0", Config{Catalog: newCatalog(), Advertise: "host:0"}},
		{"advertise without host", Config{Catalog: newCatalog(), Advertise: ":9092"}},
	} {
		if _, err := New(tc.cfg); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, tc.cfg)
		}
	}
	s, err := New(Config{Catalog: newCatalog()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Error("Serve on a wildcard address without Config.Advertise")
	}
}

// The advertised address is Config.Advertise when set.
func TestAdvertise(t *testing.T) {
	_, addr := testServer(t, newCatalog(), func(c *Config) { c.Advertise = "copy.example:19092" })
	m := dial(t, addr).do(at(kmsg.NewPtrMetadataRequest(), 12)).(*kmsg.MetadataResponse)
	if b := m.Brokers[0]; b.Host != "copy.example" || b.Port != 19092 || b.NodeID != 7 {
		t.Errorf("broker %+v", b)
	}
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFetchSizeHint checks that the answer buffer grown to fetchSizeHint
// holds every Fetch answer without growing again, at each version, with
// every optional field at its largest, and that the bytes written are
// those of the plain encoding: the hint changes the allocation only.
func TestFetchSizeHint(t *testing.T) {
	rack := "rack-with-a-long-name"
	mk := func(version int16) *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		r.Version, r.ThrottleMillis, r.SessionID = version, 1<<31-1, 1<<31-1
		for i, size := range []int{0, 1, 300, 70 << 10, 1 << 20} {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = strings.Repeat("t", 249) // Kafka's longest topic name
			t.TopicID = [16]byte{byte(i), 0xff}
			for j := range 3 {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.ErrorCode = int32(j), -1
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1<<63-1, 1<<63-1, 1<<63-1
				p.PreferredReadReplica = 1<<31 - 1
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 1<<31-1, 1<<63-1
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1<<31-1, 1<<31-1
				p.SnapshotID.Epoch, p.SnapshotID.EndOffset = 1<<31-1, 1<<63-1
				for range 200 * j {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = 1<<63-1, 1<<63-1
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
				p.RecordBatches = bytes.Repeat([]byte{byte(j)}, size)
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
		// Many partitions with no aborted list: the fixed fields dominate.
		many := kmsg.NewFetchResponseTopic()
		for j := range 2000 {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.LastStableOffset = int32(j), 1<<63-1, 1<<63-1
			p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 1<<31-1, 1<<63-1
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1<<31-1, 1<<31-1
			p.SnapshotID.Epoch, p.SnapshotID.EndOffset = 1<<31-1, 1<<63-1
			p.RecordBatches = []byte{}
			many.Partitions = append(many.Partitions, p)
		}
		r.Topics = append(r.Topics, many)
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = 1<<31-1, strings.Repeat("h", 255), 65535, &rack
		r.Brokers = []kmsg.FetchResponseBroker{b}
		return r
	}
	for v := int16(4); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		r := mk(v)
		plain := binary.BigEndian.AppendUint32(nil, 0)
		plain = binary.BigEndian.AppendUint32(plain, 7)
		if r.IsFlexible() {
			plain = append(plain, 0)
		}
		plain = r.AppendTo(plain)
		binary.BigEndian.PutUint32(plain, uint32(len(plain)-4))

		hint := fetchSizeHint(r)
		if len(plain) > hint {
			t.Errorf("v%d: the answer is %d bytes, above the hint %d", v, len(plain), hint)
		}
		prefix := []byte("kept")
		dst := slices.Grow(prefix, hint)
		c := cap(dst)
		out := appendResponse(prefix, 7, r)
		if !bytes.Equal(out[:len(prefix)], []byte("kept")) || !bytes.Equal(out[len(prefix):], plain) {
			t.Fatalf("v%d: appendResponse wrote other bytes than the plain encoding", v)
		}
		if cap(out) > c {
			t.Errorf("v%d: the answer buffer grew to %d bytes after the hint's %d", v, cap(out), c)
		}
	}
}

// BenchmarkAppendFetchResponse encodes a Fetch answer of 7 partitions of
// 8 MiB each (about FetchMaxBytes), as appendResponse does for each one.
func BenchmarkAppendFetchResponse(b *testing.B) {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 16
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "serve"
	for j := range 7 {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(j)
		p.RecordBatches = make([]byte, 8<<20)
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = append(r.Topics, t)
	b.SetBytes(7 * 8 << 20)
	b.ReportAllocs()
	for b.Loop() {
		_ = appendResponse(nil, 1, r)
	}
}
