package server

import (
	"context"
	"encoding/binary"
	"net"
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
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// Input that is not a request this server takes closes that connection,
// as Kafka's SocketServer does, and nothing else: a connection opened
// before keeps working, and so does a new one.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	_, addr := testServer(t, newCatalog(), func(c *Config) { c.MaxRequestBytes = 1 << 10 })
	bystander := dial(t, addr)
	apiVersions(t, bystander)

	av := at(kmsg.NewPtrApiVersionsRequest(), 3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "kgo", "1"
	avBody := append(header(18, 3, true), av.AppendTo(nil)...)

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
		{"negative version", sized(header(18, -1, false))},
		{"truncated body", sized(avBody[:len(avBody)-2])},
		{"client id past the frame", sized([]byte{0, 18, 0, 1, 0, 0, 0, 1, 0, 50, 'x'})},
		{"bad header tags", sized(append(header(18, 3, false), 5, 0))},
		{"frame cut short", rawFrame(100, header(18, 1, false))},
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

// Serve returns once ctx ends, with connections open; goleak (TestMain) checks that no goroutine is left.
func TestServeReturnsWhenCtxEnds(t *testing.T) {
	s, err := New(Config{Catalog: newCatalog(), ClusterID: "c"})
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
	idle := dial(t, ln.Addr().String())
	apiVersions(t, idle)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after its context ended")
	}
	if !idle.closed() {
		t.Error("connections left open")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
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
