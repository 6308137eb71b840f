package groups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Observer is told of every group request answered. metrics.Groups
// implements it; it must be safe for concurrent use and must not block.
type Observer interface {
	// Forwarded is one request answered: api is its Kafka name
	// (kmsg.NameForKey), errName the Kafka name of the answer's first
	// error ("NONE": none), reached whether the upstream answered it
	// (false: kfollower answered COORDINATOR_NOT_AVAILABLE itself), d the
	// time it took.
	Forwarded(api, errName string, reached bool, d time.Duration)
	// CommitAboveWatermark is one OffsetCommit partition whose offset is
	// past what kfollower serves of it (forwarded all the same).
	CommitAboveWatermark(topic string)
}

// Catalog is what kfollower serves, for the OffsetCommit check.
type Catalog interface {
	// HighWatermark is the served high watermark of a partition; ok is
	// false for one not served.
	HighWatermark(topic string, partition int32) (hw int64, ok bool)
	// TopicName is the served topic of an upstream topic id (OffsetCommit
	// v10+ names topics by id).
	TopicName(id [16]byte) (string, bool)
}

// Defaults for Config's zero values.
const (
	// DefaultLookupTimeout bounds one FindCoordinator upstream.
	DefaultLookupTimeout = 10 * time.Second
	// DefaultRateLimit is the least time between two warnings that the
	// upstream cannot be reached.
	DefaultRateLimit = 30 * time.Second
	// defaultRebalance is a SyncGroup's read timeout before the session
	// saw a JoinGroup: the Java consumer's max.poll.interval.ms.
	defaultRebalance = 5 * time.Minute
	// refreshEvery is the least time between two reads of the upstream's
	// ApiVersions.
	refreshEvery = 5 * time.Second
)

// Config configures a Forwarder.
type Config struct {
	// Client is how to reach the upstream cluster: seed brokers, TLS,
	// SASL, client id (kfollower's own). Required.
	Client []kgo.Opt
	// Catalog, if set, is checked against every OffsetCommit.
	Catalog Catalog
	// Observer, if set, is told of every request answered.
	Observer Observer
	// Logger gets the upstream's failures, at most one warning per
	// RateLimit. Nil: discarded.
	Logger *slog.Logger
	// LookupTimeout bounds finding a group's coordinator upstream.
	LookupTimeout time.Duration
	// RateLimit is the least time between two warnings.
	RateLimit time.Duration
}

// Forwarder forwards the group APIs upstream; it is a server.Groups.
// Create it with New and Close it after the server has stopped.
type Forwarder struct {
	cfg Config
	log *slog.Logger
	obs Observer
	cl  *kgo.Client // shared: ApiVersions, Metadata, FindCoordinator

	mu       sync.Mutex
	coords   map[string]int32       // group → upstream coordinator
	versions map[int16]versionRange // nil until an upstream answered ApiVersions
	failed   bool                   // a dial or connection failed since the last refresh
	down     bool                   // the last group request could not reach upstream
	warned   time.Time              // the last "unreachable" warning
	muted    int                    // warnings left out since then
	refresh  chan struct{}          // asks the loop to read the upstream's versions again
	stop     context.CancelFunc
	done     chan struct{}
}

type versionRange struct{ min, max int16 }

var _ server.Groups = (*Forwarder)(nil)

// New makes a Forwarder and reads the upstream's ApiVersions, waiting at
// most until ctx ends (an upstream that does not answer yet is read
// again when a broker connection is made; until then every version kmsg
// knows is advertised). It starts a goroutine that Close ends.
func New(ctx context.Context, cfg Config) (*Forwarder, error) {
	if len(cfg.Client) == 0 {
		return nil, errors.New("groups: Config.Client is required")
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	f := &Forwarder{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, coords: map[string]int32{},
		refresh: make(chan struct{}, 1), done: make(chan struct{})}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if f.obs == nil {
		f.obs = nopObserver{}
	}
	cl, err := kgo.NewClient(f.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("groups: creating the upstream client: %w", err)
	}
	f.cl = cl
	if err := f.readVersions(ctx); err != nil {
		f.log.Warn("the upstream cluster did not answer ApiVersions; advertising every group API version kmsg knows until it does", "err", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	go f.loop(lctx)
	return f, nil
}

// Close stops the Forwarder and closes its upstream client. Sessions are
// closed by the server as their connections end, before it returns.
func (f *Forwarder) Close() {
	f.stop()
	<-f.done
	f.cl.Close()
}

// clientOpts are the upstream options plus the hooks that notice
// reconnects.
func (f *Forwarder) clientOpts() []kgo.Opt {
	opts := append([]kgo.Opt(nil), f.cfg.Client...)
	return append(opts, kgo.WithHooks(connHook{f}))
}

// connHook asks for the upstream's versions again after a broker
// connection failed or closed and another was made: the broker may have
// been upgraded or downgraded in between.
type connHook struct{ f *Forwarder }

func (h connHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.failed = true
		return
	}
	if f.failed || f.versions == nil {
		f.failed = false
		select {
		case f.refresh <- struct{}{}:
		default:
		}
	}
}

func (h connHook) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) {
	h.f.mu.Lock()
	h.f.failed = true
	h.f.mu.Unlock()
}

// loop reads the upstream's versions when a hook asks, at most once every
// refreshEvery (sessions come and go, and each connects).
func (f *Forwarder) loop(ctx context.Context) {
	defer close(f.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.refresh:
		}
		rctx, cancel := context.WithTimeout(ctx, f.cfg.LookupTimeout)
		if err := f.readVersions(rctx); err != nil && ctx.Err() == nil {
			f.log.Debug("reading the upstream's ApiVersions", "err", err)
		}
		cancel()
		t := time.NewTimer(refreshEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// readVersions asks every upstream broker for its ApiVersions and keeps,
// per key, the versions all of them take.
func (f *Forwarder) readVersions(ctx context.Context) error {
	ids, err := f.brokers(ctx)
	if err != nil {
		return err
	}
	var got map[int16]versionRange
	var errs []error
	for _, id := range ids {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kfollower", "1"
		kresp, err := f.cl.Broker(int(id)).Request(ctx, req)
		if err == nil {
			err = kerr.ErrorForCode(kresp.(*kmsg.ApiVersionsResponse).ErrorCode)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
			continue
		}
		these := map[int16]versionRange{}
		for _, k := range kresp.(*kmsg.ApiVersionsResponse).ApiKeys {
			these[k.ApiKey] = versionRange{k.MinVersion, k.MaxVersion}
		}
		if got == nil {
			got = these
			continue
		}
		for key, r := range got {
			o, ok := these[key]
			if !ok {
				delete(got, key)
				continue
			}
			got[key] = versionRange{max(r.min, o.min), min(r.max, o.max)}
		}
	}
	if got == nil {
		return fmt.Errorf("no broker answered: %w", errors.Join(errs...))
	}
	f.mu.Lock()
	f.versions = got
	f.mu.Unlock()
	return nil
}

// brokers lists the upstream brokers' ids, from a Metadata request.
func (f *Forwarder) brokers(ctx context.Context) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	kresp, err := f.cl.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("upstream metadata: %w", err)
	}
	var ids []int32
	for _, b := range kresp.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// Versions is the range of key both kmsg and every upstream broker take;
// every version kmsg knows while the upstream's are unknown.
func (f *Forwarder) Versions(key int16) (int16, int16, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.versions == nil {
		return 0, req.MaxVersion(), true
	}
	r, ok := f.versions[key]
	lo, hi := max(r.min, 0), min(r.max, req.MaxVersion())
	if !ok || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

// Coordinator finds group's coordinator upstream (or has it cached). Only
// a lookup upstream is told to the Observer: a cached answer says nothing
// of whether the upstream answers now.
func (f *Forwarder) Coordinator(ctx context.Context, group string) error {
	f.mu.Lock()
	_, cached := f.coords[group]
	f.mu.Unlock()
	if cached {
		return nil
	}
	start := time.Now()
	_, code, reached, err := f.coordinator(ctx, group)
	if err != nil {
		code = kerr.CoordinatorNotAvailable.Code // what the client gets, unless the upstream refused
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
			code = ke.Code
		}
	}
	f.obs.Forwarded("FindCoordinator", server.ErrorName(code), reached, time.Since(start))
	return err
}

// coordinator is group's upstream coordinator. An error is for the client
// (as COORDINATOR_NOT_AVAILABLE); code is the error the client gets and
// reached whether the upstream answered.
func (f *Forwarder) coordinator(ctx context.Context, group string) (node int32, code int16, reached bool, err error) {
	f.mu.Lock()
	node, ok := f.coords[group]
	f.mu.Unlock()
	if ok {
		return node, 0, true, nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, f.cfg.LookupTimeout)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 0, group, []string{group}
	kresp, err := f.cl.Request(ctx, req)
	if err != nil {
		if parent.Err() == nil { // not the server shutting down
			f.unreachable("FindCoordinator", err)
		}
		return -1, kerr.CoordinatorNotAvailable.Code, false, fmt.Errorf("kfollower cannot reach the upstream cluster to find group %q's coordinator: %v", group, err)
	}
	resp := kresp.(*kmsg.FindCoordinatorResponse)
	code, msg := resp.ErrorCode, resp.ErrorMessage
	node = resp.NodeID
	for _, c := range resp.Coordinators {
		if c.Key == group {
			code, msg, node = c.ErrorCode, c.ErrorMessage, c.NodeID
		}
	}
	if code != 0 {
		text := ""
		if msg != nil {
			text = ": " + *msg
		}
		return -1, code, true, fmt.Errorf("the upstream cluster has no coordinator for group %q: %w%s", group, kerr.ErrorForCode(code), text)
	}
	f.reachable()
	f.mu.Lock()
	f.coords[group] = node
	f.mu.Unlock()
	return node, 0, true, nil
}

// forget drops group's cached coordinator if it is still node.
func (f *Forwarder) forget(group string, node int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.coords[group]; ok && n == node {
		delete(f.coords, group)
	}
}

// unreachable logs that the upstream could not be reached, at most once a
// RateLimit.
func (f *Forwarder) unreachable(api string, err error) {
	f.mu.Lock()
	f.down = true
	now := time.Now()
	if !f.warned.IsZero() && now.Sub(f.warned) < f.cfg.RateLimit {
		f.muted++
		f.mu.Unlock()
		return
	}
	muted := f.muted
	f.warned, f.muted = now, 0
	f.mu.Unlock()
	f.log.Warn("cannot reach the upstream cluster for consumer groups; group requests are answered COORDINATOR_NOT_AVAILABLE (assigned partitions are still served)",
		"api", api, "err", err, "warnings_left_out", muted)
}

// reachable logs, once, that the upstream answers again.
func (f *Forwarder) reachable() {
	f.mu.Lock()
	was := f.down
	f.down = false
	f.mu.Unlock()
	if was {
		f.log.Info("the upstream cluster answers group requests again")
	}
}

type nopObserver struct{}

func (nopObserver) Forwarded(string, string, bool, time.Duration) {}
func (nopObserver) CommitAboveWatermark(string)                   {}
