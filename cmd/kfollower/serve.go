package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/groups"
	"github.com/kfollower/kfollower/metrics"
	"github.com/kfollower/kfollower/servecat"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// serveFlags binds the --serve settings.
func (c *config) serveFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Serve, "serve", c.Serve, "`address` to serve the local copy on as a read-only Kafka broker (host:port; :9092 binds loopback only, 0.0.0.0:9092 every interface, which needs client authentication or --serve-allow-anonymous; default: off)")
	fs.StringVar(&c.ServeAdvertise, "serve-advertise", c.ServeAdvertise, "`host:port` that Kafka clients are told to connect to (default: the --serve address, which then must name a host)")
	fs.IntVar(&c.ServeNodeID, "serve-node-id", c.ServeNodeID, "broker `id` the served one-broker cluster names")
	if c.ServeGroups == "" {
		c.ServeGroups = "off"
	}
	fs.Var(enumFlag{&c.ServeGroups, []string{"off", "upstream"}}, "serve-groups", "consumer groups on the served endpoint: `mode` off (refused: assign partitions) or upstream (group requests forwarded to the cluster, which keeps group state and committed offsets)")
	c.serveSecurityFlags(fs)
}

// checkServe validates the --serve settings without touching the network.
func (c *config) checkServe() error {
	if c.Serve == "" {
		if c.ServeAdvertise != "" || c.ServeNodeID != 0 {
			return errors.New("--serve-advertise and --serve-node-id need --serve")
		}
		if c.ServeGroups == "upstream" {
			return errors.New("--serve-groups upstream needs --serve")
		}
		return c.checkServeSecurity()
	}
	host, err := hostPort("--serve", c.Serve, true)
	if err != nil {
		return err
	}
	if c.ServeAdvertise != "" {
		if _, err := hostPort("--serve-advertise", c.ServeAdvertise, false); err != nil {
			return err
		}
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("--serve %s listens on every interface: give --serve-advertise HOST:PORT, the address clients are to connect to", c.Serve)
	}
	if c.ServeNodeID < 0 || c.ServeNodeID > 1<<31-1 {
		return fmt.Errorf("--serve-node-id %d: want 0 to 2147483647", c.ServeNodeID)
	}
	return c.checkServeSecurity()
}

// hostPort checks a host:port flag value; an empty host is allowed only
// for a listen address. It returns the host.
func hostPort(flagName, addr string, listen bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s %q: want host:port: %v", flagName, addr, err)
	}
	if host == "" && !listen {
		return "", fmt.Errorf("%s %q: no host", flagName, addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "0" && !listen {
		return "", fmt.Errorf("%s %q: bad port %q", flagName, addr, port)
	}
	return host, nil
}

// endpoint is the --serve listener and its server.
type endpoint struct {
	ln     net.Listener
	srv    *server.Server
	status serveStatus
	done   chan struct{}
	err    error // valid once done is closed
	cfg    *config
	logger *slog.Logger
	client *kgo.Client // the follower's, for --serve-acl-upstream
	acl    aclWatcher
	// fail stops the daemon when the server ends on its own.
	fail context.CancelFunc
	// fwd forwards group requests upstream (--serve-groups upstream);
	// closed once the server has stopped.
	fwd *groups.Forwarder
}

// serveStatus is the endpoint as /status shows it.
type serveStatus struct {
	Address    string `json:"address"`
	Advertised string `json:"advertised"`
	NodeID     int32  `json:"node_id"`
	ClusterID  string `json:"cluster_id"`
	Groups     string `json:"groups"` // --serve-groups
	// OpenConnections is the client connections open now.
	OpenConnections int            `json:"open_connections"`
	Security        securityStatus `json:"security"`
}

// listenServe binds the --serve address; it runs before the data dir is
// created, so a busy port leaves nothing behind. Nil without --serve.
func listenServe(cfg *config) (net.Listener, error) {
	if cfg.Serve == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", serveListen(cfg.Serve))
	if err != nil {
		return nil, fmt.Errorf("listening for Kafka clients (--serve) on %s: %w", serveListen(cfg.Serve), err)
	}
	return ln, nil
}

// newEndpoint makes the server over mgr's catalog; the cluster id is read
// from, or created in, the data dir, which must be locked. With
// --serve-groups upstream it forwards group requests to the cluster
// through clients made with upstream (the cluster's seeds, TLS and SASL),
// reporting to metrics on reg; client is the follower's, for
// --serve-acl-upstream.
func newEndpoint(ctx context.Context, cfg *config, ln net.Listener, mgr *fetcher.Manager, logger *slog.Logger, upstream []kgo.Opt, reg prometheus.Registerer, client *kgo.Client) (*endpoint, error) {
	id, err := loadClusterID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	adv := cfg.ServeAdvertise
	if adv == "" {
		// checkServe made sure the listen address is no wildcard; its
		// port is the bound one (":0" in tests).
		host, _, _ := net.SplitHostPort(serveListen(cfg.Serve))
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		adv = net.JoinHostPort(host, port)
	}
	var fwd *groups.Forwarder
	var gs server.Groups // nil unless forwarding: a typed nil would turn groups on
	if cfg.ServeGroups == "upstream" {
		// The daemon probed the cluster already; a cluster that stops
		// answering now delays the start at most this long.
		vctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		fwd, err = groups.New(vctx, groups.Config{
			Client:   upstream,
			Catalog:  servecat.New(mgr),
			Observer: metrics.NewGroups(reg),
			Logger:   logger.With("component", "groups"),
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("--serve-groups: %w", err)
		}
		gs = fwd
	}
	dec := kgo.DefaultDecompressor()
	if cfg.sec == nil { // run checked the config; a test may not have
		if err := cfg.checkServeSecurity(); err != nil {
			return nil, err
		}
	}
	slogger := logger.With("component", "serve")
	scfg := server.Config{
		NodeID: int32(cfg.ServeNodeID), Advertise: adv, ClusterID: id,
		Catalog: servecat.New(mgr),
		// ListOffsets by timestamp looks at the records of a compressed
		// batch; kgo decompresses every codec a batch may carry.
		Decompress: func(codec batch.Compression, data []byte) ([]byte, error) {
			return dec.Decompress(data, kgo.CompressionCodecType(codec))
		},
		Groups:   gs,
		Logger:   slogger,
		Observer: metrics.NewServeObserver(reg),
	}
	cfg.securityConfig(&scfg)
	srv, err := server.New(scfg)
	if err != nil {
		if fwd != nil {
			fwd.Close()
		}
		return nil, fmt.Errorf("--serve: %w", err)
	}
	for _, w := range cfg.securityWarnings() {
		slogger.Warn(w)
	}
	return &endpoint{ln: ln, srv: srv, fwd: fwd, done: make(chan struct{}), cfg: cfg, logger: slogger, client: client, status: serveStatus{
		Address: ln.Addr().String(), Advertised: adv, NodeID: int32(cfg.ServeNodeID), ClusterID: id, Groups: cfg.ServeGroups,
	}}, nil
}

// notify is fetcher.Config.Changed: it wakes the long polls on tp.
func (e *endpoint) notify(tp wire.TopicPartition) { e.srv.Notify(tp.Topic, tp.Partition) }

// run serves until ctx ends and returns the context the fetcher is to run
// under: it ends once the server has stopped, so no connection reads a log
// the fetcher's shutdown closes. If the listener fails for good, the
// fetcher is stopped too and e.err says why.
func (e *endpoint) run(ctx context.Context) context.Context {
	mctx, stopFetcher := context.WithCancel(context.WithoutCancel(ctx))
	if f := e.cfg.sec.acl; f != nil {
		e.acl.start(ctx, f, e.cfg.ServeACLReloadInterval, e.logger)
	}
	if u := e.cfg.sec.upstream; u != nil {
		e.acl.wg.Add(1)
		go func() {
			defer e.acl.wg.Done()
			u.run(ctx, e.client, e.logger)
		}()
	}
	go func() {
		defer close(e.done)
		defer stopFetcher()
		e.err = e.srv.Serve(ctx, e.ln)
		if e.fwd != nil {
			e.fwd.Close() // every connection, and so every group session, has ended
		}
		if e.err != nil && e.fail != nil {
			e.fail()
		}
	}()
	return mctx
}

// wait returns the server's error once it has stopped.
func (e *endpoint) wait() error {
	<-e.done
	e.acl.wg.Wait()
	if e.err != nil {
		return fmt.Errorf("serving Kafka clients on %s: %w", e.status.Address, e.err)
	}
	return nil
}

// clusterIDName is the file in the data dir holding the served cluster's
// id: the copy's own, not the upstream one, so a client never takes it for
// the cluster it follows.
const clusterIDName = "kfollower-cluster-id"

// loadClusterID reads the served cluster id from the data dir, or creates
// one (a random UUID in Kafka's 22-character base64url form, as
// Uuid.randomUuid().toString() gives) and writes it atomically.
func loadClusterID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, clusterIDName)
	b, err := os.ReadFile(path)
	if err == nil {
		id, ok := parseClusterIDFile(b)
		if !ok {
			return "", fmt.Errorf("cluster id file %s is corrupt (want \"0\\n<22-character base64url id>\\n\"); remove it to get a new cluster id", path)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading cluster id file: %w", err)
	}
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("generating a cluster id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(u[:])
	if err := writeFileAtomic(path, []byte("0\n"+id+"\n")); err != nil {
		return "", fmt.Errorf("writing cluster id file: %w", err)
	}
	return id, nil
}

func parseClusterIDFile(b []byte) (string, bool) {
	version, id, ok := strings.Cut(string(b), "\n")
	if !ok || version != "0" || !strings.HasSuffix(id, "\n") {
		return "", false
	}
	id = strings.TrimSuffix(id, "\n")
	u, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(u) != 16 {
		return "", false
	}
	return id, true
}

// writeFileAtomic replaces path with data: write a temporary file, fsync
// it, rename it over path, fsync the directory (Kafka's CheckpointFile).
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// statusFunc is what /status shows of e: nothing without --serve.
func (e *endpoint) statusFunc() func() *serveStatus {
	return func() *serveStatus {
		if e == nil {
			return nil
		}
		st := e.status
		st.OpenConnections = e.srv.OpenConnections()
		st.Security = e.cfg.securityStatus()
		return &st
	}
}
