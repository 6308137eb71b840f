package wire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchConn is a connection of its own to one broker that carries Fetch
// requests alone, one at a time, and reads each response into a buffer it
// reuses once the caller releases it. franz-go reads every response into
// a newly allocated buffer (brokerCxn.readSizeAndBody): during a catch-up,
// a zeroed 16-24 MiB buffer per Fetch response, about a tenth of the
// copy's CPU (BenchmarkFetchResponse). The records of a response point
// into its buffer, so the caller releases it (FetchBuffer.Release) once it
// has appended them, and not before.
//
// It speaks plaintext or TLS, without SASL: a cluster that needs SASL is
// fetched from through franz-go's connections, as everything else is.
// Any failure (dial, TLS, ApiVersions, a write or read, a response that
// cannot be decoded, the context ending mid-request) closes it for good;
// the owner dials a new one or falls back to franz-go.
//
// It is safe for concurrent use, but serialises requests: a broker answers
// a connection's requests in order (Kafka's SocketServer mutes a channel
// until its response is sent), and a fetcher has one Fetch in the air per
// broker.
type FetchConn struct {
	conn     net.Conn
	addr     string
	version  int16 // of Fetch: the highest both sides speak
	maxRead  int32
	overhead time.Duration
	format   *kmsg.RequestFormatter

	mu   sync.Mutex // held for a request's write and read
	corr int32
	// sink is FetchStreaming's, for the request under way; under mu.
	sink     RecordsSink
	wbuf     []byte
	throttle time.Time // the broker's throttle ends then (KIP-219)
	// failed is set once it failed; every later request fails with it.
	// Atomic, so that Err does not wait for a long poll.
	failed atomic.Pointer[error]

	freeMu sync.Mutex
	free   [][]byte // released buffers, reused by size
}

// FetchConnConfig configures DialFetchConn.
type FetchConnConfig struct {
	// Dial dials the broker; nil is a net.Dialer. Its context ends
	// after DialTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds the dial and the TLS handshake together, as
	// kgo.DialTimeout does (kgo dials TLS with a tls.Dialer over a
	// net.Dialer of that timeout, client.go); zero is 10 s, its default.
	// Without it a broker whose listen backlog completes the TCP
	// connect but that never answers the ClientHello (hung, or a proxy
	// whose backend is down) holds the dial for good. ApiVersions is
	// bounded by Overhead, as kgo's is by RequestTimeoutOverhead.
	DialTimeout time.Duration
	// TLS, when set, wraps the connection (its ServerName defaults to
	// the address's host).
	TLS *tls.Config
	// ClientID goes in every request header, as franz-go's kgo.ClientID.
	ClientID string
	// SoftwareName and SoftwareVersion are sent in ApiVersions v3+
	// (KIP-511); the broker requires them to be non-empty, of letters,
	// digits, '-' and '.', beginning and ending with a letter or digit:
	// what is not is made so (softwareField). Empty: "kfollower" and
	// "unknown".
	SoftwareName, SoftwareVersion string
	// MaxResponseBytes refuses a response larger than this (franz-go's
	// kgo.BrokerMaxReadBytes, 100 MiB by default there); zero is 100 MiB.
	MaxResponseBytes int32
	// Overhead is how long past the Fetch's MaxWaitMillis a response
	// may take before the connection is given up (franz-go's
	// RequestTimeoutOverhead); zero is 10 s.
	Overhead time.Duration
}

// keep is how many released buffers a connection keeps: a fetcher holds
// at most two responses per broker (the one being appended, the one in
// the air).
const keep = 2

// A released buffer larger than shrinkAbove and more than shrinkRatio
// times the response to be read is let go rather than reused: once caught
// up, a broker answers long polls of a few KiB, and the catch-up's 64 MiB
// buffers kept for good would be most of an idle process's memory. While
// the answers stay large (a catch-up) every buffer is reused.
const (
	shrinkAbove = 1 << 20
	shrinkRatio = 8
)

// minFetchVersion is the oldest Fetch kfollower speaks (v4 brought
// read_uncommitted and the last stable offset; versions_test.go covers
// from it).
const minFetchVersion = 4

// errFetchConnClosed fails the requests of a closed connection.
var errFetchConnClosed = errors.New("fetch connection closed")

// DialFetchConn dials addr and asks it for its API versions; it fails if
// the broker's Fetch versions and ours do not meet.
func DialFetchConn(ctx context.Context, addr string, cfg FetchConnConfig) (*FetchConn, error) {
	conn, err := dialTLS(ctx, addr, cfg)
	if err != nil {
		return nil, err
	}
	c := &FetchConn{conn: conn, addr: addr, maxRead: cfg.MaxResponseBytes, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID))}
	if c.maxRead <= 0 {
		c.maxRead = 100 << 20
	}
	if c.overhead = cfg.Overhead; c.overhead <= 0 {
		c.overhead = 10 * time.Second
	}
	v, err := c.fetchVersion(ctx, cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("fetch connection to %s: %w", addr, err)
	}
	c.version = v
	return c, nil
}

// dialTLS dials addr and, with cfg.TLS, completes the TLS handshake, all
// within cfg.DialTimeout.
func dialTLS(ctx context.Context, addr string, cfg FetchConnConfig) (net.Conn, error) {
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fetch connection to %s: dialing: %w", addr, err)
	}
	if cfg.TLS == nil {
		return conn, nil
	}
	tc := cfg.TLS.Clone()
	if tc.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tc.ServerName = host
		}
	}
	t := tls.Client(conn, tc)
	if err := t.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("fetch connection to %s: TLS handshake: %w", addr, err)
	}
	return t, nil
}

// fetchVersion asks ApiVersions, v3 first and v0 if the broker does not
// speak v3 (it then answers in v0 with UNSUPPORTED_VERSION, KIP-511), as
// franz-go's brokerCxn.requestAPIVersions does.
func (c *FetchConn) fetchVersion(ctx context.Context, cfg FetchConnConfig) (int16, error) {
	name, version := softwareField(cfg.SoftwareName, "kfollower"), softwareField(cfg.SoftwareVersion, "unknown")
	for _, v := range []int16{3, 0} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = name, version
		// ApiVersions answers with a v0 response header whatever its
		// version (KIP-511), so the header has no tags.
		body, err := c.roundTrip(ctx, req, false, time.Now().Add(c.overhead))
		if err != nil {
			return 0, fmt.Errorf("ApiVersions v%d: %w", v, err)
		}
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.SetVersion(v)
		decodeErr := resp.ReadFrom(body)
		if resp.ErrorCode == kerr.UnsupportedVersion.Code && v > 0 {
			continue
		}
		if decodeErr != nil {
			return 0, fmt.Errorf("ApiVersions v%d: decoding the response: %w", v, decodeErr)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return 0, fmt.Errorf("ApiVersions v%d: %w", v, err)
		}
		for _, k := range resp.ApiKeys {
			if k.ApiKey != int16(kmsg.Fetch) {
				continue
			}
			hi := min(k.MaxVersion, (*kmsg.FetchRequest)(nil).MaxVersion())
			if hi < minFetchVersion || hi < k.MinVersion {
				return 0, fmt.Errorf("the broker speaks Fetch v%d to v%d, kfollower v%d to v%d", k.MinVersion, k.MaxVersion, minFetchVersion, (*kmsg.FetchRequest)(nil).MaxVersion())
			}
			return hi, nil
		}
		return 0, errors.New("the broker does not list Fetch in its ApiVersions")
	}
	return 0, errors.New("the broker refused ApiVersions v0")
}

// softwareField makes s a valid ApiVersions client software name or
// version, def if nothing of it is: the broker refuses the request
// (INVALID_REQUEST) unless it matches
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? (KIP-511,
// ApiVersionsRequest.isValid). Other characters become '-', as in
// "(devel)", Go's version of an unreleased build, which becomes "devel".
func softwareField(s, def string) string {
	alnum := func(r rune) bool {
		return r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}
	s = strings.Map(func(r rune) rune {
		if alnum(r) || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, s)
	s = strings.TrimFunc(s, func(r rune) bool { return !alnum(r) })
	if s == "" {
		return def
	}
	return s
}

// Version is the Fetch version the connection sends.
func (c *FetchConn) Version() int16 { return c.version }

// Addr is the address the connection was dialled to, so that its owner
// sees when the broker's advertised address has changed.
func (c *FetchConn) Addr() string { return c.addr }

// Close closes the connection; a request in the air fails.
func (c *FetchConn) Close() error {
	return c.conn.Close()
}

// Err is why the connection failed, nil while it works.
func (c *FetchConn) Err() error {
	if p := c.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// FetchBuffer holds the bytes a Fetch response was decoded from: its
// record batches point into them.
type FetchBuffer struct {
	c     *FetchConn
	whole []byte // the allocation, kept for the next response
	buf   []byte // the response body, in whole
}

// Bytes is the response body the records point into, nil once
// released; its length is what the response took on the wire, less its
// size and header.
func (b *FetchBuffer) Bytes() []byte {
	if b == nil {
		return nil
	}
	return b.buf
}

// Release gives the buffer back for a later response to be read into:
// nothing of the response it came with may be used after. Releasing twice
// or a nil buffer does nothing.
func (b *FetchBuffer) Release() {
	if b == nil || b.buf == nil {
		return
	}
	b.c.freeMu.Lock()
	defer b.c.freeMu.Unlock()
	if len(b.c.free) < keep {
		b.c.free = append(b.c.free, b.whole[:cap(b.whole)])
	}
	b.whole, b.buf = nil, nil
}

// buffer returns a released buffer of at least n bytes, or a new one.
func (c *FetchConn) buffer(n int) []byte {
	c.freeMu.Lock()
	defer c.freeMu.Unlock()
	dropped := false
	for i := 0; i < len(c.free); {
		b := c.free[i]
		if cap(b) < n {
			i++
			continue
		}
		// slices.Delete clears the vacated slot: the backing array
		// keeps no reference to a buffer let go.
		c.free = slices.Delete(c.free, i, i+1)
		if cap(b) > shrinkAbove && cap(b)/shrinkRatio > n {
			dropped = true // far too big: let the GC have it, look on
			continue
		}
		return b[:n]
	}
	if !dropped && len(c.free) > 0 {
		// Too small for what this broker now answers: let the GC have
		// one, so the kept ones follow the response sizes.
		c.free = slices.Delete(c.free, 0, 1)
	}
	return make([]byte, n)
}

// Fetch sends req at the connection's version and reads its response.
// The response's record batches point into the returned buffer, to be
// released once they are no longer used; on error there is none. The
// request's MaxWaitMillis plus the configured overhead bounds the round
// trip, and so does ctx: either ending it fails the connection.
func (c *FetchConn) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, *FetchBuffer, error) {
	return c.FetchStreaming(ctx, req, nil)
}

// FetchStreaming is Fetch that also shows sink, if not nil, each
// partition's records as they are read (RecordsSink), from Fetch v13 on;
// the response is decoded, and returned, as by Fetch.
func (c *FetchConn) FetchStreaming(ctx context.Context, req *kmsg.FetchRequest, sink RecordsSink) (*kmsg.FetchResponse, *FetchBuffer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sink = sink
	defer func() { c.sink = nil }()
	if err := c.Err(); err != nil {
		return nil, nil, err
	}
	if wait := time.Until(c.throttle); wait > 0 {
		// The broker mutes the connection until then anyway (KIP-219);
		// waiting here keeps the request's time bound honest.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
	req.SetVersion(c.version)
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis)*time.Millisecond + c.overhead)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(c.version)
	buf, err := c.exchange(ctx, req, req.IsFlexible(), deadline)
	if err == nil {
		if err = resp.ReadFrom(buf.buf); err != nil {
			err = fmt.Errorf("decoding the Fetch v%d response: %w", c.version, err)
		}
	}
	if err != nil {
		buf.Release()
		c.fail(err)
		return nil, nil, c.Err()
	}
	// Only from Fetch v8 does the broker answer first and then mute the
	// connection (KIP-219); before, it delayed the response itself, and
	// waiting again would throttle twice. kmsg's FetchResponse.Throttle
	// says so, and kgo waits only then.
	if ms, after := resp.Throttle(); ms > 0 && after {
		c.throttle = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	return resp, buf, nil
}

// fail closes the connection for good with err; c.mu is held.
func (c *FetchConn) fail(err error) {
	err = fmt.Errorf("%w (to %s): %w", errFetchConnClosed, c.addr, err)
	if c.failed.CompareAndSwap(nil, &err) {
		c.conn.Close()
	}
}

// roundTrip is exchange for the handshake's small responses, copied out
// of the pooled buffer.
func (c *FetchConn) roundTrip(ctx context.Context, req kmsg.Request, flexible bool, deadline time.Time) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf, err := c.exchange(ctx, req, flexible, deadline)
	if err != nil {
		c.fail(err)
		return nil, err
	}
	defer buf.Release()
	return append([]byte(nil), buf.buf...), nil
}

// exchange writes req and reads its response into a pooled buffer, past
// the response header (flexible: with tagged fields, KIP-482); c.mu is
// held.
func (c *FetchConn) exchange(ctx context.Context, req kmsg.Request, flexible bool, deadline time.Time) (*FetchBuffer, error) {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// A context that ends mid-request unblocks the write or read; the
	// connection is then failed (the response is still to come on it).
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	var buf *FetchBuffer
	err := c.write(req)
	if err == nil {
		buf, err = c.read(req)
	}
	if !stop() {
		buf.Release()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	body, err := skipHeader(buf.buf, flexible)
	if err != nil {
		buf.Release()
		return nil, err
	}
	buf.buf = body
	return buf, nil
}

// write sends req, framed with its size and request header.
func (c *FetchConn) write(req kmsg.Request) error {
	c.corr++
	c.wbuf = c.format.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return fmt.Errorf("writing %s v%d: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return nil
}

// read reads the response to the request just written into a pooled
// buffer, checking its correlation id.
func (c *FetchConn) read(req kmsg.Request) (*FetchBuffer, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, fmt.Errorf("reading the %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > c.maxRead {
		return nil, fmt.Errorf("reading the %s response: its size %d is not in [4, %d]", kmsg.NameForKey(req.Key()), n, c.maxRead)
	}
	whole := c.buffer(int(n))
	buf := &FetchBuffer{c: c, whole: whole, buf: whole}
	var err error
	if c.sink != nil && req.Key() == int16(kmsg.Fetch) && req.GetVersion() >= minStreamVersion {
		err = readStreaming(c.conn, buf.buf, c.corr, c.sink)
	} else {
		_, err = io.ReadFull(c.conn, buf.buf)
	}
	if err != nil {
		buf.Release()
		return nil, fmt.Errorf("reading the %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(buf.buf)); got != c.corr {
		buf.Release()
		return nil, fmt.Errorf("reading the %s response: correlation id %d, sent %d", kmsg.NameForKey(req.Key()), got, c.corr)
	}
	return buf, nil
}

// skipHeader returns the response body past the header: the correlation
// id, and for a flexible header its tagged fields (a count, then each
// tag's number, size and bytes; none is defined for responses).
func skipHeader(b []byte, flexible bool) ([]byte, error) {
	b = b[4:]
	if !flexible {
		return b, nil
	}
	tags, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("response header: bad tag count")
	}
	b = b[n:]
	for range tags {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("response header: bad tag")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("response header: bad tag size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}
