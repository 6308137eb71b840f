package fetcher

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DirectFetch configures the workers' own Fetch connections
// (Config.DirectFetch). It must connect as the Client does: the caller
// sets it only when it can say so here (plaintext or TLS, no SASL).
type DirectFetch struct {
	// TLS, when set, wraps each connection, as kgo.DialTLSConfig does.
	TLS *tls.Config
	// Dial dials a broker; nil is a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds a dial and its TLS handshake together
	// (kgo.DialTimeout); zero is 10 s, franz-go's default.
	DialTimeout time.Duration
	// ClientID goes in every request header (kgo.ClientID).
	ClientID string
	// SoftwareVersion is sent in ApiVersions (KIP-511); empty: "unknown".
	SoftwareVersion string
	// MaxResponseBytes refuses a larger response (kgo.BrokerMaxReadBytes);
	// zero is 100 MiB, franz-go's default.
	MaxResponseBytes int32
	// Backoff is how long to fetch through Client after fails dials (or
	// connections that failed before answering a Fetch) in a row, before
	// dialling again; nil is franz-go's default (retryBackoff in kgo's
	// config.go: 250 ms doubling to 5 s, jittered ±20%).
	Backoff func(fails int) time.Duration
}

// connIdle is how long a direct connection may go unused before it is
// closed and dialled again for the next Fetch, as kgo does to its own
// after ConnIdleTimeout (30 s by default, kgo's config.go; broker.go
// replaces an idle connection rather than reuse it). A broker closes a
// connection idle past connections.max.idle.ms (10 min by default,
// Kafka's Selector), unseen until the next write and read: a worker that
// sent nothing for that long (every partition fenced or backing off)
// would write its next Fetch on a closed connection, and, that
// connection having answered before, fail every partition in it.
const connIdle = 30 * time.Second

// kgoBackoff is franz-go's default retry backoff (kgo's config.go,
// retryBackoff), so that a broker we cannot dial is retried as franz-go
// would retry its own connection.
func kgoBackoff(fails int) time.Duration {
	const lo, hi = 250 * time.Millisecond, 5 * time.Second
	if fails <= 0 {
		return lo
	}
	if fails > 10 {
		return hi
	}
	d := time.Duration(float64(lo*time.Duration(1<<(fails-1))) * (0.8 + 0.4*rand.Float64()))
	return min(d, hi)
}

// directFetch is one worker's Fetch path to its broker: its own
// wire.FetchConn while one can be had, else franz-go's connection
// (fallback). It is used by the worker's Fetch goroutine alone, one
// request at a time (a worker has at most one Fetch in the air, and starts
// the next only after the last one landed, which orders the accesses), and
// closed by the worker once none is in the air.
type directFetch struct {
	broker   int32
	cfg      *DirectFetch
	addr     func() (string, bool) // the broker's address in the latest Metadata
	fallback requester
	now      func() time.Time
	log      func(level slog.Level, msg string, args ...any) // lines naming the broker

	conn *wire.FetchConn
	// answered: conn has answered a Fetch. A connection that fails
	// before its first answer counts as a failed dial: a listener that
	// wants SASL accepts the TCP connection and ApiVersions, then drops
	// the first Fetch (Kafka's SaslServerAuthenticator).
	answered bool
	usedAt   time.Time // conn was dialled or last ended a Fetch then (connIdle)
	fails    int       // dials failed in a row
	retryAt  time.Time // no dial before then: Fetches go through fallback
}

// fetchResult is what a Fetch brought back and through which connection.
type fetchResult struct {
	resp   kmsg.Response
	buf    *wire.FetchBuffer // the direct connection's buffer, nil through franz-go
	direct bool
	err    error
}

// fetch sends req on the direct connection, dialling it if there is none,
// or through fallback while it cannot be had. A connection whose broker's
// address has changed in Metadata, or that failed, is closed and dialled
// again; a dial that fails, or a connection that fails before its first
// answer, falls back for the request and backs off before the next dial.
func (d *directFetch) fetch(ctx context.Context, req *kmsg.FetchRequest, sink wire.RecordsSink) fetchResult {
	addr, known := d.addr()
	if d.conn != nil {
		switch err := d.conn.Err(); {
		case err != nil:
			d.drop(err)
		case !known || d.conn.Addr() != addr:
			d.log(slog.LevelInfo, "broker's address changed; dialling its new one", "was", d.conn.Addr(), "address", addr)
			d.drop(nil)
		case d.now().Sub(d.usedAt) > connIdle:
			d.log(slog.LevelDebug, "connection idle; dialling a new one", "address", d.conn.Addr(), "idle", d.now().Sub(d.usedAt))
			d.drop(nil)
		}
	}
	if d.conn == nil && known && !d.now().Before(d.retryAt) {
		c, err := wire.DialFetchConn(ctx, addr, wire.FetchConnConfig{
			Dial: d.cfg.Dial, DialTimeout: d.cfg.DialTimeout, TLS: d.cfg.TLS, ClientID: d.cfg.ClientID,
			SoftwareVersion: d.cfg.SoftwareVersion, MaxResponseBytes: d.cfg.MaxResponseBytes,
		})
		if err != nil {
			if ctx.Err() != nil {
				return fetchResult{err: ctx.Err()}
			}
			d.failed(err)
		} else {
			d.conn, d.answered, d.usedAt = c, false, d.now()
		}
	}
	if d.conn == nil {
		resp, err := d.fallback.Request(ctx, req)
		return fetchResult{resp: resp, err: err}
	}
	resp, buf, err := d.conn.FetchStreaming(ctx, req, sink)
	d.usedAt = d.now()
	if err == nil {
		if !d.answered {
			d.answered, d.fails = true, 0
			d.log(slog.LevelInfo, "fetching on a connection of its own", "address", d.conn.Addr(), "fetch_version", d.conn.Version())
		}
		return fetchResult{resp: resp, buf: buf, direct: true}
	}
	if ctx.Err() != nil || d.answered {
		// A connection that worked and broke (the broker restarted, a
		// timeout): the request fails as it would on franz-go's
		// connection, and the next one dials again at once.
		return fetchResult{direct: true, err: err}
	}
	// Never answered: not a connection this broker serves us on. The
	// request goes through franz-go instead (a Fetch is a read: sent again
	// it changes nothing but a KIP-227 session's epoch, which the session
	// recovers from), and the next dial waits for the backoff.
	d.drop(err)
	resp2, err := d.fallback.Request(ctx, req)
	return fetchResult{resp: resp2, err: err}
}

// drop closes the connection; err is why, nil for a changed address.
func (d *directFetch) drop(err error) {
	_ = d.conn.Close()
	d.conn = nil
	if err != nil && !d.answered {
		d.failed(err)
	}
}

// failed counts a failed dial and starts its backoff.
func (d *directFetch) failed(err error) {
	d.fails++
	backoff := d.cfg.Backoff
	if backoff == nil {
		backoff = kgoBackoff
	}
	wait := backoff(d.fails)
	d.retryAt = d.now().Add(wait)
	level := slog.LevelWarn
	if d.fails > 1 {
		level = slog.LevelDebug // said once per run of failures
	}
	d.log(level, "cannot fetch on a connection of its own; fetching through the client's until the next try",
		"err", err, "failures", d.fails, "retry_in", wait)
}

// close closes the connection, if any; the worker calls it once no
// request is in the air.
func (d *directFetch) close() {
	if d != nil && d.conn != nil {
		_ = d.conn.Close()
		d.conn = nil
	}
}

// newDirectFetch is broker id's Fetch path for a worker, nil without
// Config.DirectFetch.
func (m *Manager) newDirectFetch(id int32, fallback requester) *directFetch {
	if m.cfg.DirectFetch == nil {
		return nil
	}
	logger := m.cfg.Logger.With("broker", id)
	return &directFetch{
		broker: id, cfg: m.cfg.DirectFetch, fallback: fallback, now: m.cfg.Now,
		addr: func() (string, bool) { return m.brokerAddr(id) },
		log: func(level slog.Level, msg string, args ...any) {
			logger.Log(context.Background(), level, msg, args...)
		},
	}
}

// setBrokerAddrs records the brokers' addresses a Metadata answer names,
// for the workers' own Fetch connections (directFetch): no request of its
// own per dial.
func (m *Manager) setBrokerAddrs(bs []kmsg.MetadataResponseBroker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.addrs == nil {
		m.addrs = make(map[int32]string, len(bs))
	}
	for _, b := range bs {
		m.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
}

// brokerAddr is broker id's address in the latest Metadata that named it.
func (m *Manager) brokerAddr(id int32) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.addrs[id]
	return a, ok
}

// bufferHook is told of every buffer a direct connection's response came
// in, as a worker takes it and as it releases it (Manager.buffers): the
// tests count and poison them.
type bufferHook interface {
	taken(b *wire.FetchBuffer)
	released(b *wire.FetchBuffer)
}
