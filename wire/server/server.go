package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/kfollower/kfollower/wire/batch"
)

// Log is the read side of one partition's log: all the server reads, and
// nothing that could change it. *storage.Log and *storage.View satisfy it
// (storage.Reader documents each method); every method is safe for
// concurrent use.
type Log interface {
	// Read returns whole batches from the one holding offset (or the first
	// after it), at most maxBytes of them but at least one, nil at the log
	// end, and an error outside [LogStartOffset, LogEndOffset] or for a
	// batch that fails its CRC.
	Read(offset int64, maxBytes int) ([]byte, error)
	// ReadSection is what Fetch sends: whole batches from the one holding
	// offset (or the first after it), all from one segment, none with a
	// base offset at or past end, at most maxBytes of them but the first
	// whatever its size when minOne is set; next is the offset after the
	// last. A nil Section when no batch fits. Not CRC-checked, as Kafka's
	// broker does not check what it sends (FileRecords.slice): the
	// batches were checked on append, and clients check them.
	ReadSection(offset int64, maxBytes int, end int64, minOne bool) (_ Section, next int64, _ error)
	// LogStartOffset is the first offset the log holds.
	LogStartOffset() int64
	// LogEndOffset is the offset after the last stored batch.
	LogEndOffset() int64
	// DurableEnd is the end that survives a crash; the server serves no
	// further (it is the high watermark).
	DurableEnd() int64
	// LatestEpoch is the newest epoch of the leader-epoch cache.
	LatestEpoch() (epoch int32, ok bool)
	// EndOffsetForEpoch is LeaderEpochFileCache.endOffsetFor(epoch,
	// LogEndOffset) over the cache (docs/kafka.md §3.1).
	EndOffsetForEpoch(epoch int32) (found int32, end int64)
	// LastStableOffset is what read_committed is served up to
	// (UnifiedLog.lastStableOffset), at most DurableEnd.
	LastStableOffset() int64
	// AbortedTransactions lists the aborted transactions that may hold
	// records in [from, to), from the .txnindex files
	// (UnifiedLog.collectAbortedTransactions).
	AbortedTransactions(from, to int64) []AbortedTxn
}

// AbortedTxn is one entry of a FetchResponse's AbortedTransactions. It is
// the same unnamed struct type storage.AbortedTxn names, so *storage.Log
// satisfies Log without this package importing storage.
type AbortedTxn = struct {
	ProducerID  int64
	FirstOffset int64
}

// Section is a run of whole batches of a log's file, sent without being
// read into this process where the platform allows (sendfile). It is the
// same unnamed interface type storage.Section names, as AbortedTxn is.
type Section = interface {
	// Len is the section's size in bytes.
	Len() int
	// Send writes the bytes [from, to) of the section to w.
	Send(w io.Writer, from, to int) error
	// ReadAt reads bytes of the section into p from its byte off.
	ReadAt(p []byte, off int64) (int, error)
	// Stale reports whether the log may have changed the section's bytes
	// since it was taken (a truncation began).
	Stale() bool
}

// Topic is one served topic, as Metadata lists it.
type Topic struct {
	Name string
	// ID is the upstream topic id (the 16 bytes of partition.metadata), so
	// a client's topic ids stay valid between the cluster and this copy.
	ID [16]byte
	// Partitions is the upstream partition count: partitions 0 to
	// Partitions-1 exist, whether or not the Catalog serves each one yet.
	Partitions int32
}

// Catalog is what the server serves. It must be safe for concurrent use.
type Catalog interface {
	// Topics lists the served topics, in any order.
	Topics() []Topic
	// Partition is one partition's log and its served leader epoch (it
	// must never go down; the fetcher persists it and raises it on every
	// local truncation, during which the partition is not served). ok is false for a
	// partition that is not served (yet, or any more): a partition of a
	// listed topic then answers LEADER_NOT_AVAILABLE in Metadata and
	// NOT_LEADER_OR_FOLLOWER elsewhere, as a broker answers for a
	// partition it does not host.
	Partition(topic string, partition int32) (log Log, servedEpoch int32, ok bool)
}

// Defaults, each Kafka's for the broker setting named.
const (
	// DefaultMaxRequestBytes is socket.request.max.bytes.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultFetchMaxBytes is fetch.max.bytes.
	DefaultFetchMaxBytes = 55 << 20
	// DefaultIdleTimeout is connections.max.idle.ms.
	DefaultIdleTimeout = 10 * time.Minute
)

// Config configures a Server. Zero values take the defaults above.
type Config struct {
	// NodeID is this broker's id in Metadata and DescribeCluster.
	NodeID int32
	// Advertise is the "host:port" clients are told to connect to. Empty:
	// the listener's own address, which must then not be a wildcard.
	Advertise string
	// ClusterID is this copy's own cluster id (not the upstream one).
	ClusterID string
	// Catalog is what is served. Required.
	Catalog Catalog

	// MaxRequestBytes caps a request's size; a larger frame closes the
	// connection before its body is read.
	MaxRequestBytes int32
	// FetchMaxBytes caps a Fetch response's records (KIP-74).
	FetchMaxBytes int32
	// IdleTimeout closes a connection that sends nothing for this long,
	// and bounds the time to read one request or write one response.
	IdleTimeout time.Duration

	// Decompress, if set, decompresses a batch's records (codec from its
	// attributes), for ListOffsets by timestamp and max timestamp, which
	// must look at records. Nil: gzip only (the standard library's);
	// another codec's batch is answered by its base offset, which may be
	// earlier than the record Kafka would name, never later.
	// kgo.DefaultDecompressor().Decompress fits after a conversion.
	Decompress func(codec batch.Compression, data []byte) ([]byte, error)
	// Groups, if set, forwards the consumer-group APIs upstream
	// (groups.go). Nil: they are not served and FindCoordinator refuses
	// groups.
	Groups Groups
	// Logger gets connection errors and the audit lines. Nil: discarded.
	Logger *slog.Logger

	// TLS, if set, makes every connection TLS, as Kafka's SSL and
	// SASL_SSL listeners: the handshake comes first, within IdleTimeout.
	// With ClientAuth tls.RequireAndVerifyClientCert it is mutual TLS,
	// and the client certificate names the principal (through
	// CertPrincipal) unless SASL does.
	TLS *tls.Config
	// CertPrincipal maps a verified client certificate to its principal;
	// an error fails the connection's authentication. Nil: User:<the
	// subject's RFC 2253 name>, Kafka's DEFAULT rule.
	CertPrincipal func(*x509.Certificate) (string, error)
	// SASL, if set, makes every connection authenticate (SaslHandshake,
	// then SaslAuthenticate, KIP-152) before any request but ApiVersions;
	// the principal is then User:<the SASL user>.
	SASL authz.Authenticator
	// Authorizer, if set, decides what each principal may describe and
	// read (docs of authorize.go). Nil: every client may read every
	// served topic, as from a broker without an authorizer.
	Authorizer authz.Authorizer

	// MaxConnections and MaxConnectionsPerIP cap the connections open at
	// once, in total and from one client IP (Kafka's max.connections and
	// max.connections.per.ip); one above either is closed as it is
	// accepted. Zero: no cap.
	MaxConnections      int
	MaxConnectionsPerIP int
	// MaxAuthBytes caps a request's size before a SASL connection has
	// authenticated (sasl.server.max.receive.size).
	MaxAuthBytes int32
	// FailedAuthDelay is how long a failed authentication's answer is
	// held back before the connection closes
	// (connection.failed.authentication.delay.ms), so that guessing
	// passwords is slow. Zero: 100ms, Kafka's default; negative: none.
	FailedAuthDelay time.Duration

	// Observer is told about connections, requests, authentications and
	// denials, for metrics. Nil: nobody.
	Observer Observer
}

// Server answers the Kafka protocol over a Catalog. Create it with New.
type Server struct {
	cfg    Config
	log    *slog.Logger
	audit  auditLog
	obs    Observer
	waits  waiters
	quotas quotas
}

// New checks cfg and returns a Server; call Serve to accept connections.
func New(cfg Config) (*Server, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("server: Config.Catalog is required")
	}
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("server: node id %d is negative", cfg.NodeID)
	}
	if cfg.Advertise != "" {
		if _, _, err := splitHostPort(cfg.Advertise); err != nil {
			return nil, fmt.Errorf("server: advertised address: %w", err)
		}
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxAuthBytes <= 0 {
		cfg.MaxAuthBytes = DefaultMaxAuthBytes
	}
	if cfg.FailedAuthDelay == 0 {
		cfg.FailedAuthDelay = 100 * time.Millisecond
	}
	if cfg.MaxConnections < 0 || cfg.MaxConnectionsPerIP < 0 {
		return nil, errors.New("server: negative connection limit")
	}
	if cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil {
		return nil, errors.New("server: Config.TLS has no certificate")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, obs: cfg.Observer}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	s.audit.log = s.log
	return s, nil
}

// Notify wakes the Fetch requests waiting on topic-partition, which read
// it again. Call it whenever what the partition serves may have changed:
// DurableEnd moved, the log was truncated or its start moved, the served
// epoch changed, or the partition stopped being served. It never blocks.
func (s *Server) Notify(topic string, partition int32) {
	s.waits.notify(topicPartition{topic, partition})
}

// broker is the address this server advertises.
type broker struct {
	host string
	port int32
}

func splitHostPort(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("%q: port must be 1-65535", addr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: no host", addr)
	}
	return host, int32(p), nil
}

// advertised is what Metadata names for connections from ln.
func (s *Server) advertised(ln net.Listener) (broker, error) {
	addr := s.cfg.Advertise
	if addr == "" {
		addr = ln.Addr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
				return broker{}, fmt.Errorf("server: listening on %s: set Config.Advertise, a wildcard address cannot be advertised", addr)
			}
		}
	}
	host, port, err := splitHostPort(addr)
	if err != nil {
		return broker{}, fmt.Errorf("server: advertised address: %w", err)
	}
	return broker{host, port}, nil
}

// Serve accepts connections on ln and answers each on a goroutine of its
// own until ctx ends; then it closes ln and every connection and returns
// nil once all their goroutines have ended. It returns an error, after the
// same cleanup, when ln fails for good. Serve may run on several
// listeners at once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	adv, err := s.advertised(ln)
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	conns := &connSet{m: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// The end of ctx (or of Serve) closes the listener, which ends
	// Accept, and every connection, which ends their reads.
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		ln.Close()
		conns.closeAll()
	}()

	delay := time.Duration(0)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("server: accepting on %s: %w", ln.Addr(), err)
			}
			// Out of file descriptors and the like: back off as
			// net/http's Server.Serve does, and keep serving.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting a connection", "listener", ln.Addr().String(), "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		delay = 0
		host := remoteHost(c)
		if reason := s.acquire(host); reason != "" {
			s.obs.Rejected(reason)
			s.log.Debug("connection refused", "remote", c.RemoteAddr().String(), "reason", reason)
			c.Close()
			continue
		}
		if !conns.add(c) {
			s.release(host)
			c.Close()
			return nil
		}
		s.obs.Opened()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.obs.Closed()
			defer s.release(host)
			defer conns.remove(c)
			newConn(s, c, adv, host).serve(ctx)
		}()
	}
}

// connSet is the open connections of one Serve, so that its end can close
// them all.
type connSet struct {
	mu     sync.Mutex
	m      map[net.Conn]struct{}
	closed bool
}

func (cs *connSet) add(c net.Conn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return false
	}
	cs.m[c] = struct{}{}
	return true
}

func (cs *connSet) remove(c net.Conn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.m, c)
}

func (cs *connSet) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for c := range cs.m {
		c.Close()
	}
}
