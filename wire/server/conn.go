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
	"time"

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
	frame  bytes.Buffer // the request being read, reused
	out    []byte       // the response being written, reused
	groups GroupSession // this connection's group forwarding, opened on first use (groups.go)
}

func newConn(s *Server, c net.Conn, adv broker) *conn {
	return &conn{s: s, c: c, adv: adv, remote: c.RemoteAddr().String()}
}

// serve answers requests until the client goes away, sends something that
// is not a request this server takes, or ctx ends; then it closes the
// connection. A panic in a handler closes this connection only.
func (cc *conn) serve(ctx context.Context) {
	defer cc.c.Close()
	defer cc.closeGroups()
	defer func() {
		if r := recover(); r != nil {
			cc.s.log.Error("panic answering a request; closing the connection", "remote", cc.remote, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	for {
		frame, err := cc.readFrame()
		if err != nil {
			cc.closing(err)
			return
		}
		if err := cc.answer(ctx, frame); err != nil {
			cc.closing(err)
			return
		}
	}
}

// closing logs why the connection ends: a client that hangs up or idles
// out quietly, anything else (bad input, a refused request) at Info.
func (cc *conn) closing(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) {
		cc.s.log.Debug("connection closed", "remote", cc.remote, "err", err)
		return
	}
	cc.s.log.Info("closing connection", "remote", cc.remote, "err", err)
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
	if _, err := io.ReadFull(cc.c, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < minHeaderSize || n > cc.s.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", errFrameSize, n, cc.s.cfg.MaxRequestBytes)
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
	h, req, err := parseRequest(frame)
	if err != nil {
		return err
	}
	resp, err := apis[h.key].handle(ctx, cc, req)
	if err != nil {
		return fmt.Errorf("%s v%d (correlation id %d): %w", kmsg.NameForKey(h.key), h.version, h.correlationID, err)
	}
	cc.out = appendResponse(cc.out[:0], h.correlationID, resp)
	cc.c.SetWriteDeadline(time.Now().Add(cc.s.cfg.IdleTimeout))
	if _, err := cc.c.Write(cc.out); err != nil {
		return fmt.Errorf("writing the answer to %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	if cap(cc.out) > 1<<20 {
		cc.out = nil // keep a large Fetch answer's buffer no longer than it is needed
	}
	return nil
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
