package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"slices"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection. Its one goroutine reads a request,
// answers it and writes the answer before it reads the next, as Kafka's
// SocketServer mutes a channel while a request is in flight; so answers
// go out in request order without a queue.
type conn struct {
	s      *Server
	c      net.Conn
	adv    broker
	remote string
	host   string       // the client's IP, for ACL hosts and the per-IP limit
	frame  bytes.Buffer // the request being read, reused
	out    []byte       // the response being written, reused
	fetch  fetchFrame   // the Fetch answer being written, reused
	// fetchRecs are the records of the Fetch answer being made, by
	// partition in answer order (handleFetch), for answer to send.
	fetchRecs [][]Section
	groups    GroupSession // this connection's group forwarding, opened on first use (groups.go)

	// principal is who the client is: User:ANONYMOUS until a client
	// certificate or SASL names someone.
	principal string
	auth      authState
	exchange  authz.Exchange // the SASL exchange under way
	mechanism string
	// closeAfter, set by a handler, closes the connection once its
	// answer is written (a failed authentication).
	closeAfter error
}

func newConn(s *Server, c net.Conn, adv broker, host string) *conn {
	return &conn{s: s, c: c, adv: adv, remote: c.RemoteAddr().String(), host: host, principal: authz.Anonymous}
}

// serve answers requests until the client goes away, sends something that
// is not a request this server takes, or ctx ends; then it closes the
// connection. A panic in a handler closes this connection only.
func (cc *conn) serve(ctx context.Context) {
	defer func() { cc.c.Close() }()
	defer cc.closeGroups()
	defer func() {
		if r := recover(); r != nil {
			cc.s.log.Error("panic answering a request; closing the connection", "remote", cc.remote, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if err := cc.start(ctx); err != nil {
		cc.closing(err)
		return
	}
	for {
		frame, err := cc.readFrame()
		if err != nil {
			cc.closing(err)
			return
		}
		if cc.auth == authRawTokens {
			err = cc.rawToken(ctx, frame)
		} else {
			err = cc.answer(ctx, frame)
		}
		if err != nil {
			cc.closing(err)
			return
		}
		if cc.frame.Cap() > 1<<20 {
			cc.frame = bytes.Buffer{} // keep a large request's buffer no longer than it is needed
		}
	}
}

// closing logs why the connection ends, and counts bad input: a client
// that hangs up quietly, anything else (bad input, a refused request) at
// Info.
func (cc *conn) closing(err error) {
	if reason := badInput(err); reason != "" {
		cc.s.obs.BadInput(reason)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, errIdle) {
		cc.s.log.Debug("connection closed", "remote", cc.remote, "err", err)
		return
	}
	cc.s.log.Info("closing connection", "remote", cc.remote, "principal", cc.principal, "err", err)
}

// errIdle is a connection that sent nothing for IdleTimeout
// (connections.max.idle.ms): closed, as Kafka's Selector closes it.
var errIdle = errors.New("idle for too long")

// BadIdle counts the connections closed idle.
const BadIdle = "idle"

// badInput is the Observer reason for an error that closes a connection,
// "" for a client that hung up or a server that stopped.
func badInput(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, errIdle):
		return BadIdle
	case errors.Is(err, errFrameSize):
		return BadFrameSize
	case errors.Is(err, errMalformed), errors.Is(err, io.ErrUnexpectedEOF):
		return BadMalformed
	case errors.Is(err, errUnknownKey):
		return BadUnknownKey
	case errors.Is(err, errVersion):
		return BadVersion
	case errors.Is(err, errBeforeAuth):
		return BadBeforeAuth
	case errors.Is(err, errAuthFailed):
		return BadAuthFailed
	case errors.Is(err, errTLS):
		return BadTLS
	case errors.Is(err, errNotAnswered):
		return BadUnanswerable
	case errors.As(err, &ne) && ne.Timeout():
		return BadTimeout
	}
	return ""
}

// errFrameSize is a size prefix that is negative, too small for a header,
// or above Config.MaxRequestBytes: Kafka's NetworkReceive throws
// InvalidReceiveException and the channel is closed.
var errFrameSize = errors.New("invalid request size")

// readFrame reads one size-prefixed request. The body is read into a
// buffer that grows as bytes arrive, so a size prefix alone cannot make
// the server allocate MaxRequestBytes.
func (cc *conn) readFrame() ([]byte, error) {
	cc.c.SetReadDeadline(time.Now().Add(cc.s.cfg.IdleTimeout))
	var size [4]byte
	if got, err := io.ReadFull(cc.c, size[:]); err != nil {
		var ne net.Error
		if got == 0 && errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%w (%v)", errIdle, cc.s.cfg.IdleTimeout)
		}
		if got > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	limit, least := cc.s.cfg.MaxRequestBytes, int32(minHeaderSize)
	if cc.auth != authDone {
		// Before authentication a request is SASL's, and small
		// (SaslServerAuthenticator's saslAuthRequestMaxReceiveSize).
		limit = cc.s.cfg.MaxAuthBytes
	}
	if cc.auth == authRawTokens {
		least = 0 // a raw SASL token has no header, and may be empty
	}
	if n < least || n > limit {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", errFrameSize, n, limit)
	}
	cc.frame.Reset()
	if _, err := io.CopyN(&cc.frame, cc.c, int64(n)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading a %d-byte request: %w", n, err)
	}
	return cc.frame.Bytes(), nil
}

// answer parses one request, answers it and writes the answer. An error
// closes the connection.
func (cc *conn) answer(ctx context.Context, frame []byte) error {
	start := time.Now()
	if err := cc.mayAsk(frame); err != nil {
		return err
	}
	h, req, err := parseRequest(frame)
	if err != nil {
		return err
	}
	resp, err := apis[h.key].handle(ctx, cc, req)
	if err != nil {
		return fmt.Errorf("%s v%d (correlation id %d): %w", kmsg.NameForKey(h.key), h.version, h.correlationID, err)
	}
	var size int
	recs := cc.fetchRecs
	cc.fetchRecs = nil
	if f, ok := resp.(*kmsg.FetchResponse); ok && recs != nil && encodeFetch(&cc.fetch, h.correlationID, f, recs) {
		size = cc.fetch.size
		err = cc.writeFetch()
		cc.fetch.reset()
		clear(cc.fetch.pieces[:cap(cc.fetch.pieces)]) // no section outlives its answer
		clear(cc.fetch.chunks[:cap(cc.fetch.chunks)])
		clear(recs)
		cc.fetchRecs = recs[:0]
	} else {
		if f, ok := resp.(*kmsg.FetchResponse); ok && recs != nil {
			materialize(f, recs)
		}
		cc.out = appendResponse(cc.out[:0], h.correlationID, resp)
		size = len(cc.out)
		err = cc.write(ctx, cc.out)
	}
	if err != nil {
		return fmt.Errorf("writing the answer to %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	cc.s.obs.Request(h.key, errorCode(resp), time.Since(start), size)
	if cap(cc.out) > 1<<20 {
		cc.out = nil // keep a large answer's buffer no longer than it is needed
	}
	return cc.closeAfter
}

// writeFetch writes the Fetch answer in cc.fetch, within IdleTimeout.
func (cc *conn) writeFetch() error {
	cc.c.SetWriteDeadline(time.Now().Add(cc.s.cfg.IdleTimeout))
	return writeFrame(cc.c, &cc.fetch)
}

// write writes one answer, within IdleTimeout. An answer that ends the
// connection for a failed authentication is first held back
// FailedAuthDelay.
func (cc *conn) write(ctx context.Context, b []byte) error {
	if cc.closeAfter != nil && errors.Is(cc.closeAfter, errAuthFailed) && cc.s.cfg.FailedAuthDelay > 0 {
		t := time.NewTimer(cc.s.cfg.FailedAuthDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	cc.c.SetWriteDeadline(time.Now().Add(cc.s.cfg.IdleTimeout))
	_, err := cc.c.Write(b)
	return err
}

// requestHeader is Kafka's request header (RequestHeaderData): v1 is key,
// version, correlation id and a nullable client id; v2, for a flexible
// request, adds tagged fields. (v0, without the client id, is only for
// ControlledShutdown v0, which no broker has taken since Kafka 4.0.)
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// minHeaderSize is a v1 header with a null client id.
const minHeaderSize = 2 + 2 + 4 + 2

// Errors that close a connection, as in Kafka's SocketServer
// (Processor.parseRequestHeader, RequestContext.parseRequest): each is an
// InvalidRequestException there.
var (
	errUnknownKey  = errors.New("API key not served")
	errVersion     = errors.New("API version not served")
	errMalformed   = errors.New("malformed request")
	errNotAnswered = errors.New("request not answered")
)

// parseRequest splits a frame into its header and request. The key must
// be one this server registered and the version within its range; the
// exception is ApiVersions above its range, which is returned unparsed
// with that version set, for the handler to answer UNSUPPORTED_VERSION
// (RequestContext.parseRequest does not parse such a body either).
func parseRequest(frame []byte) (requestHeader, kmsg.Request, error) {
	var h requestHeader
	if len(frame) < minHeaderSize {
		return h, nil, fmt.Errorf("%w: %d bytes, a header needs %d", errMalformed, len(frame), minHeaderSize)
	}
	be := binary.BigEndian
	h.key = int16(be.Uint16(frame))
	h.version = int16(be.Uint16(frame[2:]))
	h.correlationID = int32(be.Uint32(frame[4:]))
	rest := frame[minHeaderSize:]
	if n := int16(be.Uint16(frame[8:])); n >= 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id of %d bytes, %d left", errMalformed, n, len(rest))
		}
		id := string(rest[:n])
		h.clientID, rest = &id, rest[n:]
	}
	a, ok := apis[h.key]
	if !ok {
		return h, nil, fmt.Errorf("%w: key %d", errUnknownKey, h.key)
	}
	req := kmsg.RequestForKey(h.key)
	if h.key == apiVersionsKey && h.version > a.max {
		req.SetVersion(h.version)
		return h, req, nil
	}
	if h.version < a.min || h.version > a.max {
		return h, nil, fmt.Errorf("%w: %s v%d (this server takes v%d-v%d)", errVersion, kmsg.NameForKey(h.key), h.version, a.min, a.max)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, fmt.Errorf("%w: %s v%d header: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section (KIP-482: an unsigned varint
// count, then per field an unsigned varint tag, size and that many bytes).
// No header tag means anything to this server.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[w:]
	for range n {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("bad tag size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// appendResponse appends a size-prefixed response: correlation id,
// response header v1's empty tag section if the response is flexible, and
// the body. ApiVersions' response header is always v0, whatever the
// version, so that a client that does not know the broker's versions yet
// can read it (ApiKeys.responseHeaderVersion).
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		dst = slices.Grow(dst, fetchSizeHint(f))
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// fetchSizeHint is at least the size appendResponse gives a Fetch answer:
// its record bytes plus a bound on every other field of the newest
// version. Growing the answer buffer to it at once replaces the copies of
// an append-grown buffer of up to FetchMaxBytes (about three times the
// answer's size for 55 MiB, in 1.25x steps), which took nearly half the
// server's CPU time in BenchmarkServe. Only the allocation depends on it:
// an answer above the hint grows as before.
func fetchSizeHint(r *kmsg.FetchResponse) int {
	// Size prefix, correlation id, header tags, throttle, error, session
	// id, the topics' and brokers' lengths and the body's tags (with
	// room for the unknown tags this server never sets: none).
	n := 64
	for _, b := range r.Brokers {
		n += 32 + len(b.Host) // node id, host, port, rack's length, tags
		if b.Rack != nil {
			n += len(*b.Rack)
		}
	}
	for _, t := range r.Topics {
		n += 32 + len(t.Topic) // name, topic id, partitions' length, tags
		for _, p := range t.Partitions {
			// Partition, error, high watermark, LSO, log start, the
			// aborted list's length, preferred replica, the records'
			// length, the DivergingEpoch, CurrentLeader and SnapshotId
			// tags (86 bytes at most), and per aborted transaction its
			// producer id, first offset and tags.
			n += 128 + len(p.RecordBatches) + 24*len(p.AbortedTransactions)
		}
	}
	return n
}

// apiKey is one key this server answers: its versions, min Kafka 4.x's
// oldest (KIP-896), max the newest kmsg encodes, and its handler.
type apiKey struct {
	min, max int16
	handle   func(ctx context.Context, cc *conn, req kmsg.Request) (kmsg.Response, error)
}

// apis holds every key served, filled by each NN_name.go's init through
// register; ApiVersions advertises exactly these.
var apis = map[int16]apiKey{}

func register(key, min int16, handle func(ctx context.Context, cc *conn, req kmsg.Request) (kmsg.Response, error)) {
	req := kmsg.RequestForKey(key)
	if req == nil || min < 0 || min > req.MaxVersion() {
		panic(fmt.Sprintf("server: registering key %d from v%d", key, min))
	}
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("server: key %d registered twice", key))
	}
	apis[key] = apiKey{min: min, max: req.MaxVersion(), handle: handle}
}
