package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/authz"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedFrames is one request of each served key at each served version
// (kmsg defaults, so fields are valid), framed as a client sends it, and
// a few that are not requests.
func seedFrames() [][]byte {
	var out [][]byte
	for _, key := range slices.Sorted(func(yield func(int16) bool) {
		for k := range apis {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range versions(key) {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.FetchRequest:
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = "t", [16]byte{1, 0xf0, 15: 1}
				p := kmsg.NewFetchRequestTopicPartition()
				p.PartitionMaxBytes = 1 << 20
				t.Partitions = append(t.Partitions, p)
				r.Topics = append(r.Topics, t)
			case *kmsg.ListOffsetsRequest:
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = "t"
				t.Partitions = append(t.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
				r.Topics = append(r.Topics, t)
			}
			out = append(out, frame(1, req)[4:])
		}
	}
	return append(out, nil, []byte{0, 18, 0, 9, 0, 0, 0, 1, 0xff, 0xff}, []byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 3, 1, 2})
}

// FuzzParseRequest: any frame either fails to parse or parses to a
// request that, framed again, parses to the same request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, req, err := parseRequest(in)
		if err != nil {
			if req != nil {
				t.Fatal("a request with an error")
			}
			return
		}
		if h.key == apiVersionsKey && h.version > apis[apiVersionsKey].max {
			return // answered unparsed
		}
		body := req.AppendTo(nil)
		again, req2, err := parseRequest(reframe(h, req.IsFlexible(), body))
		if err != nil {
			t.Fatalf("%s v%d: re-encoded request does not parse: %v", kmsg.NameForKey(h.key), h.version, err)
		}
		if again.key != h.key || again.version != h.version || again.correlationID != h.correlationID {
			t.Fatalf("header %+v, then %+v", h, again)
		}
		if !bytes.Equal(req2.AppendTo(nil), body) {
			t.Fatalf("%s v%d: re-encoding changes the request", kmsg.NameForKey(h.key), h.version)
		}
	})
}

// reframe is a frame body (no size) with h's header and body.
func reframe(h requestHeader, flexible bool, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(h.key))
	b = binary.BigEndian.AppendUint16(b, uint16(h.version))
	b = binary.BigEndian.AppendUint32(b, uint32(h.correlationID))
	if h.clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*h.clientID)))
		b = append(b, *h.clientID...)
	}
	if flexible {
		b = append(b, 0)
	}
	return append(b, body...)
}

// FuzzAnswer: any request that parses is answered without a panic, and the
// answer decodes as the response to that request (or the connection is
// closed, for an acks=0 produce).
func FuzzAnswer(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	cat := newCatalog()
	cat.add("t", 1, 2)
	cat.serve("t", 0, openLog(f, "t", 0, true, run(0, 0, 3, 2), stamped(6, 1, 2, 5000)), 1)
	s, err := New(Config{Catalog: cat, ClusterID: "c", Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	cc := &conn{s: s, adv: broker{"localhost", 9092}}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, req, err := parseRequest(in)
		if err != nil {
			return
		}
		if r, ok := req.(*kmsg.FetchRequest); ok {
			r.MaxWaitMillis = 0 // no long polls here
		}
		resp, err := apis[h.key].handle(context.Background(), cc, req)
		if err != nil {
			return
		}
		out := appendResponse(nil, h.correlationID, resp)
		if int(binary.BigEndian.Uint32(out)) != len(out)-4 || int32(binary.BigEndian.Uint32(out[4:])) != h.correlationID {
			t.Fatal("bad response framing")
		}
		body := out[8:]
		if resp.IsFlexible() && h.key != apiVersionsKey {
			if body, err = skipTags(body); err != nil {
				t.Fatal(err)
			}
		}
		back := req.ResponseKind()
		back.SetVersion(resp.GetVersion())
		if err := back.ReadFrom(body); err != nil {
			t.Fatalf("%s v%d: the answer does not decode: %v", kmsg.NameForKey(h.key), resp.GetVersion(), err)
		}
	})
}

// panicLog counts the Error lines, which only a recovered panic writes.
type panicLog struct {
	slog.Handler
	n *atomic.Int32
}

func (h panicLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.n.Add(1)
	}
	return nil
}
func (h panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (h panicLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h panicLog) WithGroup(string) slog.Handler            { return h }

// FuzzSASLConn: whatever bytes a client sends to a connection that must
// authenticate, the connection neither panics nor outlives the client,
// and the bytes authenticate no one (they hold no password).
func FuzzSASLConn(f *testing.F) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("n,,n=alice,r=abcdefgh")
	plainHS := kmsg.NewPtrSASLHandshakeRequest()
	plainHS.Mechanism = "PLAIN"
	f.Add(append(frame(1, hs), frame(2, auth)...))
	f.Add(append(frame(1, plainHS), 0, 0, 0, 5, 0, 'a', 0, 'b', 'c'))
	f.Add(append(frame(1, kmsg.NewPtrApiVersionsRequest()), frame(2, kmsg.NewPtrMetadataRequest())...))
	for _, s := range seedFrames() {
		f.Add(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
	}
	creds, err := authz.ParseCredentials("c", []byte("alice password=alice-pw\n"))
	if err != nil {
		f.Fatal(err)
	}
	var panics atomic.Int32
	s, err := New(Config{Catalog: newCatalog(), ClusterID: "c", SASL: creds, FailedAuthDelay: -1,
		IdleTimeout: 10 * time.Second, Logger: slog.New(panicLog{n: &panics})})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, cl := net.Pipe()
		cc := newConn(s, srv, broker{"localhost", 9092}, "127.0.0.1")
		done := make(chan struct{})
		go func() { defer close(done); cc.serve(context.Background()) }()
		go func() { io.Copy(io.Discard, cl) }()
		cl.Write(in)
		cl.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the connection outlived its client")
		}
		if panics.Load() > 0 {
			t.Fatal("a panic was recovered")
		}
		if cc.principal != authz.Anonymous {
			t.Fatalf("random bytes authenticated %s", cc.principal)
		}
	})
}
